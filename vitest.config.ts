import { defineConfig } from "vitest/config";

// One run over every package, the examples and the end-to-end tests (scripts/test.sh uses it).
// Each project keeps its own vitest.config.ts, so `pnpm turbo run test` per package works too.
export default defineConfig({
  test: {
    projects: ["packages/*", "examples/*", "tests"],
  },
});
