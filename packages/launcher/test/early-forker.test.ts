/**
 * The step's task forker starts while the runtimes load when no task's stdio is a file
 * (docs/performance.md, "Where the time goes in jobrt exec"): it must then run during the load,
 * not exist for a step with an output file, and be reaped, not left running, when the runtime
 * never loads.
 */
import { existsSync, mkdtempSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { type NodeConf, RuntimeRegistry } from "@jobrt/core";
import { describe, expect, it } from "vitest";
import { StepCancel, currentUser, runSession } from "../src/index.js";

/** Pids of this process's children that are task forkers (zombies included: not reaped). */
function forkerChildren(): number[] {
  const pids: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const ppid = Number(readFileSync(`/proc/${name}/stat`, "utf8").split(") ")[1]!.split(" ")[1]);
      if (ppid !== process.pid) continue;
      const zombie = /^State:\s+Z/m.test(readFileSync(`/proc/${name}/status`, "utf8"));
      if (zombie || readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0")[0] === "jobrt-task-forker") pids.push(Number(name));
    } catch {
      // gone while listed
    }
  }
  return pids;
}

/** A registry whose one runtime is being imported until `fail` is called, and then fails to load. */
function heldRegistry(): { registry: RuntimeRegistry; loading: Promise<void>; fail: () => void } {
  let fail: () => void = () => {};
  let markLoading: () => void = () => {};
  const loading = new Promise<void>((r) => (markLoading = r));
  const registry = new RuntimeRegistry({
    defaultRuntime: "held",
    resolve: () => {
      markLoading();
      return new Promise((_, reject) => {
        fail = () => reject(new Error("held: cannot be imported"));
      });
    },
  });
  return { registry, loading, fail: () => fail() };
}

function node(): NodeConf {
  const dir = process.env.JOBRT_TEST_TMP!;
  return { nodeName: "n1", confDir: dir, spoolDir: mkdtempSync(join(dir, "spool-")), killWait: 1, hostUid: process.getuid?.() ?? 0, log: () => {} };
}

function step(io: { output?: string }) {
  return { mode: "run" as const, user: currentUser(), cpusOnNode: 1, components: [{ argv: ["true"], ntasks: 1, cwd: "/", env: { PATH: "/usr/bin:/bin" }, io }] };
}

describe("the task forker started before the runtimes load", () => {
  it("runs while a runtime loads when no task opens a file, and is reaped when the runtime fails to load", async () => {
    const held = heldRegistry();
    const reports: string[] = [];
    const session = runSession(step({}), { registry: held.registry, node: node(), cancel: new StepCancel(), procTrack: "pgid", report: (l) => reports.push(l) });
    await held.loading;
    expect(forkerChildren()).toHaveLength(1);
    held.fail();
    const result = await session;
    expect(result.status).toBeGreaterThan(0);
    expect(reports.join("\n")).toContain("held: cannot be imported");
    expect(forkerChildren()).toEqual([]);
  }, 30_000);

  it("is not started before the load when a task's output is a file, and that file is not made when the runtime fails", async () => {
    const held = heldRegistry();
    const out = join(mkdtempSync(join(process.env.JOBRT_TEST_TMP!, "out-")), "out-%t");
    const session = runSession(step({ output: out }), { registry: held.registry, node: node(), cancel: new StepCancel(), procTrack: "pgid", report: () => {} });
    await held.loading;
    expect(forkerChildren()).toEqual([]);
    held.fail();
    await session;
    expect(existsSync(out.replace("%t", "0"))).toBe(false);
    expect(forkerChildren()).toEqual([]);
  }, 30_000);
});
