import { NOT_SUPPORTED, REQUEST_FIELDS, definePlugin, packageVersion } from "@jobrt/core";

/**
 * The no-op runtime: every hook succeeds and `run` answers NOT_SUPPORTED, so the host starts the
 * task's own argv directly. `--container` is ignored, as with Slurm's runtime/none.
 */
/**
 * Every request field is accepted, and ignored, as Slurm's runtime/none ignores --container; but
 * devices: a task on the host sees the node's /dev as the step's cgroup allows, so a device request
 * is refused rather than pretended (docs/devices.md, "Runtimes").
 */
const ACCEPTS = REQUEST_FIELDS.filter((field) => field !== "devices");

const none = definePlugin(
  {
    name: "none",
    type: "runtime/none",
    version: packageVersion(import.meta.url),
    // Its task is the process the host forks: whatever descriptor the host passes reaches it.
    capabilities: ["pmi-fd"],
    accepts: ACCEPTS,
  },
  // No program of its own and nothing of a request to look at: an empty answer, not "unknown".
  { run: () => NOT_SUPPORTED, tools: () => [], check: () => [] },
);

export default none;
