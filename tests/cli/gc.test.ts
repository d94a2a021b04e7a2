import { execFileSync, spawn } from "node:child_process";
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmdirSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { jobrt, jobrtBin, killExecWithForker, tempDir } from "../helpers/jobrt.js";
import { waitFor } from "../helpers/leaks.js";

function site() {
  const dir = tempDir("jobrt-gc-");
  const spool = join(dir, "spool");
  writeFileSync(join(dir, "jobrt.conf"), `SpoolDir=${spool}\nKillWait=1\n`);
  return { dir, spool, env: { ...process.env, JOBRT_CONF_DIR: dir } };
}

const alive = (pid: number) => {
  // kill(0) and kill(-1) would test the test's own group and every process: never a task's pid.
  if (!Number.isInteger(pid) || pid <= 1) throw new Error(`not a task pid: ${pid}`);
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** Journal entries as `<job>/<entry>`; `journal` is `jobs`, or `jobs.<uid>` for a user in a shared SpoolDir. */
function steps(spool: string, journal = "jobs"): string[] {
  const jobs = join(spool, journal);
  if (!existsSync(jobs)) return [];
  return readdirSync(jobs)
    .filter((j) => /^\d+$/.test(j))
    .flatMap((j) =>
      readdirSync(join(jobs, j))
        .filter((s) => s !== "next-step") // the job's step counter, not an entry
        .map((s) => `${j}/${s}`),
    );
}

/** Starts `jobrt run` with tasks that record their pids, and waits until all have started. */
async function startStep(s: ReturnType<typeof site>, n: number) {
  const marker = tempDir();
  const child = spawn(
    process.execPath,
    [
      "--",
      jobrtBin,
      "run",
      "-n",
      String(n),
      "--runtime",
      "none",
      "sh",
      "-c",
      `echo $$ > ${marker}/$SLURM_PROCID; exec sleep 120`,
    ],
    {
      env: s.env,
      stdio: "ignore",
    },
  );
  return { child, pids: await markedPids(marker, n) };
}

/**
 * The pids that `n` tasks wrote with `echo $$ > marker/<name>`: the shell creates the file before
 * it writes, so a file counts only once its line is complete.
 */
async function markedPids(marker: string, n: number): Promise<number[]> {
  const complete = () => readdirSync(marker).filter((f) => readFileSync(join(marker, f), "utf8").endsWith("\n"));
  await waitFor(() => complete().length === n, "tasks to start");
  return complete().map((f) => Number(readFileSync(join(marker, f), "utf8")));
}

describe("crash recovery: jobrt gc", () => {
  it("after SIGKILL of jobrt mid-step, gc kills the orphaned tasks and removes the step; a live step is never touched", async () => {
    const s = site();
    const dead = await startStep(s, 4);
    const live = await startStep(s, 2);
    expect(steps(s.spool)).toHaveLength(2);
    dead.child.kill("SIGKILL");
    await new Promise((r) => dead.child.once("exit", r));
    // The tasks run in their own process groups and survive their host.
    expect(dead.pids.every(alive)).toBe(true);

    const gc = await jobrt(["gc"], { env: s.env });
    expect(gc.stderr).toBe("");
    expect(gc.code).toBe(0);
    expect(gc.stdout).toMatch(/^gc: step \d+\.0: killed 4 task process group\(s\); cleaned up none\n$/);
    await waitFor(() => !dead.pids.some(alive), "orphaned tasks to die");
    expect(live.pids.every(alive)).toBe(true);
    expect(steps(s.spool)).toHaveLength(1);

    const again = await jobrt(["gc"], { env: s.env });
    expect(again.stdout).toBe("");
    expect(live.pids.every(alive)).toBe(true);

    live.child.kill("SIGTERM");
    await new Promise((r) => live.child.once("exit", r));
    await waitFor(() => !live.pids.some(alive), "live step's tasks to stop");
    expect(steps(s.spool)).toEqual([]);
  });

  it("every jobrt run collects orphans first, quietly", async () => {
    const s = site();
    const dead = await startStep(s, 2);
    dead.child.kill("SIGKILL");
    await new Promise((r) => dead.child.once("exit", r));
    const r = await jobrt(["run", "--runtime", "none", "true"], { env: s.env });
    expect(r.code).toBe(0);
    expect(r.stderr).toBe("");
    await waitFor(() => !dead.pids.some(alive), "orphaned tasks to die");
    expect(steps(s.spool)).toEqual([]);
  });

  it("collects a step recorded by a jobrt from before process tracking (no nodeName, no proctrack in step.json)", async () => {
    const s = site();
    const dead = await startStep(s, 1);
    const stepDir = join(s.spool, "jobs", steps(s.spool)[0]!);
    const pids = join(stepDir, "pids");
    await waitFor(
      () =>
        existsSync(join(stepDir, "step.json")) &&
        existsSync(pids) &&
        readFileSync(pids, "utf8").startsWith(`${dead.pids[0]} `),
      "the step's record",
    );
    dead.child.kill("SIGKILL");
    await new Promise((r) => dead.child.once("exit", r));
    const record = JSON.parse(readFileSync(join(stepDir, "step.json"), "utf8")) as Record<string, unknown>;
    const cgroup = (record.proctrack as { path?: string }).path;
    delete record.proctrack;
    delete record.nodeName;
    writeFileSync(join(stepDir, "step.json"), JSON.stringify(record));
    // What the old format leaves to gc: the task's process group. A run's pre-run gc must not fail on it.
    const r = await jobrt(["run", "--runtime", "none", "true"], { env: s.env });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    await waitFor(() => !dead.pids.some(alive), "the old step's task to die");
    expect(steps(s.spool)).toEqual([]);
    // Its cgroup, unknown to the old record, is empty now; remove it as the old jobrt never would have.
    if (cgroup) for (const dir of [join(cgroup, "task_0"), cgroup]) rmdirSync(dir);
  });

  it("never kills a process that merely reuses a recorded pid", async () => {
    const s = site();
    const dead = await startStep(s, 1);
    dead.child.kill("SIGKILL");
    await new Promise((r) => dead.child.once("exit", r));
    // A process outside the step, recorded with another start time, as after pid reuse.
    const stranger = spawn("sleep", ["60"], { detached: true, stdio: "ignore" });
    const stepDir = join(s.spool, "jobs", steps(s.spool)[0]!);
    writeFileSync(join(stepDir, "pids"), `${stranger.pid} 1\n`);
    const gc = await jobrt(["gc"], { env: s.env });
    // The step's own task is still found (in its cgroup) and killed; the stranger is left alone.
    expect(gc.stdout).toMatch(/killed 1 task process group/);
    await waitFor(() => !dead.pids.some(alive), "the orphaned task to die");
    expect(alive(stranger.pid!)).toBe(true);
    stranger.kill("SIGKILL");
  });

  it("a jobrt exec task of a Slurm step that was SIGKILLed is collected too", async () => {
    const s = site();
    const marker = tempDir();
    const slurm = {
      SLURM_JOB_ID: "4242",
      SLURM_STEP_ID: "1",
      SLURM_PROCID: "3",
      SLURM_LOCALID: "0",
      SLURM_NTASKS: "4",
    };
    const child = spawn(
      process.execPath,
      ["--", jobrtBin, "exec", "--runtime", "none", "--", "sh", "-c", `echo $$ > ${marker}/pid; exec sleep 120`],
      {
        env: { ...s.env, ...slurm },
        stdio: "ignore",
      },
    );
    const [pid] = (await markedPids(marker, 1)) as [number];
    expect(steps(s.spool)).toEqual([`4242/exec-1.3.${child.pid}`]);
    killExecWithForker(child.pid!);
    await new Promise((r) => child.once("exit", r));
    expect(alive(pid)).toBe(true);
    const gc = await jobrt(["gc"], { env: s.env });
    expect(gc.stdout).toBe("gc: step 4242.1: killed 1 task process group(s); cleaned up none\n");
    await waitFor(() => !alive(pid), "the orphaned task to die");
    expect(steps(s.spool)).toEqual([]);
  });

  it("ignores records it did not write itself (a user cannot make root's gc kill or clean anything)", async () => {
    const s = site();
    const victim = spawn("sleep", ["60"], { detached: true, stdio: "ignore" });
    const start = readFileSync(`/proc/${victim.pid}/stat`, "utf8").split(") ")[1]!.split(" ")[19];
    const forged = join(s.spool, "jobs", "77", "step-0");
    mkdirSync(forged, { recursive: true });
    writeFileSync(join(forged, "host.json"), JSON.stringify({ pid: 999999, start: "1", boot: "x" }));
    writeFileSync(join(forged, "pids"), `${victim.pid} ${start}\n`);
    chownSync(forged, 65534, 65534);
    const gc = await jobrt(["gc"], { env: s.env });
    expect(gc.stdout).toBe("");
    expect(alive(victim.pid!)).toBe(true);
    expect(existsSync(forged)).toBe(true);
    process.kill(-victim.pid!, "SIGKILL");
  });
});

/** A site every user can use, as on a Slurm node: conf readable by all, SpoolDir sticky 1777. */
function sharedSite() {
  const s = site();
  chmodSync(s.dir, 0o755);
  mkdirSync(s.spool, { mode: 0o1777 });
  chmodSync(s.spool, 0o1777);
  return s;
}

/** Starts `jobrt exec` as one task of Slurm job `jobId`, step 1, and waits for its task's pid. */
async function startExecTask(s: ReturnType<typeof site>, jobId: number, user?: { uid: number; gid: number }) {
  const journal = user ? `jobs.${user.uid}` : "jobs";
  const marker = tempDir();
  chmodSync(marker, 0o777);
  const slurm = {
    SLURM_JOB_ID: String(jobId),
    SLURM_STEP_ID: "1",
    SLURM_PROCID: "0",
    SLURM_LOCALID: "0",
    SLURM_NTASKS: "1",
  };
  const child = spawn(
    process.execPath,
    ["--", jobrtBin, "exec", "--runtime", "none", "--", "sh", "-c", `echo $$ > ${marker}/pid; exec sleep 120`],
    {
      env: { ...s.env, ...slurm, HOME: "/" },
      cwd: "/",
      stdio: "ignore",
      ...(user ?? {}),
    },
  );
  const [pid] = (await markedPids(marker, 1)) as [number];
  // The task runs; its pid reaches the record right after (one write per burst of starts, into a
  // file that exists a moment before the write: wait for the line itself).
  const recorded = (p: string) => readFileSync(join(s.spool, journal, p, "pids"), "utf8").startsWith(`${pid} `);
  await waitFor(
    () =>
      steps(s.spool, journal).some(
        (p) => p.startsWith(`${jobId}/`) && existsSync(join(s.spool, journal, p, "pids")) && recorded(p),
      ),
    "the task's record",
  );
  return { child, pid };
}

async function sigkill(child: ReturnType<typeof spawn>): Promise<void> {
  killExecWithForker(child.pid!);
  if (child.exitCode === null && child.signalCode === null) await new Promise((r) => child.once("exit", r));
}

/** A hand-made journal entry of a dead host in `uid`'s journal (`jobs.<uid>`), whose components run as `recordUid`. */
function plantRecord(
  spool: string,
  jobId: number,
  uid: number,
  recordUid: number,
  pids: string,
  proctrack: { kind: string; path?: string } = { kind: "pgid" },
  recordGid = recordUid,
): string {
  const journal = join(spool, `jobs.${uid}`);
  const dir = join(journal, String(jobId), "exec-0.0.999999");
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(journal, 0o700);
  const component = {
    jobId,
    stepId: 0,
    kind: "normal",
    runtime: "none",
    uid: recordUid,
    gid: recordGid,
    user: "x",
    home: "/",
    cwd: "/",
    argv: ["true"],
    env: {},
    tasks: [{ localId: 0, globalId: 0, argv: ["true"], env: {} }],
    totalTasks: 1,
    nodeId: 0,
    nnodes: 1,
    pty: false,
  };
  // This boot, so recorded pids count; a host pid that is not running, so the step is an orphan.
  const boot = readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
  const record = { host: { pid: 999999, start: "1", boot }, nodeName: "n", proctrack, components: [component] };
  writeFileSync(join(dir, "step.json"), JSON.stringify(record));
  writeFileSync(join(dir, "pids"), pids);
  for (const path of [journal, join(journal, String(jobId)), dir, join(dir, "step.json"), join(dir, "pids")])
    chownSync(path, uid, uid);
  return dir;
}

const startOf = (pid: number) => readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")[19];

// The Slurm Epilog runs `jobrt gc --job $SLURM_JOB_ID` as root when a job ends (docs/slurm.md).
describe("jobrt gc --job N, and root's gc on a job user's records", () => {
  it("--job N collects only job N's SIGKILLed jobrt exec tasks", async () => {
    const s = site();
    const a = await startExecTask(s, 5151);
    const b = await startExecTask(s, 5252);
    await sigkill(a.child);
    await sigkill(b.child);
    const gc = await jobrt(["gc", "--job", "5151"], { env: s.env });
    expect(gc.stderr).toBe("");
    expect(gc.code).toBe(0);
    expect(gc.stdout).toBe("gc: step 5151.1: killed 1 task process group(s); cleaned up none\n");
    await waitFor(() => !alive(a.pid), "job 5151's task to die");
    expect(alive(b.pid)).toBe(true);
    expect(steps(s.spool)).toEqual([`5252/exec-1.0.${b.child.pid}`]);
    const rest = await jobrt(["gc", "--job", "5252"], { env: s.env });
    expect(rest.stdout).toBe("gc: step 5252.1: killed 1 task process group(s); cleaned up none\n");
    await waitFor(() => !alive(b.pid), "job 5252's task to die");
    expect(steps(s.spool)).toEqual([]);
  });

  it("a jobrt exec SIGKILLed alone (its task forker lives on): the forker's own gc --pid kills the task and removes the record at once", async () => {
    // Slurm's SIGKILL left the task (and a container) running until slurmstepd gave up on its
    // stdio and the Epilog ran (issue 23, item 10; tests/slurm/killedexec.test.ts under Slurm).
    // PERL5OPT would make the forker fail at its start: no PERL* variable reaches it.
    const plain = site();
    const s = { ...plain, env: { ...plain.env, PERL5OPT: "-Mjobrt::NoSuchModule" } };
    const task = await startExecTask(s, 5454);
    const other = await startExecTask(s, 5455);
    task.child.kill("SIGKILL");
    // KillWait (1 s) + 5 s, no other gc run meanwhile.
    await waitFor(
      () => !alive(task.pid) && steps(s.spool).length === 1,
      "the forker's gc to collect the killed exec",
      6_000,
    );
    expect(steps(s.spool)).toEqual([`5455/exec-1.0.${other.child.pid}`]);
    expect(alive(other.pid)).toBe(true);
    await sigkill(other.child);
    const rest = await jobrt(["gc"], { env: s.env });
    expect(rest.stdout).toBe("gc: step 5455.1: killed 1 task process group(s); cleaned up none\n");
  });

  it("--pid P collects only the step whose jobrt had pid P, and only once that jobrt is gone; a bad value is a usage error", async () => {
    const s = site();
    const a = await startExecTask(s, 5656);
    const b = await startExecTask(s, 5656);
    const live = await startExecTask(s, 5656);
    await sigkill(a.child);
    await sigkill(b.child);
    for (const value of ["x", "0", "-3", "4194305"]) {
      const bad = await jobrt(["gc", "--pid", value], { env: s.env });
      expect(bad.code, value).toBe(2);
      expect(bad.stderr, value).toMatch(/^jobrt: --pid: .* is not a whole number from 1 to 4194304\n$/);
    }
    const none = await jobrt(["gc", "--job", "5656", "--pid", String(live.child.pid)], { env: s.env });
    expect(none.stdout).toBe("");
    expect(none.code).toBe(0);
    const gc = await jobrt(["gc", "--job", "5656", "--pid", String(a.child.pid)], { env: s.env });
    expect(gc.stderr).toBe("");
    expect(gc.stdout).toBe("gc: step 5656.1: killed 1 task process group(s); cleaned up none\n");
    await waitFor(() => !alive(a.pid), "a's task to die");
    expect(alive(b.pid) && alive(live.pid)).toBe(true);
    expect(steps(s.spool).sort()).toEqual([`5656/exec-1.0.${b.child.pid}`, `5656/exec-1.0.${live.child.pid}`].sort());
    await sigkill(live.child);
    const rest = await jobrt(["gc"], { env: s.env });
    expect(rest.code).toBe(0);
    await waitFor(() => !alive(b.pid) && !alive(live.pid), "the other tasks to die");
    expect(steps(s.spool)).toEqual([]);
  });

  it("--job with a bad value is a usage error: one line, exit 2, nothing collected", async () => {
    const s = site();
    const a = await startExecTask(s, 5353);
    await sigkill(a.child);
    for (const value of ["x", "0", "-1", "", "5353a"]) {
      const gc = await jobrt(["gc", "--job", value], { env: s.env });
      expect(gc.code, value).toBe(2);
      expect(gc.stderr, value).toMatch(/^jobrt: --job: .* is not a whole number from 1 to \d+\n$/);
    }
    expect(alive(a.pid)).toBe(true);
    expect(steps(s.spool)).toHaveLength(1);
    // Leave nothing: a plain gc takes the task, its record and its cgroup.
    const rest = await jobrt(["gc"], { env: s.env });
    expect(rest.stdout).toBe("gc: step 5353.1: killed 1 task process group(s); cleaned up none\n");
    await waitFor(() => !alive(a.pid), "job 5353's task to die");
    expect(steps(s.spool)).toEqual([]);
  });

  it("SpoolDir=…/%n: the Epilog's gc --job (SLURMD_NODENAME set, as slurmd does) finds what jobrt exec journaled, whatever NodeName says", async () => {
    // exec expanded %n to SLURMD_NODENAME and gc to NodeName (or the host name): gc found nothing
    // (issue 23, item 9). One function decides the node name for both now.
    const s = site();
    writeFileSync(join(s.dir, "jobrt.conf"), `SpoolDir=${s.spool}/%n\nNodeName=confname\nKillWait=1\n`);
    const node = { ...s, spool: join(s.spool, "slurmnode"), env: { ...s.env, SLURMD_NODENAME: "slurmnode" } };
    const task = await startExecTask(node, 5858);
    await sigkill(task.child);
    const gc = await jobrt(["gc", "--job", "5858"], { env: node.env });
    expect(gc.stderr).toBe("");
    expect(gc.stdout).toBe("gc: step 5858.1: killed 1 task process group(s); cleaned up none\n");
    await waitFor(() => !alive(task.pid), "the orphaned task to die");
    expect(steps(node.spool)).toEqual([]);
    expect(existsSync(join(s.spool, "confname"))).toBe(false);
  });

  it("a job user's jobrt exec under a root SpoolDir that is not shared says so (once per node): it writes no crash record", async () => {
    // It ran silently without one (nothing even under -v), so nothing could clean up after it.
    const s = site();
    chmodSync(s.dir, 0o755);
    mkdirSync(s.spool, { mode: 0o755 });
    const run = (task: string, verbose: string[] = []) =>
      jobrt(["exec", ...verbose, "--runtime", "none", "true"], {
        env: {
          ...s.env,
          SLURM_JOB_ID: "5959",
          SLURM_STEP_ID: "1",
          SLURM_PROCID: task,
          SLURM_LOCALID: task,
          SLURM_NTASKS: "2",
          HOME: "/",
        },
        cwd: "/",
        uid: 65534,
        gid: 65534,
      });
    const first = await run("0");
    expect(first.stderr).toBe(
      `jobrt: warning: no crash record for this task (jobrt gc cannot clean up after it if jobrt dies): SpoolDir ${s.spool} belongs to root and has no place for uid 65534's records: make it mode 1777 like /tmp, or leave SpoolDir unset for one of the user's own (docs/slurm.md)\n`,
    );
    expect(first.code).toBe(0);
    const second = await run("1");
    expect(second.stderr).toBe("");
    expect(second.code).toBe(0);
    // -v shows it for every task.
    expect((await run("1", ["-v"])).stderr).toContain(
      `no crash record for this task (jobrt gc cannot clean up after it if jobrt dies): SpoolDir ${s.spool} belongs to root`,
    );
    expect(readdirSync(s.spool)).toEqual([]);
  });

  it("root's gc --job collects a SIGKILLed jobrt exec that ran as the job user (nobody)", async () => {
    const s = sharedSite();
    const task = await startExecTask(s, 5454, { uid: 65534, gid: 65534 });
    expect(steps(s.spool, "jobs.65534")).toHaveLength(1);
    expect(statSync(join(s.spool, "jobs.65534", steps(s.spool, "jobs.65534")[0]!)).uid).toBe(65534);
    await sigkill(task.child);
    expect(alive(task.pid)).toBe(true);
    const gc = await jobrt(["gc", "--job", "5454"], { env: s.env });
    expect(gc.stderr).toBe("");
    expect(gc.stdout).toBe("gc: step 5454.1: killed 1 task process group(s); cleaned up none\n");
    await waitFor(() => !alive(task.pid), "nobody's orphaned task to die");
    expect(steps(s.spool, "jobs.65534")).toEqual([]);
  });

  it("root never acts on a user's record that names another uid or a group the user is not in, and kills only the record user's processes and cgroups", async () => {
    const s = sharedSite();
    const victim = spawn("sleep", ["60"], { detached: true, stdio: "ignore" });
    // root's process in a cgroup of its own (cgroup2), which a user's record then names.
    const cgroup = `/sys/fs/cgroup/unified/jobrt-gctest-${process.pid}`;
    mkdirSync(cgroup);
    try {
      writeFileSync(join(cgroup, "cgroup.procs"), `${victim.pid}\n`);
      const pids = `${victim.pid} ${startOf(victim.pid!)}\n`;
      // nobody's journal, a record claiming root's uid: root's gc would act as root for nobody.
      const claimsRoot = plantRecord(s.spool, 6161, 65534, 0, pids);
      let gc = await jobrt(["gc"], { env: s.env });
      expect(gc.stderr).toBe("");
      expect(gc.stdout).toBe("");
      expect(existsSync(join(claimsRoot, "step.json"))).toBe(true);
      // nobody's uid with root's group (nobody is no member of it): root's gc would run its
      // cleanup with gid 0.
      const claimsRootGroup = plantRecord(s.spool, 6060, 65534, 65534, pids, { kind: "pgid" }, 0);
      gc = await jobrt(["gc"], { env: s.env });
      expect(gc.stderr).toBe("");
      expect(gc.stdout).toBe("");
      expect(existsSync(join(claimsRootGroup, "step.json"))).toBe(true);
      // nobody's own record listing root's process and naming root's cgroup: collected, but
      // root's process lives and the cgroup stays.
      const listsRoot = plantRecord(s.spool, 6262, 65534, 65534, pids, { kind: "cgroup2", path: cgroup });
      gc = await jobrt(["gc", "--job", "6262"], { env: s.env });
      expect(gc.stdout).toBe("gc: step 6262.0: killed 0 task process group(s); cleaned up none\n");
      expect(existsSync(listsRoot)).toBe(false);
      expect(alive(victim.pid!)).toBe(true);
      expect(existsSync(cgroup)).toBe(true);
    } finally {
      process.kill(-victim.pid!, "SIGKILL");
      await waitFor(() => !alive(victim.pid!), "the victim to die");
      try {
        rmdirSync(cgroup);
      } catch {
        // already gone (a failed run removed it)
      }
    }
  });

  it("a user's record files that are a FIFO or a symlink cannot block or redirect root's gc", async () => {
    const s = sharedSite();
    const fifo = plantRecord(s.spool, 6363, 65534, 65534, "");
    rmSync(join(fifo, "step.json"));
    execFileSync("sh", ["-c", 'mkfifo "$1"', "sh", join(fifo, "step.json")]);
    const link = plantRecord(s.spool, 6464, 65534, 65534, "");
    rmSync(join(link, "step.json"));
    symlinkSync("/etc/passwd", join(link, "step.json"));
    const gc = await jobrt(["gc"], { env: s.env, timeoutMs: 20_000 });
    expect(gc.signal).toBeNull();
    expect(gc.code).toBe(0);
    expect(gc.stdout).toBe("");
    expect(existsSync(join(fifo, "step.json"))).toBe(true);
    expect(existsSync(join(link, "step.json"))).toBe(true);
  });
});
