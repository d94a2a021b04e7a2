import { appendFileSync, chmodSync, existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { busyboxBundle } from "../helpers/fixtures.js";
import { tempDir } from "../helpers/jobrt.js";
import {
  type JobrtSite,
  jobrtSite,
  listTree,
  removeRuncContainers,
  runcContainers,
  slurm,
  startCluster,
  stopClusterAfterAll,
  waitFor,
  withoutAllocation,
} from "./cluster.js";

// One jobrt per node per step (docs/node-step.md) under real srun on the two-node local Slurm:
// the node log says how many jobrt processes ran a step on each node, and for which tasks.

describe.each(["linuxproc", "cgroup"] as const)(
  "srun ... jobrt exec: the tasks of a step on a node share one jobrt (proctrack/%s)",
  (proctrack) => {
    let site: JobrtSite;
    let bundle: string;
    /** The TMPDIR the jobs get, so the rendezvous directories are this file's own. */
    let tmp: string;
    const log = (node: string) => join(site.root, `${node}.log`);

    beforeAll(async () => {
      site = jobrtSite();
      for (const node of ["nodea", "nodeb"])
        appendFileSync(join(site.root, "etc", node, "jobrt.conf"), `NodeLog=file:${log(node)}\n`);
      tmp = join(site.root, "tmp");
      mkdirSync(tmp);
      chmodSync(tmp, 0o1777);
      bundle = busyboxBundle(join(tempDir("jobrt-slurm-nodestep-bundle-"), "bundle"));
      await startCluster(2, undefined, proctrack);
    });
    stopClusterAfterAll(async () => {
      if (site && bundle) removeRuncContainers([bundle, site.spoolRoot]);
      if (site) rmSync(site.root, { recursive: true, force: true });
      if (bundle) rmSync(join(bundle, ".."), { recursive: true, force: true });
    });

    const srun = (args: string[], env: Record<string, string> = {}) =>
      slurm(["srun", ...args], { env: { ...site.env, TMPDIR: tmp, ...env }, timeoutMs: 90_000 });

    /** The node log lines of `job` on `node`: kind, jobrt's pid, the fields. */
    const lines = (node: string, job: string) =>
      (existsSync(log(node)) ? readFileSync(log(node), "utf8").split("\n") : [])
        .map((l) => /jobrt\[(\d+)\]: (step-start|step-end) (job=(\d+) .*)$/.exec(l))
        .filter((m): m is RegExpExecArray => m !== null && m[4] === job)
        .map((m) => ({ kind: m[2]!, pid: Number(m[1]), text: m[3]! }));

    const jobOf = (stdout: string) => /^(?:\d+: )?job (\d+)\b/m.exec(stdout)?.[1] ?? "";

    it("srun -N1 -n4 --label: one jobrt's lines for the four tasks; each task's output, label and status", async () => {
      const r = await srun([
        "-N1",
        "-w",
        "nodea",
        "-n4",
        // More tasks than the node's 2 CPUs.
        "--overcommit",
        "--label",
        "jobrt",
        "exec",
        "--runtime",
        "none",
        "--",
        "sh",
        "-c",
        '[ "$SLURM_PROCID" = 0 ] && echo "job $SLURM_JOB_ID"; echo "err $SLURM_PROCID" >&2; exit $SLURM_PROCID',
      ]);
      const job = jobOf(r.stdout);
      expect(job).toMatch(/^\d+$/);
      expect(r.code).toBe(3);
      const stderr = withoutAllocation(r.stderr).split("\n").filter(Boolean).sort();
      expect(stderr).toEqual(
        [
          "0: err 0",
          "1: err 1",
          "2: err 2",
          "3: err 3",
          "srun: error: nodea: task 1: Exited with exit code 1",
          "srun: error: nodea: task 2: Exited with exit code 2",
          "srun: error: nodea: task 3: Exited with exit code 3",
        ].sort(),
      );
      const mine = lines("nodea", job);
      expect(mine.map((l) => l.kind)).toEqual(["step-start", "step-end"]);
      expect(mine[1]!.text).toMatch(/ node_tasks=4 task_status=0:0,1:1,2:2,3:3 /);
    });

    it("tasks that end one after another: none is cut short by another's end (the node's jobrt last)", async () => {
      const r = await srun([
        "-N1",
        "-w",
        "nodea",
        "-n3",
        "--overcommit",
        "jobrt",
        "exec",
        "--runtime",
        "none",
        "--",
        "sh",
        "-c",
        'echo "job $SLURM_JOB_ID"; sleep "0.$((SLURM_PROCID * 4))"; exit $((SLURM_PROCID + 4))',
      ]);
      expect(r.code).toBe(6);
      const job = jobOf(r.stdout);
      expect(lines("nodea", job).at(-1)?.text).toMatch(/ node_tasks=3 task_status=0:4,1:5,2:6 /);
    });

    it("srun -N2 -n4 --runtime oci: one jobrt per node, each node's tasks in their containers; nothing left", async () => {
      const r = await srun([
        "-N2",
        "-n4",
        "jobrt",
        "exec",
        "--runtime",
        "oci",
        "--container",
        bundle,
        "--",
        "sh",
        "-c",
        'echo "job $SLURM_JOB_ID $(cat /etc/jobrt-image)"',
      ]);
      expect(withoutAllocation(r.stderr)).toBe("");
      expect(r.code).toBe(0);
      const job = jobOf(r.stdout);
      expect(r.stdout.split("\n").filter((l) => l.endsWith("jobrt-busybox-image"))).toHaveLength(4);
      for (const node of ["nodea", "nodeb"]) {
        const mine = lines(node, job);
        expect(
          mine.map((l) => l.kind),
          node,
        ).toEqual(["step-start", "step-end"]);
        expect(mine[1]!.text).toMatch(/ node_tasks=2 task_status=\d:0,\d:0 /);
      }
      expect(runcContainers([bundle, site.spoolRoot])).toEqual([]);
      expect(listTree(site.spoolRoot).filter((p) => !p.endsWith("/"))).toEqual([]);
      expect(listTree(tmp).filter((p) => p.endsWith(".sock"))).toEqual([]);
    });

    it("JOBRT_NODE_STEP=0: each task its own jobrt, as before", async () => {
      const r = await srun(
        [
          "-N1",
          "-w",
          "nodea",
          "-n3",
          "--overcommit",
          "jobrt",
          "exec",
          "--runtime",
          "none",
          "--",
          "sh",
          "-c",
          'echo "job $SLURM_JOB_ID"',
        ],
        { JOBRT_NODE_STEP: "0" },
      );
      expect(r.code).toBe(0);
      const mine = lines("nodea", jobOf(r.stdout));
      expect(
        mine.filter((l) => l.kind === "step-start"),
        `${r.stdout}\n${r.stderr}\n${readFileSync(log("nodea"), "utf8")}`,
      ).toHaveLength(3);
      expect(new Set(mine.map((l) => l.pid)).size).toBe(3);
    });

    it("the node's jobrt SIGKILLed while its tasks run: srun ends, no task is left on the node", async () => {
      // On an idle cluster: a job that queues behind the last one's end would start late.
      expect(await waitFor(async () => (await slurm(["squeue", "-h"])).stdout.trim() === "", 30_000, 200)).toBe(true);
      const run = srun([
        "-N1",
        "-w",
        "nodea",
        "-n3",
        "--overcommit",
        "jobrt",
        "exec",
        "--runtime",
        "none",
        "--",
        "sh",
        "-c",
        'echo "job $SLURM_JOB_ID"; exec sleep 60',
      ]);
      let host: number | undefined;
      expect(
        await waitFor(
          () => {
            // The one step on nodea that has started and not ended.
            const text = existsSync(log("nodea")) ? readFileSync(log("nodea"), "utf8") : "";
            const jobs = new Set([...text.matchAll(/step-start job=(\d+) /g)].map((m) => m[1]!));
            const running = [...jobs].map((j) => lines("nodea", j)).filter((l) => l.length === 1);
            host = running.length === 1 ? running[0]![0]!.pid : undefined;
            return host !== undefined;
          },
          30_000,
          100,
        ),
        existsSync(log("nodea")) ? readFileSync(log("nodea"), "utf8") : "no log",
      ).toBe(true);
      const killedAt = Date.now();
      process.kill(host!, "SIGKILL");
      const r = await run;
      // KillWait (2 s, jobrtSite) + 5 s: the joined tasks' forkers kill theirs at once.
      expect(Date.now() - killedAt).toBeLessThan(7_000);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toMatch(/jobrt: the node's jobrt of this step is gone: this task is stopped/);
      const job = jobOf(r.stdout);
      const left = await slurm([
        "sh",
        "-c",
        `for p in $(pgrep -x sleep); do grep -lz "^SLURM_JOB_ID=${job}$" /proc/$p/environ; done; true`,
      ]);
      expect(left.stdout.trim()).toBe("");
    });
  },
);
