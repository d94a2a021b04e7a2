import type { Socket } from "node:net";
import type { JobrtError, LoadedRuntime, StepRecord } from "@jobrt/core";
import { TaskForker, forkerNumbers } from "../forker/forker.js";
import { TaskSpawner } from "../forker/spawn.js";
import { launchError } from "../outcome.js";
import type { PlannedComponent } from "../plan.js";
import { type TaskContext, runTask } from "../task/task.js";
import { placePmiDescriptor, pmiNumber } from "../wireup/pmi.js";
import { type JoinRequest, readJoinRequest } from "./joinrequest.js";
import type { NodeStepListener } from "./listener.js";

/** What the node's jobrt needs to serve a joining task (the CLI plans it as its own `jobrt exec` would). */
export interface NodeStepOptions {
  listener: NodeStepListener;
  /** How many tasks of the step run on this node: once all have joined, no more are waited for. */
  tasksOnNode: number;
  /** The joiner's step as its own `jobrt exec` would plan it, or why it cannot join (a refusal). */
  plan(request: JoinRequest): StepRecord | string;
  /** A report line as the joiner's own jobrt would print it ("jobrt: ...\n"). */
  line(message: string): string;
}

/** The node's step, as a joiner's task runs in it. */
export interface JoinHost {
  ctx: TaskContext;
  component: PlannedComponent;
  index: number;
  runtime: Pick<LoadedRuntime, "name" | "capabilities">;
  options: NodeStepOptions;
  describe: (error: JobrtError) => string;
  onSpawn: (pid: number) => void;
  /** A task has joined: the step's record (its cleanup, the journal) has it from now on. */
  joined: (task: StepRecord["tasks"][number]) => void;
}

/** The signals that stop a `jobrt exec` task (the CLI's signals.ts traps them); others are passed on. */
const STOPS = new Set(["INT", "TERM", "HUP", "QUIT"]);

/** Why a joiner's planned step is not this one: another runtime, container or step. */
function mismatch(mine: StepRecord, theirs: StepRecord): string | undefined {
  if (theirs.jobId !== mine.jobId || theirs.stepId !== mine.stepId) return "another step";
  if (theirs.runtime !== mine.runtime) return `runtime ${theirs.runtime}, not ${mine.runtime}`;
  if (JSON.stringify(theirs.container) !== JSON.stringify(mine.container)) return "another container request";
  if (theirs.uid !== mine.uid) return "another user";
  // The runtime's hooks take the directory from the step: a task elsewhere runs its own jobrt.
  if (theirs.cwd !== mine.cwd) return "another working directory";
  return undefined;
}

/**
 * Serves one joined task (docs/node-step.md, "The wire protocol"): reads who it is, plans it,
 * answers H (its forker's numbers) or R (run your own jobrt), runs the task through the one task
 * path with the joiner as its forker, and tells it the task's end. Resolves when that is done.
 */
export async function serveJoiner(host: JoinHost, socket: Socket): Promise<void> {
  let request: JoinRequest;
  try {
    socket.resume();
    request = await readJoinRequest(socket);
    socket.pause();
  } catch {
    socket.destroy();
    return;
  }
  const planned = planJoiner(host, request);
  if (typeof planned === "string") {
    socket.end(`R ${planned.replace(/\n/g, " ")}\n`);
    return;
  }
  const { task, passed } = planned;
  host.joined(task);
  socket.write(`H ${forkerNumbers().join(" ")}\n`);
  const { ctx, options } = host;
  let taskPid: number | undefined;
  const onSignal = (name: string) => {
    if (taskPid !== undefined) ctx.stop.signalTask(taskPid, `SIG${name}` as NodeJS.Signals, STOPS.has(name));
  };
  const forker = new TaskForker({ socket, pid: request.pid, passed, onSignal }, new Map([[task.globalId, []]]), (why) =>
    ctx.node.log("warn", `task ${task.globalId}: ${why}`),
  );
  socket.resume();
  const tell = (message: string) => forker.tell(options.line(message));
  const joined: TaskContext = {
    ...ctx,
    spawner: new TaskSpawner(new Map([[task.globalId, []]]), () => {}, undefined, undefined, forker),
    stdio: { closeTask: () => {}, attach: () => [] },
    report: tell,
    // A joined task's failure is its own, as it was with a jobrt of its own: the others go on.
    fail: (error, what) => tell(host.describe(launchError(error, what))),
  };
  const status = await runTask(joined, host.index, 0, host.component, task, (child) => {
    taskPid = child.pid;
    if (child.pid !== undefined) host.onSpawn(child.pid);
  });
  forker.end(status);
  await forker.close();
}

/** The joiner's task, in this step's component, with where its PMI-2 socket goes; or a refusal. */
function planJoiner(
  host: JoinHost,
  request: JoinRequest,
): { task: StepRecord["tasks"][number]; passed: [number, number][] } | string {
  let step: StepRecord | string;
  try {
    step = host.options.plan(request);
  } catch (error) {
    return (error as Error).message;
  }
  if (typeof step === "string") return step;
  const why = mismatch(host.component.record, step);
  const task = step.tasks[0];
  if (why !== undefined || !task) return why ?? "no task";
  try {
    const fd = pmiNumber(task.env);
    if (fd === undefined) return { task, passed: [] };
    return { task, passed: [[fd, placePmiDescriptor(host.runtime, fd, [task])]] };
  } catch (error) {
    return (error as Error).message;
  }
}
