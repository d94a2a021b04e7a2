import { type Command, OPTIONS, type OptionDef } from "./optiontable.js";

/** Where the text of an option line starts. */
const COLUMN = 28;
/** The width exec's list of run's options is wrapped at. */
const WIDTH = 100;

/** `--long ARG` (or the row's own left column), as a help line names the option. */
const named = (o: OptionDef): string => o.shown ?? `--${o.long}${o.arg ? ` ${o.arg}` : ""}`;

function optionLine(o: OptionDef, help: string): string {
  const left = `${o.short ? `  -${o.short}, ` : "      "}${named(o)}`;
  const [first, ...more] = `${help}${o.repeat ? " (repeatable)" : ""}`.split("\n");
  return [
    `${left.length < COLUMN ? left.padEnd(COLUMN) : `${left}  `}${first}`,
    ...more.map((line) => `${" ".repeat(COLUMN)}${line}`),
  ].join("\n");
}

/** The option lines of `command`'s help: the options of `scope` it takes that have a help text, in table order. */
function optionLines(command: Command, scope: OptionDef["scope"]): string {
  return OPTIONS.filter((o) => o.commands.includes(command) && o.scope === scope && o.help !== undefined)
    .map((o) => optionLine(o, o.help as string))
    .join("\n");
}

/** exec's options: run's component options it takes, named and wrapped, then its step options each on a line. */
function execOptionLines(): string {
  const taken = OPTIONS.filter((o) => o.commands.includes("exec") && o.help !== undefined);
  const names = taken.filter((o) => o.scope === "component").map(named);
  const lines: string[] = [];
  let line = "     ";
  names.forEach((name, i) => {
    const item = i === names.length - 1 ? `${name}   as for jobrt run` : `${name},`;
    if (line.trim() !== "" && line.length + 1 + item.length > WIDTH) {
      lines.push(line);
      line = "     ";
    }
    line += ` ${item}`;
  });
  lines.push(line);
  for (const o of taken.filter((t) => t.scope === "step")) lines.push(optionLine(o, o.execHelp ?? (o.help as string)));
  return lines.join("\n");
}

export const MAIN_HELP = `Usage: jobrt <command> [options]

Run the tasks of a job step on this node through a runtime plugin.

Commands:
  run       run a job step (one or more heterogeneous components) on this node
  exec      run one task of a Slurm step (srun ... jobrt exec ...)
  runtimes  list the runtimes this node allows, with package, version and API status
  check     validate a run request (submit context) without starting anything
  gc        clean up after steps whose jobrt died (containers, spool dirs, processes)
  ps        list the steps of this node: live ones, and dead ones with what gc would do
  images    list or prune the node's container image cache (--container-image)
  completion  print a bash or zsh completion script (jobrt completion bash|zsh)
  help      show a command's help (jobrt help CMD is jobrt CMD --help)

Options:
  -h, --help     show help (also: jobrt <command> --help)
  --version      print jobrt's version

Configuration: --conf-dir DIR, else $JOBRT_CONF_DIR, else the directory named in the file
jobrt.confdir beside the install's node_modules (when root's alone), else /etc/jobrt (jobrt.conf,
oci.conf, shifter.conf, images.conf); with no files, embedded defaults apply. See jobrt(1) and
jobrt.conf(5) (man jobrt, man jobrt.conf).
JOBRT_TIMINGS=1: run and exec end with one stderr line of where their time went, by phase.
`;

export const RUN_HELP = `Usage: jobrt run [options] command [args...] [: [options] command [args...] ...]

Runs one job step on this node. ' : ' separates the components of a heterogeneous step; each
component has its own options and runtime.

Component options:
${optionLines("run", "component")}

Step options (before the first ':'):
${optionLines("run", "step")}

Exit status: the highest task exit status (128+N for a task killed by signal N); 1 when the
step could not be launched or set up; 2 for usage and configuration errors.
`;

export const EXEC_HELP = `Usage: jobrt exec [options] [--] command [args...]

Runs one task of a Slurm job step through a runtime, as in
  srun -n 4 jobrt exec --runtime oci --container /shared/bundle -- ./app
The step and task come from Slurm's variables (SLURM_JOB_ID, SLURM_STEP_ID, SLURM_PROCID, ...).
The runtime is --runtime, else $SLURM_RUNTIME or $SRUN_RUNTIME, else the site default.
The tasks of a step on one node share one jobrt: the first runs setup and cleanup once, the
others join it (JOBRT_NODE_STEP=0 in their environment: each runs its own).

Options:
${execOptionLines()}

Exit status: the task's status (128+N for signal N); 1 when the task could not be launched;
2 for usage and configuration errors, or when not run inside a Slurm step.
`;

export const RUNTIMES_HELP = `Usage: jobrt runtimes [--json] [-v] [--conf-dir DIR]

Lists every runtime allowed on this node (RuntimePlugins in jobrt.conf): its package, version,
whether its plugin API matches this jobrt (or why not), its capabilities, where it is installed
and where npm fetched it from (FROM: the install's lockfile's resolved URL).
Exits 1 when an allowed runtime cannot be loaded.
`;

export const CHECK_HELP = `Usage: jobrt check [run options] command [args...] [: ...]

Checks a run request on this node, starting nothing: loads each component's runtime in the
"submit" context, calls its validate hook (the request as at submit time; shifter looks the image
up), then its check hook: what this node can see of the request. Runtime oci: the tools its
RunTime* commands run (path and version), the bundle directory, its config.json (parsed) and the
rootfs it names, or for --container-image whether the image is pulled here; shifter: shifter and
shifterimg, and the image. What cannot be seen from here (an image not pulled yet) is said as
'not checked'. Files are looked at as the job user.
Then the MPI wire-up, when run as a Slurm step's program (srun --mpi=... jobrt check ...): the
step's PMI type, whether PMI_FD is an open socket, the PMIx server and directories, /dev/shm, the
user namespace and the fabric devices, then whether each component's runtime can pass them on;
each problem on stderr with its fix. Outside a Slurm step, one line saying there is none.
Exits 0 when every component is usable, 1 when a runtime rejects the request, something it
needs is missing on this node or the step's wire-up has a problem, 2 for usage errors.
`;

export const GC_HELP = `Usage: jobrt gc [--job N] [--pid P] [-v] [--conf-dir DIR]

Finds the steps in SpoolDir whose jobrt process is gone (killed with SIGKILL, out of memory, a
reboot) and cleans up after them: kills the task process groups it had started, runs each
component's runtime cleanup (containers, spool directories) and removes the step record. A live
step is never touched. Every 'jobrt run' does the same, quietly, before it starts.
Exits 1 when a step could not be cleaned up (its record is kept for another try, or set aside as
<entry>.bad-<ms> when trying again cannot help).

Options:
  --job N   only the steps of job N (under Slurm: the Slurm job id); for a Slurm Epilog line
            'jobrt gc --job $SLURM_JOB_ID'
  --pid P   only the step whose jobrt had pid P, once that jobrt is gone (what the task forker
            of a killed 'jobrt exec' runs at once)

gc acts on the records of its own user; root also on a job user's record whose every component
runs as that user (the runtime cleanup then acts as that user; root works on the user's journal
with the user's rights, at most 30 s a user's journal).
`;

export const IMAGES_HELP = `Usage: jobrt images [list] [--json] [--shared] [--conf-dir DIR]
       jobrt images prune [--all] [--shared] [--conf-dir DIR]

The node's image cache (runtime oci, --container-image; CacheDir in images.conf).
  list     every cached image this user can see: store, digest, size, last use, reference,
           and how many running steps use it (least recently used first)
  prune    removes the images no running step uses, least recently used first, until the cache
           fits CacheSize; with --all, every image no running step uses. As root: every store;
           as a user: their own store.
  --shared the cluster's image store instead (SharedStore in images.conf): its squashfs images,
           and the nodes that have each mounted; prune (root only) keeps it under SharedStoreSize,
           or with --all removes every image no node has mounted.
`;

export const PS_HELP = `Usage: jobrt ps [--all] [--json] [--conf-dir DIR]

Lists the steps of this node from the journal in SpoolDir: each 'jobrt run' step and each
'jobrt exec' task of a Slurm step, with its user, state, age, tasks, runtime and container or
image. A step whose jobrt is gone is shown as dead, with what 'jobrt gc' would do with it.
A user sees their own steps; root sees its own, and with --all every user's.

Options:
  --all     every user's steps (root only)
  --json    one JSON object: {"node": NAME, "steps": [...]}, a step an object

Exit status: 0, also when there is no step; 2 for usage and configuration errors.
`;

export const HELP_HELP = `Usage: jobrt help [COMMAND]

Prints the help of COMMAND, as 'jobrt COMMAND --help' does; without COMMAND, jobrt's own help.
Exit status: 0; 2 for an unknown command.
`;

export const COMPLETION_HELP = `Usage: jobrt completion bash|zsh

Prints a completion script for the shell: the commands, each command's options, and the runtime
names (from 'jobrt runtimes --json', asked when completing --runtime). For example:
  bash:  jobrt completion bash > /etc/bash_completion.d/jobrt
         or in ~/.bashrc: source <(jobrt completion bash)
  zsh:   in ~/.zshrc, after compinit: source <(jobrt completion zsh)
Exit status: 0; 2 for a shell other than bash or zsh.
`;

/**
 * Every command with its help text: what --help and `jobrt help CMD` print, and what the man page
 * (scripts/man.mjs) is made from. Run's and exec's option lines come from the option table, as do
 * the completion script's options (completion.ts).
 */
export const COMMAND_HELP: Readonly<Record<string, string>> = {
  run: RUN_HELP,
  exec: EXEC_HELP,
  runtimes: RUNTIMES_HELP,
  check: CHECK_HELP,
  gc: GC_HELP,
  ps: PS_HELP,
  images: IMAGES_HELP,
  completion: COMPLETION_HELP,
  help: HELP_HELP,
};

/** The words a command takes after it that are not options (its subcommands or topics). */
export const COMMAND_WORDS: Readonly<Record<string, readonly string[]>> = {
  images: ["list", "prune"],
  completion: ["bash", "zsh"],
  help: Object.keys(COMMAND_HELP),
};
