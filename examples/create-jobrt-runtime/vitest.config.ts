import { defineProject } from "vitest/config";

export default defineProject({ test: { name: "create-jobrt-runtime", include: ["test/**/*.test.ts"], testTimeout: 120_000 } });
