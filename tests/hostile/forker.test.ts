/**
 * The task forker against what a task or a job user does to it (docs/reliability.md, "Threat
 * model"): a directory the user may not enter, a task that stops its forker. Real root `jobrt run`s
 * of the built CLI, tasks as nobody where it matters.
 */
import { chmodSync, existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { jobrt, jobrtBin, runProgram, tempDir } from "../helpers/jobrt.js";

const NOBODY = 65534;

/** A site with its own SpoolDir and KillWait. */
function site(killWait = 2) {
  const dir = tempDir("jobrt-forker-");
  chmodSync(dir, 0o755);
  const spool = join(dir, "spool");
  mkdirSync(spool, { mode: 0o1777 });
  chmodSync(spool, 0o1777);
  writeFileSync(join(dir, "jobrt.conf"), `SpoolDir=${spool}\nKillWait=${killWait}\n`);
  return { dir, spool, env: { ...process.env, JOBRT_CONF_DIR: dir } };
}

/** A root-only directory (0700) with a secret in it and a subdirectory every user could enter. */
function rootOnlyDir() {
  const top = tempDir("jobrt-rootonly-");
  chmodSync(top, 0o700);
  writeFileSync(join(top, "secret"), "root's secret\n", { mode: 0o600 });
  const sub = join(top, "sub");
  mkdirSync(sub, { mode: 0o777 });
  chmodSync(sub, 0o777);
  writeFileSync(join(sub, "secret"), "root's secret\n", { mode: 0o644 });
  return { top, sub };
}

describe("--chdir is entered as the job user, after the uid drop", () => {
  it("a directory under a 0700 root directory: one line, the task not started, nothing read or written", async () => {
    expect(process.getuid?.()).toBe(0);
    const s = site();
    const { sub } = rootOnlyDir();
    const r = await jobrt(["run", "--runtime", "none", "--uid", "nobody", "-D", sub, "sh", "-c", "cat secret; touch x; echo started"], { env: s.env });
    expect(r.stdout).toBe("");
    expect(r.stderr).toBe(`jobrt: task 0: cannot change to directory ${sub}: permission denied\n`);
    expect(r.code).toBe(1);
    expect(existsSync(join(sub, "x"))).toBe(false);
  });

  it("without perl (Node starts the tasks) too", async () => {
    const s = site();
    const { sub } = rootOnlyDir();
    // perl hidden in a mount namespace of this run only.
    const hide = "for p in /usr/bin/perl /bin/perl /usr/local/bin/perl; do [ -e $p ] && mount --bind /dev/null $p; done; exec \"$@\"";
    const r = await runProgram(["unshare", "-m", "--propagation", "private", "sh", "-c", hide, "sh", process.execPath, "--", jobrtBin, "run", "--runtime", "none", "--uid", "nobody", "-D", sub, "sh", "-c", "cat secret; touch x; echo started"], { env: s.env });
    expect(r.stdout).toBe("");
    expect(r.stderr).toMatch(/^jobrt: warning: tasks are started by Node \(no perl in [^)]*\): [^\n]*\n/);
    expect(r.stderr.replace(/^jobrt: warning: [^\n]*\n/, "")).toBe(`jobrt: task 0: cannot change to directory ${sub}: permission denied\n`);
    expect(r.code).toBe(1);
    expect(existsSync(join(sub, "x"))).toBe(false);
  });

  it("a directory the user may enter still works, and a missing one is reported as before", async () => {
    const s = site();
    const open = tempDir("jobrt-open-");
    chmodSync(open, 0o777);
    const ok = await jobrt(["run", "--runtime", "none", "--uid", "nobody", "-D", open, "sh", "-c", "pwd; id -u; touch x"], { env: s.env });
    expect(ok.stderr).toBe("");
    expect(ok.stdout).toBe(`${open}\n${NOBODY}\n`);
    expect(existsSync(join(open, "x"))).toBe(true);
    const { top } = rootOnlyDir();
    // Whether it exists is not nobody's to learn: the same line as for one that does.
    const hidden = await jobrt(["run", "--runtime", "none", "--uid", "nobody", "-D", join(top, "nothing"), "true"], { env: s.env });
    expect(hidden.stderr).toBe(`jobrt: task 0: cannot change to directory ${join(top, "nothing")}: permission denied\n`);
    expect(hidden.code).toBe(1);
    const missing = await jobrt(["run", "--runtime", "none", "--uid", "nobody", "-D", join(open, "nothing"), "true"], { env: s.env });
    expect(missing.stderr).toBe(`jobrt: task 0: cannot change to directory ${join(open, "nothing")}: no such directory\n`);
    expect(missing.code).toBe(1);
  });
});
