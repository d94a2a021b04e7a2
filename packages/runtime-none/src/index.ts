import { NOT_SUPPORTED, definePlugin, packageVersion } from "@jobrt/core";

/**
 * The no-op runtime: every hook succeeds and `run` answers NOT_SUPPORTED, so the host starts the
 * task's own argv directly. `--container` is ignored, as with Slurm's runtime/none.
 */
const none = definePlugin(
  { name: "none", type: "runtime/none", version: packageVersion(import.meta.url), capabilities: [] },
  { run: () => NOT_SUPPORTED },
);

export default none;
