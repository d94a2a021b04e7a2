import { execFileSync } from "node:child_process";
import { chmodSync, copyFileSync, existsSync, mkdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "../../../tests/helpers/tmp.js";

/**
 * A minimal Charliecloud image directory made from busybox-static: what `ch-convert` would give
 * for a busybox image, without needing a registry. The directory is world-readable so
 * unprivileged users can run it too.
 */
export function busyboxImage(dir = tempDir("jobrt-cc-image-")): string {
  const busybox = ["/bin/busybox", "/usr/bin/busybox"].find((p) => existsSync(p));
  if (!busybox) throw new Error("busybox not found: apt-get install busybox-static");
  const tmp = `${dir}.tmp`;
  rmSync(tmp, { recursive: true, force: true });
  for (const d of ["bin", "etc", "tmp", "proc", "sys", "dev", "home", "root", "mnt", "data", "work"]) mkdirSync(join(tmp, d), { recursive: true });
  copyFileSync(busybox, join(tmp, "bin/busybox"));
  chmodSync(join(tmp, "bin/busybox"), 0o755);
  const applets = execFileSync(busybox, ["--list"], { encoding: "utf8" }).split("\n").filter((a) => a && a !== "busybox");
  for (const a of applets) symlinkSync("busybox", join(tmp, "bin", a));
  // ch-run binds the host's passwd and group over these, so they must exist.
  writeFileSync(join(tmp, "etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n");
  writeFileSync(join(tmp, "etc/group"), "root:x:0:\n");
  writeFileSync(join(tmp, "etc/jobrt-image"), "charliecloud-busybox\n");
  chmodSync(join(tmp, "tmp"), 0o1777);
  chmodSync(tmp, 0o755);
  rmSync(dir, { recursive: true, force: true });
  renameSync(tmp, dir);
  return dir;
}
