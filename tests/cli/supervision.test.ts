/**
 * A wrapper runtime supervised by the host (docs/decisions.md, "The host supervises a wrapper's
 * task"): `jobrt run --runtime bwrap`, the example in examples/jobrt-runtime-bwrap found in
 * PluginDir, runs bwrap as the task itself, with no forwarder or guard process between jobrt and
 * bwrap; jobrt's SIGTERM reaches the task inside the sandbox once, and a command the sandbox lacks
 * is 127 with one line of jobrt's.
 */
import { spawn } from "node:child_process";
import { mkdirSync, readFileSync, readdirSync, readlinkSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { failureLine, jobrt, jobrtBin, repoRoot, tempDir } from "../helpers/jobrt.js";

function site() {
  const dir = tempDir("jobrt-supervision-");
  const plugins = join(dir, "plugins");
  mkdirSync(join(plugins, "node_modules"), { recursive: true });
  symlinkSync(join(repoRoot, "examples/jobrt-runtime-bwrap"), join(plugins, "node_modules/jobrt-runtime-bwrap"));
  writeFileSync(
    join(dir, "jobrt.conf"),
    `SpoolDir=${join(dir, "spool")}\nKillWait=5\nPluginDir=${plugins}\nRuntimePlugins=none,bwrap\n`,
  );
  return { JOBRT_CONF_DIR: dir };
}

/** Every descendant of `pid`, with the program it runs. */
function descendants(pid: number): { pid: number; exe: string; comm: string }[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)]);
    } catch {
      // gone
    }
  }
  const out: { pid: number; exe: string; comm: string }[] = [];
  const queue = [...(children.get(pid) ?? [])];
  while (queue.length > 0) {
    const p = queue.shift() as number;
    queue.push(...(children.get(p) ?? []));
    try {
      out.push({ pid: p, exe: readlinkSync(`/proc/${p}/exe`), comm: readFileSync(`/proc/${p}/comm`, "utf8").trim() });
    } catch {
      // gone, or a sandbox's process the host may not look into
    }
  }
  return out;
}

describe("jobrt run --runtime bwrap: the host supervises the sandbox", () => {
  it("SIGTERM reaches the task inside the sandbox exactly once, no node process runs besides jobrt, the handler's status is the step's", async () => {
    const script =
      "n=0; trap 'n=$((n+1)); echo \"term $n\"; sleep 1; echo handled; exit 5' TERM; echo ready; while :; do sleep 0.1; done";
    const child = spawn(process.execPath, ["--", jobrtBin, "run", "--runtime", "bwrap", "sh", "-c", script], {
      env: { ...process.env, ...site() },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      stderr += d;
    });
    const tree = new Promise<ReturnType<typeof descendants>>((resolve) => {
      child.stdout.setEncoding("utf8").on("data", (d: string) => {
        stdout += d;
        if (d.includes("ready")) resolve(descendants(child.pid as number));
      });
    });
    const closed = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
    const processes = await tree;
    child.kill("SIGTERM");
    const code = await closed;
    expect(stdout).toBe("ready\nterm 1\nhandled\n");
    expect(code, stderr).toBe(5);
    expect(processes.filter((p) => p.exe === process.execPath)).toEqual([]);
    expect(processes.map((p) => p.comm)).toContain("bwrap");
  }, 60_000);

  it("a command the sandbox lacks is 127, with one line of jobrt's after bwrap's own", async () => {
    const r = await jobrt(["run", "--runtime", "bwrap", "jobrt-no-such-command"], { env: site() });
    expect(r.code).toBe(127);
    expect(r.stderr).toBe(
      "bwrap: execvp jobrt-no-such-command: No such file or directory\n" +
        "jobrt: task 0: jobrt-no-such-command: command not found in the container (exit status 127)\n" +
        failureLine("task 0", "Exited with exit code 127"),
    );
  }, 60_000);
});
