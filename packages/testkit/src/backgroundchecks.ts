import { setTimeout as sleep } from "node:timers/promises";
import { NOT_SUPPORTED, type NodeConf, type StepRecord, type TaskRecord } from "@jobrt/core";
import { procStat } from "@jobrt/host-services";
import type { TestContext } from "vitest";
import { type LaunchOptions, type LaunchResult, launchTask } from "./launch.js";
import { type ProcessInfo, liveStepProcesses, markedProcesses } from "./processes.js";
import { leftovers } from "./stepchecks.js";
import { type SuiteKit, fail } from "./suitekit.js";

let marks = 0;

/**
 * A task that starts a background loop and then exits (or, with `stay`, keeps running). Both carry
 * `mark` in their command lines ($0 of each `sh -c`), which is how the kit finds them afterwards:
 * a pid the task prints is one of its pid namespace's, not the host's. The loop's output goes to
 * /dev/null so that a loop that escaped cannot hold the task's pipes open.
 */
function backgroundTask(mark: string, stay: boolean): string[] {
  const loop = `sh -c 'while :; do sleep 1; done' ${mark}-bg </dev/null >/dev/null 2>&1 &`;
  return ["sh", "-c", `${loop} echo jobrt-testkit-bg-started; ${stay ? "while :; do sleep 1; done" : "exit 0"}`, mark];
}

interface Outcome {
  launched: LaunchResult | undefined;
  left: ProcessInfo[];
}

/**
 * One task of `argv` launched as the host launches it (tracked by `procTrack`), then the step's
 * cleanup; what of the task is still running afterwards (marked, or in its group or session) is
 * killed and returned.
 */
async function runMarked(
  kit: SuiteKit,
  n: NodeConf,
  mark: string,
  stay: boolean,
  launch: LaunchOptions,
): Promise<Outcome> {
  const s: StepRecord = kit.step({ tasks: 1, argv: backgroundTask(mark, stay) });
  let pending: Promise<LaunchResult> | undefined;
  try {
    const [result] = await kit.setupAndRun(n, s);
    const task = s.tasks[0];
    if (result === undefined || task === undefined) fail("run gave no result for the task");
    let settled = false;
    pending = launchTask(result, s, task, { timeoutMs: kit.launch?.timeoutMs ?? 60_000, ...launch }).finally(() => {
      settled = true;
    });
    // A sandbox that escaped holds the task's output open: its end is the end of what the host started.
    await Promise.race([pending, leaderGone(task, () => settled)]);
  } finally {
    await kit.cleanup(n, s);
  }
  const leaders = s.tasks.flatMap((t) => (t.pid === undefined ? [] : [t.pid]));
  const left = await leftovers(() => {
    const found = new Map([...markedProcesses(mark), ...liveStepProcesses({ leaders })].map((p) => [p.pid, p]));
    return [...found.values()];
  });
  for (const p of left) {
    try {
      process.kill(p.pid, "SIGKILL");
    } catch {
      // gone meanwhile
    }
  }
  // With what was left killed, the output closes; a bound all the same, so the check never hangs.
  return { launched: pending && (await within(pending, 10_000)), left };
}

/** Resolves once the process the host started for `task` has ended (and been reaped), or `done()`. */
async function leaderGone(task: TaskRecord, done: () => boolean): Promise<void> {
  while (!done() && (task.pid === undefined || procStat(task.pid) !== undefined)) await sleep(100);
}

/** `promise`'s value, or undefined when it has not settled within `ms`. */
function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

function assertNothingLeft({ launched, left }: Outcome, when: string): void {
  if (left.length > 0) {
    fail(
      `${when}, the task's processes still ran: ${left.map((p) => `pid ${p.pid} (${p.comm}, session ${p.session}, group ${p.pgrp})`).join(", ")}`,
    );
  }
  if (launched === undefined)
    fail("the task's output was still open 10 s after its end, its cleanup and the kill of what the kit found of it");
  if (!launched.stdout.includes("jobrt-testkit-bg-started")) {
    fail(
      `the task never started its background process (exit ${launched.code ?? launched.signal}, stderr ${JSON.stringify(launched.stderr.trim().slice(0, 300))})`,
    );
  }
}

const nextMark = (kit: SuiteKit): string => `jobrt-testkit-${kit.runtimeName}-${process.pid}-${++marks}`;

/**
 * A task that leaves a background process behind, as the host tracks a step (its cgroup where there
 * is one) and as on a node without cgroups (ProcTrack=pgid: its process group only); and, for a
 * wrapper the host does not stop through its group (`signals: "leader"`, `supervise.stop`), SIGKILL
 * of only that wrapper (what the OOM killer does). After
 * the task's end and the step's cleanup nothing of the task may run: a sandbox that leaves the
 * task's process group (its own session, without dying with its parent or a pid namespace of its
 * own) passes every check a cgroup helps with, and outlives jobrt under ProcTrack=pgid.
 */
export function registerBackgroundChecks(kit: SuiteKit): void {
  const ids = ["launch.background", "pgid.background", "pgid.leader-kill"] as const;
  if (!kit.launch) {
    for (const id of ids) kit.check(id, (ctx) => ctx.skip("real-launch checks turned off (launch: false)"));
    return;
  }
  kit.check("launch.background", async () => {
    assertNothingLeft(await runMarked(kit, kit.node(), nextMark(kit), false, {}), "after the task's end and cleanup");
  });
  kit.check("pgid.background", async () => {
    assertNothingLeft(
      await runMarked(kit, kit.node(), nextMark(kit), false, { procTrack: "pgid" }),
      "tracked by process group only (ProcTrack=pgid), after the task's end and cleanup",
    );
  });
  kit.check("pgid.leader-kill", async (ctx: TestContext) => {
    const { results } = await kit.baseline();
    if (!results.some((r) => r !== NOT_SUPPORTED && (r.signals === "leader" || r.supervise?.stop !== undefined)))
      ctx.skip('not applicable: no ExecSpec says signals: "leader" or supervise.stop');
    const n = kit.node();
    // SIGKILL cannot be forwarded: the wrapper dies at once, and the host then kills its process group.
    const stop = {
      after: "jobrt-testkit-bg-started",
      signal: "SIGKILL" as const,
      leaderOnly: true,
      killWaitMs: n.killWait * 1000,
    };
    const outcome = await runMarked(kit, n, nextMark(kit), true, { procTrack: "pgid", stop });
    assertNothingLeft(
      outcome,
      "tracked by process group only (ProcTrack=pgid), after SIGKILL of only the process the host started, its group's kill and cleanup",
    );
  });
}
