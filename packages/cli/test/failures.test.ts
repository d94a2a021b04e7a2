import { describe, expect, it } from "vitest";
import { failureLines } from "../src/failures.js";

describe("srun's per-task failure lines", () => {
  it("says nothing when every task exited 0", () => {
    expect(failureLines("n1", [{ component: 0, task: 0, code: 0, signal: null }])).toEqual([]);
  });
  it("groups tasks by outcome with Slurm's task ranges, in srun's wording", () => {
    const ends = [
      { component: 0, task: 0, code: 3, signal: null },
      { component: 0, task: 1, code: 0, signal: null },
      { component: 0, task: 2, code: null, signal: "SIGKILL" },
      { component: 0, task: 3, code: null, signal: "SIGKILL" },
      { component: 0, task: 4, code: null, signal: "SIGKILL" },
      { component: 0, task: 6, code: null, signal: "SIGKILL" },
      { component: 0, task: 5, code: null, signal: "SIGSEGV" },
    ];
    expect(failureLines("n1", ends)).toEqual([
      "error: n1: task 0: Exited with exit code 3",
      "error: n1: tasks 2-4,6: Killed",
      "error: n1: task 5: Segmentation fault",
    ]);
  });
  it("orders lines by each outcome's first task, whatever order the tasks ended in", () => {
    const ends = [
      { component: 0, task: 7, code: 2, signal: null },
      { component: 0, task: 3, code: null, signal: "SIGTERM" },
      { component: 0, task: 1, code: 2, signal: null },
      { component: 0, task: 2, code: 2, signal: null },
      { component: 0, task: 4, code: null, signal: "SIGTERM" },
    ];
    expect(failureLines("n1", ends)).toEqual([
      "error: n1: tasks 1-2,7: Exited with exit code 2",
      "error: n1: tasks 3-4: Terminated",
    ]);
  });
  it("numbers a heterogeneous step's tasks within each component and gives each component its own lines, as srun does", () => {
    const ends = [
      { component: 1, task: 1, code: 3, signal: null },
      { component: 0, task: 0, code: 3, signal: null },
      { component: 1, task: 0, code: 3, signal: null },
      { component: 0, task: 1, code: 5, signal: null },
    ];
    expect(failureLines("n1", ends)).toEqual([
      "error: n1: task 0: Exited with exit code 3",
      "error: n1: task 1: Exited with exit code 5",
      "error: n1: tasks 0-1: Exited with exit code 3",
    ]);
  });
  it("uses glibc's strsignal text; a signal without one is 'Unknown signal' and its name", () => {
    const ends = [
      { component: 0, task: 0, code: null, signal: "SIGWINCH" },
      { component: 0, task: 1, code: null, signal: "SIGSYS" },
      { component: 0, task: 2, code: null, signal: "SIGRTMAX" },
    ];
    expect(failureLines("n1", ends)).toEqual([
      "error: n1: task 0: Window changed",
      "error: n1: task 1: Bad system call",
      "error: n1: task 2: Unknown signal SIGRTMAX",
    ]);
  });
  it("after a SIGINT to jobrt, leaves out the tasks a signal ended but keeps exit codes, as srun after Ctrl-C", () => {
    const ends = [
      { component: 0, task: 0, code: null, signal: "SIGINT", interrupted: true },
      { component: 0, task: 1, code: 130, signal: null, interrupted: true },
      { component: 0, task: 2, code: null, signal: "SIGKILL", interrupted: true },
      { component: 0, task: 3, code: null, signal: "SIGSEGV", interrupted: false },
    ];
    expect(failureLines("n1", ends)).toEqual([
      "error: n1: task 1: Exited with exit code 130",
      "error: n1: task 3: Segmentation fault",
    ]);
  });
});

describe("signals Node has no name for", () => {
  it("a real-time signal reads as glibc's strsignal says it (srun's words), any other by its number", () => {
    const ends = [
      { component: 0, task: 0, code: null, signal: "signal 34" },
      { component: 0, task: 1, code: null, signal: "signal 64" },
      { component: 0, task: 2, code: null, signal: "signal 50" },
      { component: 0, task: 3, code: null, signal: "signal 99" },
    ];
    expect(failureLines("n1", ends)).toEqual([
      "error: n1: task 0: Real-time signal 0",
      "error: n1: task 1: Real-time signal 30",
      "error: n1: task 2: Real-time signal 16",
      "error: n1: task 3: Unknown signal 99",
    ]);
  });
});
