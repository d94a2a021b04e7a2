/**
 * Issue 23, root never acts on what a job user controls: runtime/oci's cleanup of a dead step in a
 * job user's journal. Root's `jobrt gc` (the Slurm Epilog) collects `SpoolDir/jobs.<uid>/`, whose
 * step.json the user may edit by hand, runtime/oci's step state included (docs/reliability.md,
 * "Whose records"). Each cell: a root jobrt runs a `--uid 65534` oci step on a site oci.conf, is
 * SIGKILLed, and its record is handed to nobody's journal (where nobody's own `jobrt exec` would
 * have written it); then, as nobody, the cell edits the record, and root's gc must neither act on
 * the edit nor wait on it, and still remove the real container with oci.conf's own commands.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readFileSync, readdirSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { busyboxBundle } from "../helpers/fixtures.js";
import { jobrt, jobrtBin, requires } from "../helpers/jobrt.js";
import { type FaultSite, faultSite, markedProcesses, waitFor } from "../helpers/leaks.js";

const haveRunc = spawnSync("runc", ["--version"]).status === 0;
const isRoot = process.getuid?.() === 0;
const NOBODY = 65534;
const userns = (() => {
  try {
    return readFileSync("/proc/sys/kernel/unprivileged_userns_clone", "utf8").trim() !== "0";
  } catch {
    return true;
  }
})();
/** How long root's gc may take for one dead step here (a healthy one takes 1 to 3 s). */
const GC_BOUND_MS = 20_000;

interface Site extends FaultSite {
  bundle: string;
  /** Each RunTime* command oci.conf runs appends "<key> <uid> <gid>" here. */
  log: string;
  stepDir: string;
  tag: string;
}

const children: ChildProcess[] = [];
const sites: Site[] = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  // After a failure half-way: nobody's containers, then every process of the cell.
  for (const s of sites.splice(0)) {
    for (const id of rootlessContainers(s))
      spawnSync("runc", ["--root", join(s.stepDir, "runc"), "delete", "--force", id]);
    for (const pid of markedProcesses(s)) spawnSync("kill", ["-KILL", String(pid)]);
  }
});

/**
 * A site that nobody can use (as tests/faults/privilege.test.ts's): rootless runc with its state
 * in the step dir, every command logged; `ProcTrack=pgid`, since root's gc does not use the
 * cgroup a user's record names.
 */
function nobodySite(mode: "run" | "create-start", containerPath?: (dir: string) => string): Site {
  const tag = `jhrec${process.pid}x${Math.random().toString(36).slice(2, 6)}`;
  const id = `${tag}.%j.%s.%t`;
  const R = "runc --rootless=true --root %m/runc";
  const site = faultSite("ProcTrack=pgid\n", {});
  const logDir = join(site.dir, "log");
  const cmd = (key: string, command: string) =>
    `${key}="echo ${key} $(id -u) $(id -g) >> ${logDir}/commands; ${command}"`;
  const start =
    mode === "run"
      ? [cmd("RunTimeRun", `${R} run ${id} -b %b`)]
      : [cmd("RunTimeCreate", `${R} create ${id} -b %b`), cmd("RunTimeStart", `${R} start ${id}`)];
  const place = containerPath?.(site.dir);
  const conf = [
    cmd("RunTimeQuery", `${R} state ${id}`),
    ...start,
    cmd("RunTimeKill", `${R} kill ${id} KILL`),
    cmd("RunTimeDelete", `${R} delete --force ${id}`),
    ...(place ? [`ContainerPath=${place}`] : []),
    "",
  ].join("\n");
  chmodSync(site.dir, 0o755);
  mkdirSync(site.spool, { mode: 0o755 });
  chmodSync(site.spool, 0o755);
  mkdirSync(logDir, { mode: 0o777 });
  chmodSync(logDir, 0o777);
  writeFileSync(join(site.dir, "oci.conf"), conf);
  const bundle = busyboxBundle(join(site.dir, "bundle"), true);
  chmodSync(bundle, 0o755);
  const configFile = join(bundle, "config.json");
  const config = JSON.parse(readFileSync(configFile, "utf8")) as { linux: Record<string, unknown> };
  config.linux.uidMappings = [{ containerID: 0, hostID: NOBODY, size: 1 }];
  config.linux.gidMappings = [{ containerID: 0, hostID: NOBODY, size: 1 }];
  writeFileSync(configFile, JSON.stringify(config));
  chmodSync(configFile, 0o644);
  const s = {
    ...site,
    bundle,
    log: join(logDir, "commands"),
    stepDir: join(place?.replace("%u", "nobody") ?? site.spool, "oci-job1-0"),
    tag,
  };
  sites.push(s);
  return s;
}

/** nobody's running containers (its runc state is in the step dir). */
function rootlessContainers(s: Site): string[] {
  if (!existsSync(join(s.stepDir, "runc"))) return [];
  const r = spawnSync("runc", ["--root", join(s.stepDir, "runc"), "list", "--format", "json"], { encoding: "utf8" });
  if (r.status !== 0) return [];
  return ((JSON.parse(r.stdout || "[]") ?? []) as { id: string; status: string }[])
    .filter((c) => c.status === "running")
    .map((c) => c.id);
}

function containerPid(s: Site, id: string): number {
  return (
    JSON.parse(execFileSync("runc", ["--root", join(s.stepDir, "runc"), "state", id], { encoding: "utf8" })) as {
      pid: number;
    }
  ).pid;
}

const running = (pid: number) => {
  try {
    return !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, "utf8"));
  } catch {
    return false;
  }
};

/**
 * Root's jobrt runs job 1 as nobody, one task in a container, and is SIGKILLed once the container
 * runs; its record then moves to nobody's journal. Returns the record dir and the container's pid.
 */
async function deadStepOfNobody(s: Site): Promise<{ entry: string; pid: number }> {
  const child = spawn(
    process.execPath,
    [
      "--",
      jobrtBin,
      "run",
      "--uid",
      String(NOBODY),
      "--gid",
      String(NOBODY),
      "--runtime",
      "oci",
      "--container",
      s.bundle,
      "sleep",
      "300",
    ],
    {
      env: { ...process.env, ...s.env },
      stdio: ["ignore", "ignore", "pipe"],
    },
  );
  children.push(child);
  let stderr = "";
  child.stderr?.setEncoding("utf8").on("data", (d: string) => {
    stderr += d;
  });
  await waitFor(() => rootlessContainers(s).length === 1, "nobody's container to run", 20_000).catch((e: Error) => {
    throw new Error(`${e.message}: ${stderr}`);
  });
  const [id] = rootlessContainers(s) as [string];
  const exited = new Promise((r) => child.once("exit", r));
  child.kill("SIGKILL");
  await exited;
  // Where nobody's own jobrt exec keeps it: jobs.65534, nobody's, 0700 (userjournals.ts).
  const journal = join(s.spool, `jobs.${NOBODY}`);
  mkdirSync(journal, { mode: 0o700 });
  renameSync(join(s.spool, "jobs", "1"), join(journal, "1"));
  execFileSync("chown", ["-R", `${NOBODY}:${NOBODY}`, journal]);
  return { entry: join(journal, "1", "step-0"), pid: containerPid(s, id) };
}

type Json = Record<string, unknown>;

/** As nobody: rewrites its own step.json with `edit` applied to the runtime-oci state (and the record). */
function editRecord(entry: string, edit: (state: Json, component: Json) => void): void {
  const file = join(entry, "step.json");
  const record = JSON.parse(readFileSync(file, "utf8")) as { components: Json[]; stepStates: Record<string, string> };
  const state = JSON.parse(record.stepStates["0"] as string) as Json;
  edit(state, record.components[0] as Json);
  record.stepStates["0"] = JSON.stringify(state);
  const r = spawnSync("sh", ["-c", 'cat > "$1"', "sh", file], {
    input: JSON.stringify(record),
    uid: NOBODY,
    gid: NOBODY,
    encoding: "utf8",
  });
  expect(r.stderr).toBe("");
  expect(r.status).toBe(0);
}

/** Root's gc, timed; killed at GC_BOUND_MS + 5 s. */
async function rootGc(s: Site, env: Record<string, string> = {}) {
  const t0 = Date.now();
  const r = await jobrt(["gc"], { env: { ...s.env, ...env }, timeoutMs: GC_BOUND_MS + 5000 });
  return { ...r, ms: Date.now() - t0 };
}

/** The dead step is gone for good: its container, processes, step dir and record. */
async function expectCollected(s: Site, gc: Awaited<ReturnType<typeof rootGc>>, containerPid: number): Promise<void> {
  expect({ signal: gc.signal, code: gc.code, stdout: gc.stdout }).toEqual({
    signal: null,
    code: 0,
    stdout: "gc: step 1.0: killed 1 task process group(s); cleaned up oci\n",
  });
  expect(gc.ms).toBeLessThan(GC_BOUND_MS);
  await waitFor(() => !running(containerPid), "the container's process to be gone", 5000);
  await waitFor(() => markedProcesses(s).length === 0, "the step's processes to be gone", 5000);
  expect(existsSync(s.stepDir)).toBe(false);
  expect(readdirSync(join(s.spool, `jobs.${NOBODY}`))).toEqual([]);
  // oci.conf's own commands tore it down, as nobody.
  const lines = readFileSync(s.log, "utf8").trim().split("\n");
  for (const l of lines) expect(l).toMatch(/^RunTime[A-Za-z]+ 65534 65534$/);
  expect(lines).toContain("RunTimeDelete 65534 65534");
}

describe("hostile: root's gc on a runtime-oci record its job user edited", () => {
  requires({
    root: isRoot,
    runc: haveRunc,
    "user namespaces": userns,
    "a built jobrt (pnpm turbo run build)": existsSync(jobrtBin),
  });

  it("stepDir naming an empty dir of root's: root does not rmdir it; the real step dir and container go", async () => {
    const s = nobodySite("run");
    const victim = join(s.dir, "victim");
    mkdirSync(victim, { mode: 0o755 });
    const { entry, pid } = await deadStepOfNobody(s);
    editRecord(entry, (state) => {
      state.stepDir = victim;
      (state.base as Json).stepDir = victim;
    });
    const gc = await rootGc(s);
    expect(gc.stderr).toBe("");
    expect(existsSync(victim)).toBe(true);
    await expectCollected(s, gc, pid);
  });

  it("a record's RunTimeQuery/Kill/Delete of `sleep 100` and time-outs of 1e9 ms: gc runs oci.conf's commands with its own time-outs and ends within the bound", async () => {
    const s = nobodySite("run");
    const { entry, pid } = await deadStepOfNobody(s);
    editRecord(entry, (state) => {
      const conf = state.conf as { commands: Record<string, string> };
      for (const key of ["RunTimeQuery", "RunTimeKill", "RunTimeDelete"]) conf.commands[key] = "sleep 100";
      state.timeouts = { create: 1e9, start: 1e9, query: 1e9, kill: 1e9, delete: 1e9 };
    });
    const gc = await rootGc(s);
    expect(gc.stderr).toBe("");
    await expectCollected(s, gc, pid);
    expect(readFileSync(s.log, "utf8")).toContain("RunTimeQuery 65534 65534");
  });

  it("create/start: a planted watchdog pid (a process of nobody's named like the watchdog) and time-outs of 1e9 ms: gc waits at most the host's own create+kill+delete time-outs", async () => {
    const s = nobodySite("create-start");
    const { entry, pid } = await deadStepOfNobody(s);
    // nobody's process posing as a create/start watchdog ($0 is what cleanup looks for).
    const pose = spawn("sh", ["-c", "sleep 100; :", "jobrt-oci-watchdog"], {
      uid: NOBODY,
      gid: NOBODY,
      stdio: "ignore",
      detached: true,
    });
    children.push(pose);
    const plant = spawnSync("sh", ["-c", `echo ${pose.pid} > '${join(s.stepDir, "task-0", "watchdog.pid")}'`], {
      uid: NOBODY,
      gid: NOBODY,
      encoding: "utf8",
    });
    expect(plant.status).toBe(0);
    editRecord(entry, (state) => {
      state.timeouts = { create: 1e9, start: 1e9, query: 1e9, kill: 1e9, delete: 1e9 };
    });
    // The host's own bound on that wait: create + kill + delete = 3 s here.
    const gc = await rootGc(s, { JOBRT_OCI_TIMEOUTS: "create=1,kill=1,delete=1" });
    expect(gc.stderr).toBe("");
    expect(gc.ms).toBeLessThan(10_000);
    process.kill(-(pose.pid as number), "SIGKILL");
    await expectCollected(s, gc, pid);
  });

  it("ContainerPath=<dir>/%u through a dir of the user's, swapped for a link to root's dir after the crash: root does not rmdir the empty oci-job1-0 of root's it reaches", async () => {
    // A shared 1777 dir, where the user made its own %u component before the step.
    const s = nobodySite("run", (dir) => join(dir, "shared", "%u"));
    const shared = join(s.dir, "shared");
    mkdirSync(shared, { mode: 0o1777 });
    chmodSync(shared, 0o1777);
    expect(spawnSync("mkdir", [join(shared, "nobody")], { uid: NOBODY, gid: NOBODY }).status).toBe(0);
    const victimParent = join(s.dir, "victimparent");
    mkdirSync(join(victimParent, "oci-job1-0"), { recursive: true, mode: 0o755 });
    await deadStepOfNobody(s);
    // As the user: its own component moved away and replaced by a link to root's dir.
    const swap = spawnSync("sh", ["-c", `cd '${shared}' && mv nobody moved && ln -s '${victimParent}' nobody`], {
      uid: NOBODY,
      gid: NOBODY,
      encoding: "utf8",
    });
    expect(swap.stderr).toBe("");
    s.stepDir = join(shared, "moved", "oci-job1-0");
    const gc = await rootGc(s);
    expect(existsSync(join(victimParent, "oci-job1-0"))).toBe(true);
    expect(gc.stderr).toContain(
      `jobrt: warning: runtime oci: not removing ${join(shared, "nobody", "oci-job1-0")}: it is not a directory of uid 65534, as setup made it`,
    );
    expect(gc.code).toBe(0);
  });

  it("a record whose job id climbs out of SpoolDir (`/../../victim/x`) and asks for an image: root does not empty or remove the 0700 dir of root's it names", async () => {
    const s = nobodySite("run");
    const victim = join(s.dir, "victim");
    mkdirSync(victim, { mode: 0o700 });
    writeFileSync(join(victim, "secret"), "root's\n", { mode: 0o600 });
    const { entry, pid } = await deadStepOfNobody(s);
    // oci-image-<J>.<S> below SpoolDir (image/pin.ts) comes out as <site>/victim.
    editRecord(entry, (_state, component) => {
      component.jobId = "/../../victim/x";
      component.stepId = "/..";
      (component.container as { options: Json }).options.image = "busybox";
    });
    const gc = await rootGc(s);
    expect(readdirSync(victim)).toEqual(["secret"]);
    expect(gc.stderr).toMatch(
      /runtime oci: cleanup: the step record is not one jobrt wrote \(job and step ids .* are not numbers\); not acting on it/,
    );
    // The record is not acted on: nobody's container is left to nobody (as the record asked).
    expect(running(pid)).toBe(true);
  });
});
