import { HOOK_NAMES, RUNTIME_API_VERSION, type RuntimeContext, assertRuntimePlugin, runtimeNameOf } from "@jobrt/core";
import { type SuiteKit, fail, listTree, loadPlugin } from "./suitekit.js";

const SEMVER = /^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$/;

/** The plugin object itself: its meta, its hooks, and init/fini as often as a host may call them. */
export function registerContractChecks(kit: SuiteKit): void {
  kit.check("meta.shape", () => {
    const plugin = kit.plugin;
    assertRuntimePlugin(plugin, kit.options.type ?? String(plugin?.meta?.type));
    if (runtimeNameOf(plugin.meta.type) !== plugin.meta.name)
      fail(`meta.type ${plugin.meta.type} does not match meta.name ${plugin.meta.name}`);
    if (plugin.meta.apiVersion !== RUNTIME_API_VERSION)
      fail(`meta.apiVersion ${plugin.meta.apiVersion} is not ${RUNTIME_API_VERSION}`);
  });
  kit.check("meta.version", () => {
    if (!SEMVER.test(kit.plugin.meta.version))
      fail(
        `meta.version ${JSON.stringify(kit.plugin.meta.version)} is not a semantic version (use packageVersion(import.meta.url))`,
      );
  });
  kit.check("hooks.present", () => {
    const p = kit.plugin as unknown as Record<string, unknown>;
    const missing = HOOK_NAMES.filter((h) => typeof p[h] !== "function");
    if (missing.length > 0) fail(`hooks missing: ${missing.join(", ")}`);
    if (p.validate !== undefined && typeof p.validate !== "function") fail("validate is present but not a function");
  });
  kit.check("lifecycle.init-fini", async () => {
    const plugin = kit.plugin;
    for (const context of ["submit", "node", "step"] as RuntimeContext[]) {
      await kit.hook(`init(${context})`, () => plugin.init({ context }));
      await kit.hook(`init(${context}) again`, () => plugin.init({ context }));
      await kit.hook("fini", () => plugin.fini());
      await kit.hook("fini again", () => plugin.fini());
    }
  });
  kit.check("lifecycle.reload", async () => {
    const again = await loadPlugin(kit.source);
    await kit.hook("init", () => again.init({ context: "step" }));
    await kit.hook("fini", () => again.fini());
    await kit.hook("init after fini", () => again.init({ context: "step" }));
    try {
      const n = kit.node();
      const before = listTree(n.spoolDir);
      const s = kit.step({ tasks: 1 });
      await kit.setupAndRun(n, s);
      await kit.cleanup(n, s);
      kit.assertNoLeftovers(n, before, "after a step run by the re-initialised plugin");
    } finally {
      await kit.hook("fini", () => again.fini());
    }
  });
}
