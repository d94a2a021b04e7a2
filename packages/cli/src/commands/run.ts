import { cpus } from "node:os";
import { StepCancel, type StepEvent, type TaskExitEvent, parseTimeLimit, runSession } from "@jobrt/launcher";
import { flag, one, parseCommandLine, positiveInt } from "../args.js";
import { describeError, exitCodeFor } from "../errors.js";
import { type TaskEnd, failureLines } from "../failures.js";
import { jsonEventLine } from "../jsonevent.js";
import { showPull } from "../pullprogress.js";
import { createHost } from "../host.js";
import { say } from "../say.js";
import { listRuntimes } from "../listing.js";
import { hostNodeLog } from "../nodelog.js";
import { componentSpecs, stepUser } from "../runspec.js";
import { trapSignals } from "../signals.js";
import type { Timings } from "../timings.js";

/** `jobrt run`: turns argv into a step plan and hands it to the launcher's step session. */
export async function runCommand(args: string[], timings?: Timings): Promise<number> {
  const parsed = parseCommandLine(args, { command: "run", components: true, needCommand: !args.includes("list") });
  if (flag(parsed.step, "help")) {
    process.stdout.write((await import("../help.js")).RUN_HELP);
    return 0;
  }
  timings?.mark("command");
  const verbose = parsed.step.get("verbose")?.length ?? 0;
  const json = flag(parsed.step, "json");
  const host = createHost(one(parsed.step, "conf-dir"), verbose);
  if (parsed.components.some((c) => one(c.options, "runtime") === "list")) return listRuntimes(host, json);
  const components = componentSpecs(parsed);
  const user = stepUser(parsed);
  const timeText = one(parsed.step, "time");
  const timeLimit = timeText === undefined ? undefined : parseTimeLimit(timeText);
  const jobText = one(parsed.step, "jobid");
  const jobId = jobText === undefined ? undefined : positiveInt(jobText, "jobid", 4_294_967_000);
  const cancel = new StepCancel();
  trapSignals(cancel);
  timings?.mark("config");
  const ends: TaskEnd[] = [];
  const nodeLog = hostNodeLog(host, { uid: user.uid, user: user.user, containers: components.map((c) => c.container) });
  // srun numbers a heterogeneous step's tasks within each component in its failure lines.
  const firstTask = components.map((_, i) => components.slice(0, i).reduce((n, c) => n + c.ntasks, 0));
  const result = await runSession(
    { mode: "run", user, components, cpusOnNode: cpus().length, ...(jobId !== undefined ? { jobId } : {}) },
    {
      registry: host.registry,
      node: host.node,
      cancel,
      procTrack: host.site.procTrack,
      devices: host.site.devices,
      client: { verbose },
      json,
      report: say,
      describeError: (e) => describeError(e, verbose),
      onEvent: (e: StepEvent) => {
        timings?.onEvent(e);
        nodeLog.onEvent(e);
        if (e.event === "task-exit") ends.push(taskEnd(e, firstTask, cancel));
        if (json) process.stdout.write(jsonEventLine(e));
        else if (e.event === "pull")
          showPull(e, { write: (t) => process.stderr.write(t), isTTY: process.stderr.isTTY === true, verbose });
      },
      ...(timeLimit !== undefined ? { timeLimit } : {}),
    },
  );
  for (const line of failureLines(host.node.nodeName, ends)) say(line);
  // A bad runtime name or a usage error found while launching is still a usage error (2).
  if (result.error && result.taskStatus.length === 0 && exitCodeFor(result.error) === 2) return 2;
  return result.status;
}

/** A task's end for srun's failure lines, its number within its component of a heterogeneous step. */
function taskEnd(e: TaskExitEvent, firstTask: number[], cancel: StepCancel): TaskEnd {
  return {
    component: e.component,
    task: e.task - (firstTask[e.component] ?? 0),
    code: e.code,
    signal: e.signal,
    interrupted: cancel.signal === "SIGINT",
  };
}
