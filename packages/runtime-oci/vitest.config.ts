import { defineProject } from "vitest/config";

export default defineProject({ test: { name: "runtime-oci", include: ["test/**/*.test.ts"] } });
