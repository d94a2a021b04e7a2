import { cpus } from "node:os";
import { resolve } from "node:path";
import {
  type ComponentSpec,
  StepCancel,
  type StepEvent,
  type UserIdentity,
  claimStep,
  recordTaskPid,
  writeStepFile,
  currentUser,
  expandFilePattern,
  exportEnvironment,
  lookupGroup,
  lookupUser,
  parseTimeLimit,
  planStep,
  runStep,
} from "@jobrt/launcher";
import { type ParsedCommandLine, containerRequest, flag, one, parseCommandLine, positiveInt, usage } from "../args.js";
import { RUN_HELP } from "../help.js";
import { describeError, exitCodeFor } from "../errors.js";
import { type Host, createHost, finishStep, say } from "../host.js";
import { collectGarbage } from "./gc.js";
import { listRuntimes } from "./runtimes.js";

export const RUN_OPTIONS = new Set([
  "ntasks", "runtime", "container", "container-volume", "container-module", "container-env", "container-workdir",
  "container-entrypoint", "container-clearenv", "container-opt", "label", "output", "error", "input", "chdir",
  "export", "time", "jobid", "uid", "gid", "verbose", "json", "conf-dir", "help",
]);

function checkPattern(pattern: string, option: string): void {
  if (/%\d*$/.test(pattern.replace(/%%/g, ""))) throw usage(`${option}: ${JSON.stringify(pattern)} ends with a lone %`);
  expandFilePattern(pattern, option, { jobId: 1, stepId: 0, taskId: 0, nodeName: "n", nodeId: 0 });
}

/** Turns parsed components into launcher specs, checking every value first. */
export function componentSpecs(parsed: ParsedCommandLine): ComponentSpec[] {
  // As with srun, output, input, environment and directory options carry over to later
  // components unless a component sets its own; -l labels the whole step.
  const inherited = ["output", "error", "input", "export", "chdir"];
  parsed.components.forEach((c, index) => {
    const previous = parsed.components[index - 1];
    if (!previous) return;
    for (const name of inherited) {
      const v = previous.options.get(name);
      if (v && !c.options.has(name)) c.options.set(name, v);
    }
  });
  const labelAll = parsed.components.some((c) => flag(c.options, "label"));
  const specs = parsed.components.map((c, index): ComponentSpec => {
    const where = parsed.components.length > 1 ? `component ${index}: ` : "";
    const o = c.options;
    const ntasks = positiveInt(one(o, "ntasks") ?? "1", "ntasks", 100_000);
    const runtime = one(o, "runtime");
    const cwd = resolve(one(o, "chdir") ?? process.cwd());
    for (const [name, option] of [["output", "--output"], ["error", "--error"]] as const) {
      const p = one(o, name);
      if (p !== undefined) checkPattern(p, `${where}${option}`);
    }
    const input = one(o, "input");
    if (input !== undefined && input !== "all" && input !== "none" && !/^\d+$/.test(input)) checkPattern(input, `${where}--input`);
    if (input === "") throw usage(`${where}--input: empty value`);
    const container = containerRequest(o);
    return {
      argv: c.argv,
      ntasks,
      ...(runtime !== undefined ? { runtime } : {}),
      ...(container ? { container } : {}),
      cwd,
      env: exportEnvironment(one(o, "export") ?? "ALL", process.env),
      io: {
        label: labelAll,
        ...(one(o, "output") !== undefined ? { output: one(o, "output") as string } : {}),
        ...(one(o, "error") !== undefined ? { error: one(o, "error") as string } : {}),
        ...(input !== undefined ? { input } : {}),
      },
    };
  });
  const total = specs.reduce((n, s) => n + s.ntasks, 0);
  for (const s of specs) {
    if (s.io.input !== undefined && /^\d+$/.test(s.io.input) && Number(s.io.input) >= total) {
      throw usage(`--input: task ${s.io.input} does not exist (the step has ${total} task${total === 1 ? "" : "s"})`);
    }
  }
  return specs;
}

/** --uid/--gid: root may run tasks as anyone; others only as themselves. */
export function stepUser(parsed: ParsedCommandLine): UserIdentity {
  const me = currentUser();
  const uidText = one(parsed.step, "uid");
  const gidText = one(parsed.step, "gid");
  if (uidText === undefined && gidText === undefined) return me;
  const user = uidText !== undefined ? lookupUser(uidText) : { ...me };
  if (gidText !== undefined) user.gid = lookupGroup(gidText);
  if (me.uid !== 0 && (user.uid !== me.uid || user.gid !== me.gid)) {
    throw usage("--uid/--gid: only root may run tasks as another user or group");
  }
  return user;
}

export async function runCommand(args: string[]): Promise<number> {
  const parsed = parseCommandLine(args, { allowed: RUN_OPTIONS, components: true, needCommand: !args.includes("list"), command: "run" });
  if (flag(parsed.step, "help")) {
    process.stdout.write(RUN_HELP);
    return 0;
  }
  const verbose = parsed.step.get("verbose")?.length ?? 0;
  const json = flag(parsed.step, "json");
  const host = createHost(one(parsed.step, "conf-dir"), verbose);
  if (parsed.components.some((c) => one(c.options, "runtime") === "list")) {
    return listRuntimes(host, json);
  }
  const specs = componentSpecs(parsed);
  const user = stepUser(parsed);
  const timeText = one(parsed.step, "time");
  const timeLimit = timeText === undefined ? undefined : parseTimeLimit(timeText);
  const jobText = one(parsed.step, "jobid");
  const jobId = jobText === undefined ? undefined : positiveInt(jobText, "jobid", 4_294_967_000);
  return launch(host, specs, user, { json, verbose, ...(timeLimit !== undefined ? { timeLimit } : {}), ...(jobId !== undefined ? { jobId } : {}) });
}

const FORWARDED: NodeJS.Signals[] = ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"];

/** Installs signal handlers that cancel the step instead of killing jobrt (cleanup must run). */
export function trapSignals(cancel: StepCancel): () => void {
  const handlers = FORWARDED.map((sig) => {
    const h = () => cancel.request(sig);
    process.on(sig, h);
    return [sig, h] as const;
  });
  return () => {
    for (const [sig, h] of handlers) process.off(sig, h);
  };
}

async function launch(
  host: Host,
  specs: ComponentSpec[],
  user: UserIdentity,
  opts: { json: boolean; verbose: number; timeLimit?: number; jobId?: number },
): Promise<number> {
  const cancel = new StepCancel();
  const untrap = trapSignals(cancel);
  // Cheap when there is nothing to do: a directory listing and a few small reads.
  await collectGarbage(host, true);
  const claim = claimStep(host.node.spoolDir, opts.jobId);
  const onEvent = (e: StepEvent) => {
    if (e.event === "task-start" && typeof e.pid === "number") recordTaskPid(claim.dir, e.pid);
    if (opts.json) process.stdout.write(`${JSON.stringify({ ...e, time: Date.now() })}\n`);
  };
  try {
    const planned = planStep({ jobId: claim.jobId, stepId: claim.stepId, user, components: specs }, host.node, cpus().length);
    const result = await runStep(planned, {
      registry: host.registry,
      node: host.node,
      cancel,
      client: { verbose: opts.verbose },
      json: opts.json,
      report: say,
      describeError: (e) => describeError(e, opts.verbose),
      onEvent,
      beforeSetup: (components) => writeStepFile(claim.dir, components.map((c) => c.record)),
      ...(opts.timeLimit !== undefined ? { timeLimit: opts.timeLimit } : {}),
    });
    const status = await finishStep(host, result.status);
    // A bad runtime name or a usage error found while launching is still a usage error (2).
    if (result.error && result.taskStatus.length === 0 && exitCodeFor(result.error) === 2) return 2;
    return status;
  } finally {
    claim.release();
    untrap();
  }
}
