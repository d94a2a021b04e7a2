import type { ErrorCode, ExecSpec, PullProgress } from "@jobrt/core";
import type { PlannedComponent } from "./plan.js";
import type { ProcTrackKind, TrackerRecord } from "./proctrack/proctrack.js";

/**
 * What a step session reports while it runs: `jobrt run --json` prints each one as a JSON line
 * (with `time` added). docs/cli.md lists every event and its fields; adding a field is compatible,
 * removing or retyping one is a breaking change.
 */
export type StepEvent =
  | StepStartEvent
  | RuntimeEvent
  | PullEvent
  | SetupEvent
  | TaskStartEvent
  | OutputEvent
  | TaskExitEvent
  | CancelEvent
  | CleanupEvent
  | StepEndEvent;

/** The step begins: its ids, how its processes are tracked, and its components. */
export interface StepStartEvent {
  event: "step-start";
  jobId: number;
  stepId: number;
  proctrack: ProcTrackKind;
  /** The step's cgroup directory (cgroup kinds). */
  cgroup?: string;
  /** Why no cgroup could be used (ProcTrack=auto fell back to pgid). */
  proctrackFallback?: string;
  components: { component: number; runtime: string; ntasks: number; argv: string[] }[];
}

/** A component's runtime plugin was loaded. */
export interface RuntimeEvent {
  event: "runtime";
  component: number;
  /** The registry index the host uses for it. */
  index: number;
  type: string;
  package?: string;
  version: string;
  path?: string;
}

/** A component's setup pulls an image (runtime oci, `--container-image`): how far it got. */
export type PullEvent = { event: "pull"; component: number } & PullProgress;

/** A component's `setup` hook succeeded; what the runtime's `describe` said the step runs. */
export interface SetupEvent {
  event: "setup";
  component: number;
  runtime: string;
  /** The bundle directory the container runs. */
  bundle?: string;
  /** The digest the step's image (`--container-image`) was pinned to. */
  digest?: string;
}

/** A task's process started. */
export interface TaskStartEvent {
  event: "task-start";
  task: number;
  component: number;
  pid: number;
  /** The ExecSpec the runtime returned, or null when it answered NOT_SUPPORTED. */
  exec: ExecSpec | null;
  argv: string[];
}

/** One line (or piece past the line limit) of a task's output. */
export interface OutputEvent {
  event: "output";
  task: number;
  stream: "stdout" | "stderr";
  data: string;
}

/** A task ended (or could not be executed: `error` says why, with status 126/127/1). */
export interface TaskExitEvent {
  event: "task-exit";
  task: number;
  component: number;
  code: number | null;
  /** Node's name of the signal, or "signal N" for one without a name (the real-time signals 34-64). */
  signal: string | null;
  /** What jobrt reports for the task: its exit code, or 128+N for signal N. */
  status: number;
  error?: string;
}

/** jobrt was told to stop the step (a signal, or the time limit). */
export interface CancelEvent {
  event: "cancel";
  signal: NodeJS.Signals;
  reason?: string;
}

/** A component's `cleanup` hook ran; `error` is its message when it failed. */
export interface CleanupEvent {
  event: "cleanup";
  component: number;
  runtime: string;
  ok: boolean;
  error?: string;
}

/** The step ended with `status`; `error`/`code` are the first error that stopped it. */
export interface StepEndEvent {
  event: "step-end";
  status: number;
  error?: string;
  code?: ErrorCode;
  /** For ERR_RUNTIME_HOOK: the code of the runtime's own error (e.g. ERR_CONTAINER_IMAGE). */
  causeCode?: string;
}

/** The step-start event of a planned step whose processes `tracker` tracks. */
export function stepStartEvent(components: PlannedComponent[], tracker: TrackerRecord): StepStartEvent {
  const first = components[0]!.record;
  return {
    event: "step-start",
    jobId: first.jobId,
    stepId: first.stepId,
    proctrack: tracker.kind,
    ...(tracker.path ? { cgroup: tracker.path } : {}),
    ...(tracker.fallback ? { proctrackFallback: tracker.fallback } : {}),
    components: components.map((c, i) => ({
      component: i,
      runtime: c.record.runtime,
      ntasks: c.record.tasks.length,
      argv: c.record.argv,
    })),
  };
}
