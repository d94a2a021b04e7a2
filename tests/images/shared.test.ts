/**
 * The cluster image store (images.conf SharedStore, docs/images.md) end to end: the built `jobrt`,
 * real runc, real mksquashfs and loop mounts, a real docker-registry on 127.0.0.1. Several node
 * identities (each its own NodeName, SpoolDir and CacheDir) share one SharedStore, as the nodes of
 * a cluster share one on NFS.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { jobrt, jobrtBin, runProgram, tempDir } from "../helpers/jobrt.js";
import { type Registry, pushBusybox, startRegistry, expectImagePrerequisites } from "../helpers/registry.js";

const NOBODY = ["--uid", "65534", "--gid", "65534"];
let nextJob = 760000 + (process.pid % 1000) * 50;
const jobId = () => String(++nextJob);

/** One node identity: its own conf dir (NodeName, SpoolDir, CacheDir), the given shared store. */
function nodeSite(reg: Registry, name: string, store: string, extra = ""): { dir: string; cache: string } {
  const dir = tempDir(`jobrt-shared-${name}-`);
  chmodSync(dir, 0o755);
  const cache = join(dir, "cache");
  writeFileSync(join(dir, "jobrt.conf"), `NodeName=${name}\nSpoolDir=${join(dir, "spool")}\nKillWait=2\n`);
  writeFileSync(
    join(dir, "images.conf"),
    `CacheDir=${cache}\nInsecureRegistries=${reg.host}\nSharedStore=${store}\n${extra}`,
  );
  return { dir, cache };
}

/** A fresh shared store: a root-owned 0755 dir. */
function sharedStore(): string {
  const parent = tempDir("jobrt-store-");
  // Job users reach it (a rootless jobrt mounts its images with squashfuse).
  chmodSync(parent, 0o755);
  const store = join(parent, "store");
  mkdirSync(store, { mode: 0o755 });
  return store;
}

const squashfsFiles = (store: string) =>
  existsSync(join(store, "images")) ? readdirSync(join(store, "images")).filter((n) => n.endsWith(".sqfs")) : [];

/** How often each blob of `repo` was fetched (GET, not HEAD), from the registry's access log. */
function blobFetches(reg: Registry, repo: string): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const m of reg.log().matchAll(new RegExp(`"GET /v2/${repo}/blobs/(sha256:[0-9a-f]{64}) HTTP`, "g")))
    counts[m[1] as string] = (counts[m[1] as string] ?? 0) + 1;
  return counts;
}

/** The squashfs mounts still under a cache dir (none once every step ended). */
function mountsUnder(cache: string): string[] {
  return readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .map((l) => l.split(" ")[4] ?? "")
    .filter((p) => p.startsWith(`${cache}/`));
}

/**
 * A rootless jobrt (uid/gid 65534) on the site `a`: SpoolDir and the node cache's users/ shared
 * with job users (1777), as a site makes them (docs/slurm.md); the user's jobrt makes its own store. `run(script)` runs a shell
 * script as root in a private mount namespace; with `fuse`, a /dev/fuse the job user may open is
 * bind-mounted over the host's (crw------- here) first, a node of the test's own, so the host is
 * not changed. In the script `$U` runs a command as the job user, `$J` is the jobrt command line
 * (node -- bin), `$C` the conf dir, `$R` the image, `$W` a dir for outputs, `$S` the store, and
 * `env` sets more.
 */
function rootless(a: { dir: string; cache: string }, store: string, ref: string) {
  chmodSync(join(a.dir, "spool"), 0o1777);
  expect(spawnSync("install", ["-d", "-m", "1777", join(a.cache, "users")]).status).toBe(0);
  const work = tempDir("jobrt-fuse-");
  chmodSync(work, 0o777);
  const node = join(work, "fuse");
  expect(spawnSync("mknod", ["-m", "666", node, "c", "10", "229"]).status).toBe(0);
  const read = (name: string) => (existsSync(join(work, name)) ? readFileSync(join(work, name), "utf8") : "");
  const run = (script: string, fuse: boolean, env: Record<string, string> = {}) =>
    runProgram(["unshare", "-m", "sh", "-c", `${fuse ? 'mount --bind "$F" /dev/fuse || exit 99\n' : ""}${script}`], {
      env: {
        PATH: process.env.PATH,
        HOME: "/",
        F: node,
        U: "setpriv --reuid=65534 --regid=65534 --clear-groups",
        J: `${process.execPath} -- ${jobrtBin}`,
        C: a.dir,
        R: ref,
        W: work,
        S: store,
        ...env,
      },
      timeoutMs: 120_000,
    });
  return { run, read, work };
}

/** Counts the squashfuse mounts this shell's namespace has, into $W/NAME. */
const countFuse = (name: string) => `grep -c ' - fuse.squashfuse ' /proc/self/mountinfo > "$W/${name}" || true`;
/** Waits (30 s at most) until this shell's namespace has a squashfuse mount. */
const WAIT_MOUNTED = `i=0; until grep -q ' - fuse.squashfuse ' /proc/self/mountinfo || [ $i -gt 300 ]; do sleep 0.1; i=$((i+1)); done`;
/** The file system type of the container's own root, printed from inside the step. */
const ROOT_FS = `awk '$5 == "/" { for (i = 7; i <= NF; i++) if ($i == "-") print $(i + 1) }' /proc/self/mountinfo`;

describe("the shared image store: squashfs, pulled once per cluster", () => {
  let reg: Registry;
  /** A root step of `users:1` with a node's conf dir. */
  const runUsersImage = (confDir: string) =>
    jobrt([
      "run",
      "--conf-dir",
      confDir,
      "--jobid",
      jobId(),
      "--container-image",
      `docker://${reg.host}/users:1`,
      "true",
    ]);
  beforeAll(async () => {
    expectImagePrerequisites(["skopeo", "umoci", "docker-registry", "runc", "mksquashfs"], "loop mounts, runc, --uid");
    reg = await startRegistry();
  });
  afterAll(async () => {
    await reg?.stop();
  });

  test("8 concurrent first pulls from 4 node identities: each blob fetched once, one squashfs, every task ran, no mount left", async () => {
    const digest = pushBusybox(reg, "conc:1", "concurrent");
    const store = sharedStore();
    const nodes = [0, 1, 2, 3].map((i) => nodeSite(reg, `node${i}`, store));
    const ref = `docker://${reg.host}/conc:1`;
    const runs = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        jobrt(
          [
            "run",
            "--conf-dir",
            (nodes[i % 4] as { dir: string }).dir,
            "--jobid",
            jobId(),
            "-v",
            "--container-image",
            ref,
            "cat",
            "/etc/jobrt-image",
          ],
          { timeoutMs: 120_000 },
        ),
      ),
    );
    for (const r of runs) {
      expect(r.stdout, r.stderr).toBe("concurrent\n");
      expect(r.code).toBe(0);
      expect(r.stderr).toContain("shared store squashfs");
    }
    const fetched = blobFetches(reg, "conc");
    expect(Object.keys(fetched).length).toBeGreaterThanOrEqual(2);
    for (const [blob, n] of Object.entries(fetched)) expect(n, blob).toBe(1);
    expect(squashfsFiles(store)).toEqual([`${digest.slice(7)}.sqfs`]);
    expect(readdirSync(join(store, "tmp"))).toEqual([]);
    expect(readdirSync(join(store, "leases"))).toEqual([]);
    for (const n of nodes) {
      expect(mountsUnder(n.cache)).toEqual([]);
      // Nothing went into the node caches: the store is the image.
      expect(existsSync(join(n.cache, "public"))).toBe(false);
    }
  }, 180_000);

  test("a pull SIGKILLed mid-conversion: no partial image is visible or used; the same node takes the lease over at once, another after it expired", async () => {
    const digest = pushBusybox(reg, "killed:1", "after-kill");
    const hex = digest.slice(7);
    const store = sharedStore();
    const a = nodeSite(reg, "knode-a", store);
    const b = nodeSite(reg, "knode-b", store);
    const c = nodeSite(reg, "knode-c", store, "SharedLeaseTime=3\n");
    const ref = `docker://${reg.host}/killed:1`;
    // A mksquashfs that writes half a file and hangs: the conversion is where the pull dies.
    const wrap = tempDir("jobrt-mksquashfs-");
    chmodSync(wrap, 0o755);
    const pidFile = join(wrap, "pid");
    writeFileSync(
      join(wrap, "mksquashfs"),
      `#!/bin/sh\nhead -c 65536 /dev/urandom > "$2"\necho $$ > ${pidFile}\nexec sleep 300\n`,
      { mode: 0o755 },
    );
    const killOne = async (site: { dir: string }) => {
      const child: ChildProcess = spawn(
        process.execPath,
        ["--", jobrtBin, "run", "--conf-dir", site.dir, "--jobid", jobId(), "--container-image", ref, "true"],
        { stdio: "ignore", env: { ...process.env, PATH: `${wrap}:${process.env.PATH}` } },
      );
      for (let i = 0; !existsSync(pidFile) && i < 600; i++) await new Promise((r) => setTimeout(r, 50));
      expect(existsSync(pidFile), "the conversion started").toBe(true);
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGKILL");
      await exited;
      process.kill(Number(readFileSync(pidFile, "utf8")), "SIGKILL");
    };
    await killOne(a);
    // The half-written squashfs is in tmp/, never in images/; the lease names the dead holder.
    expect(squashfsFiles(store)).toEqual([]);
    expect(readdirSync(join(store, "tmp")).some((n) => n.startsWith(`${hex}.knode-a.`) && n.endsWith(".sqfs"))).toBe(
      true,
    );
    expect(JSON.parse(readFileSync(join(store, "leases", hex), "utf8")).node).toBe("knode-a");
    const t0 = performance.now();
    const again = await jobrt(
      ["run", "--conf-dir", a.dir, "--jobid", jobId(), "--container-image", ref, "cat", "/etc/jobrt-image"],
      { timeoutMs: 120_000 },
    );
    expect(again.stdout, again.stderr).toBe("after-kill\n");
    // Well before the lease (SharedLeaseTime, 60 s by default) could expire.
    expect(performance.now() - t0, "a dead holder on this node is taken over at once").toBeLessThan(30_000);
    expect(squashfsFiles(store)).toEqual([`${hex}.sqfs`]);
    expect(readdirSync(join(store, "tmp"))).toEqual([]);

    // Another node's holder dies: its lease is taken over once it expired (its SharedLeaseTime=3).
    const digest2 = pushBusybox(reg, "killed:2", "after-expiry");
    const ref2 = `docker://${reg.host}/killed:2`;
    spawnSync("rm", ["-f", pidFile]);
    const child: ChildProcess = spawn(
      process.execPath,
      ["--", jobrtBin, "run", "--conf-dir", c.dir, "--jobid", jobId(), "--container-image", ref2, "true"],
      { stdio: "ignore", env: { ...process.env, PATH: `${wrap}:${process.env.PATH}` } },
    );
    for (let i = 0; !existsSync(pidFile) && i < 600; i++) await new Promise((r) => setTimeout(r, 50));
    const exited = new Promise((r) => child.once("exit", r));
    child.kill("SIGKILL");
    await exited;
    process.kill(Number(readFileSync(pidFile, "utf8")), "SIGKILL");
    const fromB = await jobrt(
      ["run", "--conf-dir", b.dir, "--jobid", jobId(), "-v", "--container-image", ref2, "cat", "/etc/jobrt-image"],
      { timeoutMs: 180_000 },
    );
    expect(fromB.stdout, fromB.stderr).toBe("after-expiry\n");
    expect(fromB.stderr).toContain("being pulled into the shared store by knode-c");
    expect(squashfsFiles(store).sort()).toEqual([`${hex}.sqfs`, `${digest2.slice(7)}.sqfs`].sort());
  }, 240_000);

  test("a tag moved between the first and the second node's launch: both nodes of the job run the first digest; jobrt check prints the digest and an export line", async () => {
    const first = pushBusybox(reg, "moving:1", "first");
    const store = sharedStore();
    const a = nodeSite(reg, "tnode-a", store);
    const b = nodeSite(reg, "tnode-b", store);
    const ref = `docker://${reg.host}/moving:1`;
    const check = await jobrt(["check", "--conf-dir", a.dir, "--container-image", ref, "true"]);
    expect(check.code, check.stderr).toBe(0);
    expect(check.stdout).toContain(`image ${ref}: ${first} (public); runs from the shared store ${store}`);
    expect(check.stdout).toContain(`\nexport JOBRT_CONTAINER_IMAGE='docker://${reg.host}/moving:1@${first}'\n`);
    const job = jobId();
    const onA = await jobrt([
      "run",
      "--conf-dir",
      a.dir,
      "--jobid",
      job,
      "--container-image",
      ref,
      "cat",
      "/etc/jobrt-image",
    ]);
    expect(onA.stdout, onA.stderr).toBe("first\n");
    const second = pushBusybox(reg, "moving:1", "second");
    expect(second).not.toBe(first);
    const onB = await jobrt([
      "run",
      "--conf-dir",
      b.dir,
      "--jobid",
      job,
      "-v",
      "--container-image",
      ref,
      "cat",
      "/etc/jobrt-image",
    ]);
    expect(onB.stdout, onB.stderr).toBe("first\n");
    expect(onB.stderr).toContain(`is ${first}, pinned for job ${job} step 0`);
    // Another job resolves the tag anew.
    const other = await jobrt([
      "run",
      "--conf-dir",
      b.dir,
      "--jobid",
      jobId(),
      "--container-image",
      ref,
      "cat",
      "/etc/jobrt-image",
    ]);
    expect(other.stdout, other.stderr).toBe("second\n");
  }, 180_000);

  test("a reference by digest whose squashfs is in the store starts on a new node without asking the registry", async () => {
    const digest = pushBusybox(reg, "bydigest:1", "by-digest");
    const store = sharedStore();
    const a = nodeSite(reg, "dnode-a", store);
    const b = nodeSite(reg, "dnode-b", store);
    const ref = `docker://${reg.host}/bydigest@${digest}`;
    const fill = await jobrt(["run", "--conf-dir", a.dir, "--jobid", jobId(), "--container-image", ref, "true"]);
    expect(fill.code, fill.stderr).toBe(0);
    const asked = () =>
      reg
        .log()
        .split("\n")
        .filter((l) => l.includes("/v2/bydigest/")).length;
    const before = asked();
    expect(before).toBeGreaterThan(0);
    const onB = await jobrt([
      "run",
      "--conf-dir",
      b.dir,
      "--jobid",
      jobId(),
      "-v",
      "--container-image",
      ref,
      "cat",
      "/etc/jobrt-image",
    ]);
    expect(onB.stdout, onB.stderr).toBe("by-digest\n");
    expect(onB.stderr).toContain("shared store squashfs");
    expect(asked(), "requests to the registry").toBe(before);
  }, 120_000);

  test("a job user's step and a root step run from the same squashfs", async () => {
    const digest = pushBusybox(reg, "users:1", "both-users");
    const store = sharedStore();
    const a = nodeSite(reg, "unode", store);
    const ref = `docker://${reg.host}/users:1`;
    const asRoot = await jobrt([
      "run",
      "--conf-dir",
      a.dir,
      "--jobid",
      jobId(),
      "--container-image",
      ref,
      "sh",
      "-c",
      "cat /etc/jobrt-image; id -u",
    ]);
    expect(asRoot.stdout, asRoot.stderr).toBe("both-users\n0\n");
    const asUser = await jobrt([
      "run",
      "--conf-dir",
      a.dir,
      "--jobid",
      jobId(),
      ...NOBODY,
      "-v",
      "--container-image",
      ref,
      "sh",
      "-c",
      "cat /etc/jobrt-image; touch /x 2>&1 || true",
    ]);
    expect(asUser.stdout, asUser.stderr).toBe("both-users\ntouch: /x: Read-only file system\n");
    expect(asUser.stderr).toContain("shared store squashfs");
    expect(squashfsFiles(store)).toEqual([`${digest.slice(7)}.sqfs`]);
    expect(mountsUnder(a.cache)).toEqual([]);
  }, 120_000);

  test("root refuses a shared store a job user could redirect: a planted symlink, a user-owned dir", async () => {
    const a = sharedStore();
    const userDir = join(tempDir("jobrt-userdir-"), "mine");
    mkdirSync(userDir, { mode: 0o755 });
    chownSync(userDir, 65534, 65534);
    const link = join(a, "link");
    symlinkSync(userDir, link);
    for (const [store, why] of [
      [link, "is a symbolic link"],
      [userDir, "belongs to uid 65534, not root"],
    ] as const) {
      const site = nodeSite(reg, "snode", store);
      const r = await runUsersImage(site.dir);
      expect(r.code).toBe(1);
      expect(r.stderr.trim().split("\n")).toHaveLength(1);
      expect(r.stderr).toContain(why);
      expect(readdirSync(userDir)).toEqual([]);
    }
  }, 60_000);

  test("root refuses a store whose tmp/ a user replaced by a symlink: one line naming SharedStore, nothing written (issue 40, item C)", async () => {
    const store = sharedStore();
    const userDir = join(tempDir("jobrt-usertmp-"), "mine");
    mkdirSync(userDir, { mode: 0o755 });
    chownSync(userDir, 65534, 65534);
    symlinkSync(userDir, join(store, "tmp"));
    const site = nodeSite(reg, "tnode", store);
    const r = await runUsersImage(site.dir);
    expect(r.code).toBe(1);
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
    expect(r.stderr).toContain(
      `${join(site.dir, "images.conf")}: SharedStore ${store}: ${join(store, "tmp")} is a symbolic link: root does not use a store a job user could redirect`,
    );
    expect(readdirSync(userDir)).toEqual([]);
  }, 60_000);

  test("prune while a step uses an image keeps it; LRU eviction past SharedStoreSize; list shows which node has it mounted", async () => {
    const d1 = pushBusybox(reg, "prune:1", "prune-one");
    const d2 = pushBusybox(reg, "prune:2", "prune-two");
    const store = sharedStore();
    const a = nodeSite(reg, "pnode", store);
    const ref1 = `docker://${reg.host}/prune:1`;
    const running = jobrt(
      [
        "run",
        "--conf-dir",
        a.dir,
        "--jobid",
        jobId(),
        "--container-image",
        ref1,
        "sh",
        "-c",
        "cat /etc/jobrt-image; sleep 6",
      ],
      { timeoutMs: 60_000 },
    );
    for (let i = 0; mountsUnder(a.cache).length === 0 && i < 400; i++) await new Promise((r) => setTimeout(r, 50));
    expect(mountsUnder(a.cache)).toEqual([join(a.cache, "mnt", d1.slice(7))]);
    const list = await jobrt(["images", "--shared", "list", "--conf-dir", a.dir]);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toContain(`shared\t${d1}`);
    expect(list.stdout).toContain("mounted on pnode");
    const kept = await jobrt(["images", "--shared", "prune", "--all", "--conf-dir", a.dir]);
    expect(kept.code, kept.stderr).toBe(0);
    expect(kept.stdout).toBe(`kept ${ref1} (${d1}): in use on pnode\n`);
    expect((await running).stdout).toBe("prune-one\n");
    expect(squashfsFiles(store)).toEqual([`${d1.slice(7)}.sqfs`]);
    expect(mountsUnder(a.cache)).toEqual([]);
    // Two images, room for one: the least recently used goes.
    const two = await jobrt([
      "run",
      "--conf-dir",
      a.dir,
      "--jobid",
      jobId(),
      "--container-image",
      `docker://${reg.host}/prune:2`,
      "cat",
      "/etc/jobrt-image",
    ]);
    expect(two.stdout, two.stderr).toBe("prune-two\n");
    const size2 = readFileSync(join(store, "images", `${d2.slice(7)}.sqfs`)).length;
    writeFileSync(
      join(a.dir, "images.conf"),
      `${readFileSync(join(a.dir, "images.conf"), "utf8")}SharedStoreSize=${size2 + 1}\n`,
    );
    const evicted = await jobrt(["images", "--shared", "prune", "--conf-dir", a.dir]);
    expect(evicted.stdout, evicted.stderr).toBe(`removed ${ref1} (${d1}) from ${store}\n`);
    expect(squashfsFiles(store)).toEqual([`${d2.slice(7)}.sqfs`]);
    const all = await jobrt(["images", "--shared", "prune", "--all", "--conf-dir", a.dir]);
    expect(all.stdout).toContain(`removed docker://${reg.host}/prune:2`);
    expect(squashfsFiles(store)).toEqual([]);
  }, 120_000);

  test("a step whose jobrt was SIGKILLed leaves its image mounted until jobrt gc unmounts it and drops the job's pin", async () => {
    pushBusybox(reg, "gc:1", "gc-me");
    const store = sharedStore();
    const a = nodeSite(reg, "gnode", store);
    const job = jobId();
    const child: ChildProcess = spawn(
      process.execPath,
      [
        "--",
        jobrtBin,
        "run",
        "--conf-dir",
        a.dir,
        "--jobid",
        job,
        "--container-image",
        `docker://${reg.host}/gc:1`,
        "sleep",
        "60",
      ],
      { stdio: "ignore" },
    );
    for (let i = 0; mountsUnder(a.cache).length === 0 && i < 400; i++) await new Promise((r) => setTimeout(r, 50));
    expect(mountsUnder(a.cache)).toHaveLength(1);
    const exited = new Promise((r) => child.once("exit", r));
    child.kill("SIGKILL");
    await exited;
    expect(mountsUnder(a.cache)).toHaveLength(1);
    expect(readdirSync(join(store, "jobs", "cluster"))).toHaveLength(1);
    const gc = await jobrt(["gc", "--conf-dir", a.dir, "--job", job], { timeoutMs: 60_000 });
    expect(gc.code, gc.stderr).toBe(0);
    expect(gc.stdout).toMatch(/gc: unmounted shared image [0-9a-f]{64}\n/);
    expect(gc.stdout).toContain(`gc: removed 1 image pin(s) of job ${job}`);
    expect(mountsUnder(a.cache)).toEqual([]);
    expect(readdirSync(join(store, "jobs", "cluster"))).toEqual([]);
    expect(existsSync(join(store, "inuse"))).toBe(true);
    expect(readdirSync(join(store, "inuse"))).toEqual([]);
  }, 120_000);

  test("a private image never goes into the shared store: it is pulled into its user's node cache", async () => {
    const own = await startRegistry({ alice: "s3cret" });
    try {
      const d = pushBusybox(own, "secret:1", "private-image", { creds: "alice:s3cret" });
      const store = sharedStore();
      const a = nodeSite(own, "prnode", store);
      const userDir = tempDir("jobrt-shared-userauth-");
      chmodSync(userDir, 0o755);
      const userAuth = join(userDir, "auth.json");
      writeFileSync(
        userAuth,
        JSON.stringify({ auths: { [own.host]: { auth: Buffer.from("alice:s3cret").toString("base64") } } }),
        { mode: 0o600 },
      );
      chownSync(userAuth, 65534, 65534);
      const r = await jobrt(
        [
          "run",
          "--conf-dir",
          a.dir,
          "--jobid",
          jobId(),
          ...NOBODY,
          "-v",
          "--container-image",
          `docker://${own.host}/secret:1`,
          "cat",
          "/etc/jobrt-image",
        ],
        { env: { ...process.env, REGISTRY_AUTH_FILE: userAuth } },
      );
      expect(r.stdout, r.stderr).toBe("private-image\n");
      expect(r.stderr).toContain("node cache (a private image stays in its user's node cache)");
      expect(squashfsFiles(store)).toEqual([]);
      expect(existsSync(join(a.cache, "users/65534", d.slice(7)))).toBe(true);
    } finally {
      await own.stop();
    }
  }, 120_000);

  test("a root host with umask 077 still makes a squashfs a job user can run (modes come from the image, not the umask)", async () => {
    pushBusybox(reg, "umask:1", "umask-077");
    const store = sharedStore();
    const a = nodeSite(reg, "mnode", store);
    const ref = `docker://${reg.host}/umask:1`;
    // The spool dir as a site makes it (jobrt's own dirs under umask 077 are not the point here).
    mkdirSync(join(a.dir, "spool"), { mode: 0o755 });
    chmodSync(join(a.dir, "spool"), 0o755);
    const r = await runProgram(
      [
        "sh",
        "-c",
        'umask 077; exec "$0" -- "$@"',
        process.execPath,
        jobrtBin,
        "run",
        "--conf-dir",
        a.dir,
        "--jobid",
        jobId(),
        ...NOBODY,
        "--container-image",
        ref,
        "cat",
        "/etc/jobrt-image",
      ],
      { env: { ...process.env, JOBRT_CONF_DIR: a.dir } },
    );
    expect(r.stdout, r.stderr).toBe("umask-077\n");
  }, 120_000);

  test("where the squashfs cannot be mounted, the step runs from the node cache's unpacked tree, and -v says why", async () => {
    pushBusybox(reg, "nomount:1", "fell-back");
    const store = sharedStore();
    const a = nodeSite(reg, "fnode", store);
    // A mount(8) that refuses squashfs, as on a node without loop devices; other mounts go through.
    const wrap = tempDir("jobrt-mount-");
    chmodSync(wrap, 0o755);
    writeFileSync(
      join(wrap, "mount"),
      `#!/bin/sh\ncase " $* " in *" squashfs "*) echo "mount: failed to setup loop device" >&2; exit 32;; esac\nexec /usr/bin/mount "$@"\n`,
      { mode: 0o755 },
    );
    const r = await jobrt(
      [
        "run",
        "--conf-dir",
        a.dir,
        "--jobid",
        jobId(),
        "-v",
        "--container-image",
        `docker://${reg.host}/nomount:1`,
        "cat",
        "/etc/jobrt-image",
      ],
      { env: { ...process.env, PATH: `${wrap}:${process.env.PATH}` } },
    );
    expect(r.stdout, r.stderr).toBe("fell-back\n");
    expect(r.stderr).toMatch(
      /cannot mount .*\.sqfs \(.*failed to setup loop device\); using the node cache's unpacked tree/,
    );
    expect(readdirSync(join(a.cache, "public")).filter((n) => /^[0-9a-f]{64}$/.test(n))).toHaveLength(1);
    expect(mountsUnder(a.cache)).toEqual([]);
    expect(existsSync(join(store, "inuse"))).toBe(true);
    expect(readdirSync(join(store, "inuse"))).toEqual([]);
  }, 120_000);
  /** Image TAG (content LABEL) filled into a new store by root on node NODE; a rootless jobrt there. */
  async function rootlessSite(tag: string, label: string, nodeName: string) {
    pushBusybox(reg, `${tag}:1`, label);
    const store = sharedStore();
    const a = nodeSite(reg, nodeName, store);
    const ref = `docker://${reg.host}/${tag}:1`;
    const fill = await jobrt(["run", "--conf-dir", a.dir, "--jobid", jobId(), "--container-image", ref, "true"]);
    expect(fill.code, fill.stderr).toBe(0);
    return { store, a, u: rootless(a, store, ref) };
  }

  test("a rootless jobrt runs from the store's squashfs through squashfuse: two concurrent steps share one mount, the last one unmounts", async () => {
    const { a, u } = await rootlessSite("fuse", "via-fuse", "fusenode");
    const [j1, j2] = [jobId(), jobId()];
    const r = await u.run(
      [
        `$U $J run --conf-dir "$C" --jobid ${j1} -v --container-image "$R" sh -c "$I" > "$W/out1" 2> "$W/err1" &`,
        `$U $J run --conf-dir "$C" --jobid ${j2} -v --container-image "$R" sh -c "$I" > "$W/out2" 2> "$W/err2" &`,
        `i=0; until [ -s "$W/out1" ] && [ -s "$W/out2" ] || [ $i -gt 300 ]; do sleep 0.1; i=$((i+1)); done`,
        countFuse("during"),
        "wait",
        countFuse("after"),
      ].join("\n"),
      true,
      { I: `cat /etc/jobrt-image; ${ROOT_FS}; sleep 3` },
    );
    expect(r.code, `${r.stderr}${u.read("err1")}${u.read("err2")}`).toBe(0);
    for (const n of ["1", "2"]) {
      expect(u.read(`out${n}`), u.read(`err${n}`)).toBe("via-fuse\nfuse.squashfuse\n");
      expect(u.read(`err${n}`)).toMatch(/shared store squashfs .*\.sqfs, mounted read-only with squashfuse at /);
    }
    expect(u.read("during")).toBe("1\n");
    expect(u.read("after")).toBe("0\n");
    // Nothing was copied into the user's node cache: the squashfs is the image.
    expect(readdirSync(join(a.cache, "users", "65534")).filter((n) => /^[0-9a-f]{64}$/.test(n))).toEqual([]);
  }, 180_000);

  test("a rootless step SIGKILLed leaves its squashfuse mount: root's gc leaves it alone (its daemon stopped: root does not hang), the user's gc unmounts it", async () => {
    const { u } = await rootlessSite("fusegc", "fuse-gc", "fgnode");
    const r = await u.run(
      [
        `$U $J run --conf-dir "$C" --jobid ${jobId()} --container-image "$R" sleep 2 > "$W/out" 2> "$W/err" &`,
        "P=$!",
        WAIT_MOUNTED,
        "kill -KILL $P; wait $P; sleep 3",
        countFuse("killed"),
        // The user's FUSE daemon stops answering: a root that looked into its mount would hang.
        `D=$(pgrep -u 65534 -f "^squashfuse .*$S/")`,
        "kill -STOP $D",
        `timeout 30 $J gc --conf-dir "$C" > "$W/rootgc" 2>&1; echo $? > "$W/rootgc.rc"`,
        countFuse("afterroot"),
        "kill -CONT $D",
        `$U $J gc --conf-dir "$C" > "$W/usergc" 2>&1; echo $? > "$W/usergc.rc"`,
        countFuse("afteruser"),
      ].join("\n"),
      true,
    );
    expect(r.code, `${r.stderr}${u.read("err")}`).toBe(0);
    expect(u.read("killed")).toBe("1\n");
    expect(u.read("rootgc.rc"), u.read("rootgc")).toBe("0\n");
    expect(u.read("afterroot")).toBe("1\n");
    expect(u.read("usergc.rc"), u.read("usergc")).toBe("0\n");
    expect(u.read("usergc")).toMatch(/gc: unmounted shared image [0-9a-f]{64}\n/);
    expect(u.read("afteruser")).toBe("0\n");
  }, 180_000);

  test("a squashfuse mount whose daemon died is unmounted and made anew by the next rootless step", async () => {
    const { u } = await rootlessSite("fusedead", "fuse-again", "fdnode");
    const r = await u.run(
      [
        `$U $J run --conf-dir "$C" --jobid ${jobId()} --container-image "$R" sleep 2 > "$W/out1" 2> "$W/err1" &`,
        "P=$!",
        WAIT_MOUNTED,
        `D=$(pgrep -u 65534 -f "^squashfuse .*$S/")`,
        "kill -KILL $P $D; wait $P; sleep 3",
        countFuse("dead"),
        `$U $J run --conf-dir "$C" --jobid ${jobId()} --container-image "$R" cat /etc/jobrt-image > "$W/out2" 2> "$W/err2"`,
        countFuse("after"),
      ].join("\n"),
      true,
    );
    expect(r.code, `${r.stderr}${u.read("err1")}`).toBe(0);
    expect(u.read("dead")).toBe("1\n");
    expect(u.read("out2"), u.read("err2")).toBe("fuse-again\n");
    expect(u.read("after")).toBe("0\n");
  }, 180_000);

  test("a rootless jobrt without a usable /dev/fuse runs from its node cache, and -v and jobrt check say why", async () => {
    const { store, a, u } = await rootlessSite("nofuse", "no-fuse", "nfnode");
    const r = await u.run(
      [
        `$U $J run --conf-dir "$C" --jobid ${jobId()} -v --container-image "$R" cat /etc/jobrt-image > "$W/out" 2> "$W/err"`,
        `$U $J check --conf-dir "$C" --container-image "$R" true > "$W/check" 2>&1`,
      ].join("\n"),
      false,
    );
    expect(r.code, `${r.stderr}${u.read("err")}${u.read("check")}`).toBe(0);
    expect(u.read("out"), u.read("err")).toBe("no-fuse\n");
    const why = `a rootless jobrt cannot mount SharedStore ${store}'s squashfs images with squashfuse: cannot open /dev/fuse (EACCES)`;
    expect(u.read("err")).toContain(`node cache (${why}`);
    expect(u.read("check")).toContain(why);
    expect(readdirSync(join(a.cache, "users", "65534")).filter((n) => /^[0-9a-f]{64}$/.test(n))).toHaveLength(1);
  }, 180_000);
});
