/**
 * A create cut short by `jobrt gc` with a step cgroup (docs/reliability.md, the create/start rows):
 * jobrt is SIGKILLed while `runc create` is half-way (its cgroup dirs made, its state not yet
 * written), then gc kills the step's cgroup, which takes the create with it. runc's state dir and
 * the cgroup dirs it made in every hierarchy must go, or gc must name what is left. Real runc,
 * the real busybox bundle; the create is held half-way by a createRuntime hook (runc runs it after
 * making the container's cgroups, before it writes the state `runc delete` reads) until gc kills it.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { type Dirent, existsSync, readFileSync, readdirSync, rmdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { busyboxBundle, busyboxRootfs } from "../helpers/fixtures.js";
import { jobrt, jobrtBin, requires } from "../helpers/jobrt.js";
import { type FaultSite, expectNoLeaks, faultSite, runcContainers, waitFor } from "../helpers/leaks.js";

const haveRunc = spawnSync("runc", ["--version"]).status === 0;
const isRoot = process.getuid?.() === 0;
const RUNC = "runc --root /run/runc";

/** Every cgroup (v1) and cgroup2 mount point. */
function cgroupMounts(): string[] {
  return readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .filter((l) => / - cgroup2? /.test(l))
    .map((l) => l.split(" ")[4] as string);
}

/** Every dir named `name` in any cgroup hierarchy (down to 5 levels), deepest first. */
function cgroupDirsNamed(name: string): string[] {
  const found: string[] = [];
  const walk = (dir: string, depth: number) => {
    let entries: Dirent[] = [];
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      if (!e.isDirectory()) continue;
      if (depth < 5) walk(join(dir, e.name), depth + 1);
      if (e.name === name) found.push(join(dir, e.name));
    }
  };
  for (const m of cgroupMounts()) walk(m, 0);
  return found;
}

const children: ChildProcess[] = [];
const sites: FaultSite[] = [];
const ids: string[] = [];
afterEach(async () => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  for (const s of sites.splice(0)) await jobrt(["gc"], { env: s.env }).catch(() => undefined);
  // A failed expectation must not leave this file's runc state or cgroup dirs behind.
  for (const id of ids.splice(0)) {
    // runc forgets a state dir without state (a create cut short): delete removes it.
    if (existsSync(join("/run/runc", id)))
      spawnSync("runc", ["--root", "/run/runc", "delete", "--force", id], { stdio: "ignore" });
    for (const d of cgroupDirsNamed(id)) {
      try {
        rmdirSync(d);
      } catch {
        // still busy: the process in it was killed above and is gone a moment later
      }
    }
  }
});

let seq = 0;
/**
 * A create/start site whose container id is this file's alone, and a bundle whose createRuntime
 * hook holds `runc create` half-way after touching `creating`: for 120 s, so the create is still
 * there when gc comes, however loaded the machine (gc's kill of the step cgroup ends the hook).
 */
function cutSite(
  procTrack: string,
  mode: "create-start" | "run" = "create-start",
): { site: FaultSite; bundle: string; id: string; marker: string } {
  const tag = `jfcut${process.pid}x${++seq}`;
  const c = `${tag}.%j.%s.%t`;
  const conf = [
    `RunTimeQuery="${RUNC} state ${c}"`,
    ...(mode === "run"
      ? [`RunTimeRun="${RUNC} run ${c} -b %b"`]
      : [`RunTimeCreate="${RUNC} create ${c} -b %b"`, `RunTimeStart="${RUNC} start ${c}"`]),
    `RunTimeKill="${RUNC} kill -a ${c}"`,
    `RunTimeDelete="${RUNC} delete --force ${c}"`,
  ].join("\n");
  const site = faultSite(`ProcTrack=${procTrack}\n`, { "oci.conf": `${conf}\n` });
  sites.push(site);
  const bundle = busyboxBundle(join(site.dir, "bundle"));
  const marker = join(site.dir, "creating");
  const config = JSON.parse(readFileSync(join(bundle, "config.json"), "utf8")) as Record<string, unknown>;
  config.hooks = { createRuntime: [{ path: "/bin/sh", args: ["sh", "-c", `touch ${marker}; sleep 120`] }] };
  writeFileSync(join(bundle, "config.json"), JSON.stringify(config));
  const id = `${tag}.1.0.0`;
  ids.push(id);
  return { site, bundle, id, marker };
}

/** Starts the step, waits until runc create is half-way, SIGKILLs jobrt; returns the cgroup dirs runc had made. */
async function killMidCreate(site: FaultSite, bundle: string, id: string, marker: string): Promise<string[]> {
  const child = spawn(process.execPath, ["--", jobrtBin, "run", "--container", bundle, "sleep", "600"], {
    env: { ...process.env, ...site.env },
    stdio: "ignore",
  });
  children.push(child);
  await waitFor(() => existsSync(marker), "runc create to run its hook", 20_000);
  const made = cgroupDirsNamed(id);
  child.kill("SIGKILL");
  await new Promise((r) => child.once("close", r));
  return made;
}

describe("faults: jobrt SIGKILLed while runc create runs, then gc with a step cgroup", () => {
  requires({ runc: haveRunc, root: isRoot, "a built jobrt (pnpm turbo run build)": existsSync(jobrtBin) });
  beforeAll(() => {
    busyboxRootfs();
  });

  for (const procTrack of ["cgroup2", "cgroup1"]) {
    it(`ProcTrack=${procTrack}: gc removes runc's state dir and the cgroup dirs runc made in every hierarchy, and says cleaned up (3 trials)`, async () => {
      for (let trial = 0; trial < 3; trial++) {
        const { site, bundle, id, marker } = cutSite(procTrack);
        const made = await killMidCreate(site, bundle, id, marker);
        // The race is real: runc had made its cgroup dirs (one per v1 controller, and cgroup2).
        expect(made.length, `trial ${trial}`).toBeGreaterThan(1);
        const gc = await jobrt(["gc"], { env: site.env });
        expect(gc.stderr, `trial ${trial}`).toBe("");
        expect(gc.stdout, `trial ${trial}`).toBe("gc: step 1.0: killed 1 task process group(s); cleaned up oci\n");
        expect(gc.code).toBe(0);
        expect(existsSync(join("/run/runc", id)), `trial ${trial}`).toBe(false);
        expect(cgroupDirsNamed(id), `trial ${trial}`).toEqual([]);
        expect(runcContainers(site.dir)).toEqual([]);
        await expectNoLeaks(site);
      }
    }, 180_000);
  }

  it("run mode: `runc run` SIGKILLed half-way through its create by gc's kill of the step cgroup: its state dir and cgroup dirs go too (2 trials)", async () => {
    for (let trial = 0; trial < 2; trial++) {
      const { site, bundle, id, marker } = cutSite("cgroup2", "run");
      const made = await killMidCreate(site, bundle, id, marker);
      expect(made.length, `trial ${trial}`).toBeGreaterThan(1);
      const gc = await jobrt(["gc"], { env: site.env });
      expect(gc.stderr, `trial ${trial}`).toBe("");
      expect(gc.stdout, `trial ${trial}`).toBe("gc: step 1.0: killed 1 task process group(s); cleaned up oci\n");
      expect(gc.code).toBe(0);
      expect(existsSync(join("/run/runc", id)), `trial ${trial}`).toBe(false);
      expect(cgroupDirsNamed(id), `trial ${trial}`).toEqual([]);
      await expectNoLeaks(site);
    }
  }, 120_000);

  it("run mode: `runc run` killed before it made any cgroup dir (its state dir holds only exec.fifo): the run's cleanup removes the state dir", async () => {
    // runc's first step of a create, stood in for by a shell: the state dir and its exec.fifo, then
    // the kill (no hook of runc's runs that early, and cgroup dirs, which a real kill later would
    // also leave, are what the test above covers). runc's query finds no container there; its
    // delete removes the dir.
    const tag = `jfcut${process.pid}x${++seq}`;
    const id = `${tag}.1.0.0`;
    ids.push(id);
    const c = `${tag}.%j.%s.%t`;
    const conf = [
      `RunTimeQuery="${RUNC} state ${c}"`,
      `RunTimeRun="mkdir /run/runc/${c} && mkfifo /run/runc/${c}/exec.fifo && kill -s KILL $$"`,
      `RunTimeKill="${RUNC} kill -a ${c}"`,
      `RunTimeDelete="${RUNC} delete --force ${c}"`,
    ].join("\n");
    const site = faultSite("ProcTrack=pgid\n", { "oci.conf": `${conf}\n` });
    sites.push(site);
    const bundle = busyboxBundle(join(site.dir, "bundle"));
    const r = await jobrt(["run", "--container", bundle, "true"], { env: site.env });
    expect(r.code, r.stderr).toBe(137);
    expect(existsSync(join("/run/runc", id))).toBe(false);
    await expectNoLeaks(site);
  });

  it("not only gc: SIGTERM to jobrt while runc create is held, so the host kills the step cgroup after KillWait: the run removes the dirs too", async () => {
    const { site, bundle, id, marker } = cutSite("cgroup2");
    const child = spawn(process.execPath, ["--", jobrtBin, "run", "--container", bundle, "sleep", "600"], {
      env: { ...process.env, ...site.env },
      stdio: ["ignore", "ignore", "pipe"],
    });
    children.push(child);
    let stderr = "";
    child.stderr?.setEncoding("utf8").on("data", (d: string) => {
      stderr += d;
    });
    await waitFor(() => existsSync(marker), "runc create to run its hook", 20_000);
    expect(cgroupDirsNamed(id).length).toBeGreaterThan(1);
    const code = new Promise<number | null>((r) => child.once("close", (c) => r(c)));
    child.kill("SIGTERM");
    expect(await code, stderr).not.toBe(0);
    expect(stderr).not.toContain("cgroup");
    expect(existsSync(join("/run/runc", id))).toBe(false);
    expect(cgroupDirsNamed(id)).toEqual([]);
    await expectNoLeaks(site);
  }, 120_000);

  it("a cgroup dir that still holds a process is named in gc's error, not claimed clean; the next gc, once it is empty, removes it", async () => {
    const { site, bundle, id, marker } = cutSite("cgroup2");
    const made = await killMidCreate(site, bundle, id, marker);
    const busy = made.find((d) => d.startsWith("/sys/fs/cgroup/pids/")) ?? (made[0] as string);
    // A process of the test's own, moved into one of the dirs runc made.
    const holder = spawn("sleep", ["600"], { stdio: "ignore" });
    children.push(holder);
    await waitFor(() => holder.pid !== undefined, "sleep to start");
    writeFileSync(join(busy, "cgroup.procs"), `${holder.pid}\n`);
    const gc = await jobrt(["gc"], { env: site.env });
    const taskDir = `${site.spool}/oci-job1-0/task-0`;
    expect(gc.stderr).toMatch(/^jobrt: gc: step 1\.0: cleanup failed, kept \S+ for another try: .*\n$/);
    expect(gc.stderr).toContain(
      `task 0: RunTimeCreate was cut short and the cgroup dirs of container ${id} still hold processes: ${busy} (pids ${holder.pid}); end those processes, then run \`jobrt gc\` again to remove the dirs (kept ${taskDir})`,
    );
    expect(gc.stdout).toBe("");
    expect(gc.code).toBe(1);
    // Everything else went: runc's state dir, the empty dirs.
    expect(existsSync(join("/run/runc", id))).toBe(false);
    expect(cgroupDirsNamed(id)).toEqual([busy]);
    holder.kill("SIGKILL");
    await new Promise((r) => holder.once("close", r));
    const again = await jobrt(["gc"], { env: site.env });
    expect(again.stderr).toBe("");
    expect(again.stdout).toBe("gc: step 1.0: killed 0 task process group(s); cleaned up oci\n");
    expect(again.code).toBe(0);
    expect(cgroupDirsNamed(id)).toEqual([]);
    await expectNoLeaks(site);
  }, 120_000);
});
