import { readFileSync } from "node:fs";
import { type NodeConf, jobrtError } from "@jobrt/core";
import { isPerTask } from "../../filepattern.js";
import type { PlannedComponent } from "../plan.js";

/** The soft limit on open files (Node raises it to the hard limit at start-up). */
function openFileLimit(): number {
  try {
    const line = readFileSync("/proc/self/limits", "utf8")
      .split("\n")
      .find((l) => l.startsWith("Max open files"));
    const soft = line?.split(/\s{2,}/)[1];
    return soft && /^\d+$/.test(soft) ? Number(soft) : Number.POSITIVE_INFINITY;
  } catch {
    return Number.POSITIVE_INFINITY;
  }
}

/**
 * Copying output line by line holds up to three pipe ends per running task. When the step has
 * more tasks than the open-file limit allows, plain output falls back to the tasks writing to
 * jobrt's stdout and stderr directly; options that need the copy (-l, --json, a shared --output
 * file) fail the step with what to do instead of failing tasks with EMFILE half-way.
 * Returns whether output is copied line by line.
 */
export function checkDescriptorBudget(components: PlannedComponent[], json: boolean, node: NodeConf): boolean {
  const totalTasks = components.reduce((n, c) => n + c.record.tasks.length, 0);
  if (totalTasks <= 1) return true;
  const limit = openFileLimit();
  const needed = totalTasks * 3 + 64;
  if (needed <= limit) return true;
  const sharedFile = (p: string | undefined) => p !== undefined && !isPerTask(p);
  const needsCopy = json || components.some((c) => c.io.label || sharedFile(c.io.output) || sharedFile(c.io.error));
  if (needsCopy) {
    throw jobrtError("ERR_LAUNCH", {
      problem: `${totalTasks} tasks with -l, --json or a shared --output/--error file need about ${needed} open files, but the limit is ${limit}: raise it (ulimit -n), or use per-task files (-o out-%t)`,
    });
  }
  node.log(
    "verbose",
    `${totalTasks} tasks exceed what the open-file limit (${limit}) allows for line-by-line output: tasks write to jobrt's stdout and stderr directly`,
  );
  return false;
}
