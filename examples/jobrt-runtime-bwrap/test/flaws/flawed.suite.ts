import { describeRuntimeConformance } from "@jobrt/testkit";
import { afterAll, beforeAll } from "vitest";
import { makeBusyboxRootfs } from "../rootfs.js";
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
// What the sound runtime declares (conformance.test.ts): the flaws are the only faults.
const pmi2 = { cannot: "bwrap declares no pmi-fd or pass-fds capability" };
const pmix = { cannot: "without --container the host binds no PMIx directory into the sandbox" };

for (const flaw of flaws) {
  if (only && !only.includes(flaw)) continue;
  describeRuntimeConformance(flawedBwrap(flaw), { title: `flaw:${flaw}`, type: "runtime/bwrap", capabilities: { runs: "exec-spec" }, tasks: 2, mpi: { pmi2, pmix } });
}

// In a busybox rootfs, declaring the host's tree as the view: caught by the view check only.
if (!only || only.includes("view-of-host")) {
  let rootfs: { dir: string; dispose(): void } | undefined;
  beforeAll(() => {
    rootfs = makeBusyboxRootfs();
  });
  afterAll(() => rootfs?.dispose());
  describeRuntimeConformance(flawedBwrap("view-of-host"), {
    title: "flaw:view-of-host",
    type: "runtime/bwrap",
    capabilities: { runs: "exec-spec" },
    tasks: 2,
    container: () => ({ value: rootfs?.dir ?? "/rootfs-not-built" }),
    launch: { cwd: () => "/" },
    mpi: { pmi2 },
  });
}
