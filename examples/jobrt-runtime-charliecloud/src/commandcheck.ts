/**
 * How the host tells a command the image does not have from the task's own exit status
 * (ExecSpec.supervise.missingCommand): ch-run execs the command in its own process and reports a
 * failure with its own exit status and a message on the task's stderr, which jobrt cannot tell
 * from a command that exits so itself. So the host looks the command up in the container's view
 * after ch-run failed, and only a certain answer makes it 127/126 (README, Missing command).
 */
import type { ContainerView, MissingCommandCheck } from "@jobrt/core";

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
 * Every failure of ch-run: its own status for a failed exec is not the same in every release, and
 * a command the host finds in the image keeps whatever status it gave.
 */
const CH_RUN_FAILURES = Array.from({ length: 255 }, (_, i) => i + 1);

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

/** The host's check of a task's command in the container, or undefined when its PATH is not known here. */
export function commandCheck(
  request: ViewRequest,
  env: Record<string, string>,
  command: string,
): MissingCommandCheck | undefined {
  // A site's env file may set PATH: not parsed here.
  if (request.envFile !== undefined || command === "") return undefined;
  let path = request.clearEnv ? undefined : env.PATH;
  for (const [name, value] of request.env) if (name === "PATH") path = value;
  if (path === "") return undefined;
  const mounts: ContainerView["mounts"] = CH_RUN_MOUNTS.map((destination) => ({ destination }));
  mounts.push(request.privateTmp ? { destination: "/tmp" } : { destination: "/tmp", source: "/tmp" });
  if (request.home) mounts.push({ destination: "/home" });
  for (const b of request.binds) mounts.push({ destination: b.target, source: b.source });
  // cwd "": a relative command with a slash depends on ch-run's cwd, and is never called missing.
  const view = { root: request.image, mounts };
  return { command, view, path: path ?? DEFAULT_PATH, cwd: "", exitCodes: CH_RUN_FAILURES };
}
