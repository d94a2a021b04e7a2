import { NOT_SUPPORTED, REQUEST_FIELDS, definePlugin, packageVersion } from "@jobrt/core";

/**
 * The no-op runtime: every hook succeeds and `run` answers NOT_SUPPORTED, so the host starts the
 * task's own argv directly. `--container` is ignored, as with Slurm's runtime/none.
 */
const none = definePlugin(
  // Every request field is accepted, and ignored, as Slurm's runtime/none ignores --container.
  { name: "none", type: "runtime/none", version: packageVersion(import.meta.url), capabilities: [], accepts: REQUEST_FIELDS },
  // No program of its own and nothing of a request to look at: an empty answer, not "unknown".
  { run: () => NOT_SUPPORTED, tools: () => [], check: () => [] },
);

export default none;
