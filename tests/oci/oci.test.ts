/**
 * @jobrt/runtime-oci end to end: the built `jobrt` binary, real runc, busybox bundles.
 * Every test uses its own --jobid, so container ids (node.user.job.step.task) never collide with
 * anything else in runc's machine-wide state, and checks that nothing of its own is left.
 */
import { spawn, spawnSync } from "node:child_process";
import { chmodSync, existsSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { busyboxBundle } from "../helpers/fixtures.js";
import { failureLine, jobrt, jobrtBin, requires, runProgram, tempDir } from "../helpers/jobrt.js";

const haveRunc = spawnSync("runc", ["--version"]).status === 0;
const haveStrace = spawnSync("strace", ["-V"]).status === 0;
const isRoot = process.getuid?.() === 0;
const badDir = new URL("../../packages/runtime-oci/test/fixtures/bad-oci-conf/", import.meta.url).pathname;
const sampleDir = new URL("../../packages/runtime-oci/test/fixtures/slurm-samples/", import.meta.url).pathname;

const ID = "%n.%u.%j.%s.%t";
const RUNC = "runc --root /run/runc";
const RUN_MODE = `RunTimeQuery="${RUNC} state ${ID}"\nRunTimeRun="${RUNC} run ${ID} -b %b"\nRunTimeKill="${RUNC} kill -a ${ID}"\nRunTimeDelete="${RUNC} delete --force ${ID}"\n`;
const CREATE_START = `RunTimeQuery="${RUNC} state ${ID}"\nRunTimeCreate="${RUNC} create ${ID} -b %b"\nRunTimeStart="${RUNC} start ${ID}"\nRunTimeKill="${RUNC} kill -a ${ID}"\nRunTimeDelete="${RUNC} delete --force ${ID}"\n`;

let nextJob = 900000 + (process.pid % 1000) * 50;
const jobs: number[] = [];
function jobId(): number {
  jobs.push(++nextJob);
  return nextJob;
}

/** A conf dir with jobrt.conf (private SpoolDir) and, optionally, oci.conf. */
function confDir(oci?: string): { dir: string; spool: string } {
  const dir = tempDir("jobrt-oci-conf-");
  const spool = tempDir("jobrt-oci-spool-");
  chmodSync(spool, 0o755);
  writeFileSync(join(dir, "jobrt.conf"), `SpoolDir=${spool}\nKillWait=2\n`);
  if (oci !== undefined) writeFileSync(join(dir, "oci.conf"), oci);
  return { dir, spool };
}

function ours(id: number): string[] {
  const r = spawnSync("runc", ["--root", "/run/runc", "list", "-q"], { encoding: "utf8" });
  return r.stdout.split("\n").filter((c) => c.includes(`.${id}.`));
}

/** jobrt run under `strace -f`: its result and every program the step executed (execve calls that succeeded). */
async function jobrtExecs(args: string[]): Promise<{ r: Awaited<ReturnType<typeof runProgram>>; execs: string[] }> {
  const trace = join(tempDir("jobrt-oci-strace-"), "execve");
  const strace = ["strace", "-f", "-qq", "-s", "256", "-e", "trace=execve", "-o", trace];
  const r = await runProgram([...strace, process.execPath, "--", jobrtBin, ...args]);
  const execs = readFileSync(trace, "utf8")
    .split("\n")
    .filter((l) => l.includes("execve(") && !l.includes("= -1"));
  return { r, execs };
}

/** Step spool dirs left in SpoolDir (the launcher keeps its own `jobs` dir there). */
function stepDirs(spool: string): string[] {
  return readdirSync(spool).filter((n) => n.startsWith("oci-job"));
}

function processesWith(marker: string): number[] {
  const r = spawnSync("pgrep", ["-f", marker], { encoding: "utf8" });
  return r.stdout.split("\n").filter(Boolean).map(Number);
}

describe("jobrt run --runtime oci with real runc", () => {
  requires({
    runc: haveRunc,
    strace: haveStrace,
    root: isRoot,
    "a built jobrt (pnpm turbo run build)": existsSync(jobrtBin),
  });
  let bundle: string;
  beforeAll(() => {
    bundle = busyboxBundle(join(tempDir("jobrt-oci-bundle-"), "bundle"));
  });
  afterAll(() => {
    for (const j of jobs) expect(ours(j)).toEqual([]);
  });

  for (const [mode, oci] of [
    ["run mode", RUN_MODE],
    ["create/start mode", CREATE_START],
  ] as const) {
    describe(mode, () => {
      test("-n 4 per-task containers; env and args reach them; exit status 3 propagates; nothing left", async () => {
        const { dir, spool } = confDir(oci);
        const j = jobId();
        const r = await jobrt(
          [
            "run",
            "--conf-dir",
            dir,
            "--jobid",
            String(j),
            "-n",
            "4",
            "-l",
            "--container",
            bundle,
            "sh",
            "-c",
            'echo "t=$SLURM_PROCID v=$MYVAR a=$1 h=$(hostname)"; [ $SLURM_PROCID = 1 ] && exit 3; exit 0',
            "sh",
            "x y",
          ],
          { env: { ...process.env, MYVAR: "from job" } },
        );
        expect(r.stderr).toBe(failureLine("task 1", "Exited with exit code 3"));
        expect(r.code).toBe(3);
        const lines = r.stdout.trim().split("\n").sort();
        expect(lines).toEqual([0, 1, 2, 3].map((t) => `${t}: t=${t} v=from job a=x y h=runc`));
        expect(ours(j)).toEqual([]);
        expect(stepDirs(spool)).toEqual([]);
      });

      test("SIGTERM to jobrt mid-step leaves no container, no spool dir and no process", async () => {
        const { dir, spool } = confDir(oci);
        const j = jobId();
        const marker = `sleep 96${j % 100}`;
        const child = spawn(
          process.execPath,
          [
            "--",
            jobrtBin,
            "run",
            "--conf-dir",
            dir,
            "--jobid",
            String(j),
            "-n",
            "2",
            "--container",
            bundle,
            ...marker.split(" "),
          ],
          {
            stdio: ["ignore", "pipe", "pipe"],
          },
        );
        try {
          // Wait until both containers run, then signal the host.
          const deadline = Date.now() + 15_000;
          while (ours(j).length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
          expect(ours(j)).toHaveLength(2);
          await new Promise((r) => setTimeout(r, 300));
          child.kill("SIGTERM");
          const code = await new Promise<number | null>((r) => child.on("close", (c) => r(c)));
          expect(code).not.toBe(0);
        } finally {
          if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
        }
        expect(ours(j)).toEqual([]);
        expect(stepDirs(spool)).toEqual([]);
        expect(processesWith(marker)).toEqual([]);
      });

      test("a bundle path with a space and one with $(touch ...) work and inject nothing", async () => {
        const base = tempDir("jobrt-oci-paths-");
        const pwned = join(base, "pwned");
        for (const name of ["with space", `x$(touch ${pwned})y`]) {
          const b = busyboxBundle(join(base, name));
          const { dir } = confDir(oci);
          const r = await jobrt([
            "run",
            "--conf-dir",
            dir,
            "--jobid",
            String(jobId()),
            "--container",
            b,
            "echo",
            "inside",
          ]);
          expect(r.stderr).toBe("");
          expect(r.stdout).toBe("inside\n");
          expect(r.code).toBe(0);
        }
        expect(existsSync(pwned)).toBe(false);
      });
    });
  }

  // The latency is a speed (bench/exit-detection.mjs); this checks the mechanism: no polling.
  test("create/start notices the exit event-driven: RunTimeQuery runs once during a 2.6 s task (after create; the task's own delete spares cleanup's), Slurm's back-off dozens of times", async () => {
    const log = join(tempDir(), "queries");
    const { dir } = confDir(CREATE_START.replace('RunTimeQuery="', `RunTimeQuery="echo q >> ${log}; `));
    const r = await jobrt([
      "run",
      "--json",
      "--conf-dir",
      dir,
      "--jobid",
      String(jobId()),
      "--container",
      bundle,
      "sleep",
      "2.6",
    ]);
    expect(r.code).toBe(0);
    const events = r.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { event: string; time: number });
    const start = events.find((e) => e.event === "task-start")?.time as number;
    const exit = events.find((e) => e.event === "task-exit")?.time as number;
    expect(exit - start).toBeGreaterThanOrEqual(2600);
    expect(readFileSync(log, "utf8")).toBe("q\n");
  });

  test("no oci.conf: the embedded runc default runs the container", async () => {
    const { dir, spool } = confDir();
    const j = jobId();
    const r = await jobrt([
      "run",
      "--conf-dir",
      dir,
      "--jobid",
      String(j),
      "--container",
      bundle,
      "sh",
      "-c",
      "cat /etc/jobrt-image; exit 3",
    ]);
    expect(r.stdout).toBe("jobrt-busybox-image\n");
    expect(r.code).toBe(3);
    expect(stepDirs(spool)).toEqual([]);
  });

  test("--uid nobody: rootless runc, every runtime command as nobody", async () => {
    const base = tempDir("jobrt-oci-nobody-");
    chmodSync(base, 0o755);
    // `runc spec --rootless` run by root maps uid 0; the embedded default fits it to nobody.
    const b = busyboxBundle(join(base, "bundle"), true);
    const { dir, spool } = confDir();
    const r = await jobrt([
      "run",
      "--conf-dir",
      dir,
      "--jobid",
      String(jobId()),
      "--uid",
      "nobody",
      "--gid",
      "nogroup",
      "-D",
      "/",
      "--container",
      b,
      "cat",
      "/proc/self/uid_map",
    ]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout.trim().split(/\s+/)).toEqual(["0", "65534", "1"]);
    expect(stepDirs(spool)).toEqual([]);
  });

  test("--uid nobody, 4 tasks: file work as the job user starts no process; no Node but jobrt runs (strace)", async () => {
    const base = tempDir("jobrt-oci-nobody-");
    chmodSync(base, 0o755);
    const b = busyboxBundle(join(base, "bundle"), true);
    const { dir, spool } = confDir();
    const args = [
      "run",
      "--conf-dir",
      dir,
      "--jobid",
      String(jobId()),
      "-n",
      "4",
      "--uid",
      "nobody",
      "--gid",
      "nogroup",
    ];
    const { r, execs } = await jobrtExecs([...args, "-D", "/", "--container", b, "true"]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const node = execs.filter((l) => l.includes(`execve("${process.execPath}"`));
    // Only jobrt itself: before, every file operation as the job user ran `node fsopmain.js` (11).
    expect(node.map((l) => l.replace(/^\d+\s+/, "").slice(0, 160))).toHaveLength(1);
    expect(execs.filter((l) => / execve\("[^"]*runc"/.test(l)).length).toBe(4);
    expect(stepDirs(spool)).toEqual([]);
  });

  test("run mode, a command the container lacks: 127 with one line of jobrt's after runc's, and no Node but jobrt runs (strace)", async () => {
    const { dir, spool } = confDir(RUN_MODE);
    const args = ["run", "--conf-dir", dir, "--jobid", String(jobId()), "-D", "/", "--container", bundle];
    const { r, execs } = await jobrtExecs([...args, "jobrt-no-such-command"]);
    expect(r.code, r.stderr).toBe(127);
    // The host decides it after runc failed (ExecSpec.supervise): runc's own message, then jobrt's line.
    expect(r.stderr.match(/command not found in the container/g)).toHaveLength(1);
    expect(r.stderr).toMatch(/runc/);
    expect(
      r.stderr.endsWith(
        `jobrt: task 0: jobrt-no-such-command: command not found in the container (exit status 127)\n${failureLine("task 0", "Exited with exit code 127")}`,
      ),
    ).toBe(true);
    // Only jobrt itself: before, a Node guard ran `runc run` as its child (missingguardmain.js).
    expect(execs.filter((l) => l.includes(`execve("${process.execPath}"`))).toHaveLength(1);
    expect(stepDirs(spool)).toEqual([]);
  });

  test("--container-id names each task's container: %I in oci.conf patterns and in the embedded default (ID.TASK)", async () => {
    const cgroupOf = (out: string) =>
      out
        .trim()
        .split("\n")
        .map((l) => l.replace(/^(\d+): .*\//, "$1 "))
        .sort();
    const task = 'grep "^0::" /proc/self/cgroup';
    for (const oci of [RUN_MODE.replaceAll(ID, "%I.%t"), undefined]) {
      const { dir, spool } = confDir(oci);
      const j = jobId();
      const name = `site+parity.${j}_x`;
      const r = await jobrt([
        "run",
        "--conf-dir",
        dir,
        "--jobid",
        String(j),
        "-n",
        "2",
        "-l",
        "--container-id",
        name,
        "--container",
        bundle,
        "sh",
        "-c",
        task,
      ]);
      expect(r.stderr).toBe("");
      expect(r.code).toBe(0);
      expect(cgroupOf(r.stdout), oci ?? "embedded").toEqual([`0 ${name}.0`, `1 ${name}.1`]);
      expect(stepDirs(spool)).toEqual([]);
    }
    const runc = spawnSync("runc", ["--root", "/run/runc", "list", "-q"], { encoding: "utf8" });
    expect(runc.stdout).not.toContain("site+parity.");
  });

  test("SLURM_CONTAINER_ID (srun --container-id) names the container under jobrt exec; --container-id wins", async () => {
    const { dir } = confDir(RUN_MODE.replaceAll(ID, "%I.%t"));
    const j = jobId();
    const env = {
      ...process.env,
      JOBRT_CONF_DIR: dir,
      SLURM_JOB_ID: String(j),
      SLURM_STEP_ID: "0",
      SLURM_PROCID: "0",
      SLURM_LOCALID: "0",
      SLURM_NTASKS: "1",
      SLURMD_NODENAME: "n1",
    };
    const task = ["sh", "-c", 'grep "^0::" /proc/self/cgroup'];
    const fromEnv = await jobrt(["exec", "--runtime", "oci", "--container", bundle, "--", ...task], {
      env: { ...env, SLURM_CONTAINER_ID: `env.${j}` },
    });
    expect(fromEnv.stderr).toBe("");
    expect(fromEnv.stdout.trim()).toMatch(new RegExp(`/env\\.${j}\\.0$`));
    const both = await jobrt(
      ["exec", "--runtime", "oci", "--container-id", `opt.${j}`, "--container", bundle, "--", ...task],
      { env: { ...env, SLURM_CONTAINER_ID: `env.${j}` } },
    );
    expect(both.stdout.trim()).toMatch(new RegExp(`/opt\\.${j}\\.0$`));
    expect(both.code).toBe(0);
  });

  test("a bad container id is refused in one line naming the option or variable, before anything runs", async () => {
    const { dir, spool } = confDir(RUN_MODE.replaceAll(ID, "%I.%t"));
    const marker = join(tempDir("jobrt-oci-marker-"), "ran");
    const why = "is not a container id (letters, digits, '_', '+', '.', '-', not starting with '-', not . or ..)";
    for (const [bad, source] of [
      ["--root=/tmp", "--container-id"],
      ["a b", "--container-id"],
      ["..", "--container-id"],
      ["x;touch", "--container-id"],
      ["é", "--container-id"],
    ] as const) {
      const r = await jobrt([
        "run",
        "--conf-dir",
        dir,
        "--jobid",
        String(jobId()),
        "--container-id",
        bad,
        "--container",
        bundle,
        "touch",
        marker,
      ]);
      expect(r.stderr).toBe(`jobrt: ${source}: ${JSON.stringify(bad)} ${why}\n`);
      expect(r.code).toBe(2);
    }
    const long = await jobrt([
      "run",
      "--conf-dir",
      dir,
      "--jobid",
      String(jobId()),
      "--container-id",
      "a".repeat(129),
      "--container",
      bundle,
      "touch",
      marker,
    ]);
    expect(long.stderr).toBe("jobrt: --container-id: 129 characters, at most 128\n");
    const env = {
      ...process.env,
      JOBRT_CONF_DIR: dir,
      SLURM_JOB_ID: String(jobId()),
      SLURM_STEP_ID: "0",
      SLURM_PROCID: "0",
      SLURM_LOCALID: "0",
      SLURM_NTASKS: "1",
      SLURMD_NODENAME: "n1",
      SLURM_CONTAINER_ID: "-rf",
    };
    const fromEnv = await jobrt(["exec", "--runtime", "oci", "--container", bundle, "--", "touch", marker], { env });
    expect(fromEnv.stderr).toBe(`jobrt: SLURM_CONTAINER_ID: "-rf" ${why}\n`);
    expect(fromEnv.code).toBe(2);
    // --container-opt id= reaches the runtime unchecked by the CLI: the runtime refuses it.
    const opt = await jobrt([
      "run",
      "--conf-dir",
      dir,
      "--jobid",
      String(jobId()),
      "--container-opt",
      "id=--root=/",
      "--container",
      bundle,
      "touch",
      marker,
    ]);
    expect(opt.stderr).toContain(`--container-id: "--root=/" ${why}`);
    expect(opt.stderr.trim().split("\n")).toHaveLength(1);
    expect(opt.code).toBe(1);
    expect(existsSync(marker)).toBe(false);
    expect(stepDirs(spool)).toEqual([]);
  });

  test("scrun-only oci.conf keys: one warning line each naming file:line, and the container still runs", async () => {
    const keys = [
      "DebugFlags=Steps",
      "FileDebug=debug",
      "StdIODebug=debug",
      "SyslogDebug=info",
      "SrunPath=/usr/bin/srun",
      "SrunArgs=--overlap",
    ];
    const { dir, spool } = confDir(`${RUN_MODE}${keys.join("\n")}\n`);
    const r = await jobrt([
      "run",
      "--conf-dir",
      dir,
      "--jobid",
      String(jobId()),
      "--container",
      bundle,
      "cat",
      "/etc/jobrt-image",
    ]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("jobrt-busybox-image\n");
    const first = RUN_MODE.split("\n").length;
    expect(r.stderr.trim().split("\n")).toEqual(
      keys.map(
        (k, i) =>
          `jobrt: warning: ${join(dir, "oci.conf")}:${first + i}: ${k.split("=")[0]} accepted for Slurm compatibility, ignored by jobrt (only Slurm's scrun reads it)`,
      ),
    );
    expect(stepDirs(spool)).toEqual([]);
  });
});

describe("oci.conf problems stop the step before any task starts", () => {
  requires({ "a built jobrt (pnpm turbo run build)": existsSync(jobrtBin) });
  for (const f of readdirSync(badDir)) {
    test(f, async () => {
      const text = readFileSync(join(badDir, f), "utf8");
      const line = Number(/^# expect (\d+):/m.exec(text)?.[1] ?? 0);
      const { dir, spool } = confDir(text);
      const marker = join(tempDir("jobrt-oci-marker-"), "ran");
      const r = await jobrt([
        "run",
        "--conf-dir",
        dir,
        "--jobid",
        String(jobId()),
        "--container",
        "/nonexistent",
        "touch",
        marker,
      ]);
      expect(r.code).toBe(1);
      const lines = r.stderr.trim().split("\n");
      expect(lines).toHaveLength(1);
      expect(lines[0]).toContain(line > 0 ? `${join(dir, "oci.conf")}:${line}:` : `${join(dir, "oci.conf")}:`);
      expect(existsSync(marker)).toBe(false);
      expect(stepDirs(spool)).toEqual([]);
    });
  }
  test("the Slurm sample files load (the step then fails only because their runtimes are not installed)", async () => {
    for (const f of readdirSync(sampleDir)) {
      const { dir } = confDir(readFileSync(join(sampleDir, f), "utf8"));
      const r = await jobrt(["check", "--conf-dir", dir, "--container", "/b", "true"]);
      expect(r.stderr, f).not.toContain("oci.conf:");
    }
  });
});
