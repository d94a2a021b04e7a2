import type { ContainerRequest, StepRecord } from "@jobrt/core";
import type { BundleConfig, Mount } from "./bundle.js";
import type { OciConf } from "./conf.js";
import type { FileUser } from "@jobrt/host-services";
import type { CachedImage } from "@jobrt/images";
import type { PatternValues } from "./pattern.js";

interface RegExpJson {
  source: string;
  flags: string;
}

/** oci.conf as setup read it, in JSON: its two patterns as source and flags. */
export type OciConfJson = Omit<OciConf, "envExclude" | "runTimeEnvExclude"> & {
  envExclude?: RegExpJson;
  runTimeEnvExclude?: RegExpJson;
};

/**
 * What setup works out for a step, as the host journals it and hands it back to every later hook
 * (in every `jobrt exec` process of the step, and in `jobrt gc`). The job user's identity is not
 * in it: it always comes from the StepRecord.
 */
export interface OciStepState {
  conf: OciConfJson;
  bundle: string;
  rootfs: string;
  bundleConfig?: BundleConfig;
  mounts: Mount[];
  stepDir: string;
  base: PatternValues;
  /** The client asked for -vv or more: the supervisor narrates its commands. */
  verbose: boolean;
  timeouts: { create: number; start: number; query: number; kill: number; delete: number };
  /** --container-image: the cached image (each process's own in-use mark is named at cleanup). */
  image?: Omit<CachedImage, "mark">;
  /** The host's own cgroup dir in every mounted hierarchy (cgroups.ts). */
  hostCgroups?: string[];
}

/** A hook's working state: the journaled step state, with the request and identity from the record. */
export interface StepState extends Omit<OciStepState, "conf"> {
  conf: OciConf;
  request: ContainerRequest;
  /** Set when the host is root and the job user is not: file work and commands run as this user. */
  identity?: FileUser;
}

const toJson = (re: RegExp | undefined): RegExpJson | undefined =>
  re ? { source: re.source, flags: re.flags } : undefined;
const fromJson = (re: RegExpJson | undefined): RegExp | undefined => (re ? new RegExp(re.source, re.flags) : undefined);

export function confToJson(conf: OciConf): OciConfJson {
  const { envExclude, runTimeEnvExclude, ...rest } = conf;
  const a = toJson(envExclude);
  const b = toJson(runTimeEnvExclude);
  return { ...rest, ...(a ? { envExclude: a } : {}), ...(b ? { runTimeEnvExclude: b } : {}) };
}

export function confFromJson(json: OciConfJson): OciConf {
  const { envExclude, runTimeEnvExclude, ...rest } = json;
  const a = fromJson(envExclude);
  const b = fromJson(runTimeEnvExclude);
  return { ...rest, ...(a ? { envExclude: a } : {}), ...(b ? { runTimeEnvExclude: b } : {}) };
}

/** The step state setup returns, as JSON (the host journals it). */
export function stateToJson(st: StepState): OciStepState {
  const { conf, request: _request, identity: _identity, ...rest } = st;
  return { ...rest, conf: confToJson(conf) };
}

/** A hook's working state: the journaled step state, with the request and identity from the record. */
export function stateFromJson(json: OciStepState | undefined, step: StepRecord): StepState | undefined {
  if (!json || !step.container) return undefined;
  const identity = identityFor(step);
  return { ...json, conf: confFromJson(json.conf), request: step.container, ...(identity ? { identity } : {}) };
}

/** The job user's identity when file work and commands must drop to it: the host is root, the user is not. */
export function identityFor(step: StepRecord): FileUser | undefined {
  const root = (process.getuid?.() ?? -1) === 0;
  return root && (step.uid !== 0 || step.gid !== 0) ? { uid: step.uid, gid: step.gid } : undefined;
}
