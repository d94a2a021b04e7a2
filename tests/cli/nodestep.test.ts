import { execFileSync, spawn } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { waitFor } from "../helpers/leaks.js";
import { type RunResult, jobrtEntry, requires, runProgram, tempDir } from "../helpers/jobrt.js";

// The node step (docs/node-step.md) without Slurm: each task is the `jobrt` entry with the
// environment slurmstepd gives a task (tests/slurm/nodestep.test.ts runs it under real srun).
// TMPDIR is the test's own, so its rendezvous directory is too.

interface Site {
  dir: string;
  tmp: string;
  log: string;
  env: Record<string, string>;
}

function site(): Site {
  const dir = tempDir("jobrt-nodestep-");
  chmodSync(dir, 0o755);
  const tmp = join(dir, "tmp");
  mkdirSync(tmp, { mode: 0o1777 });
  chmodSync(tmp, 0o1777);
  const log = join(dir, "node.log");
  writeFileSync(join(dir, "jobrt.conf"), `SpoolDir=${join(dir, "spool")}\nKillWait=2\nNodeLog=file:${log}\n`);
  const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", JOBRT_CONF_DIR: dir, TMPDIR: tmp };
  return { dir, tmp, log, env };
}

/** The environment slurmstepd gives task `id` of `n` on node n1. */
function slurmTask(s: Site, job: number, n: number, id: number): Record<string, string> {
  return {
    ...s.env,
    SLURM_JOB_ID: String(job),
    SLURM_STEP_ID: "0",
    SLURMD_NODENAME: "n1",
    SLURM_STEP_NODELIST: "n1",
    SLURM_STEP_TASKS_PER_NODE: String(n),
    SLURM_NTASKS: String(n),
    SLURM_STEP_NUM_TASKS: String(n),
    SLURM_NNODES: "1",
    SLURM_NODEID: "0",
    SLURM_PROCID: String(id),
    SLURM_LOCALID: String(id),
  };
}

/** `n` tasks of one step started at once, each `jobrt exec --runtime none -- sh -c script`. */
function step(
  s: Site,
  job: number,
  n: number,
  script: string,
  extra: Record<string, string> = {},
): Promise<RunResult[]> {
  return Promise.all(
    Array.from({ length: n }, (_, id) =>
      runProgram([jobrtEntry, "exec", "--runtime", "none", "--", "sh", "-c", script], {
        env: { ...slurmTask(s, job, n, id), ...extra },
        timeoutMs: 60_000,
      }),
    ),
  );
}

/** The node log's lines of `job`: [kind, pid, the rest]. */
function logLines(s: Site, job: number): { kind: string; pid: number; text: string }[] {
  if (!existsSync(s.log)) return [];
  return readFileSync(s.log, "utf8")
    .split("\n")
    .map((l) => /jobrt\[(\d+)\]: (step-start|step-end) (job=(\d+) .*)$/.exec(l))
    .filter((m): m is RegExpExecArray => m !== null && Number(m[4]) === job)
    .map((m) => ({ kind: m[2]!, pid: Number(m[1]), text: m[3]! }));
}

describe("jobrt exec: a node's tasks of one step share one jobrt (docs/node-step.md)", () => {
  requires({ root: process.getuid?.() === 0, "a built jobrt entry": existsSync(jobrtEntry) });

  it("four tasks: one jobrt's start and end lines, each task's own status, stdout and stderr", async () => {
    const s = site();
    const r = await step(s, 9101, 4, 'echo "out $SLURM_PROCID"; echo "err $SLURM_PROCID" >&2; exit $SLURM_PROCID');
    expect(r.map((t) => [t.code, t.stdout, t.stderr])).toEqual(
      [0, 1, 2, 3].map((i) => [i, `out ${i}\n`, `err ${i}\n`]),
    );
    const lines = logLines(s, 9101);
    expect(lines.map((l) => l.kind)).toEqual(["step-start", "step-end"]);
    expect(lines[1]!.text).toMatch(/ status=\d node_tasks=4 task_status=0:0,1:1,2:2,3:3 /);
    // The rendezvous directory is the user's own, and the socket is gone with the step.
    const st = execFileSync("stat", ["-c", "%u %a", join(s.tmp, "jobrt-0")], { encoding: "utf8" });
    expect(st.trim()).toBe("0 700");
    expect(execFileSync("ls", ["-A", join(s.tmp, "jobrt-0")], { encoding: "utf8" }).trim()).toBe("lock");
  });

  it("a setup that fails: every task says so on its own stderr and exits 1", async () => {
    const s = site();
    const missing = join(s.dir, "no-such-bundle");
    const r = await Promise.all(
      [0, 1, 2].map((id) =>
        runProgram([jobrtEntry, "exec", "--runtime", "oci", "--container", missing, "--", "true"], {
          env: slurmTask(s, 9111, 3, id),
        }),
      ),
    );
    for (const t of r) {
      expect(t.code).toBe(1);
      expect(t.stderr).toMatch(new RegExp(`^jobrt: .*${missing}`, "m"));
    }
  });

  it("the command run by a relative path (dist/jobrt from its package): its tasks still join", async () => {
    const s = site();
    const r = await Promise.all(
      [0, 1].map((id) =>
        runProgram(["dist/jobrt", "exec", "--runtime", "none", "--", "sh", "-c", 'exit "$SLURM_PROCID"'], {
          env: slurmTask(s, 9113, 2, id),
          cwd: dirname(dirname(jobrtEntry)),
        }),
      ),
    );
    expect(r.map((t) => t.code)).toEqual([0, 1]);
    expect(logLines(s, 9113).at(-1)?.text).toMatch(/ node_tasks=2 task_status=0:0,1:1 /);
  });

  it("JOBRT_NODE_STEP=0: every task runs its own jobrt, as before", async () => {
    const s = site();
    const r = await step(s, 9102, 3, "exit $SLURM_PROCID", { JOBRT_NODE_STEP: "0" });
    expect(r.map((t) => t.code)).toEqual([0, 1, 2]);
    const lines = logLines(s, 9102);
    expect(lines.filter((l) => l.kind === "step-start")).toHaveLength(3);
    expect(new Set(lines.map((l) => l.pid)).size).toBe(3);
  });

  it("a task with other jobrt options or in another directory runs its own jobrt (srun --multi-prog)", async () => {
    const s = site();
    const elsewhere = tempDir("jobrt-nodestep-cwd-");
    const run = (id: number, options: string[], cwd?: string) =>
      runProgram([jobrtEntry, "exec", "--runtime", "none", ...options, "--", "sh", "-c", 'pwd; exit "$SLURM_PROCID"'], {
        env: slurmTask(s, 9112, 3, id),
        ...(cwd ? { cwd } : {}),
      });
    const r = await Promise.all([run(0, []), run(1, ["-v"]), run(2, [], elsewhere)]);
    expect(r.map((t) => t.code)).toEqual([0, 1, 2]);
    expect(r[2]!.stdout).toBe(`${elsewhere}\n`);
    expect(new Set(logLines(s, 9112).map((l) => l.pid)).size).toBe(3);
  });

  it("a task killed by a signal: its status is 128+N, the others' their own", async () => {
    const s = site();
    const r = await step(s, 9103, 3, '[ "$SLURM_PROCID" = 1 ] && kill -USR1 $$; exit 0');
    expect(r.map((t) => t.code)).toEqual([0, 138, 0]);
    expect(logLines(s, 9103).at(-1)?.text).toMatch(/ node_tasks=3 task_status=0:0,1:138,2:0 /);
  });

  it("the node's jobrt SIGKILLed while tasks run: the joined tasks are killed and their jobrt says why", async () => {
    const s = site();
    const tasks = step(s, 9104, 3, "exec sleep 30.25");
    const sleepers = () => execFileSync("sh", ["-c", "pgrep -xf 'sleep 30.25' | wc -l"], { encoding: "utf8" }).trim();
    // Every task joined and running: the kill finds each joiner with a task to stop.
    await waitFor(() => logLines(s, 9104).length > 0 && sleepers() === "3", "the node step's three tasks");
    const host = logLines(s, 9104)[0]!.pid;
    process.kill(host, "SIGKILL");
    const r = await tasks;
    const joined = r.filter((t) => t.code === 137 && t.stderr.includes("the node's jobrt of this step is gone"));
    expect(joined).toHaveLength(2);
    expect(sleepers()).toBe("0");
  });

  it("a joiner SIGKILLed: its task's process group is killed, the other tasks run on", async () => {
    const s = site();
    const children = [0, 1, 2].map((id) => {
      const child = spawn(jobrtEntry, ["exec", "--runtime", "none", "--", "sleep", "27.25"], {
        env: slurmTask(s, 9110, 3, id),
        stdio: "ignore",
      });
      const ended = new Promise<string>((resolve) =>
        child.once("exit", (code, signal) => resolve(`${code}/${signal}`)),
      );
      return { child, ended };
    });
    const sleepers = () => execFileSync("sh", ["-c", "pgrep -xf 'sleep 27.25' | wc -l"], { encoding: "utf8" }).trim();
    await waitFor(() => logLines(s, 9110).length > 0 && sleepers() === "3", "the node step's three tasks");
    const host = logLines(s, 9110)[0]!.pid;
    const [victim, other] = children.filter((c) => c.child.pid !== host);
    victim!.child.kill("SIGKILL");
    expect(await victim!.ended).toBe("null/SIGKILL");
    await waitFor(() => sleepers() === "2", "the SIGKILLed joiner's task to be killed");
    // The others are still running: a stop of the step (SIGTERM, as srun's) ends them as their own.
    for (const c of children) if (c !== victim) c.child.kill("SIGTERM");
    expect(await Promise.all(children.filter((c) => c !== victim).map((c) => c.ended))).toEqual([
      "143/null",
      "143/null",
    ]);
    expect(other).toBeDefined();
    expect(sleepers()).toBe("0");
    expect(logLines(s, 9110).map((l) => l.kind)).toEqual(["step-start", "step-end"]);
  });

  it("a rendezvous directory that is not the user's own (another user's, a symlink): each task runs its own jobrt", async () => {
    for (const plant of ["other user", "symlink"] as const) {
      const s = site();
      const dir = join(s.tmp, "jobrt-0");
      if (plant === "other user") {
        mkdirSync(dir, { mode: 0o777 });
        chownSync(dir, 65534, 65534);
      } else symlinkSync(tempDir("jobrt-nodestep-elsewhere-"), dir);
      const job = plant === "other user" ? 9105 : 9106;
      const r = await step(s, job, 3, "exit $SLURM_PROCID");
      expect(r.map((t) => [t.code, t.stderr])).toEqual([0, 1, 2].map((i) => [i, ""]));
      expect(new Set(logLines(s, job).map((l) => l.pid)).size, plant).toBe(3);
    }
  });

  it("a stale socket (its jobrt died) is replaced; a listener that never answers is given up on", async () => {
    const s = site();
    const dir = join(s.tmp, "jobrt-0");
    mkdirSync(dir, { mode: 0o700 });
    // A socket file nobody listens on, as a SIGKILLed jobrt leaves it.
    execFileSync("perl", [
      "-e",
      `use Socket; socket(S, PF_UNIX, SOCK_STREAM, 0); bind(S, pack_sockaddr_un("${dir}/n1.9107.0.sock")) or die`,
    ]);
    const r = await step(s, 9107, 3, "exit $SLURM_PROCID");
    expect(r.map((t) => t.code)).toEqual([0, 1, 2]);
    expect(logLines(s, 9107).filter((l) => l.kind === "step-start")).toHaveLength(1);
    // A listener that takes each connection and closes it before any answer (a jobrt killed in
    // its setup, again and again): every task tries a few times, then runs its own jobrt.
    const mute = createServer((c) => c.destroy());
    await new Promise<void>((resolve) => mute.listen(join(dir, "n1.9108.0.sock"), resolve));
    try {
      const m = await step(s, 9108, 2, "exit $SLURM_PROCID");
      expect(m.map((t) => [t.code, t.stderr])).toEqual([
        [0, ""],
        [1, ""],
      ]);
      expect(new Set(logLines(s, 9108).map((l) => l.pid)).size).toBe(2);
    } finally {
      mute.close();
    }
  });

  it("a connection that is not a joiner (garbage; silence) does not keep the step from ending", async () => {
    const s = site();
    const tasks = step(s, 9109, 2, 'sleep 1; exit "$SLURM_PROCID"');
    const path = join(s.tmp, "jobrt-0", "n1.9109.0.sock");
    await waitFor(() => existsSync(path), "the node step's socket");
    // And one that connects and says nothing (a stopped joiner): given up on after 10 s.
    const silent = spawn("perl", [
      "-e",
      `use Socket; socket(S, PF_UNIX, SOCK_STREAM, 0); connect(S, pack_sockaddr_un("${path}")) or die "connect: $!"; sleep 60`,
    ]);
    const garbage = spawn("perl", [
      "-e",
      `use Socket; socket(S, PF_UNIX, SOCK_STREAM, 0); connect(S, pack_sockaddr_un("${path}")) or die "connect: $!"; syswrite(S, "99999999999\\nJ1"); sleep 1`,
    ]);
    const r = await tasks;
    garbage.kill();
    silent.kill();
    expect(r.map((t) => [t.code, t.stderr])).toEqual([
      [0, ""],
      [1, ""],
    ]);
    expect(logLines(s, 9109).at(-1)?.text).toMatch(/ node_tasks=2 task_status=0:0,1:1 /);
  });
});
