import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { spoolMountProblem } from "../src/spoolmount.js";
import { tempDir } from "../../../tests/helpers/tmp.js";

/** A rootfs with /home, /data (a file), /opt/real, /link -> /opt/real, /up -> ../../.., /hostetc -> /etc (absent in it). */
function rootfs(): string {
  const r = tempDir("jobrt-spoolmount-");
  mkdirSync(join(r, "home"));
  mkdirSync(join(r, "opt/real"), { recursive: true });
  writeFileSync(join(r, "data"), "x");
  symlinkSync("/opt/real", join(r, "link"));
  symlinkSync("../../..", join(r, "up"));
  symlinkSync("/etc", join(r, "hostetc"));
  return r;
}

describe("where the step spool dir may be mounted without creating anything in the image", () => {
  const r = rootfs();
  test("an existing directory of the image: yes", () => {
    expect(spoolMountProblem(r, [], "/home")).toBeUndefined();
    expect(spoolMountProblem(r, [], "/opt/real/")).toBeUndefined();
  });
  test("a path the image lacks, or a file: no, saying why", () => {
    expect(spoolMountProblem(r, [], "/var/spool")).toBe(
      `/var/spool does not exist in the image (${r}), and the runtime would create it there`,
    );
    expect(spoolMountProblem(r, [], "/data")).toBe(`/data is not a directory in the image (${r})`);
    expect(spoolMountProblem(r, [], "/")).toBe("it would hide the whole rootfs");
  });
  test("symlinks are followed inside the rootfs, never on the host: an absolute link is taken from the rootfs, .. stops at it", () => {
    expect(spoolMountProblem(r, [], "/link")).toBeUndefined();
    expect(spoolMountProblem(r, [], "/up/home")).toBeUndefined();
    // The host has /etc; the image does not.
    expect(spoolMountProblem(r, [], "/hostetc")).toBe(
      `/hostetc does not exist in the image (${r}), and the runtime would create it there`,
    );
  });
  test("under a tmpfs the config mounts (runc makes the mount point in memory): yes; the tmpfs itself or another type: no", () => {
    const mounts = [
      { destination: "/dev", type: "tmpfs", source: "tmpfs" },
      { destination: "/sys", type: "sysfs", source: "sysfs" },
    ];
    expect(spoolMountProblem(r, mounts, "/dev/jobrt")).toBeUndefined();
    expect(spoolMountProblem(r, mounts, "/dev")).toMatch(/does not exist in the image/);
    expect(spoolMountProblem(r, mounts, "/sys/jobrt")).toMatch(/does not exist in the image/);
    expect(spoolMountProblem(r, mounts, "/devx/jobrt")).toMatch(/does not exist in the image/);
  });
});
