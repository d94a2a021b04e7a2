/**
 * The error catalog: one entry per stable error code, with the message template every
 * `JobrtError` of that code is built from, what to do about it, and the CLI's exit status.
 * docs/errors.md is generated from this data (scripts/errors-doc.mjs); edit here, not there.
 * Codes are stable: callers and tests match on `code`, never on message text.
 *
 * A template names its parameters in braces (`{runtime}`); `jobrtError(code, params)` fills them
 * and the compiler rejects a missing one. Where one code covers many distinct faults (every bad
 * option, every bad conf key) the varying part is one parameter (`{problem}`) that names the
 * option, key or field at fault and the rule it breaks.
 */
export interface CatalogEntry {
  /** The message, with `{name}` parameters. */
  readonly template: string;
  /** When the error is raised (Markdown, for docs/errors.md). */
  readonly when: string;
  /** What the user should do (Markdown, for docs/errors.md and `jobrt -v`). */
  readonly hint: string;
  /** The status `jobrt` exits with when this error stops it. */
  readonly exit: 1 | 2;
}

export const ERROR_CATALOG = {
  ERR_USAGE: {
    template: "{problem}",
    when: "a bad command line: unknown option, missing value, `-n 0`, a bad `--export` item, an unknown `%` in `-o`, a `%` padding width over 10, `--uid` without root, a `--uid`/`--gid` id over 2147483647, an empty `--runtime` or `--conf-dir`, ...; the message names the option",
    hint: "fix the option the message names; `jobrt <command> --help` lists the options",
    exit: 2,
  },
  ERR_CONF: {
    template: "{where}: {problem}",
    when: "a configuration file (jobrt.conf, oci.conf, shifter.conf, images.conf, udiRoot.conf) cannot be read or parsed, or a value is invalid. The message starts with `file:line:column: Key:`; a file that is not a regular file, a dangling symlink, or over 1 MiB is named alone (`file: is a FIFO; ...`), see [cli.md](cli.md#jobrtconf). A runtime's conf error reaches the CLI wrapped in `ERR_RUNTIME_HOOK` (exit 1)",
    hint: "edit the file, line and key the message names",
    exit: 2,
  },
  ERR_RUNTIME_NAME: {
    template: "invalid runtime name {name}: {problem}",
    when: "a runtime name outside the grammar `x`, `runtime/x`, `@scope/x` (`[a-z0-9][a-z0-9._-]*`, at most 100 characters, not counting `runtime/`). Raised before anything is imported",
    hint: "use a name such as `oci`, `runtime/oci` or `@site/x`",
    exit: 2,
  },
  ERR_RUNTIME_NOT_ALLOWED: {
    template: "runtime {runtime} is not allowed on this node (RuntimePlugins={allowed})",
    when: "the runtime is not in jobrt.conf `RuntimePlugins`",
    hint: "pick a runtime from `RuntimePlugins`, or ask the site to add it",
    exit: 2,
  },
  ERR_RUNTIME_NOT_FOUND: {
    template: "runtime {runtime} {problem}",
    when: "no package for the name is installed where jobrt resolves plugins (the message lists the packages tried and the directory)",
    hint: "install one of the packages the message lists next to `@jobrt/cli` (or in `PluginDir`)",
    exit: 2,
  },
  ERR_RUNTIME_AMBIGUOUS: {
    template: "runtime {runtime} is ambiguous: both {packages} are installed; uninstall one",
    when: "both `@jobrt/runtime-x` and `jobrt-runtime-x` are installed",
    hint: "uninstall one of the two packages",
    exit: 2,
  },
  ERR_RUNTIME_INVALID: {
    template: "runtime {runtime}{origin} is not a valid plugin: {problem}",
    when: "the package's default export is not a plugin (missing hooks, bad `meta`, `meta.type` not the name it was loaded as), or importing it failed; names package, version and path",
    hint: "reinstall the package, or report it to its author",
    exit: 1,
  },
  ERR_RUNTIME_API_VERSION: {
    template:
      'runtime {runtime}{origin} was built for runtime API {pluginApi}, this jobrt needs API {hostApi}: install a version of the plugin made for API {hostApi} (docs/writing-a-runtime.md, "Moving from API 1 to API 2")',
    when: "the plugin was built for another runtime API major; names package, version, path and both versions (an API 1 plugin: see [writing-a-runtime.md](writing-a-runtime.md#moving-from-api-1-to-api-2))",
    hint: "install a version of the plugin made for this jobrt's runtime API",
    exit: 1,
  },
  ERR_RUNTIME_INIT: {
    template: "runtime {runtime} {problem}",
    when: "a plugin's `init` threw or did not finish within `PluginInitTimeout` (jobrt.conf, 30 s by default)",
    hint: "read the cause in the message; `jobrt -v` shows its stack",
    exit: 1,
  },
  ERR_RUNTIME_FINI: {
    template: "fini failed for {count} runtime(s): {failures}",
    when: "one or more plugins' `fini` threw; names every one",
    hint: "read each plugin's reason in the message",
    exit: 1,
  },
  ERR_RUNTIME_HOOK: {
    template: "runtime {runtime} {hook} failed: {reason}",
    when: "a hook (`setup`, `cleanup`, `taskInit`, `run`, `validate`) threw; carries `runtime`, `hook`, the original error as `cause` and its code as `details.causeCode`",
    hint: "the text after `failed:` is the runtime's own error; see the runtime's documentation for its code",
    exit: 1,
  },
  ERR_RUNTIME_INDEX: {
    template: "no runtime is loaded at index {index}",
    when: "a registry call with index 0, a negative, non-integer or unused index, or after `fini()` (a host bug, not a user error)",
    hint: "report it: it is a bug in the host calling the registry",
    exit: 1,
  },
  ERR_RUNTIME_CONTRACT: {
    template: "{problem}",
    when: "`run` returned something other than an ExecSpec `{argv, env, cwd, shell?, signals?, supervise?}` or `NOT_SUPPORTED`, `setup` returned a step state that is not JSON data (names where), or a hook was called out of order",
    hint: "report it to the runtime's author (the message names the runtime and hook)",
    exit: 1,
  },
  ERR_CONF_PATTERN: {
    template: "%{char} ({what}) is not known here",
    when: "a runtime's conf pattern (oci.conf's `%t`, `%p`, ..., see [runtime-oci.md](runtime-oci.md)) uses a value the step or task at hand does not have, e.g. `%t` in a command run for the whole step. A RunTime* command is then an `ERR_CONF` naming the file and key; a teardown command is skipped (debug line)",
    hint: "use only the patterns runtime-oci.md lists for that key",
    exit: 1,
  },
  ERR_CONTAINER_NOT_CONFIGURED: {
    template: "{problem}",
    when: "a container was requested but the runtime has no configuration to run it (e.g. no oci.conf and no runc on PATH); the message says how to configure it",
    hint: "do what the message says (install the container tool or write the runtime's conf file)",
    exit: 1,
  },
  ERR_CONTAINER_REQUEST: {
    template: "{problem}",
    when: 'the container request breaks a runtime\'s rules (a volume target under /etc, a relative workdir, an image name with spaces, ...); names the field and the rule. A field the runtime does not list in `meta.accepts` is refused by the host before setup: `--container-module "gpu": runtime oci does not accept --container-module (it takes ...)`',
    hint: "change the `--container*` option or bundle field the message names",
    exit: 1,
  },
  ERR_DEVICE: {
    template: "{problem}",
    when: "a `--container-device` name or jobrt.conf `CdiDefaultDevices` cannot be resolved: an unknown name, a device this Slurm step was not allocated (under Slurm, any GPU for a step allocated none), or a CDI spec that is malformed (unknown `cdiVersion`, a relative path, a missing device node, two specs of one directory claiming one name) or that root may not trust (a spec file over 1 MiB or not a regular file, a device node's or mount's host path through a directory a job user could change), or one that binds the host's MPI into an image built with another (MPICH ABI against Open MPI, or another Open MPI series). Names the spec file and field, or both MPIs; nothing is started ([devices.md](devices.md), [mpi.md](mpi.md))",
    hint: "fix the name or the CDI spec file and field the message names",
    exit: 1,
  },
  ERR_CONTAINER_IMAGE: {
    template: "{problem}",
    when: "the image or bundle cannot be used (missing image, unreadable config.json, no root.path); says what to do (e.g. the `shifterimg pull` command)",
    hint: "do what the message says (pull the image, fix the reference)",
    exit: 1,
  },
  ERR_IMAGE_UNTRUSTED: {
    template: "{problem}",
    when: "the site's image trust policy (TrustPolicy in images.conf, a containers policy.json) refuses the image: names the reference, the policy file, the scope and the requirement that failed (reject, signedBy, sigstoreSigned)",
    hint: "run an image the policy accepts (signed by the site's key, from an allowed registry), or ask the site to change the policy",
    exit: 1,
  },
  ERR_RUNTIME_COMMAND: {
    template: "{problem}",
    when: "a command a runtime runs (e.g. `runc create`, `shifterimg lookup`) failed; names the command",
    hint: "install the command the message names, or fix its path in the runtime's conf",
    exit: 1,
  },
  ERR_RUNTIME_TIMEOUT: {
    template: "{problem}",
    when: "such a command did not finish within its time-out; names the command and the time-out",
    hint: "find out why the command hangs, or raise the time-out the message names",
    exit: 1,
  },
  ERR_LAUNCH: {
    template: "{problem}",
    when: "the host could not start a task: no job id could be claimed, working directory missing, an `-i`/`-o`/`-e` file the job user cannot open (checked before any task starts), `ProcTrack=cgroup*` without a usable cgroup, a spool directory a runtime cannot create",
    hint: "fix the path or setting the message names (often SpoolDir or ProcTrack in jobrt.conf)",
    exit: 1,
  },
  ERR_SPOOL: {
    template: "SpoolDir: {problem}",
    when: "SpoolDir cannot be used safely: a component belongs to another user, is writable by others without the sticky bit, is a symlink inside the spool, the records directory is open to others, SpoolDir is in use by another host (a shared file system), or a root-owned SpoolDir has no place for a user's records; the message names the path and what to do. See [reliability.md](reliability.md#the-spool)",
    hint: "fix the owner or mode of the path the message names, or set another SpoolDir",
    exit: 1,
  },
  ERR_MPI_WIREUP: {
    template: "MPI wire-up: {problem}",
    when: "what Slurm's MPI plugin gave a `jobrt exec` task cannot reach it: `PMI_FD` names no open socket, the step's runtime declares neither the `pmi-fd` nor the `pass-fds` capability, or its configuration cannot carry the socket into the container (an oci.conf whose RunTimeRun or RunTimeCreate is the site's own command); under PMIx, a `PMIX_*_TMPDIR` that is missing, not a directory or (as root) under a directory a job user could change, a container runtime that applies no host edits, or a rootless container whose task's uid Slurm's PMIx server would refuse. See [mpi.md](mpi.md)",
    hint: "the line names the fix: `--mpi=pmix` where the PMI-2 socket cannot pass, `--mpi=pmi2` where PMIx cannot, or `--runtime none`",
    exit: 1,
  },
  ERR_NOT_IN_SLURM_STEP: {
    template: "exec: {problem}",
    when: "`jobrt exec` outside a Slurm step (no `SLURM_JOB_ID`/`SLURM_STEP_ID`/`SLURM_PROCID`)",
    hint: "run it as `srun ... jobrt exec ...`, or use `jobrt run` outside Slurm",
    exit: 2,
  },
} as const satisfies Record<string, CatalogEntry>;

export type ErrorCode = keyof typeof ERROR_CATALOG;

/** The entry for a code, or undefined for a code outside the catalog (a plugin's typo). */
export function catalogEntry(code: string): CatalogEntry | undefined {
  return Object.hasOwn(ERROR_CATALOG, code) ? ERROR_CATALOG[code as ErrorCode] : undefined;
}

/** The parameter names of a template: `"a {x} b {y}"` gives `"x" | "y"`. */
export type TemplateParams<T extends string> = T extends `${string}{${infer P}}${infer Rest}`
  ? P | TemplateParams<Rest>
  : never;

/** The parameters `jobrtError(code, ...)` needs for a code's template. */
export type ErrorParams<C extends ErrorCode> = {
  readonly [P in TemplateParams<(typeof ERROR_CATALOG)[C]["template"]>]: string | number;
};

/** Fills a template; a parameter the template names but `params` lacks is a bug, not text. */
export function formatTemplate(template: string, params: Readonly<Record<string, string | number>>): string {
  return template.replace(/\{([A-Za-z]+)\}/g, (_, name: string) => {
    const value = params[name];
    if (value === undefined)
      throw new TypeError(`error template ${JSON.stringify(template)}: parameter ${name} is missing`);
    return String(value);
  });
}
