import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { repoRoot } from "./jobrt.js";

const fixtureRoot = join(tmpdir(), "jobrt-fixtures");

/** A busybox root filesystem (built once per machine, reused). */
export function busyboxRootfs(): string {
  const dir = join(fixtureRoot, "busybox-rootfs");
  if (!existsSync(join(dir, "bin/busybox"))) {
    mkdirSync(fixtureRoot, { recursive: true });
    execFileSync("sh", [join(repoRoot, "scripts/busybox-rootfs.sh"), dir], { stdio: "inherit" });
  }
  return dir;
}

/** A fresh OCI bundle (rootfs + `runc spec` config.json) at `dir`. */
export function busyboxBundle(dir: string, rootless = false): string {
  execFileSync("sh", [join(repoRoot, "scripts/busybox-bundle.sh"), dir, ...(rootless ? ["--rootless"] : [])], {
    stdio: "inherit",
  });
  return dir;
}
