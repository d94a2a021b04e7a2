import { defineProject } from "vitest/config";

export default defineProject({ test: { name: "runtime-none", include: ["test/**/*.test.ts"] } });
