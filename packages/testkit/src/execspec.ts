import { statSync } from "node:fs";
import { basename, delimiter, isAbsolute, join } from "node:path";
import type { ExecSpec, TaskRecord } from "@jobrt/core";
import { executableProblem } from "@jobrt/host-services";

const SHELLS = new Set(["sh", "bash", "dash", "ash", "zsh", "ksh", "mksh", "csh", "tcsh", "fish"]);

function isExecutableFile(path: string): boolean {
  return executableProblem(path) === undefined;
}

/**
 * Where the host's spawn would find argv[0]: as given when it contains a slash, else on the PATH
 * of the spec's own env (that is what child_process uses), falling back to the host's PATH.
 */
export function resolveProgram(spec: ExecSpec): string | undefined {
  const program = spec.argv[0];
  if (program === undefined || program === "") return undefined;
  if (program.includes("/")) {
    const path = isAbsolute(program) ? program : join(spec.cwd, program);
    return isExecutableFile(path) ? path : undefined;
  }
  const searchPath = spec.env.PATH ?? process.env.PATH ?? "";
  for (const dir of searchPath.split(delimiter)) {
    if (dir === "" || !isAbsolute(dir)) continue;
    const candidate = join(dir, program);
    if (isExecutableFile(candidate)) return candidate;
  }
  return undefined;
}

/** What is wrong with argv[0] (empty when nothing is). */
export function argvProblems(spec: ExecSpec): string[] {
  const program = spec.argv[0];
  if (typeof program !== "string" || program === "") return ["argv[0] is empty"];
  if (!program.includes("/") || isAbsolute(program)) {
    return resolveProgram(spec)
      ? []
      : [
          `argv[0] ${JSON.stringify(program)} is not an executable file${program.includes("/") ? "" : " on the spec's PATH"}`,
        ];
  }
  return [`argv[0] ${JSON.stringify(program)} is relative: use an absolute path or a bare name found on PATH`];
}

/** What is wrong with env and cwd (empty when nothing is). */
export function envCwdProblems(spec: ExecSpec): string[] {
  const problems: string[] = [];
  if (typeof spec.env !== "object" || spec.env === null || Array.isArray(spec.env))
    problems.push("env is not an object");
  else {
    for (const [key, value] of Object.entries(spec.env)) {
      if (typeof value !== "string") problems.push(`env.${key} is ${typeof value}, not a string`);
      if (key === "" || key.includes("=") || key.includes("\0"))
        problems.push(`env key ${JSON.stringify(key)} is not a valid variable name`);
    }
  }
  if (!spec.argv.every((a) => typeof a === "string" && !a.includes("\0")))
    problems.push("argv holds a non-string or a NUL byte");
  if (typeof spec.cwd !== "string" || !isAbsolute(spec.cwd))
    problems.push(`cwd ${JSON.stringify(spec.cwd)} is not an absolute path`);
  else {
    try {
      if (!statSync(spec.cwd).isDirectory()) problems.push(`cwd ${spec.cwd} is not a directory`);
    } catch {
      problems.push(`cwd ${spec.cwd} does not exist`);
    }
  }
  return problems;
}

/** Indexes of argv covered by an occurrence of the task's own argv: its words are the task's, not the plugin's. */
function taskWords(argv: readonly string[], task: readonly string[]): Set<number> {
  const covered = new Set<number>();
  if (task.length === 0) return covered;
  for (let i = 0; i + task.length <= argv.length; i++) {
    if (task.every((a, j) => argv[i + j] === a)) for (let j = 0; j < task.length; j++) covered.add(i + j);
  }
  return covered;
}

/** True when argv[i] starts a shell given a command string: `sh -c`, `bash -ec`, `busybox sh -c`. */
function shellAt(argv: readonly string[], i: number): boolean {
  const word = argv[i] ?? "";
  // A program is one word; a script passed as an argument (perl -e '...') is not a shell's name.
  if (/\s/.test(word)) return false;
  const program = basename(word);
  const args =
    program === "busybox" && SHELLS.has(argv[i + 1] ?? "") ? argv.slice(i + 2, i + 4) : argv.slice(i + 1, i + 3);
  return (
    (SHELLS.has(program) || (program === "busybox" && SHELLS.has(argv[i + 1] ?? ""))) &&
    args.some((a) => /^-[a-z]*c[a-z]*$/.test(a))
  );
}

/**
 * A spec that runs `<shell> -c ...` without `shell: true` hides a shell string, at argv[0] or
 * further in, behind a wrapper (`env sh -c`, `bwrap ... sh -c`). The task's own argv passed through
 * unchanged is not the plugin's shell, so a shell among its words is allowed.
 */
export function shellProblems(spec: ExecSpec, task: TaskRecord, shellDeclared: boolean): string[] {
  if (spec.shell === true && !shellDeclared)
    return ["spec.shell is true but the plugin did not declare capabilities.shell"];
  if (spec.shell === true) return [];
  const own = taskWords(spec.argv, task.argv);
  const at = spec.argv.findIndex((_, i) => !own.has(i) && shellAt(spec.argv, i));
  if (at < 0) return [];
  const where = at === 0 ? "" : ` at argv[${at}] (inside the wrapper's argv)`;
  return [
    `argv ${JSON.stringify(spec.argv.slice(at, at + 3))}...${where} runs a shell command but spec.shell is not set`,
  ];
}

/** True when `needle` occurs in `haystack` as a contiguous run. */
export function containsSequence(haystack: readonly string[], needle: readonly string[]): boolean {
  if (needle.length === 0) return true;
  for (let i = 0; i + needle.length <= haystack.length; i++) {
    if (needle.every((a, j) => haystack[i + j] === a)) return true;
  }
  return false;
}
