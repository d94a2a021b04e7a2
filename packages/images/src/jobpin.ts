import { createHash } from "node:crypto";
import { linkSync, readFileSync, readdirSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { StepRecord } from "@jobrt/core";
import { makeDir } from "@jobrt/host-services";
import { DIGEST_RE } from "./reference.js";
import type { ResolvedImage } from "./resolve.js";
import { sharedPaths } from "./shared.js";

/**
 * One digest per job step for the whole cluster (docs/images.md, "The pin"): the first jobrt of
 * the step, on any node, to resolve a reference records its digest in the shared store under
 * `jobs/<ClusterName>/<job>.<step>.<hash of the reference>`; every other node of the step uses it,
 * so a tag moved while the step launches cannot give two nodes two images. link(2) makes the
 * first writer win, also on NFS.
 */
export function jobPinFile(
  root: string,
  cluster: string,
  step: Pick<StepRecord, "jobId" | "stepId">,
  reference: string,
): string {
  const hash = createHash("sha256").update(reference).digest("hex").slice(0, 16);
  return join(sharedPaths(root).jobs, cluster, `${step.jobId}.${step.stepId}.${hash}`);
}

export function readJobPin(file: string, reference: string): ResolvedImage | undefined {
  try {
    const pin = JSON.parse(readFileSync(file, "utf8")) as { reference?: string; digest?: string; public?: boolean };
    if (pin.reference === reference && typeof pin.digest === "string" && DIGEST_RE.test(pin.digest))
      return { digest: pin.digest, public: pin.public === true };
  } catch {
    // none yet
  }
  return undefined;
}

/** Records our digest unless another node got there first; returns the one the step uses. */
export function writeJobPin(
  root: string,
  cluster: string,
  file: string,
  reference: string,
  resolved: ResolvedImage,
): ResolvedImage {
  makeDir(join(sharedPaths(root).jobs, cluster), 0o755);
  const tmp = `${file}.${process.pid}.tmp`;
  try {
    // Root-only: a private image's digest is no business of other users.
    writeFileSync(tmp, `${JSON.stringify({ reference, ...resolved })}\n`, { mode: 0o600 });
    linkSync(tmp, file);
    return resolved;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return readJobPin(file, reference) ?? resolved;
    throw error;
  } finally {
    try {
      unlinkSync(tmp);
    } catch {
      // never written
    }
  }
}

/** `jobrt gc --job N` (the Slurm Epilog): the job's pins go with it. Returns how many were removed. */
export function removeJobPins(root: string, cluster: string, jobId: number): number {
  let n = 0;
  try {
    for (const f of readdirSync(join(sharedPaths(root).jobs, cluster))) {
      if (!f.startsWith(`${jobId}.`)) continue;
      try {
        unlinkSync(join(sharedPaths(root).jobs, cluster, f));
        n++;
      } catch {
        // another node's Epilog was first
      }
    }
  } catch {
    // no pins of this cluster
  }
  return n;
}
