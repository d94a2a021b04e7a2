import { defineProject } from "vitest/config";
import { tempDirs } from "../../tests/helpers/tmpconfig.js";

export default defineProject({ test: { name: "spank", include: ["test/**/*.test.ts"], ...tempDirs } });
