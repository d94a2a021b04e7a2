/**
 * The run-mode guard for a task whose command the host found missing in the container before it
 * started (plugin.ts, run): it runs the RunTimeRun command as its child and exits with its status,
 * except that the runtime's own failure (a non-zero exit, not a signal) becomes 127/126 when the
 * command is still missing on a second look (missingcommand.ts). Only such tasks get a guard, so
 * every other task keeps the runtime as its own process, exactly as before.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { constants } from "node:os";
import { fileURLToPath } from "node:url";
import { missingCommandIn } from "./missingcommand.js";

/** The guard program, from either src/ (tests) or dist/. */
export const GUARD_PROGRAM = fileURLToPath(new URL("../dist/missingguardmain.js", import.meta.url));

/** Exit status when the runtime itself cannot be started (as createstart.pl has it for create/start). */
const RUNTIME_FAILURE = 125;

const STOP_SIGNALS = ["SIGTERM", "SIGINT", "SIGHUP"] as const;

/**
 * Runs argv with the task's stdio and exits as it did, or with the missing-command status.
 * `delivery` is the ExecSpec's: with "group" the runtime gets the host's stop signals itself, with
 * "leader" only the guard does, and passes them on.
 */
export function guard(taskDir: string, delivery: string, argv: string[]): void {
  const [program, ...args] = argv;
  if (program === undefined) {
    process.stderr.write("jobrt-oci: missing-command guard: no command\n");
    process.exit(RUNTIME_FAILURE);
  }
  // The guard stays to report how the runtime ended (its handlers are in place before the
  // runtime starts); the runtime forwards each signal it gets to the container once.
  let child: ChildProcess | undefined;
  const onStop = (sig: NodeJS.Signals) => {
    if (delivery !== "leader") return;
    try {
      child?.kill(sig);
    } catch {
      // already gone
    }
  };
  for (const sig of STOP_SIGNALS) process.on(sig, onStop);
  child = spawn(program, args, { stdio: "inherit" });
  child.on("error", (error) => {
    process.stderr.write(`jobrt-oci: cannot run ${program}: ${error.message}\n`);
    process.exit(RUNTIME_FAILURE);
  });
  child.on("exit", (code, signal) => {
    if (signal !== null) {
      for (const sig of STOP_SIGNALS) process.removeListener(sig, onStop);
      process.kill(process.pid, signal);
      process.exit(128 + (constants.signals[signal] ?? 0));
    }
    const missing = code !== 0 ? missingCommandIn(taskDir) : undefined;
    if (missing) process.stderr.write(`${missing.message}\n`);
    process.exit(missing?.status ?? code ?? RUNTIME_FAILURE);
  });
}
