import { execFileSync } from "node:child_process";
import { chmodSync, existsSync, readFileSync, readdirSync, rmSync, rmdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { busyboxBundle } from "../helpers/fixtures.js";
import { tempDir } from "../helpers/jobrt.js";
import {
  type JobrtSite,
  jobrtSite,
  listTree,
  removeRuncContainers,
  runcContainers,
  slurm,
  startCluster,
  stopClusterAfterAll,
  waitFor,
} from "./cluster.js";
import {
  type RunningStep,
  descendants,
  execRecords,
  jobrtExecProcesses,
  markers,
  sleepers,
  spoolLeftovers,
  startSleepStep,
  stillRunning,
} from "./sleepstep.js";

/** jobrt.conf KillWait of the sites here: everything of a killed exec must be gone KillWait + 5 s after its SIGKILL. */
const KILL_WAIT = 2;

/** The containers `runc --root <root> list` shows, for each rootless runc root (in a step's spool dir). */
function rootlessContainers(runcRoots: string[]): string[] {
  return runcRoots.flatMap((r) => {
    const text = execFileSync("runc", ["--root", r, "list", "-q"], { encoding: "utf8" }).trim();
    return text === "" ? [] : text.split("\n").map((id) => `${id} (${r})`);
  });
}

/**
 * The container state dirs left in those roots, read without runc: any runc command (`list`
 * too) makes its root dir again, which would put a dir of root's into the cleaned-up step dir.
 */
function rootlessStates(runcRoots: string[]): string[] {
  return runcRoots.filter((r) => existsSync(r)).flatMap((r) => readdirSync(r).map((id) => `${id} (${r})`));
}

/**
 * The cgroup dirs the `jobrt exec` processes `pids` of job `jobId` made (a step's, named
 * `jobrt-<jobId>.exec-<step>.<task>.<pid>`, and its forker's, that name and `.forker`) in the v1
 * freezer and the cgroup2 mount, wherever they are nested.
 */
function jobrtCgroups(jobId: string, pids: number[]): string[] {
  const ours = new RegExp(`^jobrt-${jobId}\\.exec-\\d+\\.\\d+\\.(${pids.join("|")})(\\.forker)?$`);
  const out: string[] = [];
  const walk = (dir: string, depth: number): void => {
    let entries: import("node:fs").Dirent[] = [];
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      if (!e.isDirectory()) continue;
      if (ours.test(e.name)) out.push(join(dir, e.name));
      else if (depth < 8) walk(join(dir, e.name), depth + 1);
    }
  };
  for (const mount of ["/sys/fs/cgroup/freezer", "/sys/fs/cgroup/unified"]) walk(mount, 0);
  return out;
}

/**
 * issue 23, item 10: Slurm's SIGKILL of `jobrt exec` (its KillWait ran out, the OOM killer) used to
 * leave the task's container running until slurmstepd gave up on its stdio (60 s) and the Epilog's
 * gc removed it. Here the cluster's Epilog runs a jobrt of another site, which cannot see these
 * steps' records: only what survives jobrt's SIGKILL on the node (its task forker) can end them,
 * within jobrt's KillWait + 5 s. Under proctrack/cgroup Slurm SIGKILLs every process in the
 * step's own freezer cgroup as soon as jobrt exits: the forker lives in a cgroup of its own below
 * it (docs/reliability.md, "The task forker's cgroup").
 */
describe.each(["linuxproc", "cgroup"] as const)(
  "SIGKILL of every jobrt exec of a running oci step (proctrack/%s)",
  (proctrack) => {
    let rootSite: JobrtSite;
    let userSite: JobrtSite;
    let bundle: string;
    let rootless: string;
    const temps: string[] = [];

    beforeAll(async () => {
      rootSite = jobrtSite(["nodea", "nodeb"], KILL_WAIT);
      userSite = jobrtSite(["nodea", "nodeb"], KILL_WAIT);
      const epilogSite = jobrtSite();
      const dir = tempDir("jobrt-slurm-killed-");
      temps.push(rootSite.root, userSite.root, epilogSite.root, dir);
      chmodSync(dir, 0o755);
      bundle = busyboxBundle(join(dir, "bundle"));
      rootless = busyboxBundle(join(dir, "rootless"), true);
      await startCluster(2, join(epilogSite.binDir, "jobrt"), proctrack);
    });
    stopClusterAfterAll(async () => {
      if (rootSite) removeRuncContainers([rootSite.root]);
      for (const marker of markers) for (const pid of await sleepers(marker)) process.kill(Number(pid), "SIGKILL");
      for (const dir of temps) rmSync(dir, { recursive: true, force: true });
    });

    /**
     * SIGKILLs both `jobrt exec` of `step`; then waits at most KillWait + 5 s for nothing of the step
     * to be left but, with `forkerCgroupStays`, each node's empty cgroup of the task forker (a job user
     * cannot move back into Slurm's step cgroup to remove it: docs/reliability.md, Known gaps 6).
     */
    async function killAndExpectNothingLeft(
      site: JobrtSite,
      step: RunningStep,
      runcRoots: string[],
      forkerCgroupStays = false,
    ): Promise<void> {
      const hosts = jobrtExecProcesses(step.marker);
      expect(hosts.map((h) => h.node)).toEqual(["nodea", "nodeb"]);
      expect(execRecords(site, step.jobId)).toHaveLength(2);
      // The task forkers, runc and whatever else the step runs outside the containers' pid namespaces.
      const below = descendants(hosts.map((h) => h.pid));
      expect(below.length).toBeGreaterThanOrEqual(4);
      const cgroups = () =>
        jobrtCgroups(
          step.jobId,
          hosts.map((h) => h.pid),
        );
      // Under proctrack/cgroup the forker lives in a cgroup of its own (forkercgroup.ts): else it died with jobrt.
      if (proctrack === "cgroup") expect(cgroups().filter((dir) => dir.endsWith(".forker"))).toHaveLength(2);
      const killed = Date.now();
      for (const h of hosts) process.kill(h.pid, "SIGKILL");
      const leftovers = async () => [
        ...runcContainers([site.root]),
        ...rootlessStates(runcRoots),
        ...(await sleepers(step.marker)).map((pid) => `task process ${pid}`),
        ...stillRunning(below).map((pid) => `process ${pid} of the step`),
        ...spoolLeftovers(site, step.jobId),
        ...cgroups()
          .filter((dir) => !(forkerCgroupStays && dir.endsWith(".forker")))
          .map((dir) => `cgroup ${dir}`),
      ];
      await waitFor(async () => (await leftovers()).length === 0, (KILL_WAIT + 5) * 1000, 100);
      const took = Date.now() - killed;
      const left = await leftovers();
      // For the failure's message: late, or left for good?
      const later =
        left.length === 0
          ? ""
          : (await waitFor(async () => (await leftovers()).length === 0, 10_000, 100))
            ? `, gone ${Date.now() - killed} ms after it`
            : ", still there 10 s later";
      expect(left, `left ${took} ms after the SIGKILL${later}; srun's stderr: ${step.stderr()}`).toEqual([]);
      expect(took).toBeLessThanOrEqual((KILL_WAIT + 5) * 1000);
      if (!forkerCgroupStays) return;
      const forkers = cgroups();
      expect(forkers).toHaveLength(2);
      // Empty (its forker has exited: no process of the step is left), and ours to remove.
      for (const dir of forkers) expect(readFileSync(join(dir, "cgroup.procs"), "utf8")).toBe("");
      for (const dir of forkers) rmdirSync(dir);
      // Slurm's step and job cgroups, which Slurm could not remove while the forker's was below them.
      for (const dir of forkers.flatMap((f) => [dirname(f), dirname(dirname(f))])) {
        try {
          rmdirSync(dir);
        } catch {
          // another step's, still in use
        }
      }
    }

    /** A failed test's step: its containers and tasks go now, so the next test starts on idle nodes. */
    async function endStep(step: RunningStep): Promise<void> {
      removeRuncContainers([rootSite.root]);
      for (const pid of await sleepers(step.marker)) process.kill(Number(pid), "SIGKILL");
      if (step.job.exitCode !== null) return;
      await slurm(["scancel", step.jobId]);
      step.job.kill("SIGKILL");
    }

    it("a step whose tasks end leaves no cgroup of jobrt's, its forker's included, as root and as a job user", async () => {
      for (const [site, srunArgs, container] of [
        [rootSite, [], bundle],
        [userSite, ["--uid=65534", "--gid=65534", "--chdir", "/"], rootless],
      ] as const) {
        expect(await waitFor(async () => (await slurm(["squeue", "-h"])).stdout.trim() === "", 30_000, 200)).toBe(true);
        const step = await startSleepStep(site, [...srunArgs], ["--runtime", "oci", "--container", container]);
        try {
          const pids = jobrtExecProcesses(step.marker).map((h) => h.pid);
          expect(pids).toHaveLength(2);
          // Under proctrack/cgroup each node's forker is in its own cgroup; under linuxproc (jobrt in the freezer's root) there is none.
          expect(jobrtCgroups(step.jobId, pids).filter((dir) => dir.endsWith(".forker"))).toHaveLength(
            proctrack === "cgroup" ? 2 : 0,
          );
          for (const pid of await sleepers(step.marker)) process.kill(Number(pid), "SIGKILL");
          expect(
            await Promise.race([step.exited.then(() => true), new Promise((r) => setTimeout(() => r(false), 30_000))]),
            step.stderr(),
          ).toBe(true);
          expect(jobrtCgroups(step.jobId, pids), step.stderr()).toEqual([]);
          expect(spoolLeftovers(site, step.jobId), step.stderr()).toEqual([]);
        } finally {
          await endStep(step);
        }
      }
    });

    it("as root: the containers, their runc state, the step's processes and spool files are gone within KillWait + 5 s", async () => {
      const step = await startSleepStep(rootSite, [], ["--runtime", "oci", "--container", bundle]);
      try {
        // A root container's bundle is its task dir in the step's spool dir.
        expect(runcContainers([rootSite.root])).toHaveLength(2);
        await killAndExpectNothingLeft(rootSite, step, []);
      } finally {
        await endStep(step);
      }
    });

    it("as a job user (srun --uid nobody, rootless runc): the same, with the user's own rights", async () => {
      // srun --uid cannot read its allocation reply if the job had to queue: start on an idle cluster.
      expect(await waitFor(async () => (await slurm(["squeue", "-h"])).stdout.trim() === "", 30_000, 200)).toBe(true);
      const step = await startSleepStep(
        userSite,
        ["--uid=65534", "--gid=65534", "--chdir", "/"],
        ["--runtime", "oci", "--container", rootless],
      );
      try {
        const runcRoots = listTree(userSite.spoolRoot)
          .filter((p) => p.endsWith("/runc/"))
          .map((p) => join(userSite.spoolRoot, p));
        expect(rootlessContainers(runcRoots)).toHaveLength(2);
        await killAndExpectNothingLeft(userSite, step, runcRoots, proctrack === "cgroup");
      } finally {
        await endStep(step);
      }
    });
  },
);
