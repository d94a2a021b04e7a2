import { spawn } from "node:child_process";
import { closeSync, constants, fstatSync, lstatSync, openSync, writeSync } from "node:fs";
import { hostname } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { type NodeLogTarget, SYSLOG_FACILITIES, findPerl } from "@jobrt/launcher";

/** syslog(3)'s severities the node log uses (RFC 5424, section 6.2.1). */
export const SEVERITY = { err: 3, notice: 5, info: 6 } as const;

const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/** The datagram glibc's syslog(3) sends: `<PRI>Mmm dd hh:mm:ss jobrt[pid]: message`, local time. */
export function syslogDatagram(facility: string, severity: number, message: string, now = new Date()): string {
  const pri = (SYSLOG_FACILITIES[facility] ?? SYSLOG_FACILITIES.daemon!) * 8 + severity;
  const two = (n: number) => String(n).padStart(2, "0");
  const stamp = `${MONTHS[now.getMonth()]} ${String(now.getDate()).padStart(2, " ")} ${two(now.getHours())}:${two(now.getMinutes())}:${two(now.getSeconds())}`;
  return `<${pri}>${stamp} jobrt[${process.pid}]: ${message}`;
}

/**
 * One datagram to a unix datagram socket through nodelog-send.pl, started and left: jobrt does not
 * wait for it, and it never waits itself (docs/decisions.md, "The node log is sent by a perl
 * datagram sender"). No perl, no socket, no receiver: the line is lost, the step goes on.
 */
function sendDatagram(socket: string, datagram: string): void {
  const found = findPerl();
  if (!("perl" in found)) return;
  // The bundled command lives in dist/ beside this file's chunk (dist/bin-*.js or dist/steps.cjs).
  const script = join(dirname(fileURLToPath(import.meta.url)), "nodelog-send.pl");
  try {
    // The line goes in the environment, which only its own user can read, not in argv (ps).
    const child = spawn(found.perl, ["--", script, socket], { stdio: "ignore", detached: true, env: { JOBRT_NODELOG: datagram } });
    child.on("error", () => {});
    child.unref();
  } catch {
    // EAGAIN, ENOMEM: a log line never fails a step.
  }
}

/**
 * Why root must not use `path` (undefined: it may): a directory on the way that is a symlink, or
 * that anyone but root can write to without the sticky bit, would let a job user point root's
 * O_APPEND at a file of their choosing, or put their own socket there (docs/reliability.md,
 * "Threat model").
 */
function unsafeDirectory(path: string): string | undefined {
  for (let dir = dirname(path); ; dir = dirname(dir)) {
    let st: ReturnType<typeof lstatSync>;
    try {
      st = lstatSync(dir);
    } catch (error) {
      return `${dir}: ${(error as NodeJS.ErrnoException).code ?? "cannot stat"}`;
    }
    if (!st.isDirectory()) return `${dir} is not a directory (a symlink?)`;
    if (st.uid !== 0) return `${dir} belongs to uid ${st.uid}, not root`;
    if ((st.mode & 0o022) !== 0 && (st.mode & 0o1000) === 0) return `${dir} is writable by others than root`;
    if (dir === "/") return undefined;
  }
}

/** Appends one line to root's log file, or says why it did not. */
function appendToFile(path: string, line: string): string | undefined {
  const bad = unsafeDirectory(path);
  if (bad) return bad;
  let fd: number;
  try {
    // O_NONBLOCK: a FIFO put there must not hold the step (it is refused below, as anything but a file).
    fd = openSync(path, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY, 0o640);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    // ENXIO: a FIFO without a reader (or a socket) opened O_NONBLOCK.
    return code === "ELOOP" ? `${path} is a symlink` : code === "ENXIO" ? `${path} is not a regular file` : `${path}: ${(error as Error).message}`;
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) return `${path} is not a regular file`;
    if (st.uid !== 0 || st.nlink !== 1) return `${path} is not root's own file (uid ${st.uid}, ${st.nlink} links)`;
    writeSync(fd, line);
    return undefined;
  } catch (error) {
    return `${path}: ${(error as Error).message}`;
  } finally {
    closeSync(fd);
  }
}

/**
 * Writes one node log line where jobrt.conf NodeLog says. `file:` is root's: any other user (a
 * job user's `jobrt exec`) sends its lines to syslog's /dev/log instead, where the log daemon
 * stamps them with the sender's uid. Root uses a file or socket only where no job user can have
 * put it, else /dev/log. Returns a warning when the line could not go where configured.
 */
export function writeNodeLog(target: NodeLogTarget, facility: string, severity: number, message: string): string | undefined {
  if (target.kind === "off") return undefined;
  if (target.kind === "file" && (process.getuid?.() ?? 0) === 0) {
    const now = new Date();
    const why = appendToFile(target.path, `${now.toISOString()} ${hostname().split(".")[0]} jobrt[${process.pid}]: ${message}\n`);
    if (why === undefined) return undefined;
    sendDatagram("/dev/log", syslogDatagram(facility, severity, message, now));
    return `node log: not written to ${target.path} (${why}); sent to syslog instead`;
  }
  const socket = target.kind === "syslog" ? target.socket : "/dev/log";
  // Root's lines are not for a job user: one who could put a socket at the path would read
  // them, or drop them unseen.
  const bad = socket !== "/dev/log" && (process.getuid?.() ?? 0) === 0 ? unsafeDirectory(socket) : undefined;
  sendDatagram(bad ? "/dev/log" : socket, syslogDatagram(facility, severity, message));
  return bad && `node log: not sent to ${socket} (${bad}); sent to /dev/log instead`;
}
