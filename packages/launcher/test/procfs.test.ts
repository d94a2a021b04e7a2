/**
 * What the launcher reads and changes in /proc and the cgroup filesystem, on the real kernel:
 * a process's start time (odd command names included), and removing a step's cgroup tree.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, rmdirSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { processRunning } from "@jobrt/host-services";
import { bootId, isSameProcess, processStartTime } from "../src/processidentity.js";
import { findHierarchy, moveInto, ownDir, removeCgroupTree } from "../src/session/proctrack/cgroupfs.js";

const children: ChildProcess[] = [];
afterEach(async () => {
  for (const c of children.splice(0)) {
    if (c.exitCode !== null || c.signalCode !== null) continue;
    const gone = new Promise((r) => c.once("exit", r));
    c.kill("SIGKILL");
    await gone;
  }
});

/** Removes a cgroup tree deepest first, independently of the code under test. */
function sweep(dir: string): void {
  if (!existsSync(dir)) return;
  for (const e of readdirSync(dir, { withFileTypes: true })) if (e.isDirectory()) sweep(join(dir, e.name));
  rmdirSync(dir);
}

function sleeper(file = "/bin/sleep"): ChildProcess {
  const child = spawn(file, ["60"], { stdio: "ignore" });
  children.push(child);
  return child;
}

describe("/proc/<pid>/stat", () => {
  it("reads the start time and state after a command name with spaces and parentheses", () => {
    const dir = process.env.JOBRT_TEST_TMP!;
    const odd = join(dir, "a) b (c ) d");
    copyFileSync("/bin/sleep", odd);
    const child = sleeper(odd);
    const pid = child.pid!;
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    expect(stat).toContain("(a) b (c ) d)");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    expect(processStartTime(pid)).toBe(fields[19]);
    expect(processStartTime(pid)).toMatch(/^\d+$/);
    expect(processRunning(pid)).toBe(true);
    expect(isSameProcess(pid, fields[19], bootId())).toBe(true);
    expect(isSameProcess(pid, `${fields[19]}0`, bootId())).toBe(false);
  });

  it("says gone for a process that is not there", () => {
    expect(processStartTime(2 ** 22 + 1)).toBeUndefined();
    expect(processRunning(2 ** 22 + 1)).toBe(false);
  });
});

describe("removeCgroupTree (cgroup2)", () => {
  it("removes every cgroup it can, nested ones too, and returns a populated one and its parents, deepest first", async () => {
    const h = findHierarchy(2);
    if (!h) throw new Error("this test needs a cgroup2 mount (run it as root on a cgroup2 host)");
    const step = join(ownDir(h), `jobrt-test-removetree-${process.pid}`);
    const dirs = ["task_0", "task_1", "task_1/sub", "task_1/sub/deeper", "task_2"].map((d) => join(step, d));
    mkdirSync(step);
    for (const d of dirs) mkdirSync(d);
    const child = sleeper();
    moveInto(join(step, "task_2"), child.pid!);
    try {
      expect(removeCgroupTree(step)).toEqual([join(step, "task_2"), step]);
      expect(dirs.filter((d) => existsSync(d))).toEqual([join(step, "task_2")]);
    } finally {
      const gone = new Promise((r) => child.once("exit", r));
      child.kill("SIGKILL");
      await gone;
      // The cgroup is unpopulated once the kernel has reaped its last member.
      for (
        let i = 0;
        i < 100 && /^populated 1$/m.test(readFileSync(join(step, "task_2", "cgroup.events"), "utf8"));
        i++
      )
        await new Promise((r) => setTimeout(r, 20));
      const left = removeCgroupTree(step);
      // Whatever removeCgroupTree got wrong is not left on the machine.
      sweep(step);
      expect(left).toEqual([]);
    }
    expect(existsSync(step)).toBe(false);
    expect(removeCgroupTree(step)).toEqual([]);
  });
});
