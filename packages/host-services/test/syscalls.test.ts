import { describe, expect, test } from "vitest";
import { syscallNumbers } from "../src/syscalls.js";

const FORKER = [
  "setsid",
  "dup3",
  "fcntl",
  "close",
  "setgroups",
  "setresgid",
  "setresuid",
  "execve",
  "openat",
  "write",
  "pipe2",
  "read",
] as const;

describe("syscallNumbers", () => {
  test("the forker's twelve on x64 and on the generic table; prctl on all eight architectures", () => {
    expect(syscallNumbers(FORKER, "x64")).toEqual([112, 292, 72, 3, 116, 119, 117, 59, 257, 1, 293, 0]);
    expect(syscallNumbers(FORKER, "riscv64")).toEqual([157, 24, 25, 57, 159, 149, 147, 221, 56, 64, 59, 63]);
    const prctl = ["x64", "arm64", "riscv64", "loong64", "ppc64", "s390x", "ia32", "arm"].map(
      (a) => syscallNumbers(["prctl"], a)?.[0],
    );
    expect(prctl).toEqual([157, 167, 167, 167, 171, 172, 172, 172]);
  });

  test("an architecture missing one of the numbers gets none", () => {
    expect(syscallNumbers(FORKER, "ppc64")).toBeUndefined();
    expect(syscallNumbers(["prctl"], "mips")).toBeUndefined();
  });
});
