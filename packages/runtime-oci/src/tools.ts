import type { RuntimeTool, ToolsContext } from "@jobrt/core";
import { executableProblem } from "@jobrt/host-services";
import { runShellCommand } from "./command.js";
import { type OciConf, RUNTIME_COMMAND_KEYS, findProgram, loadOciConf } from "./conf.js";
import { shellQuoteIn } from "./pattern.js";

/** How long `<tool> --version` may take: it only prints a line. */
const VERSION_TIMEOUT_MS = 5000;

/** A RunTime* command whose program cannot be named before it runs (a pattern, a variable, a shell construct). */
export interface UnnamedProgram {
  key: string;
  command: string;
}

/**
 * The program a RunTime* command runs: its first word, unquoted. Undefined when that word is a
 * pattern (%m...), a variable or other shell syntax: only running the command would tell.
 */
function programOf(command: string): string | undefined {
  const first = /^\s*(?:'([^']*)'|"([^"$`\\%]*)"|([^\s'"]+))(?:\s|$)/.exec(command);
  const word = first?.[1] ?? first?.[2] ?? first?.[3];
  if (word === undefined || word === "" || /[%$`\\;&|<>(){}*?[\]~=]/.test(word)) return undefined;
  return word;
}

/** Where `program` is (absolute as given, else on the first PATH that has it), or why it is unusable. */
function locate(program: string, paths: readonly (string | undefined)[]): { path?: string; problem?: string } {
  let path: string | undefined = program.startsWith("/") ? program : undefined;
  if (!path) for (const p of paths) path ??= findProgram(program, p);
  if (!path) return { problem: `${program} is not on PATH` };
  const problem = executableProblem(path);
  return problem === undefined ? { path } : { path, problem };
}

/** What `<path> --version` prints first (runc, crun: "runc version 1.1.5"): the version word, else the line. */
async function versionOf(path: string): Promise<string | undefined> {
  try {
    const r = await runShellCommand(`${shellQuoteIn("none", path)} --version`, {
      key: "version",
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
      cwd: "/",
      timeoutMs: VERSION_TIMEOUT_MS,
      stdio: "capture",
    });
    const line = r.stdout
      .split("\n")
      .find((l) => l.trim() !== "")
      ?.trim();
    if (r.code !== 0 || line === undefined) return undefined;
    return /\bversion\s+(\S+)/i.exec(line)?.[1] ?? line.slice(0, 120);
  } catch {
    return undefined;
  }
}

/**
 * The programs the RunTime* commands of `conf` run, one entry per program (with the keys that run
 * it), looked up on `paths` in order; and the commands whose program cannot be named.
 */
export async function ociTools(
  conf: OciConf,
  paths: readonly (string | undefined)[],
): Promise<{ tools: RuntimeTool[]; unnamed: UnnamedProgram[] }> {
  const keysOf = new Map<string, string[]>();
  const unnamed: UnnamedProgram[] = [];
  for (const key of RUNTIME_COMMAND_KEYS) {
    const command = conf.commands[key];
    if (command === undefined) continue;
    const program = programOf(command);
    if (program === undefined) unnamed.push({ key, command });
    else keysOf.set(program, [...(keysOf.get(program) ?? []), key]);
  }
  const tools = await Promise.all(
    [...keysOf].map(([program, keys]) => toolAt(program, `${keys.join(", ")} in ${conf.file}`, paths)),
  );
  return { tools, unnamed };
}

/** runc, when there is no oci.conf: the embedded default runs it from PATH. */
export function defaultRuncTool(paths: readonly (string | undefined)[]): Promise<RuntimeTool> {
  return toolAt("runc", "PATH; no oci.conf, so the embedded default", paths);
}

/** `program` as a tool: where it is or why it cannot run, and its version when it runs. */
async function toolAt(program: string, source: string, paths: readonly (string | undefined)[]): Promise<RuntimeTool> {
  const where = locate(program, paths);
  const version = where.path && !where.problem ? await versionOf(where.path) : undefined;
  const name = program.slice(program.lastIndexOf("/") + 1);
  return { name, source, ...where, ...(version !== undefined ? { version } : {}) };
}

/** The programs oci.conf's RunTime* commands run (runc, when there is no oci.conf), as the host finds them. */
export async function tools({ node }: ToolsContext): Promise<RuntimeTool[]> {
  const conf = loadOciConf(node.confDir);
  if (!conf) return [await defaultRuncTool([process.env.PATH])];
  return (await ociTools(conf, [process.env.PATH])).tools;
}
