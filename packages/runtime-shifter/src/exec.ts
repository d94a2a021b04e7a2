import type { ExecSpec, StepRecord, TaskRecord } from "@jobrt/core";
import type { ShifterConf } from "./conf.js";
import { stripEnv } from "./env.js";
import { FROM_IMAGE, type ShifterRequest } from "./request.js";

/** The image every task of a step runs: an id (or a local path) fixed once at setup. */
export interface PinnedImage {
  type: "id" | "local";
  value: string;
  /** The request as the user meant it, canonical form (SHIFTER_IMAGEREQUEST). */
  request: string;
}

/** shifter's options for a request, every one in `--name=value` form (optional arguments must be attached). */
export function shifterOptions(request: ShifterRequest): string[] {
  const args: string[] = [];
  for (const v of request.volumes) {
    const flags = `${v.readOnly ? ":ro" : ""}${v.perNodeCache ? `:perNodeCache=${v.perNodeCache.options}` : ""}`;
    args.push(`--volume=${v.from}:${v.to}${flags}`);
  }
  if (request.modules.length > 0) args.push(`--module=${request.modules.join(",")}`);
  if (request.workdir !== undefined)
    args.push(request.workdir === FROM_IMAGE ? "--workdir" : `--workdir=${request.workdir}`);
  if (request.entrypoint !== undefined)
    args.push(request.entrypoint === FROM_IMAGE ? "--entrypoint" : `--entrypoint=${request.entrypoint}`);
  for (const e of request.env) args.push(`--env=${e}`);
  if (request.clearEnv) args.push("--clearenv");
  return args;
}

/**
 * What the host starts for one task: `shifter [options] -- argv...`. The image goes in the
 * environment the way Slurm's SPANK plugin passes it (SHIFTER_IMAGETYPE/SHIFTER_IMAGE pinned,
 * SHIFTER_IMAGEREQUEST as asked), after every inherited SHIFTER_* variable was removed, so neither
 * the caller's env nor a re-pulled tag can change the image between tasks.
 */
export function buildExecSpec(
  shifterPath: string,
  conf: ShifterConf,
  request: ShifterRequest,
  pinned: PinnedImage,
  step: StepRecord,
  task: TaskRecord,
): ExecSpec {
  const env = stripEnv(task.env, conf.stripEnv);
  env.SHIFTER_IMAGETYPE = pinned.type;
  env.SHIFTER_IMAGE = pinned.value;
  env.SHIFTER_IMAGEREQUEST = pinned.request;
  return { argv: [shifterPath, ...shifterOptions(request), "--", ...task.argv], env, cwd: step.cwd };
}
