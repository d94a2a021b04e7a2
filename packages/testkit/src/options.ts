import type { ContainerRequest, ErrorCode, NodeConf, RuntimePlugin, StepRecord, TaskRecord } from "@jobrt/core";
import type { CheckId } from "./checks.js";
import type { JobUser } from "./fixtures.js";

/** A plugin object, or a loader such as `() => import("../src/index.js")` (its default export is used). */
export type PluginSource =
  | RuntimePlugin
  | (() => RuntimePlugin | { default: unknown } | Promise<RuntimePlugin | { default: unknown }>);

/** Values the suite reads when a test runs, so they may be filled in by a `beforeAll` of the test file. */
export type Lazy<T> = T | (() => T);

export interface ConformanceCapabilities {
  /** What `run` answers. Default "either". */
  runs?: "exec-spec" | "not-supported" | "either";
  /** The plugin may return `shell: true` specs (a site-configured shell command). Default false. */
  shell?: boolean;
  /** "required": a step without `--container` must be refused. Default "optional". */
  container?: "required" | "optional";
}

export interface InvalidCase {
  /** Shown in the test name. */
  title: string;
  /** The container request of the step (merged over the fixture's), e.g. a missing image dir. */
  container?: Lazy<Partial<ContainerRequest>>;
  /** Changes made to the generated step before setup. */
  step?: (step: StepRecord) => void;
  /** Code(s) accepted for the JobrtError. */
  code: ErrorCode | readonly ErrorCode[];
}

export interface LaunchCheckOptions {
  /** Task argv; default `sh -c 'echo "jobrt-testkit:$SLURM_PROCID"'` (needs `sh` in the image). */
  argv?: string[];
  /** What each task must print; default `jobrt-testkit:<globalId>`. */
  expect?: (task: TaskRecord) => string;
  /**
   * Where a task must start when that is not the step's cwd: for a container whose filesystem does
   * not hold the host's cwd, the image's working dir (say so in your README). The request's `workdir`
   * comes first; default the step's cwd.
   */
  cwd?: (step: StepRecord) => string;
  /** Per-launch kill timeout. Default 60 000 ms. */
  timeoutMs?: number;
}

/** A wire-up the runtime's tasks cannot get, and why (shown in the check's name). */
export interface MpiCannot {
  cannot: string;
}

/**
 * Which of Slurm's MPI wire-ups the runtime's tasks cannot get (docs/mpi.md). Each one not
 * declared is checked for real; each one declared must be refused by the host (ERR_MPI_WIREUP,
 * one line, no task started), since a task started without it would fail inside MPI_Init.
 */
export interface MpiCheckOptions {
  /** `srun --mpi=pmi2`: the socket named by PMI_FD. */
  pmi2?: MpiCannot;
  /** `srun --mpi=pmix`: PMIX_SERVER_TMPDIR at the same path. */
  pmix?: MpiCannot;
}

export interface ConformanceOptions {
  /** Suite title; default "runtime conformance: <meta.type>". */
  title?: string;
  /** meta.type the plugin must have, e.g. "runtime/charliecloud"; default its own. */
  type?: string;
  capabilities?: ConformanceCapabilities;
  /** Container request for every generated step (the fixture for the real-launch checks). */
  container?: Lazy<Partial<ContainerRequest> | undefined>;
  /** NodeConf fields (e.g. confDir holding oci.conf). SpoolDir defaults to a fresh temp dir per check. */
  node?: Lazy<Partial<NodeConf>>;
  /**
   * The job user of the generated steps; default the user running the tests. When the tests run
   * as root, another user makes the launches drop to it (both ids), as the host does, so files the
   * plugin makes for the job must be usable by that user.
   */
  user?: JobUser;
  /** Tasks in the generated step. Default 3. */
  tasks?: number;
  /** Requests the plugin must refuse, each with its error code. */
  invalid?: InvalidCase[];
  /** Real-launch checks: spawn what run returned. `false` turns them off (say why in your README). */
  launch?: false | LaunchCheckOptions;
  /**
   * The MPI wire-ups the runtime cannot give its tasks, each with the reason; default none: both
   * are checked (`mpi.pmi-fd`, `mpi.pmix`). Since @jobrt/testkit 2.1.0.
   */
  mpi?: MpiCheckOptions;
  /** "should" (default): MUST and SHOULD checks fail the suite; "must": SHOULD failures only warn. */
  level?: "must" | "should";
  /** Checks to skip, each with the reason (shown in the test name). */
  skip?: Partial<Record<CheckId, string>>;
  /** Per-check timeout. Default 120 000 ms. */
  timeoutMs?: number;
  /**
   * The plugin's package.json, whose peer range on @jobrt/core the `peer.minimum` note compares
   * with the core API the plugin uses. Default: package.json in the working directory. Since
   * @jobrt/testkit 2.1.0.
   */
  packageJson?: string;
}
