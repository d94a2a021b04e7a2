import { spawn } from "node:child_process";
import { readFileSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { repoRoot, runProgram, tempDir } from "../helpers/jobrt.js";
import {
  clusterLogs,
  slurm,
  slurmConf,
  slurmDir,
  slurmEnv,
  sortedLines,
  startCluster,
  stopCluster,
  waitFor,
} from "./cluster.js";

// The cluster itself, with plain srun/sbatch: if these fail, the jobrt tests beside them say nothing.
describe("scripts/slurm-local.sh: a two-node Slurm on one machine", () => {
  let failed = false;
  const temps: string[] = [];
  beforeAll(() => startCluster(2));
  afterEach((ctx) => {
    if (ctx.task.result?.state === "fail") failed = true;
  });
  afterAll(async () => {
    if (failed) console.error(clusterLogs());
    for (const dir of temps) rmSync(dir, { recursive: true, force: true });
    await stopCluster();
  });

  it("status names every daemon it started and the export line", async () => {
    const r = await runProgram(["sh", join(repoRoot, "scripts/slurm-local.sh"), "status", "--dir", slurmDir]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    for (const d of ["munged", "slurmctld", "slurmd-nodea", "slurmd-nodeb"])
      expect(r.stdout).toMatch(new RegExp(`${d}: running, pid \\d+`));
    expect(r.stdout).toMatch(/nodea idle/);
    expect(r.stdout).toMatch(/nodeb idle/);
    expect(r.stdout).toContain(`export SLURM_CONF=${slurmConf}`);
  });

  it("srun -n 4 runs four tasks with SLURM_PROCID 0-3", async () => {
    const r = await slurm(["srun", "-n", "4", "sh", "-c", "echo $SLURM_PROCID"]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(sortedLines(r.stdout)).toEqual(["0", "1", "2", "3"]);
  });

  it("srun -N 2 -n 4 spreads tasks over nodea (this host) and nodeb (its own UTS and network namespace)", async () => {
    const r = await slurm([
      "srun",
      "-N",
      "2",
      "-n",
      "4",
      "sh",
      "-c",
      'echo "$SLURMD_NODENAME $(hostname) $(readlink /proc/self/ns/net)"',
    ]);
    expect(r.code).toBe(0);
    const lines = sortedLines(r.stdout);
    expect(lines).toHaveLength(4);
    const host = hostname().split(".")[0];
    const ownNet = readlinkSync("/proc/self/ns/net");
    const nodeb = lines.filter((l) => l.startsWith("nodeb "));
    expect(lines.filter((l) => l === `nodea ${host} ${ownNet}`)).toHaveLength(2);
    expect(nodeb).toHaveLength(2);
    expect(nodeb[0]).toBe(nodeb[1]);
    expect(nodeb[0]).toMatch(/^nodeb nodeb net:\[\d+\]$/);
    expect(nodeb[0]).not.toContain(ownNet);
  });

  it("a heterogeneous srun puts each component on its own node", async () => {
    const r = await slurm(
      [
        "srun",
        "-n1",
        "sh",
        "-c",
        'echo "A $SLURMD_NODENAME $SLURM_HET_SIZE"',
        ":",
        "-n1",
        "sh",
        "-c",
        'echo "B $SLURMD_NODENAME $SLURM_HET_SIZE"',
      ],
      {
        timeoutMs: 60_000,
      },
    );
    expect(r.code).toBe(0);
    const lines = sortedLines(r.stdout);
    expect(lines).toHaveLength(2);
    const nodes = lines.map((l) => l.split(" ")[1]);
    expect(new Set(nodes)).toEqual(new Set(["nodea", "nodeb"]));
    expect(lines.every((l) => l.endsWith(" 2"))).toBe(true);
  });

  it("srun exits with the highest task exit status", async () => {
    const r = await slurm(["srun", "-n", "2", "sh", "-c", "exit $((SLURM_PROCID * 3))"]);
    expect(r.code).toBe(3);
  });

  it("sbatch --wait runs a batch script whose steps span both nodes and returns its exit status", async () => {
    const dir = tempDir("jobrt-slurm-batch-");
    temps.push(dir);
    const scriptPath = join(dir, "job.sh");
    writeFileSync(
      scriptPath,
      "#!/bin/sh\n#SBATCH -N 2 -n 2\nsrun -n 2 sh -c 'echo \"step $SLURM_STEP_ID task $SLURM_PROCID on $SLURMD_NODENAME\"'\nexit 4\n",
    );
    const r = await slurm(["sbatch", "--wait", "-o", join(dir, "out.txt"), "-e", join(dir, "err.txt"), scriptPath]);
    expect(r.code).toBe(4);
    expect(sortedLines(readFileSync(join(dir, "out.txt"), "utf8"))).toEqual([
      "step 0 task 0 on nodea",
      "step 0 task 1 on nodeb",
    ]);
  });

  it("scancel of a running step leaves no task process behind", async () => {
    // A marker no other process on the machine has, to find the tasks from outside.
    const marker = String(100000 + Math.floor(Math.random() * 800000));
    const srun = spawn("srun", ["-N", "2", "-n", "2", "--job-name", `cancel-${marker}`, "sleep", marker], {
      env: slurmEnv(),
      stdio: "ignore",
    });
    const exited = new Promise<number | null>((res) => srun.on("close", (code) => res(code)));
    try {
      const tasks = () =>
        runProgram(["pgrep", "-f", `^(/usr/bin/)?sleep ${marker}$`]).then((p) => sortedLines(p.stdout));
      expect(await waitFor(async () => (await tasks()).length === 2, 30_000)).toBe(true);
      const q = await slurm(["squeue", "-h", "-n", `cancel-${marker}`, "-o", "%i"]);
      const jobId = q.stdout.trim();
      expect(jobId).toMatch(/^\d+$/);
      const c = await slurm(["scancel", jobId]);
      expect(c.code).toBe(0);
      expect(await exited).not.toBe(0);
      expect(await waitFor(async () => (await tasks()).length === 0, 30_000)).toBe(true);
    } finally {
      if (srun.exitCode === null && srun.pid !== undefined) srun.kill("SIGKILL");
    }
  });
});
