import { defineProject } from "vitest/config";
import { tempDirs } from "../../tests/helpers/tmpconfig.js";

export default defineProject({ test: { name: "create-jobrt-runtime", include: ["test/**/*.test.ts"], ...tempDirs, testTimeout: 120_000 } });
