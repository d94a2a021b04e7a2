import { removeJobPins } from "./jobpin.js";
import { userStore } from "./store.js";
import type { ImageSettings } from "./settings.js";
import { sharedStoreProblem } from "./shared.js";
import { collectMounts } from "./squashmount.js";

/**
 * `jobrt gc`'s image work on this node: unmounts the shared-store images no live step uses (their
 * steps died), and with `--job N` removes that job's digest pins. Root sees only its loop mounts;
 * a user's gc, only that user's squashfuse mounts (root never looks into a user's FUSE mount:
 * squashmount.ts). Returns one line per thing done or left.
 */
export async function collectImages(settings: ImageSettings, jobId: number | undefined): Promise<string[]> {
  const uid = process.getuid?.() ?? -1;
  const mounts =
    uid === 0
      ? await collectMounts(settings.cacheDir, "loop")
      : await collectMounts(userStore(settings.cacheDir, uid), "fuse");
  const lines: string[] = [];
  for (const { hex, result } of mounts) {
    if (result === "unmounted") lines.push(`gc: unmounted shared image ${hex}`);
    else if (result !== "in use") lines.push(`gc: shared image ${hex}: ${result}`);
  }
  const root = settings.sharedStore;
  if (uid === 0 && jobId !== undefined && root !== undefined && sharedStoreProblem(root) === undefined) {
    const n = removeJobPins(root, settings.clusterName, jobId);
    if (n > 0) lines.push(`gc: removed ${n} image pin(s) of job ${jobId} from ${root}`);
  }
  return lines;
}
