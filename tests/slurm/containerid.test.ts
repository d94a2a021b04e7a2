import { rmSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { busyboxBundle } from "../helpers/fixtures.js";
import { tempDir } from "../helpers/jobrt.js";
import {
  type JobrtSite,
  jobrtSite,
  removeRuncContainers,
  runcContainers,
  slurm,
  sortedLines,
  startCluster,
  stopClusterAfterAll,
} from "./cluster.js";

// SLURM_CONTAINER_ID under srun (docs/container-id.md): Slurm 23.02+'s `srun --container-id ID`
// exports it to the tasks; the local cluster's Slurm (22.05) has no such option, so the variable is
// passed on the way srun passes any of the submitting shell's environment.
describe("SLURM_CONTAINER_ID names the containers of srun ... jobrt exec", () => {
  let site: JobrtSite;
  let bundle: string;
  const temps: string[] = [];

  beforeAll(async () => {
    site = jobrtSite();
    temps.push(site.root);
    const dir = tempDir("jobrt-slurm-cid-bundle-");
    temps.push(dir);
    bundle = busyboxBundle(join(dir, "bundle"));
    await startCluster(2);
  });
  stopClusterAfterAll(async () => {
    if (site && bundle) removeRuncContainers([bundle, site.spoolRoot]);
    for (const dir of temps) rmSync(dir, { recursive: true, force: true });
  });

  const srun = (args: string[], env: Record<string, string>) =>
    slurm(["srun", ...args], { env: { ...site.env, ...env } });

  it("each task's container is ID.TASK on its node (the embedded runc default); nothing is left", async () => {
    const id = `slurm-cid.${process.pid}`;
    // One node: the local cluster's two nodes share /run/runc, where two "ID.0" would collide.
    const r = await srun(
      [
        "-N",
        "1",
        "-n",
        "2",
        "jobrt",
        "exec",
        "--runtime",
        "oci",
        "--container",
        bundle,
        "--",
        "sh",
        "-c",
        'echo "$SLURM_PROCID $(grep "^0::" /proc/self/cgroup)"',
      ],
      { SLURM_CONTAINER_ID: id },
    );
    expect(r.code, r.stderr).toBe(0);
    const lines = sortedLines(r.stdout);
    expect(lines).toHaveLength(2);
    // Task t (node-local id t on the one node) runs in container ID.t.
    for (const l of lines) expect(l).toMatch(new RegExp(`^([01]) 0::/.*${id.replace(/\./g, "\\.")}\\.\\1$`));
    expect(runcContainers([bundle, site.spoolRoot])).toEqual([]);
  });

  it("a bad SLURM_CONTAINER_ID: each task fails in one line naming the variable, srun exits 2, nothing runs", async () => {
    const r = await srun(["-n", "2", "jobrt", "exec", "--runtime", "oci", "--container", bundle, "--", "true"], {
      SLURM_CONTAINER_ID: "--root=/tmp",
    });
    expect(r.code).toBe(2);
    const ours = r.stderr.split("\n").filter((l) => l.startsWith("jobrt: "));
    expect(ours).toEqual([
      `jobrt: SLURM_CONTAINER_ID: "--root=/tmp" is not a container id (letters, digits, '_', '+', '.', '-', not starting with '-', not . or ..)`,
      `jobrt: SLURM_CONTAINER_ID: "--root=/tmp" is not a container id (letters, digits, '_', '+', '.', '-', not starting with '-', not . or ..)`,
    ]);
    expect(runcContainers([bundle, site.spoolRoot])).toEqual([]);
  });
});
