import { readdirSync, rmSync, writeFileSync } from "node:fs";
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
        removeRuncContainers([site.spoolRoot, join(site.root, "cache")]);
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
});

function registryOf(reg: Registry | undefined): Registry {
  if (!reg) throw new Error("the registry did not start");
  return reg;
}
