import type { ContainerRequest } from "./requestoptions.js";

/** Where a runtime is being loaded: `jobrt check` (submit), a node daemon, or a step host. */
export type RuntimeContext = "submit" | "node" | "step";

export type LogLevel = "error" | "warn" | "info" | "verbose" | "debug";
export type Logger = (level: LogLevel, message: string) => void;

/** Node-wide facts a plugin may need; built by the host from jobrt.conf. */
export interface NodeConf {
  nodeName: string;
  /** Directory holding jobrt.conf, oci.conf, shifter.conf. */
  confDir: string;
  /** jobrt.conf SpoolDir: parent of per-step spool directories. */
  spoolDir: string;
  /** Seconds between SIGTERM and SIGKILL. */
  killWait: number;
  /** uid the host itself runs as. */
  hostUid: number;
  log: Logger;
}

export type StepKind = "normal" | "batch" | "interactive" | "extern";

export interface HetInfo {
  /** This component's index (SLURM_HET_JOB_COMPONENT / het group). */
  component: number;
  /** Number of components (SLURM_HET_SIZE). */
  size: number;
  /** Global task id of this component's first task (SLURM_HET_JOB_OFFSET style). */
  taskOffset: number;
}

/** One job step component on this node, as a runtime plugin sees it. */
export interface StepRecord {
  jobId: number;
  stepId: number;
  kind: StepKind;
  /** Normalised runtime name, e.g. "oci" or "@acme/x". */
  runtime: string;
  uid: number;
  gid: number;
  user: string;
  home: string;
  /** Working directory of the tasks (--chdir). */
  cwd: string;
  /** The component's command. */
  argv: string[];
  /** Job environment shared by all tasks (what --export produced). */
  env: Record<string, string>;
  /** Tasks of this component on this node. */
  tasks: TaskRecord[];
  /** Tasks of the whole step across nodes and components. */
  totalTasks: number;
  nodeId: number;
  nnodes: number;
  het?: HetInfo;
  container?: ContainerRequest;
  /** Task stdio is a terminal (--pty). */
  pty: boolean;
}

/** One task. The host fills `pid` once the task's process is started, and `exit` once it ended. */
export interface TaskRecord {
  /** Node-local task id (SLURM_LOCALID). */
  localId: number;
  /** Global task id (SLURM_PROCID). */
  globalId: number;
  argv: string[];
  /** Full task environment (job env + SLURM_* task variables). */
  env: Record<string, string>;
  pid?: number;
  /** Set by the host when the process it started for the task has exited. */
  exit?: { code: number | null; signal: string | null };
}

/** What to start in place of a task. argv[0] is the program; never a shell string unless declared. */
export interface ExecSpec {
  argv: string[];
  env: Record<string, string>;
  cwd: string;
  /** Set when argv runs a site-configured shell command (e.g. oci.conf RunTimeRun). */
  shell?: boolean;
  /**
   * How the host delivers a stop signal (SIGINT/SIGTERM) to this task: `"group"` (default) to the
   * task's whole process group; `"leader"` only to the process it started, for a wrapper that
   * forwards signals itself (as `runc run` does), so the task inside gets each signal once. The
   * SIGKILL after KillWait always reaches every process of the task.
   */
  signals?: SignalDelivery;
}

export type SignalDelivery = "group" | "leader";

/** Information about the client that asked for the step (srun's role). */
export interface ClientInfo {
  verbose: number;
  /** Where a setup that takes long (an image pull) says how far it got; the host shows it. */
  progress?: (report: PullProgress) => void;
}

/**
 * How far an image pull has got (docs/cli.md, "Pull progress"): `start` once, `progress` now and
 * then (at most a few times a second), `end` once when the pull succeeded or failed.
 */
export interface PullProgress {
  phase: "start" | "progress" | "end";
  /** The image reference as the user wrote it. */
  image: string;
  /** Bytes of the image's blobs (layers, config, manifest) on this node so far. */
  bytes: number;
  /** The layers' and config's size, when the manifest says (not for a multi-platform index). */
  totalBytes?: number;
  /** Blobs complete so far. */
  layers: number;
  /** The image's layer count, when the manifest says. */
  totalLayers?: number;
  /** ms since the pull started. */
  elapsedMs: number;
  /** `end`: whether the pull succeeded. */
  ok?: boolean;
}
