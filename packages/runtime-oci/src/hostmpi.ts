import { type DeviceEdits, injectedMpiProblem, listContainerDir } from "@jobrt/core";
import { type FileUser, asUser } from "@jobrt/host-services";
import type { OciConfig } from "./bundle.js";
import { viewMountsOf } from "./missingcommand.js";

/**
 * Why the host's MPI that a site's CDI device binds cannot run the image's (docs/mpi.md, "The
 * host's MPI in the container"); undefined when it can, or when nothing is bound. The image, with
 * its bundle's own binds (a bundle binding the host's /usr has that MPI), is listed as the job
 * user, whose bundle it may be. Setup refuses on it; `jobrt check` shows it.
 */
export function hostMpiProblem(
  rootfs: string,
  config: OciConfig | undefined,
  edits: DeviceEdits | undefined,
  as: FileUser | undefined,
  image: string,
): string | undefined {
  if (!edits) return undefined;
  const view = { root: rootfs, mounts: config ? viewMountsOf(config) : [] };
  return injectedMpiProblem(edits, (dir) => asUser(as, () => listContainerDir(view, dir)), image);
}
