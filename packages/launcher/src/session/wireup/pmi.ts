import { fstatSync } from "node:fs";
import { type JobrtError, type LoadedRuntime, type TaskRecord, jobrtError } from "@jobrt/core";
import type { StdioItem } from "../forker/forker.js";

/** The capability a runtime declares when its task process receives the descriptors the host passes it. */
export const PMI_FD_CAPABILITY = "pmi-fd";

function wireup(problem: string): JobrtError {
  return jobrtError("ERR_MPI_WIREUP", { problem });
}

/**
 * Slurm's PMI-2 socket: `srun --mpi=pmi2` (and PMI-1) leaves each task an open socket whose number
 * is in `PMI_FD`, beside `PMI_RANK`, `PMI_SIZE` and `PMI_JOBID` (docs/mpi.md). A `jobrt exec` task
 * gets it at that very number, so its environment stays as Slurm made it. Undefined when the step
 * has none; an error when `PMI_FD` is set but names no socket, since a task would then start with
 * half its wire-up. Node marks every descriptor it inherits close-on-exec as it starts, so that
 * flag cannot tell Slurm's socket from one of Node's own: the number must be an open socket now,
 * before jobrt has opened any of its own.
 */
export function pmiDescriptor(env: Readonly<Record<string, string>>): number | undefined {
  const fd = pmiNumber(env);
  if (fd === undefined) return undefined;
  let socket: boolean;
  try {
    socket = fstatSync(fd).isSocket();
  } catch {
    throw wireup(`PMI_FD=${fd} names no open descriptor (set by hand, or closed by a wrapper before jobrt?)`);
  }
  if (!socket) throw wireup(`PMI_FD=${fd} is not a socket, so it is not Slurm's PMI-2 connection`);
  return fd;
}

/**
 * The number PMI_FD names, checked only as a number: a joined task's (docs/node-step.md) is a
 * descriptor of its own process, which its forker passes on.
 */
export function pmiNumber(env: Readonly<Record<string, string>>): number | undefined {
  const value = env.PMI_FD;
  if (value === undefined) return undefined;
  const fd = /^\d{1,9}$/.test(value) ? Number(value) : Number.NaN;
  if (!(fd > 2)) throw wireup(`PMI_FD=${JSON.stringify(value)} is not a descriptor number above 2`);
  return fd;
}

/** The capability of a runtime whose task carries descriptors passed at 3, 4, ... into its sandbox (runc --preserve-fds). */
export const PASS_FDS_CAPABILITY = "pass-fds";

/**
 * The capability through which `runtime` gives its tasks the PMI-2 socket (`pmi-fd` first); ERR_MPI_WIREUP,
 * naming both, when it has neither (what `jobrt exec` refuses and `jobrt check` reports).
 */
export function requirePmiCapability(runtime: string, capabilities: readonly string[], fd: number): string {
  for (const c of [PMI_FD_CAPABILITY, PASS_FDS_CAPABILITY]) if (capabilities.includes(c)) return c;
  throw wireup(
    `runtime ${runtime} cannot pass Slurm's PMI-2 socket (PMI_FD=${fd}) into its tasks (no "${PMI_FD_CAPABILITY}" or "${PASS_FDS_CAPABILITY}" capability): use srun --mpi=pmix, or a runtime that has one`,
  );
}

/**
 * Where the task gets the PMI-2 socket: at its own number (`pmi-fd`), or at 3 for a runtime that
 * carries fds from 3 up into its container at the same numbers (`pass-fds`), whose tasks then
 * have `PMI_FD=3` and `passedFds` 1, even when PMI_FD already was 3: the runtime must be told.
 * Refuses a runtime with neither: its tasks would fail inside MPI_Init.
 */
export function placePmiDescriptor(
  runtime: Pick<LoadedRuntime, "name" | "capabilities">,
  fd: number,
  tasks: TaskRecord[],
): number {
  if (requirePmiCapability(runtime.name, runtime.capabilities, fd) === PMI_FD_CAPABILITY) return fd;
  for (const task of tasks) {
    task.env.PMI_FD = "3";
    task.passedFds = 1;
  }
  return 3;
}

/** A task's stdio with `fd` of this process passed to the task as its descriptor `at`. */
export function withDescriptor(items: readonly StdioItem[], fd: number, at: number): StdioItem[] {
  const out = [...items];
  while (out.length < at) out.push("ignore");
  out[at] = fd;
  return out;
}
