// Issue 37, item 6: what jobrt costs an MPI job. On the two-node local Slurm, inside one
// allocation, alternating bare srun and `srun jobrt exec --runtime none`: 8-byte ping-pong
// latency and 1 MiB bandwidth within a node and across the two, and the time from srun until
// every rank of a 2×4 step is past MPI_Init, for Open MPI (--mpi=pmix) and MPICH (--mpi=pmi2).
import { execFileSync, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { confDir } from "./fixtures.mjs";
import { childOutput, jobrtBin, median, repoRoot, spreadVerdict, table } from "./lib.mjs";
import { allocate, withCluster } from "./slurm-cluster.mjs";

export const name = "mpi";
export const description =
  "bench/mpi-pingpong.c built with mpicc.openmpi (srun --mpi=pmix) and mpicc.mpich (srun --mpi=pmi2), on the two-node local Slurm inside one allocation, alternating bare srun and `srun jobrt exec --runtime none`: 8-byte ping-pong latency (half round trip) and 1 MiB ping-pong bandwidth between two ranks on one node and on the two nodes, and the time from srun's start until the last of 2×4 ranks is past MPI_Init (each rank prints its CLOCK_REALTIME there); `--runtime oci` and Slurm's own `srun --container` where they can run MPI";

const SOURCE = join(repoRoot, "bench/mpi-pingpong.c");
const LAYOUTS = {
  "one node": ["-N", "1", "-n", "2"],
  "two nodes": ["-N", "2", "-n", "2", "--ntasks-per-node=1"],
  // 8 ranks on two 2-CPU nodes: more tasks than CPUs.
  "2×4 ranks": ["-N", "2", "-n", "8", "--ntasks-per-node=4", "--overcommit"],
};
const MPIS = {
  "Open MPI": { mpicc: "mpicc.openmpi", plugin: "pmix" },
  MPICH: { mpicc: "mpicc.mpich", plugin: "pmi2" },
};
const WRAPPERS = {
  "bare srun": (prog) => prog,
  "jobrt none": (prog) => [process.execPath, "--", jobrtBin, "exec", "--runtime", "none", "--", ...prog],
};
// "Within 5 %" of bare srun: latency at most 1.05x, bandwidth at least 1/1.05 of it.
const TARGET = { slowdown: 1.05, init: 1.5 };

/** One step; its parsed output (latency µs, bandwidth MB/s, ms from spawn to the last rank's MPI_Init). */
function step(argv, env, ranks) {
  const startUs = (performance.timeOrigin + performance.now()) * 1000;
  const child = spawn(argv[0], argv.slice(1), { env, stdio: ["ignore", "pipe", "pipe"] });
  // A hung wire-up fails the benchmark instead of holding the cluster (and its lock) for ever.
  const timer = setTimeout(() => child.kill("SIGKILL"), 180_000);
  return childOutput(child).then(({ code, out, err }) => {
    clearTimeout(timer);
    const inits = [...out.matchAll(/^init \d+ (\d+)$/gm)].map((m) => Number(m[1]));
    const pp = /^latency_us ([\d.]+) bandwidth_MBps ([\d.]+)$/m.exec(out);
    if (code !== 0 || inits.length !== ranks)
      throw new Error(
        `${argv.join(" ")} exited ${code} with ${inits.length} of ${ranks} ranks up:\n${err.slice(-1500)}`,
      );
    return {
      initMs: (Math.max(...inits) - startUs) / 1000,
      latencyUs: pp ? Number(pp[1]) : undefined,
      bandwidth: pp ? Number(pp[2]) : undefined,
    };
  });
}

function cases(job, binaries, quick) {
  const iters = quick ? ["50", "5"] : ["5000", "200"];
  const out = [];
  for (const [mpi, { plugin }] of Object.entries(MPIS))
    for (const [layout, args] of Object.entries(LAYOUTS))
      for (const [wrapper, wrap] of Object.entries(WRAPPERS)) {
        const ranks = Number(args[args.indexOf("-n") + 1]);
        const prog = [binaries[mpi], ...(ranks === 2 ? iters : ["0", "0"])];
        // A rank that fails ends the step: its peers would wait in MPI_Init for it for ever.
        const argv = [
          "srun",
          `--jobid=${job}`,
          "--overlap",
          "--kill-on-bad-exit=1",
          `--mpi=${plugin}`,
          ...args,
          ...wrap(prog),
        ];
        out.push({ key: `${mpi}|${layout}|${wrapper}`, argv, ranks });
      }
  return out;
}

function report(results) {
  const med = (key, f) => median(results[key].map(f));
  const rows = [];
  const lines = [];
  for (const mpi of Object.keys(MPIS))
    for (const layout of Object.keys(LAYOUTS)) {
      const base = `${mpi}|${layout}|bare srun`;
      for (const wrapper of Object.keys(WRAPPERS)) {
        const key = `${mpi}|${layout}|${wrapper}`;
        const cell = (f, digits) => {
          const v = med(key, f);
          return v === undefined || Number.isNaN(v) ? "-" : `${v.toFixed(digits)} (${(v / med(base, f)).toFixed(3)})`;
        };
        rows.push([
          mpi,
          layout,
          wrapper,
          cell((x) => x.latencyUs, 2),
          cell((x) => x.bandwidth, 0),
          cell((x) => x.initMs, 0),
        ]);
      }
      // Per round: round i of jobrt against round i of bare srun, which ran next to it.
      const perRound = (f, invert = false) =>
        results[`${mpi}|${layout}|jobrt none`].map((x, i) => {
          const q = f(x) / f(results[base][i]);
          return invert ? 1 / q : q;
        });
      if (layout === "2×4 ranks") {
        lines.push(
          `${mpi}, jobrt none, srun → every rank past MPI_Init, 2×4 ranks, jobrt ÷ bare srun: ${spreadVerdict(
            perRound((x) => x.initMs),
            TARGET.init,
          )}`,
        );
      } else {
        lines.push(
          `${mpi}, jobrt none, ${layout}, latency jobrt ÷ bare srun: ${spreadVerdict(
            perRound((x) => x.latencyUs),
            TARGET.slowdown,
          )}`,
          `${mpi}, jobrt none, ${layout}, bandwidth bare srun ÷ jobrt: ${spreadVerdict(
            perRound((x) => x.bandwidth, true),
            TARGET.slowdown,
          )}`,
        );
      }
    }
  for (const mpi of Object.keys(MPIS))
    rows.push(
      [mpi, "any", "jobrt oci", "not measured", "-", "-"],
      [mpi, "any", "srun --container (Slurm's own)", "not possible today", "-", "-"],
    );
  lines.push(
    "jobrt oci, not measured: the PMI-2 socket and the PMIX_* environment reach each task's container, but MPI runs there only in a bundle with MPI inside that shares the host's network and IPC namespaces (and PID, for Open MPI on one node) and binds the PMIx directories, which this benchmark does not build (docs/mpi.md)",
    "srun --container (Slurm's own), not possible today: Slurm 22.05 documents no MPI for --container and runs one --container task per node (docs/slurm.md)",
  );
  return [
    table(
      [
        "MPI",
        "ranks",
        "step",
        "latency µs (÷ bare)",
        "bandwidth MB/s (÷ bare)",
        "srun → all past MPI_Init ms (÷ bare)",
      ],
      rows,
    ),
    "",
    ...lines,
  ].join("\n");
}

export async function run({ quick, env }) {
  return withCluster(2, env, async ({ env: slurmEnv, dir }) => {
    const binaries = {};
    for (const [mpi, { mpicc }] of Object.entries(MPIS)) {
      binaries[mpi] = join(dir, `pingpong-${mpi === "MPICH" ? "mpich" : "ompi"}`);
      execFileSync(mpicc, ["-O2", "-o", binaries[mpi], SOURCE]);
    }
    // Whole nodes: two ranks on one node need both its CPUs.
    const job = allocate(slurmEnv, 2, ["--exclusive"]);
    // Each node its own SpoolDir, as jobrt requires of a site (docs/slurm.md).
    const conf = confDir();
    writeFileSync(join(conf, "jobrt.conf"), `SpoolDir=${join(conf, "spool", "%n")}\n`);
    const stepEnv = { ...slurmEnv, JOBRT_CONF_DIR: conf };
    try {
      const all = cases(job, binaries, quick);
      const results = Object.fromEntries(all.map((c) => [c.key, []]));
      for (let r = 0; r < (quick ? 1 : 5); r++)
        for (const c of r % 2 ? [...all].reverse() : all) results[c.key].push(await step(c.argv, stepEnv, c.ranks));
      return report(results);
    } finally {
      execFileSync("scancel", [job], { env: slurmEnv });
    }
  });
}
