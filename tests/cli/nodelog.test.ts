/**
 * The node log (docs/cli.md, "The node log"): the built `jobrt` sends a line when a step starts and
 * one when it ends to a real unix datagram socket bound by tests/helpers/syslogreceiver.pl (as a
 * log daemon binds /dev/log), started here and stopped by pid; `file:` targets are real files.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process";
import {
  chmodSync,
  chownSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { busyboxBundle } from "../helpers/fixtures.js";
import { jobrt, jobrtBin, nodeName, repoRoot, requires, runProgram, tempDir } from "../helpers/jobrt.js";
import { type Registry, pushBusybox, startRegistry } from "../helpers/registry.js";
import { waitFor } from "../helpers/leaks.js";

const RECEIVER = join(repoRoot, "tests/helpers/syslogreceiver.pl");
const DEV_LOG = join(repoRoot, "tests/helpers/devlog.sh");
const SENDER = join(repoRoot, "packages/cli/dist/nodelogsend.pl");
/** Debian's perl-base (Essential), where jobrt looks first. */
const PERL = "/usr/bin/perl";
const have = (tool: string) => spawnSync("sh", ["-c", `command -v ${tool}`]).status === 0;
/** local3 (19): the facility of a line is its PRI divided by 8, its severity the rest. */
const LOCAL3 = 19;

interface Receiver {
  socket: string;
  lines: string[];
  child: ChildProcess;
  stop: () => Promise<void>;
}

const receivers: Receiver[] = [];
afterEach(async () => {
  for (const r of receivers.splice(0)) await r.stop();
});

/** Binds `socket` with the receiver script; `deaf`: it reads nothing, its queue filled first. */
async function startReceiver(socket: string, mode: "read" | "deaf" = "read"): Promise<Receiver> {
  const child = spawn(PERL, [RECEIVER, socket, mode], { stdio: ["ignore", "pipe", "inherit"] });
  const lines: string[] = [];
  let rest = "";
  const ready = new Promise<void>((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`the receiver exited (${code}) before it was ready`)));
    child.stdout!.setEncoding("utf8").on("data", (d: string) => {
      const all = (rest + d).split("\n");
      rest = all.pop()!;
      for (const l of all) {
        if (l === "ready") resolve();
        else lines.push(l);
      }
    });
  });
  await ready;
  const pid = child.pid!;
  const r: Receiver = {
    socket,
    lines,
    child,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once("exit", () => resolve());
        process.kill(pid, "SIGTERM");
      }),
  };
  receivers.push(r);
  return r;
}

interface Line {
  facility: number;
  severity: number;
  pid: number;
  kind: string;
  fields: Record<string, string>;
}

/**
 * A quoted value's text (docs/cli.md, "The node log"): `\xNN`, `\u{N}`, `\\` and `\"` are the only
 * escapes; anything else after a backslash is not the node log's.
 */
function unquote(quoted: string): string {
  return quoted
    .slice(1, -1)
    .replace(/\\(?:x([0-9a-f]{2})|u\{([0-9a-f]{1,6})\}|(["\\])|(.))/gsu, (_, x, u, c, other) => {
      if (other !== undefined) throw new Error(`not a node log escape: \\${other} in ${quoted}`);
      return c ?? String.fromCodePoint(Number.parseInt(x ?? u, 16));
    });
}

/** `<PRI>Mmm dd hh:mm:ss jobrt[pid]: kind k=v k="quoted"...` (glibc's syslog(3) datagram). */
function parse(text: string): Line {
  const m = /^<(\d+)>[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d jobrt\[(\d+)\]: (step-start|step-end) (.*)$/.exec(text);
  if (!m) throw new Error(`not a node log datagram: ${text}`);
  const fields: Record<string, string> = {};
  for (const f of m[4]!.matchAll(/(\w+)=("(?:[^"\\]|\\.)*"|\S+)/g))
    fields[f[1]!] = f[2]!.startsWith('"') ? unquote(f[2]!) : f[2]!;
  return { facility: Math.floor(Number(m[1]) / 8), severity: Number(m[1]) % 8, pid: Number(m[2]), kind: m[3]!, fields };
}

/** A conf dir (0755, so a job user reaches its sockets) whose jobrt.conf holds `conf`. */
function site(conf: string): { dir: string; env: NodeJS.ProcessEnv } {
  const dir = tempDir("jobrt-nodelog-");
  chmodSync(dir, 0o755);
  writeFileSync(join(dir, "jobrt.conf"), `SpoolDir=${join(dir, "spool")}\nKillWait=2\n${conf}`);
  return { dir, env: { ...process.env, JOBRT_CONF_DIR: dir } };
}

/** The lines of one step (one jobrt process), once both have come. */
async function stepLines(rx: Receiver, job: string): Promise<{ start: Line; end: Line }> {
  const mine = () => rx.lines.map(parse).filter((l) => l.fields.job === job);
  await waitFor(() => mine().length >= 2, `the node log lines of job ${job} (got ${JSON.stringify(rx.lines)})`);
  const [start, end, ...more] = mine();
  expect(more).toEqual([]);
  expect(start!.kind).toBe("step-start");
  expect(end!.kind).toBe("step-end");
  expect(end!.pid).toBe(start!.pid);
  return { start: start!, end: end! };
}

/** Senders still running for `socket`: none may be left waiting on a log daemon. */
function sendersFor(socket: string): number[] {
  return readdirSync("/proc")
    .filter((p) => /^\d+$/.test(p))
    .filter((p) => {
      try {
        const argv = readFileSync(`/proc/${p}/cmdline`, "utf8").split("\0");
        return argv.includes(SENDER) && argv.includes(socket);
      } catch {
        return false;
      }
    })
    .map(Number);
}

describe("the node log, to a datagram socket", () => {
  requires({
    perl: existsSync(PERL),
    root: process.getuid?.() === 0,
    "a built jobrt (pnpm turbo run build)": existsSync(jobrtBin),
  });

  it("a passing and a failing step: a start and an end line each, with job, step, node, user, runtime, tasks, status and duration", async () => {
    const s = site("");
    const rx = await startReceiver(join(s.dir, "log"));
    writeFileSync(
      join(s.dir, "jobrt.conf"),
      `SpoolDir=${join(s.dir, "spool")}\nNodeLog=syslog:${rx.socket}\nNodeLogFacility=LOCAL3\n`,
    );
    const ok = await jobrt(["run", "-n", "2", "--jobid", "7001", "--runtime", "none", "true"], { env: s.env });
    expect(ok.stderr).toBe("");
    expect(ok.code).toBe(0);
    const passed = await stepLines(rx, "7001");
    const ids = { job: "7001", step: "0", node: nodeName, uid: "0", user: "root", runtime: "none", tasks: "2" };
    expect(passed.start.fields).toEqual(ids);
    expect(passed.start).toMatchObject({ facility: LOCAL3, severity: 6 });
    expect(passed.end.fields).toEqual({ ...ids, status: "0", duration: expect.stringMatching(/^\d+\.\d{3}s$/) });
    expect(passed.end).toMatchObject({ facility: LOCAL3, severity: 6 });

    const failed = await jobrt(["run", "--jobid", "7002", "--runtime", "none", "sh", "-c", "exit 3"], { env: s.env });
    expect(failed.code).toBe(3);
    const lines = await stepLines(rx, "7002");
    expect(lines.end.fields).toEqual({
      ...ids,
      job: "7002",
      tasks: "1",
      status: "3",
      duration: expect.stringMatching(/^\d+\.\d{3}s$/),
    });
    // notice: a task failed, jobrt did not.
    expect(lines.end.severity).toBe(5);
  });

  it("a step that fails in setup: its end line has the error's code and the runtime's own (severity err)", async () => {
    const s = site("");
    const rx = await startReceiver(join(s.dir, "log"));
    writeFileSync(join(s.dir, "jobrt.conf"), `SpoolDir=${join(s.dir, "spool")}\nNodeLog=syslog:${rx.socket}\n`);
    const r = await jobrt(["run", "--jobid", "7003", "--container", "/nonexistent-bundle", "true"], { env: s.env });
    expect(r.code).toBe(1);
    const { start, end } = await stepLines(rx, "7003");
    // No task started: the start line comes just before the end line, with what was known.
    expect(start.fields).toEqual({
      job: "7003",
      step: "0",
      node: nodeName,
      uid: "0",
      user: "root",
      runtime: "oci",
      tasks: "1",
      container: "/nonexistent-bundle",
    });
    expect(end.fields).toMatchObject({
      runtime: "oci",
      container: "/nonexistent-bundle",
      status: "1",
      code: "ERR_RUNTIME_HOOK",
      cause: "ERR_CONTAINER_REQUEST",
    });
    // daemon (3) when jobrt.conf names no facility.
    expect(end).toMatchObject({ facility: 3, severity: 3 });
  });

  it("a value with a space or a newline is one quoted field: a job cannot add a line or a field", async () => {
    const s = site("");
    const rx = await startReceiver(join(s.dir, "log"));
    writeFileSync(join(s.dir, "jobrt.conf"), `SpoolDir=${join(s.dir, "spool")}\nNodeLog=syslog:${rx.socket}\n`);
    const bundle = "/nonexistent\nstep-end job=1 status=0 x";
    await jobrt(["run", "--jobid", "7004", "--container", bundle, "true"], { env: s.env });
    const { start, end } = await stepLines(rx, "7004");
    expect(start.fields.container).toBe(bundle);
    expect(end.fields.status).toBe("1");
    expect(rx.lines).toHaveLength(2);
  });

  it("DEL, C1 controls, separators and format characters (bidi overrides) in --container and --container-image are escaped: the line shows every character as itself", async () => {
    const s = site("");
    const rx = await startReceiver(join(s.dir, "log"));
    writeFileSync(join(s.dir, "jobrt.conf"), `SpoolDir=${join(s.dir, "spool")}\nNodeLog=syslog:${rx.socket}\n`);
    // A CSI that clears the screen, NEL, the separators, an override that reverses what follows,
    // zero-width ones, a tag character, and quotes and backslashes that must not end the value.
    const hostile = '\u007f\u0085\u009b2J\u00ad\u2028\u2029\u202egpj.exe\u200b\u2066\ufeff\u{e0041}\\" x="1';
    const shown =
      '\\x7f\\x85\\x9b2J\\xad\\u{2028}\\u{2029}\\u{202e}gpj.exe\\u{200b}\\u{2066}\\u{feff}\\u{e0041}\\\\\\" x=\\"1';
    await jobrt(["run", "--jobid", "7010", "--container", `/nonexistent/${hostile}`, "true"], { env: s.env });
    await jobrt(["run", "--jobid", "7011", "--container-image", `oci:/nonexistent/${hostile}`, "true"], { env: s.env });
    const bundle = await stepLines(rx, "7010");
    const image = await stepLines(rx, "7011");
    expect(bundle.start.fields.container).toBe(`/nonexistent/${hostile}`);
    expect(image.start.fields.image).toBe(`oci:/nonexistent/${hostile}`);
    expect(image.end.fields.code).toBe("ERR_RUNTIME_HOOK");
    expect(rx.lines).toHaveLength(4);
    for (const line of rx.lines) {
      expect(line).not.toMatch(/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u);
      expect(
        line.includes(`container="/nonexistent/${shown}"`) || line.includes(`image="oci:/nonexistent/${shown}"`),
      ).toBe(true);
    }
  });

  it("no receiver: no socket, a socket nobody is bound to, a full queue; the step keeps its status and no sender is left", async () => {
    const s = site("");
    const gone = await startReceiver(join(s.dir, "gone"));
    await gone.stop();
    const deaf = await startReceiver(join(s.dir, "deaf"), "deaf");
    const sockets = [join(s.dir, "none"), gone.socket, deaf.socket];
    for (const [i, socket] of sockets.entries()) {
      writeFileSync(join(s.dir, "jobrt.conf"), `SpoolDir=${join(s.dir, "spool")}\nNodeLog=syslog:${socket}\n`);
      const started = Date.now();
      const r = await jobrt(["run", "--jobid", String(7010 + i), "--runtime", "none", "sh", "-c", "exit 4"], {
        env: s.env,
        timeoutMs: 60_000,
      });
      expect(r.signal).toBe(null);
      expect(r.code).toBe(4);
      expect(r.stderr).toBe("jobrt: error: " + nodeName + ": task 0: Exited with exit code 4\n");
      // Generous: a blocked sender would hold it for ever; speed is bench/'s business.
      expect(Date.now() - started).toBeLessThan(30_000);
      await waitFor(
        () => sendersFor(socket).length === 0,
        `the senders for ${socket} to exit (left: ${sendersFor(socket).join(" ")})`,
        10_000,
      );
    }
    expect(deaf.child.exitCode).toBe(null);
  });

  it("a jobrt killed mid-step (SIGKILL) leaves no sender: it exits when its stdin closes", async () => {
    const s = site("");
    const rx = await startReceiver(join(s.dir, "log"));
    writeFileSync(join(s.dir, "jobrt.conf"), `SpoolDir=${join(s.dir, "spool")}\nNodeLog=syslog:${rx.socket}\n`);
    const pidFile = join(s.dir, "task.pid");
    const child = spawn(
      process.execPath,
      [
        "--",
        jobrtBin,
        "run",
        "--jobid",
        "7040",
        "--runtime",
        "none",
        "sh",
        "-c",
        `echo $$ > ${pidFile}; exec sleep 120`,
      ],
      { env: s.env, stdio: "ignore" },
    );
    try {
      await waitFor(
        () =>
          rx.lines.some((l) => parse(l).fields.job === "7040") &&
          existsSync(pidFile) &&
          readFileSync(pidFile, "utf8").endsWith("\n"),
        "the step to start",
      );
      expect(sendersFor(rx.socket)).toHaveLength(1);
      const exited = new Promise((r) => child.once("exit", r));
      process.kill(child.pid!, "SIGKILL");
      await exited;
      await waitFor(() => sendersFor(rx.socket).length === 0, "the sender to exit");
      expect(rx.lines.map((l) => parse(l).kind)).toEqual(["step-start"]);
    } finally {
      const task = Number(readFileSync(pidFile, "utf8"));
      if (Number.isInteger(task) && task > 1) process.kill(task, "SIGKILL");
    }
  });

  it("root sends nothing to a socket in a directory a job user owns: one warning, the line goes to /dev/log", async () => {
    const s = site("");
    const theirs = join(s.dir, "nobody");
    mkdirSync(theirs);
    chownSync(theirs, 65534, 65534);
    const rx = await startReceiver(join(theirs, "log"));
    writeFileSync(join(s.dir, "jobrt.conf"), `SpoolDir=${join(s.dir, "spool")}\nNodeLog=syslog:${rx.socket}\n`);
    const r = await jobrt(["run", "--jobid", "7030", "--runtime", "none", "true"], { env: s.env });
    expect(r.code).toBe(0);
    expect(r.stderr).toBe(
      `jobrt: warning: node log: not sent to ${rx.socket} (${theirs} belongs to uid 65534, not root); sent to /dev/log instead\n`,
    );
    // A control step to a socket of root's own: its lines come, the refused ones never did.
    const ok = await startReceiver(join(s.dir, "log"));
    writeFileSync(join(s.dir, "jobrt.conf"), `SpoolDir=${join(s.dir, "spool")}\nNodeLog=syslog:${ok.socket}\n`);
    await jobrt(["run", "--jobid", "7031", "--runtime", "none", "true"], { env: s.env });
    await stepLines(ok, "7031");
    expect(rx.lines).toEqual([]);
  });

  it("NodeLog=off sends nothing", async () => {
    const s = site("");
    const rx = await startReceiver(join(s.dir, "log"));
    writeFileSync(join(s.dir, "jobrt.conf"), `SpoolDir=${join(s.dir, "spool")}\nNodeLog=off\n`);
    const r = await jobrt(["run", "--jobid", "7020", "--runtime", "none", "true"], { env: { ...s.env } });
    expect(r.code).toBe(0);
    // A control step to the receiver after it: its lines come, the off step's never did.
    writeFileSync(join(s.dir, "jobrt.conf"), `SpoolDir=${join(s.dir, "spool")}\nNodeLog=syslog:${rx.socket}\n`);
    await jobrt(["run", "--jobid", "7021", "--runtime", "none", "true"], { env: s.env });
    await stepLines(rx, "7021");
    expect(rx.lines.map(parse).filter((l) => l.fields.job === "7020")).toEqual([]);
  });
});

describe("the node log of jobrt exec (a job user's task) and of the default NodeLog (/dev/log)", () => {
  requires({
    root: process.getuid?.() === 0,
    unshare: have("unshare"),
    setpriv: have("setpriv"),
    perl: existsSync(PERL),
  });

  /** `jobrt exec` as nobody, for task 2 of 3 of step 5.1, in a namespace whose /dev/log is `socket`. */
  async function execAsNobody(s: { dir: string; env: NodeJS.ProcessEnv }, socket: string, command: string[]) {
    // A shared SpoolDir (root's, 1777) gives the job user's exec a place for its crash record.
    mkdirSync(join(s.dir, "spool"), { recursive: true });
    chmodSync(join(s.dir, "spool"), 0o1777);
    const env = {
      ...s.env,
      SLURM_JOB_ID: "8001",
      SLURM_STEP_ID: "1",
      SLURM_PROCID: "2",
      SLURM_LOCALID: "0",
      SLURM_NTASKS: "3",
      HOME: "/",
    };
    const argv = [
      DEV_LOG,
      socket,
      "setpriv",
      "--reuid",
      "65534",
      "--regid",
      "65534",
      "--clear-groups",
      process.execPath,
      "--",
      jobrtBin,
      "exec",
      "--runtime",
      "none",
      ...command,
    ];
    return runProgram(argv, { env, cwd: "/" });
  }

  it("with no NodeLog key the lines go to /dev/log; a job user's exec logs its task, uid and name", async () => {
    const s = site("");
    const rx = await startReceiver(join(s.dir, "log"));
    const r = await execAsNobody(s, rx.socket, ["sh", "-c", "exit 5"]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(5);
    const { start, end } = await stepLines(rx, "8001");
    const ids = {
      job: "8001",
      step: "1",
      task: "2",
      node: nodeName,
      uid: "65534",
      user: "nobody",
      runtime: "none",
      tasks: "3",
    };
    expect(start.fields).toEqual(ids);
    // The tasks this node's jobrt ran (docs/node-step.md): here only its own, task 2.
    expect(end.fields).toEqual({
      ...ids,
      status: "5",
      node_tasks: "1",
      task_status: "2:5",
      duration: expect.stringMatching(/^\d+\.\d{3}s$/),
    });
  });

  it("NodeLog=file: is root's: a job user's exec leaves root's file alone and sends its lines to /dev/log", async () => {
    const logDir = tempDir("jobrt-nodelog-file-");
    chmodSync(logDir, 0o755);
    const file = join(logDir, "jobrt.log");
    writeFileSync(file, "", { mode: 0o644 });
    const s = site(`NodeLog=file:${file}\n`);
    const rx = await startReceiver(join(s.dir, "log"));
    const r = await execAsNobody(s, rx.socket, ["true"]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const { end } = await stepLines(rx, "8001");
    expect(end.fields).toMatchObject({ uid: "65534", status: "0" });
    expect(readFileSync(file, "utf8")).toBe("");
  });
});

describe("NodeLog=file: root's own log file", () => {
  requires({ root: process.getuid?.() === 0, "a built jobrt (pnpm turbo run build)": existsSync(jobrtBin) });

  function fileSite() {
    const logDir = tempDir("jobrt-nodelog-file-");
    chmodSync(logDir, 0o755);
    const file = join(logDir, "jobrt.log");
    return { logDir, file, ...site(`NodeLog=file:${file}\n`) };
  }

  it("appends a start and an end line, with a time, the node and jobrt's pid; the file is root's, mode 0640", async () => {
    const s = fileSite();
    writeFileSync(s.file, "an earlier line\n", { mode: 0o640 });
    for (const job of ["7101", "7102"]) {
      const r = await jobrt(
        ["run", "--jobid", job, "--runtime", "none", "sh", "-c", `exit ${job === "7101" ? 0 : 2}`],
        { env: s.env },
      );
      expect(r.code).toBe(job === "7101" ? 0 : 2);
    }
    const lines = readFileSync(s.file, "utf8").split("\n");
    expect(lines[0]).toBe("an earlier line");
    expect(lines.slice(1, 5).map((l) => l.replace(/duration=\S+/, "duration=D"))).toEqual(
      ["7101 step-start", "7101 step-end", "7102 step-start", "7102 step-end"].map((w) => {
        const [job, kind] = w.split(" ");
        const end = kind === "step-end" ? ` status=${job === "7101" ? 0 : 2} duration=D` : "";
        return expect.stringMatching(
          new RegExp(
            `^\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z \\S+ jobrt\\[\\d+\\]: ${kind} job=${job} step=0 node=${nodeName} uid=0 user=root runtime=none tasks=1${end}$`,
          ),
        );
      }),
    );
    expect(lines[5]).toBe("");
    const fresh = fileSite();
    await jobrt(["run", "--runtime", "none", "true"], { env: fresh.env });
    const st = statSync(fresh.file);
    expect([st.uid, st.mode & 0o777]).toEqual([0, 0o640]);
  });

  const plantAt = (file: string, plant: () => void): string => {
    plant();
    return file;
  };

  it("a planted symlink, a FIFO, a job user's file or a directory a job user can write: not written, one warning, the step goes on", async () => {
    const victim = join(tempDir("jobrt-nodelog-victim-"), "shadow");
    writeFileSync(victim, "root's own data\n");
    const cases: [string, (s: ReturnType<typeof fileSite>) => string, RegExp][] = [
      ["symlink", (s) => plantAt(s.file, () => symlinkSync(victim, s.file)), /is a symlink/],
      ["fifo", (s) => plantAt(s.file, () => execFileSync("mkfifo", [s.file])), /is not a regular file/],
      [
        "user's file",
        (s) =>
          plantAt(s.file, () => {
            writeFileSync(s.file, "");
            chownSync(s.file, 65534, 65534);
          }),
        /is not root's own file \(uid 65534/,
      ],
      [
        "user's directory",
        (s) => {
          const dir = join(s.logDir, "nobody");
          mkdirSync(dir);
          chownSync(dir, 65534, 65534);
          return join(dir, "jobrt.log");
        },
        /belongs to uid 65534, not root/,
      ],
      [
        "writable directory",
        (s) => {
          const dir = join(s.logDir, "open");
          mkdirSync(dir);
          chmodSync(dir, 0o777);
          return join(dir, "jobrt.log");
        },
        /is writable by others than root/,
      ],
    ];
    for (const [what, plant, why] of cases) {
      const s = fileSite();
      const file = plant(s);
      writeFileSync(join(s.dir, "jobrt.conf"), `SpoolDir=${join(s.dir, "spool")}\nNodeLog=file:${file}\n`);
      const r = await jobrt(["run", "--runtime", "none", "sh", "-c", "exit 6"], { env: s.env, timeoutMs: 60_000 });
      expect(r.code, what).toBe(6);
      const warnings = r.stderr.split("\n").filter((l) => l.startsWith("jobrt: warning:"));
      expect(warnings, what).toHaveLength(1);
      expect(warnings[0], what).toMatch(
        new RegExp(
          `^jobrt: warning: node log: not written to ${file.replace(/[.]/g, "\\.")} \\(.*\\); sent to syslog instead$`,
        ),
      );
      expect(warnings[0], what).toMatch(why);
      if (what !== "fifo" && what !== "symlink")
        expect(existsSync(file) ? readFileSync(file, "utf8") : "", what).toBe("");
      if (what === "fifo") expect(lstatSync(file).isFIFO()).toBe(true);
    }
    expect(readFileSync(victim, "utf8")).toBe("root's own data\n");
  });
});

describe("NodeLog and NodeLogFacility values", () => {
  requires({ "a built jobrt (pnpm turbo run build)": existsSync(jobrtBin) });

  it("a bad value is refused with one line naming file:line, and nothing runs", async () => {
    const long = `/${"s".repeat(120)}`;
    const cases: [string, string][] = [
      ["NodeLog=journal", 'NodeLog: "journal" is not one of syslog, syslog:/SOCKET, file:/PATH, off'],
      ["NodeLog=file:var/log/jobrt.log", 'NodeLog: "var/log/jobrt.log" must be an absolute path'],
      ["NodeLog=file:", 'NodeLog: "" must be an absolute path'],
      [`NodeLog=syslog:${long}`, "NodeLog: a path of 121 bytes is longer than the 107-byte limit"],
      [
        "NodeLogFacility=kern",
        'NodeLogFacility: "kern" is not one of user, mail, daemon, auth, syslog, lpr, news, uucp, cron, authpriv, ftp, local0, local1, local2, local3, local4, local5, local6, local7',
      ],
    ];
    for (const [line, message] of cases) {
      const s = site(`${line}\n`);
      const marker = join(s.dir, "ran");
      const r = await jobrt(["run", "--runtime", "none", "touch", marker], { env: s.env });
      const column = line.indexOf("=") + 2;
      expect(r.stderr, line).toBe(`jobrt: ${s.dir}/jobrt.conf:3:${column}: ${message}\n`);
      expect(r.code, line).toBe(2);
      expect(existsSync(marker)).toBe(false);
    }
  });
});

describe("the node log of an image step", () => {
  requires({
    root: process.getuid?.() === 0,
    runc: have("runc"),
    skopeo: have("skopeo"),
    umoci: have("umoci"),
    "docker-registry": have("docker-registry"),
    perl: existsSync(PERL),
  });
  let reg: Registry;
  let digest: string;
  beforeAll(async () => {
    reg = await startRegistry();
    digest = pushBusybox(reg, "nodelog:1", "nodelog-image");
  });
  afterAll(async () => {
    await reg?.stop();
  });

  it("an OCI bundle step names its bundle; an image step names its reference and the digest it was pinned to", async () => {
    const s = site("");
    const rx = await startReceiver(join(s.dir, "log"));
    writeFileSync(join(s.dir, "jobrt.conf"), `SpoolDir=${join(s.dir, "spool")}\nNodeLog=syslog:${rx.socket}\n`);
    writeFileSync(join(s.dir, "images.conf"), `CacheDir=${join(s.dir, "cache")}\nInsecureRegistries=${reg.host}\n`);
    const base = tempDir("jobrt-nodelog-bundle-");
    busyboxBundle(join(base, "bundle"));
    const b = await jobrt(["run", "--jobid", "7201", "--container", "bundle", "--chdir", base, "true"], { env: s.env });
    expect(b.stderr).toBe("");
    expect(b.code).toBe(0);
    const bundle = await stepLines(rx, "7201");
    expect(bundle.start.fields).toMatchObject({ runtime: "oci", container: "bundle", bundle: join(base, "bundle") });
    expect(bundle.end.fields).toMatchObject({
      runtime: "oci",
      container: "bundle",
      bundle: join(base, "bundle"),
      status: "0",
    });
    expect(bundle.end.fields.digest).toBe(undefined);
    expect(bundle.start.fields.container_id).toBe(undefined);
    const named = await jobrt(
      ["run", "--jobid", "7203", "--container-id", "nl.7203", "--container", "bundle", "--chdir", base, "true"],
      { env: s.env },
    );
    expect(named.stderr).toBe("");
    const id = await stepLines(rx, "7203");
    expect(id.start.fields).toMatchObject({ container: "bundle", container_id: "nl.7203" });
    expect(id.end.fields).toMatchObject({ container: "bundle", container_id: "nl.7203", status: "0" });

    const ref = `docker://${reg.host}/nodelog:1`;
    const i = await jobrt(["run", "--jobid", "7202", "--container-image", ref, "cat", "/etc/jobrt-image"], {
      env: s.env,
    });
    expect(i.stderr).toBe("");
    expect(i.stdout).toBe("nodelog-image\n");
    const image = await stepLines(rx, "7202");
    expect(image.start.fields).toMatchObject({ runtime: "oci", image: ref, digest });
    expect(image.end.fields).toMatchObject({ runtime: "oci", image: ref, digest, status: "0" });
    expect(image.end.fields.bundle).toBe(undefined);
  });
});
