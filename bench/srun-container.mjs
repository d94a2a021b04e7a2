// The container rows of bench srun: Slurm's own `srun --container` against `jobrt exec --runtime
// oci`, each measured as its extra over the plain step it wraps, inside one allocation.
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { writeFileSync } from "node:fs";
import { fmt, jobrtBin, median, quantile, table, timeOnce } from "./lib.mjs";
import { CREATE_START_CONF, RUN_MODE_CONF, bundleWithArgs, confDir } from "./fixtures.mjs";

// Slurm's own ids (its %n.%u.%j.%s.%t) under their own runc root, apart from jobrt's.
const SLURM_OCI_CONF = `RunTimeQuery="runc --root /run/jobrt-bench-slurm state %n.%u.%j.%s.%t"
RunTimeRun="runc --root /run/jobrt-bench-slurm run %n.%u.%j.%s.%t -b %b"
RunTimeKill="runc --root /run/jobrt-bench-slurm kill -a %n.%u.%j.%s.%t"
RunTimeDelete="runc --root /run/jobrt-bench-slurm delete --force %n.%u.%j.%s.%t"
`;

/** The commands of one round, each a step of job `job` on one node, one task. */
function commands(job, bundle, confs) {
  const step = ["srun", `--jobid=${job}`, "--overlap", "-N", "1", "-n", "1"];
  const jobrt = (conf, ...args) => ({ argv: [...step, process.execPath, "--", jobrtBin, "exec", ...args], conf });
  return {
    plain: { argv: [...step, "/bin/true"] },
    slurm: { argv: [...step, "--container", bundle, "/bin/true"] },
    none: jobrt(confs.none, "--runtime", "none", "/bin/true"),
    ociRun: jobrt(confs.run, "--runtime", "oci", "--container", bundle, "/bin/true"),
    ociCs: jobrt(confs.cs, "--runtime", "oci", "--container", bundle, "/bin/true"),
  };
}

/** An allocation that holds the node while the rounds run; its id. */
function allocate(env) {
  const out = execFileSync("sbatch", ["--parsable", "-N", "1", "--output=/dev/null", "--wrap", "sleep 3600"], {
    env,
    encoding: "utf8",
  });
  const job = out.trim().split(";")[0];
  for (let i = 0; i < 100; i++) {
    const state = execFileSync("squeue", ["-h", "-j", job, "-o", "%T"], { env, encoding: "utf8" }).trim();
    if (state === "RUNNING") return job;
    execFileSync("sleep", ["0.1"]);
  }
  throw new Error(`allocation ${job} did not start`);
}

/** Rounds in A B C D E E D C B A order; per round, each command's mean of its two runs. */
async function rounds(cmds, n, env) {
  const names = Object.keys(cmds);
  const means = Object.fromEntries(names.map((k) => [k, []]));
  const once = (k) =>
    timeOnce(cmds[k].argv, { env: { ...env, ...(cmds[k].conf ? { JOBRT_CONF_DIR: cmds[k].conf } : {}) } });
  for (const k of names) await once(k);
  for (let i = 0; i < n; i++) {
    const ms = Object.fromEntries(names.map((k) => [k, 0]));
    for (const k of [...names, ...[...names].reverse()]) ms[k] += (await once(k)).ms / 2;
    for (const k of names) means[k].push(ms[k]);
  }
  return means;
}

const spread = (xs) => `${fmt(median(xs))} (quartiles ${fmt(quantile(xs, 0.25))}…${fmt(quantile(xs, 0.75))})`;

/** Per round, a's extra over its base minus Slurm's extra over plain srun: ≤ 0 meets the target. */
function verdictOf(m, a, base) {
  const d = m[a].map((x, i) => x - m[base][i] - (m.slurm[i] - m.plain[i]));
  const [q1, q3] = [quantile(d, 0.25), quantile(d, 0.75)];
  const where = q3 <= 0 ? "met" : q1 > 0 ? "MISSED" : "within noise of the target";
  return `${spread(d)} ms over Slurm's extra: ${where}`;
}

export async function containerRows({ quick, env, cluster }) {
  writeFileSync(join(cluster, "oci.conf"), SLURM_OCI_CONF);
  const bundle = bundleWithArgs(["/bin/true"]);
  const confs = { none: confDir(), run: confDir(RUN_MODE_CONF), cs: confDir(CREATE_START_CONF) };
  const job = allocate(env);
  try {
    // 30 rounds: at 10 the per-round differences of two ~50 ms extras spread over ±30 ms.
    const m = await rounds(commands(job, bundle, confs), quick ? 2 : 30, env);
    const row = (label, k, base) => [label, spread(m[k]), base ? spread(m[k].map((x, i) => x - m[base][i])) : "-"];
    const rows = [
      row("srun /bin/true", "plain"),
      row("srun --container B /bin/true (Slurm's own, run mode)", "slurm", "plain"),
      row("srun jobrt exec --runtime none /bin/true", "none"),
      row("srun jobrt exec --runtime oci (run mode)", "ociRun", "none"),
      row("srun jobrt exec --runtime oci (create/start)", "ociCs", "none"),
    ];
    return [
      table(
        ["one task, one node, inside one allocation", "median ms per round", "extra over its plain step, ms"],
        rows,
      ),
      "",
      `jobrt oci run mode, its extra over jobrt none against Slurm's --container extra over srun, per round: ${verdictOf(m, "ociRun", "none")}`,
      `jobrt oci create/start, the same: ${verdictOf(m, "ociCs", "none")}`,
    ].join("\n");
  } finally {
    execFileSync("scancel", [job], { env });
  }
}
