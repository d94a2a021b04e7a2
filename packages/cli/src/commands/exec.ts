import { StepCancel, currentUser, planFromSlurm, runSession } from "@jobrt/launcher";
import { flag, one, parseCommandLine, requestFromOptions } from "../args.js";
import { describeError } from "../errors.js";
import { createHost, gcAfterDeath } from "../host.js";
import { say } from "../say.js";
import { hostNodeLog } from "../nodelog.js";
import { showPull } from "../pullprogress.js";
import { rawEnvironment } from "../rawinput.js";
import { trapSignals } from "../signals.js";
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
  const verbose = parsed.step.get("verbose")?.length ?? 0;
  const c = parsed.components[0]!;
  const host = createHost(one(parsed.step, "conf-dir"), verbose);
  const runtime = one(c.options, "runtime") ?? (process.env.SLURM_RUNTIME || process.env.SRUN_RUNTIME || "");
  const record = planFromSlurm(
    rawEnvironment(),
    c.argv,
    runtime,
    currentUser(),
    process.cwd(),
    requestFromOptions(c.options, process.env.SLURM_CONTAINER_ID),
  );
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
      onEvent: (e) => {
        timings?.onEvent(e);
        nodeLog.onEvent(e);
        if (e.event === "pull")
          showPull(e, { write: (t) => process.stderr.write(t), isTTY: process.stderr.isTTY === true, verbose });
      },
    },
  );
  return result.status;
}
