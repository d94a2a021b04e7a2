import { afterAll, beforeAll, describe } from "vitest";
import { registerBackgroundChecks } from "./backgroundchecks.js";
import { registerBaselineChecks } from "./baselinechecks.js";
import { registerContractChecks } from "./contractchecks.js";
import { registerDeviceChecks } from "./devicechecks.js";
import { registerErrorChecks } from "./errorchecks.js";
import { registerImageChecks } from "./imagechecks.js";
import { registerTaskLaunchChecks } from "./launchchecks.js";
import type { ConformanceOptions, PluginSource } from "./options.js";
import { registerJoinCheck } from "./joinchecks.js";
import { registerMpiChecks } from "./mpichecks.js";
import { registerPeerMinimumNote } from "./peernote.js";
import { registerCleanupOrderChecks, registerStateChecks } from "./statechecks.js";
import { registerCleanupChecks, registerLaunchChecks, registerRequestCheck } from "./stepchecks.js";
import { SuiteKit } from "./suitekit.js";
import { registerToolChecks } from "./toolchecks.js";
import { registerViewCheck } from "./viewcheck.js";
import { registerWorkdirCheck } from "./workdircheck.js";

/**
 * Registers a vitest suite that checks `plugin` against the jobrt runtime contract. Call it at the
 * top level of a test file (it uses describe/it/beforeAll/afterAll from vitest).
 */
export function describeRuntimeConformance(source: PluginSource, options: ConformanceOptions = {}): void {
  const kit = new SuiteKit(source, options);
  const shownType = options.type ?? (typeof source === "function" ? "plugin" : source.meta?.type);
  describe(options.title ?? `runtime conformance: ${shownType}`, () => {
    beforeAll(() => kit.load(), kit.timeout);
    afterAll(() => {
      // A plugin whose cleanup left a mount in its SpoolDir fails here instead of losing the mounted files.
      const left = kit.removeScratch();
      if (left.length > 0)
        throw new Error(`@jobrt/testkit: could not remove the conformance run's temp dirs: ${left.join("; ")}`);
    });
    describe("contract", () => registerContractChecks(kit));
    describe("hooks", () => {
      beforeAll(async () => {
        await kit.plugin.init({ context: "step" });
      }, kit.timeout);
      afterAll(async () => {
        await kit.plugin.fini();
      }, kit.timeout);
      registerBaselineChecks(kit);
      registerCleanupOrderChecks(kit);
      registerStateChecks(kit);
      registerRequestCheck(kit);
      registerCleanupChecks(kit);
      registerErrorChecks(kit);
      registerToolChecks(kit);
      registerTaskLaunchChecks(kit);
      registerLaunchChecks(kit);
      registerViewCheck(kit);
      registerWorkdirCheck(kit);
      registerDeviceChecks(kit);
      registerBackgroundChecks(kit);
      registerImageChecks(kit);
      registerPeerMinimumNote(kit);
    });
    // After the hooks' fini: each MPI check's step, and the join check's, is a `jobrt exec` of its
    // own, whose session inits the plugin and finis it again, as the host's process does.
    describe("mpi", () => registerMpiChecks(kit));
    describe("join", () => registerJoinCheck(kit));
  });
}
