import { closeSync, constants, fstatSync, openSync, statSync } from "node:fs";
import { type FileUser, asUser } from "@jobrt/host-services";

function describe(code: string | undefined, message: string): string {
  switch (code) {
    case "ENOENT":
      return "no such file or directory";
    case "EACCES":
    case "EPERM":
      return "permission denied";
    case "EISDIR":
      return "is a directory";
    case "ENXIO":
      return "a FIFO with no reader";
    default:
      return message;
  }
}

/** An error message naming the option and file, for one-line reports. */
export function fileError(option: string, path: string, error: unknown): string {
  const e = error as NodeJS.ErrnoException;
  return `${option} ${JSON.stringify(path)}: ${describe(e.code, e.message)}`;
}

function isFifo(path: string): boolean {
  try {
    return statSync(path).isFIFO();
  } catch {
    return false;
  }
}

/**
 * Opens a task output file (truncating) as the job user. A FIFO is opened read-write, which never
 * waits for a reader (a write-only open would block jobrt until one comes); a directory is refused.
 */
export function openOutput(path: string, user: FileUser | undefined): number {
  if (path === "") throw Object.assign(new Error("empty file name"), { code: "ENOENT" });
  return asUser(user, () => {
    if (isFifo(path)) return openSync(path, constants.O_RDWR);
    return checkKind(openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC, 0o644));
  });
}

/**
 * Opens a task input file as the job user. A FIFO is refused: opening it would block jobrt until a
 * writer comes, and a non-blocking descriptor would hand the task EAGAIN.
 */
export function openInput(path: string, user: FileUser | undefined): number {
  return asUser(user, () => {
    if (isFifo(path))
      throw Object.assign(new Error("is a FIFO (pipe it into jobrt's stdin instead)"), { code: "EFIFO" });
    return checkKind(openSync(path, constants.O_RDONLY));
  });
}

function checkKind(fd: number): number {
  const st = fstatSync(fd);
  if (st.isDirectory()) {
    closeSync(fd);
    throw Object.assign(new Error("is a directory"), { code: "EISDIR" });
  }
  return fd;
}
