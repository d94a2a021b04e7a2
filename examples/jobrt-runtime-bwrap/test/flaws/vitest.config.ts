import { defineConfig } from "vitest/config";

// Only for flaws.test.ts: runs the deliberately broken bwrap runtimes in a child vitest.
export default defineConfig({ test: { include: ["flawed.suite.ts"], root: import.meta.dirname, testTimeout: 120_000 } });
