import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import {
  type ConfLocation,
  type ConfSchema,
  type FieldSpec,
  type JobrtError,
  confError,
  jobrtError,
  messageOf,
  parseConf,
  readConfText,
} from "@jobrt/core";
import { compileEre } from "./ere.js";
import {
  type PatternChar,
  describePatternChar,
  findPatternProblem,
  shellQuoteIn,
  usedPatternChars,
} from "./pattern.js";

export type CreateEnvFileMode = "disabled" | "null" | "newline";
export type OciMode = "run" | "create-start";

/** The OCI hook kinds DisableHooks may name (runtime-spec config.md, "POSIX-platform Hooks"). */
export const OCI_HOOK_KINDS = [
  "prestart",
  "createRuntime",
  "createContainer",
  "startContainer",
  "poststart",
  "poststop",
] as const;

export const RUNTIME_COMMAND_KEYS = [
  "RunTimeQuery",
  "RunTimeCreate",
  "RunTimeStart",
  "RunTimeRun",
  "RunTimeKill",
  "RunTimeDelete",
] as const;
export type RuntimeCommandKey = (typeof RUNTIME_COMMAND_KEYS)[number];

/** A validated oci.conf (or the embedded default). */
export interface OciConf {
  /** The file it came from, or "(embedded default)". */
  file: string;
  embedded: boolean;
  mode: OciMode;
  containerPath?: string;
  createEnvFile: CreateEnvFileMode;
  disableCleanup: boolean;
  disableHooks: string[];
  envExclude?: RegExp;
  ignoreFileConfigJson: boolean;
  mountSpoolDir?: string;
  /**
   * Bind the step spool dir into the container (Slurm always does in config.json mode). The
   * embedded default does not: runc would create the mount point inside the user's rootfs.
   */
  mountSpool: boolean;
  /**
   * `MpiNamespaces`: `host` (the default) gives an MPI step's containers the host's namespaces and
   * /dev/shm the host asks for (docs/mpi.md); `bundle` keeps each container's own, as Slurm does.
   */
  mpiNamespaces: MpiNamespacesMode;
  runTimeEnvExclude?: RegExp;
  commands: Partial<Record<RuntimeCommandKey, string>>;
  /**
   * The embedded default's RunTimeRun as argv patterns (one per word): jobrt's own command needs
   * no shell, so the task runs `runc run ...` directly, one process fewer per container.
   */
  runArgv?: string[];
  /** Where each key was set (for messages). */
  where: Record<string, ConfLocation>;
  /** Non-fatal remarks from parsing (repeated keys). */
  warnings: string[];
}

export type MpiNamespacesMode = "host" | "bundle";

const MPI_NAMESPACES: Record<string, MpiNamespacesMode> = { host: "host", bundle: "bundle" };

const CREATE_ENV_FILE: Record<string, CreateEnvFileMode> = {
  null: "null",
  true: "null",
  y: "null",
  yes: "null",
  "1": "null",
  newline: "newline",
  disabled: "disabled",
  false: "disabled",
  n: "disabled",
  no: "disabled",
  "0": "disabled",
};

/**
 * Values that have no meaning where a pattern is used. ContainerPath is step-level (no task, no
 * argv, and %m would be itself); RunTimeRun and RunTimeCreate run before the process whose pid %p
 * names exists (in run mode the shell's own pid is `$$`).
 */
const FORBIDDEN: Record<string, PatternChar[]> = {
  ContainerPath: ["@", "e", "m", "p", "t"],
  MountSpoolDir: ["@", "p"],
  RunTimeRun: ["p"],
  RunTimeCreate: ["p"],
};

function patternCheck(key: string): (value: string) => string | undefined {
  return (value) => {
    const problem = findPatternProblem(value);
    if (problem) {
      const what = problem.char === "" ? "a lone % at the end" : `unknown replacement character %${problem.char}`;
      return `${what} at offset ${problem.index} of ${JSON.stringify(value)} (known: %% %@ %b %e %I %j %m %n %p %r %s %t %u %U %Z)`;
    }
    for (const c of FORBIDDEN[key] ?? []) {
      if (usedPatternChars(value).has(c)) {
        const why =
          c === "p"
            ? "the pid is not known before the command starts (a shell's own pid is $$)"
            : "it has no value there";
        return `%${c} (${describePatternChar(c)}) cannot be used in ${key}: ${why}`;
      }
    }
    return undefined;
  };
}

function regexCheck(value: string): string | undefined {
  try {
    compileEre(value);
    return undefined;
  } catch (error) {
    return `regular expression ${JSON.stringify(value)} does not compile: ${messageOf(error)}`;
  }
}

function hooksCheck(value: string[]): string | undefined {
  const bad = value.filter((h) => !(OCI_HOOK_KINDS as readonly string[]).includes(h));
  if (bad.length === 0) return undefined;
  return `unknown OCI hook kind ${bad.map((b) => JSON.stringify(b)).join(", ")} (known: ${OCI_HOOK_KINDS.join(", ")})`;
}

const pattern = (key: string): FieldSpec<"string"> => ({ type: "string", check: patternCheck(key) });

/** Every key Slurm's oci.conf parser knows (runtime-oci.md, Configuration reference). The scrun-only ones are accepted and ignored. */
export const OCI_CONF_SCHEMA = {
  ContainerPath: pattern("ContainerPath"),
  CreateEnvFile: { type: { enum: CREATE_ENV_FILE } },
  DisableCleanup: { type: "bool" },
  DisableHooks: { type: "list", check: hooksCheck },
  EnvExclude: { type: "string", check: regexCheck },
  IgnoreFileConfigJson: { type: "bool" },
  MountSpoolDir: pattern("MountSpoolDir"),
  MpiNamespaces: { type: { enum: MPI_NAMESPACES } },
  RunTimeCreate: pattern("RunTimeCreate"),
  RunTimeDelete: pattern("RunTimeDelete"),
  RunTimeEnvExclude: { type: "string", check: regexCheck },
  RunTimeKill: pattern("RunTimeKill"),
  RunTimeQuery: pattern("RunTimeQuery"),
  RunTimeRun: pattern("RunTimeRun"),
  RunTimeStart: pattern("RunTimeStart"),
  // scrun only: parsed so a shared file loads, otherwise ignored.
  SrunPath: { type: "string" },
  SrunArgs: { type: "array" },
  StdIODebug: { type: "string" },
  SyslogDebug: { type: "string" },
  FileDebug: { type: "string" },
  DebugFlags: { type: "string" },
} satisfies ConfSchema;

/** The keys only scrun reads (runtime-oci.md, Configuration reference): each one set gets a warning, as jobrt has no scrun. */
const SCRUN_ONLY_KEYS = ["DebugFlags", "FileDebug", "StdIODebug", "SyslogDebug", "SrunPath", "SrunArgs"] as const;

/** One warning per scrun-only key set, at the line that set it, so a site sees that the value has no effect. */
function ignoredKeyWarnings(where: Record<string, ConfLocation>): string[] {
  const set = SCRUN_ONLY_KEYS.filter((k) => where[k] !== undefined).sort(
    (a, b) => (where[a]?.line ?? 0) - (where[b]?.line ?? 0),
  );
  return set.map(
    (key) =>
      `${where[key]?.file}:${where[key]?.line}: ${key} accepted for Slurm compatibility, ignored by jobrt (only Slurm's scrun reads it)`,
  );
}

function matrixError(file: string, where: Record<string, ConfLocation>, keys: string[], what: string): JobrtError {
  const at = keys.map((k) => where[k]).find((l): l is ConfLocation => l !== undefined);
  if (at)
    return confError(
      at,
      keys.find((k) => where[k] === at),
      what,
    );
  return jobrtError("ERR_CONF", { where: file, problem: what }, { details: { file } });
}

/** The mode oci.conf's commands make (runtime-oci.md, Configuration reference); a set that makes none is ERR_CONF. */
function ociMode(
  file: string,
  where: Record<string, ConfLocation>,
  commands: Partial<Record<RuntimeCommandKey, string>>,
  ignore: boolean,
): OciMode {
  const has = (k: RuntimeCommandKey) => commands[k] !== undefined;
  if (ignore) {
    // Slurm accepts this file and then dies at task launch; say it now instead.
    if (has("RunTimeCreate") || has("RunTimeStart") || !has("RunTimeRun")) {
      throw matrixError(
        file,
        where,
        ["RunTimeCreate", "RunTimeStart", "IgnoreFileConfigJson"],
        "IgnoreFileConfigJson=true works only with RunTimeRun: RunTimeCreate/RunTimeStart need the bundle's config.json",
      );
    }
    return "run";
  }
  if (!RUNTIME_COMMAND_KEYS.some(has)) {
    throw matrixError(
      file,
      where,
      [],
      "missing required options: set RunTimeRun, RunTimeKill and RunTimeDelete (run mode) or RunTimeCreate, RunTimeStart, RunTimeQuery, RunTimeKill and RunTimeDelete (create/start mode)",
    );
  }
  if (has("RunTimeRun")) {
    if (has("RunTimeCreate") || has("RunTimeStart")) {
      throw matrixError(
        file,
        where,
        ["RunTimeCreate", "RunTimeStart"],
        "RunTimeRun and RunTimeCreate/RunTimeStart are mutually exclusive",
      );
    }
    const missing = (["RunTimeKill", "RunTimeDelete"] as const).filter((k) => !has(k));
    if (missing.length > 0)
      throw matrixError(file, where, ["RunTimeRun"], `run mode (RunTimeRun) also needs ${missing.join(" and ")}`);
    return "run";
  }
  const missing = (["RunTimeCreate", "RunTimeStart", "RunTimeQuery", "RunTimeKill", "RunTimeDelete"] as const).filter(
    (k) => !has(k),
  );
  if (missing.length > 0) {
    throw matrixError(
      file,
      where,
      [...RUNTIME_COMMAND_KEYS],
      `create/start mode needs all of RunTimeCreate, RunTimeStart, RunTimeQuery, RunTimeKill and RunTimeDelete; missing ${missing.join(", ")} (or set RunTimeRun for run mode)`,
    );
  }
  return "create-start";
}

/** Parses and validates oci.conf text: syntax, types, patterns, regexes, the mode matrix (runtime-oci.md, Configuration reference). */
export function parseOciConf(text: string, file: string): OciConf {
  const parsed = parseConf(text, { file, schema: OCI_CONF_SCHEMA });
  const v = parsed.values;
  const commands: Partial<Record<RuntimeCommandKey, string>> = {};
  for (const k of RUNTIME_COMMAND_KEYS) {
    const s = v[k];
    if (s !== undefined) commands[k] = s;
  }
  const ignore = v.IgnoreFileConfigJson === true;
  const where = parsed.where;
  const mode = ociMode(file, where, commands, ignore);
  const envExclude = v.EnvExclude;
  const runTimeEnvExclude = v.RunTimeEnvExclude;
  const conf: OciConf = {
    file,
    embedded: false,
    mode,
    createEnvFile: v.CreateEnvFile ?? "disabled",
    disableCleanup: v.DisableCleanup === true,
    disableHooks: v.DisableHooks ?? [],
    ignoreFileConfigJson: ignore,
    mountSpool: true,
    mpiNamespaces: v.MpiNamespaces ?? "host",
    commands,
    where,
    warnings: [...parsed.warnings, ...ignoredKeyWarnings(where)],
  };
  const containerPath = v.ContainerPath;
  if (containerPath !== undefined && containerPath !== "") conf.containerPath = containerPath;
  const mountSpoolDir = v.MountSpoolDir;
  if (mountSpoolDir !== undefined && mountSpoolDir !== "") conf.mountSpoolDir = mountSpoolDir;
  if (envExclude) conf.envExclude = compileEre(envExclude);
  if (runTimeEnvExclude) conf.runTimeEnvExclude = compileEre(runTimeEnvExclude);
  return conf;
}

/** Reads `<confDir>/oci.conf`; undefined when there is none. Every other problem (a dangling symlink, a FIFO, ...) is ERR_CONF. */
export function loadOciConf(confDir: string): OciConf | undefined {
  const file = join(confDir, "oci.conf");
  const text = readConfText(file, true);
  return text === undefined ? undefined : parseOciConf(text, file);
}

/** Where runc is, searching PATH (an absolute path, or undefined). */
export function findProgram(name: string, path: string | undefined): string | undefined {
  for (const dir of (path ?? "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin").split(":")) {
    if (!dir.startsWith("/")) continue;
    const candidate = join(dir, name);
    try {
      if (existsSync(candidate)) return candidate;
    } catch {
      // unreadable PATH entries are skipped, as execvp does
    }
  }
  return undefined;
}

/** True when unprivileged user namespaces are enabled (what rootless runc needs). */
export function userNamespacesAvailable(): boolean {
  const read = (p: string): string | undefined => {
    try {
      return readFileSync(p, "utf8").trim();
    } catch {
      return undefined;
    }
  };
  if (read("/proc/sys/kernel/unprivileged_userns_clone") === "0") return false;
  const max = read("/proc/sys/user/max_user_namespaces");
  return max === undefined || Number(max) > 0;
}

/**
 * The embedded default's container id: `%I` (the step's container id, containername.ts) and the
 * task, so each task's container has an id of its own. Without --container-id that is
 * jobrt.%n.%U.%j.%s.%t: unique per node, user, job, step and task (the numeric uid: runc ids allow
 * only [A-Za-z0-9_+.-], which a user name like a@b breaks).
 */
export const DEFAULT_CONTAINER_ID = "%I.%t";

/**
 * The configuration used when there is no oci.conf and a container is requested: runc in run
 * mode. Root jobs use runc's default state dir (/run/runc); other users get rootless runc with its
 * state in the step spool dir, which is theirs and removed at cleanup.
 */
export function embeddedDefaultConf(runc: string, rootless: boolean): OciConf {
  const q = shellQuoteIn("none", runc);
  const global = rootless ? `${q} --rootless=true --root %m/runc` : `${q} --root /run/runc`;
  const id = DEFAULT_CONTAINER_ID;
  const globalArgv = rootless
    ? [runc.replace(/%/g, "%%"), "--rootless=true", "--root", "%m/runc"]
    : [runc.replace(/%/g, "%%"), "--root", "/run/runc"];
  return {
    file: "(embedded default)",
    embedded: true,
    mode: "run",
    createEnvFile: "disabled",
    disableCleanup: false,
    disableHooks: [],
    ignoreFileConfigJson: false,
    mountSpool: false,
    mpiNamespaces: "host",
    commands: {
      RunTimeQuery: `${global} state ${id}`,
      RunTimeRun: `${global} run ${id} -b %b`,
      RunTimeKill: `${global} kill -a ${id}`,
      RunTimeDelete: `${global} delete --force ${id}`,
    },
    runArgv: [...globalArgv, "run", id, "-b", "%b"],
    where: {},
    warnings: [],
  };
}
