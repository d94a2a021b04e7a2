import { lstatSync, readlinkSync } from "node:fs";
import { isAbsolute, posix } from "node:path";

/**
 * Where the step spool dir may be bind-mounted without the runtime creating anything in the
 * user's image: runc makes a missing mount point inside the rootfs (on the host, before the rootfs
 * is made read-only), which mutates the bundle and fails on a rootfs that lives on a read-only
 * filesystem. So the mount is added only when its destination already exists in the rootfs as a
 * directory, or lies under a tmpfs the config itself mounts (runc makes it there, in memory).
 * Returns why the mount cannot be added, or undefined when it can.
 */
export function spoolMountProblem(rootfs: string, mounts: unknown, destination: string): string | undefined {
  if (!isAbsolute(destination)) return `${destination} is not an absolute path`;
  const dest = posix.normalize(destination);
  if (dest === "/") return "it would hide the whole rootfs";
  for (const m of Array.isArray(mounts) ? mounts : []) {
    const d = typeof m?.destination === "string" ? posix.normalize(m.destination) : undefined;
    if (m?.type === "tmpfs" && d !== undefined && d !== dest && dest.startsWith(d === "/" ? "/" : `${d}/`))
      return undefined;
  }
  const found = resolveInRoot(rootfs, dest);
  if (found === undefined)
    return `${dest} does not exist in the image (${rootfs}), and the runtime would create it there`;
  if (!found) return `${dest} is not a directory in the image (${rootfs})`;
  return undefined;
}

/**
 * Follows `path` inside `root` as the container will see it: every component with lstat, a
 * symlink's target taken relative to `root` (never the host's `/`), `..` clamped at `root`.
 * True for a directory, false for something else, undefined when a component is missing.
 */
function resolveInRoot(root: string, path: string): boolean | undefined {
  const pending = path.split("/").filter(Boolean);
  const done: string[] = [];
  let links = 0;
  while (pending.length > 0) {
    const name = pending.shift() as string;
    if (name === ".") continue;
    if (name === "..") {
      done.pop();
      continue;
    }
    const host = posix.join(root, ...done, name);
    let st: ReturnType<typeof lstatSync>;
    try {
      st = lstatSync(host);
    } catch {
      return undefined;
    }
    if (st.isSymbolicLink()) {
      if (++links > 40) return undefined;
      let target: string;
      try {
        target = readlinkSync(host);
      } catch {
        return undefined;
      }
      if (isAbsolute(target)) done.length = 0;
      pending.unshift(...target.split("/").filter(Boolean));
      continue;
    }
    if (!st.isDirectory()) return pending.length === 0 ? false : undefined;
    done.push(name);
  }
  return true;
}
