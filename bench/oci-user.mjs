import { fmt, jobrtBin, pairRatios, rss, spreadVerdict, summarize, table, timeOnce } from "./lib.mjs";
import { bundleWithArgs, confDir } from "./fixtures.mjs";

export const name = "oci-user";
export const description =
  "`jobrt run -n 4 --runtime oci --container B true` launched by root for a job user (`--uid nobody`, rootless runc, a `runc spec --rootless` bundle) against the same step as root (a root bundle), A B B A within one run: what running as the job user costs (issue 24: at most 1.2x)";

const TARGET = 1.2;
const TASKS = "4";

export async function run({ quick, env }) {
  if (process.getuid?.() !== 0) return "skipped: a step for another user needs root";
  const rounds = quick ? 2 : 12;
  const bundles = { user: bundleWithArgs(["true"], { rootless: true }), root: bundleWithArgs(["true"]) };
  const conf = confDir();
  const ids = { user: ["--uid", "nobody", "--gid", "nogroup"], root: [] };
  const once = (who) =>
    timeOnce(
      [process.execPath, "--", jobrtBin, "run", "-n", TASKS, ...ids[who], "-D", "/"].concat([
        "--runtime",
        "oci",
        "--container",
        bundles[who],
        "true",
      ]),
      { env: { ...env, JOBRT_CONF_DIR: conf } },
    );
  await once("user");
  await once("root");
  const samples = { user: [], root: [] };
  for (let i = 0; i < rounds; i++)
    for (const who of ["user", "root", "root", "user"]) samples[who].push(await once(who));
  const r = { a: summarize(samples.user), b: summarize(samples.root) };
  const row = (label, s) => [
    label,
    fmt(s.median),
    `${fmt(s.min)}-${fmt(s.max)}`,
    fmt(s.cpuMedian ?? Number.NaN),
    rss(s.rssKiB),
  ];
  return [
    table(["step", "median ms", "min-max", "CPU median ms", "peak RSS"], [row("--uid nobody", r.a), row("root", r.b)]),
    "",
    `job user over root, per pair of one round: wall ${spreadVerdict(pairRatios(r), TARGET)}`,
    `CPU (user + system of the whole tree): ${spreadVerdict(pairRatios(r, "cpuSamples"), TARGET)}`,
  ].join("\n");
}
