import { spawn } from "node:child_process";
import { once } from "node:events";
import { describe, expect, test } from "vitest";
import { parseCgroups, procCgroups } from "../src/cgroup.js";
import { parseMountInfo, readMountInfo } from "../src/mountinfo.js";
import { parseProcStat, procStat, processRunning } from "../src/procstat.js";
import { decodeWaitStatus } from "../src/waitstatus.js";

describe("/proc/<pid>/stat", () => {
  test("a command name holding spaces and ')' does not shift the fields", () => {
    const s = parseProcStat(
      "42 (a) b) (c) S 1 42 42 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 123456 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 256\n",
    );
    expect(s).toEqual({
      pid: 42,
      comm: "a) b) (c",
      state: "S",
      ppid: 1,
      pgrp: 42,
      session: 42,
      startTime: 123456,
      exitCode: 256,
    });
    expect(parseProcStat("42 (cut")).toBeUndefined();
  });

  test("this process, a live child, and a zombie child", async () => {
    const me = procStat(process.pid);
    expect(me?.ppid).toBe(process.ppid);
    expect(me?.startTime).toBeGreaterThan(0);
    expect(processRunning(process.pid)).toBe(true);
    const child = spawn("sleep", ["30"], { stdio: "ignore" });
    const pid = child.pid as number;
    try {
      expect(procStat(pid)?.ppid).toBe(process.pid);
      expect(processRunning(pid)).toBe(true);
    } finally {
      child.kill("SIGKILL");
      await once(child, "exit");
    }
    expect(processRunning(pid)).toBe(false);
    expect(procStat(2 ** 22 + 1)).toBeUndefined();
  });
});

describe("/proc/self/mountinfo", () => {
  test("optional fields vary in number; escaped paths are unescaped", () => {
    const text = [
      "36 35 98:0 /mnt1 /mnt/a\\040b rw,noatime master:1 shared:2 - ext3 /dev/root rw,errors=continue",
      "30 25 0:26 / /sys/fs/cgroup/freezer rw - cgroup cgroup rw,freezer",
      "",
    ].join("\n");
    expect(parseMountInfo(text)).toEqual([
      { root: "/mnt1", mountPoint: "/mnt/a b", fstype: "ext3", superOptions: ["rw", "errors=continue"] },
      { root: "/", mountPoint: "/sys/fs/cgroup/freezer", fstype: "cgroup", superOptions: ["rw", "freezer"] },
    ]);
    expect(readMountInfo().some((m) => m.mountPoint === "/")).toBe(true);
  });
});

describe("/proc/self/cgroup", () => {
  test("v1 controllers, the cgroup2 line, a path holding ':'", () => {
    expect(parseCgroups("4:cpu,cpuacct:/a\n1:name=systemd:/b\n0::/c:d\n")).toEqual([
      { id: "4", controllers: ["cpu", "cpuacct"], path: "/a" },
      { id: "1", controllers: ["name=systemd"], path: "/b" },
      { id: "0", controllers: [], path: "/c:d" },
    ]);
    expect(procCgroups().length).toBeGreaterThan(0);
  });
});

describe("wait status", () => {
  test("an exit code, a signal, a signal with a core dump", () => {
    expect(decodeWaitStatus(3 << 8)).toEqual({ code: 3 });
    expect(decodeWaitStatus(9)).toEqual({ signal: 9 });
    expect(decodeWaitStatus(0x80 | 11)).toEqual({ signal: 11 });
  });
});
