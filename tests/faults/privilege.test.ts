/**
 * The privilege model, host as root and tasks as `--uid nobody --gid nogroup`: task processes and
 * every runtime command run as the user, the step's files are owned as docs/runtime-oci.md says,
 * and a symlink the user plants in its spool dir cannot turn root's cleanup against files outside.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { busyboxBundle } from "../helpers/fixtures.js";
import { failureLine, jobrt, jobrtBin, requires } from "../helpers/jobrt.js";
import { type FaultSite, expectNoLeaks, faultSite, markedProcesses, waitFor } from "../helpers/leaks.js";

const haveRunc = spawnSync("runc", ["--version"]).status === 0;
const isRoot = process.getuid?.() === 0;
const NOBODY = 65534;
const NOGROUP = 65534;
const userns = (() => {
  try {
    return readFileSync("/proc/sys/kernel/unprivileged_userns_clone", "utf8").trim() !== "0";
  } catch {
    return true;
  }
})();

const children: ChildProcess[] = [];
const sites: FaultSite[] = [];
afterEach(async () => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  for (const s of sites.splice(0)) await jobrt(["gc"], { env: s.env }).catch(() => undefined);
});

/**
 * A site that user nobody can use: directories on the way open to all, a rootless bundle mapped to
 * nobody, and an oci.conf (create/start, rootless runc with its state in the step dir) whose every
 * command first appends "<key> <uid> <gid>" to a log. With `deleteFailsOnce`, each task's first
 * RunTimeDelete (its supervisor's) exits 1 without deleting, so the host's cleanup must.
 */
function nobodySite({
  precreateSpool = true,
  deleteFailsOnce = false,
}: {
  precreateSpool?: boolean;
  deleteFailsOnce?: boolean;
} = {}): FaultSite & { bundle: string; log: string } {
  const tag = `jfpriv${process.pid}x${Math.random().toString(36).slice(2, 6)}`;
  const id = `${tag}.%j.%s.%t`;
  const logDir = "LOGDIR";
  const R = "runc --rootless=true --root %m/runc";
  const cmd = (key: string, command: string) =>
    `${key}="echo ${key} $(id -u) $(id -g) >> ${logDir}/commands; ${command}"`;
  const conf = [
    cmd("RunTimeQuery", `${R} state ${id}`),
    cmd("RunTimeCreate", `${R} create ${id} -b %b`),
    cmd("RunTimeStart", `${R} start ${id}`),
    // Not `kill -a`: rootless runc cannot reach a container's cgroup on a cgroup-v1 node.
    cmd("RunTimeKill", `${R} kill ${id}`),
    cmd(
      "RunTimeDelete",
      `${deleteFailsOnce ? `mkdir ${logDir}/once.%t 2>/dev/null && exit 1; ` : ""}${R} delete --force ${id}`,
    ),
    "CreateEnvFile=newline",
    "",
  ].join("\n");
  const site = faultSite("", {});
  sites.push(site);
  chmodSync(site.dir, 0o755);
  // As docs/slurm.md asks of a SpoolDir shared with job users (the file helper running as the
  // user must get through it); the cell "a SpoolDir that jobrt creates itself" covers the other case.
  if (precreateSpool) {
    mkdirSync(site.spool, { mode: 0o755 });
    chmodSync(site.spool, 0o755);
  }
  const log = join(site.dir, "log");
  mkdirSync(log, { mode: 0o777 });
  chmodSync(log, 0o777);
  writeFileSync(join(site.dir, "oci.conf"), conf.replaceAll(logDir, log));
  const bundle = busyboxBundle(join(site.dir, "bundle"), true);
  chmodSync(bundle, 0o755);
  const configFile = join(bundle, "config.json");
  const config = JSON.parse(readFileSync(configFile, "utf8")) as { linux: Record<string, unknown> };
  config.linux.uidMappings = [{ containerID: 0, hostID: NOBODY, size: 1 }];
  config.linux.gidMappings = [{ containerID: 0, hostID: NOGROUP, size: 1 }];
  writeFileSync(configFile, JSON.stringify(config));
  chmodSync(configFile, 0o644);
  return { ...site, bundle, log: join(log, "commands") };
}

function startAsNobody(
  site: FaultSite,
  args: string[],
): { child: ChildProcess; done: Promise<{ code: number | null; stderr: string }> } {
  const child = spawn(process.execPath, ["--", jobrtBin, "run", "--uid", "nobody", "--gid", "nogroup", ...args], {
    env: { ...process.env, ...site.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  let stderr = "";
  child.stderr?.setEncoding("utf8").on("data", (d: string) => {
    stderr += d;
  });
  child.stdout?.resume();
  return { child, done: new Promise((r) => child.once("close", (code) => r({ code, stderr }))) };
}

function ids(pid: number): { uid: number[]; gid: number[]; groups: string } | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const field = (name: string) => (new RegExp(`^${name}:\\s*(.*)$`, "m").exec(status)?.[1] ?? "").trim();
    return {
      uid: field("Uid").split(/\s+/).map(Number),
      gid: field("Gid").split(/\s+/).map(Number),
      groups: field("Groups"),
    };
  } catch {
    return undefined;
  }
}

/** Rootless runc keeps its state in the step dir (--root %m/runc), not in /run/runc. */
function rootlessContainers(stepDir: string): string[] {
  // `runc list` makes a missing state dir, as root here: only look once the user's runc made it.
  if (!existsSync(join(stepDir, "runc"))) return [];
  const r = spawnSync("runc", ["--root", join(stepDir, "runc"), "list", "--format", "json"], { encoding: "utf8" });
  if (r.status !== 0) return [];
  return ((JSON.parse(r.stdout || "[]") ?? []) as { id: string; status: string }[])
    .filter((c) => c.status === "running")
    .map((c) => c.id);
}

const owner = (path: string) => {
  const st = lstatSync(path);
  return {
    uid: st.uid,
    gid: st.gid,
    mode: (st.mode & 0o7777).toString(8),
    type: st.isDirectory() ? "dir" : st.isSymbolicLink() ? "link" : "file",
  };
};

describe("privilege: host as root, tasks as nobody", () => {
  requires({ root: isRoot, "a built jobrt (pnpm turbo run build)": existsSync(jobrtBin) });
  it("runtime none: every task process runs as nobody:nogroup with no supplementary group", async () => {
    const site = faultSite();
    sites.push(site);
    const r = await jobrt(
      [
        "run",
        "--uid",
        "nobody",
        "--gid",
        "nogroup",
        "-n",
        "3",
        "--runtime",
        "none",
        "sh",
        "-c",
        'echo "$(id -u) $(id -g) $(id -G) $USER $HOME"',
      ],
      { env: site.env },
    );
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const home = readFileSync("/etc/passwd", "utf8")
      .split("\n")
      .find((l) => l.startsWith("nobody:"))
      ?.split(":")[5];
    expect(r.stdout.trim().split("\n")).toEqual(Array(3).fill(`65534 65534 65534 nobody ${home}`));
    await expectNoLeaks(site);
  });

  describe("runtime oci (rootless runc, create/start)", () => {
    requires({ runc: haveRunc, "user namespaces": userns });
    it("the supervisor, runc and every RunTime* command (cleanup's too) run as the user; the step's files are owned as documented", async () => {
      const site = nobodySite({ deleteFailsOnce: true });
      const { child, done } = startAsNobody(site, [
        "-n",
        "2",
        "--container",
        site.bundle,
        "sh",
        "-c",
        "trap 'exit 7' TERM; sleep 600 & wait",
      ]);
      const stepDir = join(site.spool, "oci-job1-0");
      await waitFor(
        () => rootlessContainers(stepDir).length === 2 && existsSync(join(stepDir, "task-1", "container.pid")),
        "2 rootless containers to run",
        20_000,
      ).catch(async (e) => {
        child.kill("SIGKILL");
        throw new Error(`${e.message}: ${(await done).stderr}`);
      });

      // Every process of the step the host started, and what they started, is the user's.
      // (jobrt itself, the root host, carries the marker too.)
      const procs = markedProcesses(site).filter((pid) => pid !== child.pid);
      expect(procs.length).toBeGreaterThanOrEqual(4);
      for (const pid of procs) {
        const who = ids(pid);
        if (!who) continue;
        expect({ pid, uid: who.uid, gid: who.gid }).toEqual({
          pid,
          uid: [NOBODY, NOBODY, NOBODY, NOBODY],
          gid: [NOGROUP, NOGROUP, NOGROUP, NOGROUP],
        });
      }

      // docs/runtime-oci.md, "Lifecycle": S 0770 and task dirs 0770 owned by the job user; the
      // files in them 0600 owned by the job user. The launcher's own records stay root's, 0700/0600.
      expect(owner(stepDir)).toEqual({ uid: NOBODY, gid: NOGROUP, mode: "770", type: "dir" });
      for (const t of [0, 1]) {
        const taskDir = join(stepDir, `task-${t}`);
        expect(owner(taskDir)).toEqual({ uid: NOBODY, gid: NOGROUP, mode: "770", type: "dir" });
        for (const f of ["config.json", "environment", "container.pid"]) {
          expect({ f, ...owner(join(taskDir, f)) }).toEqual({
            f,
            uid: NOBODY,
            gid: NOGROUP,
            mode: "600",
            type: "file",
          });
        }
      }
      expect(owner(site.spool)).toMatchObject({ uid: 0, type: "dir" });
      expect(owner(join(site.spool, "jobs"))).toEqual({ uid: 0, gid: 0, mode: "700", type: "dir" });
      expect(owner(join(site.spool, "jobs", "1", "step-0", "step.json"))).toEqual({
        uid: 0,
        gid: 0,
        mode: "600",
        type: "file",
      });

      child.kill("SIGTERM");
      const r = await done;
      // Each supervisor's own RunTimeDelete failed (the site's first one per task does), so cleanup
      // tore the containers down.
      const deleteFailed = "jobrt-oci: RunTimeDelete exited with status 1: \n";
      expect(r.stderr).toBe(`${deleteFailed}${deleteFailed}${failureLine("tasks 0-1", "Exited with exit code 7")}`);
      expect(r.code).toBe(7);
      const lines = readFileSync(site.log, "utf8").trim().split("\n");
      const keys = new Set(lines.map((l) => l.split(" ")[0]));
      for (const k of ["RunTimeCreate", "RunTimeStart", "RunTimeQuery", "RunTimeKill", "RunTimeDelete"])
        expect(keys).toContain(k);
      for (const l of lines) expect(l).toMatch(/^RunTime[A-Za-z]+ 65534 65534$/);
      // The host's own cleanup queried and deleted too (after the supervisors), still as the user.
      // Its two tasks' teardowns run at once: the last four lines, in either order.
      expect(
        lines
          .slice(-4)
          .map((l) => l.split(" ")[0])
          .sort(),
      ).toEqual(["RunTimeDelete", "RunTimeDelete", "RunTimeQuery", "RunTimeQuery"]);
      await expectNoLeaks(site);
    });

    // The job user's file helper must get through SpoolDir to its step dir: jobrt makes it 0755.
    it("a SpoolDir that jobrt creates itself works for a job of user nobody", async () => {
      const site = nobodySite({ precreateSpool: false });
      const r = await jobrt(
        ["run", "--uid", "nobody", "--gid", "nogroup", "--container", site.bundle, "sh", "-c", "exit 3"],
        { env: site.env },
      );
      expect(r.stderr).toBe(failureLine("task 0", "Exited with exit code 3"));
      expect(r.code).toBe(3);
      await expectNoLeaks(site);
    });

    it("symlinks the user plants in its spool dir do not make root's cleanup delete or chown anything outside it", async () => {
      const site = nobodySite();
      // Root's files outside the spool dir, named like what cleanup removes.
      const victim = join(site.dir, "victim");
      mkdirSync(victim, { mode: 0o755 });
      for (const f of ["config.json", "environment", "container.pid", "precious"])
        writeFileSync(join(victim, f), `root's ${f}\n`, { mode: 0o644 });
      const before = readdirSync(victim).map((f) => ({
        f,
        ...owner(join(victim, f)),
        text: readFileSync(join(victim, f), "utf8"),
      }));

      const { child, done } = startAsNobody(site, [
        "-n",
        "2",
        "--container",
        site.bundle,
        "sh",
        "-c",
        "trap 'exit 7' TERM; sleep 600 & wait",
      ]);
      const stepDir = join(site.spool, "oci-job1-0");
      await waitFor(
        () => rootlessContainers(stepDir).length === 2 && existsSync(join(stepDir, "task-1", "container.pid")),
        "2 rootless containers to run",
        20_000,
      ).catch(async (e) => {
        child.kill("SIGKILL");
        throw new Error(`${e.message}: ${(await done).stderr}`);
      });

      // As the user (it owns S and the task dirs): swap task-1 for a link to root's dir, put links
      // to root's files and dir into task-0, and a link named like a runtime leftover into S.
      const plant = spawnSync(
        "sh",
        [
          "-c",
          `set -e; cd '${stepDir}'; mv task-1 moved-away; ln -s '${victim}' task-1;` +
            ` ln -s '${victim}/precious' task-0/precious; ln -s '${victim}' task-0/dir; rm -f task-0/environment; ln -s '${victim}/environment' task-0/environment;` +
            ` ln -s '${victim}' runc-state-link`,
        ],
        { uid: NOBODY, gid: NOGROUP, encoding: "utf8" },
      );
      expect(plant.stderr).toBe("");
      expect(plant.status).toBe(0);

      child.kill("SIGTERM");
      const r = await done;
      expect({ code: r.code, stderr: r.stderr }).toEqual({
        code: 7,
        stderr: failureLine("tasks 0-1", "Exited with exit code 7"),
      });

      // Nothing outside was removed, rewritten or chowned; the links themselves are gone.
      const after = readdirSync(victim).map((f) => ({
        f,
        ...owner(join(victim, f)),
        text: readFileSync(join(victim, f), "utf8"),
      }));
      expect(after).toEqual(before);
      expect(owner(victim)).toEqual({ uid: 0, gid: 0, mode: "755", type: "dir" });
      expect(statSync(join(victim, "precious")).uid).toBe(0);
      expect(existsSync(join(stepDir, "task-0"))).toBe(false);
      expect(existsSync(join(stepDir, "runc-state-link"))).toBe(false);
      await expectNoLeaks(site);
    });
  });
});
