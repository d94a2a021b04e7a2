import { type NodeConf, type StepRecord, isJobrtError, messageOf } from "@jobrt/core";
import { type StepJournal, claimExecTask, claimRunStep } from "./journal.js";
import type { StepPlan } from "../sessionoptions.js";
import { type Spool, openSpool } from "./spool.js";

/**
 * The spool a step's journal goes in: `jobrt run` must have one; `jobrt exec` runs as the job user,
 * so a SpoolDir it cannot use means no crash record, not failure.
 */
export function openStepSpool(plan: StepPlan, node: NodeConf): Spool | undefined {
  return plan.mode === "run"
    ? openSpool(node.spoolDir, node.nodeName, { create: true, required: true })
    : tryOpenSpool(plan.record, node);
}

/** The step's journal entry: new ids for `jobrt run`, this task's entry for `jobrt exec` (when it can have one). */
export function claimJournal(spool: Spool | undefined, plan: StepPlan, node: NodeConf): StepJournal | undefined {
  return plan.mode === "run" ? claimRunStep(spool as Spool, plan.jobId) : tryClaimExec(spool, plan.record, node);
}

/** Nothing can clean up after a task without a record, so it says so (docs/slurm.md, SpoolDir). */
function tryOpenSpool(record: StepRecord, node: NodeConf): Spool | undefined {
  try {
    const spool = openSpool(node.spoolDir, node.nodeName);
    if (!spool) {
      const uid = process.getuid?.() ?? 0;
      noRecord(
        node,
        record,
        `SpoolDir ${node.spoolDir} belongs to root and has no place for uid ${uid}'s records: make it mode 1777 like /tmp, or leave SpoolDir unset for one of the user's own (docs/slurm.md)`,
      );
    }
    return spool;
  } catch (error) {
    if (isJobrtError(error, "ERR_SPOOL") && /is in use by host/.test(error.message)) throw error;
    noRecord(node, record, messageOf(error));
    return undefined;
  }
}

function tryClaimExec(spool: Spool | undefined, record: StepRecord, node: NodeConf): StepJournal | undefined {
  for (let attempt = 0; spool; attempt++) {
    try {
      return claimExecTask(spool, record.jobId, record.stepId, record.tasks[0]!.globalId);
    } catch (error) {
      // Another task's jobrt on this node, ending, removes the job's dir and the user's then idle
      // journal dir between our opening the spool and our claim: open it again (made anew) and retry.
      if (attempt >= 4 || ((error as Error).cause as NodeJS.ErrnoException | undefined)?.code !== "ENOENT") {
        noRecord(node, record, messageOf(error));
        return undefined;
      }
      spool = tryOpenSpool(record, node);
    }
  }
  return undefined;
}

/** A warning from the node's first task (one line per node, not one per task); -v shows every task's. */
function noRecord(node: NodeConf, record: StepRecord, why: string): void {
  const first = record.tasks[0]?.localId === 0;
  node.log(
    first ? "warn" : "verbose",
    `no crash record for this task (jobrt gc cannot clean up after it if jobrt dies): ${why}`,
  );
}
