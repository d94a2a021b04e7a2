import { join } from "node:path";
import { type NodeConf, type StepRecord, jobrtError } from "@jobrt/core";
import { type OciConf, embeddedDefaultConf, findProgram, loadOciConf, userNamespacesAvailable } from "./conf.js";

/** oci.conf, or the embedded runc default when there is none (fails when runc is missing too). */
export function resolveConf(node: NodeConf, step: StepRecord): OciConf {
  const conf = loadOciConf(node.confDir);
  if (conf) {
    for (const w of conf.warnings) node.log("warn", w);
    return conf;
  }
  const runc = findProgram("runc", step.env.PATH) ?? findProgram("runc", process.env.PATH);
  if (!runc) {
    throw jobrtError(
      "ERR_CONTAINER_NOT_CONFIGURED",
      {
        problem: `--container needs a container runtime: there is no ${join(node.confDir, "oci.conf")} and runc is not on PATH; install runc (apt-get install runc) or write an oci.conf (see docs/runtime-oci.md)`,
      },
      { details: { runtime: "runtime/oci", file: join(node.confDir, "oci.conf") } },
    );
  }
  const rootless = step.uid !== 0;
  if (rootless && !userNamespacesAvailable()) {
    throw jobrtError(
      "ERR_CONTAINER_NOT_CONFIGURED",
      {
        problem: `--container as uid ${step.uid} needs rootless runc, and this machine has unprivileged user namespaces disabled; enable them (sysctl kernel.unprivileged_userns_clone=1) or write an oci.conf (see docs/runtime-oci.md)`,
      },
      { details: { runtime: "runtime/oci" } },
    );
  }
  node.log(
    "verbose",
    `runtime oci: no ${join(node.confDir, "oci.conf")}, using the embedded ${rootless ? "rootless " : ""}runc configuration (${runc})`,
  );
  return embeddedDefaultConf(runc, rootless);
}
