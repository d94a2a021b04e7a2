/**
 * Hostile input: configuration files that are not regular files or are huge, and command-line or
 * conf values at and past their limits. Each cell runs the built jobrt and checks the exit status
 * (docs/errors.md), the exact one line, that no task started, and ends with the shared leak check.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { busyboxBundle } from "../helpers/fixtures.js";
import { type RunResult, jobrt, jobrtBin, repoRoot } from "../helpers/jobrt.js";
import { type FaultSite, expectNoLeaks, faultSite, runcContainers, waitFor } from "../helpers/leaks.js";

const FIFO_BOUND_MS = 15_000;

/**
 * Runs the built jobrt with a hard bound: code that opens a FIFO blocks in a synchronous open,
 * deaf to signals, so the cell SIGKILLs it when the bound passes (and in any case on the way out).
 */
async function bounded(
  args: string[],
  env: Record<string, string>,
  ms = FIFO_BOUND_MS,
): Promise<RunResult & { killed: boolean }> {
  const child = spawn(process.execPath, ["--", jobrtBin, ...args], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (d: string) => {
    stdout += d;
  });
  child.stderr.setEncoding("utf8").on("data", (d: string) => {
    stderr += d;
  });
  let killed = false;
  const timer = setTimeout(() => {
    killed = true;
    child.kill("SIGKILL");
  }, ms);
  try {
    const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((r) =>
      child.once("close", (c, s) => r([c, s])),
    );
    return { code, signal, stdout, stderr, killed };
  } finally {
    clearTimeout(timer);
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  }
}

/** A step command that leaves a trace if any task ever starts. */
const touch = (s: FaultSite) => ["touch", join(s.dir, "started")];
const started = (s: FaultSite) => existsSync(join(s.dir, "started"));

function replaceWithFifo(path: string): void {
  if (existsSync(path)) unlinkSync(path);
  execFileSync("mkfifo", [path]);
}

describe("faults: configuration files that are not regular files", () => {
  it("jobrt.conf is a FIFO: exit 2 at once with one line, no hang, nothing starts", async () => {
    const s = faultSite();
    replaceWithFifo(join(s.dir, "jobrt.conf"));
    const r = await bounded(["run", "--runtime", "none", ...touch(s)], s.env);
    expect(r.killed).toBe(false);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`jobrt: ${s.dir}/jobrt.conf: is a FIFO; configuration is read only from regular files\n`);
    expect(started(s)).toBe(false);
    await expectNoLeaks(s);
  });

  it("an Included file is a FIFO: exit 2 with the Include line, no hang", async () => {
    const s = faultSite("Include extra.conf\n");
    replaceWithFifo(join(s.dir, "extra.conf"));
    const r = await bounded(["run", "--runtime", "none", ...touch(s)], s.env);
    expect(r.killed).toBe(false);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      `jobrt: ${s.dir}/jobrt.conf:3:1: Include: ${s.dir}/extra.conf: is a FIFO; configuration is read only from regular files\n`,
    );
    expect(started(s)).toBe(false);
    await expectNoLeaks(s);
  });

  it("oci.conf is a FIFO: the runtime's setup fails at once (exit 1), no container, no hang", async () => {
    const s = faultSite("", { "oci.conf": "" });
    replaceWithFifo(join(s.dir, "oci.conf"));
    const bundle = busyboxBundle(join(s.dir, "bundle"));
    const r = await bounded(["run", "--runtime", "oci", "--container", bundle, "true"], s.env);
    expect(r.killed).toBe(false);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      `jobrt: runtime runtime/oci setup failed: ${s.dir}/oci.conf: is a FIFO; configuration is read only from regular files\n`,
    );
    await expectNoLeaks(s);
  });

  it("Include /dev/zero: exit 2 with one line instead of reading for ever", async () => {
    const s = faultSite("Include /dev/zero\n");
    const r = await bounded(["run", "--runtime", "none", ...touch(s)], s.env);
    expect(r.killed).toBe(false);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      `jobrt: ${s.dir}/jobrt.conf:3:1: Include: /dev/zero: is a character device; configuration is read only from regular files\n`,
    );
    expect(started(s)).toBe(false);
    await expectNoLeaks(s);
  });

  it("a dangling symlink jobrt.conf is an error, not the embedded defaults", async () => {
    const s = faultSite();
    unlinkSync(join(s.dir, "jobrt.conf"));
    symlinkSync(join(s.dir, "moved.conf"), join(s.dir, "jobrt.conf"));
    const r = await jobrt(["run", "--runtime", "none", ...touch(s)], { env: s.env });
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`jobrt: ${s.dir}/jobrt.conf: is a dangling symlink (to "${s.dir}/moved.conf")\n`);
    expect(started(s)).toBe(false);
    await expectNoLeaks(s);
  });

  it("a dangling symlink oci.conf is an error, not the embedded runc default", async () => {
    const s = faultSite();
    symlinkSync(join(s.dir, "moved.conf"), join(s.dir, "oci.conf"));
    const bundle = busyboxBundle(join(s.dir, "bundle"));
    const r = await jobrt(["run", "--runtime", "oci", "--container", bundle, ...touch(s)], { env: s.env });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      `jobrt: runtime runtime/oci setup failed: ${s.dir}/oci.conf: is a dangling symlink (to "${s.dir}/moved.conf")\n`,
    );
    expect(started(s)).toBe(false);
    await expectNoLeaks(s);
  });
});

describe("faults: a FIFO oci.conf met by a later run's gc", () => {
  it("the next run's pre-run gc does not hang: it cleans up the dead step from its journaled state without opening the FIFO, and the run goes on", async () => {
    // runc with an id of this cell's own, so the leak check and gc see only our container.
    const tag = `jfinput${process.pid}`;
    const id = `${tag}.%j.%s.%t`;
    const runc = "runc --root /run/runc";
    const conf = `RunTimeQuery="${runc} state ${id}"\nRunTimeRun="${runc} run ${id} -b %b"\nRunTimeKill="${runc} kill -a ${id}"\nRunTimeDelete="${runc} delete --force ${id}"\n`;
    const s = faultSite("", { "oci.conf": conf });
    const bundle = busyboxBundle(join(s.dir, "bundle"));
    let dead: ChildProcess | undefined;
    try {
      dead = spawn(process.execPath, ["--", jobrtBin, "run", "--jobid", "81", "--container", bundle, "sleep", "300"], {
        env: { ...process.env, ...s.env },
        stdio: "ignore",
      });
      await waitFor(
        () => runcContainers(s.dir).some((c) => c.startsWith(`${tag}.81.`)),
        "the container to run",
        30_000,
      );
      const gone = new Promise((r) => dead?.once("exit", r));
      dead.kill("SIGKILL");
      await gone;
      replaceWithFifo(join(s.dir, "oci.conf"));
      const r = await bounded(["run", "--runtime", "none", ...touch(s)], s.env);
      expect(r.killed).toBe(false);
      // Runtime API 2: cleanup takes oci.conf as setup read it from the step state, so the FIFO
      // is never opened and the dead step's container goes (it stayed, with a warning, before).
      expect(r.stderr).toBe("");
      expect(r.code).toBe(0);
      expect(started(s)).toBe(true);
      expect(runcContainers(s.dir)).toEqual([]);
      expect(existsSync(join(s.spool, "oci-job81-0"))).toBe(false);
    } finally {
      if (dead && dead.exitCode === null && dead.signalCode === null) dead.kill("SIGKILL");
      unlinkSync(join(s.dir, "oci.conf"));
      writeFileSync(join(s.dir, "oci.conf"), conf);
      await jobrt(["gc"], { env: s.env });
      // After a failure half-way, the cell removes its own container and spool dir.
      for (const c of runcContainers(s.dir)) execFileSync("runc", ["--root", "/run/runc", "delete", "--force", c]);
      rmSync(join(s.spool, "oci-job81-0"), { recursive: true, force: true });
    }
    unlinkSync(join(s.dir, "started"));
    await expectNoLeaks(s);
  });
});

describe("faults: configuration files that are too large", () => {
  it("a jobrt.conf over 1 MiB: exit 2, one line naming the file and the limit", async () => {
    const s = faultSite();
    const text = `SpoolDir=${s.spool}\n${"# padding\n".repeat(200_000)}`;
    writeFileSync(join(s.dir, "jobrt.conf"), text);
    const r = await jobrt(["run", "--runtime", "none", ...touch(s)], { env: s.env });
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      `jobrt: ${s.dir}/jobrt.conf: is ${Buffer.byteLength(text)} bytes, more than the 1048576-byte (1 MiB) limit for a configuration file\n`,
    );
    expect(started(s)).toBe(false);
    await expectNoLeaks(s);
  });

  it("50,000 repeated keys: 10 warnings and one line counting the rest, and the step runs", async () => {
    const s = faultSite("KillWait=1\n".repeat(50_000));
    const r = await jobrt(["run", "--runtime", "none", "true"], { env: s.env });
    expect(r.code).toBe(0);
    const lines = r.stderr.split("\n").filter(Boolean);
    expect(lines).toHaveLength(11);
    expect(lines[0]).toBe(
      `jobrt: warning: ${s.dir}/jobrt.conf:3: KillWait specified more than once (first at line 2); the last value wins`,
    );
    expect(lines[10]).toBe(
      `jobrt: warning: ${s.dir}/jobrt.conf: 49990 more keys specified more than once (not shown); the last value of each wins`,
    );
    await expectNoLeaks(s);
  });
});

describe("faults: values at and past their limits (one line, exit 2, nothing started)", () => {
  it("-o with a padding width of 999999999: a usage error, not 'Invalid string length'", async () => {
    const s = faultSite();
    const r = await jobrt(["run", "--runtime", "none", "-o", join(s.dir, "x%999999999t"), ...touch(s)], { env: s.env });
    expect(r.code).toBe(2);
    expect(r.stderr).toBe("jobrt: --output: padding width 999999999 in %999999999t is more than 10\n");
    expect(started(s)).toBe(false);
    await expectNoLeaks(s);
  });

  it.each([
    ["--uid", "4294967295"],
    ["--uid", "2147483648"],
    ["--gid", "4294967295"],
  ])("%s %s: a usage error naming the range, not Node's 'must be int32'", async (option, id) => {
    expect(process.getuid?.()).toBe(0); // --uid/--gid need root: without it the line would be another one
    const s = faultSite();
    const r = await jobrt(["run", "--runtime", "none", option, id, ...touch(s)], { env: s.env });
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`jobrt: ${option}: "${id}" is not an id from 0 to 2147483647\n`);
    expect(started(s)).toBe(false);
    await expectNoLeaks(s);
  });

  it("a NUL byte in SpoolDir: refused at its file:line:column", async () => {
    const s = faultSite();
    writeFileSync(join(s.dir, "jobrt.conf"), `KillWait=1\nSpoolDir=${s.spool}\0x\n`);
    const r = await jobrt(["run", "--runtime", "none", ...touch(s)], { env: s.env });
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      `jobrt: ${s.dir}/jobrt.conf:2:${"SpoolDir=".length + s.spool.length + 1}: contains a NUL byte\n`,
    );
    expect(started(s)).toBe(false);
    await expectNoLeaks(s);
  });

  it("a 50 MB SpoolDir value: one short line (the size cap), not a 100 MB one", async () => {
    const s = faultSite();
    writeFileSync(join(s.dir, "jobrt.conf"), `SpoolDir=/${"a".repeat(50_000_000)}\n`);
    const r = await jobrt(["run", "--runtime", "none", ...touch(s)], { env: s.env });
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      `jobrt: ${s.dir}/jobrt.conf: is 50000011 bytes, more than the 1048576-byte (1 MiB) limit for a configuration file\n`,
    );
    expect(started(s)).toBe(false);
    await expectNoLeaks(s);
  });

  it("a 900 kB SpoolDir value under the cap: one short line with file:line, not the value", async () => {
    const s = faultSite();
    writeFileSync(join(s.dir, "jobrt.conf"), `KillWait=1\nSpoolDir=/${"a".repeat(900_000)}\n`);
    const r = await jobrt(["run", "--runtime", "none", ...touch(s)], { env: s.env });
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      `jobrt: ${s.dir}/jobrt.conf:2:10: SpoolDir: a path of 900001 bytes is longer than the 4095-byte limit\n`,
    );
    expect(started(s)).toBe(false);
    await expectNoLeaks(s);
  });

  it("a NodeName past 64 characters (HOST_NAME_MAX): one line with file:line, not spawn E2BIG and the value", async () => {
    const s = faultSite();
    writeFileSync(join(s.dir, "jobrt.conf"), `KillWait=1\nNodeName=${"a".repeat(1_000_000)}\n`);
    const r = await jobrt(["run", "--runtime", "none", ...touch(s)], { env: s.env });
    expect(r.stderr).toBe(
      `jobrt: ${s.dir}/jobrt.conf:2:10: NodeName: a name of 1000000 characters is longer than the 64-character limit of a host name\n`,
    );
    expect(r.code).toBe(2);
    writeFileSync(join(s.dir, "jobrt.conf"), `KillWait=1\nNodeName=${"b".repeat(65)}\n`);
    const over = await jobrt(["run", "--runtime", "none", ...touch(s)], { env: s.env });
    expect(over.stderr).toBe(
      `jobrt: ${s.dir}/jobrt.conf:2:10: NodeName: a name of 65 characters is longer than the 64-character limit of a host name\n`,
    );
    expect(started(s)).toBe(false);
    writeFileSync(join(s.dir, "jobrt.conf"), `KillWait=1\nSpoolDir=${s.spool}\nNodeName=${"c".repeat(64)}\n`);
    const at = await jobrt(["run", "--runtime", "none", ...touch(s)], { env: s.env });
    expect(at.stderr).toBe("");
    expect(at.code).toBe(0);
    await expectNoLeaks(s);
  });

  it("--runtime '': a usage error, not the default runtime", async () => {
    const s = faultSite();
    const r = await jobrt(["run", "--runtime", "", ...touch(s)], { env: s.env });
    expect(r.code).toBe(2);
    expect(r.stderr).toBe("jobrt: --runtime: empty value (leave the option out for the default runtime)\n");
    expect(started(s)).toBe(false);
    await expectNoLeaks(s);
  });
});

/** A real runtime package whose name is `name` (x or @scope/x), installed in a PluginDir of its own. */
function namedPluginDir(s: FaultSite, name: string): string {
  const dir = join(s.dir, "plugins");
  const scoped = /^@([^/]+)\/(.+)$/.exec(name);
  const pkgName = scoped ? `@${scoped[1]}/jobrt-runtime-${scoped[2]}` : `jobrt-runtime-${name}`;
  const pkg = join(dir, "node_modules", pkgName);
  mkdirSync(pkg, { recursive: true });
  const core = new URL(`file://${join(repoRoot, "packages/core/dist/index.js")}`).href;
  writeFileSync(
    join(pkg, "package.json"),
    JSON.stringify({ name: pkgName, version: "0.0.1", type: "module", exports: "./index.js" }),
  );
  writeFileSync(
    join(pkg, "index.js"),
    `import { definePlugin } from ${JSON.stringify(core)};\nexport default definePlugin({ name: ${JSON.stringify(name)}, type: ${JSON.stringify(`runtime/${name}`)}, version: "0.0.1" }, {});\n`,
  );
  return dir;
}

describe("faults: runtime names of up to 100 characters, as docs/architecture.md allows", () => {
  const base = "r".repeat(100);
  const scoped = `@${"s".repeat(48)}/${"r".repeat(50)}`;
  it.each([
    ["a 100-character name", base, base],
    ["the same name spelled runtime/x", base, `runtime/${base}`],
    ["a 100-character @scope/x", scoped, scoped],
    ["a 93-character name", "n".repeat(93), "n".repeat(93)],
  ])("%s loads and runs the step", async (_, name, given) => {
    const s = faultSite();
    writeFileSync(
      join(s.dir, "jobrt.conf"),
      `SpoolDir=${s.spool}\nKillWait=1\nRuntimePlugins=none,${name}\nPluginDir=${namedPluginDir(s, name)}\n`,
    );
    const r = await jobrt(["run", "--runtime", given, ...touch(s)], { env: s.env });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(started(s)).toBe(true);
    await expectNoLeaks(s);
  });

  it("a 101-character name is refused with one line (exit 2)", async () => {
    const s = faultSite();
    const r = await jobrt(["run", "--runtime", `runtime/${"r".repeat(101)}`, ...touch(s)], { env: s.env });
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      `jobrt: invalid runtime name "runtime/${"r".repeat(52)}...": longer than 100 characters after "runtime/"\n`,
    );
    expect(started(s)).toBe(false);
    await expectNoLeaks(s);
  });
});
