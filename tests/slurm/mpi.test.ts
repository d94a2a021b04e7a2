/**
 * MPI through `srun ... jobrt exec` on the two-node local Slurm (issue 37, docs/mpi.md): real
 * MPICH under `--mpi=pmi2` (its PMI-2 socket passed through jobrt to the task), real Open MPI and
 * mpi4py under `--mpi=pmix`, across both nodes and within one (shared memory between ranks), and
 * the PMI-2 socket reaching oci containers (runc --preserve-fds), as root and as a job user, and
 * Open MPI over PMIx in oci containers whose bundle shares the host's namespaces and PMIx dirs,
 * and the host's Open MPI brought in through a CDI device, with its ABI check.
 * The programs are built here with Debian's mpicc wrappers (scripts/system-deps.sh installs them).
 */
import { spawnSync } from "node:child_process";
import {
  appendFileSync,
  chmodSync,
  mkdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
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
  waitFor,
  withoutAllocation,
} from "./cluster.js";

const SOURCES = join(repoRoot, "tests/slurm/mpi");
const have = (tool: string) => spawnSync(tool, ["--version"], { stdio: "ignore" }).status === 0;

function compile(mpicc: string, out: string): void {
  const r = spawnSync(mpicc, ["-O1", "-o", out, join(SOURCES, "ring.c")], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`${mpicc} ring.c exited ${r.status ?? r.signal}: ${r.stderr}`);
}

/**
 * A busybox bundle as `runc spec` makes it, its own namespaces and /dev/shm
 * included, whose containers see the host's /usr (its MPI libraries) and `programs`: jobrt itself
 * gives an MPI step's containers what the wire-up needs (docs/mpi.md).
 */
function mpiBundle(dir: string, programs: string): string {
  busyboxBundle(dir);
  for (const link of ["lib", "lib64"]) symlinkSync(`usr/${link}`, join(dir, "rootfs", link));
  const file = join(dir, "config.json");
  const config = JSON.parse(readFileSync(file, "utf8"));
  for (const path of ["/usr", programs])
    config.mounts.push({ destination: path, type: "bind", source: path, options: ["rbind", "ro"] });
  writeFileSync(file, JSON.stringify(config, null, 2));
  return dir;
}

const LIBDIR = "/usr/lib/x86_64-linux-gnu";

/**
 * The site's host MPI as a CDI device on both nodes (docs/mpi.md, "The host's MPI in the
 * container"): site.example/mpi=host binds this machine's Open MPI library over the image's.
 */
function hostMpiSpec(site: JobrtSite): void {
  const specs = join(site.root, "cdi");
  mkdirSync(specs, { mode: 0o755 });
  const hostPath = realpathSync(join(LIBDIR, "libmpi.so.40"));
  const mounts = [{ hostPath, containerPath: join(LIBDIR, "libmpi.so.40"), options: ["ro", "bind"] }];
  writeFileSync(
    join(specs, "mpi.json"),
    JSON.stringify({
      cdiVersion: "0.6.0",
      kind: "site.example/mpi",
      devices: [{ name: "host", containerEdits: { mounts } }],
    }),
  );
  for (const node of ["nodea", "nodeb"])
    appendFileSync(join(site.root, "etc", node, "jobrt.conf"), `CdiSpecDirs=${specs}\n`);
}

describe("MPI under srun through jobrt exec", () => {
  requires({
    "mpicc.mpich (mpich)": have("mpicc.mpich"),
    "mpicc.openmpi (libopenmpi-dev)": have("mpicc.openmpi"),
    "python3-mpi4py": spawnSync("/usr/bin/python3", ["-c", "import mpi4py"]).status === 0,
  });
  let site: JobrtSite;
  let cdiSite: JobrtSite;
  let dir: string;
  let bundle: string;
  let rootlessBundle: string;
  let runcSpecMpiBundle: string;
  /** An image built with MPICH (only its library's name matters to the check). */
  let mpichImage: string;

  beforeAll(async () => {
    site = jobrtSite();
    dir = tempDir("jobrt-slurm-mpi-");
    chmodSync(dir, 0o755);
    compile("mpicc.mpich", join(dir, "ring-mpich"));
    compile("mpicc.openmpi", join(dir, "ring-ompi"));
    bundle = busyboxBundle(join(dir, "bundle"));
    rootlessBundle = busyboxBundle(join(dir, "rootless"), true);
    runcSpecMpiBundle = mpiBundle(join(dir, "mpi"), dir);
    mpichImage = busyboxBundle(join(dir, "mpich-image"));
    mkdirSync(join(mpichImage, "rootfs", LIBDIR), { recursive: true });
    writeFileSync(join(mpichImage, "rootfs", LIBDIR, "libmpich.so.12.2.2"), "");
    // A site of its own: the other tests' `jobrt check` would list its CDI device.
    cdiSite = jobrtSite();
    hostMpiSpec(cdiSite);
    await startCluster(2);
  }, 300_000);
  stopClusterAfterAll(() => {
    for (const d of [site?.root, cdiSite?.root, dir]) if (d) rmSync(d, { recursive: true, force: true });
  });

  const srun = async (args: string[], on = site) => {
    const r = await slurm(["srun", ...args], { env: on.env, timeoutMs: 120_000 });
    return { ...r, stderr: withoutAllocation(r.stderr) };
  };
  const exec = (runtime: string[], program: string[]) => ["jobrt", "exec", ...runtime, "--", ...program];
  /** `srun ... jobrt exec --runtime oci` of the rootless bundle, as nobody (rootless runc). */
  const srunAsNobody = async (layout: string[], program: string[]) => {
    // srun --uid cannot read its allocation reply if the job had to queue: start on an idle cluster.
    expect(await waitFor(async () => (await slurm(["squeue", "-h"])).stdout.trim() === "", 30_000, 200)).toBe(true);
    const runtime = ["--runtime", "oci", "--container", rootlessBundle];
    return srun(["--uid=65534", "--gid=65534", "--chdir", dir, ...layout, ...exec(runtime, program)]);
  };

  /** A 2-node step refused before anything started: its one refusal line per node, holding `marker`. */
  const refusedOnEachNode = (r: { code: number | null; stdout: string; stderr: string }, marker: string) => {
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    const refusals = r.stderr.split("\n").filter((l) => l.includes(marker));
    expect(refusals).toHaveLength(2);
    return refusals;
  };

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

  // A real PMI-2 exchange, without MPI: the busybox bundle has no MPI library. Slurm's PMI-2 server
  // answers the init line of the PMI-1 wire protocol that every PMI-2 client starts with.
  const PMI2_INIT =
    'printf "cmd=init pmi_version=2 pmi_subversion=0\\n" >&$PMI_FD; read -r line <&$PMI_FD; echo "rank $PMI_RANK fd $PMI_FD: $line"';
  const initAnswers = [
    "rank 0 fd 3: cmd=response_to_init rc=0 pmi_version=2 pmi_subversion=0",
    "rank 1 fd 3: cmd=response_to_init rc=0 pmi_version=2 pmi_subversion=0",
  ];

  it("--runtime oci under --mpi=pmi2, as root: each container gets the PMI-2 socket at fd 3 and Slurm answers its init", async () => {
    const r = await srun([
      "--mpi=pmi2",
      "-N",
      "2",
      "-n",
      "2",
      ...exec(["--runtime", "oci", "--container", bundle], ["sh", "-c", PMI2_INIT]),
    ]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(sortedLines(r.stdout)).toEqual(initAnswers);
  });

  it("--runtime oci under --mpi=pmi2, as a job user (srun --uid, rootless runc): the same", async () => {
    const r = await srunAsNobody(["--mpi=pmi2", "-N", "2", "-n", "2"], ["sh", "-c", PMI2_INIT]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(sortedLines(r.stdout)).toEqual(initAnswers);
  });

  // A bundle as `runc spec` makes it: jobrt binds the PMIx directories and /dev/shm and gives the
  // containers the host's network (PMIx rendezvous over TCP on 127.0.0.1, ranks on the other node),
  // IPC, PID and UTS namespaces (shared memory and CMA between a node's ranks).
  it.each([
    ["MPICH", "pmi2", "2 nodes", ["-N", "2", "-n", "2"]],
    ["MPICH", "pmi2", "1 node (shared memory)", ["-N", "1", "-n", "2"]],
    ["Open MPI", "pmix", "2 nodes", ["-N", "2", "-n", "2"]],
    ["Open MPI", "pmix", "1 node (shared memory)", ["-N", "1", "-n", "2"]],
    ["Open MPI", "pmix", "2 nodes x 2 ranks", ["-N", "2", "-n", "4"]],
  ])(
    "%s in oci containers of a runc-spec bundle under --mpi=%s, %s, as root: the ring completes",
    async (mpi, type, _what, layout) => {
      const ring = join(dir, mpi === "MPICH" ? "ring-mpich" : "ring-ompi");
      const r = await srun([
        `--mpi=${type}`,
        ...layout,
        ...exec(["--runtime", "oci", "--container", runcSpecMpiBundle], [ring]),
      ]);
      // Open MPI names each fabric component its library view lacks, "(ignored)": nothing else.
      expect(r.stderr.split("\n").filter((l) => l !== "" && !l.endsWith("(ignored)"))).toEqual([]);
      expect(r.code).toBe(0);
      const n = Number(layout[3]);
      expect(r.stdout).toBe(`ring ${n} ranks token ${1000 + (n * (n - 1)) / 2}\n`);
    },
  );

  it("the host's Open MPI through a CDI device (--container-device site.example/mpi=host), 2 nodes x 2 ranks over --mpi=pmix: the ring completes", async () => {
    const runtime = [
      "--runtime",
      "oci",
      "--container",
      runcSpecMpiBundle,
      "--container-device",
      "site.example/mpi=host",
    ];
    const r = await srun(["--mpi=pmix", "-N", "2", "-n", "4", ...exec(runtime, [join(dir, "ring-ompi")])], cdiSite);
    expect(r.stderr.split("\n").filter((l) => l !== "" && !l.endsWith("(ignored)"))).toEqual([]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("ring 4 ranks token 1006\n");
  });

  it("the host's Open MPI into an MPICH image: refused in one line on each node, naming both, nothing started", async () => {
    const runtime = ["--runtime", "oci", "--container", mpichImage, "--container-device", "site.example/mpi=host"];
    const r = await srun(["--mpi=pmix", "-N", "2", "-n", "2", ...exec(runtime, ["sh", "-c", "echo started"])], cdiSite);
    for (const line of refusedOnEachNode(r, "cannot run the image's"))
      expect(line).toContain(
        `brings, Open MPI 4.x (${realpathSync(join(LIBDIR, "libmpi.so.40"))}), cannot run the image's MPICH ABI (${LIBDIR}/libmpich.so.12.2.2) in ${mpichImage}`,
      );
  });

  // Slurm's PMIx server takes a client only with the job's uid; rootless runc runs the task as root
  // of its own user namespace, so the step is refused before its container exists (docs/mpi.md).
  it("rootless oci containers (srun --uid) under --mpi=pmix: refused in one line on each node, nothing started", async () => {
    const r = await srunAsNobody(["--mpi=pmix", "-N", "2", "-n", "2"], ["sh", "-c", "echo started"]);
    for (const line of refusedOnEachNode(r, "Slurm's PMIx server refuses"))
      expect(line).toMatch(
        /MPI wire-up: runtime oci runs this task as uid 0 of its own user namespace \(rootless runc\), and Slurm's PMIx server refuses a client whose uid is not the job's \(65534\), so MPI_Init would fail: use srun --mpi=pmi2 \(an MPI with PMI-2, such as MPICH\), or --runtime none$/,
      );
  });

  // `jobrt check` as the step's program (docs/cli.md, "The MPI wire-up"): one srun per wire-up, each
  // task checking runtime none, then runtime oci (srun takes a ":" for its own, so not one jobrt
  // check of two components); `-l` labels each line with its task, task 0's are looked at.
  const check = () => [
    "-l",
    "sh",
    "-c",
    `jobrt check --runtime none true; none=$?; jobrt check --runtime oci --container ${bundle} true; echo "exit $none $?"`,
  ];
  const task0 = (text: string) =>
    text
      .split("\n")
      .filter((l) => l.startsWith("0: "))
      .map((l) => `${l.slice(3)}\n`)
      .join("");

  it("jobrt check under --mpi=pmi2, 2 ranks on 1 node: the open socket; none and oci pass it, oci's containers are given the host's namespaces", async () => {
    const r = await srun(["--mpi=pmi2", "-N", "1", "-n", "2", ...check()]);
    expect(r.code).toBe(0);
    const out = task0(r.stdout);
    const fd = /\nmpi: PMI_FD: ok: (\d+), an open socket\n/.exec(out)?.[1];
    expect(fd).toBeDefined();
    expect(out).toMatch(
      /^component 0: runtime none: ok\nmpi: wire-up: ok: pmi2 \(SLURM_MPI_TYPE=pmi2; PMI_RANK=0, PMI_SIZE=2\)\n/,
    );
    expect(out).toMatch(/\nmpi: \/dev\/shm: ok: tmpfs, \d+\.\d GiB \(\d+\.\d GiB free\), /);
    expect(out).toContain(
      `\ncomponent 0: mpi: runtime none: PMI-2 socket: ok: passed to the task at PMI_FD=${fd} (capability "pmi-fd")\n`,
    );
    expect(out).toContain("\nmpi: ok\n");
    expect(out).toMatch(/\nexit 0 0\n$/);
    // oci carries the socket into its container at fd 3 (capability pass-fds).
    expect(out).toContain(
      '\ncomponent 0: mpi: runtime oci: PMI-2 socket: ok: passed to the task at PMI_FD=3 (capability "pass-fds")\n',
    );
    expect(out).toContain(
      "\ncomponent 0: mpi: runtime oci: /dev/shm and user namespace: ok: runtime oci's containers are asked for the host's network, IPC, PID and UTS namespaces and /dev/shm (2 ranks on this node), so shared memory and CMA work between them (unless a site conf declines, docs/mpi.md)\n",
    );
    expect(task0(r.stderr)).toBe("");
  });

  it("jobrt check under --mpi=pmix on 2 nodes: the server and its directory; oci's container gets it bound", async () => {
    const r = await srun(["--mpi=pmix", "-N", "2", "-n", "2", ...check()]);
    expect(r.code).toBe(0);
    const out = task0(r.stdout);
    expect(out).toMatch(
      /^component 0: runtime none: ok\nmpi: wire-up: ok: pmix \(SLURM_MPI_TYPE=pmix\w*; PMIX_NAMESPACE=\S+, PMIX_RANK=0\)\nmpi: PMIx server: ok: PMIX_SERVER_URI\d*=\S+\nmpi: PMIX_SERVER_TMPDIR: ok: \/\S+: a directory this user can reach\n/,
    );
    expect(out).toContain(
      "\ncomponent 0: mpi: runtime none: PMIx directories: ok: the task sees them as this process does\n",
    );
    expect(out).toContain(
      "\ncomponent 0: mpi: runtime oci: /dev/shm and user namespace: ok: each task is its own container, but this node has one rank of the step: nothing to share\n",
    );
    // The local cluster's PMIX_SERVER_TMPDIR is under its SlurmdSpoolDir; PMIX_SYSTEM_TMPDIR is /tmp.
    expect(out).toMatch(
      /\ncomponent 0: mpi: runtime oci: PMIx directories: ok: bound into runtime oci's container at the same paths: \/tmp, \/\S+\/pmix\.\d+\.\d+\n/,
    );
    expect(out).toMatch(/\nexit 0 0\n$/);
    expect(task0(r.stderr)).toBe("");
  });

  it("jobrt check under --mpi=none: no wire-up, the node's side still shown, and the check passes", async () => {
    const r = await srun(["--mpi=none", "-n", "1", ...check()]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const out = task0(r.stdout);
    expect(out).toMatch(
      /^component 0: runtime none: ok\nmpi: wire-up: ok: none \(SLURM_MPI_TYPE=(none|\(unset\))\): Slurm wires no ranks together, so an MPI program here starts as one singleton per task; fix, for MPI: srun --mpi=pmix or --mpi=pmi2\nmpi: \/dev\/shm: ok: .*\nmpi: user namespace: ok: .*\nmpi: fabric devices: ok: .*\nmpi: ok\n/,
    );
    // No wire-up, so no runtime is held against one.
    expect(out).not.toContain(": mpi: runtime ");
    expect(out).toMatch(/\nexit 0 0\n$/);
  });
});
