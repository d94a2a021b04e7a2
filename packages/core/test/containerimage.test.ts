import { describe, expect, it } from "vitest";
import { IMAGE_OPTION_KEY, REQUEST_OPTIONS, containerImage, emptyRequest, isJobrtError } from "../src/index.js";

const withImage = (image: string[]) => ({ ...emptyRequest(), options: { [IMAGE_OPTION_KEY]: image } });

function thrown(f: () => unknown): unknown {
  try {
    f();
  } catch (e) {
    return e;
  }
  throw new Error("expected a throw");
}

describe("containerImage: the image a request names", () => {
  it("is the option table's --container-image key", () => {
    expect(REQUEST_OPTIONS.find((r) => r.name === "container-image")?.field).toBe(`options.${IMAGE_OPTION_KEY}`);
  });
  it("is undefined without a request, without the key, or with an empty list", () => {
    expect(containerImage(undefined, "runtime/x")).toBeUndefined();
    expect(containerImage(emptyRequest(), "runtime/x")).toBeUndefined();
    expect(containerImage(withImage([]), "runtime/x")).toBeUndefined();
  });
  it("is the one value given", () => {
    expect(containerImage(withImage(["docker://h.org/a:1"]), "runtime/x")).toBe("docker://h.org/a:1");
  });
  it.each([
    [["a", "b"], "--container-image given twice"],
    [[""], "--container-image: empty value"],
  ])("refuses %j in one ERR_CONTAINER_REQUEST naming the runtime and the option", (image, problem) => {
    const e = thrown(() => containerImage(withImage(image), "runtime/x"));
    expect(isJobrtError(e) && e.code).toBe("ERR_CONTAINER_REQUEST");
    expect((e as Error).message).toContain(problem);
    expect((e as Error).message).not.toContain("\n");
    expect(isJobrtError(e) && e.details).toMatchObject({ runtime: "runtime/x", key: "--container-image" });
  });
});
