import { join } from "node:path";
import { writeFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { compare, fmt, jobrtBin, ratio, roundRatios, rss, spreadVerdict, table, timeOnce } from "./lib.mjs";
import { bundleWithArgs, confDir } from "./fixtures.mjs";

export const name = "launch-oci";
export const description =
  "jobrt run -n N --runtime oci --container <busybox bundle> /bin/true (no oci.conf: the embedded default, RunTimeRun = runc run) against `runc run` of the same bundle N times concurrently from a shell script";

export async function run({ quick, env }) {
  const sizes = quick ? [1, 2] : [1, 8, 32];
  // Per-round ratios need many rounds: runc's own cost varies ±20 % between rounds here.
  const runs = quick ? 2 : 20;
  const bundle = bundleWithArgs(["/bin/true"]);
  // No oci.conf: the embedded default, RunTimeRun = runc run.
  const conf = confDir();
  const script = join(mkdtempSync(join(tmpdir(), "jobrt-bench-")), "runc-n.sh");
  writeFileSync(
    script,
    `n=$1; b=$2; i=0\nwhile [ $i -lt $n ]; do runc run -b "$b" "bench-$$-$i" </dev/null >/dev/null & i=$((i+1)); done\nwait\n`,
  );
  const rows = [];
  const results = new Map();
  for (const n of sizes) {
    const r = await compare(
      () =>
        timeOnce([jobrtBin, "run", "-n", String(n), "--runtime", "oci", "--container", bundle, "/bin/true"], {
          env: { ...env, JOBRT_CONF_DIR: conf },
        }),
      () => timeOnce(["sh", script, String(n), bundle], { env }),
      { runs, warmup: 1 },
    );
    results.set(n, r);
    rows.push([
      `N=${n}`,
      fmt(r.a.median),
      `${fmt(r.a.min)}-${fmt(r.a.max)}`,
      fmt(r.b.median),
      `${fmt(r.b.min)}-${fmt(r.b.max)}`,
      ratio(r.a.median, r.b.median),
      rss(r.a.rssKiB),
    ]);
  }
  const first = sizes[0];
  const last = sizes[sizes.length - 1];
  const slope = (k) => (results.get(last)[k].median - results.get(first)[k].median) / (last - first);
  const marginalText = spreadVerdict(roundRatios(results.get(first), results.get(last), last - first), 1.1);
  // CPU time hardly moves with other load: the same ratio in CPU, to tell a real difference from noise.
  const cpuSlope = (k) => (results.get(last)[k].cpuMedian - results.get(first)[k].cpuMedian) / (last - first);
  const cpuText =
    results.get(last).a.cpuMedian === undefined
      ? "n/a (no GNU time)"
      : `jobrt ${fmt(cpuSlope("a"))} ms, bare runc ${fmt(cpuSlope("b"))} ms (medians); ratio per round: ${spreadVerdict(roundRatios(results.get(first), results.get(last), last - first, "cpuSamples"), 1.1)}`;
  return [
    table(
      [
        "containers",
        "jobrt median ms",
        "jobrt min-max",
        "runc-run script median ms",
        "script min-max",
        "ratio",
        "jobrt peak RSS",
      ],
      rows,
    ),
    "",
    `Per-container marginal cost (N=${first}→${last}): jobrt ${fmt(slope("a"))} ms, bare runc ${fmt(slope("b"))} ms (medians); ratio per round: ${marginalText}`,
    `Per-container marginal CPU (user + system of the whole tree, N=${first}→${last}): ${cpuText}`,
  ].join("\n");
}
