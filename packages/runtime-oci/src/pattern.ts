/**
 * oci.conf `%` patterns (runtime-oci.md, Patterns). `%@` keeps Slurm's exact quoting; every other string
 * substitution is shell-quoted for the quoting context it appears in when the result is a
 * `/bin/sh -c` command (runtime-oci.md W8), so user-controlled values (bundle path, cwd, user name, rootfs)
 * can neither split words nor inject commands.
 */
import { type JobrtError, jobrtError } from "@jobrt/core";

/** Every character that may follow `%`. */
export const PATTERN_CHARS = "%@bIejmnprstuUZ";

export type PatternChar = "@" | "b" | "I" | "e" | "j" | "m" | "n" | "p" | "r" | "s" | "t" | "u" | "U" | "Z";

/** Values for one expansion. A value left undefined is unknown: a pattern that needs it fails. */
export interface PatternValues {
  /** Task argv for `%@` (empty in config.json mode: the args live in config.json). */
  argv?: string[];
  bundle?: string;
  /** `%I`: the container id (`--container-id`, `SLURM_CONTAINER_ID`), or jobrt's default (containername.ts). */
  containerId?: string;
  envFile?: string;
  jobId: number;
  /** `%m`: the step spool directory. */
  stepDir?: string;
  nodeName: string;
  pid?: number;
  rootfs?: string;
  /** `%s` as printed (batch/interactive/extern use Slurm's reserved numbers). */
  stepId: number;
  taskId?: number;
  user: string;
  uid: number;
  cwd?: string;
}

/** A pattern that uses a value not known in this context: ERR_CONF_PATTERN, which callers match on. */
function patternValueError(char: string, what: string): JobrtError {
  return jobrtError("ERR_CONF_PATTERN", { char, what }, { details: { runtime: "runtime/oci" } });
}

const NAMES: Record<PatternChar, string> = {
  "@": "task argv",
  b: "bundle path",
  I: "container id",
  e: "environment file",
  j: "job id",
  m: "step spool directory",
  n: "node name",
  p: "runtime process pid",
  r: "rootfs path",
  s: "step id",
  t: "task id",
  u: "user name",
  U: "user id",
  Z: "working directory",
};

export function describePatternChar(c: PatternChar): string {
  return NAMES[c];
}

export interface PatternProblem {
  /** Offset of the `%` in the value. */
  index: number;
  /** The character after `%`, or "" for a trailing `%`. */
  char: string;
}

/** The first unknown `%` sequence (including a trailing lone `%`), or undefined. */
export function findPatternProblem(pattern: string): PatternProblem | undefined {
  for (let i = 0; i < pattern.length; i++) {
    if (pattern[i] !== "%") continue;
    const c = pattern[i + 1];
    if (c === undefined || !PATTERN_CHARS.includes(c)) return { index: i, char: c ?? "" };
    i++;
  }
  return undefined;
}

/** The pattern characters a (valid) pattern uses, without `%%`. */
export function usedPatternChars(pattern: string): Set<PatternChar> {
  const out = new Set<PatternChar>();
  for (let i = 0; i < pattern.length; i++) {
    if (pattern[i] !== "%") continue;
    const c = pattern[i + 1];
    if (c !== undefined && c !== "%" && PATTERN_CHARS.includes(c)) out.add(c as PatternChar);
    i++;
  }
  return out;
}

/** Slurm's `%@`: each arg in single quotes, `'` written as `'"'"'`, joined by one space. */
export function quoteArgv(argv: readonly string[]): string {
  return argv.map((a) => `'${a.replace(/'/g, `'"'"'`)}'`).join(" ");
}

const SAFE = /^[A-Za-z0-9_./:=@+,-]+$/;

type QuoteState = "none" | "single" | "double";

/** Quotes `value` so that, pasted at a point in a shell word in `state`, it stays one literal string. */
export function shellQuoteIn(state: QuoteState, value: string): string {
  if (state === "single") return value.replace(/'/g, `'"'"'`);
  if (state === "double") return value.replace(/[\\"$`]/g, "\\$&");
  if (value !== "" && SAFE.test(value)) return value;
  return `'${value.replace(/'/g, `'"'"'`)}'`;
}

function valueFor(c: PatternChar, v: PatternValues): string | number | undefined {
  switch (c) {
    case "@":
      return v.argv === undefined ? undefined : quoteArgv(v.argv);
    case "b":
      return v.bundle;
    case "I":
      return v.containerId;
    case "e":
      return v.envFile;
    case "j":
      return v.jobId;
    case "m":
      return v.stepDir;
    case "n":
      return v.nodeName;
    case "p":
      return v.pid;
    case "r":
      return v.rootfs;
    case "s":
      return v.stepId;
    case "t":
      return v.taskId;
    case "u":
      return v.user;
    case "U":
      return v.uid;
    case "Z":
      return v.cwd;
  }
}

export interface ExpandOptions {
  /** The result is a `/bin/sh -c` command: quote substitutions for their shell context. */
  shell: boolean;
  /**
   * Written for `%p` (raw) while the pid is not known yet, for a program that puts the pid in its
   * place later (createstart.pl, which fills in the pid).
   */
  pidPlaceholder?: string;
}

/**
 * Expands a validated pattern. Throws ERR_CONF_PATTERN when a used value is unknown, and a
 * plain Error for an invalid `%` sequence (load-time validation should have caught it).
 */
export function expandPattern(pattern: string, values: PatternValues, options: ExpandOptions): string {
  let out = "";
  let state: QuoteState = "none";
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i] as string;
    if (ch === "%") {
      const c = pattern[i + 1];
      if (c === undefined || !PATTERN_CHARS.includes(c))
        throw new Error(`invalid pattern character %${c ?? ""} at offset ${i}`);
      i++;
      if (c === "%") {
        out += "%";
        continue;
      }
      const pc = c as PatternChar;
      if (pc === "p" && values.pid === undefined && options.pidPlaceholder !== undefined) {
        out += options.pidPlaceholder;
        continue;
      }
      const value = valueFor(pc, values);
      if (value === undefined) throw patternValueError(pc, NAMES[pc]);
      if (typeof value === "number" || pc === "@" || !options.shell) out += String(value);
      else out += shellQuoteIn(state, value);
      continue;
    }
    out += ch;
    if (!options.shell) continue;
    // Track the shell quoting context of the pattern's own text, so each substitution is quoted
    // for the place it lands in.
    if (state === "none") {
      if (ch === "'") state = "single";
      else if (ch === '"') state = "double";
      else if (ch === "\\" && i + 1 < pattern.length && pattern[i + 1] !== "%") out += pattern[++i];
    } else if (state === "single") {
      if (ch === "'") state = "none";
    } else if (ch === '"') state = "none";
    else if (ch === "\\" && i + 1 < pattern.length && pattern[i + 1] !== "%") out += pattern[++i];
  }
  return out;
}
