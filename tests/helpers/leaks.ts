import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "./jobrt.js";

/**
 * A site for one fault test: a conf dir with jobrt.conf (SpoolDir and TMPDIR of its own) and a
 * marker that every process of the step carries in its environment, so leftovers can be found.
 */
export interface FaultSite {
  dir: string;
  spool: string;
  tmp: string;
  marker: string;
  env: Record<string, string>;
}

export function faultSite(jobrtConf = "", files: Record<string, string> = {}): FaultSite {
  const dir = tempDir("jobrt-fault-");
  const spool = join(dir, "spool");
  const tmp = join(dir, "tmp");
  mkdirSync(tmp);
  writeFileSync(join(dir, "jobrt.conf"), `SpoolDir=${spool}\nKillWait=1\n${jobrtConf}`);
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  const marker = `JOBRT_FAULT_MARKER_${process.pid}_${Math.random().toString(36).slice(2)}`;
  return { dir, spool, tmp, marker, env: { JOBRT_CONF_DIR: dir, TMPDIR: tmp, [marker]: "1" } };
}

/** Processes (other than zombies) whose environment carries the site's marker. */
export function markedProcesses(site: FaultSite): number[] {
  const found: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const status = readFileSync(`/proc/${entry}/status`, "utf8");
      if (/^State:\s+Z/m.test(status)) continue;
      const env = readFileSync(`/proc/${entry}/environ`, "utf8");
      if (env.includes(`${site.marker}=`)) found.push(Number(entry));
    } catch {
      // gone, or not ours to read
    }
  }
  return found;
}

/** Containers runc knows whose bundle is under `prefix` (or any, without a prefix). */
export function runcContainers(prefix?: string): string[] {
  let out: { id: string; bundle: string }[] = [];
  try {
    out =
      JSON.parse(
        execFileSync("runc", ["list", "--format", "json"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }) ||
          "[]",
      ) ?? [];
  } catch {
    return [];
  }
  return out.filter((c) => prefix === undefined || c.bundle.startsWith(prefix)).map((c) => c.id);
}

/** What a step may leave in SpoolDir: the job id counter and the node marker, nothing else. */
export function spoolLeftovers(site: FaultSite): string[] {
  if (!existsSync(site.spool)) return [];
  const left: string[] = [];
  for (const entry of readdirSync(site.spool)) {
    if (entry !== "jobs") left.push(entry);
  }
  const jobs = join(site.spool, "jobs");
  if (existsSync(jobs))
    for (const entry of readdirSync(jobs)) if (entry !== "next-jobid" && entry !== "node") left.push(`jobs/${entry}`);
  return left;
}

export async function waitFor(check: () => boolean, what: string, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The leak check every fault cell ends with. */
export async function expectNoLeaks(site: FaultSite, bundlePrefix?: string): Promise<void> {
  // Killed processes may take a moment to be reaped by init.
  await waitFor(
    () => markedProcesses(site).length === 0,
    `the step's processes to be gone (left: ${markedProcesses(site).join(",")})`,
    5_000,
  ).catch(() => {});
  const problems: string[] = [];
  const procs = markedProcesses(site);
  if (procs.length) problems.push(`processes left: ${procs.join(", ")}`);
  const containers = runcContainers(bundlePrefix ?? site.dir);
  if (containers.length) problems.push(`containers left: ${containers.join(", ")}`);
  const spool = spoolLeftovers(site);
  if (spool.length) problems.push(`spool left: ${spool.join(", ")}`);
  const tmp = readdirSync(site.tmp);
  if (tmp.length) problems.push(`temp files left: ${tmp.join(", ")}`);
  if (problems.length) throw new Error(problems.join("; "));
}
