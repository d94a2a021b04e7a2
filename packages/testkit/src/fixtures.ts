import { availableParallelism, hostname, tmpdir, userInfo } from "node:os";
import { type ContainerRequest, type Logger, type NodeConf, type StepRecord, emptyRequest } from "@jobrt/core";
import { planStep } from "@jobrt/launcher";
import { makeTempDir, removeTempDir } from "./tempdirs.js";

/** A test node: its log lines, and `dispose()`, which removes the temp dirs it made. */
export type TestNode = NodeConf & { logs: string[]; dispose(): void };

/**
 * A NodeConf for tests: temp SpoolDir and conf dir unless given, a logger that keeps every line.
 * Call `dispose()` when done (e.g. in afterAll): it removes the dirs this call created, never the
 * ones you passed in, and throws naming any it had to leave (one with a mount below it). The dirs
 * are made under $JOBRT_TEST_TMP when set, else the system temp dir.
 */
export function createTestNode(overrides: Partial<NodeConf> = {}): TestNode {
  const logs: string[] = [];
  const log: Logger = (level, message) => {
    logs.push(`${level}: ${message}`);
  };
  const made: string[] = [];
  const temp = (kind: string): string => {
    const dir = makeTempDir(`jobrt-testkit-${kind}-`);
    made.push(dir);
    return dir;
  };
  return {
    nodeName: hostname(),
    confDir: overrides.confDir ?? temp("conf"),
    spoolDir: overrides.spoolDir ?? temp("spool"),
    killWait: 5,
    hostUid: process.getuid?.() ?? 0,
    log,
    ...overrides,
    logs,
    dispose() {
      const left = made.splice(0).flatMap(removeTempDir);
      if (left.length > 0) throw new Error(`createTestNode: dispose() could not remove: ${left.join("; ")}`);
    },
  };
}

/** Fills the defaults of a container request (what the CLI builds from --container-* options). */
export function containerRequest(partial: Partial<ContainerRequest> = {}): ContainerRequest {
  return { ...emptyRequest(), ...partial };
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
  return 100_000 + (((process.pid % 20_000) * 100 + nextJobId) % 1_900_000);
}

/**
 * A StepRecord as the host builds it: the launcher's own planner makes it, so the task environment
 * is exactly what `jobrt run` gives (SLURM_JOB_ID and SLURM_JOBID, SLURM_RUNTIME, SLURM_CONTAINER,
 * SLURM_NTASKS, ...; docs/cli.md lists them). The default cwd is the system temp dir; pass `cwd`
 * for a dir of your own.
 */
export function createTestStep(options: TestStepOptions): StepRecord {
  const me = userInfo();
  const user = options.user ?? { uid: me.uid, gid: me.gid, name: me.username, home: me.homedir };
  const ids = typeof options.tasks === "object" ? options.tasks : [...Array(options.tasks ?? 1).keys()];
  const totalTasks = options.totalTasks ?? Math.max(ids.length, ...ids.map((i) => i + 1));
  const argv = options.argv ?? ["sh", "-c", 'echo "jobrt-testkit:$SLURM_PROCID"'];
  const env: Record<string, string> = { PATH: process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin", ...options.env };
  const [planned] = planStep(
    {
      jobId: options.jobId ?? uniqueJobId(),
      stepId: options.stepId ?? 0,
      user: { uid: user.uid, gid: user.gid, user: user.name, home: user.home ?? "/nonexistent" },
      components: [
        {
          argv,
          ntasks: totalTasks,
          runtime: options.runtime,
          cwd: options.cwd ?? tmpdir(),
          env,
          io: {},
          ...(options.container ? { container: containerRequest(options.container) } : {}),
        },
      ],
    },
    hostname(),
    availableParallelism(),
  );
  const step = (planned as { record: StepRecord }).record;
  // This node holds only the chosen tasks, as one node of a multi-node step would.
  step.tasks = step.tasks.filter((task) => ids.includes(task.globalId));
  for (const task of step.tasks) task.env.SLURM_STEP_TASKS_PER_NODE = String(step.tasks.length);
  return step;
}
