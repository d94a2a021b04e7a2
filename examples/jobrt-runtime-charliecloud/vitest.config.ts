import { defineProject } from "vitest/config";
import { tempDirs } from "../../tests/helpers/tmpconfig.js";

// Real ch-run launches share nothing machine-wide, but they are slow to start on 2 cores: one file at a time.
export default defineProject({
  test: { name: "runtime-charliecloud", include: ["test/**/*.test.ts"], ...tempDirs, fileParallelism: false, testTimeout: 60_000, hookTimeout: 120_000 },
});
