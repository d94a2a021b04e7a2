import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { compare, fmt, instructions, jobrtBin, median, table, timeOnce, verdict } from "./lib.mjs";

export const name = "startup";
export const description =
  "`jobrt exec --runtime none /bin/true` (in a Slurm task's environment, without srun) and `jobrt run --runtime none /bin/true` against `node -e 0`, and the floor any Node launcher pays (bench/baseline-spawn.mjs starting one /bin/true): wall and CPU time (GNU time), instructions with valgrind, and where jobrt's time goes by phase (JOBRT_TIMINGS=1)";

/** The variables srun gives a task that `jobrt exec` reads (tests/slurm/jobrtexec.test.ts runs it under a real srun). */
const SLURM_TASK = {
  SLURM_JOB_ID: "424242",
  SLURM_STEP_ID: "0",
  SLURM_PROCID: "0",
  SLURM_LOCALID: "0",
  SLURM_NODEID: "0",
  SLURM_STEP_NUM_TASKS: "1",
  SLURM_STEP_NUM_NODES: "1",
};

const kilo = (n) => (n === undefined ? "-" : `${(n / 1e6).toFixed(1)} M`);

/** The phases of JOBRT_TIMINGS=1's line, as [name, ms] pairs. */
function phasesOf(stderr) {
  const m = /jobrt: timings \(ms since start\): (.*); total ([\d.]+)/.exec(stderr);
  if (!m) throw new Error(`no timings line in: ${stderr.slice(-500)}`);
  return [
    ...m[1]
      .split(", ")
      .map((p) => p.split(" "))
      .map(([n, ms]) => [n, Number(ms)]),
    ["total", Number(m[2])],
  ];
}

/** Median ms per phase over `runs` runs of argv with JOBRT_TIMINGS=1 (separate rounds: the timed ones run without it). */
async function phaseMedians(argv, env, runs) {
  const samples = [];
  for (let i = 0; i < runs; i++)
    samples.push(phasesOf((await timeOnce(argv, { env: { ...env, JOBRT_TIMINGS: "1" } })).stderr));
  return new Map(samples[0].map(([n], i) => [n, median(samples.map((s) => s[i][1]))]));
}

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
    // The least a launcher written in Node does: load an ES module that imports child_process,
    // start one program, wait for it.
    const floor = [process.execPath, new URL("./baseline-spawn.mjs", import.meta.url).pathname, "1", "/bin/true"];
    const runs = quick ? 2 : 20;
    const warmup = quick ? 1 : 3;
    const exec = await compare(
      () => timeOnce(jobrtExec, { env: execEnv }),
      () => timeOnce(node0, { env: base }),
      { runs, warmup },
    );
    const runR = await compare(
      () => timeOnce(jobrtRun, { env: base }),
      () => timeOnce(node0, { env: base }),
      { runs, warmup },
    );
    // The node log's two lines (NodeLog=syslog by default; the sender starts whether or not a log
    // daemon listens) against none at all.
    const offDir = join(dir, "nodelog-off");
    mkdirSync(offDir);
    writeFileSync(join(offDir, "jobrt.conf"), `SpoolDir=${join(dir, "spool")}\nNodeLog=off\n`);
    const nodeLog = await compare(
      () => timeOnce(jobrtExec, { env: execEnv }),
      () => timeOnce(jobrtExec, { env: { ...execEnv, JOBRT_CONF_DIR: offDir } }),
      { runs, warmup },
    );
    const floorR = await compare(
      () => timeOnce(floor, { env: base }),
      () => timeOnce(node0, { env: base }),
      { runs, warmup },
    );
    const ir = {
      exec: await instructions(jobrtExec, { env: execEnv }),
      run: await instructions(jobrtRun, { env: base }),
      node: await instructions(node0, { env: base }),
      floor: await instructions(floor, { env: base }),
    };
    const phases = {
      exec: await phaseMedians(jobrtExec, execEnv, runs),
      run: await phaseMedians(jobrtRun, base, runs),
    };
    const cpu = (s) => (s.cpuMedian === undefined ? "-" : fmt(s.cpuMedian));
    const row = (label, s, n) => [label, fmt(s.median), `${fmt(s.min)}-${fmt(s.max)}`, cpu(s), kilo(n)];
    const extra = (r) => r.a.median - r.b.median;
    const cpuExtra = (r) => (r.a.cpuMedian === undefined ? "-" : `${fmt(r.a.cpuMedian - r.b.cpuMedian)} ms`);
    const irExtra = (n) =>
      n === undefined || ir.node === undefined
        ? "no valgrind: -"
        : `${kilo(n - ir.node)} instructions (${(n / ir.node).toFixed(2)} × node -e 0)`;
    return [
      table(
        ["command", "median ms", "min-max ms", "CPU median ms", "instructions"],
        [
          row("jobrt exec --runtime none /bin/true", exec.a, ir.exec),
          row("node -e 0 (rounds of exec)", exec.b, ir.node),
          row("jobrt run --runtime none /bin/true", runR.a, ir.run),
          row("node -e 0 (rounds of run)", runR.b, ir.node),
          row("jobrt exec, NodeLog=off (rounds of the node log)", nodeLog.b),
          row("jobrt exec, NodeLog=syslog (rounds of the node log)", nodeLog.a),
          row("floor: baseline-spawn.mjs 1 /bin/true", floorR.a, ir.floor),
          row("node -e 0 (rounds of the floor)", floorR.b, ir.node),
        ],
      ),
      "",
      `Where the time goes (JOBRT_TIMINGS=1, median ms of ${runs} runs each; "node" is Node's own bootstrap, the rest is jobrt's; docs/performance.md names each phase):`,
      "",
      table(
        ["phase", "jobrt exec", "jobrt run"],
        [...phases.exec.keys()].map((p) => [
          p,
          fmt(phases.exec.get(p)),
          phases.run.has(p) ? fmt(phases.run.get(p)) : "-",
        ]),
      ),
      "",
      `jobrt exec adds ${fmt(extra(exec))} ms wall (target ≤ +15 ms: ${verdict(extra(exec) <= 15)}), ${cpuExtra(exec)} CPU, ${irExtra(ir.exec)} over node -e 0.`,
      `jobrt run adds ${fmt(extra(runR))} ms wall (target ≤ +15 ms: ${verdict(extra(runR) <= 15)}), ${cpuExtra(runR)} CPU, ${irExtra(ir.run)} over node -e 0.`,
      `The node log (two lines, one perl sender started and not waited for) adds ${fmt(extra(nodeLog))} ms wall, ${cpuExtra(nodeLog)} CPU to jobrt exec.`,
      `The floor adds ${fmt(extra(floorR))} ms wall, ${cpuExtra(floorR)} CPU, ${irExtra(ir.floor)} over node -e 0: jobrt exec's work beyond it is ${fmt(extra(exec) - extra(floorR))} ms wall.`,
    ].join("\n");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
