import { IMAGE_OPTION_KEY, definePlugin, packageVersion } from "@jobrt/core";
import { check } from "./check.js";
import { cleanup } from "./cleanup.js";
import { CONTAINER_ID_OPTION } from "./containername.js";
import type { OciStepState } from "./ocistepstate.js";
import { run } from "./run.js";
import { setup, taskInit } from "./setup.js";
import { tools } from "./tools.js";
import { validate } from "./validate.js";

/** The OCI runtime plugin (Slurm's runtime/oci, oci.conf-compatible). */
export const ociPlugin = definePlugin<OciStepState>(
  {
    name: "oci",
    type: "runtime/oci",
    version: packageVersion(import.meta.url),
    // "pass-fds": runc's --preserve-fds, which only the embedded default's argv carries (passedfds.ts).
    capabilities: ["container", "oci.conf", "run", "create-start", "pass-fds"],
    accepts: [
      "value",
      "volumes",
      "env",
      "workdir",
      "clearEnv",
      "devices",
      `options.${IMAGE_OPTION_KEY}`,
      `options.${CONTAINER_ID_OPTION}`,
    ],
  },
  {
    setup,
    taskInit,
    run,
    cleanup,
    // An image step's bundle is a cache dir: its digest says what ran.
    describe: ({ state }) => (state?.image ? { digest: state.image.digest } : state ? { bundle: state.bundle } : {}),
    validate,
    tools,
    check,
  },
);
