/**
 * The task forker against what a task or a job user does to it (docs/reliability.md, "Threat
 * model"): a directory the user may not enter, a task that stops its forker. Real root `jobrt run`s
 * of the built CLI, tasks as nobody where it matters.
 */
import { spawn, spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { processStartTime } from "../../packages/launcher/src/processidentity.js";
import { jobrt, jobrtBin, runProgram, tempDir } from "../helpers/jobrt.js";
import { waitFor } from "../helpers/leaks.js";

const NOBODY = 65534;

/** A site with its own SpoolDir and KillWait. */
function site(killWait = 2) {
  const dir = tempDir("jobrt-forker-");
  chmodSync(dir, 0o755);
  const spool = join(dir, "spool");
  mkdirSync(spool, { mode: 0o1777 });
  chmodSync(spool, 0o1777);
  writeFileSync(join(dir, "jobrt.conf"), `SpoolDir=${spool}\nKillWait=${killWait}\n`);
  return { dir, spool, env: { ...process.env, JOBRT_CONF_DIR: dir } };
}

/** A root-only directory (0700) with a secret in it and a subdirectory every user could enter. */
function rootOnlyDir() {
  const top = tempDir("jobrt-rootonly-");
  chmodSync(top, 0o700);
  writeFileSync(join(top, "secret"), "root's secret\n", { mode: 0o600 });
  const sub = join(top, "sub");
  mkdirSync(sub, { mode: 0o777 });
  chmodSync(sub, 0o777);
  writeFileSync(join(sub, "secret"), "root's secret\n", { mode: 0o644 });
  return { top, sub };
}

describe("--chdir is entered as the job user, after the uid drop", () => {
  it("a directory under a 0700 root directory: one line, the task not started, nothing read or written", async () => {
    expect(process.getuid?.()).toBe(0);
    const s = site();
    const { sub } = rootOnlyDir();
    const r = await jobrt(
      ["run", "--runtime", "none", "--uid", "nobody", "-D", sub, "sh", "-c", "cat secret; touch x; echo started"],
      { env: s.env },
    );
    expect(r.stdout).toBe("");
    expect(r.stderr).toBe(`jobrt: task 0: cannot change to directory ${sub}: permission denied\n`);
    expect(r.code).toBe(1);
    expect(existsSync(join(sub, "x"))).toBe(false);
  });

  it("without perl (Node starts the tasks) too", async () => {
    const s = site();
    const { sub } = rootOnlyDir();
    // perl hidden in a mount namespace of this run only.
    const hide =
      'for p in /usr/bin/perl /bin/perl /usr/local/bin/perl; do [ -e $p ] && mount --bind /dev/null $p; done; exec "$@"';
    const r = await runProgram(
      [
        "unshare",
        "-m",
        "--propagation",
        "private",
        "sh",
        "-c",
        hide,
        "sh",
        process.execPath,
        "--",
        jobrtBin,
        "run",
        "--runtime",
        "none",
        "--uid",
        "nobody",
        "-D",
        sub,
        "sh",
        "-c",
        "cat secret; touch x; echo started",
      ],
      { env: s.env },
    );
    expect(r.stdout).toBe("");
    expect(r.stderr).toMatch(/^jobrt: warning: tasks are started by Node \(no perl in [^)]*\): [^\n]*\n/);
    expect(r.stderr.replace(/^jobrt: warning: [^\n]*\n/, "")).toBe(
      `jobrt: task 0: cannot change to directory ${sub}: permission denied\n`,
    );
    expect(r.code).toBe(1);
    expect(existsSync(join(sub, "x"))).toBe(false);
  });

  it("a directory the user may enter still works, and a missing one is reported as before", async () => {
    const s = site();
    const open = tempDir("jobrt-open-");
    chmodSync(open, 0o777);
    const ok = await jobrt(
      ["run", "--runtime", "none", "--uid", "nobody", "-D", open, "sh", "-c", "pwd; id -u; touch x"],
      { env: s.env },
    );
    expect(ok.stderr).toBe("");
    expect(ok.stdout).toBe(`${open}\n${NOBODY}\n`);
    expect(existsSync(join(open, "x"))).toBe(true);
    const { top } = rootOnlyDir();
    // Whether it exists is not nobody's to learn: the same line as for one that does.
    const hidden = await jobrt(["run", "--runtime", "none", "--uid", "nobody", "-D", join(top, "nothing"), "true"], {
      env: s.env,
    });
    expect(hidden.stderr).toBe(
      `jobrt: task 0: cannot change to directory ${join(top, "nothing")}: permission denied\n`,
    );
    expect(hidden.code).toBe(1);
    const missing = await jobrt(["run", "--runtime", "none", "--uid", "nobody", "-D", join(open, "nothing"), "true"], {
      env: s.env,
    });
    expect(missing.stderr).toBe(
      `jobrt: task 0: cannot change to directory ${join(open, "nothing")}: no such directory\n`,
    );
    expect(missing.code).toBe(1);
  });
});

/** What a test started that may outlive it on failure: killed by pid after each test. */
const started: number[] = [];
afterEach(() => {
  for (const pid of started.splice(0)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
});

/** The state letter of /proc/<pid>/stat, undefined once the process is gone (reaped). */
function stateOf(pid: number): string | undefined {
  if (!Number.isInteger(pid) || pid <= 1) throw new Error(`not a pid: ${pid}`);
  try {
    return /^\d+ \(.*\) (\S) /s.exec(readFileSync(`/proc/${pid}/stat`, "utf8"))?.[1];
  } catch {
    return undefined;
  }
}

const gone = (pid: number) => ["Z", "X", undefined].includes(stateOf(pid));

/**
 * A root `jobrt run` whose task stops its own forker (`kill -STOP $PPID`, same uid) and then
 * sleeps: resolves once the forker is stopped, with jobrt's process and the forker's and task's pids.
 */
async function stoppedForker(s: ReturnType<typeof site>, options: string[] = []) {
  const marker = tempDir("jobrt-forker-pids-");
  const task = `echo $PPID > ${marker}/forker; kill -STOP $PPID; echo $$ > ${marker}/task; exec sleep 600`;
  const child = spawn(process.execPath, ["--", jobrtBin, "run", "--runtime", "none", ...options, "sh", "-c", task], {
    env: s.env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout?.setEncoding("utf8").on("data", (d: string) => (output += d));
  child.stderr?.setEncoding("utf8").on("data", (d: string) => (output += d));
  const exited = new Promise<{ code: number | null; signal: string | null; at: number }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal, at: Date.now() })),
  );
  const file = (name: string) => join(marker, name);
  await waitFor(
    () => existsSync(file("task")) && readFileSync(file("task"), "utf8").endsWith("\n"),
    "the task to stop its forker",
  ).catch((error: Error) => {
    throw new Error(`${error.message}; jobrt said: ${output}`);
  });
  const forker = Number(readFileSync(file("forker"), "utf8"));
  const task0 = Number(readFileSync(file("task"), "utf8"));
  started.push(child.pid!, forker, task0);
  await waitFor(() => stateOf(forker) === "T", "the forker to be stopped");
  return { child, forker, task: task0, exited, output: () => output };
}

/**
 * How a step whose forker a task stopped ends: the forker still stopped at the bound is killed and
 * its task reported as SIGKILL (137) with one line; or the stop path's SIGCONT to the step's
 * processes woke it first, and it reported the task's own end by the step's SIGTERM (143); or the
 * task stopped the forker before the forker had reported the task's start, so jobrt never counted
 * it as started and the step ends with the signal that stopped it (130 for SIGINT, 143 for
 * SIGTERM and the time limit), with the same line about the killed forker. Either way jobrt
 * ended: what the cells measure is that it does, within the bound.
 */
function expectKilledOrReported(code: number | null, output: string, stopSignal = 143): void {
  expect([137, 143, stopSignal], output).toContain(code);
  // 143 is also the task's own reported end, which says nothing about the forker.
  if (code === 137 || (code === stopSignal && stopSignal !== 143))
    expect(output).toMatch(/task forker had not reported its tasks' ends 2 s after the step's SIGKILL/);
}

describe("a task that stops its forker", () => {
  it("jobrt still stops on SIGTERM: KillWait, SIGKILL of the tasks, the forker killed a bounded time later, exit", async () => {
    const s = site(2);
    const run = await stoppedForker(s);
    const sent = Date.now();
    run.child.kill("SIGTERM");
    // KillWait 2 s + the forker's 2 s bound; generous: a loaded machine is not a timing benchmark.
    const timeout = new Promise<undefined>((r) => setTimeout(() => r(undefined), 20_000));
    const end = await Promise.race([run.exited, timeout]);
    expect(end, `jobrt still ran 20 s after SIGTERM: ${run.output()}`).toBeDefined();
    expect(end!.at - sent).toBeLessThan(20_000);
    expectKilledOrReported(end!.code, run.output());
    await waitFor(() => gone(run.forker) && gone(run.task), "the forker and its task to be gone");
  });

  it.each([
    ["SIGINT", []],
    ["the time limit (-t 0:3)", ["-t", "0:3"]],
  ])("and on %s", async (what, options) => {
    const s = site(2);
    const run = await stoppedForker(s, options);
    const sent = Date.now();
    if (what === "SIGINT") run.child.kill("SIGINT");
    const timeout = new Promise<undefined>((r) => setTimeout(() => r(undefined), 25_000));
    const end = await Promise.race([run.exited, timeout]);
    expect(end, `jobrt still ran 25 s later: ${run.output()}`).toBeDefined();
    expect(end!.at - sent).toBeLessThan(25_000);
    expectKilledOrReported(end!.code, run.output(), what === "SIGINT" ? 130 : 143);
    await waitFor(() => gone(run.forker) && gone(run.task), "the forker and its task to be gone");
  });

  it("jobrt SIGKILLed: the forker is recorded in the step's journal entry, and jobrt gc kills it", async () => {
    const s = site(1);
    const run = await stoppedForker(s);
    run.child.kill("SIGKILL");
    await run.exited;
    expect(stateOf(run.forker)).toBe("T");
    const gc = await jobrt(["gc"], { env: s.env, timeoutMs: 60_000 });
    expect(gc.stderr).toBe("");
    expect(gc.code).toBe(0);
    await waitFor(() => gone(run.forker) && gone(run.task), "the forker and its task to be gone");
  });
});

describe("the forker in ps", () => {
  it("its command line is a short name, not its program (6 KB of perl were its argv)", async () => {
    const s = site();
    // The task reads its parent's, the forker's, while the forker runs.
    const r = await jobrt(
      [
        "run",
        "--runtime",
        "none",
        "sh",
        "-c",
        'od -An -v -tx1 /proc/$PPID/cmdline; echo "comm $(cat /proc/$PPID/comm)"',
      ],
      { env: s.env },
    );
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const [hex = "", comm] = r.stdout.split("comm ");
    const bytes = Buffer.from(hex.replace(/\s+/g, ""), "hex");
    expect(bytes.length).toBeGreaterThan(0);
    expect(bytes.length).toBeLessThan(512);
    expect(bytes.toString("latin1").split("\0")[0]).toBe("jobrt-task-forker");
    expect(bytes.toString("latin1")).not.toContain("syscall");
    expect(comm).toBe("jobrt-task-fork\n");
  });
});

describe("a forker record the job user rewrote", () => {
  it("naming root's process with its true start time and uid 0: root's gc does not kill it, and still collects the user's step", async () => {
    const s = site(1);
    const marker = tempDir("jobrt-forker-user-");
    chmodSync(marker, 0o777);
    const argv = [
      "setpriv",
      "--reuid",
      String(NOBODY),
      "--regid",
      String(NOBODY),
      "--clear-groups",
      process.execPath,
      "--",
      jobrtBin,
      "run",
      "--runtime",
      "none",
      "sh",
      "-c",
      `echo $$ > ${marker}/task; exec sleep 600`,
    ];
    const child = spawn(argv[0]!, argv.slice(1), { env: { ...s.env, HOME: "/" }, cwd: "/", stdio: "ignore" });
    const exited = new Promise((resolve) => child.once("exit", resolve));
    started.push(child.pid!);
    const taskFile = join(marker, "task");
    await waitFor(
      () => existsSync(taskFile) && readFileSync(taskFile, "utf8").endsWith("\n"),
      "nobody's task to start",
    );
    const task = Number(readFileSync(taskFile, "utf8"));
    started.push(task);
    const journal = join(s.spool, `jobs.${NOBODY}`);
    const entry = () =>
      (existsSync(journal) ? readdirSync(journal) : [])
        .filter((j) => /^\d+$/.test(j))
        .map((j) => join(journal, j, "step-0"))
        .find(
          (d) =>
            existsSync(join(d, "forker")) &&
            existsSync(join(d, "pids")) &&
            readFileSync(join(d, "pids"), "utf8").startsWith(`${task} `),
        );
    await waitFor(() => entry() !== undefined, "the task and the forker to be recorded");
    const dir = entry()!;
    child.kill("SIGKILL");
    await exited;
    const victim = spawn("sleep", ["600"], { detached: true, stdio: "ignore" });
    started.push(victim.pid!);
    const start = processStartTime(victim.pid!);
    expect(start).toBeDefined();
    // What nobody may do to its own journal: the record now names root's process, truly.
    const forge = spawnSync(
      "sh",
      [
        "-c",
        'printf "%s %s 0\\n" "$1" "$2" > "$3/forker.x" && mv "$3/forker.x" "$3/forker"',
        "sh",
        String(victim.pid),
        start!,
        dir,
      ],
      { uid: NOBODY, gid: NOBODY, encoding: "utf8" },
    );
    expect(forge.stderr).toBe("");
    expect(forge.status).toBe(0);
    const gc = await jobrt(["gc", "-v"], { env: s.env, timeoutMs: 60_000 });
    expect(gc.code, gc.stderr).toBe(0);
    await waitFor(() => gone(task), `nobody's task to be killed by gc (${gc.stdout}${gc.stderr})`);
    expect(stateOf(victim.pid!)).toMatch(/^[RS]$/);
  });
});
