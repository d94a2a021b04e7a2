import { spawnSync } from "node:child_process";
import { describe, expect, test } from "vitest";
import { isSimpleCommand, runScript } from "../src/shell.js";

describe("RunTimeRun scripts", () => {
  test.each([
    ["runc --root /run/runc run n1.0.5.0.0 -b '/spool/my bundle'", true],
    ["/usr/local/bin/enroot-start-wrapper /b /m /e -- 'sh' '-c' 'a;b'", true],
    ['singularity exec --userns "/r" x', true],
    ["runc run id -b /b >/dev/null 2>&1", true],
    ["runc run a#b", true],
    ["cp /e /o && runc run x", false],
    ["a; b", false],
    ["a | b", false],
    ["a &", false],
    ["(a)", false],
    ["FOO=1 runc run x", false],
    ["if true; then x; fi", false],
    ["exec runc run x", false],
    ["env -i USER=$(whoami) ch-run x", false],
    ["a\nb", false],
    ["echo 'unterminated", false],
    ["", false],
  ])("%j simple: %s", (command, simple) => {
    expect(isSimpleCommand(command)).toBe(simple);
  });

  test("a simple command replaces the shell; others run as its child; the status is the command's", () => {
    for (const [command, exec] of [
      ["sh -c 'echo $$ $PPID; exit 3'", true],
      ["true && sh -c 'echo $$ $PPID; exit 3'", false],
    ] as const) {
      const r = spawnSync("/bin/sh", ["-c", `echo $$\n${runScript(command)}`], { encoding: "utf8" });
      const [shell, pid, ppid] = r.stdout.trim().split(/\s+/).map(Number);
      expect(r.status).toBe(3);
      if (exec) expect(pid).toBe(shell);
      else expect(ppid).toBe(shell);
    }
  });

  test("the shell outlives a SIGTERM to its process group and exits with the child's status", () => {
    // The child traps TERM and exits 7; the group signal reaches both.
    const child = `sh -c 'trap "exit 7" TERM; kill -TERM 0; sleep 5 & wait $!'`;
    const r = spawnSync("setsid", ["/bin/sh", "-c", runScript(`true && ${child}`)], {
      encoding: "utf8",
      timeout: 10_000,
    });
    expect(r.signal).toBeNull();
    expect(r.status).toBe(7);
  });
});
