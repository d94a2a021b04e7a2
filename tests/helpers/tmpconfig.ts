import { fileURLToPath } from "node:url";

/**
 * The temp-dir wiring of every vitest project: tmprun.ts makes the run's dir and checks at the end
 * that nothing is left in it; tmpsetup.ts makes one dir per test file in it and removes it when the
 * file ends. README.md, "Temporary files", describes it.
 */
export const tempDirs = {
  globalSetup: [fileURLToPath(new URL("./tmprun.ts", import.meta.url))],
  setupFiles: [fileURLToPath(new URL("./tmpsetup.ts", import.meta.url))],
};
