import { spawn } from "node:child_process";
import { chmodSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { busyboxBundle } from "../helpers/fixtures.js";
import { jobrtBin, runProgram, tempDir } from "../helpers/jobrt.js";
import {
  jobrtSite,
  type JobrtSite,
  listTree,
  removeRuncContainers,
  runcContainers,
  slurm,
  slurmEnv,
  sortedLines,
  startCluster,
  stopClusterAfterAll,
  waitFor,
  withoutAllocation,
} from "./cluster.js";

// `srun ... jobrt exec ...` on the two-node local Slurm: Slurm distributes the tasks, each task is
// one `jobrt exec` process running its task through a runtime (none, or oci with real runc).

describe("jobrt exec as the task of a Slurm step", () => {
  let site: JobrtSite;
  let bundle: string;
  const temps: string[] = [];
  const tmp = (prefix: string) => {
    const dir = tempDir(prefix);
    temps.push(dir);
    return dir;
  };

  beforeAll(async () => {
    site = jobrtSite();
    temps.push(site.root);
    bundle = busyboxBundle(join(tmp("jobrt-slurm-bundle-"), "bundle"));
    await startCluster(2);
  });
  stopClusterAfterAll(async () => {
    // A runtime that failed its cleanup may leave containers no Slurm process tracks any more.
    if (site && bundle) removeRuncContainers([bundle, site.spoolRoot]);
    for (const dir of temps) rmSync(dir, { recursive: true, force: true });
  });

  const srun = (args: string[], env: Record<string, string> = {}, timeoutMs = 90_000) =>
    slurm(["srun", ...args], { env: { ...site.env, ...env }, timeoutMs });

  // Containers of this file's jobs: their bundle is the test bundle or a task dir in a SpoolDir.
  const ourContainers = () => runcContainers([bundle, site.spoolRoot]);

  /** SpoolDir entries named after the job (oci's step dir is oci-job<J>-<S>). */
  const jobSpool = (jobId: string) => {
    const mentions = new RegExp(`(^|\\D)${jobId}(\\D|$)`);
    return listTree(site.spoolRoot).filter((p) => mentions.test(p));
  };
  /** What a finished job left in any node's SpoolDir: any file, or anything named after the job. */
  const spoolLeftovers = (jobId: string) => [
    ...new Set([...listTree(site.spoolRoot).filter((p) => !p.endsWith("/")), ...jobSpool(jobId)]),
  ];

  it("srun -n 4 jobrt exec --runtime none prints SLURM_PROCID 0-3", async () => {
    const r = await srun(["-n", "4", "jobrt", "exec", "--runtime", "none", "--", "sh", "-c", "echo $SLURM_PROCID"]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(sortedLines(r.stdout)).toEqual(["0", "1", "2", "3"]);
  });

  it("srun -N 2 -n 4 spreads jobrt exec tasks over both nodes", async () => {
    const r = await srun([
      "-N",
      "2",
      "-n",
      "4",
      "jobrt",
      "exec",
      "--runtime",
      "none",
      "--",
      "sh",
      "-c",
      'echo "$SLURM_PROCID $SLURMD_NODENAME $(hostname)"',
    ]);
    expect(r.code).toBe(0);
    const lines = sortedLines(r.stdout);
    expect(lines.map((l) => l.split(" ")[0])).toEqual(["0", "1", "2", "3"]);
    const nodes = new Set(lines.map((l) => l.split(" ")[1]));
    expect(nodes).toEqual(new Set(["nodea", "nodeb"]));
    // nodeb is its own host (UTS namespace): its tasks see its hostname, not this machine's.
    expect(lines.filter((l) => l.endsWith(" nodeb nodeb"))).toHaveLength(2);
  });

  it("the exit status 3 of one task is srun's exit status (runtime none)", async () => {
    const r = await srun([
      "-n",
      "2",
      "jobrt",
      "exec",
      "--runtime",
      "none",
      "--",
      "sh",
      "-c",
      '[ "$SLURM_PROCID" = 1 ] && exit 3; exit 0',
    ]);
    // srun's own failure line, and none from jobrt exec.
    expect(withoutAllocation(r.stderr)).toMatch(/^srun: error: node[ab]: task 1: Exited with exit code 3\n$/);
    expect(r.code).toBe(3);
  });

  it("the exit status 3 of one containerised task is srun's exit status (runtime oci)", async () => {
    const r = await srun([
      "-n",
      "2",
      "jobrt",
      "exec",
      "--runtime",
      "oci",
      "--container",
      bundle,
      "--",
      "sh",
      "-c",
      '[ "$SLURM_PROCID" = 1 ] && exit 3; exit 0',
    ]);
    expect(withoutAllocation(r.stderr)).toMatch(/^srun: error: node[ab]: task 1: Exited with exit code 3\n$/);
    expect(r.code).toBe(3);
    expect(ourContainers()).toEqual([]);
  });

  it("jobrt run's failure lines are srun's for the same tasks; under srun, jobrt exec prints none (srun does)", async () => {
    // One outcome per task, so srun's grouping (by when slurmstepd reaps the tasks) cannot differ.
    const argv = [
      "sh",
      "-c",
      "case $SLURM_PROCID in 0) exit 3;; 1) kill -TERM $$;; 2) kill -USR1 $$;; 3) exit 0;; esac",
    ];
    const plain = await srun(["-N", "1", "-w", "nodea", "-n", "4", "--overcommit", ...argv]);
    expect(plain.code).toBe(143);
    // srun may also say the job waited for the node (the previous job still completing).
    const errors = (text: string) => sortedLines(text).filter((l) => l.startsWith("srun: error: "));
    const srunLines = [
      "srun: error: nodea: task 0: Exited with exit code 3",
      "srun: error: nodea: task 1: Terminated",
      "srun: error: nodea: task 2: User defined signal 1",
    ];
    expect(errors(plain.stderr)).toEqual(srunLines);
    // And that it ended the step once a signal had ended a task.
    expect(plain.stderr).toMatch(/^srun: Force Terminated StepId=\d+\.0$/m);
    // jobrt exec exits with its task's status, 128+N for a task signal N ended (it is not itself
    // killed by the signal), so srun words those as exit codes.
    const exec = await srun([
      "-N",
      "1",
      "-w",
      "nodea",
      "-n",
      "4",
      "--overcommit",
      "jobrt",
      "exec",
      "--runtime",
      "none",
      "--",
      ...argv,
    ]);
    expect(exec.code).toBe(143);
    expect(exec.stderr).not.toMatch(/^jobrt/m);
    expect(errors(exec.stderr)).toEqual([
      "srun: error: nodea: task 0: Exited with exit code 3",
      "srun: error: nodea: task 1: Exited with exit code 143",
      "srun: error: nodea: task 2: Exited with exit code 138",
    ]);
    const conf = tmp("jobrt-slurm-run-");
    writeFileSync(join(conf, "jobrt.conf"), `SpoolDir=${join(conf, "spool")}\nNodeName=nodea\n`);
    const run = await runProgram([process.execPath, "--", jobrtBin, "run", "-n", "4", "--runtime", "none", ...argv], {
      env: { ...process.env, JOBRT_CONF_DIR: conf },
    });
    expect(run.code).toBe(143);
    expect(run.stderr.replace(/^jobrt: /gm, "srun: ")).toBe(`${srunLines.join("\n")}\n`);
  });

  it("a heterogeneous step: srun numbers tasks within each component, and jobrt run's lines say the same", async () => {
    const components = ["-n", "1", "sh", "-c", "exit 3", ":", "-n", "2", "sh", "-c", "exit $((SLURM_PROCID + 4))"];
    const plain = await srun(components);
    expect(plain.code).toBe(6);
    // Components run on different nodes; jobrt run has one. Compare with the node names left out.
    const lines = (text: string) =>
      sortedLines(
        text
          .replace(/^(srun|jobrt): error: [^:]+: /gm, "error: N: ")
          .split("\n")
          .filter((l) => l.startsWith("error: "))
          .join("\n"),
      );
    expect(lines(plain.stderr)).toEqual([
      "error: N: task 0: Exited with exit code 3",
      "error: N: task 0: Exited with exit code 5",
      "error: N: task 1: Exited with exit code 6",
    ]);
    const conf = tmp("jobrt-slurm-run-");
    writeFileSync(join(conf, "jobrt.conf"), `SpoolDir=${join(conf, "spool")}\n`);
    const run = await runProgram(
      [
        process.execPath,
        "--",
        jobrtBin,
        "run",
        "--runtime",
        "none",
        ...components.slice(0, 6),
        "--runtime",
        "none",
        ...components.slice(6),
      ],
      {
        env: { ...process.env, JOBRT_CONF_DIR: conf },
      },
    );
    expect(run.code).toBe(6);
    expect(lines(run.stderr)).toEqual(lines(plain.stderr));
  });

  it("srun -n 2 jobrt exec --runtime oci --container <bundle> reads a file only the bundle has", async () => {
    const r = await srun([
      "-n",
      "2",
      "jobrt",
      "exec",
      "--runtime",
      "oci",
      "--container",
      bundle,
      "--",
      "sh",
      "-c",
      'echo "$SLURM_JOB_ID $SLURM_PROCID $(cat /etc/jobrt-image)"',
    ]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const lines = sortedLines(r.stdout);
    const jobId = (lines[0] ?? "").split(" ")[0] as string;
    expect(jobId).toMatch(/^\d+$/);
    expect(lines).toEqual([`${jobId} 0 jobrt-busybox-image`, `${jobId} 1 jobrt-busybox-image`]);
    expect(ourContainers()).toEqual([]);
    expect(spoolLeftovers(jobId)).toEqual([]);
  });

  it("two jobrt exec processes of one step on one node: shared setup, and one task's cleanup spares the other's container", async () => {
    // Task 0 ends at once, so its cleanup runs while task 1's container still runs.
    const r = await srun([
      "-N",
      "1",
      "-n",
      "2",
      "jobrt",
      "exec",
      "--runtime",
      "oci",
      "--container",
      bundle,
      "--",
      "sh",
      "-c",
      'if [ "$SLURM_PROCID" = 1 ]; then sleep 2; echo "$SLURM_JOB_ID survived"; else echo "$SLURM_JOB_ID quick"; fi',
    ]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const lines = sortedLines(r.stdout);
    const jobId = (lines[0] ?? "").split(" ")[0] as string;
    expect(lines).toEqual([`${jobId} quick`, `${jobId} survived`]);
    expect(ourContainers()).toEqual([]);
    expect(spoolLeftovers(jobId)).toEqual([]);
  });

  it("a heterogeneous step runs each component through its own runtime, one per node", async () => {
    const r = await srun([
      "-n1",
      "jobrt",
      "exec",
      "--runtime",
      "none",
      "--",
      "sh",
      "-c",
      'echo "none $SLURMD_NODENAME $(cat /etc/jobrt-image 2>/dev/null || echo host-fs)"',
      ":",
      "-n1",
      "jobrt",
      "exec",
      "--runtime",
      "oci",
      "--container",
      bundle,
      "--",
      "sh",
      "-c",
      'echo "oci $SLURMD_NODENAME $(cat /etc/jobrt-image 2>/dev/null || echo host-fs)"',
    ]);
    expect(r.code).toBe(0);
    const lines = sortedLines(r.stdout);
    expect(lines).toHaveLength(2);
    const [none, oci] = [lines.find((l) => l.startsWith("none ")), lines.find((l) => l.startsWith("oci "))];
    expect(none).toMatch(/^none node[ab] host-fs$/);
    expect(oci).toMatch(/^oci node[ab] jobrt-busybox-image$/);
    expect(none?.split(" ")[1]).not.toBe(oci?.split(" ")[1]);
    expect(ourContainers()).toEqual([]);
  });

  it("the runtime comes from --runtime, else SLURM_RUNTIME / SRUN_RUNTIME", async () => {
    const read = ["--", "sh", "-c", "cat /etc/jobrt-image 2>/dev/null || echo host-fs"];
    const fromSlurm = await srun(["-n1", "jobrt", "exec", "--container", bundle, ...read], { SLURM_RUNTIME: "oci" });
    expect(fromSlurm.stdout.trim()).toBe("jobrt-busybox-image");
    const fromSrun = await srun(["-n1", "jobrt", "exec", "--container", bundle, ...read], { SRUN_RUNTIME: "oci" });
    expect(fromSrun.stdout.trim()).toBe("jobrt-busybox-image");
    const flagWins = await srun(["-n1", "jobrt", "exec", "--runtime", "none", "--container", bundle, ...read], {
      SLURM_RUNTIME: "oci",
    });
    expect(flagWins.stdout.trim()).toBe("host-fs");
    expect(ourContainers()).toEqual([]);
  });

  it("sbatch --wait: a batch script whose steps use jobrt exec on both nodes", async () => {
    const dir = tmp("jobrt-slurm-batch-");
    const script = join(dir, "job.sh");
    writeFileSync(
      script,
      [
        "#!/bin/sh",
        "#SBATCH -N 2 -n 2",
        `srun -n 2 jobrt exec --runtime none -- sh -c 'echo "none $SLURM_STEP_ID $SLURMD_NODENAME"'`,
        `srun -n 2 jobrt exec --runtime oci --container '${bundle}' -- sh -c 'echo "oci $SLURM_STEP_ID $SLURMD_NODENAME $(cat /etc/jobrt-image)"'`,
        `srun -N 1 -n 1 jobrt exec --runtime oci --container '${bundle}' -- sh -c 'exit 5'`,
        "exit $?",
        "",
      ].join("\n"),
    );
    const r = await slurm(["sbatch", "--wait", "-o", join(dir, "out.txt"), "-e", join(dir, "err.txt"), script], {
      env: site.env,
    });
    const out = readFileSync(join(dir, "out.txt"), "utf8");
    expect(sortedLines(out)).toEqual([
      "none 0 nodea",
      "none 0 nodeb",
      "oci 1 nodea jobrt-busybox-image",
      "oci 1 nodeb jobrt-busybox-image",
    ]);
    expect(readFileSync(join(dir, "err.txt"), "utf8")).not.toMatch(/^jobrt:/m);
    expect(r.code).toBe(5);
    expect(ourContainers()).toEqual([]);
  });

  it("sbatch --wait: a heterogeneous batch job, one component through none and one through oci", async () => {
    const dir = tmp("jobrt-slurm-hetbatch-");
    const script = join(dir, "het.sh");
    writeFileSync(
      script,
      [
        "#!/bin/sh",
        "#SBATCH -n 1",
        "#SBATCH hetjob",
        "#SBATCH -n 1",
        `srun --het-group=0 jobrt exec --runtime none -- sh -c 'echo "none $SLURMD_NODENAME $(cat /etc/jobrt-image 2>/dev/null || echo host-fs)"' : \\`,
        `     --het-group=1 jobrt exec --runtime oci --container '${bundle}' -- sh -c 'echo "oci $SLURMD_NODENAME $(cat /etc/jobrt-image)"'`,
        "",
      ].join("\n"),
    );
    const r = await slurm(["sbatch", "--wait", "-o", join(dir, "out.txt"), "-e", join(dir, "err.txt"), script], {
      env: site.env,
    });
    expect(readFileSync(join(dir, "err.txt"), "utf8")).toBe("");
    expect(r.code).toBe(0);
    const lines = sortedLines(readFileSync(join(dir, "out.txt"), "utf8"));
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^none node[ab] host-fs$/);
    expect(lines[1]).toMatch(/^oci node[ab] jobrt-busybox-image$/);
    expect(lines[0]?.split(" ")[1]).not.toBe(lines[1]?.split(" ")[1]);
    expect(ourContainers()).toEqual([]);
  });

  it("scancel of a running containerised step leaves no container, no spool dir and no process", async () => {
    const marker = String(100000 + Math.floor(Math.random() * 800000));
    const job = spawn(
      "srun",
      [
        "-N",
        "2",
        "-n",
        "2",
        "--job-name",
        `jobrt-cancel-${marker}`,
        "jobrt",
        "exec",
        "--runtime",
        "oci",
        "--container",
        bundle,
        "--",
        "sleep",
        marker,
      ],
      {
        env: slurmEnv(site.env),
        stdio: "ignore",
      },
    );
    const exited = new Promise<number | null>((res) => job.on("close", (code) => res(code)));
    const sleepers = () => runProgram(["pgrep", "-f", `^(/bin/)?sleep ${marker}$`]).then((p) => sortedLines(p.stdout));
    try {
      // Both containers running (one per node), their sleeps visible from here; stop waiting if srun ended.
      await waitFor(
        async () => job.exitCode !== null || ((await sleepers()).length === 2 && ourContainers().length === 2),
        60_000,
        200,
      );
      expect(job.exitCode, "srun ended before its containers ran").toBeNull();
      expect(await sleepers()).toHaveLength(2);
      expect(ourContainers()).toHaveLength(2);
      const q = await slurm(["squeue", "-h", "-n", `jobrt-cancel-${marker}`, "-o", "%i"]);
      const jobId = q.stdout.trim();
      expect(jobId).toMatch(/^\d+$/);
      expect(jobSpool(jobId).length).toBeGreaterThan(0);

      expect((await slurm(["scancel", jobId])).code).toBe(0);
      expect(await exited).not.toBe(0);
      // Slurm's KillWait (10 s) bounds how long the job may take to end.
      const gone = await waitFor(
        async () => (await slurm(["squeue", "-h", "-j", jobId, "-o", "%T"])).stdout.trim() === "",
        60_000,
        200,
      );
      expect(gone).toBe(true);
      expect(ourContainers()).toEqual([]);
      expect(await sleepers()).toEqual([]);
      expect(spoolLeftovers(jobId)).toEqual([]);
    } finally {
      if (job.exitCode === null) job.kill("SIGKILL");
    }
  });

  it("a job of an ordinary user (srun --uid nobody): jobrt exec runs as that user, oci through rootless runc, on both nodes", async () => {
    const dir = tmp("jobrt-slurm-nobody-");
    chmodSync(dir, 0o755);
    const rootless = busyboxBundle(join(dir, "bundle"), true);
    // srun --uid cannot read its allocation reply if the job had to queue: start on an idle cluster.
    expect(await waitFor(async () => (await slurm(["squeue", "-h"])).stdout.trim() === "", 30_000, 200)).toBe(true);
    const asUser = ["--uid=65534", "--gid=65534", "-N", "2", "-n", "2", "--chdir", dir, "jobrt", "exec"];
    const none = await srun([
      ...asUser,
      "--runtime",
      "none",
      "--",
      "sh",
      "-c",
      'echo "$(id -u) $(id -g) $SLURMD_NODENAME"',
    ]);
    expect(none.stderr).toBe("");
    expect(sortedLines(none.stdout)).toEqual(["65534 65534 nodea", "65534 65534 nodeb"]);
    expect(await waitFor(async () => (await slurm(["squeue", "-h"])).stdout.trim() === "", 30_000, 200)).toBe(true);
    const oci = await srun([
      ...asUser,
      "--runtime",
      "oci",
      "--container",
      rootless,
      "--",
      "sh",
      "-c",
      'echo "$SLURM_JOB_ID $(cat /proc/self/uid_map) $(cat /etc/jobrt-image) $SLURMD_NODENAME"',
    ]);
    expect(oci.stderr).not.toMatch(/^jobrt:/m);
    expect(oci.code).toBe(0);
    const lines = sortedLines(oci.stdout).map((l) => l.replace(/\s+/g, " "));
    const jobId = (lines[0] ?? "").split(" ")[0] as string;
    // Root inside the container is nobody outside: runc ran rootless, as the job's user.
    expect(lines).toEqual([
      `${jobId} 0 65534 1 jobrt-busybox-image nodea`,
      `${jobId} 0 65534 1 jobrt-busybox-image nodeb`,
    ]);
    expect(spoolLeftovers(jobId)).toEqual([]);
  });

  describe("SIGTERM from scancel, handled by the task", () => {
    // Each task traps SIGTERM, writes a file where this test can see it and exits 7: without
    // jobrt, srun reports 7 for such a step. Both runtimes, both nodes, cancelled at once.
    const runtimes = ["none", "oci"] as const;
    const runs = new Map<
      string,
      { outDir: string; jobId: string; code: number | null; stdout: string; stderr: string }
    >();

    beforeAll(async () => {
      const script =
        'trap "echo got > $1/term-$SLURM_PROCID; exit 7" TERM; echo ready; while :; do sleep 1 & wait $!; done';
      const started = runtimes.map(async (rt) => {
        const outDir = tmp(`jobrt-slurm-sig-${rt}-`);
        const name = `jobrt-sig-${rt}-${process.pid}`;
        const jobrtArgs =
          rt === "oci"
            ? ["--runtime", "oci", "--container", bundle, "--container-volume", `${outDir}:/out`]
            : ["--runtime", "none"];
        const inside = rt === "oci" ? "/out" : outDir;
        const job = spawn(
          "srun",
          [
            "-N",
            "2",
            "-n",
            "2",
            "--job-name",
            name,
            "jobrt",
            "exec",
            ...jobrtArgs,
            "--",
            "sh",
            "-c",
            script,
            "sh",
            inside,
          ],
          {
            env: slurmEnv(site.env),
            stdio: ["ignore", "pipe", "pipe"],
          },
        );
        let stdout = "";
        job.stdout.setEncoding("utf8").on("data", (d: string) => {
          stdout += d;
        });
        let stderr = "";
        job.stderr.setEncoding("utf8").on("data", (d: string) => {
          stderr += d;
        });
        const exited = new Promise<number | null>((res) => job.on("close", (code) => res(code)));
        try {
          await waitFor(() => job.exitCode !== null || stdout.split("ready").length - 1 === 2, 60_000, 100);
          expect(job.exitCode, `srun (${rt}) ended before both tasks were ready: ${stdout}`).toBeNull();
          const jobId = (await slurm(["squeue", "-h", "-n", name, "-o", "%i"])).stdout.trim();
          expect(jobId).toMatch(/^\d+$/);
          return { rt, outDir, jobId, job, exited, stdout: () => stdout, stderr: () => stderr };
        } catch (error) {
          job.kill("SIGKILL");
          throw error;
        }
      });
      const jobs = await Promise.all(started);
      expect((await slurm(["scancel", ...jobs.map((j) => j.jobId)])).code).toBe(0);
      for (const j of jobs) {
        const code = await j.exited;
        runs.set(j.rt, { outDir: j.outDir, jobId: j.jobId, code, stdout: j.stdout(), stderr: j.stderr() });
      }
      for (const j of jobs) {
        await waitFor(
          async () => (await slurm(["squeue", "-h", "-j", j.jobId, "-o", "%T"])).stdout.trim() === "",
          60_000,
          200,
        );
      }
    });

    it("reaches every task: the process (none) and the container's process (oci), on both nodes", () => {
      for (const rt of runtimes) {
        const run = runs.get(rt)!;
        expect(listTree(run.outDir), `runtime ${rt}`).toEqual(["term-0", "term-1"]);
      }
    });

    it("cleanup still runs: no container and nothing in any SpoolDir", async () => {
      expect(ourContainers(), `srun's stderr:\n${runs.get("oci")?.stderr}`).toEqual([]);
      for (const rt of runtimes) expect(spoolLeftovers(runs.get(rt)!.jobId), `runtime ${rt}`).toEqual([]);
    });

    it("the task's own exit status (7) is srun's, as without jobrt", () => {
      for (const rt of runtimes) expect(runs.get(rt)!.code, `runtime ${rt}`).toBe(7);
    });
  });

  it("outside a Slurm step jobrt exec refuses with one clear line", async () => {
    const env = slurmEnv(site.env);
    delete env.SLURM_CONF;
    const r = await runProgram([join(site.binDir, "jobrt"), "exec", "--runtime", "none", "--", "true"], { env });
    expect(r.code).not.toBe(0);
    const lines = r.stderr.trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^jobrt: .*slurm/i);
  });
});
