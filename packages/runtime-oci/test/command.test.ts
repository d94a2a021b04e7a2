import { isJobrtError } from "@jobrt/core";
import { describe, expect, test } from "vitest";
import { runShellCommand } from "../src/command.js";

const rejection = (p: Promise<unknown>) =>
  p.then(
    () => expect.fail("expected a rejection"),
    (e: unknown) => e,
  );

describe("runShellCommand's failures are catalog errors", () => {
  test("a command past its time-out: ERR_RUNTIME_TIMEOUT naming the oci.conf key", async () => {
    const e = await rejection(
      runShellCommand("sleep 5", {
        key: "RunTimeQuery",
        env: { PATH: "/usr/bin:/bin" },
        cwd: "/",
        timeoutMs: 100,
        stdio: "capture",
      }),
    );
    expect(isJobrtError(e, "ERR_RUNTIME_TIMEOUT")).toBe(true);
    expect((e as Error).message).toMatch(/^RunTimeQuery/);
    expect(isJobrtError(e) && e.details).toMatchObject({ runtime: "runtime/oci", key: "RunTimeQuery" });
  });
  test("a shell that cannot start (its cwd is missing): ERR_RUNTIME_COMMAND", async () => {
    const e = await rejection(
      runShellCommand("true", {
        key: "RunTimeKill",
        env: {},
        cwd: "/nonexistent/jobrt-dir",
        timeoutMs: 5000,
        stdio: "capture",
      }),
    );
    expect(isJobrtError(e, "ERR_RUNTIME_COMMAND")).toBe(true);
    expect((e as Error).message).toMatch(/^RunTimeKill: cannot start \/bin\/sh: /);
  });
});
