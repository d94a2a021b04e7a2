import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { NodeConf, StepRecord } from "@jobrt/core";
import { asJobrtError, describeThrown } from "./errors.js";
import type { InvalidCase } from "./options.js";
import { invalidCases } from "./owninvalid.js";
import { HookFailure, type SuiteKit, fail, lazy, listTree } from "./suitekit.js";

interface Failed {
  n: NodeConf;
  s: StepRecord;
  before: string[];
  thrown: HookFailure | undefined;
}

/** Runs setup, taskInit and run; the hook failure they gave, if any (anything else is thrown on). */
async function hookFailure(kit: SuiteKit, n: NodeConf, s: StepRecord): Promise<HookFailure | undefined> {
  try {
    await kit.setupAndRun(n, s);
    return undefined;
  } catch (error) {
    if (!(error instanceof HookFailure)) throw error;
    return error;
  }
}

/** Runs a step with an invalid request (setup, taskInit, run) and returns the hook failure it gave. */
async function failWith(kit: SuiteKit, c: InvalidCase): Promise<Failed> {
  const n = kit.node();
  const before = listTree(n.spoolDir);
  const s = kit.step({ container: { ...(kit.fixtureContainer() ?? {}), ...lazy(c.container) } });
  c.step?.(s);
  return { n, s, before, thrown: await hookFailure(kit, n, s) };
}

/** Invalid requests fail with the declared JobrtError in one line, and cleanup after a failure leaves nothing. */
export function registerErrorChecks(kit: SuiteKit): void {
  const invalid: InvalidCase[] = invalidCases(kit);
  if (invalid.length === 0) {
    kit.check("errors.invalid", (ctx) => ctx.skip("no invalid requests declared (options.invalid)"));
  }
  for (const c of invalid) {
    kit.check(
      "errors.invalid",
      async () => {
        const { n, s, thrown } = await failWith(kit, c);
        await kit.cleanup(n, s).catch(() => {});
        if (!thrown) fail(`the request was accepted: setup, taskInit and run all succeeded`);
        const codes = typeof c.code === "string" ? [c.code] : c.code;
        const err = asJobrtError(thrown.cause);
        if (!err) fail(`${thrown.hook} threw ${describeThrown(thrown.cause)}, not a JobrtError`);
        if (!codes.includes(err.code as never))
          fail(`${thrown.hook} threw ${err.code} (${err.message}), expected ${codes.join(" or ")}`);
      },
      ` (${c.title})`,
    );
  }
  kit.check("errors.cleanup-after-failure", async () => {
    // Generic failure: SpoolDir is a regular file, so a plugin that uses it cannot set up.
    const spoolFile = join(kit.tempDir("spoolfile"), "not-a-dir");
    writeFileSync(spoolFile, "");
    const broken = { ...kit.node(), spoolDir: spoolFile };
    const s = kit.step();
    await hookFailure(kit, broken, s);
    await kit.cleanup(broken, s);
    for (const c of invalid) {
      const { n: n2, s: s2, before } = await failWith(kit, c);
      await kit.hook(`cleanup after "${c.title}"`, () => kit.host().cleanup(n2, s2));
      kit.assertNoLeftovers(n2, before, `after the failed request "${c.title}"`);
    }
  });
  kit.check("errors.message", async (ctx) => {
    if (invalid.length === 0) ctx.skip("no invalid requests declared (options.invalid)");
    for (const c of invalid) {
      const { n, s, thrown } = await failWith(kit, c);
      await kit.cleanup(n, s).catch(() => {});
      const err = asJobrtError(thrown?.cause);
      if (!err) continue;
      if (err.message.trim() === "" || err.message.includes("\n"))
        fail(`"${c.title}": message ${JSON.stringify(err.message)} is not one non-empty line`);
    }
  });
  registerContainerRequired(kit);
  kit.check("validate.accepts", async (ctx) => {
    if (typeof kit.plugin.validate !== "function") ctx.skip("the plugin has no validate hook");
    const n = kit.node();
    const before = listTree(n.spoolDir);
    await kit.hook("validate", () => kit.host().validate(n, kit.step()));
    kit.assertNoLeftovers(n, before, "validate");
  });
}

function registerContainerRequired(kit: SuiteKit): void {
  if (kit.caps.container !== "required") {
    kit.check("errors.container-required", (ctx) => ctx.skip('not applicable: capabilities.container is "optional"'));
    return;
  }
  kit.check("errors.container-required", async () => {
    const n = kit.node();
    const s = kit.step({ container: null });
    let thrown: HookFailure | undefined;
    try {
      thrown = await hookFailure(kit, n, s);
    } finally {
      await kit.cleanup(n, s).catch(() => {});
    }
    if (!thrown) fail("a step without --container was accepted");
    const err = asJobrtError(thrown.cause);
    if (!err?.code.startsWith("ERR_CONTAINER"))
      fail(`${thrown.hook} threw ${describeThrown(thrown.cause)}, expected an ERR_CONTAINER_* JobrtError`);
  });
}
