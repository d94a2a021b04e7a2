#!/usr/bin/env node
// Exit-detection lag of create/start mode: how long after the container's command ends does the
// task end? Compares, in the same run: bare `runc run`, jobrt run mode, jobrt create/start mode,
// and Slurm's create/start polling schedule (docs/runtime-oci.md W3) applied to the measured bare time.
// Needs root, runc, busybox-static and a built repo. Usage: node bench/exit-lag.mjs [runs]
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const repo = fileURLToPath(new URL("../../..", import.meta.url));
const jobrtBin = join(repo, "packages/cli/dist/bin.js");
const runs = Number(process.argv[2] ?? 5);
const work = mkdtempSync(join(tmpdir(), "oci-bench-"));
const bundle = join(work, "bundle");
execFileSync("sh", [join(repo, "scripts/busybox-bundle.sh"), bundle], { stdio: "ignore" });

const ID = "%n.%u.%j.%s.%t";
const R = "runc --root /run/runc";
const confs = {
  run: `RunTimeQuery="${R} state ${ID}"\nRunTimeRun="${R} run ${ID} -b %b"\nRunTimeKill="${R} kill -a ${ID}"\nRunTimeDelete="${R} delete --force ${ID}"\n`,
  "create/start": `RunTimeQuery="${R} state ${ID}"\nRunTimeCreate="${R} create ${ID} -b %b"\nRunTimeStart="${R} start ${ID}"\nRunTimeKill="${R} kill -a ${ID}"\nRunTimeDelete="${R} delete --force ${ID}"\n`,
};
const confDirs = Object.fromEntries(
  Object.entries(confs).map(([mode, text]) => {
    const dir = mkdtempSync(join(work, "conf-"));
    writeFileSync(join(dir, "oci.conf"), text);
    writeFileSync(join(dir, "jobrt.conf"), `SpoolDir=${mkdtempSync(join(work, "spool-"))}\n`);
    return [mode, dir];
  }),
);

/** Slurm's post-start polls (ms after start, docs/runtime-oci.md W3): 0, 5, 15, ... 2555, then +1 s, +2 s, ... */
function slurmDetect(ms) {
  let t = 0;
  let delay = 2.5;
  let long = false;
  for (;;) {
    if (t >= ms) return t;
    if (delay <= 1000) {
      delay *= 2;
      t += delay;
    } else {
      t += long ? 2000 : 1000;
      long = !long;
    }
  }
}

function bare(seconds) {
  const id = `oci-bench-${process.pid}`;
  const cfg = join(bundle, "config.json");
  const config = JSON.parse(execFileSync("cat", [cfg], { encoding: "utf8" }));
  config.process.args = ["sleep", String(seconds)];
  writeFileSync(cfg, JSON.stringify(config));
  const t0 = performance.now();
  spawnSync("runc", ["--root", "/run/runc", "run", "-b", bundle, id], { stdio: "ignore" });
  return performance.now() - t0;
}

function jobrtTask(mode, seconds) {
  const r = spawnSync(process.execPath, [jobrtBin, "run", "--json", "--conf-dir", confDirs[mode], "--container", bundle, "sleep", String(seconds)], { encoding: "utf8" });
  const events = r.stdout.trim().split("\n").map((l) => JSON.parse(l));
  const start = events.find((e) => e.event === "task-start").time;
  const exit = events.find((e) => e.event === "task-exit").time;
  return exit - start;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log(`runs=${runs}; task duration, median ms (task start to task exit)`);
console.log("sleep   bare-runc   run-mode   create/start   slurm-model(c/s)   c/s-vs-bare   slurm-vs-bare");
let fixed = 0;
for (const s of [0, 1, 2.6]) {
  const b = median(Array.from({ length: runs }, () => bare(s)));
  const r = median(Array.from({ length: runs }, () => jobrtTask("run", s)));
  const c = median(Array.from({ length: runs }, () => jobrtTask("create/start", s)));
  if (s === 0) fixed = Math.max(0, c - b);
  // Slurm's first poll after a container that runs b ms, plus the same fixed create/start cost.
  const slurm = slurmDetect(b) + fixed;
  console.log(
    `${String(s).padEnd(6)}  ${b.toFixed(0).padStart(9)}  ${r.toFixed(0).padStart(9)}  ${c.toFixed(0).padStart(13)}  ${slurm.toFixed(0).padStart(17)}  ${(c / b).toFixed(2).padStart(12)}  ${(slurm / b).toFixed(2).padStart(14)}`,
  );
}
