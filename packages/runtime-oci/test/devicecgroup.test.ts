import { existsSync, mkdirSync, readdirSync, rmdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { ownV1Cgroup } from "../src/cgroups.js";
import { devicesCgroupRefusesWhitelist } from "../src/devicecgroup.js";

// The probe behind runtime-oci's device rules under Slurm's ConstrainDevices (docs/devices.md,
// "Where only the allocation is enforced"), on the real v1 devices hierarchy: this test process
// moves itself into cgroups made here, the way a Slurm task sits in its step's, and back.
const own = ownV1Cgroup("devices");
const base = own ? join(own.mount, `jobrt-devtest-${process.pid}`) : "";

function moveSelf(dir: string): void {
  writeFileSync(join(dir, "cgroup.procs"), `${process.pid}\n`);
}

if (own) {
  describe("devicesCgroupRefusesWhitelist (a real v1 devices hierarchy)", () => {
    beforeAll(() => {
      if (process.getuid?.() !== 0) throw new Error("missing prerequisite: root (tests never skip)");
      mkdirSync(join(base, "open"), { recursive: true });
      mkdirSync(join(base, "constrained"));
      // What Slurm's ConstrainDevices writes for a GPU the step was not allocated.
      writeFileSync(join(base, "constrained", "devices.deny"), "c 240:9 rwm");
    });
    afterAll(() => {
      moveSelf(own.dir);
      for (const d of ["open", "constrained", ""]) if (existsSync(join(base, d))) rmdirSync(join(base, d));
    });

    test("below a cgroup that denies one device: refused (runc's `c *:* m` overlaps it)", () => {
      moveSelf(join(base, "constrained"));
      expect(devicesCgroupRefusesWhitelist()).toBe(true);
      moveSelf(own.dir);
    });

    test("below a cgroup that denies nothing: not refused", () => {
      moveSelf(join(base, "open"));
      expect(devicesCgroupRefusesWhitelist()).toBe(false);
      moveSelf(own.dir);
    });

    test("the probe's cgroup is removed again", () => {
      const left = ["open", "constrained"].flatMap((d) =>
        readdirSync(join(base, d), { withFileTypes: true }).filter((e) => e.isDirectory()),
      );
      expect(left).toEqual([]);
    });
  });
} else {
  describe("devicesCgroupRefusesWhitelist without a v1 devices hierarchy", () => {
    test("cgroup v2 nests device rules (eBPF): never refused", () => {
      expect(devicesCgroupRefusesWhitelist()).toBe(false);
    });
  });
}
