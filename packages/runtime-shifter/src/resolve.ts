import { type JobrtError, type NodeConf, type StepRecord, jobrtError } from "@jobrt/core";
import { type ToolResult as HostToolResult, runTool } from "@jobrt/host-services";
import type { ShifterConf } from "./conf.js";
import { HEX64_RE, type ImageRef } from "./image.js";
import { show } from "./reject.js";

/** A tool's result with its output as text. */
export interface ToolResult extends Omit<HostToolResult, "stdout"> {
  stdout: string;
}

const MAX_OUTPUT = 1 << 20;

/**
 * Runs a site tool (shifterimg) as the job user: argv only, no shell, a minimal env, cwd "/",
 * its own process group so a time-out kills everything it started.
 */
export async function runAsUser(
  argv: string[],
  node: NodeConf,
  step: StepRecord,
  timeoutMs: number,
): Promise<ToolResult> {
  const ids = node.hostUid === 0 && (step.uid !== 0 || step.gid !== 0) ? { uid: step.uid, gid: step.gid } : {};
  const env = { PATH: "/usr/local/bin:/usr/bin:/bin", HOME: step.home, USER: step.user, LOGNAME: step.user };
  const r = await runTool(argv, { env, timeoutMs, maxOutput: MAX_OUTPUT, ...ids });
  return { ...r, stdout: r.stdout.toString("utf8") };
}

export type LookupResult = { kind: "found"; id: string } | { kind: "missing" } | { kind: "error"; detail: string };

function commandError(conf: ShifterConf, path: string, error: unknown): JobrtError {
  const code = (error as NodeJS.ErrnoException).code;
  const hint = conf.shifterimgPath
    ? "check ShifterimgPath in shifter.conf"
    : "set ShifterimgPath in shifter.conf (or udiRootPath in udiRoot.conf)";
  return jobrtError(
    "ERR_RUNTIME_COMMAND",
    { problem: `cannot run shifterimg at ${path}: ${code ?? String(error)}: ${hint}` },
    {
      cause: error,
      details: { runtime: "runtime/shifter", path },
    },
  );
}

function timeoutError(what: string, ms: number, key: string): JobrtError {
  return jobrtError(
    "ERR_RUNTIME_TIMEOUT",
    { problem: `${what} did not finish within ${ms / 1000} s (shifter.conf ${key}); it was killed` },
    {
      details: { runtime: "runtime/shifter", key },
    },
  );
}

function brief(r: ToolResult): string {
  const text = `${r.stdout}\n${r.stderr}`
    .replace(/\r?\n+/g, " ")
    .replace(/\r|\x1b\[[0-9;]*[A-Za-z]/g, "")
    .trim();
  const status = r.signal ? `killed by ${r.signal}` : `exit ${r.code}`;
  return text ? `${status}: ${text.slice(0, 300)}` : status;
}

/**
 * `shifterimg lookup type:tag` as the job user. Accepted as found only when it exits 0 and prints
 * exactly one line of 64 hex digits; a silent exit 1 is "not on the gateway"; anything else is an error.
 */
export async function lookupImage(
  shifterimg: string,
  image: ImageRef,
  node: NodeConf,
  step: StepRecord,
  conf: ShifterConf,
): Promise<LookupResult> {
  let r: ToolResult;
  try {
    r = await runAsUser([shifterimg, "lookup", image.canonical], node, step, conf.lookupTimeoutMs);
  } catch (error) {
    throw commandError(conf, shifterimg, error);
  }
  if (r.timedOut) throw timeoutError(`shifterimg lookup ${image.canonical}`, conf.lookupTimeoutMs, "LookupTimeout");
  const lines = r.stdout.split("\n").filter((l) => l.trim() !== "");
  if (r.code === 0) {
    const id = lines.length === 1 ? (lines[0] as string).trim() : "";
    if (HEX64_RE.test(id)) return { kind: "found", id };
    return {
      kind: "error",
      detail: `shifterimg lookup printed ${show(r.stdout.slice(0, 200))}, not one 64-hex image id`,
    };
  }
  if (r.code === 1 && lines.length === 0) return { kind: "missing" };
  return { kind: "error", detail: `shifterimg lookup ${image.canonical} failed (${brief(r)})` };
}

/** The last `status: X` a `shifterimg pull` printed (it exits 0 even on FAILURE). */
export function lastPullStatus(output: string): string | undefined {
  const all = [...output.matchAll(/status: ([A-Z_]+)/g)];
  return all.at(-1)?.[1];
}

/** `shifterimg pull type:tag` as the job user; returns its last status. Its exit code is not trusted. */
export async function pullImage(
  shifterimg: string,
  image: ImageRef,
  node: NodeConf,
  step: StepRecord,
  conf: ShifterConf,
): Promise<{ status?: string; result: ToolResult }> {
  let r: ToolResult;
  try {
    r = await runAsUser([shifterimg, "pull", image.canonical], node, step, conf.pullTimeoutMs);
  } catch (error) {
    throw commandError(conf, shifterimg, error);
  }
  if (r.timedOut) throw timeoutError(`shifterimg pull ${image.canonical}`, conf.pullTimeoutMs, "PullTimeout");
  const status = lastPullStatus(r.stdout);
  return status === undefined ? { result: r } : { status, result: r };
}
