import { chmodSync, existsSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { busyboxBundle } from "../helpers/fixtures.js";
import { killExecWithForker, tempDir } from "../helpers/jobrt.js";
import {
  type JobrtSite,
  jobrtSite,
  removeRuncContainers,
  runcContainers,
  slurm,
  slurmDir,
  sortedLines,
  startCluster,
  stopClusterAfterAll,
  waitFor,
} from "./cluster.js";
import {
  execRecords,
  jobGone,
  jobrtExecProcesses,
  markers,
  sleepers,
  spoolLeftovers,
  startSleepStep,
} from "./sleepstep.js";

/** The epilog's log lines on `node` (the Epilog appends gc's output there). */
function epilogLog(node: string): string {
  const file = join(slurmDir, "log", `epilog-${node}.log`);
  return existsSync(file) ? readFileSync(file, "utf8") : "";
}

// What jobrt leaves when Slurm ends a step the hard way, on the two-node local Slurm.
describe("cleanup under Slurm when jobrt exec is killed", () => {
  let site: JobrtSite;
  let bundle: string;
  const temps: string[] = [];
  const roots = () => [bundle, ...temps];

  beforeAll(async () => {
    site = jobrtSite();
    temps.push(site.root);
    const dir = tempDir("jobrt-slurm-cleanup-bundle-");
    temps.push(dir);
    chmodSync(dir, 0o755);
    bundle = busyboxBundle(join(dir, "bundle"));
    // The cluster's Epilog runs this site's jobrt: `jobrt gc --job $SLURM_JOB_ID` on each node.
    await startCluster(2, join(site.binDir, "jobrt"));
  });
  stopClusterAfterAll(async () => {
    if (site && bundle) removeRuncContainers(roots());
    for (const marker of markers) for (const pid of await sleepers(marker)) process.kill(Number(pid), "SIGKILL");
    for (const dir of temps) rmSync(dir, { recursive: true, force: true });
  });

  it("every jobrt exec of a running oci step SIGKILLed on both nodes with its task forker: the Epilog's jobrt gc --job leaves no container, record or task", async () => {
    const step = await startSleepStep(site, [], ["--runtime", "oci", "--container", bundle]);
    try {
      expect(runcContainers(roots())).toHaveLength(2);
      expect(execRecords(site, step.jobId)).toHaveLength(2);
      const hosts = jobrtExecProcesses(step.marker);
      expect(hosts.map((h) => h.node)).toEqual(["nodea", "nodeb"]);
      // What Slurm does when its KillWait expires: SIGKILL of jobrt and its task forker alike, no
      // chance to clean up (jobrt alone: killedexec.test.ts).
      for (const h of hosts) killExecWithForker(h.pid);
      expect(await step.exited).not.toBe(0);
      expect(await jobGone(step.jobId)).toBe(true);
      const clean = async () =>
        runcContainers(roots()).length === 0 &&
        (await sleepers(step.marker)).length === 0 &&
        spoolLeftovers(site, step.jobId).length === 0;
      // The Epilog runs before the job leaves squeue; allow for slurmd's scheduling of it.
      await waitFor(clean, 20_000, 200);
      expect(runcContainers(roots())).toEqual([]);
      expect(await sleepers(step.marker)).toEqual([]);
      expect(spoolLeftovers(site, step.jobId)).toEqual([]);
      // It was the Epilog on each node (no other jobrt ran there since).
      for (const node of ["nodea", "nodeb"]) {
        expect(epilogLog(node), node).toContain(
          `gc: step ${step.jobId}.0: killed 1 task process group(s); cleaned up oci\n`,
        );
      }
      // A clean Epilog leaves the nodes in service.
      const nodes = await slurm(["sinfo", "-h", "-N", "-o", "%N %T"]);
      expect(sortedLines(nodes.stdout)).toEqual(["nodea idle", "nodeb idle"]);
    } finally {
      if (step.job.exitCode === null) step.job.kill("SIGKILL");
    }
  });

  it("the same for a job of an ordinary user (srun --uid nobody, rootless runc): root's Epilog collects the user's records", async () => {
    // Its own site, so that nobody's jobrt creates SpoolDir/jobs itself; the Epilog follows it.
    const userSite = jobrtSite();
    temps.push(userSite.root);
    const dir = tempDir("jobrt-slurm-cleanup-nobody-");
    temps.push(dir);
    chmodSync(dir, 0o755);
    const rootless = busyboxBundle(join(dir, "bundle"), true);
    await startCluster(2, join(userSite.binDir, "jobrt"));
    // srun --uid cannot read its allocation reply if the job had to queue: start on an idle cluster.
    expect(await waitFor(async () => (await slurm(["squeue", "-h"])).stdout.trim() === "", 30_000, 200)).toBe(true);
    const step = await startSleepStep(
      userSite,
      ["--uid=65534", "--gid=65534", "--chdir", dir],
      ["--runtime", "oci", "--container", rootless],
    );
    try {
      expect(execRecords(userSite, step.jobId)).toHaveLength(2);
      const hosts = jobrtExecProcesses(step.marker);
      expect(hosts.map((h) => h.node)).toEqual(["nodea", "nodeb"]);
      for (const h of hosts) expect(readFileSync(`/proc/${h.pid}/status`, "utf8")).toMatch(/^Uid:\s+65534\s/m);
      for (const h of hosts) killExecWithForker(h.pid);
      expect(await step.exited).not.toBe(0);
      expect(await jobGone(step.jobId)).toBe(true);
      await waitFor(
        async () => (await sleepers(step.marker)).length === 0 && spoolLeftovers(userSite, step.jobId).length === 0,
        20_000,
        200,
      );
      expect(await sleepers(step.marker)).toEqual([]);
      // Rootless runc keeps its state in the step's spool dir, so this also covers the containers.
      expect(spoolLeftovers(userSite, step.jobId)).toEqual([]);
      for (const node of ["nodea", "nodeb"]) {
        expect(epilogLog(node), node).toContain(
          `gc: step ${step.jobId}.0: killed 1 task process group(s); cleaned up oci\n`,
        );
      }
    } finally {
      if (step.job.exitCode === null) step.job.kill("SIGKILL");
      await startCluster(2, join(site.binDir, "jobrt"));
    }
  });

  it("scancel with jobrt's KillWait (7 s) below Slurm's (10 s): jobrt's own stop ends every container before Slurm's SIGKILL", async () => {
    // Its own site, whose SpoolDir the Epilog does not collect: only jobrt's own stop counts here.
    const slowSite = jobrtSite(["nodea", "nodeb"], 7);
    temps.push(slowSite.root);
    // sleep is the container's pid 1, which ignores SIGTERM: jobrt must kill it after its KillWait.
    const step = await startSleepStep(slowSite, [], ["--runtime", "oci", "--container", bundle]);
    try {
      expect(runcContainers([bundle, slowSite.spoolRoot])).toHaveLength(2);
      const cancelled = Date.now();
      expect((await slurm(["scancel", step.jobId])).code).toBe(0);
      const code = await step.exited;
      const srunEnded = Date.now() - cancelled;
      expect(await jobGone(step.jobId)).toBe(true);
      // Slurm SIGKILLs a task still running at its KillWait; srun then reports it as "Killed".
      expect(step.stderr(), `srun ended ${srunEnded} ms after scancel`).not.toMatch(/task \d+: Killed/);
      expect(runcContainers([bundle, slowSite.spoolRoot])).toEqual([]);
      expect(await sleepers(step.marker)).toEqual([]);
      expect(spoolLeftovers(slowSite, step.jobId)).toEqual([]);
      // The task died of jobrt's SIGKILL: 128 + 9, as srun reports it for a task without jobrt.
      expect(code).toBe(137);
    } finally {
      if (step.job.exitCode === null) step.job.kill("SIGKILL");
    }
  });
});
