import { packageVersion } from "@jobrt/core";
import { loadStepCommands } from "./codecache.js";
import { describeError, exitCodeFor } from "./errors.js";
import type { Timings } from "./timings.js";

/**
 * host.ts's say(), written out: importing host.ts here would load the chunk the other commands
 * share (the launcher's code) at every start, though `jobrt run` and `jobrt exec` bring their own.
 */
function say(message: string): void {
  process.stderr.write(`jobrt: ${message}\n`);
}

// Each command's modules load only when it runs: start-up is most of `jobrt exec`'s cost.
const COMMANDS: Record<string, (args: string[], timings?: Timings) => Promise<number>> = {
  run: (args, timings) => loadStepCommands().runCommand(args, timings),
  exec: (args, timings) => loadStepCommands().execCommand(args, timings),
  runtimes: async (args) => (await import("./commands/runtimes.js")).runtimesCommand(args),
  check: async (args) => (await import("./commands/check.js")).checkCommand(args),
  gc: async (args) => (await import("./commands/gc.js")).gcCommand(args),
  ps: async (args) => (await import("./commands/ps.js")).psCommand(args),
  images: async (args) => (await import("./commands/images.js")).imagesCommand(args),
  completion: async (args) => (await import("./completion.js")).completionCommand(args),
  help: (args) => helpCommand(args),
};

/** `jobrt help CMD` is `jobrt CMD --help`: the same text from the same place. */
async function helpCommand(args: string[]): Promise<number> {
  const [topic, ...more] = args;
  if (topic === "-h" || topic === "--help") {
    process.stdout.write((await import("./help.js")).HELP_HELP);
    return 0;
  }
  if (topic === undefined) {
    process.stdout.write((await import("./help.js")).MAIN_HELP);
    return 0;
  }
  const handler = COMMANDS[topic];
  if (!handler || more.length > 0) {
    say(
      more.length > 0
        ? `help: one command at a time (see jobrt help --help)`
        : `help: unknown command ${JSON.stringify(topic)} (commands: ${Object.keys(COMMANDS).join(", ")})`,
    );
    return 2;
  }
  return await handler(["--help"]);
}

/** Runs the jobrt command line and returns the exit status; never throws. `timings`: JOBRT_TIMINGS=1. */
export async function main(argv: string[], timings?: Timings): Promise<number> {
  const [command, ...rest] = argv;
  const verbose = rest.filter((a) => a === "-v" || a === "--verbose" || /^-v+$/.test(a)).length;
  try {
    if (command === undefined || command === "-h" || command === "--help") {
      process[command === undefined ? "stderr" : "stdout"].write((await import("./help.js")).MAIN_HELP);
      return command === undefined ? 2 : 0;
    }
    if (command === "--version" || command === "-V") {
      process.stdout.write(`jobrt ${packageVersion(import.meta.url)}\n`);
      return 0;
    }
    const handler = COMMANDS[command];
    if (!handler) {
      say(
        `unknown command ${JSON.stringify(command)} (commands: ${Object.keys(COMMANDS).join(", ")}; see jobrt --help)`,
      );
      return 2;
    }
    return await handler(rest, timings);
  } catch (error) {
    say(describeError(error, verbose));
    return exitCodeFor(error);
  }
}
