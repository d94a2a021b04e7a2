import { type JobrtError, type PullProgress, type StepRecord, type StepStateText, messageOf } from "@jobrt/core";
import { deviceConfFrom } from "../devices/conf.js";
import { resolveStepDevices } from "../devices/step.js";
import { collectOrphans } from "./journal/collect.js";
import { type ComponentHooks, cleanupComponents, loadRuntimes } from "./componenthooks.js";
import type { StepJournal } from "./journal/journal.js";
import { type PlannedComponent, planStep } from "./plan.js";
import { forkerCgroupPath, removeForkerCgroup } from "./forker/forkercgroup.js";
import { type ProcessTracker, type TrackerRecord, createTracker } from "./proctrack/proctrack.js";
import { closeInheritedDescriptors } from "./descriptors.js";
import { placePmiDescriptor, pmiDescriptor } from "./wireup/pmi.js";
import { addWireupEdits } from "./wireup/wireupedits.js";
import { claimJournal, openStepSpool } from "./journal/stepclaim.js";
import { StepOutcome } from "./outcome.js";
import type { SessionOptions, StepPlan, StepResult } from "./sessionoptions.js";
import { signalNumber } from "./task/status.js";
import { StopControl } from "./task/stop.js";
import { type StepEvent, stepStartEvent } from "./events.js";
import { type PreparedStep, TaskLaunch } from "./tasklaunch.js";

/** Runs one step end to end; see StepSession. */
export function runSession(plan: StepPlan, options: SessionOptions): Promise<StepResult> {
  return new StepSession(options).run(plan);
}

/**
 * The node's step host: one step, end to end, in the order of docs/architecture.md's "The step
 * session": open the spool → collect orphans → claim ids (journal) → plan → step cgroup (journaled
 * before it is made) → load runtimes → journal the records → setup → [the tasks' launch
 * (tasklaunch.ts): open stdio → spawn → wait] → kill what is left → cleanup → release → fini.
 * Never throws once the step is claimed: failures become the status and `error`.
 */
export class StepSession {
  readonly #o: SessionOptions;
  readonly #outcome: StepOutcome;
  /** Slurm's PMI-2 socket, under `jobrt exec`: the task gets it (pmi.ts), nothing else jobrt starts. */
  #pmiFd: number | undefined;

  constructor(options: SessionOptions) {
    this.#o = options;
    this.#outcome = new StepOutcome(options.report, options.describeError);
  }

  #emit(event: StepEvent): void {
    this.#o.onEvent?.(event);
  }

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
        const pmi = this.#placePmi(components, indexes);
        record();
        const ready = await this.#setup(components, indexes, setupTried, states, journal, record);
        const step = { components, indexes, states, tracker, stop, journal, forkerCgroup, pmi, journalRecord: record };
        if (ready) taskStatus = await new TaskLaunch(this.#o, this.#outcome, step).run();
      }
    } catch (error) {
      this.#outcome.fail(error, "launch failed");
    } finally {
      await this.#endProcesses(tracker);
      stop.dispose();
      unguard();
    }
    const cleanupFailed = await cleanupComponents(hooks, setupTried, states, this.#outcome.report);
    return this.#finish(taskStatus, cleanupFailed);
  }

  /** Where the `jobrt exec` task gets Slurm's PMI-2 socket, decided once the runtime is known. */
  #placePmi(components: PlannedComponent[], indexes: number[]): PreparedStep["pmi"] {
    if (this.#pmiFd === undefined) return undefined;
    const tasks = components.flatMap((c) => c.record.tasks);
    return { fd: this.#pmiFd, at: placePmiDescriptor(this.#o.registry.info(indexes[0]!), this.#pmiFd, tasks) };
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
    if (this.#outcome.launchFailed || cleanupFailed) status = Math.max(status, 1);
    // A signal to jobrt reports 128+N only when no task ran to report for itself: a task that
    // handles SIGTERM and exits 7 exits 7, as srun and slurmstepd report it.
    if (cancel.signal && this.#outcome.started === 0) status = Math.max(status, 128 + signalNumber(cancel.signal));
    const error = this.#outcome.firstError;
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
