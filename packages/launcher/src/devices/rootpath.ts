import { type Stats, lstatSync, readlinkSync } from "node:fs";
import { dirname, join } from "node:path";
import { othersMayReplace } from "@jobrt/host-services";

/** Owned by root and writable by no one else: what a spec file and its directory must be, as root. */
export function rootAlone(st: Stats): boolean {
  return st.uid === 0 && (st.mode & 0o022) === 0;
}

/** Linux's own limit on the symlinks one lookup follows (ELOOP). */
const MAX_LINKS = 40;

function directoryProblem(path: string, st: Stats): string | undefined {
  if (!st.isDirectory()) return `${path} is not a directory`;
  if (st.uid !== 0) return `${path} belongs to uid ${st.uid}, not root`;
  // A sticky directory (/tmp) is fine on the way: no one else may rename or remove root's entry in it.
  if (othersMayReplace(st)) return `${path} is writable by others than root (mode ${(st.mode & 0o7777).toString(8)})`;
  return undefined;
}

function parts(path: string): string[] {
  return path.split("/").filter((p) => p !== "" && p !== ".");
}

/**
 * Why root must not take `path` from a CDI spec (undefined: it may). The path is resolved as the
 * kernel would, each symlink followed, and every directory it goes through must be root's and
 * writable by no one else (or sticky), every symlink and the final object root's: otherwise a job
 * user could put another node or file there between jobrt's stat and runc's use of it
 * (docs/devices.md, "The spec files").
 */
export function untrustedPath(path: string): string | undefined {
  let at = "/";
  const rest = parts(path);
  let links = 0;
  let st = lstatSync(at);
  let problem = directoryProblem(at, st);
  while (problem === undefined && rest.length > 0) {
    const part = rest.shift() as string;
    // `at` holds no symlink, so its parent is the directory already checked.
    if (part === "..") {
      at = dirname(at);
      continue;
    }
    const next = join(at, part);
    try {
      st = lstatSync(next);
    } catch (error) {
      return `${next}: ${(error as NodeJS.ErrnoException).code ?? "cannot stat"}`;
    }
    if (st.uid !== 0) return `${next} belongs to uid ${st.uid}, not root`;
    if (st.isSymbolicLink()) {
      if (++links > MAX_LINKS) return `${path}: more than ${MAX_LINKS} symlinks`;
      let target: string;
      try {
        target = readlinkSync(next);
      } catch (error) {
        // Replaced since the lstat: said, not thrown past the spec's one line.
        return `${next}: ${(error as NodeJS.ErrnoException).code ?? "cannot read the link"}`;
      }
      rest.unshift(...parts(target));
      if (target.startsWith("/")) at = "/";
      continue;
    }
    if (rest.length > 0) problem = directoryProblem(next, st);
    at = next;
  }
  return problem;
}

/**
 * untrustedPath of a spec's device node or mount source (`what`), said as a step's refusal and
 * `jobrt check`'s problem alike.
 */
export function untrustedHostPath(what: "device node" | "mount source", hostPath: string): string | undefined {
  const problem = untrustedPath(hostPath);
  return problem === undefined
    ? undefined
    : `${what} ${hostPath}: ${problem}; as root jobrt takes a host path only through directories root alone may write`;
}
