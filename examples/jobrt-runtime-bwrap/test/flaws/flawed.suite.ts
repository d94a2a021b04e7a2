import { describeRuntimeConformance } from "@jobrt/testkit";
import { afterAll } from "vitest";
import { type Flaw, flawedBwrap, killOrphans, strayHelpers } from "./plugins.js";

// The flaws "setup-helper" and "outlives-sigterm" leave processes running on purpose; this suite
// ends exactly those.
afterAll(() => {
  for (const pid of strayHelpers.splice(0)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // the check already ended it
    }
  }
  killOrphans();
});

const flaws: Flaw[] = [
  "tmp-leak",
  "slurm-env-only",
  "module-state",
  "wipes-spool",
  "setup-helper",
  "outlives-sigterm",
  "ignores-cwd",
  "missing-to-1",
  "sigterm-cut-short",
  "escapes",
];
const only = process.env.JOBRT_BWRAP_FLAWS?.split(",");

for (const flaw of flaws) {
  if (only && !only.includes(flaw)) continue;
  describeRuntimeConformance(flawedBwrap(flaw), { title: `flaw:${flaw}`, type: "runtime/bwrap", capabilities: { runs: "exec-spec" }, tasks: 2 });
}
