import { dirname, isAbsolute, resolve } from "node:path";
import { MAX_CONF_BYTES, readConfText } from "./conffile.js";
import { type JobrtError, isJobrtError, jobrtError, messageOf } from "./errors.js";

/**
 * Slurm's configuration syntax (slurm.conf, oci.conf): one `Key=Value` a line, case-insensitive
 * keys, `#` comments (even inside quotes, as Slurm does; `\#` is a literal #), double quotes,
 * backslash escapes, trailing-backslash line continuation, `Include <file>`.
 */

export type FieldType = "string" | "bool" | "int" | "list" | "array" | { enum: Record<string, string> };

/** The parsed value of a key of kind T: "list" and "array" keys give every value, an enum what its word maps to. */
export type FieldValue<T extends FieldType> = T extends "bool"
  ? boolean
  : T extends "int"
    ? number
    : T extends "list" | "array"
      ? string[]
      : T extends { enum: Record<string, infer V> }
        ? V
        : string;

/** What a key's `check` is given: its typed value, or for an "array" key each line's value on its own. */
export type CheckedValue<T extends FieldType> = T extends "array" ? string : FieldValue<T>;

export interface FieldSpec<T extends FieldType = FieldType> {
  type: T;
  /** Minimum/maximum for "int". */
  min?: number;
  max?: number;
  required?: boolean;
  /**
   * Extra check on the typed value; returns what is wrong, or undefined. A method, so that its
   * parameter is compared both ways: a check written for its kind fits without a cast, and one
   * cast to `(v: never) => string | undefined` (what API 2.0 asked for) still fits.
   */
  check?(value: CheckedValue<T>): string | undefined;
}

/**
 * Keys in their canonical spelling (as documented); lookup is case-insensitive. Declare a schema
 * with `satisfies ConfSchema` rather than `: ConfSchema` and parseConf's values are typed from it.
 */
export type ConfSchema = Record<string, FieldSpec>;

export interface ConfLocation {
  file: string;
  line: number;
  column: number;
}

export type ConfValue = string | boolean | number | string[];

type RequiredKeys<S extends ConfSchema> = { [K in keyof S]: S[K] extends { required: true } ? K : never }[keyof S];

/**
 * The values parseConf gives for schema S: each key typed by its kind, present when set (always,
 * for a required key). A schema typed only as ConfSchema gives the untyped record of API 2.0.
 * Since core 2.1.0.
 */
export type ConfValues<S extends ConfSchema> = string extends keyof S ? Record<string, ConfValue> : TypedValues<S>;

type TypedValues<S extends ConfSchema> = { -readonly [K in RequiredKeys<S>]: FieldValue<S[K]["type"]> } & {
  -readonly [K in Exclude<keyof S, RequiredKeys<S>>]?: FieldValue<S[K]["type"]>;
};

export interface ParsedConf<S extends ConfSchema = ConfSchema> {
  file: string;
  values: ConfValues<S>;
  where: Record<string, ConfLocation>;
  /** Non-fatal remarks, e.g. a scalar key given twice (the last one wins, as in Slurm). */
  warnings: string[];
}

export interface ParseConfOptions<S extends ConfSchema = ConfSchema> {
  /** Name used in messages (and base for relative Include paths). */
  file: string;
  schema: S;
  /** Reads an included file; default reads it from disk (regular files only, see readConfText). */
  readFile?: (path: string) => string;
}

/** Repeated-key warnings kept per parse; the rest are counted in one summary line. */
export const MAX_CONF_WARNINGS = 10;

const TRUE_WORDS = new Set(["yes", "up", "true", "1"]);
const FALSE_WORDS = new Set(["no", "down", "false", "0"]);

/** Slurm's boolean spelling: yes|up|true|1 and no|down|false|0, any case. */
export function parseSlurmBool(text: string): boolean | undefined {
  const t = text.toLowerCase();
  if (TRUE_WORDS.has(t)) return true;
  if (FALSE_WORDS.has(t)) return false;
  return undefined;
}

/**
 * Shortens text for a message by cutting out its middle: a value of a megabyte must not become
 * a megabyte-long error line, and the end of a message usually says what to do.
 */
export function clipText(text: string, max = 300): string {
  if (text.length <= max) return text;
  const tail = Math.floor(max / 3);
  return `${text.slice(0, max - tail)}...[${text.length - max} characters cut]...${text.slice(text.length - tail)}`;
}

export function confError(loc: ConfLocation, key: string | undefined, what: string): JobrtError {
  const prefix = `${loc.file}:${loc.line}:${loc.column}`;
  const shownKey = key === undefined ? undefined : clipText(key, 60);
  return jobrtError(
    "ERR_CONF",
    { where: `${prefix}${shownKey ? `: ${shownKey}` : ""}`, problem: clipText(what) },
    {
      details: { file: loc.file, line: loc.line, column: loc.column, ...(shownKey ? { key: shownKey } : {}) },
    },
  );
}

/** A NUL byte ends a C string: Slurm would silently cut the value there, and paths cannot hold one. */
function checkNoNul(body: string, file: string): void {
  const at = body.indexOf("\0");
  if (at < 0) return;
  const lineStart = body.lastIndexOf("\n", at) + 1;
  const line = body.slice(0, at).split("\n").length;
  throw confError({ file, line, column: at - lineStart + 1 }, undefined, "contains a NUL byte");
}

interface LogicalLine {
  text: string;
  line: number;
}

function trailingBackslashes(s: string): number {
  let n = 0;
  for (let i = s.length - 1; i >= 0 && s[i] === "\\"; i--) n++;
  return n;
}

/** Cuts a line at the first `#` that is not escaped by an odd number of backslashes. */
function stripComment(s: string): string {
  let backslashes = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === "#" && backslashes % 2 === 0) return s.slice(0, i);
    backslashes = c === "\\" ? backslashes + 1 : 0;
  }
  return s;
}

function logicalLines(text: string): LogicalLine[] {
  const physical = text.split("\n");
  const out: LogicalLine[] = [];
  let pending: LogicalLine | undefined;
  physical.forEach((raw, i) => {
    let s = stripComment(raw.endsWith("\r") ? raw.slice(0, -1) : raw);
    const continued = trailingBackslashes(s) % 2 === 1;
    if (continued) s = s.slice(0, -1);
    if (pending) pending.text += s;
    else pending = { text: s, line: i + 1 };
    if (!continued) {
      out.push(pending);
      pending = undefined;
    }
  });
  if (pending) out.push(pending);
  return out;
}

/** Slurm removes every backslash and keeps the character after it. */
function stripEscapes(s: string): string {
  return s.replace(/\\(.?)/gs, "$1");
}

function typed(spec: FieldSpec, raw: string, loc: ConfLocation, key: string): ConfValue {
  const t = spec.type;
  if (t === "string" || t === "array") return raw;
  if (t === "bool") {
    const b = parseSlurmBool(raw);
    if (b === undefined)
      throw confError(loc, key, `${JSON.stringify(raw)} is not a boolean (use yes/no, true/false, 1/0, up/down)`);
    return b;
  }
  if (t === "int") {
    if (!/^-?\d+$/.test(raw)) throw confError(loc, key, `${JSON.stringify(raw)} is not an integer`);
    const n = Number(raw);
    // Past 2^53 Number() rounds (or gives Infinity): show what was written.
    const shown = Number.isSafeInteger(n) ? String(n) : raw;
    if (spec.min !== undefined && n < spec.min) throw confError(loc, key, `${shown} is below the minimum ${spec.min}`);
    if (spec.max !== undefined && n > spec.max) throw confError(loc, key, `${shown} is above the maximum ${spec.max}`);
    return n;
  }
  if (t === "list") {
    return raw
      .split(",")
      .map((s) => s.trim())
      .filter((s) => s !== "");
  }
  const mapped = t.enum[raw.toLowerCase()];
  if (mapped === undefined) {
    throw confError(loc, key, `${JSON.stringify(raw)} is not one of ${Object.keys(t.enum).join(", ")}`);
  }
  return mapped;
}

const LINE_RE = /^\s*([A-Za-z0-9_.]+)\s*([+\-*/]?=)\s*/;

/** The text of an `Include` target, relative to the including file; every problem is at the Include line. */
function readIncluded(
  target: string,
  loc: ConfLocation,
  depth: number,
  read: (path: string) => string,
): { body: string; path: string } {
  if (depth >= 8) throw confError(loc, "Include", "includes nest deeper than 8 levels");
  if (/[*?[%]/.test(target))
    throw confError(loc, "Include", `${JSON.stringify(target)}: globs and % patterns are not supported`);
  const path = isAbsolute(target) ? target : resolve(dirname(resolve(loc.file)), target);
  try {
    return { body: read(path), path };
  } catch (error) {
    // readConfText's own messages already start with the path.
    throw confError(
      loc,
      "Include",
      isJobrtError(error) && error.code === "ERR_CONF" ? error.message : `cannot read ${path}: ${messageOf(error)}`,
    );
  }
}

/** What one parse builds up, line by line, across its Includes. */
interface ParseState {
  schema: ConfSchema;
  /** Lower-case key → the schema's spelling: keys are case-insensitive, as in Slurm. */
  canonical: Map<string, string>;
  result: ParsedConf;
  seen: Set<string>;
  /** Repeated-key warnings past MAX_CONF_WARNINGS, said in one line at the end. */
  unshownWarnings: number;
}

/** One `Key=Value` line into the result: an array key appends, any other key's last value wins. */
function assignLine(p: ParseState, rawLine: string, line: number, file: string): void {
  const m = LINE_RE.exec(rawLine);
  if (!m) {
    throw confError(
      { file, line, column: rawLine.search(/\S/) + 1 },
      undefined,
      `expected Key=Value, got ${JSON.stringify(rawLine.trim())}`,
    );
  }
  const keyText = m[1] as string;
  const key = p.canonical.get(keyText.toLowerCase());
  const loc: ConfLocation = { file, line, column: m[0].length + 1 };
  if (key === undefined) throw confError({ file, line, column: rawLine.search(/\S/) + 1 }, keyText, "unknown key");
  const raw = valueText(rawLine.slice(m[0].length), loc, key);
  const spec = p.schema[key] as FieldSpec;
  const value = typed(spec, raw, loc, key);
  if (spec.check) {
    const problem = spec.check(value);
    if (problem) throw confError(loc, key, problem);
  }
  const { result } = p;
  if (spec.type === "array") {
    const list = (result.values[key] as string[] | undefined) ?? [];
    list.push(value as string);
    result.values[key] = list;
  } else {
    if (p.seen.has(key)) {
      const prev = result.where[key] as ConfLocation;
      // A generated file can repeat a key thousands of times: a few lines say it, one counts the rest.
      if (result.warnings.length < MAX_CONF_WARNINGS) {
        result.warnings.push(
          `${file}:${line}: ${key} specified more than once (first at line ${prev.line}); the last value wins`,
        );
      } else p.unshownWarnings++;
    }
    result.values[key] = value;
  }
  p.seen.add(key);
  result.where[key] = loc;
}

/** Parses Slurm-syntax text against a schema. Every error names file:line:column and the key. */
export function parseConf<S extends ConfSchema>(text: string, options: ParseConfOptions<S>): ParsedConf<S> {
  const p: ParseState = {
    schema: options.schema,
    canonical: new Map(Object.keys(options.schema).map((k) => [k.toLowerCase(), k])),
    result: { file: options.file, values: {}, where: {}, warnings: [] },
    seen: new Set<string>(),
    unshownWarnings: 0,
  };
  const readInclude = options.readFile ?? ((path: string) => readConfText(path, false) as string);
  let bytes = 0;

  // The cap counts every Include too: a file that includes itself 8 levels deep, or many
  // includes of one large file, must not multiply into gigabytes.
  const account = (body: string, file: string, at?: ConfLocation): void => {
    bytes += Buffer.byteLength(body);
    if (bytes <= MAX_CONF_BYTES) return;
    const what = `the configuration, with its Includes, is more than the ${MAX_CONF_BYTES}-byte (1 MiB) limit`;
    if (at) throw confError(at, "Include", `${file}: ${what}`);
    throw jobrtError("ERR_CONF", { where: file, problem: what }, { details: { file } });
  };

  const parseText = (body: string, file: string, depth: number): void => {
    checkNoNul(body, file);
    for (const { text: rawLine, line } of logicalLines(body)) {
      if (rawLine.trim() === "") continue;
      const include = /^\s*include\s+(.*?)\s*$/i.exec(rawLine);
      if (include && !/^\s*include\s*[+\-*/]?=/i.test(rawLine)) {
        const loc = { file, line, column: 1 };
        const { body: included, path } = readIncluded(stripEscapes(include[1] as string), loc, depth, readInclude);
        account(included, path, loc);
        parseText(included, path, depth + 1);
      } else assignLine(p, rawLine, line, file);
    }
  };

  account(text, options.file);
  parseText(text, options.file, 0);
  const { result } = p;
  if (p.unshownWarnings > 0) {
    result.warnings.push(
      `${options.file}: ${p.unshownWarnings} more keys specified more than once (not shown); the last value of each wins`,
    );
  }
  for (const [key, spec] of Object.entries(options.schema)) {
    if (spec.required && !(key in result.values)) {
      throw jobrtError(
        "ERR_CONF",
        { where: options.file, problem: `missing required key ${key}` },
        { details: { file: options.file, key } },
      );
    }
  }
  // Each value was made by typed() from its key's kind, and every required key is there: the
  // record is what ConfValues<S> says.
  return result as ParsedConf<S>;
}

/** The value part of a line: a double-quoted string or one word, and nothing after it. */
function valueText(restRaw: string, loc: ConfLocation, key: string): string {
  const rest = stripEscapes(restRaw);
  let raw: string;
  let after: string;
  if (rest.startsWith('"')) {
    const close = rest.indexOf('"', 1);
    if (close < 0) {
      throw confError(
        loc,
        key,
        "unterminated double quote (note: '#' starts a comment even inside quotes; write \\# for a literal #)",
      );
    }
    raw = rest.slice(1, close);
    after = rest.slice(close + 1);
  } else {
    const end = rest.search(/\s/);
    raw = end < 0 ? rest : rest.slice(0, end);
    after = end < 0 ? "" : rest.slice(end);
  }
  if (after.trim() !== "") {
    throw confError(
      loc,
      key,
      `unexpected text after the value: ${JSON.stringify(after.trim())} (one Key=Value per line; quote values with spaces)`,
    );
  }
  return raw;
}

/**
 * Reads and parses a conf file. Returns undefined when nothing is at the path (the caller
 * decides whether that means "embedded defaults"); a dangling symlink, anything but a regular
 * file, a file over MAX_CONF_BYTES and any other read error is ERR_CONF.
 */
export function loadConfFile<S extends ConfSchema>(path: string, schema: S): ParsedConf<S> | undefined {
  const text = readConfText(path, true);
  return text === undefined ? undefined : parseConf(text, { file: path, schema });
}
