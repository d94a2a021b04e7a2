import { spawn } from "node:child_process";
import { closeSync, constants, fstatSync, lstatSync, openSync, writeSync } from "node:fs";
import { hostname } from "node:os";
import type { Writable } from "node:stream";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { othersMayReplace } from "@jobrt/host-services";
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
 * The datagrams of one step to a unix datagram socket, through one nodelogsend.pl started with
 * the first and handed the rest on its stdin; jobrt never waits for it, and it never waits itself
 * (docs/decisions.md, "The node log is sent by a perl datagram sender"). No perl, no socket, no
 * receiver: the lines are lost, the step goes on.
 */
class DatagramSender {
  readonly #socket: string;
  #stdin: Writable | null | undefined;
  #started = false;

  constructor(socket: string) {
    this.#socket = socket;
  }

  send(datagram: string): void {
    // One datagram per line: nothing in a line may end it early.
    const line = datagram.replace(/\n/g, " ");
    if (this.#started) {
      // A small write to a pipe with room is done before it returns: nothing is lost at exit.
      this.#stdin?.write(`${line}\n`);
      return;
    }
    this.#started = true;
    const found = findPerl();
    if (!("perl" in found)) return;
    // The bundled command lives in dist/ beside this file's chunk (dist/bin-*.js or dist/steps.cjs).
    const script = join(dirname(fileURLToPath(import.meta.url)), "nodelogsend.pl");
    try {
      // The first line goes in the environment, which only its own user can read, not in argv (ps).
      const child = spawn(found.perl, ["--", script, this.#socket], {
        stdio: ["pipe", "ignore", "ignore"],
        detached: true,
        env: { JOBRT_NODELOG: line },
      });
      child.on("error", () => {});
      // A sender that is gone (EPIPE) loses the line, nothing else.
      child.stdin?.on("error", () => {});
      (child.stdin as { unref?: () => void } | null)?.unref?.();
      child.unref();
      this.#stdin = child.stdin;
    } catch {
      // EAGAIN, ENOMEM: a log line never fails a step.
    }
  }

  /** No more lines: the sender sends what it has and exits. */
  end(): void {
    this.#stdin?.end();
    this.#stdin = undefined;
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
    if (othersMayReplace(st)) return `${dir} is writable by others than root`;
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
    fd = openSync(
      path,
      constants.O_WRONLY |
        constants.O_APPEND |
        constants.O_CREAT |
        constants.O_NOFOLLOW |
        constants.O_NONBLOCK |
        constants.O_NOCTTY,
      0o640,
    );
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    // ENXIO: a FIFO without a reader (or a socket) opened O_NONBLOCK.
    return code === "ELOOP"
      ? `${path} is a symlink`
      : code === "ENXIO"
        ? `${path} is not a regular file`
        : `${path}: ${(error as Error).message}`;
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
 * Where one step's node log lines go, as jobrt.conf NodeLog says. `file:` is root's: any other
 * user (a job user's `jobrt exec`) sends its lines to syslog's /dev/log instead, where the log
 * daemon stamps them with the sender's uid. Root uses a file or socket only where no job user can
 * have put it, else /dev/log.
 */
export class NodeLogWriter {
  readonly #target: NodeLogTarget;
  readonly #facility: string;
  readonly #senders = new Map<string, DatagramSender>();

  constructor(target: NodeLogTarget, facility: string) {
    this.#target = target;
    this.#facility = facility;
  }

  #send(socket: string, severity: number, message: string, now?: Date): void {
    let sender = this.#senders.get(socket);
    if (!sender) {
      sender = new DatagramSender(socket);
      this.#senders.set(socket, sender);
    }
    sender.send(syslogDatagram(this.#facility, severity, message, now));
  }

  /** Writes one line; returns a warning when it could not go where NodeLog says. */
  write(severity: number, message: string): string | undefined {
    const target = this.#target;
    if (target.kind === "off") return undefined;
    const root = (process.getuid?.() ?? 0) === 0;
    if (target.kind === "file" && root) {
      const now = new Date();
      const why = appendToFile(
        target.path,
        `${now.toISOString()} ${hostname().split(".")[0]} jobrt[${process.pid}]: ${message}\n`,
      );
      if (why === undefined) return undefined;
      this.#send("/dev/log", severity, message, now);
      return `node log: not written to ${target.path} (${why}); sent to syslog instead`;
    }
    const socket = target.kind === "syslog" ? target.socket : "/dev/log";
    // Root's lines are not for a job user: one who could put a socket at the path would read
    // them, or drop them unseen.
    const bad = socket !== "/dev/log" && root ? unsafeDirectory(socket) : undefined;
    this.#send(bad ? "/dev/log" : socket, severity, message);
    return bad && `node log: not sent to ${socket} (${bad}); sent to /dev/log instead`;
  }

  /** The step has ended: its senders get no more lines. */
  close(): void {
    for (const sender of this.#senders.values()) sender.end();
  }
}
