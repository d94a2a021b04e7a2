/**
 * `jobrt run` and `jobrt exec` run from dist/steps.cjs with V8's code cache (src/codecache.ts):
 * the cache is bytecode, so only a regular file of root's or the user's own, writable by nobody
 * else, in a directory of the same kind, is ever read; anything else is replaced or ignored, a
 * corrupt cache (its CRC-32 is checked before V8 sees it) is rebuilt, each Node build has its
 * own, and an install the user may not write runs without one.
 */
import {
  chmodSync,
  chownSync,
  copyFileSync,
  cpSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { repoRoot, runProgram, tempDir } from "../helpers/jobrt.js";

const NOBODY = 65534;
const SLURM_TASK = { SLURM_JOB_ID: "4711", SLURM_STEP_ID: "0", SLURM_PROCID: "0", SLURM_LOCALID: "0" };

/** A copy of the built CLI in a directory of its own (its caches are its own), with its dependencies. */
function install(): { dir: string; dist: string; conf: string; tmp: string } {
  const dir = tempDir("jobrt-codecache-");
  chmodSync(dir, 0o755);
  const cli = join(repoRoot, "packages/cli");
  mkdirSync(join(dir, "dist"), { mode: 0o755 });
  for (const f of readdirSync(join(cli, "dist")))
    if (!f.endsWith(".cache") && !f.endsWith(".tmp"))
      cpSync(join(cli, "dist", f), join(dir, "dist", f), { recursive: true });
  copyFileSync(join(cli, "package.json"), join(dir, "package.json"));
  symlinkSync(join(cli, "node_modules"), join(dir, "node_modules"));
  const conf = join(dir, "conf");
  mkdirSync(conf, { mode: 0o755 });
  // TMPDIR and SpoolDir are sticky and world-writable like /tmp, so a job user's exec keeps its
  // crash record and says nothing on stderr; root's SpoolDir is the test's own, never the
  // node's /var/spool/jobrt (which a test on another node's hostname could claim first).
  const tmp = join(dir, "tmp");
  const spool = join(dir, "spool");
  for (const d of [tmp, spool]) {
    mkdirSync(d);
    chmodSync(d, 0o1777);
  }
  writeFileSync(join(conf, "jobrt.conf"), `SpoolDir=${spool}\n`);
  return { dir, dist: join(dir, "dist"), conf, tmp };
}

function exec(
  site: { dir: string; conf: string; tmp: string },
  options: { uid?: number; env?: Record<string, string>; args?: string[] } = {},
) {
  const { uid, env = {}, args = ["exec", "--runtime", "none", "echo", "ran"] } = options;
  return runProgram([process.execPath, "--", join(site.dir, "dist/bin.js"), ...args], {
    env: { ...process.env, JOBRT_CONF_DIR: site.conf, TMPDIR: site.tmp, ...SLURM_TASK, ...env },
    ...(uid === undefined ? {} : { uid, gid: uid }),
  });
}

const caches = (dist: string) => readdirSync(dist).filter((f) => f.endsWith(".cache"));

/** The Node and V8 build that made a cache are in its name: V8 rejects another build's. */
const BUILD = `node${process.versions.node}-v8.${process.versions.v8.replace(/[^0-9A-Za-z.-]/g, "_")}`;
const escaped = BUILD.replace(/[.]/g, "\\.");

/** The cache: its path, inode and bytes (a rewrite is a rename: a new inode). */
function execCache(dist: string): { path: string; ino: number; uid: number; mode: number; bytes: Buffer } {
  const names = caches(dist);
  expect(names).toHaveLength(1);
  const [name] = names;
  expect(name).toMatch(new RegExp(`^steps-[0-9a-f]{16}-${escaped}\\.cache$`));
  const path = join(dist, name!);
  const st = lstatSync(path);
  return { path, ino: st.ino, uid: st.uid, mode: st.mode & 0o7777, bytes: readFileSync(path) };
}

async function expectRan(site: { dir: string; conf: string; tmp: string }, options: { uid?: number } = {}) {
  const r = await exec(site, options);
  expect(r.stderr).toBe("");
  expect(r.stdout).toBe("ran\n");
  expect(r.code).toBe(0);
}

describe("the code cache of jobrt run and jobrt exec", () => {
  it("the first run writes it (0644), the next one uses it as it is", async () => {
    const site = install();
    expect(caches(site.dist)).toEqual([]);
    await expectRan(site);
    const first = execCache(site.dist);
    expect(first.mode).toBe(0o644);
    expect(first.uid).toBe(0);
    expect(first.bytes.length).toBeGreaterThan(10_000);
    await expectRan(site);
    expect(execCache(site.dist).ino).toBe(first.ino);
    expect(readdirSync(site.dist).filter((f) => f.endsWith(".tmp"))).toEqual([]);
  }, 60_000);

  it("holds every function, whichever command wrote it: the one `jobrt run --help` writes is the one `jobrt exec` writes", async () => {
    const site = install();
    const help = await exec(site, { args: ["run", "--help"] });
    expect(help.code).toBe(0);
    const fromHelp = execCache(site.dist);
    unlinkSync(fromHelp.path);
    await expectRan(site);
    const fromExec = execCache(site.dist);
    // The same functions compiled (a few bytes of V8's own bookkeeping may differ).
    expect(Math.abs(fromExec.bytes.length - fromHelp.bytes.length)).toBeLessThan(fromExec.bytes.length / 100);
    await expectRan(site);
    expect(execCache(site.dist).ino).toBe(fromExec.ino);
  }, 60_000);

  it("a run under other V8 options (NODE_OPTIONS) keeps a cache of its own: switching back and forth rewrites neither", async () => {
    const site = install();
    const flagged = { env: { NODE_OPTIONS: "--max-semi-space-size=4" } };
    await expectRan(site);
    const plain = execCache(site.dist);
    const ran = await exec(site, flagged);
    expect(ran.stdout).toBe("ran\n");
    const names = caches(site.dist).sort();
    expect(names).toHaveLength(2);
    const other = join(site.dist, names.find((n) => n !== plain.path.split("/").pop())!);
    expect(other).toMatch(new RegExp(`/steps-[0-9a-f]{16}-${escaped}-[0-9a-f]{8}\\.cache$`));
    const otherIno = lstatSync(other).ino;
    await expectRan(site);
    await exec(site, flagged);
    expect(lstatSync(plain.path).ino).toBe(plain.ino);
    expect(lstatSync(other).ino).toBe(otherIno);
  }, 60_000);

  it("a corrupt or truncated cache is rebuilt, never fatal", async () => {
    const site = install();
    await expectRan(site);
    const good = execCache(site.dist);
    writeFileSync(good.path, Buffer.alloc(good.bytes.length, 0x5a));
    await expectRan(site);
    expect(execCache(site.dist).bytes.length).toBeGreaterThan(10_000);
    expect(execCache(site.dist).bytes.equals(Buffer.alloc(good.bytes.length, 0x5a))).toBe(false);
    writeFileSync(good.path, good.bytes.subarray(0, 100));
    await expectRan(site);
    expect(execCache(site.dist).bytes.length).toBeGreaterThan(10_000);
  }, 60_000);

  it("a cache damaged inside V8's payload (bytes flipped) or cut short is never handed to V8: every user's run works, root's rebuilds it", async () => {
    // V8 checks its header, not its payload: such a cache crashed every jobrt (SIGSEGV, SIGTRAP)
    // until someone deleted it (issue 23, item 8).
    const site = install();
    await expectRan(site);
    const good = execCache(site.dist);
    const flipped = (offset: number) => {
      const bytes = Buffer.from(good.bytes);
      for (let i = offset; i < offset + 8; i++) bytes[i] = 0xff;
      return bytes;
    };
    const spoilt = [...[1000, 5000, 100_000, 200_000].map(flipped), good.bytes.subarray(0, good.bytes.length >> 1)];
    for (const bytes of spoilt) {
      writeFileSync(good.path, bytes);
      // A user who may not write dist/ runs without it, and leaves it for root.
      await expectRan(site, { uid: NOBODY });
      expect(readFileSync(good.path).equals(bytes)).toBe(true);
      await expectRan(site);
      const rebuilt = execCache(site.dist);
      expect(rebuilt.bytes.equals(bytes)).toBe(false);
      expect(rebuilt.bytes.length).toBeGreaterThan(10_000);
      // The rebuilt one is taken as it is.
      await expectRan(site, { uid: NOBODY });
      await expectRan(site);
      expect(execCache(site.dist).ino).toBe(rebuilt.ino);
    }
  }, 120_000);

  it.each([
    ["belongs to another user", (path: string) => chownSync(path, NOBODY, NOBODY)],
    ["is group-writable", (path: string) => chmodSync(path, 0o664)],
    ["is world-writable", (path: string) => chmodSync(path, 0o646)],
  ])(
    "a good cache that %s is never read: it is replaced by one of the user's own",
    async (_, spoil) => {
      const site = install();
      await expectRan(site);
      const good = execCache(site.dist);
      spoil(good.path);
      // Had it been read, V8 would have taken it and nothing would have been written.
      await expectRan(site);
      const now = execCache(site.dist);
      expect(now.ino).not.toBe(good.ino);
      expect({ uid: now.uid, mode: now.mode }).toEqual({ uid: 0, mode: 0o644 });
    },
    60_000,
  );

  it("a symlink in the cache's place is not followed: the link is replaced, its target untouched", async () => {
    const site = install();
    await expectRan(site);
    const good = execCache(site.dist);
    const elsewhere = join(tempDir(), "target");
    copyFileSync(good.path, elsewhere);
    chmodSync(elsewhere, 0o644);
    const targetBytes = readFileSync(elsewhere);
    unlinkSync(good.path);
    symlinkSync(elsewhere, good.path);
    await expectRan(site);
    expect(lstatSync(good.path).isFile()).toBe(true);
    expect(readFileSync(elsewhere).equals(targetBytes)).toBe(true);
  }, 60_000);

  it("in a directory others may write, no cache is read or written", async () => {
    const site = install();
    chmodSync(site.dist, 0o775);
    await expectRan(site);
    expect(caches(site.dist)).toEqual([]);
  }, 60_000);

  it("an install the user may not write runs without a cache, silently", async () => {
    const site = install();
    await expectRan(site, { uid: NOBODY });
    expect(caches(site.dist)).toEqual([]);
    // root's cache is one the user may use.
    await expectRan(site);
    const roots = execCache(site.dist);
    await expectRan(site, { uid: NOBODY });
    expect(execCache(site.dist).ino).toBe(roots.ino);
  }, 60_000);

  it("the package never ships a cache (bytecode made on a maintainer's machine)", async () => {
    const cli = join(repoRoot, "packages/cli");
    const site = install();
    await expectRan({ dir: cli, conf: site.conf, tmp: site.tmp });
    expect(caches(join(cli, "dist")).length).toBeGreaterThan(0);
    const pack = await runProgram(["npm", "pack", "--dry-run", "--json"], { cwd: cli });
    expect(pack.code).toBe(0);
    const files = (JSON.parse(pack.stdout) as { files: { path: string }[] }[])[0]!.files.map((f) => f.path);
    expect(files).toContain("dist/steps.cjs");
    expect(files.filter((f) => /\.(cache|tmp)$/.test(f))).toEqual([]);
  }, 60_000);
});
