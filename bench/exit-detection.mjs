import { compare, fmt, jobrtBin, table, timeOnce, verdict } from "./lib.mjs";
import { CREATE_START_CONF, RUN_MODE_CONF, bundleWithArgs, confDir } from "./fixtures.mjs";

export const name = "exit-detection";
export const description =
  "A container running `sleep S`: lag (wall − S) in create/start mode and run mode, next to bare `runc run`, and the lag Slurm's back-off polling would add";

/** Slurm's post-start polling (runtime-oci.md §3.4): sleeps 5, 10, ... 1280 ms, then 1 s, 2 s alternately. */
export function slurmPollLagMs(durationMs) {
  let t = 0;
  let sleep = 2.5;
  let alternate = 1000;
  for (let poll = 0; poll < 1000; poll++) {
    if (t >= durationMs) return t - durationMs;
    if (sleep < 1280) {
      sleep *= 2;
      t += sleep;
    } else {
      t += alternate;
      alternate = alternate === 1000 ? 2000 : 1000;
    }
  }
  return t - durationMs;
}

export async function run({ quick, env }) {
  const seconds = quick ? 0.2 : 1;
  const runs = quick ? 2 : 6;
  const sleepBundle = bundleWithArgs(["sleep", String(seconds)]);
  const zeroBundle = bundleWithArgs(["sleep", "0"]);
  const createStart = confDir(CREATE_START_CONF);
  const runMode = confDir(RUN_MODE_CONF);
  const jobrt = (conf, s) => () =>
    timeOnce(
      [
        process.execPath,
        "--",
        jobrtBin,
        "run",
        "--runtime",
        "oci",
        "--container",
        s ? sleepBundle : zeroBundle,
        "sleep",
        s ? String(seconds) : "0",
      ],
      {
        env: { ...env, JOBRT_CONF_DIR: conf },
      },
    );
  let id = 0;
  const bare = (s) => () =>
    timeOnce(["runc", "run", "-b", s ? sleepBundle : zeroBundle, `bench-exit-${process.pid}-${id++}`], { env });
  // wall(sleep S) − wall(sleep 0) − S isolates how late the exit is noticed: start-up and
  // teardown costs (node, jobrt, runc) are in both walls and cancel.
  const modes = [
    ["bare runc run", bare(true), bare(false)],
    ["jobrt, run mode (RunTimeRun)", jobrt(runMode, true), jobrt(runMode, false)],
    ["jobrt, create/start mode (supervisor)", jobrt(createStart, true), jobrt(createStart, false)],
  ];
  const rows = [];
  const lags = [];
  for (const [label, withSleep, withoutSleep] of modes) {
    const r = await compare(withSleep, withoutSleep, { runs, warmup: 1 });
    const lag = r.a.median - r.b.median - seconds * 1000;
    lags.push(lag);
    rows.push([label, fmt(r.a.median - seconds * 1000), fmt(r.b.median), fmt(lag)]);
  }
  const extra = lags[2] - lags[0];
  const slurm = [1, 3, 10].map((s) => `${s} s → +${slurmPollLagMs(s * 1000).toFixed(0)} ms`).join(", ");
  return [
    table(
      [
        `container runs sleep ${seconds} s`,
        "wall − S, median ms",
        "wall with sleep 0, median ms",
        "exit-detection lag ms",
      ],
      rows,
    ),
    "",
    `Create/start exit-detection lag beyond bare runc's: ${fmt(extra)} ms (target ≤ 20 ms: ${verdict(extra <= 20)}); run mode: ${fmt(lags[1] - lags[0])} ms.`,
    `Slurm's create/start polling would notice the exit this late (computed from its back-off schedule): ${slurm}.`,
  ].join("\n");
}
