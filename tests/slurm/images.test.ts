import { spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type Registry, pushBusybox, startRegistry } from "../helpers/registry.js";
import {
  type JobrtSite,
  clusterLogs,
  jobrtSite,
  removeRuncContainers,
  runcContainers,
  slurm,
  sortedLines,
  startCluster,
  stopCluster,
  waitFor,
} from "./cluster.js";

// `srun -N 2 jobrt exec --container-image ...` on the two-node local Slurm. nodeb is its own network
// namespace: the registry listens on the host's end of the cluster's bridge, which both nodes reach.
describe("srun -N 2 jobrt exec --container-image: a real registry, a node-local cache per node", () => {
  let site: JobrtSite;
  let reg: Registry | undefined;
  let failed = false;
  const bridge = `${process.env.JOBRT_SLURM_NET ?? "10.250.2"}.1`;
  const cache = (node: string) => join(site.root, "cache", node);

  beforeAll(async () => {
    site = jobrtSite();
    await startCluster(2);
    reg = await startRegistry(undefined, bridge);
    for (const node of ["nodea", "nodeb"])
      writeFileSync(
        join(site.root, "etc", node, "images.conf"),
        `CacheDir=${cache(node)}\nInsecureRegistries=${reg.host}\n`,
      );
  });
  afterEach((ctx) => {
    if (ctx.task.result?.state === "fail") failed = true;
  });
  afterAll(async () => {
    if (failed) console.error(clusterLogs());
    await reg?.stop();
    try {
      await stopCluster();
    } finally {
      if (site) {
        removeRuncContainers([site.spoolRoot, join(site.root, "cache"), join(site.root, "sitecache")]);
        rmSync(site.root, { recursive: true, force: true });
      }
    }
  });

  const srun = (args: string[]) => slurm(["srun", ...args], { env: site.env, timeoutMs: 120_000 });
  const images = (node: string) => readdirSync(join(cache(node), "public")).filter((n) => /^[0-9a-f]{64}$/.test(n));

  it("every node pulls the image once into its own cache and runs it; a digest reference pins both nodes after the tag moved", async () => {
    const r = registryOf(reg);
    const first = pushBusybox(r, "busybox:1", "image-one");
    const ref = `docker://${r.host}/busybox:1`;
    const run = await srun([
      "-N",
      "2",
      "-n",
      "4",
      "jobrt",
      "exec",
      "--runtime",
      "oci",
      "--container-image",
      ref,
      "--",
      "sh",
      "-c",
      'echo "$SLURMD_NODENAME $(cat /etc/jobrt-image)"',
    ]);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(sortedLines(run.stdout)).toEqual([
      "nodea image-one",
      "nodea image-one",
      "nodeb image-one",
      "nodeb image-one",
    ]);
    for (const node of ["nodea", "nodeb"]) expect(images(node)).toEqual([first.slice(7)]);
    // The tag moves; a step given the first image's digest still runs it on every node.
    pushBusybox(r, "busybox:1", "image-two");
    const pinned = await srun([
      "-N",
      "2",
      "-n",
      "2",
      "jobrt",
      "exec",
      "--runtime",
      "oci",
      "--container-image",
      `docker://${r.host}/busybox@${first}`,
      "--",
      "sh",
      "-c",
      'echo "$SLURMD_NODENAME $(cat /etc/jobrt-image)"',
    ]);
    expect(sortedLines(pinned.stdout)).toEqual(["nodea image-one", "nodeb image-one"]);
    const moved = await srun([
      "-N",
      "2",
      "-n",
      "2",
      "jobrt",
      "exec",
      "--runtime",
      "oci",
      "--container-image",
      ref,
      "--",
      "cat",
      "/etc/jobrt-image",
    ]);
    expect(sortedLines(moved.stdout)).toEqual(["image-two", "image-two"]);
    expect(runcContainers([site.spoolRoot, join(site.root, "cache")])).toEqual([]);
  });

  it("a job of an ordinary user (srun --uid nobody -n 2) under a site's CacheDir: one line per task naming CacheDir until the site makes users/ 1777, then each task pulls into the user's own store (issue 40, item 0)", async () => {
    const r = registryOf(reg);
    pushBusybox(r, "mine:1", "users-own");
    const nodes = ["nodea", "nodeb"];
    const siteCache = (node: string) => join(site.root, "sitecache", node);
    const conf = (node: string) => join(site.root, "etc", node, "images.conf");
    const before = nodes.map((node) => readFileSync(conf(node), "utf8"));
    const asUser = async () => {
      // srun --uid cannot read its allocation reply if the job had to queue: start on an idle cluster.
      expect(await waitFor(async () => (await slurm(["squeue", "-h"])).stdout.trim() === "", 30_000, 200)).toBe(true);
      // The user's own environment: srun passes its caller's, and root's HOME is no place for nobody's skopeo.
      return slurm(
        [
          "srun",
          "--uid=65534",
          "--gid=65534",
          "-N",
          "2",
          "-n",
          "2",
          "--chdir",
          "/",
          "jobrt",
          "exec",
          "--runtime",
          "oci",
        ].concat(["--container-image", `docker://${r.host}/mine:1`, "--", "cat", "/etc/jobrt-image"]),
        { env: { ...site.env, HOME: "/" }, timeoutMs: 120_000 },
      );
    };
    try {
      // The site's CacheDir, root's 0755 as docs/runtime-oci.md says, with nothing in it yet.
      for (const node of nodes) {
        mkdirSync(siteCache(node), { recursive: true });
        chmodSync(join(site.root, "sitecache"), 0o755);
        chmodSync(siteCache(node), 0o755);
        writeFileSync(conf(node), `CacheDir=${siteCache(node)}\nInsecureRegistries=${r.host}\n`);
      }
      const missing = await asUser();
      expect(missing.code).not.toBe(0);
      const lines = missing.stderr.split("\n").filter((l) => l.startsWith("jobrt:"));
      expect(lines, missing.stderr).toHaveLength(2);
      for (const node of nodes) {
        const users = join(siteCache(node), "users");
        const line = `${conf(node)}: CacheDir ${siteCache(node)}: uid 65534 cannot make ${users} (EACCES); the site makes it once, as root: install -d -m 1777 ${users}`;
        expect(
          lines.filter((l) => l.endsWith(line)),
          missing.stderr,
        ).toHaveLength(1);
      }
      expect(missing.stderr).not.toMatch(/permission denied, mkdir/);
      for (const node of nodes)
        expect(spawnSync("install", ["-d", "-m", "1777", join(siteCache(node), "users")]).status).toBe(0);
      const ran = await asUser();
      expect(ran.stderr).toBe("");
      expect(ran.code).toBe(0);
      expect(sortedLines(ran.stdout)).toEqual(["users-own", "users-own"]);
      for (const node of nodes) {
        const st = statSync(join(siteCache(node), "users", "65534"));
        expect({ uid: st.uid, mode: st.mode & 0o7777 }).toEqual({ uid: 65534, mode: 0o700 });
      }
      expect(runcContainers([site.spoolRoot, join(site.root, "sitecache")])).toEqual([]);
    } finally {
      for (const [i, node] of nodes.entries()) writeFileSync(conf(node), before[i] as string);
    }
  });
});

function registryOf(reg: Registry | undefined): Registry {
  if (!reg) throw new Error("the registry did not start");
  return reg;
}
