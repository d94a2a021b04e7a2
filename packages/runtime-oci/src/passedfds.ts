import { jobrtError } from "@jobrt/core";
import type { OciConf } from "./conf.js";

/**
 * The host passes a task descriptors at 3, 4, ... (`task.passedFds`, the "pass-fds" capability:
 * Slurm's PMI-2 socket, docs/mpi.md) and runc carries them into the container at the same numbers
 * with `--preserve-fds N`. Only the embedded default's argv can take that flag: a site's
 * RunTimeRun or RunTimeCreate is its own shell command, which jobrt does not rewrite, and one that
 * always passed fds would fail every step without them. Such a conf is refused in one line
 * (cannotPass), before its task's files are written.
 */
export function withPassedFds(argv: string[], count: number | undefined): string[] {
  if (!count) return argv;
  // The embedded default's argv: runc, its global options (no bare "run" among them), "run", ...
  const run = argv.indexOf("run", 1);
  return [...argv.slice(0, run + 1), "--preserve-fds", String(count), ...argv.slice(run + 1)];
}

/** The one line for a conf whose runtime command cannot carry the passed descriptors. */
export function cannotPass(conf: OciConf) {
  const key = conf.mode === "run" ? "RunTimeRun" : "RunTimeCreate";
  return jobrtError("ERR_MPI_WIREUP", {
    problem: `runtime oci cannot pass Slurm's PMI-2 socket into the container: ${key} of ${conf.file} is a site command jobrt cannot add runc's --preserve-fds to (the embedded runc default, with no oci.conf, can); use srun --mpi=pmix`,
  });
}
