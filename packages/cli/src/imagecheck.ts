import { existsSync } from "node:fs";
import { IMAGE_OPTION_KEY, type NodeConf, type StepRecord } from "@jobrt/core";
import { checkImageTrust, loadImageSettings, parseImageReference, resolveForStep, sharedStoreUse } from "@jobrt/images";
import { say } from "./say.js";

/** The variable `jobrt check` exports for a batch script: the image pinned to one digest for the whole job. */
export const IMAGE_PIN_VARIABLE = "JOBRT_CONTAINER_IMAGE";

const shellQuote = (s: string) => `'${s.replace(/'/g, "'\\''")}'`;

/**
 * `jobrt check --container-image REF` on a login node: the digest REF names now, where this node
 * would run it from (the shared store's squashfs or the node cache, and why), and an `export` line
 * that pins the batch script's steps to that digest (docs/images.md, "The pin"). False on failure.
 */
export async function checkImagePin(node: NodeConf, step: StepRecord, prefix: string): Promise<boolean> {
  const text = step.container?.options[IMAGE_OPTION_KEY]?.[0];
  if (text === undefined) return true;
  try {
    const ref = parseImageReference(text);
    const settings = loadImageSettings(node.confDir);
    const resolved = await resolveForStep(step, settings, ref);
    const trust = await checkImageTrust(step, settings, ref, resolved);
    const shared = sharedStoreUse(settings);
    const loop = existsSync("/dev/loop-control");
    const where = !shared.use
      ? `node cache (${shared.why})`
      : !resolved.public
        ? "node cache (a private image stays in its user's node cache)"
        : shared.mount === "fuse"
          ? `shared store ${shared.root} (squashfs, mounted read-only with squashfuse, when a root host has put it there; else the node cache)`
          : loop
            ? `shared store ${shared.root} (squashfs, loop-mounted read-only)`
            : `node cache's unpacked tree (this node has no loop devices to mount the shared store's squashfs)`;
    process.stdout.write(
      `${prefix}: image ${ref.text}: ${resolved.digest}${resolved.public ? " (public)" : " (private)"}; runs from the ${where}\n`,
    );
    const pinned =
      ref.transport === "docker"
        ? `docker://${ref.registry}/${ref.repository}${ref.tag !== undefined ? `:${ref.tag}` : ""}@${resolved.digest}`
        : ref.text;
    process.stdout.write(`${prefix}: image ${ref.text}: trust: ${trust}\n`);
    process.stdout.write(`export ${IMAGE_PIN_VARIABLE}=${shellQuote(pinned)}\n`);
    return true;
  } catch (error) {
    say(`${prefix}: ${(error as Error).message}`);
    return false;
  }
}
