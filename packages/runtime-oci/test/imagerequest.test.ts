import { checkAccepted } from "@jobrt/core";
import { describe, expect, test } from "vitest";
import { ociPlugin } from "../src/plugin.js";
import { checkRequest } from "../src/validate.js";
import { imageArgs } from "../src/image/request.js";

describe("the container request", () => {
  const request = (o: Partial<Parameters<typeof checkRequest>[0]>) => ({
    volumes: [],
    modules: [],
    env: [],
    clearEnv: false,
    options: {},
    ...o,
  });
  test("--container-image (the image option) instead of a bundle; not both; no other option", () => {
    expect(checkRequest(request({ options: { image: ["docker://h.org/a:1"] } }), undefined)).toEqual([]);
    expect(() => checkRequest(request({ value: "/b", options: { image: ["docker://h.org/a:1"] } }), undefined)).toThrow(
      /either --container BUNDLE or --container-image/,
    );
    expect(() => checkRequest(request({ options: { image: ["a", "b"] } }), undefined)).toThrow(/given twice/);
    // Any other --container-opt key is refused by the host, from meta.accepts, before checkRequest runs.
    expect(() =>
      checkAccepted(
        ociPlugin.meta.type,
        ociPlugin.meta.accepts ?? [],
        request({ options: { image: ["x"], other: ["1"] } }),
      ),
    ).toThrow(
      /^--container-opt "other=1": runtime oci does not accept --container-opt \(it takes --container, --container-volume, --container-env, --container-workdir, --container-clearenv, --container-device, --container-opt image=\.\.\., --container-opt id=\.\.\.\)$/,
    );
    expect(() => checkRequest(request({}), undefined)).toThrow(/--container BUNDLE .* or --container-image REF/);
    // The cached config.json's process.args is the image's Entrypoint (@jobrt/images): each task's argv follows it.
    expect(imageArgs({ process: { args: ["/entry"] } }, ["a", "b"])).toEqual(["/entry", "a", "b"]);
  });
});
