import { cpus } from "node:os";
import { planStep } from "@jobrt/launcher";
import { flag, one, parseCommandLine } from "../args.js";
import { createHost, say } from "../host.js";
import { RUN_OPTIONS, componentSpecs, stepUser } from "../runspec.js";

/** `jobrt check`: the submit-context validation of a run request; nothing is started. */
export async function checkCommand(args: string[]): Promise<number> {
  const parsed = parseCommandLine(args, { allowed: RUN_OPTIONS, components: true, needCommand: true, command: "check" });
  if (flag(parsed.step, "help")) {
    process.stdout.write((await import("../help.js")).CHECK_HELP);
    return 0;
  }
  const host = createHost(one(parsed.step, "conf-dir"), parsed.step.get("verbose")?.length ?? 0);
  const specs = componentSpecs(parsed);
  const planned = planStep({ jobId: 0, stepId: 0, user: stepUser(parsed), components: specs }, host.node.nodeName, cpus().length);
  let status = 0;
  try {
    for (const [i, c] of planned.entries()) {
      const index = await host.registry.load(c.record.runtime || undefined, "submit");
      c.record.runtime = host.registry.info(index).name;
      try {
        await host.registry.validate(index, { node: host.node, step: c.record });
        process.stdout.write(`component ${i}: runtime ${c.record.runtime}: ok\n`);
      } catch (error) {
        say(`component ${i}: ${(error as Error).message}`);
        status = 1;
      }
    }
  } finally {
    await host.registry.fini();
  }
  return status;
}
