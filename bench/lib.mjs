// Shared measurement code for the benchmarks: alternate a command with its baseline (A B A B ...)
// so machine drift cancels, after a warm-up, and report medians, ranges, ratios and peak RSS.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const repoRoot = join(dirname(fileURLToPath(import.meta.url)), "..");
export const jobrtBin = join(repoRoot, "packages/cli/dist/bin.js");
/** The `jobrt` command as installed (package.json "bin"), which runs bin.js (docs/node-step.md). */
export const jobrtEntry = join(repoRoot, "packages/cli/dist/jobrt");
const TIME = "/usr/bin/time";
const VALGRIND = "/usr/bin/valgrind";

/**
 * Runs argv once; returns wall milliseconds and, when GNU time is there, the peak RSS in KiB of
 * the largest process in the tree it waited for (GNU time reports the maximum over children).
 */
export function timeOnce(argv, { env = process.env, cwd = repoRoot, expectCode = 0 } = {}) {
  const useTime = existsSync(TIME);
  const full = useTime ? [TIME, "-f", "JOBRT_BENCH_RSS=%M JOBRT_BENCH_CPU=%U+%S", ...argv] : argv;
  const start = process.hrtime.bigint();
  const child = spawn(full[0], full.slice(1), { env, cwd, stdio: ["ignore", "pipe", "pipe"] });
  return childOutput(child).then(({ code, out, err }) => {
    const ms = Number(process.hrtime.bigint() - start) / 1e6;
    const m = /JOBRT_BENCH_RSS=(\d+)/.exec(err);
    if (code !== expectCode)
      throw new Error(
        `${argv.join(" ")} exited ${code}, expected ${expectCode}:\n${err.slice(-2000)}${out.slice(-500)}`,
      );
    // CPU seconds (user + system) of the tree GNU time waited for: what a run costs the machine,
    // much less sensitive to other load than wall time.
    const cpu = /JOBRT_BENCH_CPU=([\d.]+)\+([\d.]+)/.exec(err);
    return {
      ms,
      rssKiB: m ? Number(m[1]) : undefined,
      cpuMs: cpu ? (Number(cpu[1]) + Number(cpu[2])) * 1000 : undefined,
      stdout: out,
      stderr: err,
    };
  });
}

/** A spawned child's stdout and stderr as text, with its exit code, once it has closed. */
export function childOutput(child) {
  return new Promise((resolve, reject) => {
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => {
      out += d;
    });
    child.stderr.on("data", (d) => {
      err += d;
    });
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, out, err }));
  });
}

export function median(values) {
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

/**
 * Measures `a` against its baseline `b`, alternating them `runs` times after `warmup` rounds.
 * Each of a and b is a function returning a promise of {ms, rssKiB?}.
 */
export async function compare(a, b, { runs = 10, warmup = 2 } = {}) {
  for (let i = 0; i < warmup; i++) {
    await a();
    await b();
  }
  const ra = [];
  const rb = [];
  for (let i = 0; i < runs; i++) {
    // Alternate which goes first too, so neither always runs on a "warm" machine.
    if (i % 2 === 0) {
      ra.push(await a());
      rb.push(await b());
    } else {
      rb.push(await b());
      ra.push(await a());
    }
  }
  return { a: summarize(ra), b: summarize(rb) };
}

export function summarize(samples) {
  const ms = samples.map((s) => s.ms);
  const rss = samples.map((s) => s.rssKiB).filter((v) => v !== undefined);
  const cpu = samples.map((s) => s.cpuMs).filter((v) => v !== undefined);
  return {
    median: median(ms),
    cpuMedian: cpu.length ? median(cpu) : undefined,
    min: Math.min(...ms),
    max: Math.max(...ms),
    n: ms.length,
    rssKiB: rss.length ? Math.max(...rss) : undefined,
    // In measuring order: round i of one comparison pairs with round i of another.
    samples: ms,
    cpuSamples: samples.map((s) => s.cpuMs),
  };
}

/** The q-quantile (0…1) of xs, interpolated. */
export function quantile(xs, q) {
  const s = [...xs].sort((x, y) => x - y);
  const at = (s.length - 1) * q;
  const lo = Math.floor(at);
  return s[lo] + (s[Math.min(lo + 1, s.length - 1)] - s[lo]) * (at - lo);
}

/**
 * A marginal-cost ratio per round: round i's slope of `a` over round i's slope of `b` between two
 * sizes, so one noisy round moves one estimate, not the verdict. Rounds with a slope ≤ 0 drop out.
 * `key`: "samples" (wall ms) or "cpuSamples" (CPU ms of the whole process tree, GNU time's).
 */
export function roundRatios(small, large, sizes, key = "samples") {
  const n = Math.min(small.a[key].length, large.a[key].length, small.b[key].length, large.b[key].length);
  const out = [];
  for (let i = 0; i < n; i++) {
    const a = (large.a[key][i] - small.a[key][i]) / sizes;
    const b = (large.b[key][i] - small.b[key][i]) / sizes;
    // NaN (no GNU time) fails both tests and drops out too.
    if (a > 0 && b > 0) out.push(a / b);
  }
  return out;
}

/** A over B per round of one compare() (each round ran both, in turn): how much a ratio of medians may move. */
export function pairRatios(result, key = "samples") {
  const n = Math.min(result.a[key].length, result.b[key].length);
  const out = [];
  for (let i = 0; i < n; i++)
    if (result.a[key][i] > 0 && result.b[key][i] > 0) out.push(result.a[key][i] / result.b[key][i]);
  return out;
}

/** met / MISSED when the middle half of the estimates is on one side of the target, else within noise. */
export function spreadVerdict(xs, target) {
  if (xs.length === 0) return "n/a (every round's slope ≤ 0: below the noise)";
  const [q1, q2, q3] = [0.25, 0.5, 0.75].map((q) => quantile(xs, q));
  const where = q3 <= target ? "met" : q1 > target ? "MISSED" : "within noise of the target";
  return `median ${q2.toFixed(2)}, quartiles ${q1.toFixed(2)}…${q3.toFixed(2)} over ${xs.length} rounds (target ≤ ${target.toFixed(2)}: ${where})`;
}

/**
 * Instructions executed by argv's own process (not its children), counted by valgrind's callgrind:
 * deterministic to ±0.1 % between runs, so it compares builds on a machine too loaded for wall
 * time. Undefined when valgrind is not installed.
 */
export async function instructions(argv, { env = process.env, cwd = repoRoot } = {}) {
  if (!existsSync(VALGRIND)) return undefined;
  const dir = mkdtempSync(join(tmpdir(), "jobrt-bench-cg-"));
  try {
    const r = await timeOnce([VALGRIND, "--tool=callgrind", `--callgrind-out-file=${join(dir, "out")}`, ...argv], {
      env,
      cwd,
    });
    const m = /Collected : (\d+)/.exec(r.stderr);
    if (!m) throw new Error(`callgrind printed no count for ${argv.join(" ")}`);
    return Number(m[1]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export const fmt = (ms) => (ms >= 100 ? ms.toFixed(0) : ms >= 10 ? ms.toFixed(1) : ms.toFixed(2));
export const ratio = (x, y) => (y > 0 ? (x / y).toFixed(2) : "n/a");
export const rss = (kib) => (kib === undefined ? "-" : `${(kib / 1024).toFixed(1)} MiB`);

/** A markdown table from a header and rows. */
export function table(header, rows) {
  const lines = [`| ${header.join(" | ")} |`, `|${header.map(() => "---").join("|")}|`];
  for (const r of rows) lines.push(`| ${r.join(" | ")} |`);
  return lines.join("\n");
}

export function verdict(ok) {
  return ok ? "met" : "MISSED";
}
