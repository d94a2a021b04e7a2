/**
 * The exit status of a task whose command the container does not have: 127 (not found) or 126
 * (found, not executable), as a shell, `--runtime none` and Slurm's own tasks report it. runc
 * reports its own failure to exec instead (1 from `runc run` and `runc create`, which looks the
 * command up before the task exists), and jobrt cannot tell that apart from a task that exits 1
 * by reading runc's message: it goes to the task's stderr. So the task's config.json (the one the
 * runtime was given) is looked up from the host (lookupCommand of @jobrt/core), and only a
 * certain answer changes the status (docs/runtime-oci.md, Missing command): in run mode by the
 * host itself after the runtime failed (missingCommandCheck, ExecSpec.supervise), in create/start
 * mode by createstart.pl after RunTimeCreate failed (missingCommandIn).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  type CommandLookup,
  type ContainerView,
  type MissingCommandCheck,
  type ViewMount,
  lookupCommand,
} from "@jobrt/core";

/** The status a missing (127) or non-executable (126) command stands for. */
export interface MissingCommand {
  status: 126 | 127;
  /** One line for the task's stderr, after the runtime's own message. */
  message: string;
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

/** Is an OCI mount a bind (whose content is a host directory or file)? */
function isBind(m: Json): boolean {
  const options = Array.isArray(m.options) ? m.options : [];
  return m.type === "bind" || options.includes("bind") || options.includes("rbind");
}

/** A config.json's mounts as the container will see them: a bind's host source, nothing known of the rest. */
export function viewMountsOf(config: Json): ViewMount[] {
  const mounts: ViewMount[] = (Array.isArray(config.mounts) ? config.mounts : []).filter(isObject).map((m) => {
    const source = typeof m.source === "string" && m.source.startsWith("/") && isBind(m) ? m.source : undefined;
    return { destination: String(m.destination ?? ""), ...(source !== undefined ? { source } : {}) };
  });
  // Masked paths get /dev/null or an empty tmpfs over them.
  const linux = isObject(config.linux) ? config.linux : {};
  for (const p of Array.isArray(linux.maskedPaths) ? linux.maskedPaths : []) mounts.push({ destination: String(p) });
  return mounts;
}

/** The container's view, command, PATH and cwd from a config.json object, or why it cannot be known. */
function viewOf(
  config: Json,
): { view: ContainerView; command: string; path: string | undefined; cwd: string } | string {
  const proc = isObject(config.process) ? config.process : undefined;
  const root = isObject(config.root) ? config.root.path : undefined;
  const args = Array.isArray(proc?.args) ? proc.args : [];
  if (typeof root !== "string" || !root.startsWith("/")) return "no absolute root.path";
  if (typeof args[0] !== "string") return "no process.args";
  // A hook may create the command before the task starts: nothing is certain then.
  if (isObject(config.hooks) && Object.values(config.hooks).some((h) => Array.isArray(h) && h.length > 0))
    return "the bundle has hooks";
  const mounts = viewMountsOf(config);
  const env = Array.isArray(proc?.env) ? proc.env.filter((e): e is string => typeof e === "string") : [];
  const path = env
    .filter((e) => e.startsWith("PATH="))
    .at(-1)
    ?.slice(5);
  const cwd = typeof proc?.cwd === "string" ? proc.cwd : "/";
  return { view: { root, mounts }, command: args[0], path, cwd };
}

/**
 * Every non-zero exit of the runtime: runc's failed exec is 1, but crun's and a site wrapper's
 * differ, and a command the host finds keeps whatever status the runtime gave.
 */
const RUNTIME_FAILURES = Array.from({ length: 255 }, (_, i) => i + 1);

/**
 * The host's check of a run-mode task's command after RunTimeRun failed, from the config.json the
 * runtime is given; undefined when nothing could be certain (no root, no args, hooks).
 */
export function missingCommandCheck(config: Json): MissingCommandCheck | undefined {
  const v = viewOf(config);
  if (typeof v === "string") return undefined;
  return {
    command: v.command,
    view: v.view,
    ...(v.path !== undefined ? { path: v.path } : {}),
    cwd: v.cwd,
    exitCodes: RUNTIME_FAILURES,
  };
}

/** Looks the task's command up in the container a config.json describes. */
export function lookupInConfig(config: Json): CommandLookup {
  const v = viewOf(config);
  if (typeof v === "string") return { kind: "unknown", why: v };
  try {
    return lookupCommand(v.view, v.command, v.path, v.cwd);
  } catch (error) {
    // Whatever went wrong, the task starts as it would have: no answer is "unknown".
    return { kind: "unknown", why: (error as Error).message };
  }
}

/** The missing-command status for a lookup, or undefined when the command may exist. */
export function missingStatus(lookup: CommandLookup, command: string): MissingCommand | undefined {
  if (lookup.kind === "missing")
    return { status: 127, message: `jobrt-oci: ${command}: command not found in the container (exit status 127)` };
  if (lookup.kind === "not-executable")
    return {
      status: 126,
      message: `jobrt-oci: ${command}: ${lookup.path} in the container is not an executable file (exit status 126)`,
    };
  return undefined;
}

/** The missing-command status of the task whose config.json is in `taskDir`, or undefined (also when unreadable). */
export function missingCommandIn(taskDir: string): MissingCommand | undefined {
  let config: unknown;
  try {
    config = JSON.parse(readFileSync(join(taskDir, "config.json"), "utf8"));
  } catch {
    return undefined;
  }
  if (!isObject(config)) return undefined;
  const command = isObject(config.process) && Array.isArray(config.process.args) ? String(config.process.args[0]) : "";
  return missingStatus(lookupInConfig(config), command);
}
