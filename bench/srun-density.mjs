// Issue 36, item 6: how a step's memory grows with its tasks on one node. One allocation, steps of
// N tasks alternating bare srun, jobrt exec --runtime none, --runtime oci and Slurm's own
// --container; the step's peak PSS sampled from /proc while every task runs its payload.
import { execFileSync, spawn } from "node:child_process";
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { bundleWithArgs, confDir } from "./fixtures.mjs";
import { fmt, jobrtEntry, median, spreadVerdict, table } from "./lib.mjs";
import { allocate, withCluster } from "./slurm-cluster.mjs";
import { SLURM_RUN_CONF } from "./srun-container.mjs";
import { commands, pssKiB, stepProcesses } from "./step-pss.mjs";

export const name = "srun-density";
export const description =
  "Steps of N = 1, 8, 32 tasks on one node of the local Slurm, inside one allocation per user, alternating bare srun, `srun jobrt exec --runtime none`, `--runtime oci` and Slurm's own `srun --container`, as root and as a job user (nobody): the step's peak PSS (the sum of /proc/<pid>/smaps_rollup over the processes below its slurmstepd, sampled every 100 ms while every task runs its payload) and the time from srun until every task runs it";

// Every variant runs the same payload. A shell that leaves on SIGTERM: a container's first
// process ignores a signal it has no handler for, so a bare `sleep` there would outlive srun's
// SIGTERM until Slurm's KillWait.
const PAYLOAD = ["sh", "-c", "trap 'kill $!; exit 0' TERM; sleep 600 & wait"];
const USER = ["--uid=65534", "--gid=65534"];
const TARGETS = { none: 1.5, oci: 2 };
const PER_TASK_MIB = 1;

function variants(job, user, bundle, conf) {
  const step = (n) => [
    "srun",
    `--jobid=${job}`,
    ...(user ? USER : []),
    "--overlap",
    "--overcommit",
    "-N",
    "1",
    "-n",
    `${n}`,
  ];
  // The installed command, as users type it: its tasks on a node share one jobrt (docs/node-step.md).
  const jobrt = (n, ...args) => [...step(n), jobrtEntry, "exec", ...args, "--", ...PAYLOAD];
  const out = {
    bare: (n) => [...step(n), ...PAYLOAD],
    none: (n) => jobrt(n, "--runtime", "none"),
    oci: (n) => jobrt(n, "--runtime", "oci", "--container", bundle),
  };
  // Slurm 22.05 runs one --container task per node at most (docs/slurm.md); its oci.conf is root's.
  if (!user) out.slurm = (n) => (n === 1 ? [...step(n), "--container", bundle, ...PAYLOAD] : undefined);
  // The job user cannot write bench/run.mjs's TMPDIR (root's, 0755): slurmstepd would say so per step.
  const path = `${dirname(process.execPath)}:${process.env.PATH ?? "/usr/bin:/bin"}`;
  return { out, conf, env: { JOBRT_CONF_DIR: conf, PATH: path, ...(user ? { TMPDIR: "/tmp" } : {}) } };
}

/** One step: its peak PSS (KiB), the ms until all n payloads ran, then SIGTERM to srun. */
async function measure(argv, env, job, n) {
  const start = performance.now();
  const child = spawn(argv[0], argv.slice(1), { env, stdio: ["ignore", "ignore", "pipe"] });
  let err = "";
  child.stderr.on("data", (d) => {
    err += d;
  });
  let ended = false;
  const exited = new Promise((resolve) => child.on("close", (code) => resolve(code)));
  exited.then(() => {
    ended = true;
  });
  let peak = 0;
  let readyMs;
  // After every payload runs, one more second of samples: Node's heaps settle after start-up.
  while (!ended && (readyMs === undefined || performance.now() - start < readyMs + 1000)) {
    const pids = stepProcesses(job);
    peak = Math.max(
      peak,
      pids.reduce((s, pid) => s + pssKiB(pid), 0),
    );
    if (readyMs === undefined && commands(pids).filter((c) => c === "sleep").length >= n)
      readyMs = performance.now() - start;
    if (performance.now() - start > 120_000) break;
    await delay(100);
  }
  child.kill("SIGTERM");
  await exited;
  if (readyMs === undefined) throw new Error(`${argv.join(" ")}: its ${n} tasks never all ran:\n${err.slice(-1500)}`);
  return { pssKiB: peak, readyMs };
}

async function rounds(sets, sizes, n, env) {
  const results = {};
  const left = {};
  for (let r = 0; r < n; r++) {
    for (const size of sizes) {
      const order = sets.flatMap((s) => Object.keys(s.variants.out).map((v) => [s, v]));
      if (r % 2) order.reverse();
      for (const [s, v] of order) {
        const argv = s.variants.out[v](size);
        if (argv === undefined) continue;
        if (v === "slurm") writeFileSync(join(s.cluster, "oci.conf"), SLURM_RUN_CONF);
        const key = `${s.who}/${v}/${size}`;
        if (!results[key]) results[key] = [];
        results[key].push(await measure(argv, { ...env, ...s.variants.env }, s.job, size));
        if (v === "oci") left[s.who] = (left[s.who] ?? 0) + leftovers(s.variants.conf);
      }
    }
  }
  return { results, left };
}

/**
 * Root's runc containers of the steps whose spool is below `conf` that outlived their step (srun's
 * SIGTERM reaches every process of the step at once), deleted so a later run's ids (which restart
 * with the cluster's job ids) do not collide with them; how many. A job user's rootless runc keeps
 * its state elsewhere and is not looked at.
 */
function leftovers(conf) {
  const list = JSON.parse(execFileSync("runc", ["list", "--format", "json"], { encoding: "utf8" }) || "[]") ?? [];
  const mine = list.filter((c) => c.bundle.startsWith(`${conf}/`));
  for (const c of mine) execFileSync("runc", ["delete", "--force", c.id]);
  return mine.length;
}

const mib = (kib) => (kib / 1024).toFixed(1);

function report(results, sizes, whos) {
  const med = (key, f) => (results[key] ? median(results[key].map(f)) : undefined);
  const rows = [];
  const lines = [];
  const big = sizes.at(-1);
  for (const who of whos)
    for (const v of ["bare", "none", "oci", "slurm"]) {
      if (who === "job user" && v === "slurm") continue;
      for (const size of sizes) {
        const pss = med(`${who}/${v}/${size}`, (x) => x.pssKiB);
        const base = med(`${who}/bare/${size}`, (x) => x.pssKiB);
        if (pss === undefined) {
          rows.push([
            who,
            v,
            `N=${size}`,
            "not possible today: Slurm 22.05 runs one --container task per node",
            "-",
            "-",
          ]);
          continue;
        }
        const ready = med(`${who}/${v}/${size}`, (x) => x.readyMs);
        rows.push([who, v, `N=${size}`, mib(pss), (pss / base).toFixed(2), fmt(ready)]);
      }
    }
  for (const who of whos) {
    for (const v of ["none", "oci"]) {
      // Per round: round i of a step against round i of bare srun's, which ran next to it.
      const at = (size, w = v) => results[`${who}/${w}/${size}`].map((x) => x.pssKiB);
      const ratios = at(big).map((x, i) => x / at(big, "bare")[i]);
      lines.push(`${who}, ${v} at N=${big}, PSS ÷ bare srun's: ${spreadVerdict(ratios, TARGETS[v])}`);
      const perTask = at(big).map((x, i) => (x - at(1)[i]) / (big - 1) / 1024);
      const barePerTask = median(at(big, "bare").map((x, i) => (x - at(1, "bare")[i]) / (big - 1) / 1024));
      lines.push(
        `${who}, ${v}, MiB PSS per task past the first (N=1→${big}): ${spreadVerdict(perTask, PER_TASK_MIB)}; bare srun's ${fmt(barePerTask)} MiB`,
      );
    }
  }
  for (const who of whos)
    for (const v of ["bare", "none", "oci", "slurm"]) {
      const ready = med(`${who}/${v}/1`, (x) => x.readyMs);
      if (ready !== undefined)
        lines.push(
          `${who}, ${v}, N=1: ${fmt(ready)} ms from srun to the task's payload (the "now" of "no slower than now")`,
        );
    }
  return [
    table(["user", "step", "tasks", "peak PSS MiB (median)", "÷ bare srun", "srun → all payloads ms"], rows),
    "",
    ...lines,
  ].join("\n");
}

/** A conf dir whose SpoolDir a job user may make its step dirs in: root's, mode 1777 (docs/slurm.md). */
function userConf() {
  const dir = confDir();
  mkdirSync(join(dir, "spool"));
  chmodSync(join(dir, "spool"), 0o1777);
  return dir;
}

export async function run({ quick, env }) {
  if (process.getuid?.() !== 0) return "skipped: steps for a job user and Slurm's --container need root";
  const sizes = quick ? [1, 2] : [1, 8, 32];
  return withCluster(1, env, async ({ env: slurmEnv, cluster }) => {
    const rootJob = allocate(slurmEnv, 1);
    const userJob = allocate(slurmEnv, 1, USER);
    try {
      const sets = [
        { who: "root", job: rootJob, cluster, variants: variants(rootJob, false, bundleWithArgs(PAYLOAD), confDir()) },
        {
          who: "job user",
          job: userJob,
          cluster,
          variants: variants(userJob, true, bundleWithArgs(PAYLOAD, { rootless: true }), userConf()),
        },
      ];
      const { results, left } = await rounds(sets, sizes, quick ? 1 : 3, slurmEnv);
      const steps = Object.entries(results)
        .filter(([k]) => k.startsWith("root/oci/"))
        .reduce((sum, [, xs]) => sum + xs.length, 0);
      return [
        report(results, sizes, ["root", "job user"]),
        `root, oci: ${left.root ?? 0} runc containers were left (stopped, not deleted) after srun's SIGTERM, over ${steps} steps`,
      ].join("\n");
    } finally {
      execFileSync("scancel", [rootJob, userJob], { env: slurmEnv });
    }
  });
}
