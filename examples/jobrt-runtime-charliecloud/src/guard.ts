/**
 * The guard for a task whose command the host found missing in the image before it started
 * (plugin.ts, run): it runs ch-run as its child and exits with its status, except that ch-run's
 * own failure (a non-zero exit, not a signal) becomes 127/126 when the command is still missing on
 * a second look (missingcommand.ts). Only such tasks get a guard: every other task is ch-run,
 * exec'ed into its command, exactly as before.
 */
import { spawn } from "node:child_process";
import { constants } from "node:os";
import { fileURLToPath } from "node:url";
import { type LookupSpec, lookup, missingStatus } from "./missingcommand.js";

/** The guard program, from either src/ (tests) or dist/. */
export const GUARD_PROGRAM = fileURLToPath(new URL("../dist/guardmain.js", import.meta.url));

const STOP_SIGNALS = ["SIGTERM", "SIGINT", "SIGHUP"] as const;

/** Runs argv with the task's stdio and exits as it did, or with the missing-command status. */
export function guard(spec: LookupSpec, argv: string[]): void {
  const [program, ...args] = argv;
  if (program === undefined) {
    process.stderr.write("charliecloud: missing-command guard: no command\n");
    process.exit(1);
  }
  // The host signals the task's process group: ch-run gets each signal itself; the guard stays
  // to report how it ended.
  const ignore = () => {};
  for (const sig of STOP_SIGNALS) process.on(sig, ignore);
  const child = spawn(program, args, { stdio: "inherit" });
  child.on("error", (error) => {
    process.stderr.write(`charliecloud: cannot run ${program}: ${error.message}\n`);
    process.exit(1);
  });
  child.on("exit", (code, signal) => {
    if (signal !== null) {
      for (const sig of STOP_SIGNALS) process.removeListener(sig, ignore);
      process.kill(process.pid, signal);
      process.exit(128 + (constants.signals[signal] ?? 0));
    }
    const missing = code !== 0 ? missingStatus(lookup(spec), spec.command) : undefined;
    if (missing) process.stderr.write(`${missing.message}\n`);
    process.exit(missing?.status ?? code ?? 1);
  });
}
