/**
 * The task forker's streams against Node's own handling of its child: a task's output must reach
 * its reader even when the forker has exited (and Node has seen it) before the reader attaches.
 */
import { closeSync, openSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { type StdioItem, TaskForker, forkerPerl } from "../src/session/forker/forker.js";
import { withDescriptor } from "../src/session/wireup/pmi.js";
import { exitStatuses, tracedProgram } from "../../../tests/helpers/strace.js";
import { tempDir } from "../../../tests/helpers/tmp.js";

/** All a stream still holds, read from now on ("" when it was already drained and closed). */
function rest(stream: Readable | null): Promise<string> {
  return new Promise((resolve) => {
    if (!stream || stream.destroyed) return resolve("");
    let data = "";
    stream.setEncoding("utf8").on("data", (d: string) => {
      data += d;
    });
    stream.once("close", () => resolve(data));
  });
}

describe("TaskForker", () => {
  it("keeps a task's output for its reader when the forker exits first", async () => {
    const found = forkerPerl();
    if (!("perl" in found)) throw new Error(`the task forker needs perl here: ${found.missing}`);
    const forker = new TaskForker(found.perl, new Map([[0, ["ignore", "pipe", "pipe"]]]), (why) => {
      throw new Error(why);
    });
    const started = forker.start(0, { argv: ["/bin/sh", "-c", "echo out; echo err >&2"], env: {}, cwd: "/" });
    // The forker exits once its only task has ended and it was told there are no more; Node has
    // seen that exit (and run what it runs for an exited child) before anyone reads the task.
    await forker.close();
    await new Promise((r) => setImmediate(r));
    const task = await started;
    const [out, err] = await Promise.all([rest(task.stdout), rest(task.stderr)]);
    expect(out).toBe("out\n");
    expect(err).toBe("err\n");
  }, 30_000);

  it("exits by itself once the last task it was given has ended, before anyone calls close()", async () => {
    const found = forkerPerl();
    if (!("perl" in found)) throw new Error(`the task forker needs perl here: ${found.missing}`);
    const forker = new TaskForker(found.perl, new Map([[0, ["ignore", "ignore", "ignore"]]]), () => {});
    const task = await forker.start(0, { argv: ["/bin/sh", "-c", "exit 3"], env: {}, cwd: "/" });
    const code = await new Promise((r) => task.once("exit", (c) => r(c)));
    expect(code).toBe(3);
    const timeout = new Promise((r) => setTimeout(() => r("still running"), 5000));
    expect(await Promise.race([forker.exited.then(() => "exited"), timeout])).toBe("exited");
    await forker.close();
  }, 30_000);
});

describe("TaskForker: a descriptor passed on purpose (pmi.ts)", () => {
  /** What the task sees: each of its descriptors above 2 and what it is open on. */
  const LIST = 'for f in /proc/self/fd/*; do n=${f##*/}; [ "$n" -gt 2 ] && echo "$n $(readlink "$f")"; done; true';

  async function descriptorsOf(items: StdioItem[]): Promise<string[]> {
    const found = forkerPerl();
    if (!("perl" in found)) throw new Error(`the task forker needs perl here: ${found.missing}`);
    const forker = new TaskForker(found.perl, new Map([[0, items]]), (why) => {
      throw new Error(why);
    });
    const task = await forker.start(0, { argv: ["/bin/sh", "-c", LIST], env: {}, cwd: "/" });
    const out = await rest(task.stdout);
    await forker.close();
    return out.split("\n").filter((l) => l !== "");
  }

  function withFile<T>(run: (fd: number, path: string) => Promise<T>): Promise<T> {
    const dir = tempDir("jobrt-forker-");
    const path = join(dir, "passed");
    const fd = openSync(path, "w");
    return run(fd, path).finally(() => {
      closeSync(fd);
      rmSync(dir, { recursive: true });
    });
  }

  // 3 is the forker's own control socket, where a "pass-fds" runtime's task gets the PMI-2 socket.
  it.each([11, 4, 3])(
    "reaches the task at number %i, and nothing else of jobrt's does",
    (at) =>
      withFile(async (fd, path) => {
        const items = withDescriptor(["ignore", "pipe", "ignore"], fd, at);
        const seen = await descriptorsOf(items);
        // The shell's own directory listing may show too; nothing else open on a file of jobrt's.
        expect(seen.filter((l) => / ./.test(l) && !l.includes("/proc/"))).toEqual([`${at} ${path}`]);
      }),
    30_000,
  );

  it(
    "is not passed to a task whose stdio does not name it",
    () =>
      withFile(async (_fd, path) => {
        const seen = await descriptorsOf(["ignore", "pipe", "ignore"]);
        expect(seen.join("\n")).not.toContain(path);
        expect(seen.filter((l) => / ./.test(l) && !l.includes("/proc/"))).toEqual([]);
      }),
    30_000,
  );
});

describe("TaskForker: a task whose exec fails", () => {
  it("is reported as not started, and its child exits 127 (forker.pl's EXEC_FAILED)", async () => {
    const found = forkerPerl();
    if (!("perl" in found)) throw new Error(`the task forker needs perl here: ${found.missing}`);
    const traced = tracedProgram(found.perl);
    const forker = new TaskForker(traced.path, new Map([[0, ["ignore", "ignore", "ignore"]]]), () => {});
    await expect(forker.start(0, { argv: ["/nonexistent/jobrt-task"], env: {}, cwd: "/" })).rejects.toMatchObject({
      code: "ENOENT",
    });
    await forker.close();
    await forker.exited;
    // The forker itself exits 0; its child for the task is the one that exits 127.
    expect(exitStatuses(traced.trace).sort()).toEqual([0, 127]);
  }, 30_000);
});
