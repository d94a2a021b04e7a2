import { defineProject } from "vitest/config";

export default defineProject({ test: { name: "launcher", include: ["test/**/*.test.ts"] } });
