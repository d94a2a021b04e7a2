import {
  type ContainerRequest,
  type JobrtError,
  REQUEST_OPTIONS,
  type RequestOption,
  containerIdProblem,
  emptyRequest,
  jobrtError,
} from "@jobrt/core";
import { type Command, OPTIONS, type OptionDef } from "./optiontable.js";

export type OptionValues = Map<string, string[]>;

export interface ParsedComponent {
  options: OptionValues;
  argv: string[];
}

export interface ParsedCommandLine {
  step: OptionValues;
  components: ParsedComponent[];
}

export interface ParseRules {
  /** The command: its options are the table's rows that name it. */
  command: Command;
  /** Whether ' : ' separates heterogeneous components. */
  components: boolean;
  /** Whether a command is required after the options. */
  needCommand: boolean;
}

export function usage(message: string): JobrtError {
  return jobrtError("ERR_USAGE", { problem: message });
}

function findOption(token: string): { def: OptionDef; inline?: string; rest?: string } | undefined {
  if (token.startsWith("--")) {
    const eq = token.indexOf("=");
    const name = eq < 0 ? token.slice(2) : token.slice(2, eq);
    const def = OPTIONS.find((o) => o.long === name);
    if (!def) return undefined;
    return eq < 0 ? { def } : { def, inline: token.slice(eq + 1) };
  }
  const def = OPTIONS.find((o) => o.short === token[1]);
  if (!def) return undefined;
  const tail = token.slice(2);
  if (tail === "") return { def };
  return def.value ? { def, inline: tail } : { def, rest: `-${tail}` };
}

/** Where a parse is: the step's options, the components so far and the one being read. */
interface ParseState {
  step: OptionValues;
  components: ParsedComponent[];
  current: ParsedComponent;
  inCommand: boolean;
}

/**
 * srun-style command line: options, then the command and its arguments (options stop at the
 * first word that is not an option, or after `--`); with `components`, a lone ':' starts the next
 * heterogeneous component, which has its own options and command.
 */
export function parseCommandLine(args: string[], rules: ParseRules): ParsedCommandLine {
  const state: ParseState = {
    step: new Map(),
    components: [],
    current: { options: new Map(), argv: [] },
    inCommand: false,
  };
  for (let i = 0; i < args.length; i++) {
    const token = args[i] as string;
    if (rules.components && token === ":") {
      if (state.current.argv.length === 0 && rules.needCommand)
        throw usage(`component ${state.components.length}: no command before ':'`);
      state.components.push(state.current);
      state.current = { options: new Map(), argv: [] };
      state.inCommand = false;
    } else if (state.inCommand) {
      state.current.argv.push(token);
    } else if (token === "--") {
      state.inCommand = true;
    } else if (!token.startsWith("-") || token === "-") {
      state.inCommand = true;
      state.current.argv.push(token);
    } else {
      i += takeOptions(token, args[i + 1], state, rules);
    }
  }
  if (rules.needCommand && state.current.argv.length === 0 && !state.step.has("help")) {
    const { length } = state.components;
    throw usage(length > 0 ? `component ${length}: no command after ':'` : `${rules.command}: no command given`);
  }
  state.components.push(state.current);
  return { step: state.step, components: state.components };
}

/**
 * The options of one word: short flags may be bundled (-lv); a value option takes the rest of the
 * word or the next one. Returns how many following words it took (0 or 1).
 */
function takeOptions(word: string, next: string | undefined, state: ParseState, rules: ParseRules): number {
  let token = word;
  for (;;) {
    const found = findOption(token);
    if (!found || !found.def.commands.includes(rules.command)) {
      throw usage(`${rules.command}: unknown option ${token.split("=")[0]} (see jobrt ${rules.command} --help)`);
    }
    const { def } = found;
    if (def.value && found.inline === undefined) {
      if (next === undefined) throw usage(`--${def.long} needs a value`);
      store(state, def, next);
      return 1;
    }
    if (!def.value && found.inline !== undefined) throw usage(`--${def.long} takes no value`);
    store(state, def, found.inline ?? "");
    if (found.rest === undefined) return 0;
    token = found.rest;
  }
}

function store(state: ParseState, def: OptionDef, value: string): void {
  if (value === "" && def.nonEmpty) throw usage(`--${def.long}: empty value (${def.nonEmpty})`);
  if (def.scope === "step" && state.components.length > 0)
    throw usage(`--${def.long} applies to the whole step: give it before the first ':'`);
  const map = def.scope === "step" ? state.step : state.current.options;
  const list = map.get(def.long) ?? [];
  if (list.length > 0 && !def.repeat) throw usage(`--${def.long} given twice`);
  list.push(value);
  map.set(def.long, list);
}

export function one(map: OptionValues, name: string): string | undefined {
  const v = map.get(name);
  return v === undefined ? undefined : v[v.length - 1];
}

export function flag(map: OptionValues, name: string): boolean {
  return map.has(name);
}

export function positiveInt(text: string, option: string, max = 1_000_000): number {
  if (!/^\d+$/.test(text) || Number(text) < 1 || Number(text) > max) {
    throw usage(`--${option}: ${JSON.stringify(text)} is not a whole number from 1 to ${max}`);
  }
  return Number(text);
}

/**
 * The container's id: --container-id, else SLURM_CONTAINER_ID (what srun --container-id exports,
 * Slurm 23.02+), checked as runc checks an id.
 */
function containerId(option: string | undefined, env: string | undefined): string | undefined {
  const [id, source] =
    option !== undefined ? [option, "--container-id"] : [env === "" ? undefined : env, "SLURM_CONTAINER_ID"];
  if (id === undefined) return undefined;
  const problem = containerIdProblem(id);
  if (problem) throw usage(`${source}: ${problem}`);
  return id;
}

/** `--container-opt K=V` values (or another map option's) by key, each key checked. */
function keyValues(option: string, items: readonly string[]): Record<string, string[]> {
  const options: Record<string, string[]> = {};
  for (const item of items) {
    const eq = item.indexOf("=");
    if (eq <= 0) throw usage(`--${option}: ${JSON.stringify(item)} is not key=value`);
    const key = item.slice(0, eq);
    if (!/^[a-z][a-z0-9_-]*$/.test(key))
      throw usage(`--${option}: ${JSON.stringify(key)} is not a valid key (lower case letters, digits, '-', '_')`);
    const values = options[key] ?? [];
    values.push(item.slice(eq + 1));
    options[key] = values;
  }
  return options;
}

/** Sets one option's field of `request` from its values; a shorthand's key must not come from --container-opt too. */
function setField(request: ContainerRequest, row: RequestOption, values: readonly string[]): void {
  const last = values[values.length - 1] as string;
  if (row.field.startsWith("options.")) {
    const key = row.field.slice("options.".length);
    const map = REQUEST_OPTIONS.find((r) => r.kind === "map")?.name;
    if (request.options[key]) throw usage(`--${row.name} and --${map} ${key}=... both given`);
    request.options[key] = [last];
    return;
  }
  const value =
    row.kind === "text"
      ? last
      : row.kind === "list"
        ? [...values]
        : row.kind === "flag"
          ? true
          : keyValues(row.name, values);
  Object.assign(request, { [row.field]: value });
}

/** Each option's values as the request takes them: --container-id falls back to SLURM_CONTAINER_ID. */
function requestValues(
  map: OptionValues,
  row: RequestOption,
  envContainerId: string | undefined,
): string[] | undefined {
  if (row.name !== "container-id") return map.get(row.name);
  const id = containerId(one(map, row.name), envContainerId);
  return id === undefined ? undefined : [id];
}

/**
 * The container request from the --container* options (core's REQUEST_OPTIONS; undefined when none
 * was given): the map option (--container-opt) first, as the others may set one of its keys.
 */
export function requestFromOptions(map: OptionValues, envContainerId?: string): ContainerRequest | undefined {
  const rows: readonly RequestOption[] = REQUEST_OPTIONS;
  if (!rows.some((r) => map.has(r.name))) return undefined;
  const request = emptyRequest();
  const set = (row: RequestOption) => {
    const values = requestValues(map, row, envContainerId);
    if (values !== undefined) setField(request, row, values);
  };
  rows.filter((r) => r.kind === "map").forEach(set);
  for (const row of rows)
    if (row.nonEmpty && map.get(row.name)?.includes("")) throw usage(`--${row.name}: empty value`);
  if (map.has("container-image") && map.has("container"))
    throw usage("give either --container BUNDLE or --container-image REF, not both");
  rows.filter((r) => r.kind !== "map").forEach(set);
  return request;
}
