/**
 * jobrt's SPANK plugin (packages/spank, docs/slurm.md) on the two-node local Slurm: built here with
 * make, enabled by the test cluster's plugstack.conf, driven by real srun and sbatch lines as a
 * pyxis user types them. slurmstepd reads plugstack.conf at each step, so a test that needs another
 * plugin line rewrites the file and the next step takes it.
 */
import { spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { repoRoot, tempDir } from "../helpers/jobrt.js";
import { type Registry, pushBusybox, startRegistry } from "../helpers/registry.js";
import {
  type JobrtSite,
  jobrtSite,
  removeRuncContainers,
  slurm,
  sortedLines,
  startCluster,
  stopClusterAfterAll,
  waitFor,
  withoutAllocation,
} from "./cluster.js";

const SOURCES = join(repoRoot, "tests/slurm/mpi");

describe("srun --runtime and --container-image through jobrt's SPANK plugin", () => {
  let site: JobrtSite;
  let dir: string;
  let plugstack: string;
  let plugin: string;
  let reg: Registry | undefined;
  const bridge = `${process.env.JOBRT_SLURM_NET ?? "10.250.2"}.1`;
  const srun = (args: string[], env: Record<string, string> = {}) =>
    slurm(["srun", ...args], { env: { ...site.env, ...env }, timeoutMs: 120_000 });
  const usePlugin = (args: string) => writeFileSync(plugstack, `required ${plugin} ${args}\n`);

  beforeAll(async () => {
    site = jobrtSite();
    dir = tempDir("jobrt-spank-");
    plugin = join(dir, "jobrtspank.so");
    const make = spawnSync("make", ["-s", "-C", join(repoRoot, "packages/spank"), `OUT=${plugin}`], {
      encoding: "utf8",
    });
    if (make.status !== 0) throw new Error(`make of the SPANK plugin exited ${make.status}: ${make.stderr}`);
    plugstack = join(dir, "plugstack.conf");
    usePlugin(`jobrt=${join(site.binDir, "jobrt")}`);
    await startCluster(2, undefined, "linuxproc", undefined, false, plugstack);
    reg = await startRegistry(undefined, bridge);
    for (const node of ["nodea", "nodeb"]) {
      writeFileSync(
        join(site.root, "etc", node, "images.conf"),
        `CacheDir=${join(site.root, "cache", node)}\nInsecureRegistries=${reg.host}\n`,
      );
      // What a site makes once, as root, for its job users' pulls (docs/images.md).
      mkdirSync(join(site.root, "cache", node, "users"), { recursive: true });
      chmodSync(join(site.root, "cache", node, "users"), 0o1777);
    }
    // The job user's containers bind it too.
    chmodSync(dir, 0o755);
    mkdirSync(join(dir, "data"), { mode: 0o755 });
    writeFileSync(join(dir, "data", "payload"), "from the host\n");
  }, 300_000);
  stopClusterAfterAll(async () => {
    await reg?.stop();
    if (site) {
      removeRuncContainers([site.spoolRoot, join(site.root, "cache")]);
      rmSync(site.root, { recursive: true, force: true });
    }
  });

  it("srun --help lists the plugin's options, from the header generated from the CLI's table", async () => {
    const r = await srun(["--help"]);
    expect(r.stdout).toMatch(/--runtime=NAME\s+\[jobrt\] run each task through this jobrt runtime/);
    expect(r.stdout).toMatch(/--container-image=\[USER@\]\[REGISTRY#\]IMAGE\[:TAG\]/);
    expect(r.stdout).toMatch(/--container-save=PATH\s+\[jobrt\] refused/);
  });

  it("--runtime none on 2 nodes x 2 tasks: each task runs through jobrt exec, one jobrt per node, and never sees the plugin's variables", async () => {
    const probe = 'echo "$SLURM_PROCID $SLURMD_NODENAME $SLURM_RUNTIME vars=$(env | grep -c ^JOBRT_SPANK)"';
    const r = await srun(["-N", "2", "-n", "4", "--overcommit", "--runtime=none", "sh", "-c", probe]);
    expect(withoutAllocation(r.stderr)).toBe("");
    expect(r.code).toBe(0);
    expect(sortedLines(r.stdout)).toEqual([
      "0 nodea none vars=0",
      "1 nodea none vars=0",
      "2 nodeb none vars=0",
      "3 nodeb none vars=0",
    ]);
  });

  it("each task's own exit status reaches srun, a signal's too", async () => {
    const r = await srun([
      "-N",
      "1",
      "-n",
      "2",
      "--overcommit",
      "--runtime=none",
      "sh",
      "-c",
      "[ $SLURM_PROCID = 0 ] && exit 3; kill -TERM $$",
    ]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/task 0: Exited with exit code 3/);
    expect(r.stderr).toMatch(/task 1: (Terminated|Exited with exit code 143)/);
  });

  it("a step without the plugin's options runs as before: no jobrt", async () => {
    const r = await srun(["-N", "1", "sh", "-c", 'echo "${SLURM_RUNTIME:-no runtime} $(env | grep -c ^JOBRT_SPANK)"']);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("no runtime 0\n");
  });

  /** A pyxis user's line: an image from a registry, a host directory bound read-only, its workdir, FOO kept. */
  const pyxisLine = (reg: Registry) => [
    "-N",
    "2",
    "-n",
    "2",
    `--container-image=${reg.host}#busybox:1`,
    `--container-mounts=${join(dir, "data")}:/tmp/data:ro`,
    "--container-workdir=/tmp/data",
    "--container-env=FOO",
    "sh",
    "-c",
    'echo "$SLURMD_NODENAME $(cat /etc/jobrt-image) $(id -u) $(pwd) $(cat payload) FOO=$FOO"; if touch x 2>/dev/null; then echo writable; fi',
  ];

  it.each([
    ["as root", [], {}, "0"],
    // srun --uid cannot read its allocation reply if the job had to queue: on an idle cluster. The
    // job user's own HOME, not root's (skopeo reads its registries.conf.d there).
    ["as a job user (srun --uid)", ["--uid=65534", "--gid=65534", "--chdir=/"], { HOME: "/nonexistent" }, "0"],
  ] as const)(
    "a pyxis line, %s: --container-image REGISTRY#IMAGE:TAG, --container-mounts, --container-workdir and --container-env on 2 nodes",
    async (_who, uid, env, id) => {
      if (!reg) throw new Error("no registry");
      pushBusybox(reg, "busybox:1", "image-one", { env: ["FOO=from-image"] });
      expect(await waitFor(async () => (await slurm(["squeue", "-h"])).stdout.trim() === "", 30_000, 200)).toBe(true);
      const r = await srun([...uid, ...pyxisLine(reg)], { ...env, FOO: "from-the-task" });
      expect(withoutAllocation(r.stderr)).toBe("");
      expect(r.code).toBe(0);
      expect(sortedLines(r.stdout)).toEqual([
        `nodea image-one ${id} /tmp/data from the host FOO=from-the-task`,
        `nodeb image-one ${id} /tmp/data from the host FOO=from-the-task`,
      ]);
    },
  );

  it.each([
    ["--container-save=/tmp/x", "--container-save: jobrt has no saving the container as an image"],
    ["--container-name=app", "--container-name: jobrt has no named containers reused by later steps"],
    ["--container-remap-root", "--container-remap-root: jobrt has no remapping the user to root"],
  ])("srun %s is refused at submission in one line naming it, and nothing runs", async (option, line) => {
    const marker = join(dir, `ran-${option.replace(/\W/g, "")}`);
    const r = await srun(["-N", "1", option, "touch", marker]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain(`jobrt: ${line}\n`);
    expect(readdirSync(dir)).not.toContain(marker.slice(dir.length + 1));
  });

  it("sbatch with the plugin's options is refused at submission: they belong on srun lines", async () => {
    const r = await slurm(["sbatch", "--runtime=none", "--wrap", "true"], { env: site.env });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("jobrt: --runtime: sbatch and salloc do not take jobrt's options; give them to srun\n");
  });

  it("an image reference jobrt cannot take fails each task in one line naming the option", async () => {
    const r = await srun(["-N", "1", "--container-image=alice@registry.example#app:1", "true"]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain(
      "jobrt: srun --container-image: alice@registry.example#app:1: USER@ is enroot's credentials, which jobrt has not; drop it",
    );
  });

  it("srun --multi-prog with the plugin's options is refused on the node: its tasks would run without jobrt", async () => {
    const conf = join(dir, "multi.conf");
    writeFileSync(conf, "0 /bin/true\n1 /bin/true\n");
    const r = await srun(["-N", "1", "-n", "2", "--overcommit", "--runtime=none", "--multi-prog", conf]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain(
      "jobrt: srun --multi-prog does not take jobrt's options: give each line jobrt exec and its options",
    );
  });

  it("a heterogeneous step with the plugin's options fails on each node in one line: Slurm would give every component the one runtime", async () => {
    const r = await srun(["-n", "1", "true", ":", "--runtime=none", "-n", "1", "true"]);
    expect(r.code).not.toBe(0);
    const refusals = r.stderr.split("\n").filter((l) => l.includes("a heterogeneous step does not take"));
    expect(refusals.map((l) => l.replace(/^slurmstepd-node[ab]: error: /, ""))).toEqual([
      "jobrt: a heterogeneous step does not take jobrt's SPANK options (Slurm gives them to every component alike): give each component jobrt exec and its options",
      "jobrt: a heterogeneous step does not take jobrt's SPANK options (Slurm gives them to every component alike): give each component jobrt exec and its options",
    ]);
  });

  it("MPICH over --mpi=pmi2 through the plugin: the PMI-2 socket reaches every rank on both nodes", async () => {
    const ring = join(dir, "ring-mpich");
    const cc = spawnSync("mpicc.mpich", ["-O1", "-o", ring, join(SOURCES, "ring.c")], { encoding: "utf8" });
    if (cc.status !== 0) throw new Error(`mpicc.mpich exited ${cc.status}: ${cc.stderr}`);
    const r = await srun(["--mpi=pmi2", "-N", "2", "-n", "2", "--runtime=none", ring]);
    expect(withoutAllocation(r.stderr)).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("ring 2 ranks token 1001\n");
  });

  it("a plugstack.conf whose jobrt= names no program fails each task in one line naming it", async () => {
    usePlugin("jobrt=/nonexistent/jobrt");
    try {
      const r = await srun(["-N", "1", "--runtime=none", "true"]);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain("jobrt: plugstack.conf jobrt=/nonexistent/jobrt: No such file or directory");
    } finally {
      usePlugin(`jobrt=${join(site.binDir, "jobrt")}`);
    }
  });
});
