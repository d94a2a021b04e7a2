/**
 * A task's end is decided once, in the launcher, from its raw wait status and its ExecSpec's
 * `supervise` (docs/decisions.md, "The host supervises a wrapper's task"); a stop signal reaches
 * the task inside a sandbox the wrapper does not forward to.
 */
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ExecSpec, MissingCommandCheck } from "@jobrt/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTaskGroup } from "../src/index.js";
import { decideTaskEnd } from "../src/session/task/supervision.js";
import { tempDir } from "../../../tests/helpers/tmp.js";

let root: string;
beforeAll(() => {
  root = tempDir("jobrt-supervision-");
  mkdirSync(join(root, "bin"));
  writeFileSync(join(root, "bin/tool"), "#!/bin/sh\n", { mode: 0o755 });
  writeFileSync(join(root, "bin/data"), "", { mode: 0o644 });
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

const exited = (code: number) => code << 8;
const spec = (check?: Partial<MissingCommandCheck>): ExecSpec => ({
  argv: ["/usr/bin/wrapper"],
  env: {},
  cwd: "/",
  ...(check
    ? {
        supervise: {
          missingCommand: {
            command: "tool",
            view: { root, mounts: [] },
            path: "/bin",
            cwd: "/",
            exitCodes: [1],
            ...check,
          },
        },
      }
    : {}),
});

describe("decideTaskEnd", () => {
  it("takes the raw wait status: a real-time signal Node has no name for is 128+N, not exit 0", () => {
    expect(decideTaskEnd(spec(), 34)).toEqual({ status: 162, code: null, signal: 34 });
    expect(decideTaskEnd(spec(), exited(3))).toEqual({ status: 3, code: 3, signal: null });
    expect(decideTaskEnd(spec(), null)).toEqual({ status: 1, code: null, signal: null });
  });

  it("a wrapper's declared exit code is 127 with one line only when the command is certainly missing, 126 when not executable", () => {
    expect(decideTaskEnd(spec({ command: "nosuch" }), exited(1))).toEqual({
      status: 127,
      code: 127,
      signal: null,
      message: "nosuch: command not found in the container (exit status 127)",
    });
    expect(decideTaskEnd(spec({ command: "/bin/data" }), exited(1))).toMatchObject({ status: 126 });
    // Found: the task's own exit 1; an exit code the wrapper does not declare; a signal: as they are.
    expect(decideTaskEnd(spec(), exited(1))).toEqual({ status: 1, code: 1, signal: null });
    expect(decideTaskEnd(spec({ command: "nosuch" }), exited(2))).toEqual({ status: 2, code: 2, signal: null });
    expect(decideTaskEnd(spec({ command: "nosuch" }), 15)).toEqual({ status: 143, code: null, signal: 15 });
    // What the host cannot see is never called missing.
    const unseen = spec({ command: "nosuch", view: { root, mounts: [{ destination: "/bin" }] } });
    expect(decideTaskEnd(unseen, exited(1))).toEqual({ status: 1, code: 1, signal: null });
  });
});

describe('supervise.stop "child-group"', () => {
  it("delivers the stop signal once, to the task under the wrapper's only child; the wrapper itself gets none", async () => {
    const tasks = createTaskGroup(`supervision-test.${process.pid}`);
    const me = { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 };
    // A wrapper as bwrap --new-session is one: it dies of a SIGTERM it gets (the trap says so),
    // and runs the task in a session of its own under its only child.
    const task =
      "n=0; trap 'n=$((n+1)); echo \"term $n\"; sleep 0.5; exit 7' TERM; echo ready; while :; do sleep 0.05; done";
    const wrapper = `trap 'echo wrapper-signalled; exit 9' TERM; setsid sh -c '${task.replaceAll("'", "'\\''")}' & wait $!; exit $?`;
    const s: ExecSpec = {
      argv: ["/bin/sh", "-c", wrapper],
      env: { PATH: "/usr/bin:/bin" },
      cwd: "/",
      supervise: { stop: "child-group" },
    };
    const start = { taskId: 0, ...me, stdio: ["ignore", "pipe", "ignore"] as ["ignore", "pipe", "ignore"] };
    const child = await tasks.start(s, start);
    let out = "";
    child.stdout?.setEncoding("utf8").on("data", (d: string) => {
      out += d;
      if (d.includes("ready")) tasks.stop(s, start, child.pid as number, "SIGTERM");
    });
    await new Promise((resolve) => child.on("close", resolve));
    expect(out).toBe("ready\nterm 1\n");
    expect(tasks.end(s, start, child)).toEqual({ status: 7, code: 7, signal: null });
    tasks.killTask(0, child.pid);
    await tasks.close(5000);
  }, 30_000);
});
