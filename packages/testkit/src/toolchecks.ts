import { type CheckFinding, type RuntimeTool, isCheckFinding, isRuntimeTool } from "@jobrt/core";
import { type SuiteKit, fail, listTree } from "./suitekit.js";

/** `tools` and `check`, the optional hooks of `jobrt runtimes` and `jobrt check`: looked at only when the plugin has them. */
export function registerToolChecks(kit: SuiteKit): void {
  kit.check("tools.shape", async (ctx) => {
    if (typeof kit.plugin.tools !== "function") ctx.skip("the plugin has no tools hook");
    const n = kit.node();
    const before = listTree(n.spoolDir);
    const tools: unknown = await kit.hook("tools", () => kit.host().tools(n));
    if (!Array.isArray(tools)) fail(`tools returned ${JSON.stringify(tools)?.slice(0, 200)}, not an array`);
    for (const t of tools as unknown[]) {
      if (!isRuntimeTool(t))
        fail(
          `tools returned ${JSON.stringify(t)?.slice(0, 200)}, not a {name, source, path?, version?, problem?} with an absolute path`,
        );
      const tool = t as RuntimeTool;
      if (tool.problem === undefined && tool.path === undefined)
        fail(`tool ${tool.name}: usable (no problem) but no path`);
    }
    kit.assertNoLeftovers(n, before, "tools");
  });
  kit.check("check.shape", async (ctx) => {
    if (typeof kit.plugin.check !== "function") ctx.skip("the plugin has no check hook");
    const n = kit.node();
    const before = listTree(n.spoolDir);
    const findings: unknown = await kit.hook("check", () => kit.host().check(n, kit.step()));
    if (!Array.isArray(findings)) fail(`check returned ${JSON.stringify(findings)?.slice(0, 200)}, not an array`);
    for (const f of findings as unknown[]) {
      if (!isCheckFinding(f))
        fail(
          `check returned ${JSON.stringify(f)?.slice(0, 200)}, not a {subject, status, detail?} (an "unchecked" one needs a detail)`,
        );
    }
    kit.assertNoLeftovers(n, before, "check");
  });
  kit.check("check.fixture", async (ctx) => {
    if (typeof kit.plugin.check !== "function") ctx.skip("the plugin has no check hook");
    const findings = ((await kit.hook("check", () => kit.host().check(kit.node(), kit.step()))) ??
      []) as CheckFinding[];
    const failed = findings.filter((f) => f.status === "failed");
    if (failed.length > 0)
      fail(
        `check reported the fixture request as failed: ${failed.map((f) => `${f.subject}: ${f.detail ?? ""}`).join("; ")}`,
      );
  });
}
