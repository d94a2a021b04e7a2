/**
 * Root's `jobrt ps --all` reads every job user's journal `SpoolDir/jobs.<uid>/`, which the user
 * controls (docs/reliability.md, "Threat model"): a FIFO, junk JSON or a symlink to root's files
 * for any name in it never hangs or crashes ps, and ps shows nothing of root's. Real `jobrt run`s as
 * nobody (one live, one SIGKILLed), then what the user plants, then root's built `jobrt ps`.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { jobrt, jobrtBin, requires, tempDir } from "../helpers/jobrt.js";
import { waitFor } from "../helpers/leaks.js";

const NOBODY = 65534;
const SECRET = "ROOTSECRET";
/** A host that is surely gone: another boot's. */
const DEAD_HOST = { pid: 4_000_000, start: "1", boot: "not-this-boot" };

const started: ChildProcess[] = [];
const tasks: number[] = [];
afterEach(() => {
  for (const c of started.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  for (const pid of tasks.splice(0)) {
    try {
      process.kill(-pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
});

/** Runs a shell script as nobody: what the job user itself can do. */
function asNobody(script: string, ...args: string[]): void {
  const r = spawnSync("sh", ["-c", script, "sh", ...args], { uid: NOBODY, gid: NOBODY, cwd: "/", encoding: "utf8" });
  if (r.status !== 0) throw new Error(`as nobody: ${script}: ${r.stderr}`);
}

/** A site every user can use, as on a Slurm node: conf readable by all, SpoolDir sticky 1777. */
function sharedSite() {
  const dir = tempDir("jobrt-hostile-ps-");
  chmodSync(dir, 0o755);
  const spool = join(dir, "spool");
  mkdirSync(spool, { mode: 0o1777 });
  chmodSync(spool, 0o1777);
  writeFileSync(join(dir, "jobrt.conf"), `SpoolDir=${spool}\nKillWait=1\n`);
  return { dir, journal: join(spool, `jobs.${NOBODY}`), env: { ...process.env, JOBRT_CONF_DIR: dir, HOME: "/" } };
}
type Site = ReturnType<typeof sharedSite>;

/** A `jobrt run` of nobody's; resolves once its task runs and its record is written. */
async function userStep(s: Site): Promise<{ child: ChildProcess; task: number; job: number }> {
  const marker = tempDir();
  chmodSync(marker, 0o777);
  const file = join(marker, "pid");
  const child = spawn(
    process.execPath,
    [
      "--",
      jobrtBin,
      "run",
      "--runtime",
      "none",
      "sh",
      "-c",
      `echo $$ > ${file}.t; mv ${file}.t ${file}; exec sleep 120`,
    ],
    {
      env: s.env,
      cwd: "/",
      stdio: "ignore",
      uid: NOBODY,
      gid: NOBODY,
    },
  );
  started.push(child);
  await waitFor(() => existsSync(file), "the task to start");
  const task = Number(readFileSync(file, "utf8"));
  tasks.push(task);
  const job = () =>
    readdirSync(s.journal).find(
      (j) =>
        /^\d+$/.test(j) &&
        readFileSync(join(s.journal, j, "step-0", "pids"), { encoding: "utf8", flag: "r" }).startsWith(`${task} `),
    );
  await waitFor(() => {
    try {
      return job() !== undefined;
    } catch {
      return false;
    }
  }, "the task's record");
  return { child, task, job: Number(job()) };
}

/** A root-owned dir (0700) holding a record that names root's secret. */
function rootRecordDir(): string {
  const dir = tempDir("jobrt-rootdir-");
  chmodSync(dir, 0o700);
  mkdirSync(join(dir, "step-0"));
  writeFileSync(join(dir, "step-0", "host.json"), JSON.stringify(DEAD_HOST));
  writeFileSync(
    join(dir, "step-0", "step.json"),
    JSON.stringify({ host: DEAD_HOST, components: [{ runtime: SECRET, uid: 0, gid: 0, tasks: [] }] }),
  );
  writeFileSync(
    join(dir, "secret.json"),
    JSON.stringify({ host: DEAD_HOST, components: [{ runtime: SECRET, uid: 0, gid: 0, tasks: [] }] }),
  );
  return dir;
}

/** Writes `text` to journal entry `<job>/step-0/<name>`, as nobody. */
function plant(s: Site, job: number, files: Record<string, string>): void {
  for (const [name, text] of Object.entries(files)) {
    asNobody('mkdir -p "$1" && printf %s "$3" > "$1/$2"', join(s.journal, String(job), "step-0"), name, text);
  }
}

interface PsStep {
  jobId: number;
  state: string;
  user: string;
  hostPid?: number;
  components: { runtime: string; tasks: number; container?: string; image?: string }[];
  gcAction?: string;
  problem?: string;
}

describe("root's jobrt ps --all on a job user's journal", () => {
  requires({ root: process.getuid?.() === 0 });

  it("FIFOs for record files, junk JSON, symlinks to root's dirs and files: ps ends at once, shows what it can, reads nothing of root's", async () => {
    const s = sharedSite();
    const live = await userStep(s);
    const dead = await userStep(s);
    dead.child.kill("SIGKILL");
    await new Promise((r) => dead.child.once("exit", r));
    const root = rootRecordDir();
    const host = JSON.stringify(DEAD_HOST);
    // 801: every record file a FIFO (a reader that opened them blocking would hang for ever).
    asNobody('mkdir -p "$1" && mkfifo "$1/host.json" "$1/step.json" "$1/pids"', join(s.journal, "801", "step-0"));
    // 802, 803: JSON of the wrong shape.
    plant(s, 802, { "host.json": host, "step.json": JSON.stringify({ host: DEAD_HOST, components: "ab" }) });
    plant(s, 803, {
      "step.json": JSON.stringify({
        host: DEAD_HOST,
        components: [
          null,
          5,
          { runtime: { x: 1 }, tasks: "many", uid: NOBODY, container: { value: ["a"], options: { image: [7] } } },
        ],
      }),
    });
    // 804: a good record of the user's whose pids is a FIFO: gc would set it aside.
    plant(s, 804, {
      "host.json": host,
      "step.json": JSON.stringify({
        host: DEAD_HOST,
        components: [{ runtime: "none", uid: NOBODY, gid: NOBODY, tasks: [{}] }],
      }),
    });
    asNobody('mkfifo "$1"', join(s.journal, "804", "step-0", "pids"));
    // 805: a job dir, 806: an entry, 807: a record file, each a symlink to root's.
    asNobody('ln -s "$2" "$1/805" && mkdir "$1/806" && ln -s "$2/step-0" "$1/806/step-0"', s.journal, root);
    plant(s, 807, { "host.json": host });
    asNobody('ln -s "$2" "$1"', join(s.journal, "807", "step-0", "step.json"), join(root, "secret.json"));
    // 808: a job dir that is a FIFO.
    asNobody('mkfifo "$1/808"', s.journal);
    // 809: text made to drive root's terminal (an OSC title, a C1 CSI) and fake a row of root's.
    const fake = "none\n1.0   run   root   running";
    const escapes = "\u001b]0;owned\u0007/b\u009b2J";
    plant(s, 809, {
      "host.json": host,
      "step.json": JSON.stringify({
        host: DEAD_HOST,
        components: [{ runtime: fake, uid: NOBODY, gid: NOBODY, tasks: [], container: { value: escapes } }],
      }),
    });
    // 810: what escaping only C0, C1 and DEL let through: separators that end a row on screen or
    // in a log, a bidi override that shows what follows reversed, zero-width and tag characters,
    // and a backslash that would make a real escape look like text.
    plant(s, 810, {
      "host.json": host,
      "step.json": JSON.stringify({
        host: DEAD_HOST,
        components: [
          {
            runtime: "none\u20281.0   run   root   running",
            uid: NOBODY,
            gid: NOBODY,
            tasks: [],
            container: { value: "/b\u2029\u202egpj.exe\u200b\u2066\ufeff\u00ad\u{e0041}\\x1b" },
          },
        ],
      }),
    });

    const begun = Date.now();
    const r = await jobrt(["ps", "--all", "--json"], { env: s.env, timeoutMs: 20_000 });
    expect(Date.now() - begun).toBeLessThan(10_000);
    expect(r.signal).toBeNull();
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).not.toContain(SECRET);
    const steps = (JSON.parse(r.stdout) as { steps: PsStep[] }).steps;
    const byJob = Object.fromEntries(steps.map((x) => [x.jobId, x]));
    expect(
      Object.keys(byJob)
        .map(Number)
        .sort((a, b) => a - b),
    ).toEqual([live.job, dead.job, 801, 802, 803, 804, 807, 809, 810].sort((a, b) => a - b));
    expect(byJob[live.job]).toMatchObject({
      user: "nobody",
      state: "running",
      hostPid: live.child.pid,
      components: [{ runtime: "none", tasks: 1 }],
    });
    expect(byJob[dead.job]).toMatchObject({ user: "nobody", state: "dead", gcAction: "collect" });
    // No host file that can be read: a claim being written, as gc sees it (left alone).
    expect(byJob[801]).toMatchObject({ state: "starting", components: [] });
    expect(byJob[802]).toMatchObject({
      state: "dead",
      components: [],
      problem: "step.json holds no components list",
      gcAction: "leave",
    });
    expect(byJob[803]).toMatchObject({ state: "dead", components: [{ runtime: "?", tasks: 0 }], gcAction: "leave" });
    expect(byJob[804]?.gcAction).toBe("set-aside");
    expect(byJob[804]?.problem).toMatch(/^pids: .*804\/step-0\/pids is not a regular file$/);
    expect(byJob[807]).toMatchObject({ state: "dead", components: [] });
    expect(byJob[809]?.components).toEqual([
      { runtime: "none\\x0a1.0   run   root   running", container: "\\x1b]0;owned\\x07/b\\x9b2J", tasks: 0 },
    ]);
    expect(byJob[810]?.components).toEqual([
      {
        runtime: "none\\u{2028}1.0   run   root   running",
        container: "/b\\u{2029}\\u{202e}gpj.exe\\u{200b}\\u{2066}\\u{feff}\\xad\\u{e0041}\\\\x1b",
        tasks: 0,
      },
    ]);
    const table = await jobrt(["ps", "--all"], { env: s.env, timeoutMs: 20_000 });
    expect(table.code).toBe(0);
    expect(table.stdout).not.toContain(SECRET);
    expect(table.stdout).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/);
    expect(table.stdout).not.toContain("\n1.0   run");
    expect(table.stdout.replaceAll("\n", "")).not.toMatch(/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u);
    expect(table.stdout).toContain(
      "  jobrt gc would set it aside as <entry>.bad-<ms>: its pids file can never be read\n",
    );
  });

  it("records whose components are not a list of objects: root's gc does not crash on them and collects the user's other dead step", async () => {
    const s = sharedSite();
    const dead = await userStep(s);
    dead.child.kill("SIGKILL");
    await new Promise((r) => dead.child.once("exit", r));
    const host = JSON.stringify(DEAD_HOST);
    plant(s, 802, { "host.json": host, "step.json": JSON.stringify({ host: DEAD_HOST, components: "ab" }) });
    plant(s, 803, { "host.json": host, "step.json": JSON.stringify({ host: DEAD_HOST, components: [null] }) });
    const gc = await jobrt(["gc"], { env: s.env, timeoutMs: 60_000 });
    expect(gc.stderr).toBe("");
    expect(gc.code).toBe(0);
    expect(gc.stdout).toBe(`gc: step ${dead.job}.0: killed 1 task process group(s); cleaned up none\n`);
    expect(existsSync(join(s.journal, String(dead.job)))).toBe(false);
    // The junk is the user's to remove: root's gc leaves it as it was.
    expect(
      readdirSync(s.journal)
        .filter((n) => /^\d+$/.test(n))
        .sort(),
    ).toEqual(["802", "803"]);
  });
});
