import { defineProject } from "vitest/config";

// The supervisor and the file helper run as separate programs from dist/, so the package is
// built before its tests (tsc -b is incremental and takes well under a second).
export default defineProject({
  test: { name: "runtime-oci", include: ["test/**/*.test.ts"], globalSetup: ["test/build.ts"], testTimeout: 60_000, hookTimeout: 120_000 },
});
