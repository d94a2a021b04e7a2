import { defineProject } from "vitest/config";
import { tempDirs } from "./helpers/tmpconfig.js";

// End-to-end tests drive the built `jobrt` binary and real runc, Slurm, verdaccio and ch-run.
// They share machine-wide resources (runc's state dir, the local Slurm), so files run one at a time.
export default defineProject({
  test: {
    name: "e2e",
    include: ["**/*.test.ts"],
    ...tempDirs,
    fileParallelism: false,
    testTimeout: 120_000,
    hookTimeout: 300_000,
  },
});
