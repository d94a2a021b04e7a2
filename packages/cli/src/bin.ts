#!/usr/bin/env -S node --
// The "--" stops Node 20 from reading options such as --env-file= out of the job's own argv.
import { main } from "./main.js";
import { Timings } from "./timings.js";

// Made first of all, so its "modules" phase ends when the entry's imports are done.
const timings = process.env.JOBRT_TIMINGS === "1" ? new Timings() : undefined;

/**
 * Writes to a pipe become asynchronous once the pipe is full (a reader slower than the tasks), and
 * process.exit() drops what is still queued: wait until stdout and stderr have written it all.
 */
function drained(stream: NodeJS.WriteStream): Promise<void> {
  if (stream.writableLength === 0 || stream.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    stream.once("error", () => resolve());
    stream.write("", () => resolve());
  });
}

/** Node's argv holds U+FFFD for bytes that are not UTF-8; only then are the originals read back. */
async function args(): Promise<string[]> {
  const argv = process.argv.slice(2);
  return argv.some((a) => a.includes("\ufffd")) ? (await import("./rawinput.js")).rawArgs() : argv;
}

process.exitCode = await main(await args(), timings);
timings?.mark("release");
await Promise.all([drained(process.stdout), drained(process.stderr)]);
if (timings) {
  timings.mark("flush");
  process.stderr.write(`jobrt: ${timings.line()}\n`);
  await drained(process.stderr);
}
// Plugins or stdin may hold the event loop open; the step is over and its output written.
process.exit();
