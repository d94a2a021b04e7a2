import { join } from "node:path";
import type { StepRecord } from "@jobrt/core";
import { type ToolResult, runTool } from "@jobrt/host-services";
import { NodeStepListener, exportEnvironment, joinerCommand } from "@jobrt/launcher";
import type { TestContext } from "vitest";
import { type ExecOutcome, execTask } from "./execsession.js";
import { type SuiteKit, fail } from "./suitekit.js";

function shown(host: ExecOutcome, joined: ToolResult): string {
  const reports = host.reports.length > 0 ? `; jobrt said: ${host.reports.join(" | ")}` : "";
  return `the node's jobrt exit ${host.status}${reports}, its task's stdout ${JSON.stringify(host.stdout.slice(0, 300))}; the joined task exit ${joined.code}, stdout ${JSON.stringify(joined.stdout.toString("utf8").slice(0, 300))}, stderr ${JSON.stringify(joined.stderr.trim().slice(0, 300))}`;
}

/**
 * Task 1 of a two-task step joins task 0's jobrt, as under `srun ... jobrt exec` on one node: the
 * node's jobrt runs both through the runtime (setup and cleanup once), the joined one with the
 * joiner as its forker, whose output and status are its own.
 */
async function checkJoin(kit: SuiteKit): Promise<void> {
  const timeout = kit.launch?.timeoutMs ?? 60_000;
  const step = kit.step({ tasks: 2, ...(kit.launch?.argv ? { argv: kit.launch.argv } : {}) });
  const [first, second] = step.tasks;
  const own: StepRecord = { ...step, tasks: [first!] };
  const joining: StepRecord = { ...step, tasks: [second!] };
  const socket = join(kit.tempDir("join"), "node.sock");
  const listener = await NodeStepListener.open(socket, undefined, (line) => fail(line));
  const command = joinerCommand(socket, ["exec", "--", ...second!.argv]);
  if (!listener || !command) fail("cannot set up the node step (no perl?)");
  const nodeStep = { listener, tasksOnNode: 2, plan: () => joining, line: (m: string) => `jobrt: ${m}\n` };
  // As `jobrt exec` does: a step that never launched closes its socket, so the joiner is not left waiting.
  const hosted = execTask(kit.plugin, kit.node(), own, timeout, nodeStep).finally(() => listener.close());
  const env = exportEnvironment("ALL", process.env);
  const [host, joined] = await Promise.all([hosted, runTool(command, { env, timeoutMs: timeout })]);
  const joinedOut = joined.stdout.toString("utf8");
  const expect = kit.launch?.expect ?? ((t) => `jobrt-testkit:${t.globalId}`);
  if (host.status !== 0 || host.error) fail(`the node's jobrt did not run its step: ${shown(host, joined)}`);
  if (joined.code !== 0) fail(`the joined task did not end with its own status 0: ${shown(host, joined)}`);
  if (!host.stdout.includes(expect(first!))) fail(`task 0 did not print ${expect(first!)}: ${shown(host, joined)}`);
  if (!joinedOut.includes(expect(second!)))
    fail(`the joined task did not print ${expect(second!)} on its own stdout: ${shown(host, joined)}`);
  if (host.started !== 2) fail(`the node's jobrt started ${host.started} task(s), not 2: ${shown(host, joined)}`);
}

/** The path of a Slurm step's tasks on one node through one jobrt (docs/node-step.md). */
export function registerJoinCheck(kit: SuiteKit): void {
  kit.check("launch.join", async (ctx: TestContext) => {
    if (!kit.launch) ctx.skip("real-launch checks turned off (launch: false)");
    await checkJoin(kit);
  });
}
