import { execFileSync } from "node:child_process";
import { rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { tempDir } from "../../../tests/helpers/tmp.js";

const script = join(dirname(fileURLToPath(import.meta.url)), "../../../scripts/busybox-rootfs.sh");

/** A busybox root file system in a fresh temp dir (scripts/busybox-rootfs.sh), world-readable for a job user. */
export function makeBusyboxRootfs(): { dir: string; dispose(): void } {
  const parent = tempDir("jobrt-bwrap-rootfs-");
  execFileSync("chmod", ["755", parent]);
  const dir = join(parent, "rootfs");
  execFileSync("sh", [script, dir], { stdio: "inherit" });
  return { dir, dispose: () => rmSync(parent, { recursive: true, force: true }) };
}
