import { type ChildProcess, spawn } from "node:child_process";
import {
  chownSync,
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  rmSync,
  rmdirSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { findContainerCgroups, hostCgroupDirs, removeCgroups } from "../src/cgroups.js";
import { tempDir } from "../../../tests/helpers/tmp.js";

/** The cgroup2 mount, else the v1 pids hierarchy: where this file makes its own cgroups. */
function testMount(): string | undefined {
  const mounts = readFileSync("/proc/self/mountinfo", "utf8").split("\n");
  const v2 = mounts.find((l) => / - cgroup2 /.test(l));
  const pids = mounts.find((l) => / - cgroup \S+ \S*\bpids\b/.test(l));
  return (v2 ?? pids)?.split(" ")[4];
}

const mount = testMount();
const base = mount ? join(mount, `jobrt-cgtest-${process.pid}`) : "";
const id = `jcg${process.pid}.1.0.0`;
const holders: ChildProcess[] = [];
const links: string[] = [];

/** Every cgroup below `dir`, deepest first. */
function tree(dir: string): string[] {
  if (!existsSync(dir)) return [];
  const below = readdirSync(dir, { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .flatMap((e) => tree(join(dir, e.name)));
  return [...below, dir];
}

async function hold(dir: string): Promise<number> {
  const p = spawn("sleep", ["600"], { stdio: "ignore" });
  holders.push(p);
  await new Promise((r) => p.once("spawn", r));
  writeFileSync(join(dir, "cgroup.procs"), `${p.pid}\n`);
  return p.pid as number;
}

describe("the container's cgroup dirs after a cut-short create (real cgroupfs)", () => {
  beforeAll(() => {
    if (process.getuid?.() !== 0 || !mount)
      throw new Error("missing prerequisite: root and a cgroup2 or v1 pids mount (tests never skip)");
    mkdirSync(join(base, "host"), { recursive: true });
  });
  afterAll(async () => {
    for (const h of holders) h.kill("SIGKILL");
    await Promise.all(
      holders.map((h) =>
        h.exitCode === null && h.signalCode === null ? new Promise((r) => h.once("close", r)) : undefined,
      ),
    );
    for (const l of links) unlinkSync(l);
    for (const d of tree(base)) rmdirSync(d);
  });

  test("hostCgroupDirs: one dir per mounted hierarchy, each an existing cgroup", () => {
    const dirs = hostCgroupDirs();
    expect(dirs.length).toBeGreaterThan(0);
    for (const d of dirs) expect(existsSync(join(d, "cgroup.procs")), d).toBe(true);
  });

  test("found below the recorded host cgroup and below any of its ancestors; nothing else", () => {
    mkdirSync(join(base, "host", id));
    mkdirSync(join(base, id));
    mkdirSync(join(base, "host", `${id}x`));
    const found = findContainerCgroups({ relative: [id] }, [join(base, "host")], 0);
    expect(found.sort()).toEqual([join(base, id), join(base, "host", id)].sort());
    rmdirSync(join(base, "host", `${id}x`));
  });

  test("a recorded dir outside /sys/fs/cgroup's cgroup mounts, with .., or through a symlink is ignored; a name with .. is refused", () => {
    const outside = tempDir("jobrt-cgtest-");
    mkdirSync(join(outside, id));
    const link = `/sys/fs/cgroup/jobrt-cgtest-link-${process.pid}`;
    symlinkSync(outside, link);
    links.push(link);
    expect(findContainerCgroups({ relative: [id] }, [outside], 0)).toEqual([]);
    expect(findContainerCgroups({ relative: [id] }, [link], 0)).toEqual([]);
    expect(findContainerCgroups({ relative: [id] }, [`${base}/../../..${outside}`], 0)).toEqual([]);
    expect(findContainerCgroups({ relative: [`../${id}`, `host/../${id}`] }, [join(base, "host")], 0)).toEqual([]);
    rmSync(outside, { recursive: true });
  });

  test("a dir that belongs to another uid is not the runtime's", () => {
    chownSync(join(base, id), 65534, 65534);
    expect(findContainerCgroups({ relative: [id] }, [join(base, "host")], 0)).toEqual([join(base, "host", id)]);
    expect(findContainerCgroups({ relative: [id] }, [join(base, "host")], 65534)).toEqual([join(base, id)]);
    chownSync(join(base, id), 0, 0);
  });

  test("removeCgroups: empty dirs go children first; a dir holding a process is returned with its pid, not killed", async () => {
    mkdirSync(join(base, id, "child"));
    const pid = await hold(join(base, "host", id));
    const left = await removeCgroups([join(base, id), join(base, "host", id)], undefined, 300);
    expect(existsSync(join(base, id))).toBe(false);
    expect(left).toEqual([{ dir: join(base, "host", id), pids: [pid], error: expect.stringContaining("EBUSY") }]);
    expect(existsSync(`/proc/${pid}`)).toBe(true);
  });

  test("removeCgroups as another user removes nothing that user may not remove", async () => {
    mkdirSync(join(base, "other"));
    const left = await removeCgroups([join(base, "other")], { uid: 65534, gid: 65534 }, 0);
    expect(left.map((l) => [l.dir, l.pids])).toEqual([[join(base, "other"), []]]);
    expect(left[0]?.error).toMatch(/EACCES|EPERM/);
    expect(existsSync(join(base, "other"))).toBe(true);
  });
});
