/**
 * Crash recovery with real containers: jobrt is SIGKILLed mid-step while 4 runc containers run.
 * Nothing of the step is in memory any more; `jobrt gc` finds the step record in SpoolDir, sees
 * that its host process is gone (pid + start time), kills the recorded task process groups and
 * runs runtime/oci's cleanup with the saved StepRecord alone. A live step beside it is never touched.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { busyboxBundle } from "../helpers/fixtures.js";
import { jobrt, jobrtBin, requires } from "../helpers/jobrt.js";
import {
  type FaultSite,
  expectNoLeaks,
  faultSite,
  markedProcesses,
  runcContainers,
  waitFor,
} from "../helpers/leaks.js";

const haveRunc = spawnSync("runc", ["--version"]).status === 0;
const isRoot = process.getuid?.() === 0;

/** A literal per-test prefix in the container id keeps our ids apart from every other runc user. */
function ociConf(tag: string, mode: "run" | "create-start" = "run"): string {
  const id = `${tag}.%j.%s.%t`;
  const runc = "runc --root /run/runc";
  const start =
    mode === "run"
      ? `RunTimeRun="${runc} run ${id} -b %b"\n`
      : `RunTimeCreate="${runc} create ${id} -b %b"\nRunTimeStart="${runc} start ${id}"\n`;
  return `RunTimeQuery="${runc} state ${id}"\n${start}RunTimeKill="${runc} kill -a ${id}"\nRunTimeDelete="${runc} delete --force ${id}"\n`;
}

const started: ChildProcess[] = [];
const sites: FaultSite[] = [];
afterEach(async () => {
  // After a failure half-way: no jobrt of ours keeps running, and gc takes what they leave.
  for (const c of started.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  for (const s of sites.splice(0)) await jobrt(["gc"], { env: s.env });
});

function startStep(env: Record<string, string>, args: string[]): ChildProcess {
  const child = spawn(process.execPath, ["--", jobrtBin, "run", ...args], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "ignore", "pipe"],
  });
  child.stderr?.resume();
  started.push(child);
  return child;
}

const ofJob = (site: FaultSite, tag: string, job: number) =>
  runcContainers(site.dir).filter((id) => id.startsWith(`${tag}.${job}.`));

function exited(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((r) => child.once("exit", (code) => r(code)));
}

describe("crash recovery with runtime oci", () => {
  requires({ runc: haveRunc, root: isRoot, "a built jobrt (pnpm turbo run build)": existsSync(jobrtBin) });
  it.each(["run", "create-start"] as const)(
    "%s mode: SIGKILL of jobrt with 4 containers running: jobrt gc removes containers, spool dirs and processes; a live step is never touched",
    async (mode) => {
      const tag = `jfcrash${process.pid}${mode === "run" ? "r" : "c"}`;
      const site = faultSite("", { "oci.conf": ociConf(tag, mode) });
      sites.push(site);
      const bundle = busyboxBundle(join(site.dir, "bundle"));
      // The live step carries another marker, so the site's marker finds only the dead step's processes.
      const liveMarker = `${site.marker}_LIVE`;
      const liveEnv: Record<string, string> = { JOBRT_CONF_DIR: site.dir, TMPDIR: site.tmp, [liveMarker]: "1" };

      const dead = startStep(site.env, ["--jobid", "71", "-n", "4", "--container", bundle, "sleep", "300"]);
      // The live tasks answer SIGTERM with their own status, which must come through unchanged at the end.
      const live = startStep(liveEnv, [
        "--jobid",
        "72",
        "-n",
        "2",
        "--container",
        bundle,
        "sh",
        "-c",
        "trap 'exit 5' TERM; sleep 300 & wait",
      ]);
      await waitFor(
        () => ofJob(site, tag, 71).length === 4 && ofJob(site, tag, 72).length === 2,
        "6 containers to run",
        20_000,
      );
      const liveIds = ofJob(site, tag, 72).sort();

      dead.kill("SIGKILL");
      await exited(dead);
      // Orphaned for real: the containers, their processes and the spool dirs outlive their host.
      expect(ofJob(site, tag, 71)).toHaveLength(4);
      expect(markedProcesses(site).length).toBeGreaterThanOrEqual(4);
      expect(existsSync(join(site.spool, "oci-job71-0"))).toBe(true);
      expect(existsSync(join(site.spool, "jobs", "71", "step-0", "step.json"))).toBe(true);

      const gc = await jobrt(["gc"], { env: liveEnv });
      expect(gc.stderr).toBe("");
      expect(gc.stdout).toBe("gc: step 71.0: killed 4 task process group(s); cleaned up oci\n");
      expect(gc.code).toBe(0);

      expect(ofJob(site, tag, 71)).toEqual([]);
      expect(existsSync(join(site.spool, "oci-job71-0"))).toBe(false);
      expect(existsSync(join(site.spool, "jobs", "71"))).toBe(false);
      await waitFor(() => markedProcesses(site).length === 0, "the dead step's processes to be gone", 5_000);

      // The live step: same containers, still running, its records and spool dir in place.
      expect(ofJob(site, tag, 72).sort()).toEqual(liveIds);
      for (const id of liveIds)
        expect(
          JSON.parse(spawnSync("runc", ["--root", "/run/runc", "state", id], { encoding: "utf8" }).stdout).status,
        ).toBe("running");
      expect(readdirSync(join(site.spool, "oci-job72-0")).sort()).toEqual(["task-0", "task-1"]);
      expect(live.exitCode).toBe(null);

      // A second gc finds nothing to do and still leaves the live step alone.
      const again = await jobrt(["gc"], { env: liveEnv });
      expect(again.stdout).toBe("");
      expect(again.code).toBe(0);
      expect(ofJob(site, tag, 72)).toHaveLength(2);

      live.kill("SIGTERM");
      expect(await exited(live)).toBe(5);
      await expectNoLeaks(site);
      await expectNoLeaks({ ...site, marker: liveMarker });
    },
  );

  it("a jobrt killed between setup and its first task leaves a step dir that the next jobrt run collects", async () => {
    const tag = `jfcrash${process.pid}b`;
    // A RunTimeRun that never gets to start a container: the task dirs exist, no container does.
    const conf = ociConf(tag).replace(/RunTimeRun="[^"]*"/, 'RunTimeRun="sleep 300"');
    const site = faultSite("", { "oci.conf": conf });
    sites.push(site);
    const bundle = busyboxBundle(join(site.dir, "bundle"));
    const dead = startStep(site.env, ["--jobid", "73", "-n", "2", "--container", bundle, "true"]);
    await waitFor(
      () => existsSync(join(site.spool, "oci-job73-0", "task-1", "config.json")) && markedProcesses(site).length >= 3,
      "the tasks to start",
    );
    dead.kill("SIGKILL");
    await exited(dead);
    expect(existsSync(join(site.spool, "oci-job73-0"))).toBe(true);

    // Every jobrt run collects orphans first, quietly.
    const r = await jobrt(["run", "--runtime", "none", "true"], { env: site.env });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(existsSync(join(site.spool, "oci-job73-0"))).toBe(false);
    await expectNoLeaks(site);
  });
});
