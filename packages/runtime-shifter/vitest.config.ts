import { defineProject } from "vitest/config";

export default defineProject({ test: { name: "runtime-shifter", include: ["test/**/*.test.ts"] } });
