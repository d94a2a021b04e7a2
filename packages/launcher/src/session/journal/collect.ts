import { type Logger, type NodeConf, type RuntimeRegistry, messageOf } from "@jobrt/core";
import { isSameProcess } from "../../processidentity.js";
import {
  type JournalEntry,
  claimEntry,
  listEntries,
  recordedForker,
  recordedPids,
  removeEntry,
  setAsideEntry,
  unclaimEntry,
} from "./journalgc.js";
import { removeForkerCgroup } from "../forker/forkercgroup.js";
import { trackerFromRecord } from "../proctrack/proctrack.js";
import type { Spool } from "./spool.js";
import { holdForTest } from "./testhold.js";
import { collectsFor, isForeign, mayKill, realUid } from "./userjournals.js";

export interface CollectOptions {
  /** Only steps of this job (`jobrt gc --job`, a Slurm Epilog). */
  jobId?: number;
  /** Only the step whose jobrt had this pid (`jobrt gc --pid`, run by the task forker of a jobrt that died). */
  hostPid?: number;
  log: Logger;
}

/** What `jobrt gc` did for one dead step. */
export interface Collected {
  jobId: number;
  stepId: number;
  dir: string;
  /** Task process groups killed (with a cgroup, everything in it is killed besides). */
  killed: number;
  cleaned: string[];
  /** Failures: the entry is kept for another try, or set aside (`setAsideAs`). */
  errors: string[];
  /** Where an entry that can never be collected was set aside (docs/reliability.md, "Crash recovery"). */
  setAsideAs?: string;
  /** The line that reports a failure, when there was one. */
  report?: string;
}

/** Whether the entry's host (the jobrt that runs the step) still runs: gc leaves such an entry alone. */
export function hostAlive(entry: JournalEntry): boolean {
  if (entry.staleClaim) return false;
  const host = entry.host;
  // No host file yet: a claim being written right now. Leave it alone.
  if (!host) return true;
  return isSameProcess(host.pid, host.start, host.boot);
}

/**
 * A forker that outlived its jobrt (stopped by a task, so it neither saw jobrt die nor reaped its
 * tasks) is SIGKILLed: only the very process recorded (pid, start time) with the recorded uid, a
 * foreign journal's user's own. Not the forker that runs this gc after its jobrt died.
 */
function killForker(claimed: string, spool: Spool, boot: string): void {
  const forker = recordedForker(spool, claimed);
  if (!forker) return;
  const { pid, start, uid } = forker;
  if (pid === process.ppid || !isSameProcess(pid, start, boot) || realUid(pid) !== uid || !mayKill(spool, pid)) return;
  try {
    process.kill(pid, "SIGKILL");
  } catch {
    // already gone
  }
}

/** Kills what a dead step left running: its cgroup (killed, waited for, removed), its task groups. */
async function killLeftovers(claimed: string, entry: JournalEntry, result: Collected, spool: Spool): Promise<void> {
  let killed = 0;
  const boot = entry.host?.boot ?? "";
  for (const { pid, start } of recordedPids(spool, claimed)) {
    if (!isSameProcess(pid, start, boot) || !mayKill(spool, pid)) continue;
    try {
      process.kill(-pid, "SIGKILL");
      killed++;
    } catch {
      // the group is already gone
    }
  }
  killForker(claimed, spool, boot);
  // The cgroup holds the rest: tasks not yet recorded, daemons that left their task's group. A
  // user's journal could name any cgroup: root does not use it (userjournals.ts).
  // A record of a jobrt before process tracking has no `proctrack`: its tasks' groups are all there is.
  const proctrack = entry.record?.proctrack;
  const tracker = proctrack && !isForeign(spool) ? trackerFromRecord(proctrack) : undefined;
  // A task counts once, whether found by its recorded pid or only in its cgroup.
  result.killed = Math.max(killed, tracker?.busyTasks() ?? 0);
  if (!tracker) return;
  tracker.killAll();
  if (!(await tracker.waitEmpty(5000)))
    result.errors.push(`processes in ${entry.record?.proctrack.path} survived SIGKILL`);
  // A killed process that is not yet reaped (a zombie whose new parent is slow, e.g. a cut-short
  // create's `runc init` under load) still pins its v1 cgroup, though waitEmpty no longer counts it.
  let left = tracker.release();
  for (const end = Date.now() + 2000; left.length > 0 && Date.now() < end; left = tracker.release())
    await new Promise((r) => setTimeout(r, 50));
  if (left.length > 0) result.errors.push(`cannot remove cgroup ${left.join(", ")}`);
}

/**
 * How long root's gc gives one job user's journal, every entry's kills and runtime cleanup
 * included: past it a late entry is set aside and reported, so no record a user wrote can hold up
 * the Slurm Epilog for longer, however many entries the user planted (docs/reliability.md, "Threat
 * model"). The runtime's own time-outs come from trusted config; this bound holds whatever they are.
 */
const FOREIGN_JOURNAL_BOUND_MS = 30_000;

/** A user's entries are collected side by side, at most this many at once (each may spawn runc). */
const FOREIGN_CONCURRENCY = 8;

/** A record file that can never be read (a FIFO, a symlink, too big): retrying cannot help. */
const UNREADABLE = new Set(["ENOTREG", "EFBIG", "ELOOP"]);

/**
 * Kills what is left and runs each component's runtime cleanup; failures go to `result.errors`.
 * True when a record file can never be read, so that trying again cannot help.
 */
async function cleanUp(
  claimed: string,
  entry: JournalEntry,
  registry: RuntimeRegistry,
  node: NodeConf,
  spool: Spool,
  result: Collected,
): Promise<boolean> {
  let unreadable = false;
  try {
    await killLeftovers(claimed, entry, result, spool);
  } catch (error) {
    // A malformed record must not stop gc (nor the run whose pre-run gc meets it): kept for a look.
    result.errors.push(`cannot kill what the step left: ${messageOf(error)}`);
    unreadable = UNREADABLE.has((error as NodeJS.ErrnoException).code ?? "");
  }
  const stepNode: NodeConf = { ...node, nodeName: entry.record?.nodeName ?? node.nodeName };
  for (const [i, record] of (entry.record?.components ?? []).entries()) {
    try {
      const index = await registry.load(record.runtime || undefined, "node");
      await registry.cleanup(index, {
        node: stepNode,
        step: record,
        state: entry.record?.stepStates?.[i],
        afterCrash: true,
      });
      result.cleaned.push(record.runtime);
    } catch (error) {
      result.errors.push(messageOf(error));
    }
  }
  // Last: the forker's own gc leaves the forker's cgroup to remove it. A user's journal could name any cgroup: root does not use it.
  const forker = entry.record?.proctrack?.forker;
  const forkerLeft = forker && !isForeign(spool) ? removeForkerCgroup(forker) : undefined;
  if (forkerLeft) result.errors.push(forkerLeft);
  return unreadable;
}

/** Resolves with `work`'s value, or with `late` once `ms` have passed. */
function within<T, L>(work: Promise<T>, ms: number, late: L): Promise<T | L> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<L>((resolve) => {
    timer = setTimeout(() => resolve(late), ms);
  });
  return Promise.race([work, bound]).finally(() => clearTimeout(timer));
}

/**
 * Cleans up one dead step as its host would have: kill what is left, run each component's runtime
 * cleanup with the journaled StepRecord and step state under the node name it ran with, remove
 * the entry. A failed entry is given back for another try, or set aside when retrying cannot help.
 */
async function collectEntry(
  entry: JournalEntry,
  registry: RuntimeRegistry,
  node: NodeConf,
  spool: Spool,
  deadline?: number,
): Promise<Collected | undefined> {
  const claimed = claimEntry(spool, entry);
  if (!claimed) return undefined;
  const result: Collected = {
    jobId: entry.jobId,
    stepId: entry.stepId,
    dir: entry.dir,
    killed: 0,
    cleaned: [],
    errors: [],
  };
  const work = cleanUp(claimed, entry, registry, node, spool, result);
  const outcome = deadline !== undefined ? await within(work, deadline - Date.now(), "late" as const) : await work;
  if (outcome === "late")
    result.errors.push(`not done within ${FOREIGN_JOURNAL_BOUND_MS / 1000} s (the bound on a job user's journal)`);
  finishEntry(spool, claimed, result, outcome !== false);
  return result;
}

/**
 * Removes a collected entry; gives a failed one back, or sets it aside when `hopeless`. A failed
 * entry's report says which of the two became of it.
 */
function finishEntry(spool: Spool, claimed: string, result: Collected, hopeless: boolean): void {
  let setAside = hopeless;
  if (result.errors.length === 0) {
    holdForTest();
    const left = removeEntry(spool, claimed);
    if (left.length === 0) return;
    // Half removed, or not removable at all (a mount, a dir the user swapped): not for a retry.
    result.errors.push(`cannot remove ${claimed}: ${left.join("; ")}`);
    setAside = true;
  }
  let kept: string;
  try {
    if (setAside) {
      result.setAsideAs = setAsideEntry(spool, claimed);
      kept = `set ${result.dir} aside as ${result.setAsideAs} (not tried again)`;
    } else {
      unclaimEntry(spool, claimed);
      kept = `kept ${result.dir} for another try`;
    }
  } catch (error) {
    kept = `left ${claimed} (cannot rename it: ${messageOf(error)})`;
  }
  result.report = `gc: step ${result.jobId}.${result.stepId}: cleanup failed, ${kept}: ${result.errors.join("; ")}`;
}

/** Collects one entry; whatever it throws becomes its result's error. */
async function collectContained(
  entry: JournalEntry,
  registry: RuntimeRegistry,
  node: NodeConf,
  spool: Spool,
  deadline?: number,
): Promise<Collected | undefined> {
  try {
    return await collectEntry(entry, registry, node, spool, deadline);
  } catch (error) {
    const errors = [messageOf(error)];
    return {
      jobId: entry.jobId,
      stepId: entry.stepId,
      dir: entry.dir,
      killed: 0,
      cleaned: [],
      errors,
      report: `gc: step ${entry.jobId}.${entry.stepId}: cleanup failed: ${errors[0]}`,
    };
  }
}

/**
 * A job user's entries, collected side by side under one deadline: a user who planted many
 * entries that never finish costs the Epilog one bound, not one per entry. Entries not begun by
 * the deadline are left for a later gc, unclaimed.
 */
async function collectForeign(
  entries: JournalEntry[],
  registry: RuntimeRegistry,
  node: NodeConf,
  spool: Spool,
  log: Logger,
): Promise<(Collected | undefined)[]> {
  const deadline = Date.now() + FOREIGN_JOURNAL_BOUND_MS;
  const results: (Collected | undefined)[] = [];
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < entries.length; i = next++) {
      if (Date.now() >= deadline) {
        log(
          "warn",
          `gc: step ${entries[i]!.jobId}.${entries[i]!.stepId}: not begun within ${FOREIGN_JOURNAL_BOUND_MS / 1000} s (the bound on a job user's journal); left for a later gc`,
        );
        continue;
      }
      results[i] = await collectContained(entries[i]!, registry, node, spool, deadline);
    }
  };
  await Promise.all(Array.from({ length: Math.min(FOREIGN_CONCURRENCY, entries.length) }, worker));
  return results;
}

/**
 * Every step in this user's journal whose host is gone (SIGKILL, OOM, power loss), or whose
 * collector died half-way, is cleaned up. Live steps are never touched. One entry's failure,
 * whatever it is, is reported in its result and never stops the others.
 */
export async function collectOrphans(
  spool: Spool,
  registry: RuntimeRegistry,
  node: NodeConf,
  options: CollectOptions,
): Promise<Collected[]> {
  const entries = listEntries(spool, options.jobId).filter(
    (entry) =>
      (options.hostPid === undefined || entry.host?.pid === options.hostPid) &&
      !hostAlive(entry) &&
      collectsFor(spool, entry.record),
  );
  const results: (Collected | undefined)[] = [];
  if (isForeign(spool)) results.push(...(await collectForeign(entries, registry, node, spool, options.log)));
  else for (const entry of entries) results.push(await collectContained(entry, registry, node, spool));
  const out: Collected[] = [];
  for (const result of results) {
    if (!result) continue;
    out.push(result);
    if (result.report !== undefined) options.log("warn", result.report);
    else
      options.log(
        "info",
        `gc: step ${result.jobId}.${result.stepId} of a jobrt that died was cleaned up (${result.cleaned.join(", ") || "no runtime"})`,
      );
  }
  return out;
}
