// --container-image: a first pull + unpack and a cached start through jobrt, against doing the
// same by hand with the tools jobrt drives (skopeo copy + umoci unpack), and a cached start against
// `runc run` of a prepared bundle. A real docker-registry on 127.0.0.1 serves a busybox image.
import { execFileSync, spawn } from "node:child_process";
import { chmodSync, cpSync, mkdirSync, mkdtempSync, openSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { bundleWithArgs } from "./fixtures.mjs";
import { compare, fmt, jobrtBin, ratio, repoRoot, rss, table, timeOnce } from "./lib.mjs";

export const name = "images";
export const description =
  "jobrt run --container-image docker://127.0.0.1:PORT/busybox:1 /bin/true (embedded runc default, as root): first pull (empty cache) and cached start, against `skopeo copy` + `umoci unpack --rootless` by hand into a fresh dir, and against `runc run` and `jobrt run --container` of a prepared busybox bundle; and starts from a SharedStore squashfs on a node that never pulled the image (by tag and by digest), and on a job's second node, against a cached start from the node cache";

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function startRegistry(dir) {
  const port = await freePort();
  const config = join(dir, "registry.yml");
  writeFileSync(
    config,
    `version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: ${join(dir, "storage")}\nhttp:\n  addr: 127.0.0.1:${port}\n`,
  );
  const out = openSync(join(dir, "registry.log"), "a");
  const child = spawn("docker-registry", ["serve", config], { stdio: ["ignore", out, out] });
  for (let i = 0; i < 100; i++) {
    if (
      await fetch(`http://127.0.0.1:${port}/v2/`).then(
        (r) => r.ok,
        () => false,
      )
    )
      return { host: `127.0.0.1:${port}`, child };
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill("SIGTERM");
  throw new Error("docker-registry did not start");
}

function pushBusybox(dir, host) {
  const rootfs = join(dir, "rootfs");
  execFileSync("sh", [join(repoRoot, "scripts/busybox-rootfs.sh"), rootfs], { stdio: "ignore" });
  const layout = join(dir, "layout");
  const bundle = join(dir, "build");
  const sh = (...argv) => execFileSync(argv[0], argv.slice(1), { stdio: "ignore" });
  sh("umoci", "init", "--layout", layout);
  sh("umoci", "new", "--image", `${layout}:img`);
  sh("umoci", "unpack", "--rootless", "--image", `${layout}:img`, bundle);
  cpSync(rootfs, join(bundle, "rootfs"), { recursive: true, verbatimSymlinks: true });
  sh("umoci", "repack", "--image", `${layout}:img`, bundle);
  sh("skopeo", "copy", "--quiet", "--dest-tls-verify=false", `oci:${layout}:img`, `docker://${host}/busybox:1`);
}

/** A node's conf dir; with `store`, a node identity of its own (NodeName) sharing that SharedStore. */
function site(host, store) {
  const dir = mkdtempSync(join(tmpdir(), "jobrt-bench-img-"));
  chmodSync(dir, 0o755);
  writeFileSync(
    join(dir, "jobrt.conf"),
    `SpoolDir=${join(dir, "spool")}\n${
      store
        ? `NodeName=bench${dir
            .slice(-6)
            .toLowerCase()
            .replace(/[^a-z0-9]/g, "x")}\n`
        : ""
    }`,
  );
  writeFileSync(
    join(dir, "images.conf"),
    `CacheDir=${join(dir, "cache")}\nInsecureRegistries=${host}\n${store ? `SharedStore=${store}\n` : ""}`,
  );
  return dir;
}

export async function run({ quick, env }) {
  const runs = quick ? 2 : 8;
  const work = mkdtempSync(join(tmpdir(), "jobrt-bench-images-"));
  const reg = await startRegistry(work);
  try {
    pushBusybox(work, reg.host);
    const ref = `docker://${reg.host}/busybox:1`;
    // Own job ids: runc's container ids (node.uid.job.step.task) are machine-wide.
    let job = 800000 + (process.pid % 1000) * 100;
    const jobrt = (conf, jobId = ++job, image = ref) =>
      timeOnce(
        [process.execPath, "--", jobrtBin, "run", "--jobid", String(jobId), "--container-image", image, "/bin/true"],
        { env: { ...env, JOBRT_CONF_DIR: conf } },
      );
    // As a batch script pinned by `jobrt check` names it (docs/images.md, "The pin").
    const digest = execFileSync("skopeo", ["inspect", "--tls-verify=false", "--format", "{{.Digest}}", ref], {
      encoding: "utf8",
    }).trim();
    const byDigest = `docker://${reg.host}/busybox@${digest}`;
    const byHand = join(work, "by-hand.sh");
    writeFileSync(
      byHand,
      `set -e; d=$(mktemp -d ${work}/hand.XXXXXX)\nskopeo copy --quiet --src-tls-verify=false ${ref} oci:$d/layout:img\numoci unpack --rootless --image $d/layout:img $d/bundle >/dev/null\nrm -rf $d\n`,
    );
    const hand = () => timeOnce(["sh", byHand], { env });
    const first = await compare(() => jobrt(site(reg.host)), hand, { runs, warmup: 1 });
    const cachedConf = site(reg.host);
    await jobrt(cachedConf);
    const cached = await compare(() => jobrt(cachedConf), hand, { runs, warmup: 1 });
    const bundle = bundleWithArgs(["/bin/true"]);
    let n = 0;
    const runcRun = () => timeOnce(["runc", "run", "-b", bundle, `bench-images-${process.pid}-${n++}`], { env });
    const prepared = await compare(() => jobrt(cachedConf), runcRun, { runs, warmup: 1 });
    const jobrtBundle = () =>
      timeOnce(
        [process.execPath, "--", jobrtBin, "run", "--jobid", String(++job), "--container", bundle, "/bin/true"],
        { env: { ...env, JOBRT_CONF_DIR: cachedConf } },
      );
    const sameHost = await compare(() => jobrt(cachedConf), jobrtBundle, { runs, warmup: 1 });
    // The shared store (docs/images.md): filled once, then each run is a node that never pulled
    // the image. Not one that never ran a job: its SpoolDir is made by an untimed step without an
    // image first, as the baseline's node has run steps before.
    const store = join(work, "store");
    mkdirSync(store, { mode: 0o755 });
    await jobrt(site(reg.host, store));
    const freshNode = async () => {
      const conf = site(reg.host, store);
      await timeOnce([process.execPath, "--", jobrtBin, "run", "--jobid", String(++job), "/bin/true"], {
        env: { ...env, JOBRT_CONF_DIR: conf },
      });
      return conf;
    };
    const fresh = await compare(
      async () => jobrt(await freshNode()),
      () => jobrt(cachedConf),
      { runs, warmup: 1 },
    );
    // The same by digest: the store has its squashfs, so no registry is asked (the node cache asks).
    const freshByDigest = await compare(
      async () => jobrt(await freshNode(), undefined, byDigest),
      () => jobrt(cachedConf, undefined, byDigest),
      { runs, warmup: 1 },
    );
    // The second node of a job: the first node pinned the digest; the second one starts from the store.
    const secondNode = async () => {
      const id = ++job;
      await jobrt(site(reg.host, store), id);
      return jobrt(await freshNode(), id);
    };
    const second = await compare(secondNode, () => jobrt(cachedConf), { runs, warmup: 1 });
    const row = (what, r, base) => [
      what,
      fmt(r.a.median),
      `${fmt(r.a.min)}-${fmt(r.a.max)}`,
      base,
      fmt(r.b.median),
      ratio(r.a.median, r.b.median),
      // CPU time of the whole process tree (GNU time): what the start costs the node, which other
      // jobs' load on a shared machine moves far less than wall time.
      r.a.cpuMedian !== undefined && r.b.cpuMedian !== undefined ? ratio(r.a.cpuMedian, r.b.cpuMedian) : "-",
      rss(r.a.rssKiB),
    ];
    return table(
      [
        "jobrt run --container-image",
        "median ms",
        "min-max",
        "baseline",
        "baseline median ms",
        "ratio",
        "CPU ratio",
        "jobrt peak RSS",
      ],
      [
        row("first pull + unpack + run (empty cache)", first, "skopeo copy + umoci unpack"),
        row("cached start", cached, "skopeo copy + umoci unpack"),
        row("cached start", prepared, "runc run of a prepared bundle"),
        row("cached start", sameHost, "jobrt run --container <prepared bundle>"),
        row("shared squashfs start, node never pulled", fresh, "cached start (node cache)"),
        row("first start on a job's second node", second, "cached start (node cache)"),
        row("shared squashfs start by digest, node never pulled", freshByDigest, "cached start by digest (node cache)"),
      ],
    );
  } finally {
    reg.child.kill("SIGTERM");
    rmSync(work, { recursive: true, force: true });
  }
}
