import { describe, expect, test } from "vitest";
import { runTool } from "../src/runtool.js";

const env = { PATH: "/usr/bin:/bin" };

describe("runTool", () => {
  test("input in, output out, the exit status as it is", async () => {
    const r = await runTool(["sh", "-c", "cat; echo err >&2; exit 3"], { env, timeoutMs: 10_000, input: "hello" });
    expect(r).toMatchObject({ code: 3, signal: null, stderr: "err\n", timedOut: false });
    expect(r.stdout.toString()).toBe("hello");
  });

  test("past the time-out the whole process group is killed", async () => {
    const started = Date.now();
    const r = await runTool(["sh", "-c", "sleep 30 & sleep 30"], { env, timeoutMs: 200 });
    expect(r.timedOut).toBe(true);
    expect(r.signal).toBe("SIGKILL");
    // close comes only once the background sleep, which holds the pipes too, is gone.
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  test("output is capped, the rest read and dropped", async () => {
    const r = await runTool(["sh", "-c", "head -c 100000 /dev/zero; head -c 100000 /dev/zero >&2"], {
      env,
      timeoutMs: 10_000,
      maxOutput: 1000,
    });
    expect(r.code).toBe(0);
    expect(r.stdout.length).toBe(1000);
    expect(r.stderr.length).toBe(1000);
  });

  test("a program that cannot start rejects with the errno code", async () => {
    await expect(runTool(["/nonexistent/tool"], { env, timeoutMs: 1000 })).rejects.toMatchObject({
      code: "ENOENT",
      message: expect.stringContaining("cannot run /nonexistent/tool"),
    });
  });
});
