import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { compare, fmt, instructions, jobrtBin, table, timeOnce, verdict } from "./lib.mjs";

export const name = "startup";
export const description =
  "`jobrt exec --runtime none /bin/true` (in a Slurm task's environment, without srun) and `jobrt run --runtime none /bin/true` against `node -e 0`: jobrt's own work per step, wall and CPU time (GNU time) and, with valgrind, instructions";

/** The variables srun gives a task that `jobrt exec` reads (tests/slurm/jobrt-exec.test.ts runs it under a real srun). */
const SLURM_TASK = { SLURM_JOB_ID: "424242", SLURM_STEP_ID: "0", SLURM_PROCID: "0", SLURM_LOCALID: "0", SLURM_NODEID: "0", SLURM_STEP_NUM_TASKS: "1", SLURM_STEP_NUM_NODES: "1" };

const kilo = (n) => (n === undefined ? "-" : `${(n / 1e6).toFixed(1)} M`);

export async function run({ quick, env }) {
  const dir = mkdtempSync(join(tmpdir(), "jobrt-bench-startup-"));
  try {
    writeFileSync(join(dir, "jobrt.conf"), `SpoolDir=${join(dir, "spool")}\n`);
    // NODE_EXTRA_CA_CERTS makes every Node start parse a CA bundle (here 80 % of `node -e 0`'s
    // instructions): the same constant on both sides, and not jobrt's work, so it is left out.
    const base = { ...env, JOBRT_CONF_DIR: dir };
    delete base.NODE_EXTRA_CA_CERTS;
    const execEnv = { ...base, ...SLURM_TASK };
    const jobrtExec = [process.execPath, "--", jobrtBin, "exec", "--runtime", "none", "/bin/true"];
    const jobrtRun = [process.execPath, "--", jobrtBin, "run", "--runtime", "none", "/bin/true"];
    const node0 = [process.execPath, "-e", "0"];
    const runs = quick ? 2 : 20;
    const warmup = quick ? 1 : 3;
    const exec = await compare(() => timeOnce(jobrtExec, { env: execEnv }), () => timeOnce(node0, { env: base }), { runs, warmup });
    const runR = await compare(() => timeOnce(jobrtRun, { env: base }), () => timeOnce(node0, { env: base }), { runs, warmup });
    const ir = { exec: await instructions(jobrtExec, { env: execEnv }), run: await instructions(jobrtRun, { env: base }), node: await instructions(node0, { env: base }) };
    const cpu = (s) => (s.cpuMedian === undefined ? "-" : fmt(s.cpuMedian));
    const row = (label, s, n) => [label, fmt(s.median), `${fmt(s.min)}-${fmt(s.max)}`, cpu(s), kilo(n)];
    const extra = (r) => r.a.median - r.b.median;
    const cpuExtra = (r) => (r.a.cpuMedian === undefined ? "-" : `${fmt(r.a.cpuMedian - r.b.cpuMedian)} ms`);
    const irExtra = (n) => (n === undefined || ir.node === undefined ? "no valgrind: -" : `${kilo(n - ir.node)} instructions (${(n / ir.node).toFixed(2)} × node -e 0)`);
    return [
      table(["command", "median ms", "min-max ms", "CPU median ms", "instructions"], [
        row("jobrt exec --runtime none /bin/true", exec.a, ir.exec),
        row("node -e 0 (rounds of exec)", exec.b, ir.node),
        row("jobrt run --runtime none /bin/true", runR.a, ir.run),
        row("node -e 0 (rounds of run)", runR.b, ir.node),
      ]),
      "",
      `jobrt exec adds ${fmt(extra(exec))} ms wall (target ≤ +15 ms: ${verdict(extra(exec) <= 15)}), ${cpuExtra(exec)} CPU, ${irExtra(ir.exec)} over node -e 0.`,
      `jobrt run adds ${fmt(extra(runR))} ms wall (target ≤ +15 ms: ${verdict(extra(runR) <= 15)}), ${cpuExtra(runR)} CPU, ${irExtra(ir.run)} over node -e 0.`,
    ].join("\n");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
