/**
 * Root's `jobrt gc` (the Slurm Epilog) against a job user who controls its own journal
 * `SpoolDir/jobs.<uid>/` (docs/reliability.md, "Threat model"). Each case: real `jobrt run`s as
 * nobody, SIGKILLed (dead records), then what the user does to its journal, then root's built
 * `jobrt gc`. Root's planted files survive, gc ends within its bound, the other entries are
 * collected.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process";
import {
  chmodSync,
  closeSync,
  constants,
  cpSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  readdirSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { jobrt, jobrtBin, repoRoot, requires, tempDir } from "../helpers/jobrt.js";
import { faultPluginDir } from "../faults/faultplugin.js";
import { waitFor } from "../helpers/leaks.js";

const NOBODY = 65534;
/** The bound on one job user's journal (FOREIGN_JOURNAL_BOUND_MS in packages/launcher/src/session/journal/collect.ts). */
const ENTRY_BOUND_MS = 30_000;

/** A dead `jobrt run` of nobody's: its journal entry and its still running task. */
interface DeadStep {
  job: number;
  jobDir: string;
  dir: string;
  pid: number;
}

const orphans: number[] = [];
afterEach(() => {
  // Tasks whose record the user took away (or made unreadable) are nobody's to collect: end them.
  for (const pid of orphans.splice(0)) {
    try {
      process.kill(-pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
});

function alive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 1) throw new Error(`not a task pid: ${pid}`);
  const stat = (() => {
    try {
      return readFileSync(`/proc/${pid}/stat`, "utf8");
    } catch {
      return undefined;
    }
  })();
  return stat !== undefined && !/^\S+ \(.*\) [ZX] /.test(stat);
}

/** Runs a shell script as nobody: what the job user itself can do. */
function asNobody(script: string, ...args: string[]): void {
  const r = spawnSync("sh", ["-c", script, "sh", ...args], { uid: NOBODY, gid: NOBODY, cwd: "/", encoding: "utf8" });
  if (r.status !== 0) throw new Error(`as nobody: ${script}: ${r.stderr}`);
}

/** A site every user can use, as on a Slurm node: conf readable by all, SpoolDir sticky 1777. */
function sharedSite(conf = "") {
  const dir = tempDir("jobrt-hostile-");
  chmodSync(dir, 0o755);
  const spool = join(dir, "spool");
  mkdirSync(spool, { mode: 0o1777 });
  chmodSync(spool, 0o1777);
  writeFileSync(join(dir, "jobrt.conf"), `SpoolDir=${spool}\nKillWait=1\n${conf}`);
  return { dir, journal: join(spool, `jobs.${NOBODY}`), env: { ...process.env, JOBRT_CONF_DIR: dir } };
}
type Site = ReturnType<typeof sharedSite>;

/** A root-owned dir (0700) that holds what a test wants to see survive. */
function rootDir(): string {
  const dir = tempDir("jobrt-rootdir-");
  chmodSync(dir, 0o700);
  return dir;
}

/** The entry of `jobs.<nobody>` that recorded `pid`, once the record has its line. */
function entryOf(s: Site, pid: number): DeadStep | undefined {
  for (const job of existsSync(s.journal) ? readdirSync(s.journal).filter((j) => /^\d+$/.test(j)) : []) {
    const dir = join(s.journal, job, "step-0");
    const pids = join(dir, "pids");
    if (existsSync(pids) && readFileSync(pids, "utf8").startsWith(`${pid} `))
      return { job: Number(job), jobDir: join(s.journal, job), dir, pid };
  }
  return undefined;
}

async function startUserStep(s: Site): Promise<{ child: ChildProcess; step: DeadStep }> {
  const marker = tempDir();
  chmodSync(marker, 0o777);
  const child = spawn(
    process.execPath,
    ["--", jobrtBin, "run", "--runtime", "none", "sh", "-c", `echo $$ > ${marker}/pid; exec sleep 120`],
    {
      env: { ...s.env, HOME: "/" },
      cwd: "/",
      stdio: ["ignore", "ignore", "pipe"],
      uid: NOBODY,
      gid: NOBODY,
    },
  );
  let stderr = "";
  child.stderr?.setEncoding("utf8").on("data", (d: string) => {
    stderr += d;
  });
  const file = join(marker, "pid");
  await waitFor(() => existsSync(file) && readFileSync(file, "utf8").endsWith("\n"), "the task to start").catch(
    (error: Error) => {
      throw new Error(`${error.message}; jobrt said: ${stderr}`);
    },
  );
  const pid = Number(readFileSync(file, "utf8"));
  orphans.push(pid);
  await waitFor(() => entryOf(s, pid) !== undefined, "the task's record");
  return { child, step: entryOf(s, pid)! };
}

/** `n` `jobrt run`s of nobody's, all started before any dies (a run's pre-run gc would collect the others). */
async function deadUserSteps(s: Site, n: number): Promise<DeadStep[]> {
  const runs = [];
  for (let i = 0; i < n; i++) runs.push(await startUserStep(s));
  for (const { child } of runs) {
    child.kill("SIGKILL");
    if (child.exitCode === null && child.signalCode === null) await new Promise((r) => child.once("exit", r));
  }
  for (const { step } of runs) expect(alive(step.pid)).toBe(true);
  return runs.map((r) => r.step);
}

async function rootGc(s: Site, env: Record<string, string> = {}, timeoutMs = 60_000) {
  const start = Date.now();
  const r = await jobrt(["gc"], { env: { ...s.env, ...env }, timeoutMs });
  return { ...r, ms: Date.now() - start };
}

const collectedLine = (step: DeadStep) => `gc: step ${step.job}.0: killed 1 task process group(s); cleaned up none\n`;

/** The other entries: collected as if nothing had happened. */
async function expectCollected(steps: DeadStep[]): Promise<void> {
  await waitFor(() => !steps.some((st) => alive(st.pid)), "the other entries' tasks to die");
  for (const st of steps) expect(existsSync(st.jobDir)).toBe(false);
}

describe("root's jobrt gc on a job user's journal", () => {
  requires({ root: process.getuid?.() === 0 });

  it("a job dir swapped for a symlink to root's dir holding a step-0: root's dir is not touched", async () => {
    const s = sharedSite();
    const [moved, other] = (await deadUserSteps(s, 2)) as [DeadStep, DeadStep];
    // root's dir holds a step-0 that reads as the user's dead record, and a file of root's.
    const root = rootDir();
    cpSync(moved.dir, join(root, "step-0"), { recursive: true });
    writeFileSync(join(root, "step-0", "victim"), "root's\n");
    asNobody('mv "$1" "$1.moved" && ln -s "$2" "$1"', moved.jobDir, root);
    const gc = await rootGc(s);
    expect(readdirSync(root)).toEqual(["step-0"]);
    expect(readFileSync(join(root, "step-0", "victim"), "utf8")).toBe("root's\n");
    expect(gc.stderr).toBe("");
    expect(gc.code).toBe(0);
    expect(gc.stdout).toBe(collectedLine(other));
    await expectCollected([other]);
    // Nothing in the journal names the moved step's task any more: it is the user's.
    expect(alive(moved.pid)).toBe(true);
  });

  it("a job dir swapped for a symlink while root removes its entry: root's files survive, the rest is collected", async () => {
    const s = sharedSite();
    const steps = await deadUserSteps(s, 3);
    const hold = join(tempDir(), "hold");
    execFileSync("mkfifo", [hold]);
    const gcRun = rootGc(s, { JOBRT_TEST_GC_HOLD: hold });
    // No removal passes the hold before the test lets it: the first entry claimed is the one held.
    let held: { step: DeadStep; claim: string } | undefined;
    const claimOf = (st: DeadStep) => readdirSync(st.jobDir).find((n) => n.startsWith("step-0.gc-"));
    await waitFor(() => {
      const st = steps.find((x) => existsSync(x.jobDir) && claimOf(x) !== undefined);
      if (st) held = { step: st, claim: claimOf(st)! };
      return held !== undefined;
    }, "gc's first claim");
    const { step, claim } = held!;
    await waitFor(() => !alive(step.pid), "the held entry's task to die");
    const root = rootDir();
    mkdirSync(join(root, claim));
    writeFileSync(join(root, claim, "victim"), "root's\n");
    asNobody('mv "$1" "$1.moved" && ln -s "$2" "$1"', step.jobDir, root);
    const reader = openSync(hold, constants.O_RDONLY | constants.O_NONBLOCK);
    rmSync(hold);
    const gc = await gcRun;
    closeSync(reader);
    expect(readFileSync(join(root, claim, "victim"), "utf8")).toBe("root's\n");
    expect(gc.signal).toBeNull();
    expect(gc.code).toBe(1);
    expect(gc.stderr).toMatch(
      new RegExp(`^jobrt: gc: step ${step.job}\\.0: cleanup failed, .*cannot remove .*permission denied`),
    );
    const others = steps.filter((x) => x !== step);
    expect(gc.stdout.split("\n").filter(Boolean).sort()).toEqual(others.map((x) => collectedLine(x).trim()).sort());
    await expectCollected(others);
  });

  it("junk for a record file (pids a FIFO, pids a symlink to root's file): reported once, set aside, never fails or blocks a later gc", async () => {
    const s = sharedSite();
    const [fifo, link, good] = (await deadUserSteps(s, 3)) as [DeadStep, DeadStep, DeadStep];
    const secret = join(rootDir(), "secret");
    writeFileSync(join(secret), "root's\n", { mode: 0o600 });
    asNobody('rm "$1/pids" && mkfifo "$1/pids"', fifo.dir);
    asNobody('rm "$1/pids" && ln -s "$2" "$1/pids"', link.dir, secret);
    const first = await rootGc(s);
    expect(first.signal).toBeNull();
    expect(first.ms).toBeLessThan(15_000);
    expect(first.code).toBe(1);
    expect(first.stdout).toBe(collectedLine(good));
    const lines = first.stderr.split("\n").filter(Boolean).sort();
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(
      new RegExp(
        `^jobrt: gc: step ${Math.min(fifo.job, link.job)}\\.0: cleanup failed, set \\S+ aside as \\S+\\.bad-\\d+ \\(not tried again\\): cannot kill what the step left: `,
      ),
    );
    expect(first.stderr).toMatch(/pids is not a regular file/);
    expect(first.stderr).toMatch(/ELOOP/);
    for (const st of [fifo, link])
      expect(readdirSync(st.jobDir).filter((n) => n !== "next-step")).toEqual([
        expect.stringMatching(/^step-0\.bad-\d+$/),
      ]);
    const second = await rootGc(s);
    expect({ code: second.code, stdout: second.stdout, stderr: second.stderr }).toEqual({
      code: 0,
      stdout: "",
      stderr: "",
    });
    expect(readFileSync(secret, "utf8")).toBe("root's\n");
    await expectCollected([good]);
  });

  it("a recorded pid that is root's own process, with its true start time: gc kills only the user's task", async () => {
    const s = sharedSite();
    const [step] = (await deadUserSteps(s, 1)) as [DeadStep];
    const victim = spawn("sleep", ["60"], { detached: true, stdio: "ignore" });
    orphans.push(victim.pid!);
    const start = readFileSync(`/proc/${victim.pid}/stat`, "utf8").split(") ")[1]!.split(" ")[19]!;
    asNobody('printf "%s %s\\n" "$1" "$2" >> "$3/pids"', String(victim.pid), start, step.dir);
    const gc = await rootGc(s);
    expect(gc.stderr).toBe("");
    expect(gc.stdout).toBe(collectedLine(step));
    await expectCollected([step]);
    expect(alive(victim.pid!)).toBe(true);
  });

  it(`three entries whose runtime cleanup never ends: gc gives them up after the journal's ${ENTRY_BOUND_MS / 1000} s bound (not one bound each), sets them aside, and collects the rest`, async () => {
    const plugins = faultPluginDir();
    // runtime none beside it: the user's runs (and the other entry's cleanup) resolve it there.
    mkdirSync(join(plugins, "node_modules", "@jobrt"));
    symlinkSync(join(repoRoot, "packages", "runtime-none"), join(plugins, "node_modules", "@jobrt", "runtime-none"));
    execFileSync("chmod", ["-R", "a+rX", plugins]);
    const s = sharedSite(`PluginDir=${plugins}\nRuntimePlugins=none,fault\n`);
    const steps = await deadUserSteps(s, 4);
    const good = steps.pop() as DeadStep;
    // The user's records name a runtime whose cleanup (as root's gc runs it here) never returns.
    for (const hang of steps)
      asNobody(
        `sed 's/"runtime":"none"/"runtime":"fault"/g' "$1/step.json" > "$1/.x" && mv "$1/.x" "$1/step.json"`,
        hang.dir,
      );
    const faulty = { JOBRT_FAULT: "cleanup-hang" };
    const gc = await rootGc(s, faulty, 3 * ENTRY_BOUND_MS + 30_000);
    expect(gc.signal).toBeNull();
    expect(gc.ms).toBeGreaterThanOrEqual(ENTRY_BOUND_MS);
    expect(gc.ms).toBeLessThan(ENTRY_BOUND_MS + 10_000);
    expect(gc.code).toBe(1);
    expect(gc.stdout).toBe(collectedLine(good));
    const lines = gc.stderr.split("\n").filter(Boolean).sort();
    expect(lines).toHaveLength(steps.length);
    for (const [i, hang] of [...steps].sort((x, y) => String(x.job).localeCompare(String(y.job))).entries()) {
      expect(lines[i]).toMatch(
        new RegExp(
          `^jobrt: gc: step ${hang.job}\\.0: cleanup failed, set \\S+ aside as \\S+\\.bad-\\d+ \\(not tried again\\): not done within 30 s .*$`,
        ),
      );
    }
    await expectCollected([good]);
    const again = await rootGc(s, faulty);
    expect(again.ms).toBeLessThan(15_000);
    expect({ code: again.code, stdout: again.stdout, stderr: again.stderr }).toEqual({
      code: 0,
      stdout: "",
      stderr: "",
    });
  });
});
