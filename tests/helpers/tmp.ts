import { makeTempDir } from "../../packages/testkit/src/tempdirs.js";

export { removeTempDir as removeTree, tempRoot } from "../../packages/testkit/src/tempdirs.js";

/**
 * A fresh temporary directory for one test file. The setup file tests/helpers/tmpsetup.ts (wired
 * into every vitest project) points it into a dir of the file's own and removes that dir when the
 * file ends, so callers never clean up; README.md, "Temporary files", says how and when.
 */
export function tempDir(prefix = "jobrt-test-"): string {
  return makeTempDir(prefix);
}

/** Left in a test file's dir by a worker that dropped root: the run's teardown removes the dir. */
export const HANDED_OVER = ".handed-over";
