// End to end: `jobrt run --runtime shifter` against the Shifter stand-in (tests/shifter/standin).
// The plugin only knows the stand-in through shifter.conf (ShifterPath, UdiRootConf), exactly as
// it would know a real Shifter install. Tasks run as nobody: shifter refuses root.
import { spawn } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { busyboxBundle } from "../helpers/fixtures.js";
import { type RunResult, jobrt, jobrtBin, tempDir } from "../helpers/jobrt.js";
import { NO_STEP } from "../helpers/mpicheck.js";
import { type StandinSite, TASK_GID, TASK_UID, createStandinSite, imageId } from "./standin/layout.js";

const IMAGE = "docker:busybox:latest";
const AS_NOBODY = ["--uid", String(TASK_UID), "--gid", String(TASK_GID)];
let site: StandinSite;
/** A working directory that exists on the host and, through the shared /tmp, in the container. */
let workDir: string;

beforeAll(() => {
  site = createStandinSite({
    udiRoot: ["module_gpu_siteEnv=GPU_MODULE=loaded", "module_gpu_siteEnvPrepend=PATH=/opt/udiImage/modules/gpu/bin"],
  });
  site.addImage(IMAGE, { dirs: ["data"], env: ["IMAGE_ENV=from-image"] });
  site.addImage("docker:other:1");
  mkdirSync(join(site.siteHome, "work"));
  chownSync(join(site.siteHome, "work"), TASK_UID, TASK_GID);
  writeFileSync(join(site.siteHome, "work/input.txt"), "host-data\n");
  workDir = tempDir("jobrt-shifter-cwd-");
  chmodSync(workDir, 0o755);
});
afterAll(() => {
  site?.remove();
  if (workDir) rmSync(workDir, { recursive: true, force: true });
});
beforeEach(() => {
  site.writeShifterConf();
  for (const f of readdirSync(site.traceDir)) rmSync(join(site.traceDir, f));
});

function run(args: string[], env: Record<string, string> = {}): Promise<RunResult> {
  return jobrt(["run", "--conf-dir", site.confDir, ...AS_NOBODY, ...args], {
    cwd: workDir,
    env: { JOBRT_CONF_DIR: site.confDir, ...env },
  });
}

const traces = () => site.traces();

describe("jobrt run --runtime shifter", () => {
  it("runs each task inside the image, with job env, cwd and exit status passed through", async () => {
    const r = await run([
      "-n",
      "2",
      "-l",
      "--runtime",
      "shifter",
      "--container",
      IMAGE,
      "--export",
      "ALL,JOBVAR=job-value",
      "sh",
      "-c",
      'echo "$(cat /etc/jobrt-image) $JOBVAR $IMAGE_ENV $SLURM_PROCID $(pwd) $(id -u)"; exit 3',
    ]);
    expect(r.code).toBe(3);
    const lines = r.stdout.trim().split("\n").sort();
    expect(lines).toEqual([0, 1].map((i) => `${i}: ${IMAGE} job-value from-image ${i} ${workDir} ${TASK_UID}`));
    // Both tasks ran the pinned id, passed SPANK-style, never a tag.
    const t = traces().filter((x) => x.tool === "shifter");
    expect(t).toHaveLength(2);
    for (const x of t) expect(x.image).toEqual({ type: "id", tag: imageId(IMAGE), id: imageId(IMAGE) });
  });

  it("mounts volumes read-only and read-write", async () => {
    const ro = await run([
      "--runtime",
      "shifter",
      "--container",
      IMAGE,
      "--container-volume",
      "/home/work:/data:ro",
      "sh",
      "-c",
      "cat /data/input.txt; touch /data/x 2>/dev/null && echo wrote || echo refused",
    ]);
    expect(ro).toMatchObject({ code: 0, stdout: "host-data\nrefused\n" });
    const rw = await run([
      "--runtime",
      "shifter",
      "--container",
      IMAGE,
      "--container-volume",
      "/home/work:/data",
      "sh",
      "-c",
      "echo out > /data/result.txt",
    ]);
    expect(rw.code).toBe(0);
    expect(readFileSync(join(site.siteHome, "work/result.txt"), "utf8")).toBe("out\n");
  });

  it("loads a module", async () => {
    const r = await run([
      "--runtime",
      "shifter",
      "--container",
      IMAGE,
      "--container-module",
      "gpu",
      "sh",
      "-c",
      'echo "$GPU_MODULE $PATH"',
    ]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^loaded \/opt\/udiImage\/modules\/gpu\/bin:/);
  });

  it("passes --container-env, --container-workdir and --container-clearenv", async () => {
    const r = await run(
      [
        "--runtime",
        "shifter",
        "--container",
        IMAGE,
        "--container-env",
        "A=1",
        "--container-env",
        "B=two words",
        "--container-workdir",
        "/data",
        "--container-clearenv",
        "/bin/env",
      ],
      { CALLER_ONLY: "x" },
    );
    expect(r.code).toBe(0);
    const env = r.stdout.trim().split("\n");
    expect(env).toContain("A=1");
    expect(env).toContain("B=two words");
    expect(env.some((l) => l.startsWith("CALLER_ONLY=") || l.startsWith("SLURM_"))).toBe(false);
    const pwd = await run(["--runtime", "shifter", "--container", IMAGE, "--container-workdir", "/data", "pwd"]);
    expect(pwd.stdout).toBe("/data\n");
  });

  it("fails a missing image at setup with the pull command, before any task starts", async () => {
    const r = await run(["-n", "2", "--runtime", "shifter", "--container", "docker:nothere:2.0", "echo", "never"]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
    expect(r.stderr).toMatch(
      /^jobrt: .*--container "docker:nothere:2.0": is not available on this system: run "shifterimg pull docker:nothere:2.0" first/,
    );
    expect(traces().map((t) => t.tool)).toEqual(["shifterimg"]);
  });

  it("pulls a missing image when PullPolicy=if-missing, then runs it; a failed pull is reported", async () => {
    site.writeShifterConf(["PullPolicy=if-missing", "PullTimeout=60"]);
    site.addPullable("docker:fresh:1", "READY");
    const ok = await run(["--runtime", "shifter", "--container", "docker:fresh:1", "cat", "/etc/jobrt-image"]);
    expect(ok).toMatchObject({ code: 0, stdout: "docker:fresh:1\n" });
    expect(
      traces()
        .filter((t) => t.tool === "shifterimg")
        .map((t) => (t.args as string[]).join(" ")),
    ).toEqual(["lookup docker:fresh:1", "pull docker:fresh:1", "lookup docker:fresh:1"]);
    site.addPullable("docker:broken:1", "FAILURE");
    const bad = await run(["--runtime", "shifter", "--container", "docker:broken:1", "true"]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/"docker:broken:1": could not be pulled: the pull ended with status FAILURE/);
  });

  const corpus: [string[], RegExp][] = [
    [["--container", "docker:my image"], /--container "docker:my image": contains white space/],
    [
      ["--container", "docker:a$(id)/b"],
      /--container "docker:a\$\(id\)\/b": contains characters Shifter silently drops/,
    ],
    [["--container", "docker:ubuntu;id"], /contains characters Shifter silently drops/],
    [["--container", "docker:../../x"], /contains '\.\.'/],
    [["--container", IMAGE, "--container-volume", "/home/work:/data:ro;/home:/x"], /--container-volume .*contains ';'/],
    [
      ["--container", IMAGE, "--container-volume", "/home/work,x:/data"],
      /--container-volume .*characters Shifter silently drops/,
    ],
    [["--container", IMAGE, "--container-volume", "/home/work:/data:x:y"], /--container-volume .*unknown flag/],
    [["--container", IMAGE, "--container-volume", "/home/../etc:/data"], /--container-volume .*contains '\.\.'/],
    [["--container", IMAGE, "--container-volume", "/home/work:/etc/cron.d"], /--container-volume .*under \/etc/],
    [["--container", IMAGE, "--container-volume", "/home/work:/var/spool"], /--container-volume .*under \/var/],
    [
      ["--container", IMAGE, "--container-env", "1BAD=x"],
      /--container-env "1BAD=x": the name "1BAD" is not an identifier/,
    ],
    [["--container", IMAGE, "--container-env", "A;B=x"], /--container-env .*not an identifier/],
    [["--container", IMAGE, "--container-workdir", "data"], /--container-workdir "data": is not an absolute path/],
    [["--container", IMAGE, "--container-module", "none,gpu"], /--container-module .*cannot be combined/],
  ];
  for (const [opts, rule] of corpus) {
    it(`rejects ${opts.slice(-1)[0]} naming the field and rule, starting nothing`, async () => {
      const r = await run(["--runtime", "shifter", ...opts, "touch", "/tmp/jobrt-shifter-pwned"]);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(rule);
      expect(r.stderr.trim().split("\n")).toHaveLength(1);
      expect(traces()).toEqual([]);
      expect(existsSync("/tmp/jobrt-shifter-pwned") || existsSync("/tmp/pwned")).toBe(false);
    });
  }

  it("cannot be redirected by SHIFTER_* variables inherited from the caller", async () => {
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell expansion, run inside the container
    const r = await run(
      [
        "--runtime",
        "shifter",
        "--container",
        IMAGE,
        "sh",
        "-c",
        'cat /etc/jobrt-image; ls /data; echo "${SHIFTER_VOLUME-unset}"',
      ],
      {
        SHIFTER_IMAGETYPE: "id",
        SHIFTER_IMAGE: imageId("docker:other:1"),
        SHIFTER_VOLUME: "/home/work:/data",
        SHIFTER_MODULE: "gpu",
        SLURM_SPANK_SHIFTER_IMAGE: "other:1",
      },
    );
    expect(r).toMatchObject({ code: 0, stdout: `${IMAGE}\nunset\n` });
  });

  it("refuses to run as root", async () => {
    const r = await jobrt(["run", "--conf-dir", site.confDir, "--runtime", "shifter", "--container", IMAGE, "true"], {
      cwd: workDir,
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/shifter refuses to run as root/);
    expect(traces()).toEqual([]);
  });

  it("is not involved without an image: the task runs directly", async () => {
    const r = await run(["--runtime", "shifter", "cat", "/etc/hostname"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(readFileSync("/etc/hostname", "utf8"));
    expect(traces()).toEqual([]);
  });

  it("jobrt check looks the image up (submit context) and rejects a bad request without running anything", async () => {
    const good = await jobrt([
      "check",
      "--conf-dir",
      site.confDir,
      ...AS_NOBODY,
      "--runtime",
      "shifter",
      "--container",
      IMAGE,
      "true",
    ]);
    expect(good.code).toBe(0);
    // The check hook: shifter's tools as this node has them, then the image it resolves to.
    expect(good.stdout).toMatch(
      /^component 0: runtime shifter: tool shifter \(.*ShifterPath\): ok: \/.*\/shifter, version not reported \(shifter has no --version\)\n/,
    );
    expect(good.stdout).toMatch(
      /\ncomponent 0: runtime shifter: tool shifterimg \(.*\): ok: \/.*shifterimg, version not reported/,
    );
    expect(good.stdout).toMatch(
      /\ncomponent 0: runtime shifter: image docker:.*: ok: resolves to id:[0-9a-f]{64}\ncomponent 0: runtime shifter: ok\n/,
    );
    expect(good.stdout.endsWith(`\ncomponent 0: runtime shifter: ok\n${NO_STEP}\n`)).toBe(true);
    const missing = await jobrt([
      "check",
      "--conf-dir",
      site.confDir,
      ...AS_NOBODY,
      "--runtime",
      "shifter",
      "--container",
      "docker:nothere:1",
      "true",
    ]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/shifterimg pull docker:nothere:1/);
    const bad = await jobrt([
      "check",
      "--conf-dir",
      site.confDir,
      ...AS_NOBODY,
      "--runtime",
      "shifter",
      "--container",
      IMAGE,
      "--container-volume",
      "/home:/etc",
      "true",
    ]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/--container-volume "\/home:\/etc": the target \/etc is under \/etc/);
    expect(traces().filter((t) => t.tool === "shifter")).toEqual([]);
  });

  it("reports shifter.conf errors with file:line", async () => {
    site.writeShifterConf(["PullPolicy=sometimes"]);
    const r = await run(["--runtime", "shifter", "--container", IMAGE, "true"]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/shifter\.conf:3:\d+: PullPolicy: "sometimes" is not one of never, if-missing/);
  });

  it("forwards SIGTERM to the task and exits 128+15", async () => {
    const child = spawn(
      process.execPath,
      [
        "--",
        jobrtBin,
        "run",
        "--conf-dir",
        site.confDir,
        ...AS_NOBODY,
        "--runtime",
        "shifter",
        "--container",
        IMAGE,
        "sh",
        "-c",
        "echo up; exec sleep 60",
      ],
      {
        cwd: workDir,
        env: { ...process.env, JOBRT_CONF_DIR: site.confDir },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    try {
      await new Promise<void>((resolve) =>
        child.stdout.on("data", (d: Buffer) => d.toString().includes("up") && resolve()),
      );
      const done = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
      child.kill("SIGTERM");
      expect(await done).toBe(143);
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    }
  });

  it("runs a heterogeneous step: one component on shifter, one on oci", async () => {
    // runtime-oci's recipe for tasks as nobody (tests/oci): a rootless bundle mapping container
    // root to nobody, and a SpoolDir the task user can traverse.
    const parent = tempDir("jobrt-shifter-het-");
    chmodSync(parent, 0o755);
    const spool = join(parent, "spool");
    mkdirSync(spool, { mode: 0o755 });
    const bundle = busyboxBundle(join(parent, "bundle"), true);
    const config = JSON.parse(readFileSync(join(bundle, "config.json"), "utf8"));
    config.linux.uidMappings = [{ containerID: 0, hostID: TASK_UID, size: 1 }];
    config.linux.gidMappings = [{ containerID: 0, hostID: TASK_GID, size: 1 }];
    writeFileSync(join(bundle, "config.json"), JSON.stringify(config));
    writeFileSync(join(site.confDir, "jobrt.conf"), `SpoolDir=${spool}\n`);
    try {
      const r = await run([
        "-l",
        "--runtime",
        "shifter",
        "--container",
        IMAGE,
        "sh",
        "-c",
        "echo shifter $(cat /etc/jobrt-image) $SLURM_PROCID",
        ":",
        "-D",
        "/",
        "--runtime",
        "oci",
        "--container",
        bundle,
        "sh",
        "-c",
        "echo oci $(cat /etc/jobrt-image) $SLURM_PROCID",
      ]);
      expect(r.stderr).toBe("");
      expect(r.code).toBe(0);
      expect(r.stdout.trim().split("\n").sort()).toEqual([`0: shifter ${IMAGE} 0`, "1: oci jobrt-busybox-image 1"]);
      expect(readdirSync(spool).filter((n) => n !== "jobs")).toEqual([]);
    } finally {
      rmSync(join(site.confDir, "jobrt.conf"), { force: true });
      rmSync(parent, { recursive: true, force: true });
    }
  });
});
