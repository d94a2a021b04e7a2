import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type CommandLookup, type MissingCommandCheck, NOT_SUPPORTED, isExecSpec, lookupCommand } from "@jobrt/core";
import { asUser } from "@jobrt/host-services";
import type { TestContext } from "vitest";
import type { LaunchResult } from "./launch.js";
import { type SuiteKit, fail } from "./suitekit.js";

const MARK = "jobrt-testkit-planted-ran";

/** What one launch of the planted command showed: the sandbox's side and the declared view's. */
interface Sides {
  check: MissingCommandCheck;
  seen: CommandLookup;
  launched: LaunchResult;
}

/** An executable in a fresh dir of the kit's, usable by every job user. */
function plantCommand(dir: string): string {
  chmodSync(dir, 0o755);
  const command = join(dir, "jobrt-testkit-planted");
  writeFileSync(command, `#!/bin/sh\necho ${MARK}\n`);
  chmodSync(command, 0o755);
  return command;
}

/**
 * Runs the planted command as a task and looks it up in the view its ExecSpec declares, as the
 * host does after a failed exec (as the job user, while the step is live).
 */
async function runPlanted(kit: SuiteKit, ctx: TestContext, command: string): Promise<Sides> {
  const n = kit.node();
  const s = kit.step({ tasks: 1, argv: [command] });
  try {
    const [result] = await kit.setupAndRun(n, s);
    const spec = result !== undefined && result !== NOT_SUPPORTED && isExecSpec(result) ? result : undefined;
    const check = spec?.supervise?.missingCommand;
    if (!spec || !check) ctx.skip("not applicable: the ExecSpec declares no supervise.missingCommand");
    const [launched] = await kit.launchAll(s, [spec]);
    const seen = asUser({ uid: s.uid, gid: s.gid }, () =>
      lookupCommand(check.view, check.command, check.path, check.cwd),
    );
    return { check, seen, launched: launched as LaunchResult };
  } finally {
    await kit.cleanup(n, s);
  }
}

/** Whether a mount of the view covers `path`: what the sandbox shows there is then not the root's. */
function underMount(check: MissingCommandCheck, path: string): boolean {
  return check.view.mounts.some((m) => {
    const d = m.destination.replace(/\/+$/, "");
    return path === d || path.startsWith(`${d}/`);
  });
}

/** Decides the check from one launch whose planted command no mount of the view covers. */
function judge(ctx: TestContext, command: string, { check, seen, launched: r }: Sides): void {
  const view = `the view supervise.missingCommand declares (root ${check.view.root}, ${check.view.mounts.length} mounts)`;
  const ran = r.code === 0 && r.stdout.includes(MARK);
  const result = `exit ${r.code ?? r.signal}, stderr ${JSON.stringify(r.stderr.trim().slice(0, 300))}`;
  if (ran) {
    if (seen.kind === "missing" || seen.kind === "not-executable")
      fail(
        `the task ran ${command}, which the kit planted on the host, but ${view} does not have it (${seen.kind}): the view is not the sandbox's filesystem, and a command that exits ${check.exitCodes.join(" or ")} itself would be reported as 127`,
      );
    return;
  }
  if (r.code === 127) return;
  if (seen.kind === "found" || seen.kind === "not-executable")
    fail(
      `${command}, which the kit planted on the host, is not in the sandbox (the task gave ${result}), but ${view} has it: the view is not the sandbox's filesystem, and the host reports ${r.code ?? r.signal} instead of 127 for a command the sandbox lacks`,
    );
  if (seen.kind === "missing")
    fail(
      `${command} is in neither the sandbox nor ${view}, but the task gave ${result}, not 127: the wrapper's exit status for a failed exec is not among the declared exitCodes ${JSON.stringify(check.exitCodes)}`,
    );
  ctx.skip(`${view} cannot tell whether ${command} is there (${seen.why}); the task gave ${result}`);
}

/**
 * The host turns a wrapper's failed exec into 127 only by looking the command up in the view
 * `supervise.missingCommand` declares (docs/writing-a-runtime.md, "What the task gets"), so that
 * view must be the sandbox's filesystem: a command the kit plants in a host dir of its own must be
 * in both or in neither. One in the view only makes a command the image lacks exit 1; one in the
 * sandbox only makes a command that exits 1 itself exit 127.
 */
export function registerViewCheck(kit: SuiteKit): void {
  kit.check("launch.missing-command-view", async (ctx) => {
    if (!kit.launch) ctx.skip("real-launch checks turned off (launch: false)");
    // The kit's temp root first; /var/tmp when a mount of the view covers it (a sandbox's own /tmp).
    const covered: string[] = [];
    for (const where of ["temp", "/var/tmp"]) {
      if (where !== "temp" && !existsSync(where)) continue;
      const dir = where === "temp" ? kit.tempDir("view") : mkdtempSync(join(where, "jobrt-testkit-view-"));
      try {
        const command = plantCommand(dir);
        const sides = await runPlanted(kit, ctx, command);
        if (!underMount(sides.check, command)) return judge(ctx, command, sides);
        covered.push(dir);
      } finally {
        if (where !== "temp") rmSync(dir, { recursive: true, force: true });
      }
    }
    ctx.skip(`not exercised: a mount of the declared view covers every dir the kit plants in (${covered.join(", ")})`);
  });
}
