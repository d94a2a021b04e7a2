import { defineProject } from "vitest/config";
import { tempDirs } from "../../tests/helpers/tmpconfig.js";

// Real bwrap launches, slow to start on a loaded machine: one file at a time.
export default defineProject({
  test: { name: "runtime-bwrap", include: ["test/**/*.test.ts"], ...tempDirs, fileParallelism: false, testTimeout: 60_000, hookTimeout: 120_000 },
});
