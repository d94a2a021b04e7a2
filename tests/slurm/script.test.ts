import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { repoRoot, runProgram } from "../helpers/jobrt.js";
import { lockCluster, slurm, slurmDir, sortedLines, stopCluster } from "./cluster.js";

const script = join(repoRoot, "scripts/slurm-local.sh");
const run = (...args: string[]) => runProgram(["sh", script, ...args, "--dir", slurmDir], { timeoutMs: 280_000 });

/** Recorded daemon pids, by daemon name. */
function recordedPids(): Record<string, number> {
  const dir = join(slurmDir, "pids");
  const out: Record<string, number> = {};
  for (const f of readdirSync(dir)) out[f.replace(/\.pid$/, "")] = Number(readFileSync(join(dir, f), "utf8").trim());
  return out;
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
    ];
    for (const [args, env, message] of cases) {
      const r = await runProgram(["sh", script, ...args, "--dir", slurmDir], { env: { ...process.env, ...env } });
      expect(r.code, args.join(" ")).toBe(2);
      expect(r.stderr.trim().split("\n"), args.join(" ")).toHaveLength(1);
      expect(r.stderr).toMatch(new RegExp(`^slurm-local\\.sh: ${message.source}`));
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

  it("stop ends exactly the recorded daemons, removes the namespaces, the bridge and the directory", async () => {
    const pids = recordedPids();
    expect(Object.keys(pids)).toHaveLength(5);
    const stop = await run("stop");
    expect(stop.code, stop.stderr).toBe(0);
    for (const [name, pid] of Object.entries(pids)) expect(runs(pid, name.startsWith("slurmd-") ? "slurmd" : name), name).toBe(false);
    expect(await ourNamespaces()).toEqual([]);
    const links = await runProgram(["ip", "-o", "link", "show"]);
    expect(links.stdout).not.toMatch(/jrt-br0|jrtv-/);
    expect(() => readdirSync(slurmDir)).toThrow(/ENOENT/);
    const status = await run("status");
    expect(status.code).toBe(3);
  });
});
