import { realpathSync } from "node:fs";
import type { TestContext } from "vitest";
import type { LaunchResult } from "./launch.js";
import { type SuiteKit, fail } from "./suitekit.js";

/** Why launch.workdir does not apply to this suite, or undefined when it does. */
function notApplicable(kit: SuiteKit): string | undefined {
  if (!(kit.plugin.meta.accepts ?? []).includes("workdir")) return "not applicable: meta.accepts has no workdir";
  if (!kit.launch) return "real-launch checks turned off (launch: false)";
  return undefined;
}

/**
 * A runtime that lists `workdir` in `meta.accepts` starts the task in `--container-workdir`. The
 * kit chooses the dir: one every sandbox with `sh` has, and not where the task starts without it
 * (the fixture's workdir, the declared launch.cwd or the step's cwd), so ignoring it shows.
 */
export function registerWorkdirCheck(kit: SuiteKit): void {
  kit.check("launch.workdir", async (ctx: TestContext) => {
    const why = notApplicable(kit);
    if (why) ctx.skip(why);
    const fixture = kit.fixtureContainer() ?? {};
    const argv = ["sh", "-c", "pwd -P"];
    const plain = kit.step({ tasks: 1, argv });
    const usual = fixture.workdir ?? kit.launch?.cwd?.(plain) ?? realpathSync(plain.cwd);
    const workdir = usual === "/tmp" ? "/" : "/tmp";
    const n = kit.node();
    const s = kit.step({ tasks: 1, argv, cwd: plain.cwd, container: { ...fixture, workdir } });
    let r: LaunchResult | undefined;
    try {
      [r] = await kit.launchAll(s, await kit.setupAndRun(n, s));
    } finally {
      await kit.cleanup(n, s);
    }
    const got = r?.stdout.trim().split("\n").at(-1);
    if (r?.code !== 0 || got !== workdir)
      fail(
        `with --container-workdir ${workdir} the task ran in ${JSON.stringify(got)} (exit ${r?.code ?? r?.signal}, stderr ${JSON.stringify(r?.stderr.trim().slice(0, 300))}); without it, it would start in ${usual}`,
      );
  });
}
