import type { ContainerRequest } from "./requestoptions.js";
import type { ContainerView } from "./commandlookup.js";

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
  /**
   * How many descriptors the host passes this task at 3, 4, ... for a runtime with the "pass-fds"
   * capability (RuntimeMeta.capabilities), which carries them into its sandbox at those numbers.
   * Since @jobrt/core 2.1.0.
   */
  passedFds?: number;
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
  /**
   * What the host does for a wrapper that runs the task in a sandbox, so the wrapper needs no
   * supervisor of its own (docs/decisions.md, "The host supervises a wrapper's task"). Since
   * @jobrt/core 2.1.0: 2.0.0 ignores it, so a plugin that returns it peers on `^2.1.0`.
   */
  supervise?: HostSupervision;
}

export type SignalDelivery = "group" | "leader";

/** How the host stops and judges the task inside a wrapper's sandbox (ExecSpec.supervise). Since core 2.1.0. */
export interface HostSupervision {
  /**
   * Where a stop signal (SIGINT/SIGTERM) goes, instead of `signals`: `"child-group"` to the process
   * group of the only child of the process the host started (bwrap `--unshare-pid --new-session`:
   * the sandbox's init, which ignores it, and the task under it), while /proc still names the
   * started process its parent, with the job user's effective ids.
   * Before that child exists the signal goes to the started process alone. The SIGKILL after
   * KillWait still reaches every process of the task.
   */
  stop?: StopTarget;
  /** How the host tells the wrapper's "cannot run the command" from the task's own exit status. */
  missingCommand?: MissingCommandCheck;
}

/** Since core 2.1.0. */
export type StopTarget = "child-group";

/**
 * A wrapper that execs the task's command itself and exits with one of `exitCodes` when it cannot
 * (bwrap and ch-run: 1): after such an exit the host looks the command up in the sandbox's view
 * (`lookupCommand`, as the job user) and reports 127 (missing) or 126 (not executable) with one
 * line, only when it is certain; any other answer leaves the status as the wrapper gave it.
 * Since core 2.1.0.
 */
export interface MissingCommandCheck {
  /** The task's command as the sandbox execs it (task.argv[0]). */
  command: string;
  /** The sandbox's root and mounts as the task sees them. */
  view: ContainerView;
  /** PATH inside the sandbox; undefined when it has none (a bare command is then unknown). */
  path?: string;
  /** The task's directory inside the sandbox, for a relative command with a slash. */
  cwd: string;
  /** The wrapper's exit codes for a failed exec. */
  exitCodes: number[];
}

/** Information about the client that asked for the step (srun's role). */
export interface ClientInfo {
  verbose: number;
  /** Where a setup that takes long (an image pull) says how far it got; the host shows it. Since core 2.1.0. */
  progress?: (report: PullProgress) => void;
}

/**
 * How far an image pull has got (docs/cli.md, "Pull progress"): `start` once, `progress` now and
 * then (at most a few times a second), `end` once when the pull succeeded or failed.
 * Since core 2.1.0.
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
