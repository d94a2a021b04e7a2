import { defineProject } from "vitest/config";
import { tempDirs } from "../../tests/helpers/tmpconfig.js";

// The supervisor and the file helper run as separate programs from dist/, so the package is
// built before its tests (tsc -b is incremental and takes well under a second).
export default defineProject({
  test: { name: "runtime-oci", include: ["test/**/*.test.ts"], globalSetup: ["test/build.ts", ...tempDirs.globalSetup], setupFiles: tempDirs.setupFiles, testTimeout: 60_000, hookTimeout: 120_000 },
});
