import { closeSync } from "node:fs";
import {
  type JobrtError,
  type PullProgress,
  type StepRecord,
  type StepStateText,
  isJobrtError,
  messageOf,
  jobrtError,
} from "@jobrt/core";
import { deviceConfFrom } from "../devices/conf.js";
import { resolveStepDevices } from "../devices/step.js";
import { checkDescriptorBudget } from "./stdio/budget.js";
import { collectOrphans } from "./journal/collect.js";
import { type ComponentHooks, cleanupComponents, loadRuntimes } from "./componenthooks.js";
import type { StepJournal } from "./journal/journal.js";
import { type PlannedComponent, planStep } from "./plan.js";
import { forkerCgroupPath, removeForkerCgroup } from "./forker/forkercgroup.js";
import { type ProcessTracker, type TrackerRecord, createTracker } from "./proctrack/proctrack.js";
import type { AfterDeath, StdioItem, TaskProcess } from "./forker/forker.js";
import { TaskSpawner } from "./forker/spawn.js";
import { closeInheritedDescriptors } from "./descriptors.js";
import { placePmiDescriptor, pmiDescriptor, withDescriptor } from "./wireup/pmi.js";
import { addWireupEdits } from "./wireup/wireupedits.js";
import { claimJournal, openStepSpool } from "./journal/stepclaim.js";
import type { SessionOptions, StepPlan, StepResult } from "./sessionoptions.js";
import { signalNumber } from "./task/status.js";
import { copyStdinToTasks } from "./stdio/stdin.js";
import { StepStdio } from "./stdio/stdio.js";
import { StopControl } from "./task/stop.js";
import { type StepEvent, stepStartEvent } from "./events.js";
import { type TaskContext, runTask } from "./task/task.js";

/** Runs one step end to end; see StepSession. */
export function runSession(plan: StepPlan, options: SessionOptions): Promise<StepResult> {
  return new StepSession(options).run(plan);
}

/**
 * One step, end to end, in the order of docs/architecture.md's "The step session": open the spool →
 * collect orphans → claim ids (journal) → plan → step cgroup (journaled before it is made) → load
 * runtimes → journal the records → setup → open stdio → spawn → wait → kill what is left →
 * cleanup → release → fini.
 * Never throws once the step is claimed: failures become the status and `error`.
 */
export class StepSession {
  readonly #o: SessionOptions;
  #firstError: JobrtError | undefined;
  #launchFailed = false;
  #aborting = false;
  #started = 0;
  /** Slurm's PMI-2 socket, and the number the `jobrt exec` task gets it at: its own, or 3 (pmi.ts). */
  #pmiFd: number | undefined;
  #pmiAt: number | undefined;

  constructor(options: SessionOptions) {
    this.#o = options;
  }

  #emit(event: StepEvent): void {
    this.#o.onEvent?.(event);
  }

  #report(error: JobrtError): void {
    this.#firstError ??= error;
    this.#o.report((this.#o.describeError ?? ((e: JobrtError) => e.message))(error));
  }

  #fail = (error: unknown, what: string): void => {
    const e = isJobrtError(error)
      ? error
      : jobrtError("ERR_LAUNCH", { problem: `${what}: ${messageOf(error)}` }, { cause: error });
    this.#report(e);
    this.#launchFailed = true;
  };

  async run(plan: StepPlan): Promise<StepResult> {
    let result: StepResult | undefined;
    try {
      result = await this.#claimAndRun(plan);
    } finally {
      const finiFailed = await this.#fini();
      if (finiFailed && result) result = { ...result, status: Math.max(result.status, 1) };
    }
    return result;
  }

  /** Finalises every loaded runtime; a failing `fini` is reported (and makes the status at least 1). */
  async #fini(): Promise<boolean> {
    try {
      await this.#o.registry.fini();
      return false;
    } catch (error) {
      this.#o.report(messageOf(error));
      return true;
    }
  }

  async #claimAndRun(plan: StepPlan): Promise<StepResult> {
    this.#pmiFd = plan.mode === "exec" ? pmiDescriptor(plan.record.tasks[0]?.env ?? {}) : undefined;
    closeInheritedDescriptors(this.#pmiFd === undefined ? [] : [this.#pmiFd]);
    const { node } = this.#o;
    const spool = openStepSpool(plan, node);
    if (spool) await collectOrphans(spool, this.#o.registry, node, { log: node.log });
    const journal = claimJournal(spool, plan, node);
    try {
      const components =
        plan.mode === "run"
          ? planStep(
              { jobId: journal!.jobId, stepId: journal!.stepId, user: plan.user, components: plan.components },
              node.nodeName,
              plan.cpusOnNode,
            )
          : [{ record: plan.record, io: {} }];
      const first = components[0]!.record;
      // No runtime has run a hook yet: a record without components lets gc remove the cgroup and
      // nothing else if jobrt dies before the full record (after the runtimes load) is written.
      const journalTracker = (proctrack: TrackerRecord) =>
        journal?.write({ nodeName: node.nodeName, proctrack, components: [], stepStates: {} });
      const tracker = createTracker(
        this.#o.procTrack,
        journal?.name ?? `${first.jobId}.exec-${first.stepId}.${first.tasks[0]?.globalId}.${process.pid}`,
        journalTracker,
      );
      // Only a forker that runs jobrt's gc after jobrt's death needs to outlive it.
      const forkerCgroup = journal && this.#o.gcAfterDeath ? forkerCgroupPath(journal.name) : undefined;
      try {
        return await this.#runPlanned(components, tracker, journal, forkerCgroup);
      } finally {
        for (const left of tracker.release()) node.log("warn", `cannot remove cgroup ${left}`);
        const forkerLeft = forkerCgroup ? removeForkerCgroup(forkerCgroup) : undefined;
        if (forkerLeft) node.log("warn", forkerLeft);
      }
    } finally {
      journal?.release();
    }
  }

  async #runPlanned(
    components: PlannedComponent[],
    tracker: ProcessTracker,
    journal: StepJournal | undefined,
    forkerCgroup: string | undefined,
  ): Promise<StepResult> {
    const { node } = this.#o;
    const first = components[0]!.record;
    if (tracker.record.fallback) node.log("verbose", `process tracking by process group: ${tracker.record.fallback}`);
    this.#emit(stepStartEvent(components, tracker.record));
    const stop = this.#stopControl(tracker, first);
    const unguard = this.#guardOutputs();
    const setupTried: number[] = [];
    const indexes: number[] = [];
    const hooks: ComponentHooks = {
      registry: this.#o.registry,
      node,
      components,
      indexes,
      emit: (e) => this.#emit(e),
    };
    // Each component's step state, as setup returned it (JSON text), for every later hook.
    const states: StepStateText[] = [];
    let taskStatus: number[] = [];
    const record = () => {
      const stepStates: Record<string, string> = {};
      for (const [i, s] of states.entries()) if (s !== undefined) stepStates[i] = s;
      const proctrack = forkerCgroup ? { ...tracker.record, forker: forkerCgroup } : tracker.record;
      journal?.write({ nodeName: node.nodeName, proctrack, components: components.map((c) => c.record), stepStates });
    };
    try {
      for (const c of components) resolveStepDevices(c.record, this.#o.devices ?? deviceConfFrom(undefined));
      if (await loadRuntimes(hooks, stop)) {
        addWireupEdits(components, (i) => this.#o.registry.info(indexes[i]!));
        if (this.#pmiFd !== undefined) {
          const tasks = components.flatMap((c) => c.record.tasks);
          this.#pmiAt = placePmiDescriptor(this.#o.registry.info(indexes[0]!), this.#pmiFd, tasks);
        }
        record();
        const ready = await this.#setup(components, indexes, setupTried, states, journal, record);
        if (ready) taskStatus = await this.#launch(components, indexes, states, tracker, stop, journal, forkerCgroup);
      }
    } catch (error) {
      this.#fail(error, "launch failed");
    } finally {
      await this.#endProcesses(tracker);
      stop.dispose();
      unguard();
    }
    const cleanupFailed = await cleanupComponents(hooks, setupTried, states, (e) => this.#report(e));
    return this.#finish(taskStatus, cleanupFailed);
  }

  /** Stops the step on cancel (signals, SIGPIPE) and at its time limit. */
  #stopControl(tracker: ProcessTracker, first: StepRecord): StopControl {
    const { node, cancel } = this.#o;
    const stop = new StopControl(cancel, node, tracker, (signal) =>
      this.#emit({ event: "cancel", signal, reason: cancel.reason }),
    );
    if (this.#o.timeLimit !== undefined) {
      const limit = this.#o.timeLimit;
      stop.limitTime(limit, () =>
        this.#o.report(`step ${first.jobId}.${first.stepId} cancelled: time limit of ${limit} s reached`),
      );
    }
    return stop;
  }

  /**
   * Setup per component, in order. Its state is journaled at once (so `jobrt gc` gets it after a
   * crash); under `jobrt exec` the state the step's first setup on this node published is used.
   */
  async #setup(
    components: PlannedComponent[],
    indexes: number[],
    setupTried: number[],
    states: StepStateText[],
    journal: StepJournal | undefined,
    record: () => void,
  ): Promise<boolean> {
    for (const [i, c] of components.entries()) {
      if (this.#o.cancel.requested) return false;
      setupTried.push(i);
      const client = {
        ...(this.#o.client ?? { verbose: 0 }),
        progress: (p: PullProgress) => this.#emit({ event: "pull", component: i, ...p }),
      };
      const own = await this.#o.registry.setup(indexes[i]!, { node: this.#o.node, step: c.record, client });
      // Our own state first: if publishing fails, cleanup still gets what our setup made.
      states[i] = own;
      if (journal) states[i] = journal.shareState(c.record, own);
      record();
      this.#emit({
        event: "setup",
        component: i,
        runtime: c.record.runtime,
        ...this.#o.registry.describe(indexes[i]!, states[i]),
      });
    }
    return !this.#o.cancel.requested;
  }

  /** Opens every task's files, then starts every task; resolves with their statuses. */
  async #launch(
    components: PlannedComponent[],
    indexes: number[],
    states: StepStateText[],
    tracker: ProcessTracker,
    stop: StopControl,
    journal: StepJournal | undefined,
    forkerCgroup: string | undefined,
  ): Promise<number[]> {
    const { node, cancel } = this.#o;
    const stdio = this.#openStdio(components);
    const spawner = new TaskSpawner(
      this.#withPassed(stdio.all()),
      (line) => node.log("warn", line),
      this.#afterDeath(journal),
      forkerCgroup,
    );
    // The forker holds its copy now: nothing else jobrt starts gets the PMI-2 socket.
    if (this.#pmiFd !== undefined && spawner.forkerPid !== undefined) closeSync(this.#pmiFd);
    if (spawner.forkerPid !== undefined) journal?.recordForker(spawner.forkerPid);
    stop.afterKill((seconds) => spawner.killForker(seconds));
    const ctx: TaskContext = {
      registry: this.#o.registry,
      node,
      states,
      tracker,
      spawner,
      stop,
      stdio,
      label: components.some((c) => c.io.label),
      emit: (e) => this.#emit(e),
      report: this.#o.report,
      fail: (error, what) => {
        this.#fail(error, what);
        this.#abort(stop);
      },
      stopping: () => cancel.requested || this.#aborting,
      // A task stopped before it started reports the signal that stopped the step.
      stoppedStatus: () => (cancel.requested ? 128 + signalNumber(cancel.signal ?? "SIGTERM") : 1),
    };
    return this.#runTasks(ctx, components, indexes, journal);
  }

  /** Every task's stdio, with the descriptors passed on purpose (the one `jobrt exec` task's PMI-2 socket). */
  #withPassed(stdios: Map<number, StdioItem[]>): Map<number, StdioItem[]> {
    const fd = this.#pmiFd;
    if (fd === undefined) return stdios;
    return new Map([...stdios].map(([id, items]) => [id, withDescriptor(items, fd, this.#pmiAt ?? fd)]));
  }

  /** Every task's output and error files, opened before any task starts. */
  #openStdio(components: PlannedComponent[]): StepStdio {
    const { node } = this.#o;
    const total = components.reduce((n, c) => n + c.record.tasks.length, 0);
    const lineMode = checkDescriptorBudget(components, Boolean(this.#o.json), node);
    const first = components[0]!.record;
    const stdio = new StepStdio({
      json: Boolean(this.#o.json),
      lineMode,
      totalTasks: total,
      nodeName: node.nodeName,
      user: node.hostUid === 0 ? { uid: first.uid, gid: first.gid } : undefined,
      stdout: this.#o.stdout ?? process.stdout,
      stderr: this.#o.stderr ?? process.stderr,
    });
    stdio.open(components);
    return stdio;
  }

  /** Starts every task, with stdin copied to those that take it; resolves with their statuses. */
  async #runTasks(
    ctx: TaskContext,
    components: PlannedComponent[],
    indexes: number[],
    journal: StepJournal | undefined,
  ): Promise<number[]> {
    const spawned: Promise<TaskProcess | undefined>[] = [];
    const done: Promise<number>[] = [];
    for (const [i, c] of components.entries()) {
      for (const task of c.record.tasks) {
        let markSpawned: (child: TaskProcess | undefined) => void = () => {};
        spawned.push(new Promise((r) => (markSpawned = r)));
        const onSpawn = (child: TaskProcess) => {
          this.#started++;
          if (child.pid !== undefined) journal?.recordTaskPid(child.pid);
          markSpawned(child);
        };
        done.push(runTask(ctx, indexes[i]!, i, c, task, onSpawn).finally(() => markSpawned(undefined)));
      }
    }
    const all = Promise.all(done);
    copyStdinToTasks(this.#o.stdin ?? process.stdin, spawned, all);
    const statuses = await all.finally(() => ctx.spawner.close());
    await ctx.stdio.end();
    return statuses;
  }

  /** jobrt's own gc of this step's journal entry, for the forker to run if jobrt dies. */
  #afterDeath(journal: StepJournal | undefined): AfterDeath | undefined {
    const gc = this.#o.gcAfterDeath;
    if (!gc || !journal) return undefined;
    return { argv: [...gc.argv, "--job", String(journal.jobId), "--pid", String(process.pid)], env: gc.env };
  }

  /** A task could not be launched: the others are stopped (once) as on SIGTERM. */
  #abort(stop: StopControl): void {
    if (this.#aborting || this.#o.cancel.requested) return;
    this.#aborting = true;
    stop.stopTasks("SIGTERM");
  }

  /**
   * jobrt's own stdout or stderr reader went away (`jobrt run ... | head -1`): like a pipeline
   * member, the step gets SIGPIPE instead of running on unread (docs/cli.md, "Output").
   */
  #guardOutputs(): () => void {
    const streams = [this.#o.stdout ?? process.stdout, this.#o.stderr ?? process.stderr];
    const onError = () => {
      if (!this.#o.cancel.requested) this.#o.cancel.request("SIGPIPE", "the reader of jobrt's output went away");
    };
    for (const s of streams) s.on("error", onError);
    return () => {
      for (const s of streams) s.off("error", onError);
    };
  }

  /** The step has ended: whatever is left in its cgroup (or its tasks' groups) is killed and waited for. */
  async #endProcesses(tracker: ProcessTracker): Promise<void> {
    tracker.killAll();
    const bound = (this.#o.node.killWait + 5) * 1000;
    if (!(await tracker.waitEmpty(bound)))
      this.#o.node.log(
        "warn",
        `processes of the step were still alive ${bound} ms after SIGKILL (uninterruptible sleep?)`,
      );
  }

  #finish(taskStatus: number[], cleanupFailed: boolean): StepResult {
    const { cancel } = this.#o;
    let status = taskStatus.reduce((a, b) => Math.max(a, b), 0);
    if (this.#launchFailed || cleanupFailed) status = Math.max(status, 1);
    // A signal to jobrt reports 128+N only when no task ran to report for itself: a task that
    // handles SIGTERM and exits 7 exits 7, as srun and slurmstepd report it.
    if (cancel.signal && this.#started === 0) status = Math.max(status, 128 + signalNumber(cancel.signal));
    const error = this.#firstError;
    this.#emit({
      event: "step-end",
      status,
      ...(error ? { error: error.message, code: error.code, ...causeCodeOf(error) } : {}),
    });
    return { status, taskStatus, ...(error ? { error } : {}) };
  }
}

/** The code of the runtime's own error inside an ERR_RUNTIME_HOOK, for the step-end event. */
function causeCodeOf(error: JobrtError): { causeCode?: string } {
  const code = error.details.causeCode;
  return typeof code === "string" ? { causeCode: code } : {};
}
