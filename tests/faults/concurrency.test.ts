/**
 * Concurrent steps on one node: 16 `jobrt run` processes at once, 4 runc containers each, sharing
 * one SpoolDir; and 1,000 tasks in one step (runtime none) within the open-file limit.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { busyboxBundle } from "../helpers/fixtures.js";
import { failureLine, jobrt, jobrtBin, requires, runProgram } from "../helpers/jobrt.js";
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
  const child = spawn(process.execPath, ["--", jobrtBin, "run", ...args], {
    env: { ...process.env, ...site.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
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

describe("concurrency: 16 jobrt run at once, 4 containers each", () => {
  requires({ runc: haveRunc, root: isRoot, "a built jobrt (pnpm turbo run build)": existsSync(jobrtBin) });
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
    const script =
      'touch /sync/up-$SLURM_JOB_ID-$SLURM_LOCALID; while [ ! -e /sync/go ]; do sleep 0.05; done; echo "$SLURM_JOB_ID $SLURM_STEP_ID $SLURM_LOCALID"; exit $((BASE + SLURM_LOCALID))';
    const runs = Array.from({ length: 16 }, (_, i) =>
      start(site, [
        "-n",
        "4",
        "--export",
        `ALL,BASE=${20 + 4 * i}`,
        "--container",
        bundle,
        "--container-volume",
        `${sync}:/sync`,
        "sh",
        "-c",
        script,
      ]),
    );
    await waitFor(
      () => readdirSync(sync).length === 64,
      `64 containers to be up (up: ${readdirSync(sync).length})`,
      90_000,
    );
    const live = runcContainers(site.dir);
    expect(live).toHaveLength(64);
    expect(new Set(live).size).toBe(64);
    writeFileSync(join(sync, "go"), "");
    const results = await Promise.all(runs.map((r) => r.done));

    const jobIds = new Set<string>();
    results.forEach((r, i) => {
      expect(r.stderr).toBe(
        [0, 1, 2, 3].map((t) => failureLine(`task ${t}`, `Exited with exit code ${20 + 4 * i + t}`)).join(""),
      );
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

describe("concurrency: 1,000 tasks in one step (runtime none)", () => {
  requires({ "a built jobrt (pnpm turbo run build)": existsSync(jobrtBin) });
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

  // 1,000 tasks want ~2,000 pipe ends for line copying; under this limit the launcher writes
  // the tasks' output directly instead of running out of descriptors half-way.
  it("all complete under ulimit -n 1024", async () => {
    const site = faultSite();
    sites.push(site);
    const r = await runProgram(
      [
        "sh",
        "-c",
        `ulimit -n 1024; exec "$0" -- "$@" </dev/null`,
        process.execPath,
        jobrtBin,
        "run",
        "-n",
        "1000",
        "--runtime",
        "none",
        "sh",
        "-c",
        script,
      ],
      {
        env: { ...process.env, ...site.env },
      },
    );
    await check(site, r);
  }, 60_000);

  it("with -l under ulimit -n 1024 the step is refused up front with one line saying what to do, nothing started", async () => {
    const site = faultSite();
    sites.push(site);
    const r = await runProgram(
      [
        "sh",
        "-c",
        `ulimit -n 1024; exec "$0" -- "$@" </dev/null`,
        process.execPath,
        jobrtBin,
        "run",
        "-l",
        "-n",
        "1000",
        "--runtime",
        "none",
        "sh",
        "-c",
        script,
      ],
      { env: { ...process.env, ...site.env } },
    );
    expect(r.stdout).toBe("");
    expect(r.stderr).toMatch(
      /^jobrt: 1000 tasks with -l, --json or a shared --output\/--error file need about \d+ open files, but the limit is 1024: raise it \(ulimit -n\), or use per-task files \(-o out-%t\)\n$/,
    );
    expect(r.code).toBe(1);
    await expectNoLeaks(site);
  }, 60_000);
});
