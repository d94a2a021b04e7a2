/**
 * A create/start task (src/createstart.ts): createstart.pl runs the whole lifecycle, the common
 * case and every unusual path, with no node process. Real runc, real busybox bundles.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, readFileSync, readlinkSync, realpathSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ExecSpec, NodeConf, StepRecord, TaskRecord } from "@jobrt/core";
import { describe, expect, test } from "vitest";
import { findProgram } from "../src/conf.js";
import { createStartArgv } from "../src/createstart.js";
import { pluginHost } from "@jobrt/testkit";
import plugin from "../src/index.js";
import {
  createStartConf,
  haveRunc,
  isRoot,
  leftoverTaskDir,
  makeBundle,
  runcIds,
  stepTaskDir,
  writeConf,
} from "./fixtures.js";
import { makeNode, makeStep, runStep, tempDir, trackedJobs } from "./host.js";

/** Resolves once `ready()` holds; throws after `ms`. */
async function waitFor(ready: () => boolean, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!ready()) {
    if (Date.now() > end) throw new Error(`not ready within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The plugin driven as the host drives it (API 2 contexts, setup's state handed on). */
const host = pluginHost(plugin);

const RUNC = "runc --root /run/runc";

/** The create/start conf whose first RunTimeDelete (the task's own) runs `instead` and not the delete. */
function firstDeleteRuns(instead: string): string {
  const once = join(tempDir(), "once");
  return createStartConf().replace(
    /RunTimeDelete="([^"]*)"/,
    `RunTimeDelete="mkdir ${once} 2>/dev/null && ${instead}; $1"`,
  );
}

/** Setup, taskInit and run, then the task started as the host starts it (its pid recorded for cleanup). */
async function startTask(node: NodeConf, step: StepRecord, task: TaskRecord): Promise<ChildProcess> {
  await host.setup(node, step);
  await host.taskInit(node, step, task);
  const spec = (await host.run(node, step, task)) as ExecSpec;
  const child = spawn(spec.argv[0] as string, spec.argv.slice(1), { env: spec.env, cwd: spec.cwd, stdio: "ignore" });
  task.pid = child.pid;
  return child;
}

describe("create/start (createstart.pl) with real runc", () => {
  const job = trackedJobs();

  test("prerequisites: runc, root and perl are here (these tests never skip)", () => {
    expect(haveRunc).toBe(true);
    expect(isRoot).toBe(true);
    expect(findProgram("perl", process.env.PATH)).toBeDefined();
  });

  const bundle = makeBundle(join(tempDir(), "bundle"));

  /** A step with `conf` whose container traps SIGTERM (exit 7), sent SIGTERM to its group once it runs. */
  const stopTrappingTask = (conf: string) =>
    runStep(plugin, {
      confDir: writeConf(tempDir(), conf),
      spoolDir: tempDir(),
      jobId: job(),
      argv: ["sh", "-c", 'trap "exit 7" TERM; echo trapped; sleep 30 & wait'],
      container: { value: bundle },
      signal: "SIGTERM",
      signalWhen: ({ stdout }) => stdout.includes("trapped"),
    });

  /** A `true` step whose task's own RunTimeDelete exits 3 without deleting; `beforeCleanup` as runStep's. */
  const firstDeleteFailsStep = (spoolDir: string, jobId: number, beforeCleanup?: () => void) =>
    runStep(plugin, {
      confDir: writeConf(tempDir(), firstDeleteRuns("exit 3")),
      spoolDir,
      jobId,
      argv: ["true"],
      container: { value: bundle },
      ...(beforeCleanup ? { beforeCleanup } : {}),
    });

  test("the task process stays perl from start to exit: no node process starts, and exit status 3 propagates", async () => {
    const confDir = writeConf(tempDir(), createStartConf());
    const step = makeStep({
      confDir,
      spoolDir: tempDir(),
      jobId: job(),
      argv: ["sh", "-c", "sleep 0.5; exit 3"],
      container: { value: bundle },
    });
    const node = makeNode({ confDir, spoolDir: tempDir() });
    const task = step.tasks[0] as TaskRecord;
    const node20 = realpathSync(process.execPath);
    const seen = new Set<string>();
    try {
      const child = await startTask(node, step, task);
      const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
      let done = false;
      void exited.then(() => {
        done = true;
      });
      while (!done) {
        try {
          seen.add(readlinkSync(`/proc/${child.pid}/exe`));
        } catch {
          // between exit and the 'exit' event
        }
        await new Promise((r) => setTimeout(r, 5));
      }
      expect(await exited).toBe(3);
      expect(seen.size).toBeGreaterThan(0);
      expect([...seen].some((exe) => exe === node20)).toBe(false);
    } finally {
      await host.cleanup(node, step);
    }
  });

  test("%p in RunTimeStart, RunTimeKill and RunTimeDelete is the container's pid; SIGTERM is forwarded through RunTimeKill", async () => {
    const out = tempDir();
    const conf = createStartConf()
      .replace(`RunTimeStart="${RUNC}`, `RunTimeStart="echo %p > ${out}/start; ${RUNC}`)
      .replace(`RunTimeKill="${RUNC}`, `RunTimeKill="echo %p > ${out}/kill; ${RUNC}`)
      .replace(`RunTimeDelete="${RUNC}`, `RunTimeDelete="echo %p > ${out}/delete; ${RUNC}`);
    const r = await stopTrappingTask(conf);
    expect(r.tasks[0]?.code, r.tasks[0]?.stderr).toBe(7);
    const pid = readFileSync(join(out, "start"), "utf8");
    expect(pid).toMatch(/^[1-9]\d*\n$/);
    expect(readFileSync(join(out, "kill"), "utf8")).toBe(pid);
    expect(readFileSync(join(out, "delete"), "utf8")).toBe(pid);
  });

  test("a stop signal to the task's group while RunTimeStart is still running (the container already is): it reaches the container through RunTimeKill, not the start command", async () => {
    // The start command lingers after starting the container: a group signal then lands in it.
    const conf = createStartConf().replace(/RunTimeStart="([^"]*)"/, 'RunTimeStart="$1; sleep 1"');
    const r = await stopTrappingTask(conf);
    expect(r.tasks[0]?.stderr).toBe("");
    expect(r.tasks[0]?.code).toBe(7);
  });

  test("a signal before the container started: it says so, the task dies of it, the container is deleted", async () => {
    const jobId = job();
    const out = tempDir();
    const conf = createStartConf().replace(
      `RunTimeCreate="${RUNC}`,
      `RunTimeCreate="touch ${out}/creating; sleep 1.5; ${RUNC}`,
    );
    const signalWhen = () => existsSync(join(out, "creating"));
    const r = await runStep(plugin, {
      confDir: writeConf(tempDir(), conf),
      spoolDir: tempDir(),
      jobId,
      argv: ["true"],
      container: { value: bundle },
      signal: "SIGTERM",
      signalWhen,
      killWait: 30,
    });
    expect(r.tasks[0]?.signal).toBe("SIGTERM");
    expect(r.tasks[0]?.stderr).toBe("jobrt-oci: SIGTERM before the container started\n");
    expect(runcIds().filter((id) => id.includes(`.${jobId}.`))).toEqual([]);
  });

  test("RunTimeStart killed by a signal: the line names the signal and the command, 125, the container is deleted", async () => {
    const jobId = job();
    const script = join(tempDir(), "start.sh");
    writeFileSync(script, "kill -s KILL $$\n");
    const conf = createStartConf().replace(/RunTimeStart="[^"]*"/, `RunTimeStart="exec sh ${script}"`);
    const r = await runStep(plugin, {
      confDir: writeConf(tempDir(), conf),
      spoolDir: tempDir(),
      jobId,
      argv: ["true"],
      container: { value: bundle },
    });
    expect(r.tasks[0]?.code).toBe(125);
    expect(r.tasks[0]?.stderr).toBe(`jobrt-oci: RunTimeStart was killed by SIGKILL: exec sh ${script}\n`);
    expect(runcIds().filter((id) => id.includes(`.${jobId}.`))).toEqual([]);
  });

  test("a RunTimeDelete that fails is reported as teardown.ts reports it; the task's status stands", async () => {
    const conf = createStartConf().replace(/RunTimeDelete="([^"]*)"/, 'RunTimeDelete="$1; echo nope >&2; exit 3"');
    const r = await runStep(plugin, {
      confDir: writeConf(tempDir(), conf),
      spoolDir: tempDir(),
      jobId: job(),
      argv: ["true"],
      container: { value: bundle },
    });
    expect(r.tasks[0]?.code).toBe(0);
    expect(r.tasks[0]?.stderr).toBe("jobrt-oci: RunTimeDelete exited with status 3: nope\n");
  });

  test.each([
    ["succeeded", "", "q d"],
    ["failed", "; exit 3", "q d q"],
  ])(
    "RunTimeDelete at the task's end %s: the host's cleanup queries the container again only when it failed",
    async (_, deleteTail, commands) => {
      const log = join(tempDir(), "log");
      const conf = createStartConf()
        .replace(`RunTimeQuery="${RUNC}`, `RunTimeQuery="echo q >> ${log}; ${RUNC}`)
        .replace(/RunTimeDelete="([^"]*)"/, `RunTimeDelete="echo d >> ${log}; $1${deleteTail}"`);
      const jobId = job();
      const r = await runStep(plugin, {
        confDir: writeConf(tempDir(), conf),
        spoolDir: tempDir(),
        jobId,
        argv: ["true"],
        container: { value: bundle },
      });
      expect(r.tasks[0]?.code, r.tasks[0]?.stderr).toBe(0);
      // createstart.pl: the query after RunTimeCreate, the delete at the end; cleanup: its query (which
      // finds the container gone: the failing delete had deleted it before its exit 3).
      expect(readFileSync(log, "utf8").split("\n").filter(Boolean).join(" ")).toBe(commands);
      expect(runcIds().filter((id) => id.includes(`.${jobId}.`))).toEqual([]);
    },
  );

  test("a container.deleted a crashed run left in the task dir does not make cleanup skip this run's container (W9)", async () => {
    const jobId = job();
    const spoolDir = tempDir();
    leftoverTaskDir(spoolDir, jobId, { "container.deleted": "" });
    // The task's own RunTimeDelete fails without deleting: only the host's cleanup deletes it.
    const r = await firstDeleteFailsStep(spoolDir, jobId);
    expect(r.tasks[0]?.code, r.tasks[0]?.stderr).toBe(0);
    expect(r.tasks[0]?.stderr).toBe("jobrt-oci: RunTimeDelete exited with status 3: \n");
    expect(runcIds().filter((id) => id.includes(`.${jobId}.`))).toEqual([]);
  });

  test("hostile: a FIFO planted as container.deleted before cleanup is not taken for the note; cleanup deletes the container, no hang", async () => {
    const jobId = job();
    const spoolDir = tempDir();
    const r = await firstDeleteFailsStep(spoolDir, jobId, () =>
      execFileSync("mkfifo", [join(stepTaskDir(spoolDir, jobId), "container.deleted")]),
    );
    expect(r.tasks[0]?.code, r.tasks[0]?.stderr).toBe(0);
    expect(runcIds().filter((id) => id.includes(`.${jobId}.`))).toEqual([]);
  });

  test("the supervisor SIGKILLed while RunTimeStart hangs: its watchdog runs Kill and Delete, and kills a hanging Delete's whole process group after the delete time-out", async () => {
    const jobId = job();
    const out = tempDir();
    // The watchdog's Delete hangs, with a process of its own in the background; the host's
    // cleanup later runs the real one.
    const conf = firstDeleteRuns(`{ sleep 61 & echo $! > ${out}/background; sleep 62; }`).replace(
      /RunTimeStart="[^"]*"/,
      `RunTimeStart="touch ${out}/starting; sleep 60"`,
    );
    const confDir = writeConf(tempDir(), conf);
    const spoolDir = tempDir();
    const step = makeStep({ confDir, spoolDir, jobId, argv: ["true"], container: { value: bundle } });
    const node = makeNode({ confDir, spoolDir });
    const task = step.tasks[0] as TaskRecord;
    const saved = process.env.JOBRT_OCI_TIMEOUTS;
    process.env.JOBRT_OCI_TIMEOUTS = "delete=1";
    const pidOf = (file: string) => Number(readFileSync(file, "utf8").trim());
    const alive = (pid: number) =>
      existsSync(`/proc/${pid}`) && !readFileSync(`/proc/${pid}/stat`, "utf8").includes(") Z ");
    try {
      const child = await startTask(node, step, task);
      const exited = new Promise((r) => child.on("exit", r));
      await waitFor(() => existsSync(join(out, "starting")), 20_000);
      const watchdog = pidOf(join(stepTaskDir(spoolDir, jobId), "watchdog.pid"));
      expect(readFileSync(`/proc/${watchdog}/cmdline`, "utf8")).toBe("jobrt-oci-watchdog\0");
      child.kill("SIGKILL");
      await exited;
      await waitFor(() => existsSync(join(out, "background")), 10_000);
      const background = pidOf(join(out, "background"));
      // Kill (10 s bound, immediate here) then the Delete's 1 s: the watchdog is gone, and so is
      // everything its Delete started.
      await waitFor(() => !alive(watchdog), 8_000);
      expect(alive(background)).toBe(false);
    } finally {
      if (saved === undefined) delete process.env.JOBRT_OCI_TIMEOUTS;
      else process.env.JOBRT_OCI_TIMEOUTS = saved;
      await host.cleanup(node, step);
    }
    expect(runcIds().filter((id) => id.includes(`.${jobId}.`))).toEqual([]);
  });

  test("without perl, or on an architecture whose prctl number is not known, there is no create/start argv (the plugin refuses with ERR_LAUNCH)", () => {
    const watchdog = { taskDir: "/t", create: "c", kill: "", delete: "" };
    const spec = {
      start: "s",
      startProblem: "",
      query: "q",
      kill: "",
      delete: "",
      timeouts: { create: 1, start: 1, query: 1, kill: 1, delete: 1 },
      graceMs: 1,
      verbose: false,
    };
    const perl = findProgram("perl", process.env.PATH);
    expect(createStartArgv(perl, watchdog, spec)?.slice(0, 3)).toEqual([perl, "-f", "--"]);
    expect(createStartArgv(undefined, watchdog, spec)).toBeUndefined();
    expect(createStartArgv(perl, watchdog, spec, "mips")).toBeUndefined();
  });
});
