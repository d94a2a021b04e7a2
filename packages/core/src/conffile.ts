import {
  type Stats,
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  openSync,
  readSync,
  readlinkSync,
  statSync,
} from "node:fs";
import { type JobrtError, jobrtError, messageOf } from "./errors.js";

/**
 * The most a configuration file (and, in parseConf, a file together with everything it
 * Includes) may hold. Real jobrt.conf/oci.conf/shifter.conf files are a few KiB; the cap keeps a
 * runaway generated file, or a large file included by mistake, from eating memory.
 */
export const MAX_CONF_BYTES = 1024 * 1024;

function fileKind(st: Stats): string {
  if (st.isDirectory()) return "a directory";
  if (st.isFIFO()) return "a FIFO";
  if (st.isCharacterDevice()) return "a character device";
  if (st.isBlockDevice()) return "a block device";
  if (st.isSocket()) return "a socket";
  return "not a regular file";
}

function confFileError(path: string, why: string): JobrtError {
  return jobrtError("ERR_CONF", { where: path, problem: why }, { details: { file: path } });
}

function checkRegular(path: string, st: Stats): void {
  if (!st.isFile()) throw confFileError(path, `is ${fileKind(st)}; configuration is read only from regular files`);
  if (st.size > MAX_CONF_BYTES)
    throw confFileError(
      path,
      `is ${st.size} bytes, more than the ${MAX_CONF_BYTES}-byte (1 MiB) limit for a configuration file`,
    );
}

/** What `path` is, following a final symlink; a dangling symlink is an error, not "missing". */
function statTarget(path: string): { st: Stats; link: boolean } | undefined {
  let st: Stats;
  try {
    st = lstatSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw confFileError(path, `cannot read: ${messageOf(error)}`);
  }
  if (!st.isSymbolicLink()) return { st, link: false };
  try {
    return { st: statSync(path), link: true };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT")
      throw confFileError(path, `cannot read: ${messageOf(error)}`);
    let target = "?";
    try {
      target = readlinkSync(path);
    } catch {
      // replaced meanwhile; the message still says what was wrong
    }
    throw confFileError(path, `is a dangling symlink (to ${JSON.stringify(target.slice(0, 200))})`);
  }
}

function readCapped(path: string, fd: number, size: number): string {
  // The file may grow between fstat and read: read on to one byte past the cap to notice.
  let buffer = Buffer.allocUnsafe(size + 1);
  let length = 0;
  for (;;) {
    if (length === buffer.length) {
      const bigger = Buffer.allocUnsafe(Math.min(buffer.length * 2, MAX_CONF_BYTES + 1));
      buffer.copy(bigger, 0, 0, length);
      buffer = bigger;
    }
    const n = readSync(fd, buffer, length, buffer.length - length, null);
    if (n === 0) break;
    length += n;
    if (length > MAX_CONF_BYTES)
      throw confFileError(path, `is more than the ${MAX_CONF_BYTES}-byte (1 MiB) limit for a configuration file`);
  }
  return buffer.toString("utf8", 0, length);
}

/**
 * Reads a configuration file without ever blocking on it: the path is stat'ed before any open
 * (an open of a FIFO for reading waits for a writer, and a synchronous wait leaves jobrt deaf to
 * signals and -t), the open is non-blocking (and no-follow when the path was not a symlink, so a
 * swap in between is caught), and the open descriptor is checked again. Only a regular file of at
 * most MAX_CONF_BYTES is read. Returns undefined when nothing is at `path` and `missingOk`.
 */
export function readConfText(path: string, missingOk: boolean): string | undefined {
  const found = statTarget(path);
  if (found === undefined) {
    if (missingOk) return undefined;
    throw confFileError(path, "does not exist");
  }
  checkRegular(path, found.st);
  const flags =
    constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY | (found.link ? 0 : constants.O_NOFOLLOW);
  let fd: number;
  try {
    fd = openSync(path, flags);
  } catch (error) {
    throw confFileError(path, `cannot read: ${messageOf(error)}`);
  }
  try {
    const st = fstatSync(fd);
    checkRegular(path, st);
    return readCapped(path, fd, st.size);
  } finally {
    closeSync(fd);
  }
}
