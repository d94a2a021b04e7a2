import { mkdtempSync } from "node:fs";
import { hostname, tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import type { ContainerRequest, Logger, NodeConf, StepRecord, TaskRecord } from "@jobrt/core";

/** A NodeConf for tests: temp SpoolDir and conf dir unless given, a logger that keeps every line. */
export function createTestNode(overrides: Partial<NodeConf> = {}): NodeConf & { logs: string[] } {
  const logs: string[] = [];
  const log: Logger = (level, message) => {
    logs.push(`${level}: ${message}`);
  };
  return {
    nodeName: hostname(),
    confDir: overrides.confDir ?? mkdtempSync(join(tmpdir(), "jobrt-testkit-conf-")),
    spoolDir: overrides.spoolDir ?? mkdtempSync(join(tmpdir(), "jobrt-testkit-spool-")),
    killWait: 5,
    hostUid: process.getuid?.() ?? 0,
    log,
    ...overrides,
    logs,
  };
}

/** Fills the defaults of a container request (what the CLI builds from --container-* options). */
export function containerRequest(partial: Partial<ContainerRequest> = {}): ContainerRequest {
  return { volumes: [], modules: [], env: [], clearEnv: false, options: {}, ...partial };
}

export interface TestStepOptions {
  /** Normalised runtime name (meta.name). */
  runtime: string;
  jobId?: number;
  stepId?: number;
  /** Tasks held by this record: how many (global ids 0..n-1), or exactly which global ids. */
  tasks?: number | number[];
  /** Tasks of the whole step; default the number of tasks in this record. */
  totalTasks?: number;
  argv?: string[];
  cwd?: string;
  env?: Record<string, string>;
  container?: Partial<ContainerRequest>;
  /** The job user; default the user running the tests. */
  user?: JobUser;
}

export interface JobUser {
  uid: number;
  gid: number;
  name: string;
  home?: string;
}

let nextJobId = 0;

/**
 * A unique job id per call. Suites run in parallel processes (turbo, vitest workers) and runtimes
 * name containers after the job, so the pid is folded in to keep ids apart across processes.
 */
export function uniqueJobId(): number {
  nextJobId += 1;
  return 100_000 + ((process.pid % 20_000) * 100 + nextJobId) % 1_900_000;
}

/** A StepRecord as the host builds it, with Slurm-style task environments. */
export function createTestStep(options: TestStepOptions): StepRecord {
  const me = userInfo();
  const user = options.user ?? { uid: me.uid, gid: me.gid, name: me.username, home: me.homedir };
  const home = user.home ?? "/nonexistent";
  const jobId = options.jobId ?? uniqueJobId();
  const stepId = options.stepId ?? 0;
  const ids = typeof options.tasks === "object" ? options.tasks : [...Array(options.tasks ?? 1).keys()];
  const totalTasks = options.totalTasks ?? Math.max(ids.length, ...ids.map((i) => i + 1));
  const argv = options.argv ?? ["sh", "-c", 'echo "jobrt-testkit:$SLURM_PROCID"'];
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin",
    HOME: home,
    USER: user.name,
    ...options.env,
  };
  const tasks: TaskRecord[] = ids.map((globalId) => ({
    localId: globalId,
    globalId,
    argv: [...argv],
    env: {
      ...env,
      SLURM_JOB_ID: String(jobId),
      SLURM_STEP_ID: String(stepId),
      SLURM_PROCID: String(globalId),
      SLURM_LOCALID: String(globalId),
      SLURM_NODEID: "0",
      SLURM_NTASKS: String(totalTasks),
      SLURMD_NODENAME: hostname(),
    },
  }));
  return {
    jobId,
    stepId,
    kind: "normal",
    runtime: options.runtime,
    uid: user.uid,
    gid: user.gid,
    user: user.name,
    home,
    cwd: options.cwd ?? mkdtempSync(join(tmpdir(), "jobrt-testkit-cwd-")),
    argv: [...argv],
    env,
    tasks,
    totalTasks,
    nodeId: 0,
    nnodes: 1,
    ...(options.container ? { container: containerRequest(options.container) } : {}),
    pty: false,
  };
}
