import { readFileSync } from "node:fs";

/** One line of /proc/self/mountinfo, the fields jobrt reads (proc(5)). */
export interface MountInfo {
  /** The path inside the mounted file system that is mounted here ("/" unless a subtree is bind-mounted). */
  root: string;
  /** Where it is mounted, unescaped. */
  mountPoint: string;
  fstype: string;
  /** The per-superblock options (for a cgroup v1 mount: its controllers among them). */
  superOptions: string[];
}

/** Unescapes the octal escapes of mountinfo paths (space, tab, newline and backslash as \ooo). */
function unescapeMountPath(path: string): string {
  return path.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(Number.parseInt(o, 8)));
}

/**
 * Parses mountinfo text. The optional fields before " - " vary in number, so the fields after it
 * are found from that separator, which an escaped path can never contain.
 */
export function parseMountInfo(text: string): MountInfo[] {
  const out: MountInfo[] = [];
  for (const line of text.split("\n")) {
    const [left, right] = line.split(" - ");
    if (!left || !right) continue;
    const fields = left.split(" ");
    const [fstype = "", , superOptions = ""] = right.split(" ");
    if (fields[4] === undefined) continue;
    out.push({
      root: unescapeMountPath(fields[3] ?? "/"),
      mountPoint: unescapeMountPath(fields[4]),
      fstype,
      superOptions: superOptions.split(","),
    });
  }
  return out;
}

/** The mounts of this process's mount namespace; none when /proc is not readable. */
export function readMountInfo(): MountInfo[] {
  try {
    return parseMountInfo(readFileSync("/proc/self/mountinfo", "utf8"));
  } catch {
    return [];
  }
}

/** Mount points at or below `dir` (a real path: mountinfo holds no symlinks) in this mount namespace. */
export function mountsBelow(dir: string): string[] {
  const prefix = dir.endsWith("/") ? dir : `${dir}/`;
  return readMountInfo()
    .map((m) => m.mountPoint)
    .filter((p) => p === dir || p.startsWith(prefix));
}
