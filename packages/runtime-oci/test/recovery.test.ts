import { describe, expect, test } from "vitest";
import type { CommandResult } from "../src/command.js";
import { COMMAND_TIMEOUTS, commandTimeouts } from "../src/commandtimeouts.js";
import { teardown } from "../src/teardown.js";

type Key = "RunTimeQuery" | "RunTimeKill" | "RunTimeDelete";
const result = (code: number, stdout = "", stderr = ""): CommandResult => ({ code, signal: undefined, stdout, stderr });
const base = {
  graceMs: 30,
  forceKill: async () => {},
  sleep: (ms: number) => new Promise<void>((r) => setTimeout(r, Math.min(ms, 5))),
};

describe("$JOBRT_OCI_TIMEOUTS", () => {
  test("unset or empty: the built-in time-outs", () => {
    expect(commandTimeouts(undefined)).toEqual(COMMAND_TIMEOUTS);
    expect(commandTimeouts(" ")).toEqual(COMMAND_TIMEOUTS);
  });
  test("any subset, in seconds (fractions allowed), the rest unchanged", () => {
    expect(commandTimeouts("query=1, delete=2.5")).toEqual({ ...COMMAND_TIMEOUTS, query: 1000, delete: 2500 });
    expect(commandTimeouts("create=120,start=90,query=5,kill=3,delete=60")).toEqual({
      create: 120_000,
      start: 90_000,
      query: 5000,
      kill: 3000,
      delete: 60_000,
    });
  });
  test.each([
    "query",
    "query=",
    "query=soon",
    "query=0",
    "query=-1",
    "run=5",
    "Query=5",
    "query=90000",
    "query=1,,kill=1",
  ])("%j is refused with one line naming the variable", (text) => {
    expect(() => commandTimeouts(text)).toThrow(
      /^\$JOBRT_OCI_TIMEOUTS: ".*" is not KEY=SECONDS with KEY one of create, start, query, kill, delete and 0 < SECONDS <= 86400$/,
    );
  });
});

describe("teardown when RunTimeQuery prints garbage", () => {
  function runtime(answers: Partial<Record<Key, CommandResult>>) {
    const calls: Key[] = [];
    const warnings: string[] = [];
    return {
      calls,
      warnings,
      run: async (key: Key) => {
        calls.push(key);
        return answers[key] ?? result(0);
      },
      log: (level: string, m: string) => {
        if (level === "warn") warnings.push(m);
      },
    };
  }

  test("exit 0 without state JSON: a broken runtime, not a dead container: Kill and Delete still run", async () => {
    const r = runtime({ RunTimeQuery: result(0, "this is not json") });
    expect(await teardown({ ...base, hasQuery: true, ...r })).toBe("deleted");
    expect(r.calls).toEqual(["RunTimeQuery", "RunTimeKill", "RunTimeDelete"]);
    expect(r.warnings).toEqual([
      'RunTimeQuery exited 0 but printed no OCI state JSON ("this is not json"); running RunTimeKill and RunTimeDelete anyway',
    ]);
  });

  test("JSON without a status counts as garbage too", async () => {
    const r = runtime({ RunTimeQuery: result(0, '{"id": "x"}') });
    expect(await teardown({ ...base, hasQuery: true, ...r })).toBe("deleted");
    expect(r.calls).toEqual(["RunTimeQuery", "RunTimeKill", "RunTimeDelete"]);
  });

  test("a Delete that then fails (nothing to delete) is warned about and taken for gone, so the dirs go", async () => {
    const r = runtime({ RunTimeQuery: result(0, "garbage"), RunTimeDelete: result(1, "", "container does not exist") });
    expect(await teardown({ ...base, hasQuery: true, ...r })).toBe("gone");
    expect(r.warnings.at(-1)).toBe(
      "RunTimeDelete exited with status 1: container does not exist; taking the container for gone",
    );
  });

  test("a query that exits non-zero is still 'no such container': nothing else runs", async () => {
    const r = runtime({ RunTimeQuery: result(1, "", "container does not exist") });
    expect(await teardown({ ...base, hasQuery: true, ...r })).toBe("gone");
    expect(r.calls).toEqual(["RunTimeQuery"]);
  });
});
