/**
 * `jobrt ps` (issue 26, item 2): the steps of this node from the journal, live and dead, as the
 * built CLI shows them. Live steps are real `jobrt run`s (a runc container from a busybox bundle)
 * started here and stopped by pid; a dead one is a `jobrt run` SIGKILLed.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { busyboxBundle } from "../helpers/fixtures.js";
import { jobrt, jobrtBin, nodeName, requires, tempDir } from "../helpers/jobrt.js";

const NOBODY = 65534;
const haveRunc = spawnSync("runc", ["--version"]).status === 0;
const ID = "%n.%u.%j.%s.%t";
const RUNC = "runc --root /run/runc";
const RUN_MODE = `RunTimeQuery="${RUNC} state ${ID}"\nRunTimeRun="${RUNC} run ${ID} -b %b"\nRunTimeKill="${RUNC} kill -a ${ID}"\nRunTimeDelete="${RUNC} delete --force ${ID}"\n`;

interface PsStep {
  jobId: number;
  stepId: number;
  kind: string;
  uid: number;
  user: string;
  state: string;
  hostPid?: number;
  since?: number;
  ageSeconds?: number;
  components: { runtime: string; container?: string; image?: string; containerId?: string; tasks: number }[];
  gcAction?: string;
  gc?: string;
  problem?: string;
}

const started: ChildProcess[] = [];
const tasks: number[] = [];
afterEach(() => {
  for (const c of started.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  for (const pid of tasks.splice(0)) {
    try {
      process.kill(-pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
});

async function waitFor<T>(probe: () => Promise<T | undefined> | T | undefined, what: string, ms = 20_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A site every user can use, as on a Slurm node: conf readable by all, SpoolDir sticky 1777. */
function site(): { dir: string; env: NodeJS.ProcessEnv } {
  const dir = tempDir("jobrt-ps-");
  chmodSync(dir, 0o755);
  const spool = join(dir, "spool");
  mkdirSync(spool, { mode: 0o1777 });
  chmodSync(spool, 0o1777);
  writeFileSync(join(dir, "jobrt.conf"), `SpoolDir=${spool}\nKillWait=1\n`);
  writeFileSync(join(dir, "oci.conf"), RUN_MODE);
  return { dir, env: { ...process.env, JOBRT_CONF_DIR: dir, HOME: "/" } };
}

/** Starts `jobrt run` in the background (as `uid` when given); resolves once its task wrote its pid. */
async function startRun(
  s: ReturnType<typeof site>,
  args: string[],
  uid?: number,
): Promise<{ child: ChildProcess; task: number }> {
  const marker = tempDir();
  chmodSync(marker, 0o777);
  const file = join(marker, "pid");
  const child = spawn(
    process.execPath,
    [
      "--",
      jobrtBin,
      "run",
      ...args,
      "sh",
      "-c",
      `echo $$ > ${file}.$SLURM_PROCID; mv ${file}.$SLURM_PROCID ${file}; exec sleep 120`,
    ],
    {
      env: s.env,
      cwd: "/",
      stdio: ["ignore", "ignore", "pipe"],
      ...(uid !== undefined ? { uid, gid: uid } : {}),
    },
  );
  started.push(child);
  let stderr = "";
  child.stderr?.setEncoding("utf8").on("data", (d: string) => {
    stderr += d;
  });
  const task = await waitFor(
    () => (existsSync(file) ? Number(readFileSync(file, "utf8")) || undefined : undefined),
    "the task to start",
  ).catch((error: Error) => {
    throw new Error(`${error.message}; jobrt said: ${stderr}`);
  });
  return { child, task };
}

/** True once a `pids` file of the journal under `spool` names `pid`. */
function recordedInJournal(spool: string, pid: number): boolean {
  const files = (readdirSync(spool, { recursive: true }) as string[]).filter(
    (f) => f.endsWith("/pids") || f === "pids",
  );
  return files.some((f) =>
    readFileSync(join(spool, f), "utf8")
      .split("\n")
      .some((line) => line.startsWith(`${pid} `)),
  );
}

async function ps(s: ReturnType<typeof site>, args: string[] = [], uid?: number): Promise<PsStep[]> {
  const r = await jobrt(["ps", "--json", ...args], {
    env: s.env,
    cwd: "/",
    ...(uid !== undefined ? { uid, gid: uid } : {}),
  });
  expect(r.stderr).toBe("");
  expect(r.code).toBe(0);
  const out = JSON.parse(r.stdout) as { node: string; steps: PsStep[] };
  expect(out.node).toBe(nodeName);
  return out.steps;
}

/** runc's containers of job `job` (ids node.user.job.step.task). */
function ours(job: number): string[] {
  const r = spawnSync("runc", ["--root", "/run/runc", "list", "-q"], { encoding: "utf8" });
  return r.stdout.split("\n").filter((c) => c.includes(`.${job}.`));
}

function stopped(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once("exit", () => resolve());
  });
}

describe("jobrt ps", () => {
  requires({
    runc: haveRunc,
    root: process.getuid?.() === 0,
    "a built jobrt (pnpm turbo run build)": existsSync(jobrtBin),
  });
  let bundle: string;
  beforeAll(() => {
    bundle = busyboxBundle(join(tempDir("jobrt-ps-bundle-"), "bundle"));
  });

  it("a live runc step: user, runtime, bundle, tasks, pid and age; gone once stopped by its pid", async () => {
    const s = site();
    const job = 930000 + (process.pid % 1000);
    // The task inside the container cannot write a marker the test sees: ps itself says when it runs.
    const child = spawn(
      process.execPath,
      ["--", jobrtBin, "run", "--jobid", String(job), "-n", "2", "--container", bundle, "sleep", "120"],
      { env: s.env, stdio: "ignore" },
    );
    started.push(child);
    const [step] = await waitFor(async () => {
      const steps = await ps(s);
      return steps.length === 1 && steps[0]?.state === "running" ? steps : undefined;
    }, "ps to show the step running");
    await waitFor(() => (ours(job).length === 2 ? true : undefined), "both containers to run");
    expect(step).toMatchObject({
      jobId: job,
      stepId: 0,
      kind: "run",
      uid: 0,
      user: "root",
      state: "running",
      hostPid: child.pid,
      components: [{ runtime: "oci", container: bundle, tasks: 2 }],
    });
    expect(step?.gc).toBeUndefined();
    expect(step?.ageSeconds).toBeGreaterThanOrEqual(0);
    expect(step?.ageSeconds).toBeLessThan(60);
    const table = await jobrt(["ps"], { env: s.env });
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/^STEP +KIND +USER +STATE +AGE +PID +TASKS +RUNTIME +CONTAINER\n/);
    expect(table.stdout).toMatch(
      new RegExp(`\\n${job}\\.0 +run +root +running +\\d+s +${child.pid} +2 +oci +${bundle}\\n$`),
    );
    child.kill("SIGTERM");
    await stopped(child);
    expect(await ps(s)).toEqual([]);
    expect(ours(job)).toEqual([]);
  });

  it("a step run with --container-id shows the id its containers are named after", async () => {
    const s = site();
    const job = 931000 + (process.pid % 1000);
    const child = spawn(
      process.execPath,
      [
        "--",
        jobrtBin,
        "run",
        "--jobid",
        String(job),
        "--container-id",
        `psid.${job}`,
        "--container",
        bundle,
        "sleep",
        "120",
      ],
      { env: s.env, stdio: "ignore" },
    );
    started.push(child);
    const [step] = await waitFor(async () => {
      const steps = await ps(s);
      return steps.length === 1 && steps[0]?.state === "running" ? steps : undefined;
    }, "ps to show the step running");
    await waitFor(() => (ours(job).length === 1 ? true : undefined), "the container to run");
    expect(step?.components).toEqual([{ runtime: "oci", container: bundle, containerId: `psid.${job}`, tasks: 1 }]);
    const table = await jobrt(["ps"], { env: s.env });
    expect(table.stdout).toMatch(
      new RegExp(`\\n${job}\\.0 +run +root +running +\\d+s +${child.pid} +1 +oci +${bundle} id psid\\.${job}\\n$`),
    );
    child.kill("SIGTERM");
    await stopped(child);
    expect(ours(job)).toEqual([]);
  });

  it("a SIGKILLed jobrt's step is dead, with what gc would do; after gc it is gone", async () => {
    const s = site();
    const { child, task } = await startRun(s, ["--runtime", "none"]);
    tasks.push(task);
    // The task writes its pid before jobrt records it: kill jobrt only once the journal has it.
    await waitFor(() => recordedInJournal(join(s.dir, "spool"), task) || undefined, "jobrt to record the task");
    child.kill("SIGKILL");
    await stopped(child);
    const [step] = await ps(s);
    expect(step).toMatchObject({
      kind: "run",
      user: "root",
      state: "dead",
      hostPid: child.pid,
      components: [{ runtime: "none", tasks: 1 }],
      gcAction: "collect",
      gc: "collect it: kill 1 task process group(s) left running, clean up none, remove the entry",
    });
    const table = await jobrt(["ps"], { env: s.env });
    expect(table.stdout).toMatch(
      new RegExp(
        `\\n${step?.jobId}\\.0 +run +root +dead +\\d+s +${child.pid} +1 +none +-\\n  jobrt gc would collect it: kill 1 task process group\\(s\\) left running, clean up none, remove the entry\\n$`,
      ),
    );
    const gc = await jobrt(["gc"], { env: s.env });
    expect(gc.code).toBe(0);
    expect(await ps(s)).toEqual([]);
  });

  it("a user sees their own steps; root sees its own, and every user's with --all; --all is root's", async () => {
    const s = site();
    const mine = await startRun(s, ["--runtime", "none"]);
    const theirs = await startRun(s, ["--runtime", "none"], NOBODY);
    const rootView = await ps(s);
    expect(rootView.map((x) => [x.user, x.hostPid])).toEqual([["root", mine.child.pid]]);
    const all = await ps(s, ["--all"]);
    expect(all.map((x) => [x.user, x.uid, x.hostPid, x.state]).sort()).toEqual(
      [
        ["nobody", NOBODY, theirs.child.pid, "running"],
        ["root", 0, mine.child.pid, "running"],
      ].sort(),
    );
    const userView = await ps(s, [], NOBODY);
    expect(userView.map((x) => [x.user, x.hostPid])).toEqual([["nobody", theirs.child.pid]]);
    const refused = await jobrt(["ps", "--all"], { env: s.env, cwd: "/", uid: NOBODY, gid: NOBODY });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toBe("jobrt: ps: --all is for root (a user sees their own steps: leave --all out)\n");
    for (const c of [mine.child, theirs.child]) c.kill("SIGTERM");
    await Promise.all([stopped(mine.child), stopped(theirs.child)]);
    expect(await ps(s, ["--all"])).toEqual([]);
  });

  it("a jobrt exec task of a Slurm step is listed as exec, with its task id", async () => {
    const s = site();
    const marker = join(tempDir(), "pid");
    const slurm = {
      SLURM_JOB_ID: "4343",
      SLURM_STEP_ID: "1",
      SLURM_PROCID: "3",
      SLURM_LOCALID: "0",
      SLURM_NTASKS: "4",
    };
    const child = spawn(
      process.execPath,
      [
        "--",
        jobrtBin,
        "exec",
        "--runtime",
        "none",
        "--",
        "sh",
        "-c",
        `echo $$ > ${marker}.t; mv ${marker}.t ${marker}; exec sleep 120`,
      ],
      {
        env: { ...s.env, ...slurm },
        stdio: "ignore",
      },
    );
    started.push(child);
    await waitFor(() => (existsSync(marker) ? true : undefined), "the task to start");
    const steps = await waitFor(async () => {
      const list = await ps(s);
      return list[0]?.state === "running" ? list : undefined;
    }, "ps to show the task running");
    expect(steps).toEqual([
      expect.objectContaining({
        jobId: 4343,
        stepId: 1,
        kind: "exec",
        task: 3,
        user: "root",
        state: "running",
        hostPid: child.pid,
        components: [{ runtime: "none", tasks: 1 }],
      }),
    ]);
    const table = await jobrt(["ps"], { env: s.env });
    expect(table.stdout).toMatch(
      new RegExp(`\\n4343\\.1\\.3 +exec +root +running +\\d+s +${child.pid} +1 +none +-\\n$`),
    );
    child.kill("SIGTERM");
    await stopped(child);
    expect(await ps(s)).toEqual([]);
  });

  it("--help says what it lists; an argument is a usage error", async () => {
    const help = await jobrt(["ps", "--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^Usage: jobrt ps \[--all\] \[--json\]/);
    const bad = await jobrt(["ps", "extra"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe('jobrt: ps: unexpected argument "extra"\n');
  });
});
