/**
 * MPI through `srun ... jobrt exec` on the two-node local Slurm (issue 37, docs/mpi.md): real
 * MPICH under `--mpi=pmi2` (its PMI-2 socket passed through jobrt to the task), real Open MPI and
 * mpi4py under `--mpi=pmix`, across both nodes and within one (shared memory between ranks), and
 * the refusal of a runtime that cannot pass the PMI-2 socket. The programs are built here with
 * Debian's mpicc wrappers (scripts/system-deps.sh installs them).
 */
import { spawnSync } from "node:child_process";
import { chmodSync, rmSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { busyboxBundle } from "../helpers/fixtures.js";
import { repoRoot, requires, tempDir } from "../helpers/jobrt.js";
import {
  type JobrtSite,
  jobrtSite,
  slurm,
  sortedLines,
  startCluster,
  stopClusterAfterAll,
  withoutAllocation,
} from "./cluster.js";

const SOURCES = join(repoRoot, "tests/slurm/mpi");
const have = (tool: string) => spawnSync(tool, ["--version"], { stdio: "ignore" }).status === 0;

function compile(mpicc: string, out: string): void {
  const r = spawnSync(mpicc, ["-O1", "-o", out, join(SOURCES, "ring.c")], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`${mpicc} ring.c exited ${r.status ?? r.signal}: ${r.stderr}`);
}

describe("MPI under srun through jobrt exec", () => {
  requires({
    "mpicc.mpich (mpich)": have("mpicc.mpich"),
    "mpicc.openmpi (libopenmpi-dev)": have("mpicc.openmpi"),
    "python3-mpi4py": spawnSync("/usr/bin/python3", ["-c", "import mpi4py"]).status === 0,
  });
  let site: JobrtSite;
  let dir: string;
  let bundle: string;

  beforeAll(async () => {
    site = jobrtSite();
    dir = tempDir("jobrt-slurm-mpi-");
    chmodSync(dir, 0o755);
    compile("mpicc.mpich", join(dir, "ring-mpich"));
    compile("mpicc.openmpi", join(dir, "ring-ompi"));
    bundle = busyboxBundle(join(dir, "bundle"));
    await startCluster(2);
  }, 300_000);
  stopClusterAfterAll(() => {
    for (const d of [site?.root, dir]) if (d) rmSync(d, { recursive: true, force: true });
  });

  const srun = async (args: string[]) => {
    const r = await slurm(["srun", ...args], { env: site.env, timeoutMs: 120_000 });
    return { ...r, stderr: withoutAllocation(r.stderr) };
  };
  const exec = (runtime: string[], program: string[]) => ["jobrt", "exec", ...runtime, "--", ...program];

  it.each([
    ["2 nodes", ["-N", "2", "-n", "2"], "ring 2 ranks token 1001"],
    ["1 node (shared memory)", ["-N", "1", "-n", "2"], "ring 2 ranks token 1001"],
  ])("MPICH over --mpi=pmi2, %s: the PMI-2 socket reaches every rank", async (_what, layout, line) => {
    const r = await srun(["--mpi=pmi2", ...layout, ...exec(["--runtime", "none"], [join(dir, "ring-mpich")])]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`${line}\n`);
  });

  it.each([
    ["2 nodes", ["-N", "2", "-n", "2"], "ring 2 ranks token 1001"],
    ["1 node (shared memory)", ["-N", "1", "-n", "2"], "ring 2 ranks token 1001"],
  ])("Open MPI over --mpi=pmix, %s", async (_what, layout, line) => {
    const r = await srun(["--mpi=pmix", ...layout, ...exec(["--runtime", "none"], [join(dir, "ring-ompi")])]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`${line}\n`);
  });

  it("mpi4py over --mpi=pmix on both nodes: every rank sees the allreduce of all four", async () => {
    const r = await srun([
      "--mpi=pmix",
      "-N",
      "2",
      "-n",
      "4",
      ...exec(["--runtime", "none"], ["/usr/bin/python3", join(SOURCES, "allreduce.py")]),
    ]);
    expect(r.code).toBe(0);
    expect(sortedLines(r.stdout)).toEqual([0, 1, 2, 3].map((n) => `rank ${n} of 4 sum 6`));
  });

  it("refuses --runtime oci under --mpi=pmi2 in one line per task, before any container", async () => {
    const r = await srun(["--mpi=pmi2", "-n", "1", ...exec(["--runtime", "oci", "--container", bundle], ["true"])]);
    expect(r.code).not.toBe(0);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain(`jobrt: MPI wire-up: runtime oci cannot pass Slurm's PMI-2 socket (PMI_FD=`);
  });
});
