import { spawnSync } from "node:child_process";
import { loadavg } from "node:os";
import { join } from "node:path";
import { fmt, jobrtBin, median, repoRoot, summarize, table, timeOnce, verdict } from "./lib.mjs";
import { CREATE_START_CONF, RUN_MODE_CONF, bundleWithArgs, confDir } from "./fixtures.mjs";

export const name = "oci-modes";
export const description =
  "`jobrt run --container B sleep 1` with a runc oci.conf in create/start mode against the same in run mode, in A B B A order within one run: the extra cost of create/start (Slurm 22.05's own: about +115 ms over its run mode); then each part of create/start timed alone";

/** What create/start may cost over run mode, in ms (Slurm's own difference, measured side by side). */
const TARGET_EXTRA_MS = 115;

const load = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(" ");

/** Set to another checkout's packages/cli/dist/bin.js to time its create/start in the same rounds. */
const BASELINE_VARIABLE = "JOBRT_BENCH_BASELINE_BIN";

export async function run({ quick, env }) {
  const rounds = quick ? 2 : 12;
  const loadBefore = load();
  const bundle = bundleWithArgs(["sleep", "1"]);
  const confs = { run: confDir(RUN_MODE_CONF), cs: confDir(CREATE_START_CONF) };
  const baseline = process.env[BASELINE_VARIABLE];
  const bins = { run: jobrtBin, cs: jobrtBin, ...(baseline ? { base: baseline } : {}) };
  const once = (mode) =>
    timeOnce([process.execPath, "--", bins[mode], "run", "--container", bundle, "sleep", "1"], {
      env: { ...env, JOBRT_CONF_DIR: confs[mode === "base" ? "cs" : mode] },
    });
  const modes = Object.keys(bins);
  for (const mode of modes) await once(mode);
  const samples = Object.fromEntries(modes.map((m) => [m, []]));
  // Per round, a create/start mean minus run mode's: the spread of these is the noise the extra
  // carries (other processes on the machine weigh on both modes of a round alike).
  const extras = Object.fromEntries(modes.map((m) => [m, []]));
  const cpuExtras = Object.fromEntries(modes.map((m) => [m, []]));
  // A B B A (A B C C B A with a baseline): each round is symmetric, so a machine that speeds up
  // or slows down during the round weighs on every mode alike.
  for (let i = 0; i < rounds; i++) {
    const round = Object.fromEntries(modes.map((m) => [m, []]));
    for (const mode of [...modes, ...[...modes].reverse()]) {
      const s = await once(mode);
      samples[mode].push(s);
      round[mode].push(s.ms);
    }
    const mean = (m) => (round[m][0] + round[m][1]) / 2;
    for (const m of modes) extras[m].push(mean(m) - mean("run"));
    const cpu = (m) => (samples[m].at(-1).cpuMs + samples[m].at(-2).cpuMs) / 2;
    for (const m of modes) cpuExtras[m].push(cpu(m) - cpu("run"));
  }
  const sum = Object.fromEntries(modes.map((m) => [m, summarize(samples[m])]));
  const a = sum.cs;
  const b = sum.run;
  const extra = a.median - b.median;
  const spread = (xs) => {
    const sorted = [...xs].sort((x, y) => x - y);
    const q = (p) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
    return `median ${fmt(median(xs))} ms, quartiles ${fmt(q(0.25))}…${fmt(q(0.75))} ms, min-max ${fmt(sorted[0])}…${fmt(sorted[sorted.length - 1])} ms`;
  };
  const parts = await partTimes(quick ? 2 : 8, env);
  const label = { run: "run (RunTimeRun)", cs: "create/start", base: `create/start, ${baseline}` };
  return [
    table(
      ["mode", "median ms", "min-max"],
      modes.map((m) => [label[m], fmt(sum[m].median), `${fmt(sum[m].min)}-${fmt(sum[m].max)}`]),
    ),
    "",
    `create/start ÷ run mode: ${(a.median / b.median).toFixed(3)}; extra ${fmt(extra)} ms (target ≤ ${TARGET_EXTRA_MS} ms: ${verdict(extra <= TARGET_EXTRA_MS)})`,
    `Extra per round (${rounds} rounds): ${spread(extras.cs)}.`,
    ...(baseline
      ? [`Baseline's extra: ${(sum.base.median / b.median).toFixed(3)} × run mode; per round ${spread(extras.base)}.`]
      : []),
    ...(samples.run[0]?.cpuMs !== undefined
      ? [
          `CPU time (user + system of the whole tree, GNU time) over run mode's, per round: create/start ${spread(cpuExtras.cs)}${baseline ? `; baseline ${spread(cpuExtras.base)}` : ""}; run mode's own: median ${fmt(median(samples.run.map((s) => s.cpuMs)))} ms.`,
        ]
      : []),
    `Load average (1/5/15 min) before: ${loadBefore}; after: ${load()}.`,
    "",
    "Each part alone (medians, same run; create/start runs create, state, start, delete and the host's state; run mode runs `runc run` and the host's state):",
    "",
    table(
      ["part", "median ms", "min-max"],
      parts.map(([name, s]) => [name, fmt(s.median), `${fmt(s.min)}-${fmt(s.max)}`]),
    ),
  ].join("\n");
}

/**
 * Times what create/start is made of, each process alone, interleaved round by round: perl's
 * start, perl compiling createstart.pl (the task program), and each runc command on a container
 * of ours, next to `runc run` of the same bundle.
 */
async function partTimes(rounds, env) {
  const bundle = bundleWithArgs(["true"]);
  const program = join(repoRoot, "packages/runtime-oci/dist/createstart.pl");
  const out = new Map();
  // stdio ignored: a created container's init would hold a pipe until it runs.
  const time = (label, argv, code = 0) => {
    const start = process.hrtime.bigint();
    const r = spawnSync(argv[0], argv.slice(1), { env, stdio: "ignore" });
    const ms = Number(process.hrtime.bigint() - start) / 1e6;
    if (r.status !== code) throw new Error(`${argv.join(" ")} exited ${r.status}, expected ${code}`);
    if (!out.has(label)) out.set(label, []);
    out.get(label).push({ ms });
  };
  for (let i = 0; i < rounds; i++) {
    const id = `jobrt-bench-parts-${process.pid}-${i}`;
    time("node -e 0", [process.execPath, "-e", "0"]);
    time("perl -e 0 (createstart.pl's interpreter)", ["perl", "-e", "0"]);
    time("perl -f -c createstart.pl (compiles the task program)", ["perl", "-f", "-c", program]);
    time("runc create", ["runc", "create", id, "-b", bundle]);
    time("runc state", ["runc", "state", id]);
    time("runc start", ["runc", "start", id]);
    time("runc delete", ["runc", "delete", "--force", id]);
    time("runc run (run mode's single command)", ["runc", "run", `${id}-run`, "-b", bundle]);
  }
  return [...out].map(([label, s]) => [label, summarize(s)]);
}
