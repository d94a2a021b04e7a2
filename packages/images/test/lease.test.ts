import { spawnSync } from "node:child_process";
import { readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { type Holder, isStale, releaseLease, renewLease, tryLease } from "../src/lease.js";
import { procStat } from "@jobrt/host-services";
import { tempDir } from "../../../tests/helpers/tmp.js";

const boot = readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();

function plant(file: string, h: Partial<Holder>): void {
  const holder: Holder = {
    node: "n1",
    pid: process.pid,
    start: procStat(process.pid)?.startTime ?? 0,
    boot,
    expires: Date.now() + 60_000,
    token: "t0",
    ...h,
  };
  writeFileSync(file, JSON.stringify(holder));
}

describe("the shared-store lease (link/rename, no flock)", () => {
  test("one taker wins; the others see the holder; release frees it; nothing else is left in the dir", () => {
    const dir = tempDir("jobrt-lease-");
    const file = join(dir, "img");
    const first = tryLease(file, "n1", 60_000);
    expect("file" in first).toBe(true);
    const second = tryLease(file, "n2", 60_000);
    expect(second).toMatchObject({ heldBy: { node: "n1", pid: process.pid } });
    if (!("file" in first)) throw new Error("unreachable");
    expect(renewLease(first)).toBe(true);
    releaseLease(first);
    expect(readdirSync(dir)).toEqual([]);
    expect("file" in tryLease(file, "n2", 60_000)).toBe(true);
  });

  test("a live holder on another node is respected until its lease expires; an expired one is taken over", () => {
    const dir = tempDir("jobrt-lease-");
    const file = join(dir, "img");
    plant(file, { node: "elsewhere", pid: 1 });
    expect(tryLease(file, "n1", 60_000)).toMatchObject({ heldBy: { node: "elsewhere" } });
    plant(file, { node: "elsewhere", expires: Date.now() - 1 });
    expect(tryLease(file, "n1", 60_000)).toEqual({ heldBy: undefined });
    expect("file" in tryLease(file, "n1", 60_000)).toBe(true);
  });

  test("a dead holder on this node is taken over at once, also after a reboot; a reused pid is not taken for it", () => {
    const dead = spawnSync("sh", ["-c", "echo $$"], { encoding: "utf8" });
    const pid = Number(dead.stdout.trim());
    expect(isStale({ node: "n1", pid, start: 1, boot, expires: Date.now() + 60_000, token: "x" }, "n1")).toBe(true);
    // Our own pid with another start time: a recycled pid.
    expect(
      isStale({ node: "n1", pid: process.pid, start: 1, boot, expires: Date.now() + 60_000, token: "x" }, "n1"),
    ).toBe(true);
    expect(
      isStale(
        {
          node: "n1",
          pid: process.pid,
          start: procStat(process.pid)?.startTime ?? 0,
          boot,
          expires: Date.now() + 60_000,
          token: "x",
        },
        "n1",
      ),
    ).toBe(false);
    // The same node name after a reboot: the holder is gone.
    expect(
      isStale(
        {
          node: "n1",
          pid: process.pid,
          start: procStat(process.pid)?.startTime ?? 0,
          boot: "other-boot",
          expires: Date.now() + 60_000,
          token: "x",
        },
        "n1",
      ),
    ).toBe(true);
    // A torn lease (a crash of its writer) is stale.
    expect(isStale(undefined, "n1")).toBe(true);
  });

  test("a holder whose lease was taken over cannot renew it (it learns it lost it)", () => {
    const dir = tempDir("jobrt-lease-");
    const file = join(dir, "img");
    const mine = tryLease(file, "n1", 60_000);
    if (!("file" in mine)) throw new Error("not taken");
    plant(file, { node: "n2", token: "theirs" });
    expect(renewLease(mine)).toBe(false);
    releaseLease(mine);
    expect(JSON.parse(readFileSync(file, "utf8")).token).toBe("theirs");
  });
});
