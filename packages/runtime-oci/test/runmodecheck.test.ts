/**
 * Run mode's missing-command check is the host's (ExecSpec.supervise.missingCommand, from the
 * task's config.json): RunTimeRun is the task's process with nothing of jobrt's around it, so the
 * host's stop signal reaches it once and a signal that kills it stays its end; a non-zero exit
 * becomes 127 only when the container has no such command, and success or an existing command
 * keep their status (docs/runtime-oci.md, Missing command). A RunTimeRun script stands in for
 * the runtime: what it does is what the runtime's status would be.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { type ExecSpec, NOT_SUPPORTED } from "@jobrt/core";
import { describe, expect, test } from "vitest";
import plugin from "../src/index.js";
import { makeBundle, writeConf } from "./fixtures.js";
import { type HostOptions, type TaskOutcome, runStep, tempDir } from "./host.js";

const NOT_FOUND = "nothere: command not found in the container (exit status 127)\n";

/** A conf whose RunTimeRun runs `script` (with the task's bundle dir as $1). */
function fakeRuntime(script: string): string {
  const dir = tempDir();
  writeFileSync(join(dir, "runtime.sh"), script);
  return writeConf(dir, `RunTimeRun="sh ${join(dir, "runtime.sh")} %b"\nRunTimeKill="true"\nRunTimeDelete="true"\n`);
}

const bundle = makeBundle(join(tempDir(), "bundle"));
const hooked = makeBundle(join(tempDir(), "hooked"), (c) => {
  c.hooks = { prestart: [{ path: "/bin/true" }] };
});

async function run(script: string, command: string, extra: Partial<HostOptions> = {}): Promise<TaskOutcome> {
  const r = await runStep(plugin, {
    confDir: fakeRuntime(script),
    spoolDir: tempDir(),
    argv: [command],
    container: { value: bundle },
    ...extra,
  });
  expect(r.setupError).toBeUndefined();
  expect(r.cleanupError).toBeUndefined();
  return r.tasks[0] as TaskOutcome;
}

const specOf = (t: TaskOutcome) => (t.spec === NOT_SUPPORTED ? undefined : (t.spec as ExecSpec));

describe("run mode: the host checks the command after the runtime failed", () => {
  test("the spec runs RunTimeRun itself (no Node process) and declares every non-zero exit of it", async () => {
    const t = await run("exit 1", "nothere");
    const spec = specOf(t);
    expect(spec?.argv).not.toContain(process.execPath);
    expect(spec?.signals).toBeUndefined();
    expect(spec?.supervise?.missingCommand).toMatchObject({ command: "nothere", cwd: "/" });
    expect(spec?.supervise?.missingCommand?.exitCodes).toEqual(Array.from({ length: 255 }, (_, i) => i + 1));
  });

  test("a SIGTERM to the task group reaches the runtime once; its exit then is 127 for a missing command, its own for an existing one", async () => {
    const traps = "trap 'echo term; exit 7' TERM; echo ready; while :; do sleep 0.1; done";
    const stop: Partial<HostOptions> = { signal: "SIGTERM", signalWhen: (o) => o.stdout.includes("ready") };
    const [missing, there] = await Promise.all([run(traps, "nothere", stop), run(traps, "true", stop)]);
    for (const t of [missing, there]) expect(t.stdout.match(/term/g)).toEqual(["term"]);
    // The shell may say its `sleep` was "Terminated" (the signal reached the group): the host's line comes last.
    expect(missing).toMatchObject({ code: 127, signal: null });
    expect(missing.stderr.endsWith(NOT_FOUND)).toBe(true);
    expect(there).toMatchObject({ code: 7, signal: null });
    expect(there.stderr).not.toContain("in the container");
  });

  test("a runtime killed by a signal keeps the signal, even for a missing command", async () => {
    const t = await run("kill -s KILL $$", "nothere");
    expect(t).toMatchObject({ code: null, signal: "SIGKILL", stderr: "" });
  });

  test("a failure becomes 127 only when config.json has no such command; success and an existing command keep theirs", async () => {
    const [failed, succeeded, exists, withHooks] = await Promise.all([
      run("exit 1", "nothere"),
      run("exit 0", "nothere"),
      run("exit 1", "true"),
      run("exit 1", "nothere", { container: { value: hooked } }),
    ]);
    expect(failed).toMatchObject({ code: 127, stderr: NOT_FOUND });
    expect(succeeded).toMatchObject({ code: 0, stderr: "" });
    expect(exists).toMatchObject({ code: 1, stderr: "" });
    // A hook may create the command before the task starts: no check at all.
    expect(withHooks).toMatchObject({ code: 1, stderr: "" });
    expect(specOf(withHooks)?.supervise).toBeUndefined();
  });
});
