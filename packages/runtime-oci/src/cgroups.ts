import { type Dirent, lstatSync, readFileSync, readdirSync } from "node:fs";
import { isAbsolute, join, normalize, relative } from "node:path";
import { isCgroup2, procCgroups, readMountInfo } from "@jobrt/host-services";
import { type FileOp, type FileUser, runFileOps } from "@jobrt/host-services";

/**
 * The cgroup dirs a runtime made for a container whose create was cut short. runc makes one per
 * hierarchy (each v1 controller, and the cgroup2 mount of a hybrid node) before it writes the
 * state that `runc delete` needs, so a `runc create` killed in between leaves dirs that nothing
 * removes. They are named after the container id (or config.json's linux.cgroupsPath) and sit
 * below the cgroup runc ran in (a relative path), or its parent (cgroup2), or the hierarchy's
 * root (an absolute path): below the host's own cgroup, or one of its ancestors, in each
 * hierarchy. The host records its own cgroups at setup (hostCgroupDirs), since gc runs elsewhere.
 */

/** Only hierarchies mounted here are looked at; anything a record names outside is ignored. */
const CGROUP_FS = "/sys/fs/cgroup";

interface Hierarchy {
  mount: string;
  /** The hierarchy path mounted there ("/" unless a subtree is bind-mounted). */
  root: string;
  /** The /proc/self/cgroup controller names it carries ("" for cgroup2). */
  controllers: string[];
}

/** Every cgroup (v1) and cgroup2 mount under /sys/fs/cgroup in this mount namespace. */
function hierarchies(): Hierarchy[] {
  const out: Hierarchy[] = [];
  for (const { mountPoint: mount, root, fstype, superOptions } of readMountInfo()) {
    if (!mount.startsWith(`${CGROUP_FS}/`) && mount !== CGROUP_FS) continue;
    if (fstype === "cgroup2") out.push({ mount, root, controllers: [""] });
    else if (fstype === "cgroup")
      out.push({ mount, root, controllers: superOptions.filter((o) => o !== "rw" && o !== "ro") });
  }
  return out;
}

/** This process's own cgroup dir in every mounted hierarchy, for the step state. */
export function hostCgroupDirs(): string[] {
  const own = procCgroups();
  const out: string[] = [];
  for (const h of hierarchies()) {
    const matches = own.filter((m) =>
      h.controllers[0] === "" ? isCgroup2(m) : h.controllers.some((c) => m.controllers.includes(c)),
    );
    const inner = matches
      .filter((m) => isAbsolute(m.path))
      .map((m) => relative(h.root, m.path))
      .find((p) => !p.startsWith(".."));
    if (inner !== undefined) out.push(join(h.mount, inner));
  }
  return out;
}

/** This process's own cgroup dir in the v1 hierarchy that carries `controller`, and that hierarchy's mount. */
export function ownV1Cgroup(controller: string): { mount: string; dir: string } | undefined {
  const own = procCgroups().find((m) => !isCgroup2(m) && m.controllers.includes(controller));
  const h = hierarchies().find((x) => x.controllers[0] !== "" && x.controllers.includes(controller));
  if (!own || !h || !isAbsolute(own.path)) return undefined;
  const inner = relative(h.root, own.path);
  return inner.startsWith("..") ? undefined : { mount: h.mount, dir: join(h.mount, inner) };
}

/** A path with no `.`/`..`/empty component, as runc would clean it; undefined when it is not one. */
function cleanRelative(path: string): string | undefined {
  const parts = path.split("/").filter((p) => p !== "");
  if (parts.length === 0 || parts.some((p) => p === "." || p === "..")) return undefined;
  return parts.join("/");
}

/** Is every component of `dir` below `mount` a real directory (no symlink) owned by `owner`? */
export function realDirBelow(mount: string, dir: string, owner?: number): boolean {
  const inner = relative(mount, dir);
  if (inner === "" || inner.startsWith("..") || isAbsolute(inner)) return false;
  let path = mount;
  for (const part of inner.split("/")) {
    path = join(path, part);
    try {
      const st = lstatSync(path);
      if (!st.isDirectory()) return false;
      if (path === dir && owner !== undefined && st.uid !== owner) return false;
    } catch {
      return false;
    }
  }
  return true;
}

/**
 * The dirs named `name` (a container id, or a relative cgroupsPath) below the recorded host
 * cgroups or any of their ancestors, and `absolute` paths from each hierarchy's root, that exist
 * as real directories owned by `owner`. Recorded dirs outside a cgroup mount here are ignored.
 */
export function findContainerCgroups(
  names: { relative?: string[]; absolute?: string[] },
  recorded: readonly string[],
  owner?: number,
): string[] {
  const found = new Set<string>();
  const rel = (names.relative ?? []).map(cleanRelative).filter((p): p is string => p !== undefined);
  const abs = (names.absolute ?? []).map(cleanRelative).filter((p): p is string => p !== undefined);
  for (const h of hierarchies()) {
    const parents = new Set<string>([h.mount]);
    for (const dir of recorded) {
      if (normalize(dir) !== dir || (dir !== h.mount && !dir.startsWith(`${h.mount}/`))) continue;
      for (let d = dir; d.length >= h.mount.length; d = join(d, "..")) {
        parents.add(d);
        if (d === h.mount) break;
      }
    }
    const candidates = [
      ...[...parents].flatMap((p) => rel.map((n) => join(p, n))),
      ...abs.map((n) => join(h.mount, n)),
    ];
    for (const c of candidates) if (realDirBelow(h.mount, c, owner)) found.add(c);
  }
  return [...found];
}

/** `dir` and every cgroup below it, deepest first (the order rmdir needs); symlinks are never followed. */
function subtree(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string, depth: number) => {
    let entries: Dirent[] = [];
    try {
      entries = depth < 32 ? readdirSync(d, { withFileTypes: true }) : [];
    } catch {
      // gone, or unreadable: rmdir will say which
    }
    for (const e of entries) if (e.isDirectory()) walk(join(d, e.name), depth + 1);
    out.push(d);
  };
  walk(dir, 0);
  return out;
}

function procs(dir: string): number[] {
  try {
    return readFileSync(join(dir, "cgroup.procs"), "utf8").split("\n").filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** A container cgroup dir that could not be removed, with the processes its subtree still holds. */
export interface CgroupLeft {
  dir: string;
  pids: number[];
  error: string;
}

/**
 * Removes each of `dirs` with the cgroups below it (children first), as `as` when given (the job
 * user: never more than that user could remove). A dir still busy is retried for up to `waitMs`
 * (a cut-short create's `runc init` exits on its own moments later); what is then still there is
 * returned, never killed.
 */
export async function removeCgroups(
  dirs: readonly string[],
  as: FileUser | undefined,
  waitMs = 2000,
): Promise<CgroupLeft[]> {
  const end = Date.now() + waitMs;
  for (;;) {
    const order = [...new Set(dirs.flatMap(subtree))].sort((a, b) => b.split("/").length - a.split("/").length);
    const ops: FileOp[] = order.map((path) => ({ op: "rmdir", path }));
    const results = ops.length > 0 ? runFileOps(ops, as) : [];
    const failed = new Map<string, string>();
    results.forEach((r, i) => {
      if (!r.ok) failed.set(order[i] as string, r.error);
    });
    const left = dirs.filter((d) => failed.has(d));
    if (left.length === 0 || Date.now() >= end) {
      return left.map((dir) => ({ dir, pids: subtree(dir).flatMap(procs), error: failed.get(dir) as string }));
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}
