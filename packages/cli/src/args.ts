import { type ContainerRequest, type JobrtError, containerIdProblem, jobrtError } from "@jobrt/core";

/** What one option is and where it applies. */
interface OptionDef {
  long: string;
  short?: string;
  value: boolean;
  /** "step" options apply to the whole step and may only be given before the first ' : '. */
  scope: "component" | "step";
  repeat?: boolean;
  /** Why an empty value is refused: it would otherwise quietly mean "not given". */
  nonEmpty?: string;
  /** Accepted by every command that accepts this other option. */
  alongside?: string;
}

const OPTIONS: OptionDef[] = [
  { long: "ntasks", short: "n", value: true, scope: "component" },
  { long: "runtime", value: true, scope: "component", nonEmpty: "leave the option out for the default runtime" },
  { long: "container", value: true, scope: "component" },
  { long: "container-image", value: true, scope: "component", alongside: "container" },
  { long: "container-id", value: true, scope: "component", alongside: "container" },
  { long: "container-volume", value: true, scope: "component", repeat: true },
  { long: "container-module", value: true, scope: "component", repeat: true },
  { long: "container-env", value: true, scope: "component", repeat: true },
  { long: "container-workdir", value: true, scope: "component" },
  { long: "container-entrypoint", value: true, scope: "component" },
  { long: "container-clearenv", value: false, scope: "component" },
  { long: "container-opt", value: true, scope: "component", repeat: true },
  { long: "container-device", value: true, scope: "component", repeat: true, nonEmpty: "give a CDI name such as nvidia.com/gpu=0" },
  { long: "label", short: "l", value: false, scope: "component" },
  { long: "output", short: "o", value: true, scope: "component" },
  { long: "error", short: "e", value: true, scope: "component" },
  { long: "input", short: "i", value: true, scope: "component" },
  { long: "chdir", short: "D", value: true, scope: "component" },
  { long: "export", value: true, scope: "component" },
  { long: "time", short: "t", value: true, scope: "step" },
  { long: "jobid", value: true, scope: "step" },
  { long: "job", value: true, scope: "step" },
  { long: "pid", value: true, scope: "step" },
  { long: "uid", value: true, scope: "step" },
  { long: "gid", value: true, scope: "step" },
  { long: "verbose", short: "v", value: false, scope: "step", repeat: true },
  { long: "json", value: false, scope: "step" },
  { long: "all", value: false, scope: "step" },
  { long: "shared", value: false, scope: "step" },
  { long: "conf-dir", value: true, scope: "step", nonEmpty: "it would read configuration from the current directory" },
  { long: "help", short: "h", value: false, scope: "step" },
];

/** The option table, for what is generated from it (completion scripts, the man page). */
export function optionTable(): readonly Readonly<Pick<OptionDef, "long" | "short" | "value">>[] {
  return OPTIONS;
}

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
  /** Option names (long) this command accepts. */
  allowed: ReadonlySet<string>;
  /** Whether ' : ' separates heterogeneous components. */
  components: boolean;
  /** Whether a command is required after the options. */
  needCommand: boolean;
  command: string;
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

/**
 * srun-style command line: options, then the command and its arguments (options stop at the
 * first word that is not an option, or after `--`); with `components`, a lone ':' starts the next
 * heterogeneous component, which has its own options and command.
 */
export function parseCommandLine(args: string[], rules: ParseRules): ParsedCommandLine {
  const step: OptionValues = new Map();
  const components: ParsedComponent[] = [];
  let current: ParsedComponent = { options: new Map(), argv: [] };
  let inCommand = false;
  const push = (map: OptionValues, def: OptionDef, value: string) => {
    const list = map.get(def.long) ?? [];
    if (list.length > 0 && !def.repeat) throw usage(`--${def.long} given twice`);
    list.push(value);
    map.set(def.long, list);
  };
  for (let i = 0; i < args.length; i++) {
    let token = args[i] as string;
    if (rules.components && token === ":") {
      if (current.argv.length === 0 && rules.needCommand) throw usage(`component ${components.length}: no command before ':'`);
      components.push(current);
      current = { options: new Map(), argv: [] };
      inCommand = false;
      continue;
    }
    if (inCommand) {
      current.argv.push(token);
      continue;
    }
    if (token === "--") {
      inCommand = true;
      continue;
    }
    if (!token.startsWith("-") || token === "-") {
      inCommand = true;
      current.argv.push(token);
      continue;
    }
    // Short flags may be bundled (-lv); a value option takes the rest of the word or the next one.
    for (;;) {
      const found = findOption(token);
      if (!found || !(rules.allowed.has(found.def.long) || (found.def.alongside !== undefined && rules.allowed.has(found.def.alongside)))) {
        throw usage(`${rules.command}: unknown option ${token.split("=")[0]} (see jobrt ${rules.command} --help)`);
      }
      const { def } = found;
      let value = "";
      if (def.value) {
        if (found.inline !== undefined) value = found.inline;
        else {
          const next = args[i + 1];
          if (next === undefined) throw usage(`--${def.long} needs a value`);
          value = next;
          i++;
        }
      } else if (found.inline !== undefined) {
        throw usage(`--${def.long} takes no value`);
      }
      if (value === "" && def.nonEmpty) throw usage(`--${def.long}: empty value (${def.nonEmpty})`);
      if (def.scope === "step") {
        if (components.length > 0) throw usage(`--${def.long} applies to the whole step: give it before the first ':'`);
        push(step, def, value);
      } else push(current.options, def, value);
      if (found.rest === undefined) break;
      token = found.rest;
    }
  }
  if (rules.needCommand && current.argv.length === 0 && !step.has("help")) {
    throw usage(components.length > 0 ? `component ${components.length}: no command after ':'` : `${rules.command}: no command given`);
  }
  components.push(current);
  return { step, components };
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
  const [id, source] = option !== undefined ? [option, "--container-id"] : [env === "" ? undefined : env, "SLURM_CONTAINER_ID"];
  if (id === undefined) return undefined;
  const problem = containerIdProblem(id);
  if (problem) throw usage(`${source}: ${problem}`);
  return id;
}

/** The container request from --container and --container-* options (undefined when none given). */
export function containerRequest(map: OptionValues, envContainerId?: string): ContainerRequest | undefined {
  const names = ["container", "container-image", "container-id", "container-volume", "container-module", "container-env", "container-workdir", "container-entrypoint", "container-clearenv", "container-opt", "container-device"];
  if (!names.some((n) => map.has(n))) return undefined;
  const options: Record<string, string[]> = {};
  for (const item of map.get("container-opt") ?? []) {
    const eq = item.indexOf("=");
    if (eq <= 0) throw usage(`--container-opt: ${JSON.stringify(item)} is not key=value`);
    const key = item.slice(0, eq);
    if (!/^[a-z][a-z0-9_-]*$/.test(key)) throw usage(`--container-opt: ${JSON.stringify(key)} is not a valid key (lower case letters, digits, '-', '_')`);
    const values = options[key] ?? [];
    values.push(item.slice(eq + 1));
    options[key] = values;
  }
  const value = one(map, "container");
  if (value === "") throw usage("--container: empty value");
  // The image travels as the runtime option `image` (what `--container-opt image=REF` also gives).
  const image = one(map, "container-image");
  if (image === "") throw usage("--container-image: empty value");
  if (image !== undefined && value !== undefined) throw usage("give either --container BUNDLE or --container-image REF, not both");
  if (image !== undefined) {
    if (options.image) throw usage("--container-image and --container-opt image=... both given");
    options.image = [image];
  }
  const id = containerId(one(map, "container-id"), envContainerId);
  if (id !== undefined) {
    if (options.id) throw usage("--container-id and --container-opt id=... both given");
    options.id = [id];
  }
  const workdir = one(map, "container-workdir");
  const entrypoint = one(map, "container-entrypoint");
  return {
    ...(value !== undefined ? { value } : {}),
    volumes: map.get("container-volume") ?? [],
    modules: map.get("container-module") ?? [],
    env: map.get("container-env") ?? [],
    ...(workdir !== undefined ? { workdir } : {}),
    ...(entrypoint !== undefined ? { entrypoint } : {}),
    clearEnv: map.has("container-clearenv"),
    options,
    ...(map.has("container-device") ? { devices: map.get("container-device") as string[] } : {}),
  };
}
