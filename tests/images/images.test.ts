/**
 * `--container-image` end to end: the built `jobrt`, real runc, a real docker-registry on
 * 127.0.0.1 (its own port, config and storage; stopped by pid), images built with umoci and pushed
 * with skopeo. Each test has its own conf dir (cache, spool) and job ids.
 */
import { spawn, spawnSync } from "node:child_process";
import {
  chmodSync,
  chownSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { type Socket, createServer } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { failureLine, jobrt, jobrtBin, runProgram, tempDir } from "../helpers/jobrt.js";
import { type Registry, freePort, pushBusybox, startRegistry, expectImagePrerequisites } from "../helpers/registry.js";

const NOBODY = ["--uid", "65534", "--gid", "65534"];
let nextJob = 700000 + (process.pid % 1000) * 50;
const jobId = () => String(++nextJob);

/** A conf dir with its own SpoolDir and image cache; every dir others must reach is 0755. */
function site(reg: Registry | undefined, extra = ""): { dir: string; cache: string } {
  const dir = tempDir("jobrt-img-conf-");
  chmodSync(dir, 0o755);
  const spool = join(dir, "spool");
  const cache = join(dir, "cache");
  writeFileSync(join(dir, "jobrt.conf"), `SpoolDir=${spool}\nKillWait=2\n`);
  writeFileSync(
    join(dir, "images.conf"),
    `CacheDir=${cache}\n${reg ? `InsecureRegistries=${reg.host}\n` : ""}${extra}`,
  );
  return { dir, cache };
}

/** Every file and dir under the cache (relative), to show what a failure left. */
function cacheContents(cache: string): string[] {
  if (!existsSync(cache)) return [];
  const out: string[] = [];
  const walk = (p: string, rel: string) => {
    for (const n of readdirSync(p)) {
      const r = rel ? `${rel}/${n}` : n;
      if (n === "rootfs") {
        out.push(r);
        continue;
      }
      out.push(r);
      if (statSync(join(p, n)).isDirectory()) walk(join(p, n), r);
    }
  };
  walk(cache, "");
  return out;
}

/** The complete images in the cache: `<store>/<hex>`. */
function images(cache: string): string[] {
  return cacheContents(cache).filter((p) => /(^|\/)[0-9a-f]{64}$/.test(p));
}

/** The `<hex>.lock` files in the cache: each goes with its image (issue 23: 7 were left for one image). */
function locks(cache: string): string[] {
  return cacheContents(cache).filter((p) => p.endsWith(".lock"));
}

/** Whether process `pid` is a flock(1) waiting on `lock` (its command line names it). */
function pidWaitsOn(pid: string, lock: string): boolean {
  try {
    const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
    return argv[0] === "flock" && argv.includes(lock);
  } catch {
    return false;
  }
}

/** Nothing but empty stores, lock files and an empty .tmp: what a failed first pull may leave. */
function onlyBookkeeping(cache: string): string[] {
  return cacheContents(cache).filter(
    (p) =>
      !/(^|\/)(public|users|users\/\d+|[^/]+\/\.tmp|[^/]+\/[0-9a-f]{64}\.lock|users\/\d+\/\.tmp|users\/\d+\/[0-9a-f]{64}\.lock)$/.test(
        p,
      ),
  );
}

describe("jobrt run --container-image against a real registry", () => {
  let reg: Registry;
  let digest1: string;
  beforeAll(async () => {
    expectImagePrerequisites(["skopeo", "umoci", "docker-registry", "htpasswd", "runc"], "runc, --uid");
    reg = await startRegistry();
    digest1 = pushBusybox(reg, "busybox:1", "image-one", { env: ["FROM_IMAGE=yes"], workdir: "/etc" });
  });
  afterAll(async () => {
    await reg?.stop();
  });

  test("pulls once, runs cat /etc/os-release, honours Env and WorkingDir; the second step uses the cache", async () => {
    const { dir, cache } = site(reg);
    const ref = `docker://${reg.host}/busybox:1`;
    const r = await jobrt([
      "run",
      "--conf-dir",
      dir,
      "--jobid",
      jobId(),
      "--container-image",
      ref,
      "sh",
      "-c",
      "cat /etc/os-release; echo $FROM_IMAGE; pwd",
    ]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('NAME="jobrt busybox test image"\nID=jobrt-busybox\nyes\n/etc\n');
    expect(images(cache)).toEqual([`public/${digest1.slice(7)}`]);
    const pulls = (reg.log().match(/GET \/v2\/busybox\/blobs\//g) ?? []).length;
    const again = await jobrt([
      "run",
      "--conf-dir",
      dir,
      "--jobid",
      jobId(),
      ...NOBODY,
      "--container-image",
      ref,
      "sh",
      "-c",
      "cat /etc/jobrt-image; id -u; touch /x 2>&1",
    ]);
    // touch fails, so the task exits 1 and gets its failure line.
    expect(again.stderr).toBe(failureLine("task 0", "Exited with exit code 1"));
    expect(again.code).toBe(1);
    expect(again.stdout).toBe("image-one\n0\ntouch: /x: Read-only file system\n");
    expect((reg.log().match(/GET \/v2\/busybox\/blobs\//g) ?? []).length).toBe(pulls);
    const list = await jobrt(["images", "list", "--conf-dir", dir]);
    expect(list.code).toBe(0);
    expect(list.stdout).toContain(`public\t${digest1}`);
    expect(list.stdout).toContain(`idle\t${ref}`);
    const json = JSON.parse((await jobrt(["images", "list", "--json", "--conf-dir", dir])).stdout) as {
      digest: string;
      reference: string;
      inUse: number;
    }[];
    expect(json.map((e) => [e.digest, e.reference, e.inUse])).toEqual([[digest1, ref, 0]]);
  });

  test("a digest reference runs that image; a wrong digest, an unknown image and a malformed reference fail with one line and leave nothing", async () => {
    const { dir, cache } = site(reg);
    const ok = await jobrt([
      "run",
      "--conf-dir",
      dir,
      "--jobid",
      jobId(),
      "--container-image",
      `docker://${reg.host}/busybox@${digest1}`,
      "cat",
      "/etc/jobrt-image",
    ]);
    expect(ok.stdout).toBe("image-one\n");
    const { dir: dir2, cache: cache2 } = site(reg);
    for (const [ref, want] of [
      [`docker://${reg.host}/busybox@sha256:${"0".repeat(64)}`, /manifest unknown/],
      [`docker://${reg.host}/nosuch:1`, /(name|manifest) unknown/],
      ["busybox:1", /expected docker:\/\/HOST/],
      [`docker://${reg.host}/Busybox:1`, /not a valid repository name/],
    ] as const) {
      const r = await jobrt(["run", "--conf-dir", dir2, "--jobid", jobId(), "--container-image", ref, "true"]);
      expect(r.code).toBe(1);
      expect(r.stderr.trim().split("\n")).toHaveLength(1);
      expect(r.stderr).toMatch(want);
      expect(r.stderr).toContain(ref);
    }
    expect(onlyBookkeeping(cache2)).toEqual([]);
    expect(images(cache)).toHaveLength(1);
  });

  test("a registry that is down: one clear line, nothing left in the cache", async () => {
    const { dir, cache } = site(undefined);
    const port = await freePort();
    const ref = `docker://127.0.0.1:${port}/busybox:1`;
    writeFileSync(join(dir, "images.conf"), `CacheDir=${cache}\nInsecureRegistries=127.0.0.1:${port}\n`);
    const r = await jobrt(["run", "--conf-dir", dir, "--jobid", jobId(), "--container-image", ref, "true"]);
    expect(r.code).toBe(1);
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
    expect(r.stderr).toMatch(/connection refused/);
    expect(cacheContents(cache)).toEqual([]);
  });

  test("a plain-HTTP registry not listed in InsecureRegistries: one line naming the key and the file, nothing left", async () => {
    const { dir, cache } = site(undefined);
    const ref = `docker://${reg.host}/busybox:1`;
    const r = await jobrt(["run", "--conf-dir", dir, "--jobid", jobId(), "--container-image", ref, "true"]);
    expect(r.code).toBe(1);
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
    expect(r.stderr).toContain(
      `--container-image ${ref}: cannot read the image manifest: ${reg.host} answers plain HTTP, not HTTPS; if the site trusts it, add InsecureRegistries=${reg.host} to ${join(dir, "images.conf")}\n`,
    );
    expect(cacheContents(cache)).toEqual([]);
  });

  test("a registry that accepts connections and never answers: PullTimeout ends the wait with one line, nothing left", async () => {
    const sockets: Socket[] = [];
    const silent = createServer((s) => sockets.push(s));
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
    const host = `127.0.0.1:${(silent.address() as { port: number }).port}`;
    try {
      const { dir, cache } = site(undefined);
      writeFileSync(join(dir, "images.conf"), `CacheDir=${cache}\nInsecureRegistries=${host}\nPullTimeout=3\n`);
      const r = await jobrt(
        ["run", "--conf-dir", dir, "--jobid", jobId(), "--container-image", `docker://${host}/busybox:1`, "true"],
        { timeoutMs: 60_000 },
      );
      expect(r.signal).toBeNull();
      expect(r.code).toBe(1);
      expect(r.stderr.trim().split("\n")).toHaveLength(1);
      expect(r.stderr).toContain("timed out");
      expect(cacheContents(cache)).toEqual([]);
    } finally {
      for (const s of sockets) s.destroy();
      silent.close();
    }
  });

  test("a corrupt layer in the registry is refused (digest mismatch) and leaves no image and no partial pull", async () => {
    const own = await startRegistry();
    try {
      const d = pushBusybox(own, "busybox:c", "corrupt-me");
      const manifest = JSON.parse(
        readFileSync(join(own.storage, "docker/registry/v2/blobs/sha256", d.slice(7, 9), d.slice(7), "data"), "utf8"),
      ) as { layers: { digest: string }[] };
      const layer = (manifest.layers[0] as { digest: string }).digest.slice(7);
      const data = join(own.storage, "docker/registry/v2/blobs/sha256", layer.slice(0, 2), layer, "data");
      const bytes = readFileSync(data);
      const middle = bytes.length >> 1;
      bytes[middle] = (bytes[middle] as number) ^ 0xff;
      writeFileSync(data, bytes);
      const { dir, cache } = site(own);
      const r = await jobrt([
        "run",
        "--conf-dir",
        dir,
        "--jobid",
        jobId(),
        "--container-image",
        `docker://${own.host}/busybox:c`,
        "true",
      ]);
      expect(r.code).toBe(1);
      expect(r.stderr.trim().split("\n")).toHaveLength(1);
      expect(r.stderr).toMatch(/digest|checksum|gzip|invalid/i);
      expect(images(cache)).toEqual([]);
      expect(onlyBookkeeping(cache)).toEqual([]);
      expect(readdirSync(join(cache, "public/.tmp"))).toEqual([]);
    } finally {
      await own.stop();
    }
  });

  test("a shared (public) image cannot be changed by another user: set-id bits and group/other write bits are gone", async () => {
    const own = await startRegistry();
    try {
      const d = pushBusybox(own, "busybox:hostile", "hostile", { hostile: true });
      const { dir, cache } = site(own);
      const r = await jobrt([
        "run",
        "--conf-dir",
        dir,
        "--jobid",
        jobId(),
        ...NOBODY,
        "--container-image",
        `docker://${own.host}/busybox:hostile`,
        "stat",
        "-c",
        "%a",
        "/etc/suid-root",
        "/etc/open",
      ]);
      expect(r.stderr).toBe("");
      expect(r.stdout).toBe("755\n755\n");
      const rootfs = join(cache, "public", d.slice(7), "rootfs");
      const loose: string[] = [];
      const walk = (p: string) => {
        const st = lstatSync(p);
        if (!st.isSymbolicLink() && (st.mode & 0o6022) !== 0) loose.push(`${p} ${(st.mode & 0o7777).toString(8)}`);
        if (st.isDirectory()) for (const n of readdirSync(p)) walk(join(p, n));
      };
      walk(rootfs);
      expect(loose).toEqual([]);
      // nobody tries to plant a file for the next user of the image.
      const plant = spawnSync(
        process.execPath,
        ["-e", `require("fs").writeFileSync(${JSON.stringify(join(rootfs, "etc/open/planted"))}, "x")`],
        { uid: 65534, gid: 65534, encoding: "utf8" },
      );
      expect(plant.status).not.toBe(0);
      expect(plant.stderr).toMatch(/EACCES/);
    } finally {
      await own.stop();
    }
  });

  test("the shared rootfs is never changed by a step: a volume on a path the image lacks is refused, one under /tmp works", async () => {
    const { dir, cache } = site(reg);
    const ref = `docker://${reg.host}/busybox:1`;
    const host = tempDir("jobrt-img-vol-");
    writeFileSync(join(host, "data"), "from the host\n");
    const refused = await jobrt([
      "run",
      "--conf-dir",
      dir,
      "--jobid",
      jobId(),
      "--container-volume",
      `${host}:/newdir`,
      "--container-image",
      ref,
      "true",
    ]);
    expect(refused.code).toBe(1);
    expect(refused.stderr.trim().split("\n")).toHaveLength(1);
    expect(refused.stderr).toContain("/newdir does not exist in the image");
    const ok = await jobrt([
      "run",
      "--conf-dir",
      dir,
      "--jobid",
      jobId(),
      "--container-volume",
      `${host}:/tmp/in/here`,
      "--container-image",
      ref,
      "cat",
      "/tmp/in/here/data",
    ]);
    expect(ok.stdout).toBe("from the host\n");
    const rootfs = join(cache, "public", digest1.slice(7), "rootfs");
    expect(readdirSync(rootfs).sort()).toEqual([
      "bin",
      "dev",
      "etc",
      "home",
      "proc",
      "root",
      "sbin",
      "sys",
      "tmp",
      "usr",
      "var",
    ]);
    expect(readdirSync(join(rootfs, "tmp"))).toEqual([]);
  });

  test("jobrt SIGKILLed during an image step: gc tears its container down and removes its pin; its dead mark does not keep the image", async () => {
    const { dir, cache } = site(reg);
    const spool = join(dir, "spool");
    const job = jobId();
    const shared = tempDir("jobrt-img-share-");
    chmodSync(shared, 0o777);
    const child = spawn(
      process.execPath,
      [
        "--",
        jobrtBin,
        "run",
        "--conf-dir",
        dir,
        "--jobid",
        job,
        "--container-volume",
        `${shared}:/tmp/share`,
        "--container-image",
        `docker://${reg.host}/busybox:1`,
        "sh",
        "-c",
        "touch /tmp/share/up; exec sleep 60",
      ],
      { stdio: "ignore" },
    );
    for (let i = 0; !existsSync(join(shared, "up")) && i < 600; i++) await new Promise((r) => setTimeout(r, 50));
    expect(existsSync(join(shared, "up"))).toBe(true);
    const exited = new Promise((r) => child.once("exit", r));
    child.kill("SIGKILL");
    await exited;
    const hex = digest1.slice(7);
    expect(readdirSync(join(cache, `public/${hex}.inuse`))).toHaveLength(1);
    expect(readdirSync(spool).filter((n) => n.startsWith("oci-image-"))).toEqual([`oci-image-${job}.0`]);
    const gc = await jobrt(["gc", "--conf-dir", dir]);
    expect(gc.code).toBe(0);
    expect(
      spawnSync("runc", ["--root", "/run/runc", "list", "-q"], { encoding: "utf8" })
        .stdout.split("\n")
        .filter((c) => c.includes(`.${job}.`)),
    ).toEqual([]);
    expect(readdirSync(spool).filter((n) => n.startsWith("oci-image-") || n.startsWith("oci-job"))).toEqual([]);
    // The mark of the dead jobrt is stale (its pid is gone): prune takes the image, and its lock.
    const prune = await jobrt(["images", "prune", "--all", "--conf-dir", dir]);
    expect(prune.stdout).toContain(`removed docker://${reg.host}/busybox:1`);
    expect(images(cache)).toEqual([]);
    expect(locks(cache)).toEqual([]);
  });

  test("8 concurrent first pulls of one image: one pull, one unpack, 8 successful steps", async () => {
    const own = await startRegistry();
    try {
      const d = pushBusybox(own, "busybox:8", "eight");
      const { dir, cache } = site(own);
      const before = (own.log().match(/GET \/v2\/busybox\/blobs\//g) ?? []).length;
      const runs = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          jobrt(
            [
              "run",
              "--conf-dir",
              dir,
              "--jobid",
              jobId(),
              ...(i % 2 ? NOBODY : []),
              "--container-image",
              `docker://${own.host}/busybox:8`,
              "cat",
              "/etc/jobrt-image",
            ],
            { timeoutMs: 110_000 },
          ),
        ),
      );
      for (const r of runs)
        expect({ code: r.code, stdout: r.stdout, stderr: r.stderr }).toEqual({
          code: 0,
          stdout: "eight\n",
          stderr: "",
        });
      // One image pull: the layer and the config blob fetched once each.
      expect((own.log().match(/GET \/v2\/busybox\/blobs\//g) ?? []).length - before).toBe(2);
      expect(images(cache)).toEqual([`public/${d.slice(7)}`]);
      expect(existsSync(join(cache, `public/${d.slice(7)}.inuse`))).toBe(false);
    } finally {
      await own.stop();
    }
  });

  test("a tag moved after a step resolved it: the running step keeps its image, the next step gets the new one", async () => {
    const own = await startRegistry();
    try {
      pushBusybox(own, "busybox:mv", "before-move");
      const { dir } = site(own);
      const shared = tempDir("jobrt-img-share-");
      chmodSync(shared, 0o777);
      const ref = `docker://${own.host}/busybox:mv`;
      // Task 0 waits until the tag has moved, then reads the image; task 1 reads it at once.
      const step = jobrt(
        [
          "run",
          "--conf-dir",
          dir,
          "--jobid",
          jobId(),
          "-n",
          "2",
          "-l",
          "--container-volume",
          `${shared}:/tmp/share`,
          "--container-image",
          ref,
          "sh",
          "-c",
          "if [ $SLURM_PROCID = 0 ]; then touch /tmp/share/started; while [ ! -e /tmp/share/moved ]; do sleep 0.05; done; fi; cat /etc/jobrt-image",
        ],
        { timeoutMs: 60_000 },
      );
      for (let i = 0; !existsSync(join(shared, "started")) && i < 600; i++) await new Promise((r) => setTimeout(r, 50));
      pushBusybox(own, "busybox:mv", "after-move");
      writeFileSync(join(shared, "moved"), "");
      const r = await step;
      expect(r.stderr).toBe("");
      expect(r.stdout.trim().split("\n").sort()).toEqual(["0: before-move", "1: before-move"]);
      const next = await jobrt([
        "run",
        "--conf-dir",
        dir,
        "--jobid",
        jobId(),
        "--container-image",
        ref,
        "cat",
        "/etc/jobrt-image",
      ]);
      expect(next.stdout).toBe("after-move\n");
    } finally {
      await own.stop();
    }
  });

  test("under srun every task is its own jobrt exec: a tag moved between two tasks' setups still gives both the step's first image", async () => {
    const own = await startRegistry();
    try {
      pushBusybox(own, "busybox:srun", "first");
      const { dir } = site(own);
      const spool = join(dir, "spool");
      const ref = `docker://${own.host}/busybox:srun`;
      const job = jobId();
      const shared = tempDir("jobrt-img-share-");
      chmodSync(shared, 0o777);
      const slurm = (procid: number) => ({
        ...process.env,
        SLURM_JOB_ID: job,
        SLURM_STEP_ID: "0",
        SLURM_PROCID: String(procid),
        SLURM_LOCALID: String(procid),
        SLURM_STEP_NUM_TASKS: "2",
      });
      // Task 0 holds the step open (and so its pin) until task 1 has run.
      const t0 = jobrt(
        [
          "exec",
          "--conf-dir",
          dir,
          "--container-volume",
          `${shared}:/tmp/share`,
          "--container-image",
          ref,
          "sh",
          "-c",
          "cat /etc/jobrt-image; touch /tmp/share/up; while [ ! -e /tmp/share/done ]; do sleep 0.05; done",
        ],
        { env: slurm(0), timeoutMs: 60_000 },
      );
      for (let i = 0; !existsSync(join(shared, "up")) && i < 600; i++) await new Promise((r) => setTimeout(r, 50));
      pushBusybox(own, "busybox:srun", "second");
      const t1 = await jobrt(["exec", "--conf-dir", dir, "--container-image", ref, "cat", "/etc/jobrt-image"], {
        env: slurm(1),
      });
      writeFileSync(join(shared, "done"), "");
      const r0 = await t0;
      expect([r0.stdout, r0.stderr, t1.stdout, t1.stderr]).toEqual(["first\n", "", "first\n", ""]);
      // The last task out removed the pin: the next step resolves the tag afresh.
      expect(readdirSync(spool).filter((n) => n.startsWith("oci-image-"))).toEqual([]);
      const next = await jobrt(["exec", "--conf-dir", dir, "--container-image", ref, "cat", "/etc/jobrt-image"], {
        env: { ...slurm(0), SLURM_STEP_ID: "1" },
      });
      expect(next.stdout).toBe("second\n");
    } finally {
      await own.stop();
    }
  });

  test("oci: and oci-archive: local layouts, read as the job user; Entrypoint goes before the task's argv; jobrt check resolves the digest", async () => {
    const own = await startRegistry();
    try {
      const d = pushBusybox(own, "busybox:ep", "entry", { entrypoint: ["/bin/echo", "from-entrypoint"] });
      const layoutDir = tempDir("jobrt-img-layout-");
      chmodSync(layoutDir, 0o755);
      const layout = join(layoutDir, "layout");
      const archive = join(layoutDir, "image.tar");
      for (const dest of [`oci:${layout}:ep`, `oci-archive:${archive}:ep`]) {
        expect(
          spawnSync("skopeo", ["copy", "--quiet", "--src-tls-verify=false", `docker://${own.host}/busybox:ep`, dest])
            .status,
        ).toBe(0);
      }
      spawnSync("chown", ["-R", "65534:65534", layoutDir]);
      const { dir, cache } = site(own);
      const viaRegistry = await jobrt([
        "run",
        "--conf-dir",
        dir,
        "--jobid",
        jobId(),
        "--container-image",
        `docker://${own.host}/busybox:ep`,
        "a",
        "b",
      ]);
      expect(viaRegistry.stdout).toBe("from-entrypoint a b\n");
      for (const ref of [`oci:${layout}:ep`, `oci-archive:${archive}:ep`]) {
        const r = await jobrt(["run", "--conf-dir", dir, "--jobid", jobId(), ...NOBODY, "--container-image", ref, "x"]);
        expect({ ref, out: r.stdout, err: r.stderr }).toEqual({ ref, out: "from-entrypoint x\n", err: "" });
      }
      // Local layouts are the user's files: kept in the user's own store, never shared.
      expect(images(cache).sort()).toEqual([`public/${d.slice(7)}`, `users/65534/${d.slice(7)}`].sort());
      // A layout the job user cannot read is refused, even though jobrt runs as root.
      chmodSync(layoutDir, 0o700);
      spawnSync("chown", ["root:root", layoutDir]);
      const hidden = await jobrt([
        "run",
        "--conf-dir",
        dir,
        "--jobid",
        jobId(),
        ...NOBODY,
        "--container-image",
        `oci:${layout}:ep`,
        "x",
      ]);
      expect(hidden.code).toBe(1);
      expect(hidden.stderr).toMatch(/permission denied/);
      const check = await jobrt([
        "check",
        "-v",
        "--conf-dir",
        dir,
        "--runtime",
        "oci",
        "--container-image",
        `docker://${own.host}/busybox:ep`,
        "true",
      ]);
      expect(check.code).toBe(0);
      expect(check.stderr).toContain(`is ${d}`);
      // Pulled above: the check hook finds it in this node's cache.
      expect(check.stdout).toContain(
        `component 0: runtime oci: image docker://${own.host}/busybox:ep: ok: resolves to ${d}, cached in ${cache}/`,
      );
      // An image the registry has and this node never pulled: said to be not checked, not ok.
      const fresh = pushBusybox(own, "busybox:fresh", "fresh");
      const unpulled = await jobrt([
        "check",
        "--conf-dir",
        dir,
        "--runtime",
        "oci",
        "--container-image",
        `docker://${own.host}/busybox:fresh`,
        "true",
      ]);
      expect(unpulled.code).toBe(0);
      expect(unpulled.stdout).toContain(
        `component 0: runtime oci: image docker://${own.host}/busybox:fresh: not checked: resolves to ${fresh}, not pulled on this node yet: its bundle and rootfs are made when a step pulls it\ncomponent 0: runtime oci: ok (1 not checked)\n`,
      );
      const bad = await jobrt([
        "check",
        "--conf-dir",
        dir,
        "--runtime",
        "oci",
        "--container-image",
        `docker://${own.host}/nosuch:1`,
        "true",
      ]);
      expect(bad.code).toBe(1);
    } finally {
      await own.stop();
    }
  });

  test("over CacheSize the least recently used idle image is evicted; an image in use is kept", async () => {
    const own = await startRegistry();
    try {
      const a = pushBusybox(own, "busybox:a", "image-a");
      const b = pushBusybox(own, "busybox:b", "image-b");
      const c = pushBusybox(own, "busybox:c", "image-c");
      // One busybox image is about 2 MiB on disk: room for two, not three.
      const { dir, cache } = site(own, "CacheSize=5M\n");
      const run = (tag: string, ...cmd: string[]) =>
        jobrt([
          "run",
          "--conf-dir",
          dir,
          "--jobid",
          jobId(),
          "--container-image",
          `docker://${own.host}/busybox:${tag}`,
          ...cmd,
        ]);
      expect((await run("a", "true")).code).toBe(0);
      expect((await run("b", "true")).code).toBe(0);
      expect(images(cache).sort()).toEqual([`public/${a.slice(7)}`, `public/${b.slice(7)}`].sort());
      // b is in use (a running step) while c is pulled: a (least recently used, idle) goes.
      const shared = tempDir("jobrt-img-share-");
      chmodSync(shared, 0o777);
      const busy = jobrt([
        "run",
        "--conf-dir",
        dir,
        "--jobid",
        jobId(),
        "--container-volume",
        `${shared}:/tmp/share`,
        "--container-image",
        `docker://${own.host}/busybox:b`,
        "sh",
        "-c",
        "touch /tmp/share/up; while [ ! -e /tmp/share/done ]; do sleep 0.05; done",
      ]);
      for (let i = 0; !existsSync(join(shared, "up")) && i < 600; i++) await new Promise((r) => setTimeout(r, 50));
      expect((await run("c", "true")).code).toBe(0);
      expect(images(cache).sort()).toEqual([`public/${b.slice(7)}`, `public/${c.slice(7)}`].sort());
      expect(locks(cache)).not.toContain(`public/${a.slice(7)}.lock`);
      // Squeeze the limit below one image: b is still in use and must survive a prune.
      writeFileSync(join(dir, "images.conf"), `CacheDir=${cache}\nInsecureRegistries=${own.host}\nCacheSize=1K\n`);
      const prune = await jobrt(["images", "prune", "--conf-dir", dir]);
      expect(prune.code).toBe(0);
      expect(images(cache)).toEqual([`public/${b.slice(7)}`]);
      writeFileSync(join(shared, "done"), "");
      expect((await busy).code).toBe(0);
      const all = await jobrt(["images", "prune", "--all", "--conf-dir", dir]);
      expect(all.stdout).toContain(`removed docker://${own.host}/busybox:b`);
      expect(images(cache)).toEqual([]);
      expect(locks(cache)).toEqual([]);
    } finally {
      await own.stop();
    }
  });

  test("a puller that waited on a lock file its holder unlinked locks again: it never runs beside the holder of the new one", async () => {
    // A remover (here: a stand-in holding the lock) unlinks `<hex>.lock` while a pull waits on it;
    // a newcomer then locks a new file at that path. The waiting pull gets the unlinked one: it
    // must see that and lock again, so it runs only after the newcomer is done (lock.ts).
    const own = await startRegistry();
    try {
      const d = pushBusybox(own, "busybox:stale", "stale");
      const { dir, cache } = site(own);
      const store = join(cache, "public");
      mkdirSync(store, { recursive: true, mode: 0o755 });
      const lock = join(store, `${d.slice(7)}.lock`);
      const t = tempDir("jobrt-img-stale-");
      const newcomer = `flock -x ${lock} sh -c 'touch ${t}/c-in; sleep 4; touch ${t}/c-out'`;
      const remover = spawn(
        "flock",
        [
          "-o",
          "-x",
          lock,
          "sh",
          "-c",
          `touch ${t}/held; while [ ! -e ${t}/go ]; do sleep 0.05; done; rm -f ${lock}; (${newcomer}) & while [ ! -e ${t}/c-in ]; do sleep 0.05; done`,
        ],
        { stdio: "ignore" },
      );
      const waiting = () =>
        readdirSync("/proc").some((p) => /^\d+$/.test(p) && pidWaitsOn(p, lock) && Number(p) !== remover.pid);
      for (let i = 0; !existsSync(join(t, "held")) && i < 200; i++) await new Promise((r) => setTimeout(r, 50));
      const step = jobrt(
        [
          "run",
          "--conf-dir",
          dir,
          "--jobid",
          jobId(),
          "--container-image",
          `docker://${own.host}/busybox:stale`,
          "cat",
          "/etc/jobrt-image",
        ],
        { timeoutMs: 110_000 },
      );
      for (let i = 0; !waiting() && i < 400; i++) await new Promise((r) => setTimeout(r, 50));
      expect(waiting()).toBe(true);
      writeFileSync(join(t, "go"), "");
      const r = await step;
      expect({ code: r.code, stdout: r.stdout, stderr: r.stderr }).toEqual({ code: 0, stdout: "stale\n", stderr: "" });
      // Had it used the unlinked lock, it would have pulled while the newcomer held the new one.
      expect(existsSync(join(t, "c-out"))).toBe(true);
    } finally {
      await own.stop();
    }
  });

  test("lock files go with their image, without racing a concurrent puller: steps and prune --all at once all succeed, nothing is left", async () => {
    // A prune unlinks `<hex>.lock` while it holds it; a puller that was waiting on that file then
    // holds a lock nobody else sees, and must take the new one instead (lock.ts).
    const own = await startRegistry();
    try {
      pushBusybox(own, "busybox:race", "race");
      const { dir, cache } = site(own);
      const step = (i: number) =>
        jobrt(
          [
            "run",
            "--conf-dir",
            dir,
            "--jobid",
            jobId(),
            ...(i % 2 ? NOBODY : []),
            "--container-image",
            `docker://${own.host}/busybox:race`,
            "cat",
            "/etc/jobrt-image",
          ],
          { timeoutMs: 110_000 },
        );
      const prunes = async () => {
        for (let i = 0; i < 6; i++) {
          const p = await jobrt(["images", "prune", "--all", "--conf-dir", dir]);
          expect({ code: p.code, stderr: p.stderr }).toEqual({ code: 0, stderr: "" });
        }
      };
      const [runs] = await Promise.all([Promise.all(Array.from({ length: 6 }, (_, i) => step(i))), prunes()]);
      for (const r of runs)
        expect({ code: r.code, stdout: r.stdout, stderr: r.stderr }).toEqual({ code: 0, stdout: "race\n", stderr: "" });
      expect((await step(0)).stdout).toBe("race\n");
      expect(locks(cache)).toHaveLength(1);
      expect((await jobrt(["images", "prune", "--all", "--conf-dir", dir])).code).toBe(0);
      expect(images(cache)).toEqual([]);
      expect(locks(cache)).toEqual([]);
    } finally {
      await own.stop();
    }
  });

  test("a private image: pulled as the job user with their own auth file into their 0700 store; root's credentials are never used for them", async () => {
    const own = await startRegistry({ alice: "s3cret" });
    try {
      const d = pushBusybox(own, "secret:1", "private-image", { creds: "alice:s3cret" });
      const { dir, cache } = site(own);
      const ref = `docker://${own.host}/secret:1`;
      const authJson = JSON.stringify({
        auths: { [own.host]: { auth: Buffer.from("alice:s3cret").toString("base64") } },
      });
      // Root's credentials, readable by root only, in jobrt's own environment.
      const rootAuth = join(tempDir("jobrt-img-rootauth-"), "auth.json");
      writeFileSync(rootAuth, authJson, { mode: 0o600 });
      const denied = await jobrt(
        ["run", "--conf-dir", dir, "--jobid", jobId(), ...NOBODY, "--container-image", ref, "true"],
        { env: { ...process.env, REGISTRY_AUTH_FILE: rootAuth } },
      );
      expect(denied.code).toBe(1);
      expect(denied.stderr.trim().split("\n")).toHaveLength(1);
      expect(denied.stderr).toMatch(/unauthorized|authentication required|permission denied/i);
      expect(images(cache)).toEqual([]);
      // nobody's own auth file.
      const userDir = tempDir("jobrt-img-userauth-");
      chmodSync(userDir, 0o755);
      const userAuth = join(userDir, "auth.json");
      writeFileSync(userAuth, authJson, { mode: 0o600 });
      chownSync(userAuth, 65534, 65534);
      const r = await jobrt(
        ["run", "--conf-dir", dir, "--jobid", jobId(), ...NOBODY, "--container-image", ref, "cat", "/etc/jobrt-image"],
        { env: { ...process.env, REGISTRY_AUTH_FILE: userAuth } },
      );
      expect(r.stderr).toBe("");
      expect(r.stdout).toBe("private-image\n");
      expect(images(cache)).toEqual([`users/65534/${d.slice(7)}`]);
      const store = statSync(join(cache, "users/65534"));
      expect({ uid: store.uid, mode: store.mode & 0o777 }).toEqual({ uid: 65534, mode: 0o700 });
      // users/ as root makes it: sticky, so a rootless jobrt can make its own store there (issue 40, item 0).
      const users = statSync(join(cache, "users"));
      expect({ uid: users.uid, mode: users.mode & 0o7777 }).toEqual({ uid: 0, mode: 0o1777 });
      expect(statSync(join(cache, `users/65534/${d.slice(7)}/rootfs/bin/busybox`)).uid).toBe(65534);
      // nobody swaps their image.json for a FIFO: root's listing (and eviction) must not hang on it.
      const meta = join(cache, `users/65534/${d.slice(7)}/image.json`);
      expect(spawnSync("sh", ["-c", `rm ${meta} && mkfifo ${meta} && chown 65534:65534 ${meta}`]).status).toBe(0);
      const list = await jobrt(["images", "list", "--conf-dir", dir], { timeoutMs: 20_000 });
      expect(list.signal).toBeNull();
      expect(list.code).toBe(0);
      expect(list.stdout).toContain("0 images");
      // Root's job without credentials cannot use nobody's private copy: it asks the registry, and is refused.
      const rootJob = await jobrt(["run", "--conf-dir", dir, "--jobid", jobId(), "--container-image", ref, "true"], {
        env: { ...process.env, REGISTRY_AUTH_FILE: join(userDir, "none.json") },
      });
      expect(rootJob.code).toBe(1);
    } finally {
      await own.stop();
    }
  });

  test("a rootless jobrt under a site's CacheDir (root's, 0755) makes its own store in a sticky users/; without one, one line naming CacheDir and the command; a store another user made is refused (issue 40, item 0)", async () => {
    const { dir, cache } = site(reg);
    mkdirSync(cache, { mode: 0o755 });
    mkdirSync(join(dir, "spool"), { mode: 0o755 });
    chmodSync(join(dir, "spool"), 0o1777);
    const users = join(cache, "users");
    const store = join(users, "65534");
    const asNobody = () =>
      runProgram(
        [process.execPath, "--", jobrtBin, "run", "--conf-dir", dir, "--jobid", jobId()].concat([
          "--container-image",
          `docker://${reg.host}/busybox:1`,
          "cat",
          "/etc/jobrt-image",
        ]),
        { uid: 65534, gid: 65534, env: { PATH: process.env.PATH, HOME: "/", LANG: "C.UTF-8" }, timeoutMs: 120_000 },
      );
    // Root has made nothing under CacheDir: the site's set-up is missing, and the line says what it is.
    const missing = await asNobody();
    expect(missing.code).toBe(1);
    expect(missing.stderr.trim().split("\n")).toHaveLength(1);
    expect(missing.stderr).toContain(
      `${join(dir, "images.conf")}: CacheDir ${cache}: uid 65534 cannot make ${users} (EACCES); the site makes it once, as root: install -d -m 1777 ${users}`,
    );
    expect(missing.stderr).not.toMatch(/permission denied, mkdir/);
    expect(cacheContents(cache)).toEqual([]);
    // The command the line gives: then every user makes their own 0700 store.
    expect(spawnSync("install", ["-d", "-m", "1777", users]).status).toBe(0);
    const ok = await asNobody();
    expect(ok.stdout, ok.stderr).toBe("image-one\n");
    expect(ok.code).toBe(0);
    expect(images(cache)).toEqual([`users/65534/${digest1.slice(7)}`]);
    const st = statSync(store);
    expect({ uid: st.uid, mode: st.mode & 0o7777 }).toEqual({ uid: 65534, mode: 0o700 });
    // Another user (uid 4242) made nobody's store first, or planted a symlink to a dir of theirs: never used.
    const theirs = join(tempDir("jobrt-img-theirs-"), "dir");
    mkdirSync(theirs, { mode: 0o777 });
    chmodSync(theirs, 0o777);
    for (const [plant, why] of [
      ["mkdir", `${store} belongs to uid 4242, not to uid 65534: not used (another user made it)`],
      ["ln", `${store} is not a directory (a symbolic link?): not used as uid 65534's store`],
    ] as const) {
      expect(spawnSync("rm", ["-r", store]).status).toBe(0);
      const args = plant === "mkdir" ? ["mkdir", store] : ["ln", "-s", theirs, store];
      expect(spawnSync(args[0] as string, args.slice(1), { uid: 4242, gid: 4242 }).status).toBe(0);
      const refused = await asNobody();
      expect(refused.code).toBe(1);
      expect(refused.stderr.trim().split("\n")).toHaveLength(1);
      expect(refused.stderr).toContain(why);
      expect(refused.stderr).toContain(`root removes it (rm -r ${store})`);
      expect(lstatSync(store).uid).toBe(4242);
      expect(readdirSync(theirs)).toEqual([]);
    }
  }, 180_000);
});
