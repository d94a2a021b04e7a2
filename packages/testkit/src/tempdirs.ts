import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { removeTree } from "@jobrt/host-services";

/**
 * Where test temp dirs go: $JOBRT_TEST_TMP when set (the repo's vitest setup points it at a dir it
 * removes when the test file ends), else the system temp dir.
 */
export function tempRoot(): string {
  return process.env.JOBRT_TEST_TMP || tmpdir();
}

/** A fresh temp dir under tempRoot(), named `<prefix>XXXXXX`. */
export function makeTempDir(prefix: string): string {
  return mkdtempSync(join(tempRoot(), prefix));
}

/**
 * Removes a temp dir a test made (host-services' removeTree: no link followed, no mount crossed;
 * what is left is returned, one line each). Dirs that a test made read-only are made writable first
 * (root needs no such help, but a run as another user does).
 */
export function removeTempDir(dir: string): string[] {
  return removeTree(dir, { fixModes: true });
}
