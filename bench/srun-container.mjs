// The container rows of bench srun: Slurm's own `srun --container` (run mode, and create/start
// with the W2 workaround of docs/runtime-oci.md) against `jobrt exec --runtime oci`, each measured
// as its extra over the plain step it wraps, inside one allocation; and the floor under both, the
// runc processes alone (runc-floor.sh) as a step.
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { rmdirSync, writeFileSync } from "node:fs";
import { fmt, jobrtBin, median, quantile, repoRoot, table, timeOnce } from "./lib.mjs";
import { CREATE_START_CONF, RUN_MODE_CONF, bundleWithArgs, confDir } from "./fixtures.mjs";

// Slurm's own ids (its %n.%u.%j.%s.%t) under their own runc root, apart from jobrt's.
const SLURM_RUNC = "runc --root /run/jobrt-bench-slurm";
const SLURM_ID = "%n.%u.%j.%s.%t";
const SLURM_COMMON = `RunTimeQuery="${SLURM_RUNC} state ${SLURM_ID}"
RunTimeKill="${SLURM_RUNC} kill -a ${SLURM_ID}"
RunTimeDelete="${SLURM_RUNC} delete --force ${SLURM_ID}"
`;
export const SLURM_RUN_CONF = `${SLURM_COMMON}RunTimeRun="${SLURM_RUNC} run ${SLURM_ID} -b %b"\n`;
// Slurm reads RunTimeCreate's output until EOF, which a created container's init holds open
// (W2): create's stdio goes to the task's own instead, as runtime-oci.md says works on 22.05.
const SLURM_CS_CONF = `${SLURM_COMMON}RunTimeCreate="${SLURM_RUNC} create ${SLURM_ID} -b %b </dev/null >/proc/$PPID/fd/1 2>/proc/$PPID/fd/2"
RunTimeStart="${SLURM_RUNC} start ${SLURM_ID}"
`;
const FLOOR = join(repoRoot, "bench/runc-floor.sh");

/** The commands of one round, each a step of job `job` on one node, one task. */
function commands(job, bundle, confs, cluster) {
  const step = ["srun", `--jobid=${job}`, "--overlap", "-N", "1", "-n", "1"];
  const jobrt = (conf, ...args) => ({ argv: [...step, process.execPath, "--", jobrtBin, "exec", ...args], conf });
  const slurm = (ociConf) => ({ argv: [...step, "--container", bundle, "/bin/true"], ociConf, cluster });
  const floor = (mode) => ({ argv: [...step, "sh", FLOOR, mode, "/run/jobrt-bench-floor", bundle] });
  return {
    plain: { argv: [...step, "/bin/true"] },
    slurm: slurm(SLURM_RUN_CONF),
    slurmCs: slurm(SLURM_CS_CONF),
    floorRun: floor("run"),
    floorCs: floor("create-start"),
    floorLifecycle: floor("lifecycle"),
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
  const once = (k) => {
    const c = cmds[k];
    // slurmstepd reads oci.conf at each step: the mode of Slurm's next step is the file's now.
    if (c.ociConf) writeFileSync(join(c.cluster, "oci.conf"), c.ociConf);
    return timeOnce(c.argv, { env: { ...env, ...(c.conf ? { JOBRT_CONF_DIR: c.conf } : {}) } });
  };
  for (const k of names) await once(k);
  for (let i = 0; i < n; i++) {
    const ms = Object.fromEntries(names.map((k) => [k, 0]));
    for (const k of [...names, ...[...names].reverse()]) ms[k] += (await once(k)).ms / 2;
    for (const k of names) means[k].push(ms[k]);
  }
  return means;
}

const spread = (xs) => `${fmt(median(xs))} (quartiles ${fmt(quantile(xs, 0.25))}…${fmt(quantile(xs, 0.75))})`;

/** Per round, a's extra over its base minus Slurm's (row `slurm`) over plain srun: ≤ 0 meets the target. */
function verdictOf(m, a, base, slurm = "slurm") {
  const d = m[a].map((x, i) => x - m[base][i] - (m[slurm][i] - m.plain[i]));
  const [q1, q3] = [quantile(d, 0.25), quantile(d, 0.75)];
  const where = q3 <= 0 ? "met" : q1 > 0 ? "MISSED" : "within noise of the target";
  return `${spread(d)} ms over Slurm's extra: ${where}`;
}

/** Per round, a floor's extra over plain srun minus Slurm's run-mode extra: where it lies. */
function floorOf(m, k) {
  const d = m[k].map((x, i) => x - m.slurm[i]);
  const [q1, q3] = [quantile(d, 0.25), quantile(d, 0.75)];
  const where = q1 > 0 ? "above it" : q3 <= 0 ? "below it" : "within noise of it";
  return `${spread(d)} ms: ${where}`;
}

export async function containerRows({ quick, env, cluster }) {
  const bundle = bundleWithArgs(["/bin/true"]);
  const confs = { none: confDir(), run: confDir(RUN_MODE_CONF), cs: confDir(CREATE_START_CONF) };
  const job = allocate(env);
  try {
    // 30 rounds: at 10 the per-round differences of two ~50 ms extras spread over ±30 ms.
    const m = await rounds(commands(job, bundle, confs, cluster), quick ? 2 : 30, env);
    const row = (label, k, base) => [label, spread(m[k]), base ? spread(m[k].map((x, i) => x - m[base][i])) : "-"];
    const rows = [
      row("srun /bin/true", "plain"),
      row("srun --container B /bin/true (Slurm's own, run mode)", "slurm", "plain"),
      row("srun --container B /bin/true (Slurm's own, create/start, W2 worked around)", "slurmCs", "plain"),
      row("srun sh runc-floor.sh run (floor: runc run alone)", "floorRun", "plain"),
      row("srun sh runc-floor.sh create-start (floor: runc create, start, delete alone)", "floorCs", "plain"),
      row(
        "srun sh runc-floor.sh lifecycle (floor: runc create, state, start, delete alone)",
        "floorLifecycle",
        "plain",
      ),
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
      `jobrt oci create/start against Slurm's own create/start: ${verdictOf(m, "ociCs", "none", "slurmCs")}`,
      `the floor of create/start (runc alone, no jobrt), its extra over srun against Slurm's run-mode extra: ${floorOf(m, "floorCs")}`,
      `the same with the state query the create/start lifecycle runs after the create: ${floorOf(m, "floorLifecycle")}`,
      `the floor of run mode, the same: ${floorOf(m, "floorRun")}`,
    ].join("\n");
  } finally {
    execFileSync("scancel", [job], { env });
    // The runc roots this benchmark's steps made; a container left in one keeps it, to be seen.
    for (const root of ["/run/jobrt-bench-slurm", "/run/jobrt-bench-floor"]) {
      try {
        rmdirSync(root);
      } catch {}
    }
  }
}
