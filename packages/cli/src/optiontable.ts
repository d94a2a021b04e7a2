import { REQUEST_OPTIONS, type RequestOption } from "@jobrt/core";

/** The commands of `jobrt`. */
export type Command = "run" | "exec" | "runtimes" | "check" | "gc" | "ps" | "images" | "completion" | "help";

/**
 * One option of `jobrt`: how argv gives it, which commands take it and what their help says of it.
 * The container request's options are core's table (REQUEST_OPTIONS), keyed in below.
 */
export interface OptionDef {
  long: string;
  short?: string;
  value: boolean;
  /** "step" options apply to the whole step and may only be given before the first ' : '. */
  scope: "component" | "step";
  repeat?: boolean;
  /** Why an empty value is refused: it would otherwise quietly mean "not given". */
  nonEmpty?: string;
  commands: readonly Command[];
  /** What stands for the value in --help. */
  arg?: string;
  /** Its line in `jobrt run --help` (none: not listed there); a line break continues under it. */
  help?: string;
  /** What `jobrt exec --help` says instead, where it lists the option on a line of its own. */
  execHelp?: string;
  /** The row's left column in --help, when it is not `--long ARG`. */
  shown?: string;
}

const STEP = ["run", "check"] as const;
/** The commands that take a container request. */
const CONTAINER = [...STEP, "exec"] as const;

/** A row of core's table as an option of the commands that take a container request. */
function requestOption(r: RequestOption): OptionDef {
  const repeat = r.kind === "list" || r.kind === "map";
  const def: OptionDef = {
    long: r.name,
    value: r.kind !== "flag",
    scope: "component",
    commands: CONTAINER,
    help: r.help,
  };
  return { ...def, ...(repeat ? { repeat } : {}), ...(r.arg ? { arg: r.arg } : {}) };
}

/** Every option of every command, in the order --help and completion list them. */
export const OPTIONS: readonly OptionDef[] = [
  {
    long: "ntasks",
    short: "n",
    value: true,
    scope: "component",
    commands: STEP,
    arg: "N",
    help: "number of tasks (default 1)",
  },
  {
    long: "runtime",
    value: true,
    scope: "component",
    nonEmpty: "leave the option out for the default runtime",
    commands: CONTAINER,
    arg: "NAME",
    help: "runtime plugin (default: DefRuntimePlugin, else oci); 'list' lists them",
  },
  ...REQUEST_OPTIONS.map(requestOption),
  {
    long: "label",
    short: "l",
    value: false,
    scope: "component",
    commands: STEP,
    help: "prefix each output line with 'TASK: '",
  },
  {
    long: "output",
    short: "o",
    value: true,
    scope: "component",
    commands: STEP,
    arg: "PATTERN",
    help: "stdout to a file (%j job, %s step, %t task, %n node id, %N node, %%)",
  },
  {
    long: "error",
    short: "e",
    value: true,
    scope: "component",
    commands: STEP,
    arg: "PATTERN",
    help: "stderr to a file (default: with --output, the same file)",
  },
  {
    long: "input",
    short: "i",
    value: true,
    scope: "component",
    commands: STEP,
    arg: "MODE",
    help: "stdin: all (default), none, a task id, or a file pattern",
  },
  {
    long: "chdir",
    short: "D",
    value: true,
    scope: "component",
    commands: STEP,
    arg: "DIR",
    help: "working directory of the tasks",
  },
  {
    long: "export",
    value: true,
    scope: "component",
    commands: STEP,
    arg: "SPEC",
    help: "ALL (default), NONE, or NAME[=value],... (ALL may be one item)",
  },
  {
    long: "time",
    short: "t",
    value: true,
    scope: "step",
    commands: STEP,
    arg: "LIMIT",
    help: "time limit: MIN, MIN:SEC, H:MIN:SEC, D-H, D-H:MIN, D-H:MIN:SEC",
  },
  {
    long: "jobid",
    value: true,
    scope: "step",
    commands: STEP,
    arg: "N",
    help: "job id (default: a fresh id unique on this node)",
  },
  { long: "job", value: true, scope: "step", commands: ["gc"] },
  { long: "pid", value: true, scope: "step", commands: ["gc"] },
  {
    long: "uid",
    value: true,
    scope: "step",
    commands: STEP,
    shown: "--uid USER, --gid GROUP",
    help: "run the tasks as this user/group (root only)",
  },
  { long: "gid", value: true, scope: "step", commands: STEP },
  {
    long: "verbose",
    short: "v",
    value: false,
    scope: "step",
    repeat: true,
    commands: [...CONTAINER, "gc", "runtimes", "ps"],
    help: "more detail: resolved plugins, commands",
    execHelp: "more detail",
  },
  {
    long: "json",
    value: false,
    scope: "step",
    commands: [...STEP, "runtimes", "ps", "images"],
    help: "one JSON event per line on stdout (task output included)",
  },
  { long: "all", value: false, scope: "step", commands: ["ps", "images"] },
  { long: "shared", value: false, scope: "step", commands: ["images"] },
  {
    long: "conf-dir",
    value: true,
    scope: "step",
    nonEmpty: "it would read configuration from the current directory",
    commands: [...CONTAINER, "gc", "runtimes", "ps", "images"],
    arg: "DIR",
    help: "configuration directory",
  },
  {
    long: "help",
    short: "h",
    value: false,
    scope: "step",
    commands: ["run", "exec", "runtimes", "check", "gc", "ps", "images", "completion", "help"],
  },
];

/** The options `command` takes, in table order. */
export function optionsOf(command: Command): OptionDef[] {
  return OPTIONS.filter((o) => o.commands.includes(command));
}
