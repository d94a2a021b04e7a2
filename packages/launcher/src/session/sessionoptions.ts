import type { Readable, Writable } from "node:stream";
import type { ClientInfo, JobrtError, NodeConf, RuntimeRegistry, StepRecord } from "@jobrt/core";
import type { StepCancel } from "../cancel.js";
import type { DeviceConf } from "../devices/resolve.js";
import type { UserIdentity } from "../users.js";
import type { StepEvent } from "./events.js";
import type { ProcTrackMode } from "./proctrack/proctrack.js";
import type { ComponentSpec } from "./plan.js";
import type { NodeStepOptions } from "./nodestep/joinedtask.js";

/** What to run: a `jobrt run` step (ids claimed here) or one task of a Slurm step (`jobrt exec`). */
export type StepPlan =
  | { mode: "run"; jobId?: number; user: UserIdentity; components: ComponentSpec[]; cpusOnNode: number }
  | { mode: "exec"; record: StepRecord };

export interface SessionOptions {
  registry: RuntimeRegistry;
  node: NodeConf;
  cancel: StepCancel;
  /** jobrt.conf ProcTrack. */
  procTrack: ProcTrackMode;
  /** jobrt.conf's CDI keys (docs/devices.md); the embedded defaults when not given. */
  devices?: DeviceConf;
  client?: ClientInfo;
  /** Seconds; on expiry the step is cancelled like SIGTERM. */
  timeLimit?: number;
  /** Task output becomes "output" events. */
  json?: boolean;
  onEvent?: (event: StepEvent) => void;
  /** One-line error reports. */
  report: (line: string) => void;
  /** How an error is put into words for `report` (the CLI adds stack traces with -v). */
  describeError?: (error: JobrtError) => string;
  stdout?: Writable;
  stderr?: Writable;
  stdin?: Readable;
  /**
   * The command that runs `jobrt gc` (`--job` and `--pid` are added) and its environment: the
   * task forker runs it if jobrt dies while a journaled step's tasks run (docs/reliability.md).
   */
  gcAfterDeath?: { argv: string[]; env: Record<string, string> };
  /**
   * Under `jobrt exec`, when this jobrt is the node's for its step (docs/node-step.md): the step's
   * other tasks on this node join it here instead of running a jobrt each.
   */
  nodeStep?: NodeStepOptions;
}

export interface StepResult {
  status: number;
  /** The first launch, setup or cleanup error, if any. */
  error?: JobrtError;
  taskStatus: number[];
}
