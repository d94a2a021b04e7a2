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

const NOBODY = 65534;
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

async function waitFor(check: () => boolean, what: string, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

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
  const child = spawn(process.execPath, ["--", jobrtBin, "run", "--runtime", "none", "sh", "-c", `echo $$ > ${file}.t; mv ${file}.t ${file}; exec sleep 120`], {
    env: s.env,
    cwd: "/",
    stdio: "ignore",
    uid: NOBODY,
    gid: NOBODY,
  });
  started.push(child);
  await waitFor(() => existsSync(file), "the task to start");
  const task = Number(readFileSync(file, "utf8"));
  tasks.push(task);
  const job = () => readdirSync(s.journal).find((j) => /^\d+$/.test(j) && readFileSync(join(s.journal, j, "step-0", "pids"), { encoding: "utf8", flag: "r" }).startsWith(`${task} `));
  await waitFor(() => {
    try {
      return job() !== undefined;
    } catch {
      return false;
    }
  }, "the task's record");
  return { child, task, job: Number(job()) };
}

/** Writes `text` to journal entry `<job>/step-0/<name>`, as nobody. */
function plant(s: Site, job: number, files: Record<string, string>): void {
  for (const [name, text] of Object.entries(files)) {
    asNobody('mkdir -p "$1" && printf %s "$3" > "$1/$2"', join(s.journal, String(job), "step-0"), name, text);
  }
}

describe("root's jobrt gc on junk records in a job user's journal", () => {
  requires({ root: process.getuid?.() === 0 });

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
    expect(readdirSync(s.journal).filter((n) => /^\d+$/.test(n)).sort()).toEqual(["802", "803"]);
  });
});
