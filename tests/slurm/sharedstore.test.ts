import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
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
} from "./cluster.js";

const here = dirname(fileURLToPath(import.meta.url));

// Issue 28 on the two-node local Slurm: one SharedStore (docs/images.md) for nodea and nodeb, each
// with its own CacheDir. nodeb is its own network namespace: the registry listens on the host's end
// of the cluster's bridge. The store is pulled into once for the cluster, and runtime-oci and the
// charliecloud example run the image the same way, through @jobrt/images (images.md, "Images for
// any runtime").
describe("srun -N 2 jobrt exec --container-image with one SharedStore", () => {
  let site: JobrtSite;
  let reg: Registry | undefined;
  let failed = false;
  const bridge = `${process.env.JOBRT_SLURM_NET ?? "10.250.2"}.1`;
  const store = () => join(site.root, "store");

  beforeAll(async () => {
    site = jobrtSite();
    await startCluster(2);
    reg = await startRegistry(undefined, bridge);
    // The charliecloud example installed as a site installs a third-party runtime (writing-a-runtime.md).
    const plugins = join(site.root, "plugins");
    mkdirSync(join(plugins, "node_modules"), { recursive: true });
    symlinkSync(
      resolve(here, "../../examples/jobrt-runtime-charliecloud"),
      join(plugins, "node_modules/jobrt-runtime-charliecloud"),
    );
    // PluginDir is where every runtime of the site is found, runtime-oci too.
    mkdirSync(join(plugins, "node_modules/@jobrt"));
    symlinkSync(resolve(here, "../../packages/runtime-oci"), join(plugins, "node_modules/@jobrt/runtime-oci"));
    // The site makes the store, owned by root (docs/images.md, The store).
    mkdirSync(store(), { mode: 0o755 });
    // No CacheDir and no parent of it exist yet: jobrt makes them (a node once fell back to its
    // node cache for a missing parent).
    for (const node of ["nodea", "nodeb"]) {
      const etc = join(site.root, "etc", node);
      writeFileSync(
        join(etc, "images.conf"),
        `CacheDir=${join(site.root, "cache", node)}\nInsecureRegistries=${reg.host}\nSharedStore=${store()}\n`,
      );
      writeFileSync(
        join(etc, "jobrt.conf"),
        `${readFileSync(join(etc, "jobrt.conf"), "utf8")}RuntimePlugins=none,oci,charliecloud\nPluginDir=${plugins}\n`,
      );
    }
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
        removeRuncContainers([site.spoolRoot, join(site.root, "cache")]);
        rmSync(site.root, { recursive: true, force: true });
      }
    }
  });

  const srun = (args: string[]) => slurm(["srun", ...args], { env: site.env, timeoutMs: 180_000 });
  // srun's own notes while the previous job's nodes are released are not the tasks' output.
  const errors = (stderr: string) =>
    stderr
      .split("\n")
      .filter(
        (l) => l !== "" && !/^srun: job \d+ (queued and waiting for resources|has been allocated resources)$/.test(l),
      );
  const squashfs = () =>
    existsSync(join(store(), "images")) ? readdirSync(join(store(), "images")).filter((n) => n.endsWith(".sqfs")) : [];
  const blobFetches = (repo: string): number[] => {
    const counts: Record<string, number> = {};
    for (const m of registryOf(reg)
      .log()
      .matchAll(new RegExp(`"GET /v2/${repo}/blobs/(sha256:[0-9a-f]{64}) HTTP`, "g")))
      counts[m[1] as string] = (counts[m[1] as string] ?? 0) + 1;
    return Object.values(counts);
  };

  it("runtime oci on both nodes: each blob fetched once for the cluster, one squashfs, every task ran the one digest", async () => {
    const r = registryOf(reg);
    const digest = pushBusybox(r, "shared:1", "image-one");
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
      `docker://${r.host}/shared:1`,
      "--",
      "sh",
      "-c",
      'echo "$SLURMD_NODENAME $(cat /etc/jobrt-image)"',
    ]);
    expect(errors(run.stderr)).toEqual([]);
    expect(run.code).toBe(0);
    expect(sortedLines(run.stdout)).toEqual([
      "nodea image-one",
      "nodea image-one",
      "nodeb image-one",
      "nodeb image-one",
    ]);
    expect(
      blobFetches("shared").every((n) => n === 1),
      registryOf(reg)
        .log()
        .split("\n")
        .filter((l) => l.includes("GET /v2/shared"))
        .join("\n"),
    ).toBe(true);
    expect(blobFetches("shared").length).toBeGreaterThan(0);
    expect(squashfs()).toEqual([`${digest.slice(7)}.sqfs`]);
    expect(runcContainers([site.spoolRoot, join(site.root, "cache")])).toEqual([]);
  });

  it("the charliecloud example on both nodes runs the same image from the same store, fetching nothing again", async () => {
    const r = registryOf(reg);
    const before = blobFetches("shared");
    const run = await srun([
      "-N",
      "2",
      "-n",
      "2",
      "jobrt",
      "exec",
      "--runtime",
      "charliecloud",
      "--container-image",
      `docker://${r.host}/shared:1`,
      "--",
      "sh",
      "-c",
      'echo "$SLURMD_NODENAME $(cat /etc/jobrt-image)"',
    ]);
    expect(errors(run.stderr)).toEqual([]);
    expect(run.code).toBe(0);
    expect(sortedLines(run.stdout)).toEqual(["nodea image-one", "nodeb image-one"]);
    expect(blobFetches("shared")).toEqual(before);
    expect(squashfs()).toHaveLength(1);
  });
  it("a tag moved between the first and the second node's launch: both nodes run the first digest", async () => {
    const r = registryOf(reg);
    const first = pushBusybox(r, "moving:1", "moved-first");
    const go = join(site.root, "go-node1");
    const pins = join(store(), "jobs", "cluster");
    const pinCount = () => (existsSync(pins) ? readdirSync(pins).length : 0);
    const before = pinCount();
    // Node 1's task starts jobrt only once the test moved the tag, which it does once node 0
    // recorded the step's digest in the store: one step, two launches, a tag pushed in between.
    const run = srun([
      "-N",
      "2",
      "-n",
      "2",
      "sh",
      "-c",
      `if [ "$SLURM_NODEID" = 1 ]; then i=0; while [ ! -e ${go} ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done; V=-v; fi
exec jobrt exec $V --runtime oci --container-image docker://${r.host}/moving:1 -- sh -c 'echo "$SLURMD_NODENAME $(cat /etc/jobrt-image)"'`,
    ]);
    for (let i = 0; pinCount() === before && i < 1200; i++) await new Promise((d) => setTimeout(d, 100));
    expect(pinCount(), "node 0 recorded the job's digest").toBe(before + 1);
    const second = pushBusybox(r, "moving:1", "moved-second");
    expect(second).not.toBe(first);
    writeFileSync(go, "");
    const done = await run;
    expect(done.code, done.stderr).toBe(0);
    expect(sortedLines(done.stdout)).toEqual(["nodea moved-first", "nodeb moved-first"]);
    expect(done.stderr).toMatch(new RegExp(`is ${first}, pinned for job [0-9]+ step [0-9]+ by another node`));
  });
});

function registryOf(reg: Registry | undefined): Registry {
  if (!reg) throw new Error("the registry did not start");
  return reg;
}
