import { isAbsolute } from "node:path";
import { type ContainerRequest, type JobrtError, type ValidateContext, containerImage, jobrtError } from "@jobrt/core";
import { type Mount, parseVolume } from "./bundle.js";
import type { OciConf } from "./conf.js";
import { requestedContainerId } from "./containername.js";
import { validateImage } from "./image/request.js";
import { resolveConf } from "./resolveconf.js";

/** ERR_CONTAINER_REQUEST for a request this runtime cannot run, naming the option at fault. */
export function requestError(message: string, key?: string): JobrtError {
  return jobrtError(
    "ERR_CONTAINER_REQUEST",
    { problem: message },
    { details: { runtime: "runtime/oci", ...(key ? { key } : {}) } },
  );
}

/** Checks the job's container options against what this runtime can do. */
export function checkRequest(c: ContainerRequest, conf: OciConf | undefined): Mount[] {
  const image = containerImage(c, "runtime/oci");
  if (image !== undefined && c.value !== undefined)
    throw requestError("give either --container BUNDLE or --container-image REF, not both", "--container-image");
  if (image === undefined && (c.value === undefined || c.value === "")) {
    throw requestError(
      "--container-* options need --container BUNDLE (an OCI bundle directory) or --container-image REF",
      "--container",
    );
  }
  if (image !== undefined && conf?.ignoreFileConfigJson)
    throw requestError(
      `--container-image needs config.json, but ${conf.file} sets IgnoreFileConfigJson=true`,
      "--container-image",
    );
  requestedContainerId(c);
  // --container-module, --container-entrypoint and other --container-opt keys: the host refuses them (meta.accepts).
  for (const e of c.env) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*=/.test(e))
      throw requestError(`--container-env ${JSON.stringify(e)}: expected NAME=VALUE`, "--container-env");
  }
  const needsConfig = c.volumes.length > 0 || c.workdir !== undefined || c.clearEnv;
  if (needsConfig && conf?.ignoreFileConfigJson) {
    throw requestError(
      `--container-volume, --container-workdir and --container-clearenv need config.json, but ${conf.file} sets IgnoreFileConfigJson=true`,
    );
  }
  // Devices live in config.json: without it they would silently not be there.
  if (c.deviceEdits && conf?.ignoreFileConfigJson) {
    const what = c.deviceEdits.devices[0];
    throw requestError(
      `${what === undefined ? "Slurm's MPI wire-up (the host's namespaces and directories, docs/mpi.md)" : `--container-device ${what}`} needs config.json, but ${conf.file} sets IgnoreFileConfigJson=true`,
      what === undefined ? "IgnoreFileConfigJson" : "--container-device",
    );
  }
  if (c.workdir !== undefined && !isAbsolute(c.workdir))
    throw requestError(
      `--container-workdir ${JSON.stringify(c.workdir)}: must be an absolute path`,
      "--container-workdir",
    );
  return c.volumes.map(parseVolume);
}

/** The validate hook: the request as checkRequest sees it, without and with oci.conf, and the image. */
export async function validate({ node, step }: ValidateContext): Promise<void> {
  const c = step.container;
  if (!c) return;
  checkRequest(c, undefined);
  checkRequest(c, resolveConf(node, step));
  const ref = containerImage(c, "runtime/oci");
  if (ref !== undefined) await validateImage(node, step, ref);
}
