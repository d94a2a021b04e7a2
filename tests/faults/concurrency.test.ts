/**
 * Concurrent steps on one node: 16 `jobrt run` processes at once, 4 runc containers each, sharing
 * one SpoolDir; and 1,000 tasks in one step (runtime none) within the open-file limit.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { busyboxBundle } from "../helpers/fixtures.js";
import { jobrt, jobrtBin, runProgram } from "../helpers/jobrt.js";
import { type FaultSite, expectNoLeaks, faultSite, runcContainers, waitFor } from "../helpers/leaks.js";

const haveRunc = spawnSync("runc", ["--version"]).status === 0;
const isRoot = process.getuid?.() === 0;

const children: ChildProcess[] = [];
const sites: FaultSite[] = [];
afterEach(async () => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  for (const s of sites.splice(0)) await jobrt(["gc"], { env: s.env }).catch(() => undefined);
});

interface Finished {
  code: number | null;
  stdout: string;
  stderr: string;
}

function start(site: FaultSite, args: string[]): { child: ChildProcess; done: Promise<Finished> } {
  const child = spawn(process.execPath, ["--", jobrtBin, "run", ...args], { env: { ...process.env, ...site.env }, stdio: ["ignore", "pipe", "pipe"] });
  children.push(child);
  let stdout = "";
  let stderr = "";
  child.stdout?.setEncoding("utf8").on("data", (d: string) => {
    stdout += d;
  });
  child.stderr?.setEncoding("utf8").on("data", (d: string) => {
    stderr += d;
  });
  const done = new Promise<Finished>((r) => child.once("close", (code) => r({ code, stdout, stderr })));
  return { child, done };
}

describe.skipIf(!haveRunc || !isRoot || !existsSync(jobrtBin))("concurrency: 16 jobrt run at once, 4 containers each", () => {
  it("unique job ids and container ids, every exit status right, nothing left", async () => {
    const tag = `jfconc${process.pid}`;
    const id = `${tag}.%j.%s.%t`;
    const runc = "runc --root /run/runc";
    const oci = `RunTimeQuery="${runc} state ${id}"\nRunTimeRun="${runc} run ${id} -b %b"\nRunTimeKill="${runc} kill -a ${id}"\nRunTimeDelete="${runc} delete --force ${id}"\n`;
    const site = faultSite("", { "oci.conf": oci });
    sites.push(site);
    const bundle = busyboxBundle(join(site.dir, "bundle"));
    // Every container says it is up in a shared dir, then waits for "go": so all 64 exist at once.
    const sync = join(site.dir, "sync");
    mkdirSync(sync);
    const script = 'touch /sync/up-$SLURM_JOB_ID-$SLURM_LOCALID; while [ ! -e /sync/go ]; do sleep 0.05; done; echo "$SLURM_JOB_ID $SLURM_STEP_ID $SLURM_LOCALID"; exit $((BASE + SLURM_LOCALID))';
    const runs = Array.from({ length: 16 }, (_, i) =>
      start(site, ["-n", "4", "--export", `ALL,BASE=${20 + 4 * i}`, "--container", bundle, "--container-volume", `${sync}:/sync`, "sh", "-c", script]),
    );
    await waitFor(() => readdirSync(sync).length === 64, `64 containers to be up (up: ${readdirSync(sync).length})`, 90_000);
    const live = runcContainers(site.dir);
    expect(live).toHaveLength(64);
    expect(new Set(live).size).toBe(64);
    writeFileSync(join(sync, "go"), "");
    const results = await Promise.all(runs.map((r) => r.done));

    const jobIds = new Set<string>();
    results.forEach((r, i) => {
      expect(r.stderr).toBe("");
      // The highest task status: task 3 exits BASE + 3.
      expect(r.code).toBe(20 + 4 * i + 3);
      const lines = r.stdout.trim().split("\n").sort();
      expect(lines).toHaveLength(4);
      const [job] = lines[0]!.split(" ");
      expect(lines).toEqual([0, 1, 2, 3].map((t) => `${job} 0 ${t}`));
      jobIds.add(job!);
      // Each run's containers had its own job id in their id.
      for (const t of [0, 1, 2, 3]) expect(live).toContain(`${tag}.${job}.0.${t}`);
    });
    expect(jobIds.size).toBe(16);
    await expectNoLeaks(site);
  }, 180_000);
});

describe.skipIf(!existsSync(jobrtBin))("concurrency: 1,000 tasks in one step (runtime none)", () => {
  const script = 'echo "$SLURM_PROCID"';
  function check(site: FaultSite, r: { code: number | null; stdout: string; stderr: string }) {
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const ids = r.stdout.trim().split("\n").map(Number);
    expect(new Set(ids).size).toBe(1000);
    expect(Math.max(...ids)).toBe(999);
    return expectNoLeaks(site);
  }

  it("all complete with the default open-file limit, stdin a pipe (3 pipes a task)", async () => {
    const site = faultSite();
    sites.push(site);
    const r = await jobrt(["run", "-n", "1000", "--runtime", "none", "sh", "-c", script], { env: site.env, input: "" });
    await check(site, r);
  }, 60_000);

  // Known launcher bug (docs/reliability.md, "Known gaps"): every task gets its own stdout and
  // stderr pipe at once, so 1,000 tasks need ~2,000 descriptors and, under `ulimit -n 1024`, tasks
  // from ~500 on fail with "spawn sh EMFILE". Drop `.fails` once packages/launcher/src/step.ts
  // keeps within RLIMIT_NOFILE.
  it.fails("all complete under ulimit -n 1024", async () => {
    const site = faultSite();
    sites.push(site);
    const r = await runProgram(["sh", "-c", `ulimit -n 1024; exec "$0" -- "$@" </dev/null`, process.execPath, jobrtBin, "run", "-n", "1000", "--runtime", "none", "sh", "-c", script], {
      env: { ...process.env, ...site.env },
    });
    await check(site, r);
  }, 60_000);

  it("under ulimit -n 1024 the failure is contained: one line per task that could not start, exit 1, nothing left", async () => {
    const site = faultSite();
    sites.push(site);
    const r = await runProgram(["sh", "-c", `ulimit -n 1024; exec "$0" -- "$@" </dev/null`, process.execPath, jobrtBin, "run", "-n", "1000", "--runtime", "none", "sh", "-c", script], {
      env: { ...process.env, ...site.env },
    });
    const started = r.stdout.trim().split("\n").filter(Boolean).length;
    const failed = r.stderr.trim().split("\n").filter(Boolean);
    // Either every task ran (the bug above fixed) or each one that did not is named.
    expect(started + failed.length).toBe(1000);
    for (const line of failed) expect(line).toMatch(/^jobrt: task \d+: cannot execute sh: spawn sh EMFILE$/);
    expect(r.code).toBe(failed.length === 0 ? 0 : 1);
    await expectNoLeaks(site);
  }, 60_000);
});
