import { describe, expect, test } from "vitest";
import type { CommandResult } from "../src/command.js";
import { teardown } from "../src/teardown.js";

type Key = "RunTimeQuery" | "RunTimeKill" | "RunTimeDelete";
const ok = (stdout = ""): CommandResult => ({ code: 0, signal: undefined, stdout, stderr: "" });
const fail: CommandResult = { code: 1, signal: undefined, stdout: "", stderr: "container does not exist" };
const state = (status: string, pid = 4321) => ok(JSON.stringify({ ociVersion: "1.0.2", id: "x", status, pid }));

/** A scripted runtime: each query answers the next state; records every command and SIGKILL. */
function script(states: (string | undefined)[]) {
  const calls: string[] = [];
  let i = 0;
  return {
    calls,
    run: async (key: Key) => {
      calls.push(key);
      if (key !== "RunTimeQuery") return ok();
      const s = states[Math.min(i++, states.length - 1)];
      return s === undefined ? fail : state(s);
    },
    forceKill: async (pid: number) => {
      calls.push(`SIGKILL ${pid}`);
    },
  };
}
const base = {
  graceMs: 30,
  log: () => {},
  sleep: (ms: number) => new Promise<void>((r) => setTimeout(r, Math.min(ms, 5))),
};

describe("the kill/delete sequence", () => {
  test("no state: nothing to kill or delete", async () => {
    const s = script([undefined]);
    expect(await teardown({ ...base, hasQuery: true, ...s })).toBe("gone");
    expect(s.calls).toEqual(["RunTimeQuery"]);
  });
  test("a query that timed out or was killed: delete anyway, since it says nothing about the container", async () => {
    for (const answer of ["throws", "signal"] as const) {
      const calls: string[] = [];
      const run = async (key: Key): Promise<CommandResult> => {
        calls.push(key);
        if (key !== "RunTimeQuery") return ok();
        if (answer === "throws") throw new Error("RunTimeQuery timed out after 10000 ms");
        return { code: undefined, signal: "SIGTERM", stdout: "", stderr: "" };
      };
      expect(await teardown({ ...base, hasQuery: true, run, forceKill: async () => {} })).toBe("deleted");
      expect(calls).toEqual(["RunTimeQuery", "RunTimeDelete"]);
    }
  });
  test("stopped: delete only", async () => {
    const s = script(["stopped"]);
    expect(await teardown({ ...base, hasQuery: true, ...s })).toBe("deleted");
    expect(s.calls).toEqual(["RunTimeQuery", "RunTimeDelete"]);
  });
  test("created: delete (delete --force handles a created container)", async () => {
    const s = script(["created"]);
    await teardown({ ...base, hasQuery: true, ...s });
    expect(s.calls).toEqual(["RunTimeQuery", "RunTimeDelete"]);
  });
  test("running, stops after Kill: kill then delete, no SIGKILL", async () => {
    const s = script(["running", "running", "stopped"]);
    await teardown({ ...base, hasQuery: true, ...s });
    expect(s.calls).toEqual(["RunTimeQuery", "RunTimeKill", "RunTimeQuery", "RunTimeQuery", "RunTimeDelete"]);
  });
  test("running and ignoring Kill: escalates to SIGKILL of the state's pid, then delete", async () => {
    const first = [
      "running",
      "running",
      "running",
      "running",
      "running",
      "running",
      "running",
      "running",
      "running",
      "running",
    ];
    const t = script([...first, ...first, ...first, "stopped"]);
    await teardown({ ...base, hasQuery: true, run: t.run, forceKill: t.forceKill });
    expect(t.calls).toContain("SIGKILL 4321");
    expect(t.calls.at(-1)).toBe("RunTimeDelete");
    expect(t.calls.indexOf("RunTimeKill")).toBeLessThan(t.calls.indexOf("SIGKILL 4321"));
  });
  test("paused counts as alive (Slurm treated it as finished)", async () => {
    const s = script(["paused", "stopped"]);
    await teardown({ ...base, hasQuery: true, ...s });
    expect(s.calls).toContain("RunTimeKill");
  });
  test("query-less (IgnoreFileConfigJson): Kill while alive, SIGKILL when it stays, Delete always (W7)", async () => {
    const s = script([]);
    let alive = true;
    await teardown({
      ...base,
      hasQuery: false,
      alive: () => alive,
      pid: 99,
      run: s.run,
      forceKill: async (pid) => {
        s.calls.push(`SIGKILL ${pid}`);
        alive = false;
      },
    });
    expect(s.calls).toEqual(["RunTimeKill", "SIGKILL 99", "RunTimeDelete"]);
  });
  test("query-less and already dead: only Delete", async () => {
    const s = script([]);
    await teardown({ ...base, hasQuery: false, alive: () => false, ...s });
    expect(s.calls).toEqual(["RunTimeDelete"]);
  });
  test("a failing command is logged, never thrown", async () => {
    const logs: string[] = [];
    const r = await teardown({
      ...base,
      hasQuery: true,
      log: (_l, m) => logs.push(m),
      run: async () => {
        throw new Error("boom");
      },
      forceKill: async () => {},
    });
    expect(r).toBe("gone");
    expect(logs.join()).toContain("boom");
  });
});
