/** The syscalls jobrt's perl helpers make through perl's syscall(), which needs their numbers. */
export type SyscallName =
  | "setsid"
  | "dup3"
  | "fcntl"
  | "close"
  | "setgroups"
  | "setresgid"
  | "setresuid"
  | "execve"
  | "openat"
  | "write"
  | "pipe2"
  | "read"
  | "prctl";

/** asm-generic/unistd.h, which arm64, riscv64 and loong64 share. */
const GENERIC: Record<SyscallName, number> = {
  setsid: 157,
  dup3: 24,
  fcntl: 25,
  close: 57,
  setgroups: 159,
  setresgid: 149,
  setresuid: 147,
  execve: 221,
  openat: 56,
  write: 64,
  pipe2: 59,
  read: 63,
  prctl: 167,
};

/**
 * Per Node architecture (process.arch). Only numbers checked against the kernel's tables are
 * listed: the other architectures have prctl only, so the task forker (which needs them all) says
 * it is not available there and the subreaper prefix still works.
 */
const TABLE: Partial<Record<string, Partial<Record<SyscallName, number>>>> = {
  x64: {
    setsid: 112,
    dup3: 292,
    fcntl: 72,
    close: 3,
    setgroups: 116,
    setresgid: 119,
    setresuid: 117,
    execve: 59,
    openat: 257,
    write: 1,
    pipe2: 293,
    read: 0,
    prctl: 157,
  },
  arm64: GENERIC,
  riscv64: GENERIC,
  loong64: GENERIC,
  ppc64: { prctl: 171 },
  s390x: { prctl: 172 },
  ia32: { prctl: 172 },
  arm: { prctl: 172 },
};

/** The numbers of `names` on `arch`, in that order; undefined when one of them is not known there. */
export function syscallNumbers(names: readonly SyscallName[], arch: string = process.arch): number[] | undefined {
  const table = TABLE[arch];
  const out = names.map((n) => table?.[n]);
  return out.every((n) => n !== undefined) ? (out as number[]) : undefined;
}
