import { describe, expect, it } from "vitest";
import { failureLines } from "../src/failures.js";

describe("srun's per-task failure lines", () => {
  it("says nothing when every task exited 0", () => {
    expect(failureLines("n1", [{ task: 0, code: 0, signal: null }])).toEqual([]);
  });
  it("groups tasks by outcome with Slurm's task ranges, in srun's wording", () => {
    const ends = [
      { task: 0, code: 3, signal: null },
      { task: 1, code: 0, signal: null },
      { task: 2, code: null, signal: "SIGKILL" },
      { task: 3, code: null, signal: "SIGKILL" },
      { task: 4, code: null, signal: "SIGKILL" },
      { task: 6, code: null, signal: "SIGKILL" },
      { task: 5, code: null, signal: "SIGSEGV" },
    ];
    expect(failureLines("n1", ends)).toEqual(["error: n1: task 0: Exited with exit code 3", "error: n1: tasks 2-4,6: Killed", "error: n1: task 5: Segmentation fault"]);
  });
  it("names a signal strsignal has no text for here by its number", () => {
    expect(failureLines("n1", [{ task: 0, code: null, signal: "SIGWINCH" }])).toEqual(["error: n1: task 0: Signal 28"]);
  });
});
