import { fileURLToPath } from "node:url";

/**
 * The temp-dir wiring of every vitest project: tmp-run.ts makes the run's dir and checks at the end
 * that nothing is left in it; tmp-setup.ts makes one dir per test file in it and removes it when the
 * file ends. README.md, "Temporary files", describes it.
 */
export const tempDirs = {
  globalSetup: [fileURLToPath(new URL("./tmp-run.ts", import.meta.url))],
  setupFiles: [fileURLToPath(new URL("./tmp-setup.ts", import.meta.url))],
};
