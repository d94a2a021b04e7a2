import { jobrtError } from "@jobrt/core";
import { flag, one, parseCommandLine } from "../args.js";
import { createHost } from "../host.js";
import { listRuntimes } from "../listing.js";

export async function runtimesCommand(args: string[]): Promise<number> {
  const parsed = parseCommandLine(args, { command: "runtimes", components: false, needCommand: false });
  if (parsed.components[0]!.argv.length > 0) {
    throw jobrtError("ERR_USAGE", {
      problem: `runtimes: unexpected argument ${JSON.stringify(parsed.components[0]!.argv[0])}`,
    });
  }
  if (flag(parsed.step, "help")) {
    process.stdout.write((await import("../help.js")).RUNTIMES_HELP);
    return 0;
  }
  const host = createHost(one(parsed.step, "conf-dir"), parsed.step.get("verbose")?.length ?? 0);
  return listRuntimes(host, flag(parsed.step, "json"));
}
