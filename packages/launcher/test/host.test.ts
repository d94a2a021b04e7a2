import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { tempDir } from "../../../tests/helpers/tmp.js";
import { createHost, createTaskGroup } from "../src/index.js";

/** The CLI's package dir: its node_modules holds the first-party runtimes, as a site install does. */
const installDir = fileURLToPath(new URL("../../cli", import.meta.url));

function confDir(conf: string): string {
  const dir = tempDir("jobrt-host-");
  writeFileSync(join(dir, "jobrt.conf"), conf);
  return dir;
}

describe("createHost", () => {
  it("assembles the node and a registry that loads the site's default runtime from the install dir", async () => {
    const root = tempDir("jobrt-host-spool-");
    const dir = confDir(
      `NodeName=n7\nSpoolDir=${root}/spool-%n\nRuntimePlugins=none,runtime/oci\nDefRuntimePlugin=none\nKillWait=4\nKillWait=3\n`,
    );
    const lines: string[] = [];
    const host = createHost({
      confDir: dir,
      installDir,
      log: (level, message) => lines.push(`${level}: ${message}`),
      env: {},
    });
    try {
      expect(host.node).toMatchObject({ nodeName: "n7", confDir: dir, spoolDir: `${root}/spool-n7`, killWait: 3 });
      expect(host.pluginDir).toBe(installDir);
      expect(host.registry.defaultRuntime).toBe("none");
      const index = await host.registry.load(undefined);
      expect(host.registry.info(index)).toMatchObject({ type: "runtime/none", package: "@jobrt/runtime-none" });
      await expect(host.registry.load("shifter")).rejects.toMatchObject({ code: "ERR_RUNTIME_NOT_ALLOWED" });
      // jobrt.conf's warnings and where runtimes come from reach the program's log.
      expect(lines.some((l) => l.startsWith("warn: ") && l.includes("KillWait specified more than once"))).toBe(true);
      expect(lines).toContain(`verbose: conf dir ${dir}; runtimes resolved from ${installDir}`);
    } finally {
      await host.registry.fini();
    }
  });

  it("names the node SLURMD_NODENAME under Slurm, and SpoolDir's %n with it (jobrt exec and jobrt gc agree)", () => {
    const root = tempDir("jobrt-host-spool-");
    const host = createHost({
      confDir: confDir(`NodeName=n7\nSpoolDir=${root}/%n\n`),
      installDir,
      log: () => {},
      env: { SLURMD_NODENAME: "slurm3" },
    });
    expect(host.node.nodeName).toBe("slurm3");
    expect(host.node.spoolDir).toBe(`${root}/slurm3`);
  });

  it("resolves from PluginDir when jobrt.conf sets it, and runs the embedded defaults without a jobrt.conf", () => {
    const plugins = tempDir("jobrt-host-plugins-");
    expect(createHost({ confDir: confDir(`PluginDir=${plugins}\n`), installDir, log: () => {} }).pluginDir).toBe(
      plugins,
    );
    const bare = createHost({ confDir: tempDir("jobrt-host-empty-"), installDir, log: () => {} });
    expect(bare.registry.defaultRuntime).toBe("oci");
    expect(bare.site.file).toBeUndefined();
  });

  it("lists and collects nothing in a SpoolDir without journals, and reports its process tracking", async () => {
    const root = tempDir("jobrt-host-spool-");
    mkdirSync(join(root, "spool"));
    const host = createHost({
      confDir: confDir(`SpoolDir=${root}/spool\nProcTrack=pgid\n`),
      installDir,
      log: () => {},
    });
    expect(host.steps(true)).toEqual([]);
    expect(await host.collectOrphans({ jobId: 1 })).toEqual([]);
    expect(host.tracking()).toEqual({ kind: "pgid" });
  });
});

describe("createTaskGroup", () => {
  it("starts a task through the launcher's spawn path, in a process group of its own, and waits for the group to empty", async () => {
    const tasks = createTaskGroup(`host-test.${process.pid}`);
    const me = { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 };
    const child = await tasks.start(
      { argv: ["/bin/sh", "-c", 'echo "$$ $(ps -o pgid= -p $$)"'], env: { PATH: "/usr/bin:/bin" }, cwd: "/" },
      { taskId: 0, ...me, stdio: ["ignore", "pipe", "ignore"] },
    );
    let out = "";
    child.stdout?.setEncoding("utf8").on("data", (d: string) => {
      out += d;
    });
    const code = await new Promise<number | null>((resolve) => child.on("close", (c) => resolve(c)));
    expect(code).toBe(0);
    const [pid, pgid] = out.trim().split(/\s+/).map(Number);
    expect(pid).toBe(child.pid);
    expect(pgid).toBe(child.pid);
    tasks.killTask(0, child.pid);
    await tasks.close(5000);
  });
});
