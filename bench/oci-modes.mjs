import { fmt, jobrtBin, summarize, table, timeOnce, verdict } from "./lib.mjs";
import { CREATE_START_CONF, RUN_MODE_CONF, bundleWithArgs, confDir } from "./fixtures.mjs";

export const name = "oci-modes";
export const description =
  "`jobrt run --container B sleep 1` with a runc oci.conf in create/start mode against the same in run mode, in A B B A order within one run: the extra cost of create/start (Slurm 22.05's own: about +115 ms over its run mode)";

/** What create/start may cost over run mode, in ms (Slurm's own difference, measured side by side). */
const TARGET_EXTRA_MS = 115;

export async function run({ quick, env }) {
  const rounds = quick ? 2 : 8;
  const bundle = bundleWithArgs(["sleep", "1"]);
  const confs = { run: confDir(RUN_MODE_CONF), cs: confDir(CREATE_START_CONF) };
  const once = (mode) => timeOnce([process.execPath, "--", jobrtBin, "run", "--container", bundle, "sleep", "1"], { env: { ...env, JOBRT_CONF_DIR: confs[mode] } });
  await once("run");
  await once("cs");
  const samples = { run: [], cs: [] };
  // A B B A: each round is symmetric, so a machine that speeds up or slows down during the round
  // weighs on both modes alike.
  for (let i = 0; i < rounds; i++) {
    for (const mode of ["run", "cs", "cs", "run"]) samples[mode].push(await once(mode));
  }
  const a = summarize(samples.cs);
  const b = summarize(samples.run);
  const extra = a.median - b.median;
  return [
    table(
      ["mode", "median ms", "min-max"],
      [
        ["run (RunTimeRun)", fmt(b.median), `${fmt(b.min)}-${fmt(b.max)}`],
        ["create/start", fmt(a.median), `${fmt(a.min)}-${fmt(a.max)}`],
      ],
    ),
    "",
    `create/start ÷ run mode: ${(a.median / b.median).toFixed(3)}; extra ${fmt(extra)} ms (target ≤ ${TARGET_EXTRA_MS} ms: ${verdict(extra <= TARGET_EXTRA_MS)})`,
  ].join("\n");
}
