import type { StepRecord } from "@jobrt/core";
import type { BundleConfig } from "./bundle.js";
import type { OciConf } from "./conf.js";
import type { FileUser } from "@jobrt/host-services";
import type { PatternValues } from "./pattern.js";
import type { OciStepState, StepState } from "./ocistepstate.js";

/**
 * Cleanup after a crash works from the journal, and root's `jobrt gc` (the Slurm Epilog) also
 * collects job users' journals, which their users may edit by hand (docs/reliability.md, "Whose
 * records"). The host hands runtime/oci only records whose uid is the journal's owner, so the
 * identity is the user's; everything else in such a record, the step state included, is the
 * user's to write. This file is the one place that decides what of it cleanup may use.
 */

/** What cleanup after a crash takes from the host's own configuration instead of the record. */
export interface TrustedSources {
  /** oci.conf as it is now, resolved for the record's step (resolveConf). */
  conf(): OciConf;
  /** The control-command time-outs of this process (commandTimeouts). */
  timeouts(): OciStepState["timeouts"];
  /** The job user's identity, from the StepRecord's uid/gid. */
  identity: FileUser | undefined;
  /** The node name cleanup runs under (an input of %n). */
  nodeName: string;
  /** The pattern values and step dir setup works out for this conf, bundle and rootfs (stepPlace). */
  place(conf: OciConf, bundle: string, rootfs: string): { base: PatternValues; stepDir: string };
  /** The state as journaled, for a record only this process's own user could have written. */
  journaled(): StepState | undefined;
}

const KINDS = new Set(["normal", "batch", "interactive", "extern"]);
const isId = (n: unknown) => Number.isSafeInteger(n) && (n as number) >= 0;
/** A name that becomes one path component (%u, %n): no slash, no NUL, not "." or "..". */
const isName = (s: unknown) => typeof s === "string" && s !== "" && s !== "." && s !== ".." && !/[/\0]/.test(s);

/**
 * Why a journaled record cannot be one a jobrt wrote, or undefined. Job, step and task ids, the
 * step kind, the user and node names become path components (the step dir, task dirs, the image
 * pin dir that root empties): a record that makes them climb out (`..`, `/`) is not acted on.
 */
function recordProblem(step: StepRecord, nodeName: string): string | undefined {
  if (!isId(step.jobId) || !isId(step.stepId))
    return `job and step ids ${JSON.stringify([step.jobId, step.stepId])} are not numbers`;
  if (!KINDS.has(step.kind)) return `step kind ${JSON.stringify(step.kind)} is unknown`;
  if (step.het !== undefined && !isId(step.het?.component))
    return `het component ${JSON.stringify(step.het?.component)} is not a number`;
  if (!Array.isArray(step.tasks) || !step.tasks.every((t) => isId(t?.localId)))
    return "a task's local id is not a number";
  if (!isName(step.user)) return `user name ${JSON.stringify(step.user)} is not a name`;
  if (!isName(nodeName)) return `node name ${JSON.stringify(nodeName)} is not a name`;
  return undefined;
}

/** Was the record written by this process's own user (root's own journal, a user's own gc)? */
function ownRecord(step: StepRecord): boolean {
  return step.uid === (process.getuid?.() ?? -1);
}

const text = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);

/**
 * The state cleanup works from after a crash. A record of this process's own user is as trusted
 * as the process: its state as journaled (oci.conf as setup read it, so a later change of the
 * file cannot hide the containers). Any other record's state gives only what cannot be turned
 * against the host: the bundle and rootfs (pattern values of commands that run as the job user),
 * the bundle's config (only its cgroupsPath is read, which leaves dirs alone) and the recorded
 * host cgroups (searched only inside the cgroup mounts, dirs owned by the user, removed as the
 * user: cgroups.ts). oci.conf, its commands, the time-outs, the step dir and every other pattern
 * value are worked out again from the host's configuration; the image entry is not used.
 */
export function trustedCrashState(
  json: OciStepState | undefined,
  step: StepRecord,
  trusted: TrustedSources,
): StepState | undefined {
  if (!json || !step.container) return undefined;
  const problem = recordProblem(step, trusted.nodeName);
  if (problem) throw new Error(`the step record is not one jobrt wrote (${problem}); not acting on it`);
  if (ownRecord(step)) return trusted.journaled();
  const conf = trusted.conf();
  const bundle = text(json.bundle) ?? "";
  const rootfs = text(json.rootfs) ?? bundle;
  const { base, stepDir } = trusted.place(conf, bundle, rootfs);
  const config = json.bundleConfig?.config;
  // Cleanup reads only config.linux.cgroupsPath (cutShortTask), and only to leave dirs alone.
  const bundleConfig: BundleConfig | undefined =
    config !== null && typeof config === "object" ? { config, rootfs, env: [] } : undefined;
  const hostCgroups = Array.isArray(json.hostCgroups)
    ? json.hostCgroups.filter((d) => typeof d === "string")
    : undefined;
  return {
    conf,
    request: step.container,
    bundle,
    rootfs,
    ...(bundleConfig ? { bundleConfig } : {}),
    mounts: [],
    stepDir,
    base,
    verbose: false,
    timeouts: trusted.timeouts(),
    ...(hostCgroups ? { hostCgroups } : {}),
    ...(trusted.identity ? { identity: trusted.identity } : {}),
  };
}
