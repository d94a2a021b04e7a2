import { chmodSync, chownSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { repoRoot, runProgram, tempDir } from "../helpers/jobrt.js";
import { lockCluster, slurm, slurmDir, sortedLines, stopCluster } from "./cluster.js";

const script = join(repoRoot, "scripts/slurm-local.sh");
const run = (...args: string[]) => runProgram(["sh", script, ...args, "--dir", slurmDir], { timeoutMs: 280_000 });

/** DIR/created: what start made, one `kind name values...` line each. */
function createdLines(): string[][] {
  return readFileSync(join(slurmDir, "created"), "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => l.split(" "));
}

/** Recorded daemon pids, by daemon name. */
function recordedPids(): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [kind, name, pid] of createdLines()) if (kind === "pid") out[name as string] = Number(pid);
  return out;
}

async function bridgeIndex(): Promise<string> {
  const r = await runProgram(["cat", "/sys/class/net/jrt-br0/ifindex"]);
  return r.stdout.trim();
}

/** True while `pid` runs `program` (a zombie or a reused pid does not count). */
function runs(pid: number, program: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ").includes(program);
  } catch {
    return false;
  }
}

async function ourNamespaces(): Promise<string[]> {
  const r = await runProgram(["ip", "netns", "list"]);
  return sortedLines(r.stdout)
    .map((l) => l.split(" ")[0] as string)
    .filter((n) => n.startsWith("jobrt-slurm-"));
}

// The script's own life cycle: sizes, idempotent start, recovery from a run that died, clean stop.
describe("scripts/slurm-local.sh start/status/stop", () => {
  beforeAll(() => lockCluster());
  afterAll(() => stopCluster());

  it("bad input is a usage error: exit 2 and one line naming the option and the rule", async () => {
    const cases: [string[], Record<string, string>, RegExp][] = [
      [["start", "--nodes", "0"], {}, /--nodes 0: must be a whole number from 1 to 26/],
      [["start", "--nodes", "two"], {}, /--nodes two: must be a whole number/],
      [["start", "--frob"], {}, /unknown option --frob/],
      [["restart"], {}, /unknown command restart/],
      [["start"], { JOBRT_SLURM_NET: "8.8.8" }, /JOBRT_SLURM_NET=8\.8\.8: .*private \/24/],
      [["start"], { JOBRT_SLURM_NET: "10.250" }, /JOBRT_SLURM_NET=10\.250: /],
      [["start", "--jobrt", "jobrt'; reboot"], {}, /--jobrt jobrt'; reboot: give an absolute path or a command name/],
      [["start", "--jobrt", "bin/jobrt"], {}, /--jobrt bin\/jobrt: give an absolute path or a command name/],
      [["start", "--jobrt", "/nonexistent/jobrt"], {}, /--jobrt \/nonexistent\/jobrt: not an executable file/],
    ];
    for (const [args, env, message] of cases) {
      const r = await runProgram(["sh", script, ...args, "--dir", slurmDir], { env: { ...process.env, ...env } });
      expect(r.code, args.join(" ")).toBe(2);
      expect(r.stderr.trim().split("\n"), args.join(" ")).toHaveLength(1);
      expect(r.stderr).toMatch(new RegExp(`^slurm-local\\.sh: ${message.source}`));
    }
  });

  it("a DIR another user owns or may write (a planted Epilog, a planted DIR/created) is refused: one line, exit 1, nothing made", async () => {
    const planted = tempDir("jobrt-slurm-planted-");
    try {
      writeFileSync(join(planted, "created"), "netns jobrt-slurm-nodeb 1\nlink jrt-br0 1\n");
      chownSync(planted, 65534, 65534);
      const groupWritable = tempDir("jobrt-slurm-gw-");
      chmodSync(groupWritable, 0o775);
      for (const [dir, cmd] of [
        [planted, "start"],
        [planted, "stop"],
        [planted, "status"],
        [groupWritable, "start"],
      ] as const) {
        const r = await runProgram(["sh", script, cmd, "--dir", dir]);
        expect(r.code, `${cmd} ${dir}`).toBe(1);
        expect(r.stderr).toBe(
          `slurm-local.sh: ${dir}: not a directory owned by root (or you) and writable by no one else (nor is ${dir}/created); refusing to use it\n`,
        );
      }
      expect(readdirSync(planted)).toEqual(["created"]);
      expect(readdirSync(groupWritable)).toEqual([]);
      rmSync(groupWritable, { recursive: true });
      expect(await ourNamespaces()).toEqual([]);
    } finally {
      rmSync(planted, { recursive: true, force: true });
    }
  });

  it("start --nodes 1 runs one node in this host's namespaces; a second start leaves it as it is", async () => {
    const first = await run("start", "--nodes", "1");
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toContain(`export SLURM_CONF=${join(slurmDir, "slurm.conf")}`);
    const pids = recordedPids();
    expect(Object.keys(pids).sort()).toEqual(["munged", "slurmctld", "slurmd-nodea"]);
    expect(await ourNamespaces()).toEqual([]);
    const r = await slurm(["srun", "-n", "2", "sh", "-c", "echo $SLURMD_NODENAME"]);
    expect(sortedLines(r.stdout)).toEqual(["nodea", "nodea"]);

    const again = await run("start", "--nodes", "1");
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/already running/);
    expect(recordedPids()).toEqual(pids);
  });

  it("a cluster whose daemons were all SIGKILLed (namespace left behind): status says so, start --nodes 3 recovers", async () => {
    const two = await run("start", "--nodes", "2");
    expect(two.code, two.stderr).toBe(0);
    expect(await ourNamespaces()).toEqual(["jobrt-slurm-nodeb"]);
    const before = recordedPids();
    expect(Object.keys(before)).toHaveLength(4);
    for (const pid of Object.values(before)) process.kill(pid, "SIGKILL");
    for (const [name, pid] of Object.entries(before)) {
      const program = name.startsWith("slurmd-") ? "slurmd" : name;
      const end = Date.now() + 10_000;
      while (runs(pid, program) && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
      expect(runs(pid, program)).toBe(false);
    }
    const status = await run("status");
    expect(status.code).toBe(1);
    expect(status.stdout).toMatch(/slurmctld: not running/);
    expect(await ourNamespaces()).toEqual(["jobrt-slurm-nodeb"]);

    const start = await run("start", "--nodes", "3");
    expect(start.code, start.stderr).toBe(0);
    expect(await ourNamespaces()).toEqual(["jobrt-slurm-nodeb", "jobrt-slurm-nodec"]);
    const r = await slurm(["srun", "-N", "3", "sh", "-c", 'echo "$SLURMD_NODENAME $(hostname)"']);
    expect(r.code).toBe(0);
    const lines = sortedLines(r.stdout);
    expect(lines.map((l) => l.split(" ")[0])).toEqual(["nodea", "nodeb", "nodec"]);
    expect(lines.slice(1)).toEqual(["nodeb nodeb", "nodec nodec"]);
  });

  it("stop --dir <a dir that holds no cluster> refuses with one line and exit 3, and touches nothing", async () => {
    const other = tempDir("jobrt-slurm-notacluster-");
    writeFileSync(join(other, "keep.txt"), "mine\n");
    const pids = recordedPids();
    const namespaces = await ourNamespaces();
    const bridge = await bridgeIndex();
    try {
      const stop = await runProgram(["sh", script, "stop", "--dir", other]);
      expect(stop.code).toBe(3);
      expect(stop.stdout).toBe("");
      expect(stop.stderr).toBe(
        `slurm-local.sh: no cluster in ${other} (${other}/created is missing); nothing stopped\n`,
      );
      expect(readdirSync(other)).toEqual(["keep.txt"]);
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
    // The running cluster is untouched: same namespaces, same bridge, same daemons, and it works.
    expect(await ourNamespaces()).toEqual(namespaces);
    expect(await bridgeIndex()).toBe(bridge);
    for (const [name, pid] of Object.entries(pids))
      expect(runs(pid, name.startsWith("slurmd-") ? "slurmd" : name), name).toBe(true);
    const status = await run("status");
    expect(status.code, status.stdout).toBe(0);
    const r = await slurm(["srun", "-N", "3", "sh", "-c", "echo $SLURMD_NODENAME"]);
    expect(r.stderr).toBe("");
    expect(sortedLines(r.stdout)).toEqual(["nodea", "nodeb", "nodec"]);
  });

  it("status tells the truth: a recorded pid that is another process, or a recorded namespace that is gone, is not running", async () => {
    const created = join(slurmDir, "created");
    const original = readFileSync(created, "utf8");
    const pid = recordedPids()["slurmd-nodec"];
    // The record names a pid whose start time differs: as after the daemon died and its pid was reused.
    writeFileSync(created, original.replace(/^(pid slurmd-nodec \d+) \d+$/m, "$1 1"));
    try {
      const status = await run("status");
      expect(status.code).toBe(1);
      expect(status.stdout).toContain(`slurmd-nodec: not running (recorded pid ${pid} is gone or another process)`);
      expect(status.stdout).not.toContain("export SLURM_CONF");
    } finally {
      writeFileSync(created, original);
    }
    expect((await run("status")).code).toBe(0);

    // A namespace deleted from under the cluster: its slurmd lives on, but the cluster is broken.
    expect((await runProgram(["ip", "netns", "del", "jobrt-slurm-nodec"])).code).toBe(0);
    const status = await run("status");
    expect(status.code).toBe(1);
    expect(status.stdout).toContain("network namespace jobrt-slurm-nodec: missing");
    // start does not call that running: it clears the cluster and starts it again.
    const start = await run("start", "--nodes", "3");
    expect(start.code, start.stderr).toBe(0);
    expect(start.stdout).not.toMatch(/already running/);
    expect(await ourNamespaces()).toEqual(["jobrt-slurm-nodeb", "jobrt-slurm-nodec"]);
    expect((await run("status")).code).toBe(0);
    const r = await slurm(["srun", "-N", "3", "sh", "-c", "echo $SLURMD_NODENAME"]);
    expect(sortedLines(r.stdout)).toEqual(["nodea", "nodeb", "nodec"]);
  });

  it("stop ends exactly the recorded daemons, removes the namespaces, the bridge and the directory", async () => {
    const pids = recordedPids();
    expect(Object.keys(pids)).toHaveLength(5);
    const stop = await run("stop");
    expect(stop.code, stop.stderr).toBe(0);
    for (const [name, pid] of Object.entries(pids))
      expect(runs(pid, name.startsWith("slurmd-") ? "slurmd" : name), name).toBe(false);
    expect(await ourNamespaces()).toEqual([]);
    const links = await runProgram(["ip", "-o", "link", "show"]);
    expect(links.stdout).not.toMatch(/jrt-br0|jrtv-/);
    expect(() => readdirSync(slurmDir)).toThrow(/ENOENT/);
    const status = await run("status");
    expect(status.code).toBe(3);
  });
});
