import { cpus } from "node:os";
import type { CheckFinding, LoadedRuntime, NodeConf, RuntimeRegistry, StepRecord } from "@jobrt/core";
import { type DeviceConf, cdiInventory, planStep, resolveStepDevices } from "@jobrt/launcher";
import { flag, one, parseCommandLine } from "../args.js";
import { cdiDeviceLines } from "../cdidevices.js";
import { createHost } from "../host.js";
import { say } from "../say.js";
import { showFindings } from "../finding.js";
import { checkImagePin } from "../imagecheck.js";
import { type MpiComponent, checkMpi } from "../mpicheck.js";
import { captureWireup } from "../mpiwireup.js";
import { componentSpecs, stepUser } from "../runspec.js";

/**
 * One component: the runtime's validate hook (the request as at submit time), then its check hook
 * (what this node can see of it). Failed findings go to stderr; true when the component is usable.
 * `loaded` gets the runtime the component loaded.
 */
async function checkComponent(
  registry: RuntimeRegistry,
  node: NodeConf,
  step: StepRecord,
  prefix: string,
  devices: DeviceConf,
  loaded: (runtime: LoadedRuntime) => void,
): Promise<boolean> {
  try {
    // As a step on this node would: its names against the node's specs and this environment's allocation.
    resolveStepDevices(step, devices);
  } catch (error) {
    say(`${prefix}: ${(error as Error).message}`);
    return false;
  }
  const index = await registry.load(step.runtime || undefined, "submit");
  step.runtime = registry.info(index).name;
  loaded(registry.info(index));
  const head = `${prefix}: runtime ${step.runtime}`;
  let findings: CheckFinding[] | undefined;
  try {
    await registry.validate(index, { node, step });
    findings = await registry.check(index, { node, step });
  } catch (error) {
    say(`${prefix}: ${(error as Error).message}`);
    return false;
  }
  const failed = showFindings(head, findings ?? []);
  const unchecked = (findings ?? []).filter((f) => f.status === "unchecked").length;
  if (failed > 0) say(`${head}: failed (${failed} problem${failed === 1 ? "" : "s"} on this node)`);
  else if (findings === undefined)
    process.stdout.write(
      `${head}: ok (validated only: the runtime has no check hook, so nothing on this node was looked at)\n`,
    );
  else process.stdout.write(`${head}: ok${unchecked > 0 ? ` (${unchecked} not checked)` : ""}\n`);
  return failed === 0;
}

/**
 * The node's CDI devices, and the spec dirs' problems on stderr, when the node has specs or a step
 * would read them (the request names devices, or the site gives default ones). A problem fails the
 * check only in the second case: a step that uses no device never reads the specs.
 */
function showDevices(conf: DeviceConf, requested: boolean): boolean {
  const inventory = cdiInventory(conf);
  const used = requested || conf.defaults.length > 0;
  if (!used && inventory.devices.length === 0 && inventory.problems.length === 0) return true;
  const lines = cdiDeviceLines(inventory);
  for (const line of lines.out) process.stdout.write(`${line}\n`);
  for (const line of lines.problems) say(line);
  return inventory.problems.length === 0 || !used;
}

/** `jobrt check`: a run request validated as at submit time, then what this node can see of it; nothing is started. */
export async function checkCommand(args: string[]): Promise<number> {
  const wireup = captureWireup(process.env);
  const parsed = parseCommandLine(args, { command: "check", components: true, needCommand: true });
  if (flag(parsed.step, "help")) {
    process.stdout.write((await import("../help.js")).CHECK_HELP);
    return 0;
  }
  const host = createHost(one(parsed.step, "conf-dir"), parsed.step.get("verbose")?.length ?? 0);
  const specs = componentSpecs(parsed);
  const planned = planStep(
    { jobId: 0, stepId: 0, user: stepUser(parsed), components: specs },
    host.node.nodeName,
    cpus().length,
  );
  let status = showDevices(
    host.site.devices,
    planned.some((c) => (c.record.container?.devices ?? []).length > 0),
  )
    ? 0
    : 1;
  const mpi: MpiComponent[] = [];
  try {
    for (const [i, c] of planned.entries()) {
      const prefix = `component ${i}`;
      const loaded = (runtime: LoadedRuntime) =>
        mpi.push({ prefix, runtime, container: c.record.container !== undefined });
      if (!(await checkComponent(host.registry, host.node, c.record, prefix, host.site.devices, loaded))) status = 1;
      else if (!(await checkImagePin(host.node, c.record, prefix))) status = 1;
    }
    if (!checkMpi(wireup, mpi)) status = 1;
  } finally {
    await host.registry.fini();
  }
  return status;
}
