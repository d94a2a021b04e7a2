import type { TaskProcess } from "../forker/forker.js";
import type { Readable } from "node:stream";

/**
 * srun's default `--input=all` with several tasks: jobrt's stdin is copied to every task that has
 * a pipe, from when all of them have started until all of them are done.
 */
export function copyStdinToTasks(
  stdin: Readable,
  spawned: Promise<TaskProcess | undefined>[],
  done: Promise<unknown>,
): void {
  void Promise.all(spawned).then((children) => {
    const outs = children.map((c) => c?.stdin).filter((s): s is NonNullable<typeof s> => Boolean(s));
    if (outs.length === 0) return;
    const onData = (chunk: Buffer) => {
      for (const o of outs) if (!o.destroyed) o.write(chunk);
    };
    const onEnd = () => {
      for (const o of outs) o.end();
    };
    stdin.on("data", onData);
    stdin.once("end", onEnd);
    stdin.once("error", onEnd);
    stdin.resume();
    void done.then(() => {
      stdin.off("data", onData);
      stdin.off("end", onEnd);
      stdin.pause();
      // Reading a terminal or pipe keeps the event loop alive; jobrt must exit after the step.
      if (stdin === process.stdin) process.stdin.destroy();
    });
  });
}
