import { accessSync, closeSync, constants, openSync } from "node:fs";
import { delimiter, join } from "node:path";

const TOOLS = ["squashfuse", "fusermount3"];

function onPath(tool: string): boolean {
  for (const dir of (process.env.PATH ?? "/usr/bin:/bin").split(delimiter)) {
    try {
      accessSync(join(dir, tool), constants.X_OK);
      return true;
    } catch {
      // not in this dir
    }
  }
  return false;
}

/**
 * Why this (rootless) process cannot mount a squashfs with squashfuse, if it can: the tools must
 * be installed (scripts/system-deps.sh) and /dev/fuse open to it for reading and writing, which
 * is what fusermount3 hands the daemon (docs/images.md, "Mounts").
 */
export function fuseProblem(): string | undefined {
  const missing = TOOLS.filter((t) => !onPath(t));
  if (missing.length > 0) return `${missing.join(" and ")} not found on PATH`;
  try {
    closeSync(openSync("/dev/fuse", constants.O_RDWR));
  } catch (error) {
    return `cannot open /dev/fuse (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`;
  }
  return undefined;
}
