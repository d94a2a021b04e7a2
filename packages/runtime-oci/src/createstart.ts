/**
 * A create/start task: the host starts createstart.pl (beside this module) in its place, already
 * as the job user. That one perl program runs the whole lifecycle (RunTimeCreate through the
 * watchdog, the wait for `created`, RunTimeStart, the wait for the container init's exit as its
 * subreaper, teardown, signal forwarding, every failure's message and status), so no node process
 * starts per task (docs/performance.md, oci-modes) and no path is written twice
 * (docs/decisions.md, "One language per path"). Node has no prctl or fork: that is why it is
 * perl, which Debian's perl-base (Essential) always has.
 */
import { syscallNumbers } from "@jobrt/host-services";
import { constants } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { WatchdogSpec } from "./watchdog.js";

/** Marker the host writes for `%p` in the commands createstart.pl runs after the pid is known. */
export const PID_PLACEHOLDER = "\u0001jobrt-pid\u0001";

/** What createstart.pl runs besides the watchdog's: commands expanded, PID_PLACEHOLDER for `%p`. */
export interface CreateStartSpec {
  start: string;
  /** Why RunTimeStart cannot be expanded (the task then fails after create), or "". */
  startProblem: string;
  query: string;
  /** Empty when it cannot be expanded (the teardown then does not run it). */
  kill: string;
  delete: string;
  timeouts: { create: number; start: number; query: number; kill: number; delete: number };
  graceMs: number;
  verbose: boolean;
}

/**
 * The program beside this module: src/ and dist/ (the build copies it there). A file, not a `-e`
 * string: its own linter and tests see it.
 */
const HERE = dirname(fileURLToPath(import.meta.url));
const CREATESTART_PROGRAM = join(HERE, "createstart.pl");
/** The missing-command look after a failed create, from either src/ (tests) or dist/. */
const MISSING_COMMAND_PROGRAM = fileURLToPath(new URL("../dist/missingcommandmain.js", import.meta.url));

const SIGUSR1: Partial<Record<string, number>> = {
  x64: 10,
  arm64: 10,
  riscv64: 10,
  loong64: 10,
  ppc64: 10,
  s390x: 10,
  ia32: 10,
  arm: 10,
};

/**
 * The task's argv (createstart.pl's header says what each argument is). Undefined without perl
 * or on an architecture whose prctl number is not listed.
 */
export function createStartArgv(
  perl: string | undefined,
  watchdog: WatchdogSpec,
  spec: CreateStartSpec,
  arch: string = process.arch,
): string[] | undefined {
  const nr = syscallNumbers(["prctl"], arch)?.[0];
  const usr1 = SIGUSR1[arch];
  if (perl === undefined || nr === undefined || usr1 === undefined) return undefined;
  const t = spec.timeouts;
  return [
    perl,
    "-f",
    "--",
    CREATESTART_PROGRAM,
    String(nr),
    String(usr1),
    String(constants.O_NONBLOCK),
    String(constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW),
    watchdog.taskDir,
    watchdog.create,
    watchdog.kill,
    watchdog.delete,
    spec.start,
    spec.query,
    spec.kill,
    spec.delete,
    spec.startProblem,
    ...[t.create, t.start, t.query, t.kill, t.delete, spec.graceMs].map(String),
    PID_PLACEHOLDER,
    spec.verbose ? "1" : "0",
    process.execPath,
    MISSING_COMMAND_PROGRAM,
    watchdog.taskDir,
  ];
}
