import { type Logger, type NodeConf, type RuntimeRegistry, messageOf } from "@jobrt/core";
import { isSameProcess } from "../proc.js";
import { type JournalEntry, claimEntry, listEntries, recordedPids, removeEntry, unclaimEntry } from "./journal.js";
import { trackerFromRecord } from "./proctrack.js";
import type { Spool } from "./spool.js";
import { holdForTest } from "./testhold.js";
import { collectsFor, isForeign, mayKill } from "./userjournals.js";

export interface CollectOptions {
  /** Only steps of this job (`jobrt gc --job`, a Slurm Epilog). */
  jobId?: number;
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
  /** Failures: the entry is kept for another try. */
  errors: string[];
}

function hostAlive(entry: JournalEntry): boolean {
  if (entry.staleClaim) return false;
  const host = entry.host;
  // No host file yet: a claim being written right now. Leave it alone.
  if (!host) return true;
  return isSameProcess(host.pid, host.start, host.boot);
}

/** Kills what a dead step left running: its cgroup (killed, waited for, removed), its task groups. */
async function killLeftovers(claimed: string, entry: JournalEntry, result: Collected, spool: Spool): Promise<void> {
  let killed = 0;
  const boot = entry.host?.boot ?? "";
  for (const { pid, start } of recordedPids(claimed)) {
    if (!isSameProcess(pid, start, boot) || !mayKill(spool, pid)) continue;
    try {
      process.kill(-pid, "SIGKILL");
      killed++;
    } catch {
      // the group is already gone
    }
  }
  // The cgroup holds the rest: tasks not yet recorded, daemons that left their task's group. A
  // user's journal could name any cgroup: root does not use it (userjournals.ts).
  // A record of a jobrt before process tracking has no `proctrack`: its tasks' groups are all there is.
  const proctrack = entry.record?.proctrack;
  const tracker = proctrack && !isForeign(spool) ? trackerFromRecord(proctrack) : undefined;
  // A task counts once, whether found by its recorded pid or only in its cgroup.
  result.killed = Math.max(killed, tracker?.busyTasks() ?? 0);
  if (!tracker) return;
  tracker.killAll();
  if (!(await tracker.waitEmpty(5000))) result.errors.push(`processes in ${entry.record?.proctrack.path} survived SIGKILL`);
  // A killed process that is not yet reaped (a zombie whose new parent is slow, e.g. a cut-short
  // create's `runc init` under load) still pins its v1 cgroup, though waitEmpty no longer counts it.
  let left = tracker.release();
  for (const end = Date.now() + 2000; left.length > 0 && Date.now() < end; left = tracker.release()) await new Promise((r) => setTimeout(r, 50));
  if (left.length > 0) result.errors.push(`cannot remove cgroup ${left.join(", ")}`);
}

/**
 * Cleans up one dead step as its host would have: kill what is left, run each component's runtime
 * cleanup with the journaled StepRecord and step state under the node name it ran with, remove
 * the entry.
 */
async function collectEntry(entry: JournalEntry, registry: RuntimeRegistry, node: NodeConf, spool: Spool): Promise<Collected | undefined> {
  const claimed = claimEntry(entry);
  if (!claimed) return undefined;
  const result: Collected = { jobId: entry.jobId, stepId: entry.stepId, dir: entry.dir, killed: 0, cleaned: [], errors: [] };
  try {
    await killLeftovers(claimed, entry, result, spool);
  } catch (error) {
    // A malformed record must not stop gc (nor the run whose pre-run gc meets it): kept for a look.
    result.errors.push(`cannot kill what the step left: ${messageOf(error)}`);
  }
  const stepNode: NodeConf = { ...node, nodeName: entry.record?.nodeName ?? node.nodeName };
  for (const [i, record] of (entry.record?.components ?? []).entries()) {
    try {
      const index = await registry.load(record.runtime || undefined, "node");
      await registry.cleanup(index, { node: stepNode, step: record, state: entry.record?.stepStates?.[i], afterCrash: true });
      result.cleaned.push(record.runtime);
    } catch (error) {
      result.errors.push(messageOf(error));
    }
  }
  if (result.errors.length > 0) unclaimEntry(claimed);
  else {
    holdForTest();
    removeEntry(claimed);
  }
  return result;
}

/**
 * Every step in this user's journal whose host is gone (SIGKILL, OOM, power loss), or whose
 * collector died half-way, is cleaned up. Live steps are never touched.
 */
export async function collectOrphans(spool: Spool, registry: RuntimeRegistry, node: NodeConf, options: CollectOptions): Promise<Collected[]> {
  const out: Collected[] = [];
  for (const entry of listEntries(spool, options.jobId)) {
    if (hostAlive(entry) || !collectsFor(spool, entry.record)) continue;
    const result = await collectEntry(entry, registry, node, spool);
    if (!result) continue;
    out.push(result);
    const what = `step ${result.jobId}.${result.stepId}`;
    if (result.errors.length > 0) options.log("warn", `gc: ${what}: cleanup failed, kept ${result.dir} for another try: ${result.errors.join("; ")}`);
    else options.log("info", `gc: ${what} of a jobrt that died was cleaned up (${result.cleaned.join(", ") || "no runtime"})`);
  }
  return out;
}
