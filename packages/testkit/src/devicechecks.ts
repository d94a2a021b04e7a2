import { execFileSync } from "node:child_process";
import { rmSync } from "node:fs";
import type { DeviceEdits } from "@jobrt/core";
import type { TestContext } from "vitest";
import { type SuiteKit, fail } from "./suitekit.js";

const MARK = "jobrt-testkit-device";

/** Why the device checks do not apply to this suite, or undefined when they do. */
function notApplicable(kit: SuiteKit): string | undefined {
  if (!(kit.plugin.meta.accepts ?? []).includes("devices")) return "not applicable: meta.accepts has no devices";
  if (!kit.launch) return "real-launch checks turned off (launch: false)";
  if (process.getuid?.() !== 0) return "not applicable: the fake device nodes are made with mknod, which needs root";
  return undefined;
}

/**
 * Two fake devices in the host's /dev, where a vendor's nodes are (copies of /dev/null's and
 * /dev/zero's numbers, so opening them is harmless); the step is given the first only, as the host
 * hands a runtime CDI edits. What the task saw, as lines of output.
 */
async function runWithFakeDevices(kit: SuiteKit, ctx: TestContext): Promise<string> {
  const why = notApplicable(kit);
  if (why) ctx.skip(why);
  const base = `/dev/${MARK}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  const [given, other] = [`${base}-0`, `${base}-1`];
  const edits: DeviceEdits = {
    devices: ["jobrt-testkit.example/fake=0"],
    deviceNodes: [{ path: given, hostPath: given, type: "c", major: 1, minor: 3, permissions: "rwm" }],
    mounts: [],
    env: [`JOBRT_TESTKIT_DEVICE=${given}`],
    additionalGids: [],
    hooks: [],
  };
  const script = `test -c ${given} && echo ${MARK}:given; test -e ${other} && echo ${MARK}:unallocated; echo "${MARK}:env=$JOBRT_TESTKIT_DEVICE"`;
  try {
    execFileSync("mknod", ["-m", "666", given, "c", "1", "3"]);
    execFileSync("mknod", ["-m", "666", other, "c", "1", "5"]);
    const n = kit.node();
    const s = kit.step({
      tasks: 1,
      argv: ["sh", "-c", script],
      container: { ...kit.fixtureContainer(), devices: edits.devices, deviceEdits: edits },
    });
    try {
      const [r] = await kit.launchAll(s, await kit.setupAndRun(n, s));
      if (r?.code !== 0)
        fail(`the task exited with ${r?.code ?? r?.signal}; stderr: ${r?.stderr.trim().slice(0, 300)}`);
      return r.stdout;
    } finally {
      await kit.cleanup(n, s);
    }
  } finally {
    rmSync(given, { force: true });
    rmSync(other, { force: true });
  }
}

/** A runtime that declares `devices` applies the host's CDI edits: the given node seen, another not. */
export function registerDeviceChecks(kit: SuiteKit): void {
  kit.check("devices.given", async (ctx) => {
    const out = await runWithFakeDevices(kit, ctx);
    const seen = out.split("\n");
    if (!seen.includes(`${MARK}:given`))
      fail(
        `the task did not find the given device node (a character device at its path); it printed ${JSON.stringify(out.slice(0, 300))}`,
      );
    if (!seen.some((l) => l.startsWith(`${MARK}:env=/dev/${MARK}-`)))
      fail(
        `the task did not get the device's env JOBRT_TESTKIT_DEVICE; it printed ${JSON.stringify(out.slice(0, 300))}`,
      );
  });
  kit.check("devices.unallocated", async (ctx) => {
    const out = await runWithFakeDevices(kit, ctx);
    if (out.includes(`${MARK}:unallocated`))
      fail("the task sees a device node of the host that the step was not given");
  });
}
