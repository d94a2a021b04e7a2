import { existsSync } from "node:fs";
import { join } from "node:path";
import { isJobrtError } from "@jobrt/core";
import { describe, expect, test } from "vitest";
import { fetchImage } from "../src/fetch.js";
import { tempDir } from "../../../tests/helpers/tmp.js";

const HEX = "cd".repeat(32);

describe("fetchImage's failures are catalog errors", () => {
  test("skopeo copy of a layout that is not there: ERR_CONTAINER_IMAGE, the mark dropped", async () => {
    const store = tempDir("jobrt-fetch-");
    const missing = join(store, "no-such-layout");
    const e = await fetchImage({
      store,
      hex: HEX,
      digest: `sha256:${HEX}`,
      reference: `oci:${missing}:img`,
      source: `oci:${missing}:img`,
      checkLayoutDigest: true,
      globalFlags: [],
      copyFlags: [],
      public: false,
      mark: "test-mark",
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
      timeoutMs: 30_000,
    }).then(
      () => expect.fail("expected a rejection"),
      (error: unknown) => error,
    );
    expect(isJobrtError(e, "ERR_CONTAINER_IMAGE")).toBe(true);
    expect((e as Error).message).toMatch(/^skopeo copy failed: /);
    expect(existsSync(join(store, HEX))).toBe(false);
  });
});
