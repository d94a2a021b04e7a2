import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const repo = fileURLToPath(new URL("../../..", import.meta.url));

export const haveRunc = spawnSync("runc", ["--version"]).status === 0;
export const isRoot = process.getuid?.() === 0;

// biome-ignore lint/suspicious/noExplicitAny: tests edit arbitrary config.json fields
type Json = Record<string, any>;

/** A busybox OCI bundle at `dir` (non-terminal `runc spec`), optionally edited. */
export function makeBundle(dir: string, edit?: (config: Json) => void, rootless = false): string {
  mkdirSync(dir, { recursive: true });
  execFileSync("sh", [join(repo, "scripts/busybox-bundle.sh"), dir, ...(rootless ? ["--rootless"] : [])], {
    stdio: "ignore",
  });
  if (edit) {
    const file = join(dir, "config.json");
    const config = JSON.parse(readFileSync(file, "utf8"));
    edit(config);
    writeFileSync(file, JSON.stringify(config, null, 2));
  }
  return dir;
}

/** Lets other users traverse a temp dir (for runs as nobody). */
export function openUp(dir: string): string {
  chmodSync(dir, 0o755);
  return dir;
}

const ID = "%n.%u.%j.%s.%t";
const RUNC = "runc --root /run/runc";

export function runModeConf(extra = ""): string {
  return `RunTimeQuery="${RUNC} state ${ID}"\nRunTimeRun="${RUNC} run ${ID} -b %b"\nRunTimeKill="${RUNC} kill -a ${ID}"\nRunTimeDelete="${RUNC} delete --force ${ID}"\n${extra}`;
}

export function createStartConf(extra = ""): string {
  return `RunTimeQuery="${RUNC} state ${ID}"\nRunTimeCreate="${RUNC} create ${ID} -b %b"\nRunTimeStart="${RUNC} start ${ID}"\nRunTimeKill="${RUNC} kill -a ${ID}"\nRunTimeDelete="${RUNC} delete --force ${ID}"\n${extra}`;
}

/** The spool dir of task `task` of step 0 of job `jobId` under `spoolDir`. */
export function stepTaskDir(spoolDir: string, jobId: number, task = 0): string {
  return join(spoolDir, `oci-job${jobId}-0`, `task-${task}`);
}

/** A task dir a crashed run with these ids left, holding `files` (name: content). */
export function leftoverTaskDir(spoolDir: string, jobId: number, files: Record<string, string>): string {
  const dir = stepTaskDir(spoolDir, jobId);
  mkdirSync(dir, { recursive: true });
  for (const [name, content] of Object.entries(files)) writeFileSync(join(dir, name), content);
  return dir;
}

export function writeConf(dir: string, text: string): string {
  writeFileSync(join(dir, "oci.conf"), text);
  return dir;
}

/** Container ids runc knows (machine-wide state in /run/runc). */
export function runcIds(root = "/run/runc"): string[] {
  const r = spawnSync("runc", ["--root", root, "list", "-q"], { encoding: "utf8" });
  return r.stdout.split("\n").filter(Boolean);
}

/** Pids whose command line contains `marker`. */
export function processesWith(marker: string): number[] {
  const r = spawnSync("pgrep", ["-f", marker], { encoding: "utf8" });
  return r.stdout
    .split("\n")
    .filter(Boolean)
    .map(Number)
    .filter((p) => p !== process.pid);
}
