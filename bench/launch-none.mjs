import {
  compare,
  fmt,
  jobrtBin,
  pairRatios,
  ratio,
  roundRatios,
  rss,
  spreadVerdict,
  table,
  timeOnce,
  verdict,
} from "./lib.mjs";

export const name = "launch-none";
export const description =
  "jobrt run -n N --runtime none /bin/true (started through its #! line, as a site runs it) against a Node script spawning N processes concurrently";

export async function run({ quick, env }) {
  const sizes = quick ? [1, 4] : [1, 16, 64, 256];
  const runs = quick ? 2 : 10;
  const rows = [];
  const results = new Map();
  for (const n of sizes) {
    const r = await compare(
      () => timeOnce([jobrtBin, "run", "-n", String(n), "--runtime", "none", "/bin/true"], { env }),
      () =>
        timeOnce(
          [process.execPath, new URL("./baseline-spawn.mjs", import.meta.url).pathname, String(n), "/bin/true"],
          { env },
        ),
      { runs, warmup: quick ? 1 : 2 },
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
      rss(r.b.rssKiB),
    ]);
  }
  const first = sizes[0];
  const last = sizes[sizes.length - 1];
  const slope = (key) => (results.get(last)[key].median - results.get(first)[key].median) / (last - first);
  // With tiny N on a busy machine a slope can come out ≤ 0: no ratio then.
  const marginal = slope("a") > 0 && slope("b") > 0 ? slope("a") / slope("b") : undefined;
  const marginalText =
    marginal === undefined
      ? "n/a (a slope ≤ 0: below the noise)"
      : `${marginal.toFixed(2)} (target ≤ 1.25: ${verdict(marginal <= 1.25)})`;
  const cpuSlope = (key) => (results.get(last)[key].cpuMedian - results.get(first)[key].cpuMedian) / (last - first);
  const cpuText =
    results.get(last).a.cpuMedian === undefined
      ? "n/a (no GNU time)"
      : `jobrt ${fmt(cpuSlope("a"))} ms, baseline ${fmt(cpuSlope("b"))} ms, ratio per round: ${spreadVerdict(roundRatios(results.get(first), results.get(last), last - first, "cpuSamples"), 1.25)}`;
  const fixed = results.get(first).a.median / results.get(first).b.median;
  const peak = results.get(last);
  const extraMiB =
    peak.a.rssKiB !== undefined && peak.b.rssKiB !== undefined ? (peak.a.rssKiB - peak.b.rssKiB) / 1024 : undefined;
  const rssText =
    extraMiB === undefined
      ? "n/a (no GNU time)"
      : `+${extraMiB.toFixed(1)} MiB over the baseline's (target ≤ +15 MiB: ${verdict(extraMiB <= 15)})`;
  const out = [
    table(
      [
        "tasks",
        "jobrt median ms",
        "jobrt min-max",
        "baseline median ms",
        "baseline min-max",
        "ratio",
        "jobrt peak RSS",
        "baseline peak RSS",
      ],
      rows,
    ),
    "",
    `Per-task marginal cost (N=${first}→${last}): jobrt ${fmt(slope("a"))} ms, baseline ${fmt(slope("b"))} ms, ratio ${marginalText}`,
    `Per-task marginal CPU (user + system of the whole tree, N=${first}→${last}): ${cpuText}`,
    `Fixed cost (N=${first}): ratio ${fixed.toFixed(2)} (target ≤ 1.25: ${verdict(fixed <= 1.25)}); wall ratio per round: ${spreadVerdict(pairRatios(results.get(first)), 1.25)}; CPU ratio per round: ${results.get(first).a.cpuMedian === undefined ? "n/a (no GNU time)" : spreadVerdict(pairRatios(results.get(first), "cpuSamples"), 1.25)}`,
    `Peak RSS (N=${last}): ${rssText}`,
  ];
  return out.join("\n");
}
