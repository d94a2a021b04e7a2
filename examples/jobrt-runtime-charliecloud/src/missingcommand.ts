/**
 * The exit status of a task whose command the image does not have: 127 (not found) or 126 (found,
 * not executable), as a shell, `--runtime none` and Slurm's own tasks report it. ch-run execs the
 * command in its own process and reports a failure with exit status 1 and a message on the
 * task's stderr, which jobrt cannot tell from a command that exits 1 itself. So the command is
 * looked up from the host in the container's view (lookupCommand of @jobrt/core), and only a
 * certain answer changes the status (README, Missing command).
 */
import { type CommandLookup, type ContainerView, lookupCommand } from "@jobrt/core";

/** What the guard needs to look the command up again: plain JSON. */
export interface LookupSpec {
  view: ContainerView;
  command: string;
  /** PATH inside the container. */
  path: string;
}

/** The request fields the view depends on (request.ts, ChRunRequest). */
export interface ViewRequest {
  image: string;
  binds: { source: string; target: string }[];
  env: [string, string][];
  clearEnv: boolean;
  envFile?: string;
  privateTmp: boolean;
  home: boolean;
}

/**
 * ch-run's own mounts (Charliecloud 0.31, ch_core.c), whose content is not a host directory
 * known here; a path under one is never called missing.
 */
const CH_RUN_MOUNTS = [
  "/dev",
  "/proc",
  "/sys",
  "/etc/hosts",
  "/etc/machine-id",
  "/etc/resolv.conf",
  "/etc/passwd",
  "/etc/group",
  "/var/opt/cray/hugetlbfs",
  "/var/opt/cray/alps/spool",
];

/**
 * Without PATH, execvp searches a built-in one: glibc's /bin:/usr/bin, musl's
 * /usr/local/bin:/bin:/usr/bin. Their union: missing from all of it is missing under either.
 */
const DEFAULT_PATH = "/usr/local/bin:/bin:/usr/bin";

/** The container's view and PATH for a task (ch-run's environment `env`), or why they are not known. */
export function lookupSpec(request: ViewRequest, env: Record<string, string>, command: string): LookupSpec | string {
  // A site's env file may set PATH: not parsed here.
  if (request.envFile !== undefined) return "--container-opt env-file may set PATH";
  let path = request.clearEnv ? undefined : env.PATH;
  for (const [name, value] of request.env) if (name === "PATH") path = value;
  if (path === "") return "PATH is empty";
  const mounts: ContainerView["mounts"] = CH_RUN_MOUNTS.map((destination) => ({ destination }));
  mounts.push(request.privateTmp ? { destination: "/tmp" } : { destination: "/tmp", source: "/tmp" });
  if (request.home) mounts.push({ destination: "/home" });
  for (const b of request.binds) mounts.push({ destination: b.target, source: b.source });
  return { view: { root: request.image, mounts }, command, path: path ?? DEFAULT_PATH };
}

/** Looks the command up; a relative one with a slash depends on ch-run's cwd and is unknown. */
export function lookup(spec: LookupSpec): CommandLookup {
  try {
    return lookupCommand(spec.view, spec.command, spec.path, "");
  } catch (error) {
    // Whatever went wrong, the task starts as it would have: no answer is "unknown".
    return { kind: "unknown", why: (error as Error).message };
  }
}

/** The status and message for a lookup, or undefined when the command may exist. */
export function missingStatus(
  result: CommandLookup,
  command: string,
): { status: 126 | 127; message: string } | undefined {
  if (result.kind === "missing")
    return { status: 127, message: `charliecloud: ${command}: command not found in the container (exit status 127)` };
  if (result.kind === "not-executable")
    return {
      status: 126,
      message: `charliecloud: ${command}: ${result.path} in the container is not an executable file (exit status 126)`,
    };
  return undefined;
}
