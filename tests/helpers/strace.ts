/**
 * What every process of a program's tree exited with, seen by `strace -f` (scripts/system-deps.sh
 * installs it): for a status no parent hands on, such as a forked child's failed exec.
 */
import { spawnSync } from "node:child_process";
import { chmodSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "./tmp.js";

function requireStrace(): void {
  if (spawnSync("strace", ["-V"]).status !== 0) throw new Error("this test needs strace (scripts/system-deps.sh)");
}

/** A program that runs `program` with its arguments under `strace -f`, and the trace it writes. */
export function tracedProgram(program: string): { path: string; trace: string } {
  requireStrace();
  const dir = tempDir("jobrt-strace-");
  const trace = join(dir, "trace");
  const path = join(dir, "traced");
  writeFileSync(path, `#!/bin/sh\nexec strace -f -q -e trace=none -e signal=none -o '${trace}' '${program}' "$@"\n`);
  chmodSync(path, 0o755);
  return { path, trace };
}

/** The exit status of each process the trace saw end by exit (signal deaths left out). */
export function exitStatuses(trace: string): number[] {
  return [...readFileSync(trace, "utf8").matchAll(/\+\+\+ exited with (\d+) \+\+\+/g)].map((m) => Number(m[1]));
}
