#!/usr/bin/env node
// pnpm bench [name...] [--quick]: runs the benchmarks (all by default) and prints a markdown table
// per benchmark. Not a test: nothing here fails on a missed target; it says "MISSED".
import { cpus, tmpdir, totalmem } from "node:os";
import { execFileSync } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";

const ALL = [
  "launch-none",
  "launch-oci",
  "oci-user",
  "oci-modes",
  "exit-detection",
  "startup",
  "srun",
  "registry",
  "images",
  "srun-density",
  "mpi",
];
const args = process.argv.slice(2);
const quick = args.includes("--quick");
const names = args.filter((a) => !a.startsWith("--"));
for (const n of names) {
  if (!ALL.includes(n)) {
    console.error(`bench: unknown benchmark ${JSON.stringify(n)} (one of: ${ALL.join(", ")})`);
    process.exit(2);
  }
}
// Every temp dir of the benchmarks (bundles, confs, scripts) goes below one dir of this run, which
// goes when the run ends, also on Ctrl-C; none of them holds a mount.
const runTmp = mkdtempSync(join(tmpdir(), "jobrt-bench-"));
// Searchable by all, as /tmp is: the srun benchmark's munged and slurmd run as their own users.
chmodSync(runTmp, 0o755);
process.env.TMPDIR = runTmp;
process.on("exit", () => rmSync(runTmp, { recursive: true, force: true }));
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(signal, () => process.exit(130));
const env = { ...process.env, TURBO_TELEMETRY_DISABLED: "1" };
let runc = "-";
try {
  runc = execFileSync("runc", ["--version"], { encoding: "utf8" }).split("\n")[0];
} catch {}
console.log(`# jobrt benchmarks${quick ? " (quick)" : ""}\n`);
console.log(
  `${new Date().toISOString()} · ${cpus().length} × ${cpus()[0]?.model ?? "cpu"} · ${(totalmem() / 2 ** 30).toFixed(0)} GiB · Node ${process.version} · ${runc}\n`,
);
let failed = 0;
for (const name of names.length ? names : ALL) {
  const mod = await import(`./${name}.mjs`);
  console.log(`## ${mod.name}\n\n${mod.description}\n`);
  try {
    console.log(`${await mod.run({ quick, env })}\n`);
  } catch (error) {
    failed++;
    console.log(`bench ${name} failed: ${error.message}\n`);
  }
}
process.exit(failed ? 1 : 0);
