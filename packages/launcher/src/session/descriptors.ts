import { closeSync, readFileSync, readdirSync } from "node:fs";

const O_CLOEXEC = 0o2000000;

/**
 * The descriptors above 2 without close-on-exec: Node opens all of its own with it and marks what
 * it inherited so as it starts, but only up to the first gap after 15, so a higher one whoever
 * started jobrt left open is still here.
 */
function inheritedDescriptors(): number[] {
  let names: string[];
  try {
    names = readdirSync("/proc/self/fd");
  } catch {
    return [];
  }
  const found: number[] = [];
  for (const name of names) {
    const fd = Number(name);
    if (!(fd > 2)) continue;
    try {
      const flags = /^flags:\s+([0-7]+)$/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, "utf8"))?.[1];
      if (flags !== undefined && (Number.parseInt(flags, 8) & O_CLOEXEC) === 0) found.push(fd);
    } catch {
      // the listing's own descriptor, already closed
    }
  }
  return found;
}

/**
 * Closes every inherited descriptor above 2 but those in `keep`: a task must start with exactly
 * 0, 1 and 2 (and what the host passes it on purpose), whoever started jobrt.
 */
export function closeInheritedDescriptors(keep: readonly number[] = []): void {
  for (const fd of inheritedDescriptors()) {
    if (keep.includes(fd)) continue;
    try {
      closeSync(fd);
    } catch {
      // closed since the listing
    }
  }
}
