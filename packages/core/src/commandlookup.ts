/**
 * Looks a task's command up the way a container will see it, from the host: its root directory
 * plus its mounts, symlinks resolved inside the root (an absolute one restarts at the container's
 * `/`, `..` never climbs above it), PATH as the container will have it.
 *
 * For wrapper runtimes whose tool reports a failed exec as its own failure (runc and ch-run exit
 * 1): it lets them turn that into 127/126 as a shell would (docs/writing-a-runtime.md, "Exit
 * status"), so it answers "missing" or "not-executable" only when it is certain. Anything it
 * cannot see (a mount whose content is not a host directory, such as tmpfs or proc; a relative
 * PATH entry; a dir it may not read; a symlink loop) makes it answer "unknown", and the runtime's
 * status should then be left as it is. runtime-oci and the charliecloud example use it.
 */
import { type Stats, lstatSync, readdirSync, readlinkSync, statSync } from "node:fs";
import { isAbsolute, posix } from "node:path";

/**
 * A mount as the container sees it: `source` is a host path for a bind, undefined when its content
 * is not known here; `empty` for a file system the runtime makes fresh (bwrap's `--tmpfs`): empty
 * when the command is executed, but for the mounts made under it later (`empty` since core 2.1.0).
 */
export interface ViewMount {
  destination: string;
  source?: string;
  empty?: boolean;
}

/** The container's filesystem as seen from the host. */
export interface ContainerView {
  /** Host path of the container's `/`. */
  root: string;
  /** In mount order: a later mount hides whatever an earlier one put at or below its destination. */
  mounts: ViewMount[];
}

export type CommandLookup =
  | { kind: "found"; path: string }
  | { kind: "missing" }
  | { kind: "not-executable"; path: string }
  | { kind: "unknown"; why: string };

type Entry =
  | { kind: "file"; mode: number }
  | { kind: "dir" }
  | { kind: "other" }
  | { kind: "missing" }
  | { kind: "unknown"; why: string };

/** What one lookup has seen, by host path: the walks share most of their prefixes. */
type Memo = Map<string, Stats | "missing" | "unknown">;

/** The most symlinks one lookup follows (Linux's own limit for a path walk is 40). */
const MAX_LINKS = 40;

const split = (path: string) => path.split("/").filter((c) => c !== "" && c !== ".");

/** The last mount at or above container path `path`: what the container sees there. */
function coveringMount(view: ContainerView, path: string): ViewMount | undefined {
  for (let i = view.mounts.length - 1; i >= 0; i--) {
    const m = view.mounts[i] as ViewMount;
    const d = m.destination;
    if (path === d || d === "/" || path.startsWith(`${d}/`)) return m;
  }
  return undefined;
}

/** The host path holding container path `/comps...`, or undefined when a mount not of a host dir covers it. */
function hostPath(view: ContainerView, comps: string[]): string | undefined {
  const path = `/${comps.join("/")}`;
  const m = coveringMount(view, path);
  if (!m) return posix.join(view.root, path);
  if (m.source === undefined) return undefined;
  return m.destination === "/" ? posix.join(m.source, path) : m.source + path.slice(m.destination.length);
}

/** A directory of a fresh, empty file system (ViewMount.empty): its root, or a mount point made in it. */
const EMPTY_ROOT = {
  isSymbolicLink: () => false,
  isDirectory: () => true,
  isFile: () => false,
  mode: 0o40755,
} as Stats;

/** lstat, except at a mount destination: a bind's source was resolved on the host when it was mounted. */
function inspect(view: ContainerView, comps: string[], memo: Memo): Stats | "missing" | "unknown" {
  const path = `/${comps.join("/")}`;
  const covering = coveringMount(view, path);
  // In an empty file system only its root and the directories the runtime made for mounts below exist.
  if (covering?.empty)
    return covering.destination === path || view.mounts.some((m) => m.destination.startsWith(`${path}/`))
      ? EMPTY_ROOT
      : "missing";
  const host = hostPath(view, comps);
  if (host === undefined) return "unknown";
  const atMount = view.mounts.some((m) => m.destination === `/${comps.join("/")}`);
  const key = `${atMount ? "stat" : "lstat"}:${host}`;
  let seen = memo.get(key);
  if (seen === undefined) {
    try {
      // No exception for ENOENT: a PATH search is mostly misses, and throwing costs more than the stat.
      seen =
        (atMount ? statSync(host, { throwIfNoEntry: false }) : lstatSync(host, { throwIfNoEntry: false })) ?? "missing";
    } catch (error) {
      seen = (error as NodeJS.ErrnoException).code === "ENOTDIR" ? "missing" : "unknown";
    }
    memo.set(key, seen);
  }
  return seen;
}

/** A walk that ran into a missing (or non-directory) component; a `..` after it could lead anywhere. */
function missingTail(comps: string[], rest: string[]): { comps: string[]; entry: Entry } {
  if (rest.includes("..")) return { comps, entry: { kind: "unknown", why: "`..` after a missing path component" } };
  return { comps: [...comps, ...rest], entry: { kind: "missing" } };
}

/**
 * Walks container path `path` (absolute), following every symlink inside the container. Returns the
 * canonical components walked and what is at the end; a missing tail is appended as written (how
 * a runtime creates a mount destination that does not exist yet).
 */
function walk(view: ContainerView, path: string, memo: Memo): { comps: string[]; entry: Entry } {
  const queue = split(path);
  const comps: string[] = [];
  let links = 0;
  while (queue.length > 0) {
    const name = queue.shift() as string;
    if (name === "..") {
      comps.pop();
      continue;
    }
    const next = [...comps, name];
    const st = inspect(view, next, memo);
    if (st === "unknown")
      return { comps: next, entry: { kind: "unknown", why: `cannot see /${next.join("/")} from the host` } };
    if (st === "missing") return missingTail(next, queue);
    if (st.isSymbolicLink()) {
      if (++links > MAX_LINKS) return { comps: next, entry: { kind: "unknown", why: "too many symlinks" } };
      let target: string;
      try {
        target = readlinkSync(hostPath(view, next) as string);
      } catch {
        return { comps: next, entry: { kind: "unknown", why: `cannot read the symlink /${next.join("/")}` } };
      }
      if (target.startsWith("/")) comps.length = 0;
      queue.unshift(...split(target));
      continue;
    }
    comps.push(name);
    if (queue.length > 0 && !st.isDirectory()) return missingTail(comps, queue);
    if (queue.length === 0) {
      const entry: Entry = st.isDirectory()
        ? { kind: "dir" }
        : st.isFile()
          ? { kind: "file", mode: Number(st.mode) }
          : { kind: "other" };
      return { comps, entry };
    }
  }
  return { comps, entry: { kind: "dir" } };
}

/**
 * The view with every mount destination resolved as the runtime resolves it (inside the rootfs,
 * through the mounts made before it), or why it cannot be.
 */
function canonicalView(view: ContainerView, memo: Memo): ContainerView | string {
  const mounts: ViewMount[] = [];
  for (const m of view.mounts) {
    if (!isAbsolute(m.destination)) return `mount destination ${JSON.stringify(m.destination)} is not absolute`;
    const { comps, entry } = walk({ root: view.root, mounts }, m.destination, memo);
    if (entry.kind !== "unknown") {
      mounts.push({ ...m, destination: `/${comps.join("/")}` });
      continue;
    }
    // Inside a mount of unknown content (/dev/pts in /dev's tmpfs): where it lands is not known
    // for certain, so neither is anything under its written destination.
    const under = mounts.some(
      (u) =>
        u.source === undefined && (m.destination === u.destination || m.destination.startsWith(`${u.destination}/`)),
    );
    if (!under || split(m.destination).includes("..")) return `mount destination ${m.destination}: ${entry.why}`;
    mounts.push({ destination: `/${split(m.destination).join("/")}` });
  }
  return { root: view.root, mounts };
}

/** One candidate path: executable (any x bit, as the runtime's PATH search takes it), not, or absent. */
function candidate(view: ContainerView, path: string, memo: Memo): CommandLookup {
  const { entry } = walk(view, path, memo);
  switch (entry.kind) {
    case "file":
      return (entry.mode & 0o111) !== 0 ? { kind: "found", path } : { kind: "not-executable", path };
    case "dir":
      return { kind: "not-executable", path };
    case "missing":
      return { kind: "missing" };
    case "other":
      return { kind: "unknown", why: `${path} is neither a file nor a directory` };
    default:
      return { kind: "unknown", why: entry.why };
  }
}

/**
 * Looks `command` up in `view`: a name with a slash is taken as a path (from `cwd` when
 * relative), a bare name is searched in `pathVariable` as execvp does, a dir or non-executable
 * file found on the way only remembered (126 when nothing better follows).
 */
export function lookupCommand(
  written: ContainerView,
  command: string,
  pathVariable: string | undefined,
  cwd: string,
): CommandLookup {
  if (command === "") return { kind: "unknown", why: "empty command" };
  const memo: Memo = new Map();
  const view = canonicalView(written, memo);
  if (typeof view === "string") return { kind: "unknown", why: view };
  if (command.includes("/")) {
    if (!isAbsolute(command) && !isAbsolute(cwd))
      return { kind: "unknown", why: "relative command without an absolute cwd" };
    return candidate(view, posix.resolve(cwd, command), memo);
  }
  if (pathVariable === undefined) return { kind: "unknown", why: "the container has no PATH" };
  let denied: CommandLookup | undefined;
  let unknown: CommandLookup | undefined;
  for (const dir of pathVariable.split(":")) {
    if (!dir.startsWith("/")) {
      unknown ??= { kind: "unknown", why: `PATH entry ${JSON.stringify(dir)} is not absolute` };
      continue;
    }
    const r = candidate(view, posix.join(dir, command), memo);
    if (r.kind === "found") return r;
    if (r.kind === "not-executable") denied ??= r;
    if (r.kind === "unknown") unknown ??= r;
  }
  return unknown ?? denied ?? { kind: "missing" };
}

/**
 * The names in directory `path` of the container (absolute, resolved as lookupCommand resolves a
 * command), or undefined when it is not a directory there or cannot be read. For a runtime that
 * checks what an image holds, such as the libraries a host edit would replace. Since core 2.1.0.
 */
export function listContainerDir(written: ContainerView, path: string): string[] | undefined {
  const memo: Memo = new Map();
  const view = canonicalView(written, memo);
  if (typeof view === "string" || !isAbsolute(path)) return undefined;
  const { comps, entry } = walk(view, path, memo);
  const host = entry.kind === "dir" ? hostPath(view, comps) : undefined;
  if (host === undefined) return undefined;
  try {
    return readdirSync(host);
  } catch {
    return undefined;
  }
}
