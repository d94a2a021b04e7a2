import { accessSync, constants, lstatSync, statSync } from "node:fs";
import { delimiter, isAbsolute, join } from "node:path";
import { type ContainerView, type StepRecord, jobrtError } from "@jobrt/core";
import { deviceArgs } from "./devices.js";

/**
 * The step state: everything setup decided about the sandbox, as JSON data. run adds only the
 * task's own command, so every task of the step (in every `jobrt exec` process) gets the same
 * sandbox.
 */
export interface SandboxState {
  /** Absolute path of bwrap on the node. */
  bwrap: string;
  /** bwrap options, up to (not including) the command. */
  args: string[];
  /** The sandbox's file system as its tasks see it: where the host looks a command bwrap could not exec up. */
  view: ContainerView;
  /** The task's directory inside the sandbox. */
  cwd: string;
  /** CDI edits bwrap could not apply (hooks, groups), said in the step's log. */
  devicesSkipped?: string[];
}

/** Works out the sandbox for a step, or throws a JobrtError naming the option at fault. Creates nothing. */
export function planSandbox(step: StepRecord, hostPath: string | undefined): SandboxState {
  const request = step.container;
  const rootfs = request?.value;
  const root = rootfs ?? "/";
  if (rootfs !== undefined) checkRootfs(rootfs);
  const workdir = request?.workdir;
  if (workdir !== undefined && !isAbsolute(workdir)) {
    throw jobrtError("ERR_CONTAINER_REQUEST", {
      problem: `--container-workdir "${workdir}": must be an absolute path`,
    });
  }
  const args = ["--unshare-pid", "--die-with-parent", "--new-session"];
  if (rootfs === undefined) {
    // The host's own tree, read-only; the task writes to its cwd and a private /tmp.
    args.push(
      "--ro-bind",
      "/",
      "/",
      "--dev",
      "/dev",
      "--proc",
      "/proc",
      "--tmpfs",
      "/tmp",
      "--bind",
      step.cwd,
      step.cwd,
    );
  } else {
    args.push("--ro-bind", rootfs, "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp");
  }
  for (const volume of request?.volumes ?? []) args.push(...volumeArgs(volume, root));
  const devices = deviceArgs(request?.deviceEdits, root);
  args.push(...devices.binds, ...devices.env);
  for (const entry of request?.env ?? []) args.push(...envArgs(entry));
  // A rootfs does not hold the host's cwd: such a task starts at the request's workdir or /.
  const cwd = workdir ?? (rootfs === undefined ? step.cwd : "/");
  args.push("--chdir", cwd);
  return {
    bwrap: findBwrap(hostPath),
    args,
    view: viewOf(args),
    cwd,
    ...(devices.skipped.length > 0 ? { devicesSkipped: devices.skipped } : {}),
  };
}

/**
 * The sandbox as bwrap's options build it, in their order: a bind's content is its host source, a
 * tmpfs is empty when bwrap executes the command (a PATH entry in it holds nothing), bwrap's own
 * /dev and /proc are not known here (a command under them is never called missing).
 */
function viewOf(args: string[]): ContainerView {
  const view: ContainerView = { root: "/", mounts: [] };
  for (let i = 0; i < args.length; i++) {
    const [option, a = "", b = ""] = args.slice(i, i + 3);
    if (option === "--ro-bind" || option === "--bind" || option === "--dev-bind") {
      if (b === "/") view.root = a;
      else view.mounts.push({ destination: b, source: a });
      i += 2;
    } else if (option === "--tmpfs") {
      view.mounts.push({ destination: a, empty: true });
      i += 1;
    } else if (option === "--dev" || option === "--proc") {
      view.mounts.push({ destination: a });
      i += 1;
    } else if (option === "--setenv") i += 2;
    else if (option === "--chdir") i += 1;
  }
  return view;
}

function checkRootfs(rootfs: string): void {
  if (!isAbsolute(rootfs)) {
    throw jobrtError("ERR_CONTAINER_IMAGE", {
      problem: `--container "${rootfs}": must be the absolute path of a root file system directory`,
    });
  }
  let isDir = false;
  try {
    isDir = statSync(rootfs).isDirectory();
  } catch {
    // reported below
  }
  if (!isDir)
    throw jobrtError("ERR_CONTAINER_IMAGE", {
      problem: `--container "${rootfs}": no such directory (it must be a root file system)`,
    });
}

/** `SRC:DST[:ro|rw]`: SRC on the host, DST an existing path in the sandbox (bwrap cannot create it on a read-only root). */
function volumeArgs(volume: string, root: string): string[] {
  const [src = "", dst = src, mode = "rw", ...rest] = volume.split(":");
  const bad = (rule: string) =>
    jobrtError("ERR_CONTAINER_REQUEST", { problem: `--container-volume "${volume}": ${rule}` });
  if (rest.length > 0 || (mode !== "ro" && mode !== "rw")) throw bad("use SRC[:DST[:ro|rw]]");
  if (!src || !isAbsolute(src) || !isAbsolute(dst)) throw bad("SRC and DST must be absolute paths");
  if (!existsIn("/", src)) throw bad(`the source ${src} does not exist`);
  if (!existsIn(root, dst)) throw bad(`the target ${dst} does not exist in the sandbox`);
  return [mode === "ro" ? "--ro-bind" : "--bind", src, dst];
}

function envArgs(entry: string): string[] {
  const eq = entry.indexOf("=");
  if (eq <= 0) throw jobrtError("ERR_CONTAINER_REQUEST", { problem: `--container-env "${entry}": use NAME=VALUE` });
  return ["--setenv", entry.slice(0, eq), entry.slice(eq + 1)];
}

/** lstat only: a symlink in a rootfs points into the rootfs, not at the host's file of that name. */
function existsIn(root: string, path: string): boolean {
  try {
    lstatSync(join(root, path));
    return true;
  } catch {
    return false;
  }
}

function findBwrap(hostPath: string | undefined): string {
  for (const dir of (hostPath ?? "/usr/bin:/bin").split(delimiter)) {
    if (!isAbsolute(dir)) continue;
    const candidate = join(dir, "bwrap");
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // next PATH entry
    }
  }
  throw jobrtError("ERR_CONTAINER_NOT_CONFIGURED", {
    problem: "runtime bwrap needs bwrap on the host's PATH (Debian/Ubuntu: apt-get install bubblewrap)",
  });
}
