import { closeSync } from "node:fs";
import type { StepStateText } from "@jobrt/core";
import type { AfterDeath, StdioItem, TaskProcess } from "./forker/forker.js";
import { TaskSpawner } from "./forker/spawn.js";
import type { StepJournal } from "./journal/journal.js";
import type { StepOutcome } from "./outcome.js";
import type { PlannedComponent } from "./plan.js";
import type { ProcessTracker } from "./proctrack/proctrack.js";
import type { SessionOptions } from "./sessionoptions.js";
import { checkDescriptorBudget } from "./stdio/budget.js";
import { copyStdinToTasks } from "./stdio/stdin.js";
import { StepStdio } from "./stdio/stdio.js";
import { signalNumber } from "./task/status.js";
import type { StopControl } from "./task/stop.js";
import { type TaskContext, runTask } from "./task/task.js";
import { withDescriptor } from "./wireup/pmi.js";
import type { JoinHost } from "./nodestep/joinedtask.js";
import { serveJoiners } from "./nodestep/joiners.js";

/** What the node's step host hands to its tasks' launch once every component's setup is done. */
export interface PreparedStep {
  components: PlannedComponent[];
  /** Each component's registry index. */
  indexes: number[];
  /** Each component's step state, as setup returned (or the step's first setup published) it. */
  states: StepStateText[];
  tracker: ProcessTracker;
  stop: StopControl;
  journal: StepJournal | undefined;
  forkerCgroup: string | undefined;
  /** Slurm's PMI-2 socket (a `jobrt exec` task's) and the number the task gets it at (pmi.ts). */
  pmi: { fd: number; at: number } | undefined;
  /** Writes the journal's record again: a joined task is in it from its start (docs/node-step.md). */
  journalRecord: () => void;
}

/**
 * The per-task half of a step: opens every task's files, starts every task through one forker,
 * copies stdin, waits for each task's end. The node's step host (session.ts) did everything
 * before and does everything after.
 */
export class TaskLaunch {
  readonly #o: SessionOptions;
  readonly #outcome: StepOutcome;
  readonly #step: PreparedStep;
  #aborting = false;

  constructor(options: SessionOptions, outcome: StepOutcome, step: PreparedStep) {
    this.#o = options;
    this.#outcome = outcome;
    this.#step = step;
  }

  /** Resolves with every task's status, in component then task order. */
  run(): Promise<number[]> {
    const { node } = this.#o;
    const { journal, forkerCgroup, pmi, stop } = this.#step;
    const stdio = this.#openStdio();
    const spawner = new TaskSpawner(
      this.#withPassed(stdio.all()),
      (line) => node.log("warn", line),
      this.#afterDeath(),
      forkerCgroup,
    );
    // The forker holds its copy now: nothing else jobrt starts gets the PMI-2 socket.
    if (pmi && spawner.forkerPid !== undefined) closeSync(pmi.fd);
    if (spawner.forkerPid !== undefined) journal?.recordForker(spawner.forkerPid);
    stop.afterKill((seconds) => spawner.killForker(seconds));
    const ctx = this.#context(stdio, spawner);
    const own = this.#runTasks(ctx, stdio);
    return this.#o.nodeStep ? serveJoiners(this.#joinHost(ctx), ctx.tasks, own) : own;
  }

  /** The node's step as a joined task runs in it (docs/node-step.md). */
  #joinHost(ctx: TaskContext & { tasks: number }): JoinHost {
    const { components, indexes, journal } = this.#step;
    return {
      ctx,
      component: components[0]!,
      index: indexes[0]!,
      runtime: this.#o.registry.info(indexes[0]!),
      options: this.#o.nodeStep!,
      describe: this.#o.describeError ?? ((e) => e.message),
      onSpawn: (pid) => journal?.recordTaskPid(pid),
      joined: (task) => {
        components[0]!.record.tasks.push(task);
        this.#step.journalRecord();
      },
    };
  }

  #context(stdio: StepStdio, spawner: TaskSpawner): TaskContext & { tasks: number } {
    const { node, cancel } = this.#o;
    const { components, states, tracker, stop } = this.#step;
    return {
      tasks: components.reduce((n, c) => n + c.record.tasks.length, 0),
      registry: this.#o.registry,
      node,
      states,
      tracker,
      spawner,
      stop,
      stdio,
      label: components.some((c) => c.io.label),
      emit: (e) => this.#o.onEvent?.(e),
      report: this.#o.report,
      fail: (error, what) => {
        this.#outcome.fail(error, what);
        this.#abort();
      },
      stopping: () => cancel.requested || this.#aborting,
      // A task stopped before it started reports the signal that stopped the step.
      stoppedStatus: () => (cancel.requested ? 128 + signalNumber(cancel.signal ?? "SIGTERM") : 1),
    };
  }

  /** Every task's stdio, with the descriptors passed on purpose (the one `jobrt exec` task's PMI-2 socket). */
  #withPassed(stdios: Map<number, StdioItem[]>): Map<number, StdioItem[]> {
    const { pmi } = this.#step;
    if (!pmi) return stdios;
    return new Map([...stdios].map(([id, items]) => [id, withDescriptor(items, pmi.fd, pmi.at)]));
  }

  /** Every task's output and error files, opened before any task starts. */
  #openStdio(): StepStdio {
    const { node } = this.#o;
    const { components } = this.#step;
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
  async #runTasks(ctx: TaskContext, stdio: StepStdio): Promise<number[]> {
    const { components, indexes, journal } = this.#step;
    const spawned: Promise<TaskProcess | undefined>[] = [];
    const done: Promise<number>[] = [];
    for (const [i, c] of components.entries()) {
      for (const task of c.record.tasks) {
        let markSpawned: (child: TaskProcess | undefined) => void = () => {};
        spawned.push(new Promise((r) => (markSpawned = r)));
        const onSpawn = (child: TaskProcess) => {
          this.#outcome.started++;
          if (child.pid !== undefined) journal?.recordTaskPid(child.pid);
          markSpawned(child);
        };
        done.push(runTask(ctx, indexes[i]!, i, c, task, onSpawn).finally(() => markSpawned(undefined)));
      }
    }
    const all = Promise.all(done);
    copyStdinToTasks(this.#o.stdin ?? process.stdin, spawned, all);
    const statuses = await all.finally(() => ctx.spawner.close());
    await stdio.end();
    return statuses;
  }

  /** jobrt's own gc of this step's journal entry, for the forker to run if jobrt dies. */
  #afterDeath(): AfterDeath | undefined {
    const gc = this.#o.gcAfterDeath;
    const { journal } = this.#step;
    if (!gc || !journal) return undefined;
    return { argv: [...gc.argv, "--job", String(journal.jobId), "--pid", String(process.pid)], env: gc.env };
  }

  /** A task could not be launched: the others are stopped (once) as on SIGTERM. */
  #abort(): void {
    if (this.#aborting || this.#o.cancel.requested) return;
    this.#aborting = true;
    this.#step.stop.stopTasks("SIGTERM");
  }
}
