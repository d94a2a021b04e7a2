import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { jobrt, tempDir } from "../helpers/jobrt.js";

// JOBRT_TIMINGS=1: one line on stderr after the step says where the process spent its time
// (docs/performance.md, "Where the time goes in jobrt exec"; bench/startup.mjs reads it).

const LINE = /^jobrt: timings \(ms since start\): (.*); total (\d+\.\d)$/;
const SLURM_TASK = { SLURM_JOB_ID: "4712", SLURM_STEP_ID: "0", SLURM_PROCID: "0", SLURM_LOCALID: "0" };

function confDir(): string {
  const dir = tempDir("jobrt-timings-");
  writeFileSync(join(dir, "jobrt.conf"), `SpoolDir=${join(dir, "spool")}\n`);
  return dir;
}

/** The phases of the timings line, in the order printed, and its total. */
function phasesOf(stderr: string): { phases: [string, number][]; total: number } {
  const last = stderr.trimEnd().split("\n").at(-1) ?? "";
  const m = LINE.exec(last);
  if (!m) throw new Error(`no timings line at the end of stderr: ${JSON.stringify(stderr)}`);
  const phases = m[1]!.split(", ").map((p) => {
    const [name, ms] = p.split(" ");
    return [name!, Number(ms)] as [string, number];
  });
  return { phases, total: Number(m[2]) };
}

describe("JOBRT_TIMINGS", () => {
  it("jobrt exec: every phase from Node's start-up to the flush, in order, adding up to the total", async () => {
    const r = await jobrt(["exec", "--runtime", "none", "/bin/echo", "hello"], {
      env: { ...SLURM_TASK, JOBRT_CONF_DIR: confDir(), JOBRT_TIMINGS: "1" },
    });
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("hello\n");
    const { phases, total } = phasesOf(r.stderr);
    expect(phases.map(([n]) => n)).toEqual([
      "node",
      "modules",
      "command",
      "config",
      "journal",
      "runtime",
      "setup",
      "spawn",
      "task",
      "cleanup",
      "release",
      "flush",
    ]);
    for (const [name, ms] of phases) expect(ms, name).toBeGreaterThanOrEqual(0);
    const sum = phases.reduce((a, [, ms]) => a + ms, 0);
    // Each part is rounded to 0.1 ms on its own.
    expect(Math.abs(sum - total)).toBeLessThanOrEqual(0.05 * phases.length + 0.05);
    expect(r.stderr.trimEnd().split("\n")).toHaveLength(1);
  }, 60_000);

  it("jobrt run of several tasks: the line goes to stderr after the step, output untouched", async () => {
    const r = await jobrt(["run", "-n", "3", "--runtime", "none", "/bin/echo", "x"], {
      env: { JOBRT_CONF_DIR: confDir(), JOBRT_TIMINGS: "1" },
    });
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("x\nx\nx\n");
    expect(phasesOf(r.stderr).phases.map(([n]) => n)).toContain("task");
  }, 60_000);

  it("a step that fails before its runtime loads: the phases it reached, and its own exit status", async () => {
    const r = await jobrt(["run", "--runtime", "nope", "/bin/true"], {
      env: { JOBRT_CONF_DIR: confDir(), JOBRT_TIMINGS: "1" },
    });
    expect(r.code).toBe(2);
    const lines = r.stderr.trimEnd().split("\n");
    expect(lines[0]).toMatch(/runtime nope is not allowed/);
    const names = phasesOf(r.stderr).phases.map(([n]) => n);
    expect(names).toEqual(["node", "modules", "command", "config", "journal", "cleanup", "release", "flush"]);
  }, 60_000);

  it("off unless the variable is exactly 1: nothing more on stderr", async () => {
    for (const value of ["", "0", "yes"]) {
      const r = await jobrt(["exec", "--runtime", "none", "/bin/true"], {
        env: { ...SLURM_TASK, JOBRT_CONF_DIR: confDir(), JOBRT_TIMINGS: value },
      });
      expect(r.code).toBe(0);
      expect(r.stderr).toBe("");
    }
  }, 60_000);
});
