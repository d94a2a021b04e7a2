/**
 * The run-mode missing-command guard (missingguard.ts) as a real process: it passes the host's
 * stop signals on exactly once (group or leader delivery), dies of the signal that killed the
 * runtime, and changes a failure status only when the task's config.json says the command is
 * missing.
 */
import { spawn } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { GUARD_PROGRAM } from "../src/missingguard.js";
import { tempDir } from "./host.js";

interface Ended {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Starts the guard in its own process group; `stop` sends SIGTERM to the group or the guard alone once `ready` is printed. */
function guard(
  taskDir: string,
  delivery: "group" | "leader",
  argv: string[],
  stop?: "group" | "leader",
): Promise<Ended> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [GUARD_PROGRAM, taskDir, delivery, ...argv], {
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      stdout += d;
      if (stop && stdout.includes("ready") && !stdout.includes("sent")) {
        stdout += "sent\n";
        process.kill(stop === "group" ? -(child.pid as number) : (child.pid as number), "SIGTERM");
      }
    });
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      stderr += d;
    });
    child.on("error", reject);
    child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

const TRAPS = ["sh", "-c", "trap 'echo term; exit 7' TERM; echo ready; while :; do sleep 0.1; done"];

describe("the missing-command guard", () => {
  test("a SIGTERM to the task group reaches the runtime once; to the guard alone (leader delivery) it is passed on", async () => {
    const dir = tempDir();
    const [group, leader] = await Promise.all([
      guard(dir, "group", TRAPS, "group"),
      guard(dir, "leader", TRAPS, "leader"),
    ]);
    for (const r of [group, leader]) {
      expect(r).toMatchObject({ code: 7, signal: null });
      expect(r.stdout.match(/term/g)).toEqual(["term"]);
    }
  });

  test("a runtime killed by a signal: the guard dies of the same signal", async () => {
    const r = await guard(tempDir(), "group", ["sh", "-c", "kill -s KILL $$"]);
    expect(r).toMatchObject({ code: null, signal: "SIGKILL" });
  });

  test("a failure becomes 127 only when the task's config.json has no such command; success and an existing command keep theirs", async () => {
    const dir = tempDir();
    const rootfs = join(dir, "rootfs");
    mkdirSync(join(rootfs, "bin"), { recursive: true });
    writeFileSync(join(rootfs, "bin/there"), "", { mode: 0o755 });
    const config = (command: string) =>
      JSON.stringify({
        root: { path: rootfs },
        process: { args: [command], env: ["PATH=/bin"], cwd: "/" },
        mounts: [],
      });
    const missing = join(dir, "missing");
    const there = join(dir, "there");
    mkdirSync(missing);
    mkdirSync(there);
    writeFileSync(join(missing, "config.json"), config("nothere"));
    writeFileSync(join(there, "config.json"), config("there"));
    const [failed, succeeded, exists, noConfig] = await Promise.all([
      guard(missing, "group", ["sh", "-c", "exit 1"]),
      guard(missing, "group", ["true"]),
      guard(there, "group", ["sh", "-c", "exit 1"]),
      guard(dir, "group", ["sh", "-c", "exit 1"]),
    ]);
    expect(failed).toMatchObject({
      code: 127,
      stderr: "jobrt-oci: nothere: command not found in the container (exit status 127)\n",
    });
    expect(succeeded).toMatchObject({ code: 0, stderr: "" });
    expect(exists).toMatchObject({ code: 1, stderr: "" });
    expect(noConfig).toMatchObject({ code: 1, stderr: "" });
  });
});
