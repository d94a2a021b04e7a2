import { spawn } from "node:child_process";
import { chownSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { jobrt, jobrtBin, tempDir } from "../helpers/jobrt.js";

function site() {
  const dir = tempDir("jobrt-gc-");
  const spool = join(dir, "spool");
  writeFileSync(join(dir, "jobrt.conf"), `SpoolDir=${spool}\nKillWait=1\n`);
  return { dir, spool, env: { ...process.env, JOBRT_CONF_DIR: dir } };
}

async function waitFor(check: () => boolean, what: string, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

function steps(spool: string): string[] {
  const jobs = join(spool, "jobs");
  if (!existsSync(jobs)) return [];
  return readdirSync(jobs)
    .filter((j) => /^\d+$/.test(j))
    .flatMap((j) => readdirSync(join(jobs, j)).map((s) => `${j}/${s}`));
}

/** Starts `jobrt run` with tasks that record their pids, and waits until all have started. */
async function startStep(s: ReturnType<typeof site>, n: number) {
  const marker = tempDir();
  const child = spawn(process.execPath, ["--", jobrtBin, "run", "-n", String(n), "--runtime", "none", "sh", "-c", `echo $$ > ${marker}/$SLURM_PROCID; exec sleep 120`], {
    env: s.env,
    stdio: "ignore",
  });
  await waitFor(() => readdirSync(marker).length === n, "tasks to start");
  const pids = readdirSync(marker).map((f) => Number(readFileSync(join(marker, f), "utf8")));
  return { child, pids };
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
    const slurm = { SLURM_JOB_ID: "4242", SLURM_STEP_ID: "1", SLURM_PROCID: "3", SLURM_LOCALID: "0", SLURM_NTASKS: "4" };
    const child = spawn(process.execPath, ["--", jobrtBin, "exec", "--runtime", "none", "--", "sh", "-c", `echo $$ > ${marker}/pid; exec sleep 120`], {
      env: { ...s.env, ...slurm },
      stdio: "ignore",
    });
    await waitFor(() => readdirSync(marker).length === 1, "the task to start");
    const pid = Number(readFileSync(join(marker, "pid"), "utf8"));
    expect(steps(s.spool)).toEqual([`4242/exec-1.3.${child.pid}`]);
    child.kill("SIGKILL");
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
