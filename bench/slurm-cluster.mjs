// A local Slurm (scripts/slurm-local.sh) for one benchmark, held under the lock tests/slurm/cluster.ts
// takes, so a benchmark waits for the Slurm tests of a run on the same machine instead of failing
// on the cluster they hold (the cluster's namespaces and ports are machine-wide).
import { execFileSync, spawn } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { repoRoot } from "./lib.mjs";

const script = join(repoRoot, "scripts/slurm-local.sh");
// tests/slurm/cluster.ts's file: its tmpdir() there is /tmp; bench/run.mjs moves TMPDIR per run.
const LOCK = "/tmp/jobrt-slurm-e2e.lock";

function lock() {
  const holder = spawn("flock", ["-x", LOCK, "-c", "echo locked; exec cat >/dev/null"], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  return new Promise((resolve, reject) => {
    holder.once("error", reject);
    holder.once("exit", (code) => reject(new Error(`flock ${LOCK} exited ${code} before taking the lock`)));
    holder.stdout.once("data", () => resolve(holder));
  });
}

/** Runs `body({env, cluster, dir})` on a fresh local cluster of `nodes` nodes, then stops it. */
export async function withCluster(nodes, env, body) {
  const holder = await lock();
  const dir = mkdtempSync(join(tmpdir(), "jobrt-bench-slurm-"));
  // munged runs as its own user and must reach the cluster dir inside.
  chmodSync(dir, 0o755);
  const cluster = join(dir, "cluster");
  let started = false;
  try {
    execFileSync("sh", [script, "start", "--nodes", String(nodes), "--dir", cluster], {
      stdio: ["ignore", "ignore", "inherit"],
    });
    started = true;
    return await body({ env: { ...env, SLURM_CONF: join(cluster, "slurm.conf") }, cluster, dir });
  } finally {
    try {
      if (started) execFileSync("sh", [script, "stop", "--dir", cluster], { stdio: ["ignore", "ignore", "inherit"] });
    } finally {
      rmSync(dir, { recursive: true, force: true });
      holder.stdin.end();
    }
  }
}

/** An allocation of `nodes` nodes that holds them while the rounds run (`sbatch` options `opts`); its id. */
export function allocate(env, nodes, opts = []) {
  const out = execFileSync(
    "sbatch",
    ["--parsable", "-N", String(nodes), ...opts, "--output=/dev/null", "--wrap", "sleep 3600"],
    { env, encoding: "utf8" },
  );
  const job = out.trim().split(";")[0];
  for (let i = 0; i < 300; i++) {
    const state = execFileSync("squeue", ["-h", "-j", job, "-o", "%T"], { env, encoding: "utf8" }).trim();
    if (state === "RUNNING") return job;
    execFileSync("sleep", ["0.1"]);
  }
  throw new Error(`allocation ${job} did not start`);
}
