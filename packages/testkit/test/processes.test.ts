import { spawn } from "node:child_process";
import { once } from "node:events";
import { afterEach, describe, expect, it } from "vitest";
import { procStat } from "@jobrt/host-services";
import { liveStepProcesses, processGroupAlive } from "../src/processes.js";

const started: number[] = [];
afterEach(() => {
  for (const pid of started.splice(0)) {
    try {
      process.kill(-pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
});

/**
 * A live process and its child, which made its own session (so its own process group) and exited
 * unreaped: a zombie alone in its group. The parent execs sleep, which never reaps.
 */
async function zombieGroup(): Promise<{ parent: number; zombie: number }> {
  const child = spawn("sh", ["-c", "setsid true & echo $!; exec sleep 300"], {
    detached: true,
    stdio: ["ignore", "pipe", "inherit"],
  });
  started.push(child.pid as number);
  const [line] = (await once(child.stdout, "data")) as [Buffer];
  const zombie = Number(line.toString().trim());
  while (procStat(zombie)?.state !== "Z") await new Promise((r) => setTimeout(r, 20));
  return { parent: child.pid as number, zombie };
}

describe("leftover processes: zombies do not count", () => {
  it("a group whose only member is a zombie is not alive, and the zombie is not a leftover", async () => {
    const { parent, zombie } = await zombieGroup();
    expect(procStat(zombie)?.pgrp).toBe(zombie);
    expect(processGroupAlive(zombie)).toBe(false);
    expect(liveStepProcesses({ leaders: [zombie] })).toEqual([]);
    // Its live parent, in a group of its own, is found by its group.
    expect(liveStepProcesses({ leaders: [parent] }).map((p) => p.pid)).toEqual([parent]);
  });

  it("helpers a hook started are found as new descendants of the test process, old ones are not", async () => {
    const before = new Set([process.pid]);
    const helper = spawn("sleep", ["300"], { detached: true, stdio: "ignore" });
    started.push(helper.pid as number);
    expect(liveStepProcesses({ ancestor: process.pid, before }).map((p) => p.pid)).toContain(helper.pid);
    expect(
      liveStepProcesses({ ancestor: process.pid, before: new Set([helper.pid as number]) }).map((p) => p.pid),
    ).not.toContain(helper.pid);
  });
});
