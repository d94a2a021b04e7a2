import { spawn } from "node:child_process";
import { chmodSync, mkdirSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { busyboxImage } from "./image.js";
import { tempDir } from "../../../tests/helpers/tmp.js";

// End to end through the jobrt command a site runs: the CLI finds this package by name in its
// PluginDir, loads it, and starts real ch-run. The CLI is a dev dependency, as it would be for any
// third-party runtime's own end-to-end tests.
const here = dirname(fileURLToPath(import.meta.url));
const ownVersion = (JSON.parse(readFileSync(join(here, "../package.json"), "utf8")) as { version: string }).version;
const jobrtBin = join(dirname(fileURLToPath(import.meta.resolve("@jobrt/cli/package.json"))), "dist/bin.js");
let tmp: string;
let image: string;
let confDir: string;
let spool: string;

interface Result {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

function jobrt(args: string[], opts: { onStdout?: (text: string, kill: (s: NodeJS.Signals) => void) => void } = {}): Promise<Result> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [jobrtBin, ...args], { env: { ...process.env, JOBRT_CONF_DIR: confDir }, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      stdout += d;
      opts.onStdout?.(stdout, (s) => child.kill(s));
    });
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
    child.on("error", reject);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolvePromise({ code, signal, stdout, stderr });
    });
  });
}

beforeAll(() => {
  tmp = tempDir("jobrt-cc-cli-");
  chmodSync(tmp, 0o755);
  image = busyboxImage(join(tmp, "image"));
  // PluginDir: where the site installed its runtimes; here, this package under its published name.
  const plugins = join(tmp, "site");
  mkdirSync(join(plugins, "node_modules"), { recursive: true });
  symlinkSync(resolve(here, ".."), join(plugins, "node_modules/jobrt-runtime-charliecloud"));
  confDir = join(tmp, "etc");
  spool = join(tmp, "spool");
  mkdirSync(confDir);
  mkdirSync(spool, { mode: 0o755 });
  chmodSync(spool, 0o755);
  writeFileSync(join(confDir, "jobrt.conf"), `RuntimePlugins=none,charliecloud\nDefRuntimePlugin=charliecloud\nPluginDir=${plugins}\nSpoolDir=${spool}\n`);
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe("jobrt with --runtime charliecloud", () => {
  it("jobrt runtimes finds the package by name in PluginDir", async () => {
    const r = await jobrt(["runtimes", "--json"]);
    const cc = (JSON.parse(r.stdout) as { runtimes: { name: string; package: string; version: string; compatible: boolean; capabilities: string[] }[] }).runtimes.find(
      (x) => x.name === "charliecloud",
    );
    expect(cc).toMatchObject({ package: "jobrt-runtime-charliecloud", version: ownVersion, compatible: true, capabilities: ["container", "unprivileged"] });
  });

  it("runs several tasks in the image with binds, workdir and --container-env", async () => {
    const data = join(tmp, "data");
    mkdirSync(data);
    writeFileSync(join(data, "in.txt"), "host data\n");
    chmodSync(data, 0o755);
    const r = await jobrt([
      "run", "-n", "3", "-l", "--container", image, "--container-volume", `${data}:/data`, "--container-workdir", "/data",
      "--container-env", "WHO=container",
      "sh", "-c", 'echo "$WHO $(cat /etc/jobrt-image) $(pwd) $(cat in.txt) $SLURM_PROCID/$SLURM_NTASKS"',
    ]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout.trim().split("\n").sort()).toEqual([0, 1, 2].map((i) => `${i}: container charliecloud-busybox /data host data ${i}/3`));
    // The launcher keeps its own records in SpoolDir/jobs; this runtime's files are gone.
    expect(readdirSync(spool)).not.toContain("charliecloud");
  });

  it("passes the highest task exit status through", async () => {
    const r = await jobrt(["run", "-n", "2", "--container", image, "sh", "-c", 'exit $((SLURM_PROCID + 3))']);
    expect(r.code).toBe(4);
  });

  it.runIf(process.getuid?.() === 0)("runs as the job user with --uid/--gid (ch-run unprivileged)", async () => {
    const r = await jobrt(["run", "--uid", "65534", "--gid", "65534", "--container", image, "--container-clearenv", "--container-env", "X=1", "sh", "-c", 'echo "$(id -u):$(id -g) $X"']);
    expect(r.stderr).toBe("");
    expect(r.stdout).toBe("65534:65534 1\n");
    // The launcher keeps its own records in SpoolDir/jobs; this runtime's files are gone.
    expect(readdirSync(spool)).not.toContain("charliecloud");
  });

  it("SIGTERM to jobrt reaches the task inside ch-run; jobrt exits 143 and leaves nothing behind", async () => {
    const r = await jobrt(["run", "--container", image, "--container-env", "A=b", "sh", "-c", "echo started; sleep 60"], {
      onStdout: (out, kill) => {
        if (out.includes("started")) kill("SIGTERM");
      },
    });
    expect(r.code).toBe(143);
    // The launcher keeps its own records in SpoolDir/jobs; this runtime's files are gone.
    expect(readdirSync(spool)).not.toContain("charliecloud");
  });

  it("refuses bad requests with one line naming the option, at submit time (jobrt check) and at run", async () => {
    const check = await jobrt(["check", "--container", image, "--container-volume", "/tmp:/nonexistent-target", "true"]);
    expect(check.code).toBe(1);
    expect(check.stderr.trim().split("\n")).toHaveLength(1);
    expect(check.stderr).toMatch(/--container-volume "\/tmp:\/nonexistent-target": the target \/nonexistent-target does not exist in the image/);
    const run = await jobrt(["run", "--container", join(tmp, "nope"), "true"]);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^jobrt: .*--container ".*\/nope": image directory .* does not exist/);
  });
});
