import { execFileSync } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { containerRows } from "./srun-container.mjs";
import { compare, fmt, jobrtBin, repoRoot, table, timeOnce, verdict } from "./lib.mjs";

export const name = "srun";
export const description =
  "`srun -n 2 jobrt exec --runtime none /bin/true` against `srun -n 2 /bin/true` on a local one-node Slurm (scripts/slurm-local.sh); then, inside one allocation, Slurm's own `srun --container` (an oci.conf in the cluster) against `srun jobrt exec --runtime oci` in run and create/start mode, each as extra cost over its own plain step";

const script = join(repoRoot, "scripts/slurm-local.sh");

export async function run({ quick, env }) {
  const dir = mkdtempSync(join(tmpdir(), "jobrt-bench-slurm-"));
  // munged runs as its own user and must reach the cluster dir inside.
  chmodSync(dir, 0o755);
  const runs = quick ? 2 : 10;
  let started = false;
  try {
    execFileSync("sh", [script, "start", "--nodes", "1", "--dir", join(dir, "cluster")], {
      stdio: ["ignore", "ignore", "inherit"],
    });
    started = true;
    const conf = join(dir, "conf");
    execFileSync("mkdir", ["-p", conf]);
    writeFileSync(join(conf, "jobrt.conf"), `SpoolDir=${join(dir, "spool")}\n`);
    const slurmEnv = { ...env, SLURM_CONF: join(dir, "cluster", "slurm.conf"), JOBRT_CONF_DIR: conf };
    const r = await compare(
      () =>
        timeOnce(["srun", "-n", "2", process.execPath, "--", jobrtBin, "exec", "--runtime", "none", "/bin/true"], {
          env: slurmEnv,
        }),
      () => timeOnce(["srun", "-n", "2", "/bin/true"], { env: slurmEnv }),
      { runs, warmup: 1 },
    );
    // The floor of any Node-based task wrapper: starting Node itself, measured in the same run.
    const floor = await compare(
      () => timeOnce(["srun", "-n", "2", process.execPath, "-e", "0"], { env: slurmEnv }),
      () => timeOnce(["srun", "-n", "2", "/bin/true"], { env: slurmEnv }),
      { runs, warmup: 1 },
    );
    const extra = r.a.median - r.b.median;
    const nodeStart = floor.a.median - floor.b.median;
    return [
      table(
        ["command", "median ms", "min-max ms"],
        [
          ["srun -n 2 jobrt exec --runtime none /bin/true", fmt(r.a.median), `${fmt(r.a.min)}-${fmt(r.a.max)}`],
          ["srun -n 2 /bin/true", fmt(r.b.median), `${fmt(r.b.min)}-${fmt(r.b.max)}`],
          [
            "srun -n 2 node -e 0 (floor: Node start-up)",
            fmt(floor.a.median),
            `${fmt(floor.a.min)}-${fmt(floor.a.max)}`,
          ],
        ],
      ),
      "",
      `jobrt exec adds ${fmt(extra)} ms per srun; starting Node alone adds ${fmt(nodeStart)} ms, so jobrt's own work is ${fmt(extra - nodeStart)} ms (target ≤ +15 ms: ${verdict(extra - nodeStart <= 15)}).`,
      "",
      await containerRows({ quick, env: slurmEnv, cluster: join(dir, "cluster") }),
    ].join("\n");
  } finally {
    if (started)
      execFileSync("sh", [script, "stop", "--dir", join(dir, "cluster")], { stdio: ["ignore", "ignore", "inherit"] });
    rmSync(dir, { recursive: true, force: true });
  }
}
