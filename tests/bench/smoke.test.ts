import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { repoRoot, runProgram } from "../helpers/jobrt.js";

// Benchmarks are not tests: this only proves each one starts, measures and prints its table for
// tiny N, so `pnpm bench` keeps working. Targets are not asserted here (machines are noisy).
const expectations: Record<string, RegExp[]> = {
  "launch-none": [
    /\| N=1 \| [\d.]+ \|/,
    /Per-task marginal cost .* ratio ([\d.]+ \(target ≤ 1\.25: (met|MISSED)\)|n\/a \(a slope ≤ 0: below the noise\))/,
    /Fixed cost \(N=1\): ratio [\d.]+ \(target ≤ 1\.25: (met|MISSED)\); wall ratio per round: median [\d.]+, quartiles [\d.]+…[\d.]+ over \d+ rounds .*; CPU ratio per round: /,
    /Peak RSS \(N=4\): \+-?[\d.]+ MiB over the baseline's \(target ≤ \+15 MiB: (met|MISSED)\)/,
    /Per-task marginal CPU \(user \+ system of the whole tree, N=1→4\): jobrt -?[\d.]+ ms, baseline -?[\d.]+ ms, ratio per round: /,
  ],
  "launch-oci": [
    /\| N=1 \| [\d.]+ \|/,
    /Per-container marginal cost .* ratio per round: (median [\d.]+, quartiles [\d.]+…[\d.]+ over \d+ rounds \(target ≤ 1\.10: (met|MISSED|within noise of the target)\)|n\/a)/,
    /Per-container marginal CPU \(user \+ system of the whole tree, N=1→2\): jobrt -?[\d.]+ ms, bare runc -?[\d.]+ ms/,
  ],
  "oci-modes": [
    /\| run \(RunTimeRun\) \| [\d.]+ \|/,
    /\| create\/start \| [\d.]+ \|/,
    /create\/start ÷ run mode: [\d.]+; extra -?[\d.]+ ms \(target ≤ 115 ms: (met|MISSED)\)/,
  ],
  "exit-detection": [
    /\| bare runc run \|/,
    /create\/start mode \(supervisor\) \|/,
    /1 s → \+275 ms, 3 s → \+555 ms, 10 s → \+1555 ms/,
  ],
  startup: [
    /\| jobrt exec --runtime none \/bin\/true \| [\d.]+ \|/,
    /\| jobrt run --runtime none \/bin\/true \| [\d.]+ \|/,
    /jobrt exec adds -?[\d.]+ ms wall \(target ≤ \+15 ms: (met|MISSED)\)/,
    /jobrt run adds -?[\d.]+ ms wall/,
    /\| floor: baseline-spawn\.mjs 1 \/bin\/true \| [\d.]+ \|/,
    /\| runtime \| [\d.]+ \| [\d.]+ \|/,
    /\| spawn \| [\d.]+ \| [\d.]+ \|/,
    /jobrt exec's work beyond it is -?[\d.]+ ms wall/,
  ],
  srun: [
    /\| srun -n 2 jobrt exec --runtime none \/bin\/true \| [\d.]+ \|/,
    /jobrt exec adds -?[\d.]+ ms per srun/,
    /\| srun --container B \/bin\/true \(Slurm's own, run mode\) \| [\d.]+ \(quartiles [\d.]+…[\d.]+\) \| -?[\d.]+ /,
    /\| srun jobrt exec --runtime oci \(create\/start\) \| [\d.]+ \(quartiles/,
    /\| srun --container B \/bin\/true \(Slurm's own, create\/start, W2 worked around\) \| [\d.]+ \(quartiles [\d.]+…[\d.]+\) \| -?[\d.]+ /,
    /\| srun sh runc-floor\.sh lifecycle \(floor: runc create, state, start, delete alone\) \| [\d.]+ \(quartiles/,
    /jobrt oci create\/start against Slurm's own create\/start: -?[\d.]+ \(quartiles -?[\d.]+…-?[\d.]+\) ms over Slurm's extra: (met|MISSED|within noise of the target)/,
    /the floor of create\/start \(runc alone, no jobrt\), its extra over srun against Slurm's run-mode extra: -?[\d.]+ \(quartiles -?[\d.]+…-?[\d.]+\) ms: (above it|below it|within noise of it)/,
    /jobrt oci run mode, its extra over jobrt none against Slurm's --container extra over srun, per round: -?[\d.]+ \(quartiles -?[\d.]+…-?[\d.]+\) ms over Slurm's extra: (met|MISSED|within noise of the target)/,
  ],
  "oci-user": [
    /\| --uid nobody \| [\d.]+ \|/,
    /\| root \| [\d.]+ \|/,
    /job user over root, per pair of one round: wall median [\d.]+, quartiles [\d.]+…[\d.]+ over \d+ rounds \(target ≤ 1\.20: (met|MISSED|within noise of the target)\)/,
  ],
  images: [
    /\| shared squashfs start, node never pulled \| [\d.]+ \|/,
    /\| first start on a job's second node \| [\d.]+ \|/,
    /\| shared squashfs start by digest, node never pulled \| [\d.]+ \|/,
  ],
  "srun-density": [
    /\| root \| bare \| N=1 \| [\d.]+ \| 1\.00 \| [\d.]+ \|/,
    /\| job user \| oci \| N=2 \| [\d.]+ \| [\d.]+ \| [\d.]+ \|/,
    /\| root \| slurm \| N=2 \| not possible today: Slurm 22\.05 runs one --container task per node \|/,
    /root, none at N=2, PSS ÷ bare srun's: median [\d.]+, quartiles [\d.]+…[\d.]+ over 1 rounds \(target ≤ 1\.50: (met|MISSED|within noise of the target)\)/,
    /job user, oci at N=2, PSS ÷ bare srun's: median [\d.]+, .*\(target ≤ 2\.00: (met|MISSED|within noise of the target)\)/,
    /job user, oci, MiB PSS per task past the first \(N=1→2\): median -?[\d.]+, .*\(target ≤ 1\.00: (met|MISSED|within noise of the target)\); bare srun's -?[\d.]+ MiB/,
    /root, none, N=1: [\d.]+ ms from srun to the task's payload/,
    /root, oci: \d+ runc containers were left \(stopped, not deleted\) after srun's SIGTERM, over 2 steps/,
  ],
  mpi: [
    /\| Open MPI \| two nodes \| jobrt none \| [\d.]+ \([\d.]+\) \| [\d.]+ \([\d.]+\) \| [\d.]+ \([\d.]+\) \|/,
    /\| MPICH \| one node \| bare srun \| [\d.]+ \(1\.000\) \| [\d.]+ \(1\.000\) \|/,
    /\| MPICH \| 2×4 ranks \| jobrt none \| - \| - \| [\d.]+ \([\d.]+\) \|/,
    /MPICH, jobrt none, two nodes, latency jobrt ÷ bare srun: median [\d.]+, .*\(target ≤ 1\.05: (met|MISSED|within noise of the target)\)/,
    /Open MPI, jobrt none, one node, bandwidth bare srun ÷ jobrt: median [\d.]+, .*\(target ≤ 1\.05: (met|MISSED|within noise of the target)\)/,
    /Open MPI, jobrt none, srun → every rank past MPI_Init, 2×4 ranks, jobrt ÷ bare srun: median [\d.]+, .*\(target ≤ 1\.50: (met|MISSED|within noise of the target)\)/,
    /jobrt oci, not measured: the PMI-2 socket and the PMIX_\* environment reach each task's container/,
    /srun --container \(Slurm's own\), not possible today: /,
  ],
  registry: [
    /\| load of an already-loaded runtime \| 1000 \| [\d.]+ \|/,
    /100 heterogeneous components over 3 runtimes/,
  ],
};

describe("bench smoke", () => {
  it.each(Object.keys(expectations))(
    "%s runs and prints its table",
    async (name) => {
      const r = await runProgram([process.execPath, join(repoRoot, "bench/run.mjs"), name, "--quick"], {
        timeoutMs: 240_000,
      });
      expect(r.stdout).not.toContain("failed:");
      expect(r.code).toBe(0);
      expect(r.stdout).toContain(`## ${name}`);
      for (const re of expectations[name]!) expect(r.stdout).toMatch(re);
    },
    300_000,
  );

  it("runc-floor.sh parses (sh -n) and refuses an unknown mode with exit 2, running nothing", async () => {
    const floor = join(repoRoot, "bench/runc-floor.sh");
    const parse = await runProgram(["sh", "-n", floor]);
    expect(parse.stderr).toBe("");
    expect(parse.code).toBe(0);
    const r = await runProgram(["sh", floor, "nope", "/nonexistent/runc-root", "/nonexistent/bundle"]);
    expect(r.stderr).toBe("runc-floor.sh: unknown mode nope\n");
    expect(r.code).toBe(2);
  });

  it("refuses an unknown benchmark", async () => {
    const r = await runProgram([process.execPath, join(repoRoot, "bench/run.mjs"), "nope"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      'bench: unknown benchmark "nope" (one of: launch-none, launch-oci, oci-user, oci-modes, exit-detection, startup, srun, registry, images, srun-density, mpi)\n',
    );
  });
});
