import { lstatSync, readFileSync, readdirSync, realpathSync } from "node:fs";
import { join } from "node:path";
import type { FileUser } from "@jobrt/host-services";
import type { JournalRecord } from "./journal.js";
import type { Spool } from "./spool.js";
import { userHasGroup } from "../../users.js";

/**
 * Root's `jobrt gc` also collects what job users' `jobrt exec` left: the Slurm Epilog runs
 * `jobrt gc --job $SLURM_JOB_ID` as root after Slurm SIGKILLed the job user's jobrt
 * (docs/slurm.md, "Cleanup when Slurm kills jobrt"). A user's journal is that user's to write, so
 * root trusts none of it beyond what the user could do itself: see `collectsFor` and `mayKill`.
 */

/**
 * The journals of job users in a shared SpoolDir (`jobs.<uid>`), for root only. Each must be a
 * real directory of that uid, mode 0700, as `openSpool` made it; anything else is skipped.
 */
export function userSpools(spoolDir: string): Spool[] {
  if ((process.getuid?.() ?? 0) !== 0) return [];
  let real: string;
  let names: string[];
  try {
    real = realpathSync(spoolDir);
    names = readdirSync(real);
  } catch {
    return [];
  }
  const out: Spool[] = [];
  for (const name of names) {
    const uid = Number(/^jobs\.(\d+)$/.exec(name)?.[1] ?? Number.NaN);
    if (!Number.isSafeInteger(uid) || uid === 0) continue;
    const jobsDir = join(real, name);
    try {
      const st = lstatSync(jobsDir);
      if (st.isDirectory() && st.uid === uid && (st.mode & 0o077) === 0)
        out.push({ spoolDir: real, jobsDir, uid, gid: st.gid });
    } catch {
      // gone while we looked
    }
  }
  return out;
}

/** True when this process collects `spool` on behalf of another user (root on a user's journal). */
export function isForeign(spool: Spool): boolean {
  return spool.uid !== (process.getuid?.() ?? 0);
}

/**
 * Whose rights every file operation on `spool`'s journal runs with: the journal user's on a
 * foreign journal (the user controls every name in it, and may swap any of them for a symlink at
 * any moment), undefined (this process's own) otherwise. journal.ts applies it to each call gc makes.
 */
export function journalOwner(spool: Spool): FileUser | undefined {
  return isForeign(spool) ? { uid: spool.uid, gid: spool.gid ?? spool.uid } : undefined;
}

/**
 * A record from a foreign journal is collected only when every component runs as the journal's
 * user, with the journal's group or one the user is in: the runtime cleanup then acts with those
 * ids (runtime/oci runs its commands as the record's uid and gid), so a record naming root, root's
 * group or anyone else cannot make root act for them.
 */
export function collectsFor(spool: Spool, record: JournalRecord | undefined): boolean {
  if (!isForeign(spool)) return true;
  // The record is the user's JSON: any shape at all (junk is collected by nobody but its user).
  const components: unknown = record?.components;
  const groupOk = (gid: unknown) => typeof gid === "number" && (gid === spool.gid || userHasGroup(spool.uid, gid));
  return (
    Array.isArray(components) &&
    components.length > 0 &&
    components.every((c) => c?.uid === spool.uid && groupOk(c.gid))
  );
}

/** The real uid of process `pid`, undefined when it is gone. */
export function realUid(pid: number): number | undefined {
  try {
    const line = readFileSync(`/proc/${pid}/status`, "utf8")
      .split("\n")
      .find((l) => l.startsWith("Uid:"));
    const uid = line?.split(/\s+/)[1];
    return uid === undefined ? undefined : Number(uid);
  } catch {
    return undefined;
  }
}

/** Whether gc may kill the process group led by `pid` for `spool`: a foreign journal's user's only. */
export function mayKill(spool: Spool, pid: number): boolean {
  return !isForeign(spool) || realUid(pid) === spool.uid;
}
