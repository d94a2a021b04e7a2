import type { StepRecord } from "@jobrt/core";
import {
  type JoinRequest,
  type NodeStepListener,
  type NodeStepOptions,
  StepCancel,
  currentUser,
  nodeTaskCount,
  openNodeStep,
  planFromSlurm,
  runSession,
} from "@jobrt/launcher";
import { flag, one, parseCommandLine, requestFromOptions } from "../args.js";
import { describeError } from "../errors.js";
import { createHost, gcAfterDeath } from "../host.js";
import { say } from "../say.js";
import { hostNodeLog } from "../nodelog.js";
import { showPull } from "../pullprogress.js";
import { rawEnvironment } from "../rawinput.js";
import { trapSignals } from "../signals.js";
import { SPANK_OPTIONS_VARIABLE, optionsFromSpank } from "../spankoptions.js";
import type { Timings } from "../timings.js";

/** `jobrt exec`: one task of a Slurm step, planned from Slurm's environment, run by the step session. */
export async function execCommand(args: string[], timings?: Timings): Promise<number> {
  const parsed = parseCommandLine(args, {
    command: "exec",
    components: false,
    needCommand: !args.includes("--help") && !args.includes("-h"),
  });
  if (flag(parsed.step, "help")) {
    process.stdout.write((await import("../help.js")).EXEC_HELP);
    return 0;
  }
  timings?.mark("command");
  // Before anything else is opened: the step's other tasks on this node wait until it listens.
  const listener = await openNodeStep(say);
  const verbose = parsed.step.get("verbose")?.length ?? 0;
  const host = createHost(one(parsed.step, "conf-dir"), verbose);
  const env = rawEnvironment();
  const record = planExec(parsed, env, process.cwd());
  const cancel = new StepCancel();
  trapSignals(cancel);
  const nodeLog = hostNodeLog(host, {
    uid: record.uid,
    user: record.user,
    containers: [record.container],
    task: { id: record.tasks[0]?.globalId ?? 0, stepTasks: record.totalTasks },
  });
  timings?.mark("config");
  const result = await runSession(
    { mode: "exec", record },
    {
      registry: host.registry,
      node: host.node,
      cancel,
      procTrack: host.site.procTrack,
      devices: host.site.devices,
      // Slurm's SIGKILL of jobrt exec (or the OOM killer's) otherwise leaves its container until
      // the Epilog, after slurmstepd gave up on the task's stdio (docs/slurm.md, section 2.1).
      gcAfterDeath: gcAfterDeath(host),
      client: { verbose },
      report: say,
      describeError: (e) => describeError(e, verbose),
      ...(listener ? { nodeStep: nodeStepOptions(listener, parsed, env) } : {}),
      onEvent: (e) => {
        timings?.onEvent(e);
        nodeLog.onEvent(e);
        if (e.event === "pull")
          showPull(e, { write: (t) => process.stderr.write(t), isTTY: process.stderr.isTTY === true, verbose });
      },
    },
  );
  // A step that never launched (its setup failed) never served its joiners: they run their own.
  listener?.close();
  return result.status;
}

/** This jobrt as the node's for its step (docs/node-step.md): how the step's other tasks join it. */
function nodeStepOptions(
  listener: NodeStepListener,
  parsed: ReturnType<typeof parseCommandLine>,
  env: NodeJS.ProcessEnv,
): NodeStepOptions {
  return {
    listener,
    tasksOnNode: nodeTaskCount(env),
    plan: (request: JoinRequest) => planJoiner(parsed, env, request),
    line: (message: string) => `jobrt: ${message}\n`,
  };
}

/** The one task this `jobrt exec` runs, planned from Slurm's environment. */
function planExec(parsed: ReturnType<typeof parseCommandLine>, env: NodeJS.ProcessEnv, cwd: string): StepRecord {
  const c = parsed.components[0]!;
  // Set by jobrt's SPANK plugin (docs/slurm.md): its options, which the task itself never sees.
  const { [SPANK_OPTIONS_VARIABLE]: spank, ...taskEnv } = env;
  const options = spank === undefined ? c.options : new Map([...optionsFromSpank(spank, taskEnv), ...c.options]);
  const runtime = one(options, "runtime") ?? (env.SLURM_RUNTIME || env.SRUN_RUNTIME || "");
  const request = requestFromOptions(options, env.SLURM_CONTAINER_ID);
  return planFromSlurm(taskEnv, c.argv, runtime, currentUser(), cwd, request);
}

/** What configures a `jobrt exec` besides its options: a joiner must have the same to join. */
const CONFIGURING = /^(?:JOBRT_|SLURM_RUNTIME$|SRUN_RUNTIME$|SLURM_CONTAINER_ID$)/;

/**
 * A task that joined this node's jobrt (docs/node-step.md), planned as its own `jobrt exec`
 * would; a refusal when its jobrt would not be this one: other options or configuration.
 */
function planJoiner(
  mine: ReturnType<typeof parseCommandLine>,
  env: NodeJS.ProcessEnv,
  request: JoinRequest,
): StepRecord | string {
  const [command, ...args] = request.argv;
  const theirs = parseCommandLine(args, { command: "exec", components: false, needCommand: true });
  const options = (p: typeof mine) => JSON.stringify([[...p.step], [...p.components[0]!.options]]);
  if (command !== "exec" || options(theirs) !== options(mine)) return "other jobrt options than the node's jobrt";
  const configuring = (e: NodeJS.ProcessEnv) =>
    Object.keys(e)
      .filter((k) => CONFIGURING.test(k))
      .sort()
      .map((k) => `${k}=${e[k]}`)
      .join("\0");
  if (configuring(request.env) !== configuring(env)) return "another jobrt configuration than the node's jobrt";
  return planExec(theirs, request.env, request.cwd);
}
