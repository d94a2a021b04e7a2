// The image id is pinned once per step on a node, also when every task is its own jobrt process
// (`srun ... jobrt exec`): a tag re-pulled between two tasks' setups must not give them different
// images. The "re-pull" is a change of the stand-in gateway's id for the tag.
import { spawn } from "node:child_process";
import { chownSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { NodeConf, StepRecord, TaskRecord } from "../../packages/core/dist/index.js";
import shifter from "../../packages/runtime-shifter/dist/index.js";
import { pluginHost } from "../../packages/testkit/dist/index.js";
import { jobrt, jobrtBin, tempDir } from "../helpers/jobrt.js";
import { type StandinSite, TASK_GID, TASK_UID, createStandinSite, imageId } from "./standin/layout.js";

const host = pluginHost(shifter);

const TAG = "docker:app:1";
let site: StandinSite;
let spool: string;

function retag(to: string): void {
  const db = JSON.parse(readFileSync(site.gatewayFile, "utf8")) as { images: Record<string, { id: string }> };
  (db.images[TAG] as { id: string }).id = imageId(to);
  writeFileSync(site.gatewayFile, `${JSON.stringify(db)}\n`);
}

beforeAll(() => {
  site = createStandinSite();
  site.addImage("docker:app-v2:1");
  spool = tempDir("jobrt-shifter-spool-");
  chownSync(spool, TASK_UID, TASK_GID);
  writeFileSync(join(site.confDir, "jobrt.conf"), `SpoolDir=${spool}\n`);
});
beforeEach(() => {
  site.addImage(TAG);
});
afterAll(() => {
  site?.remove();
  if (spool) rmSync(spool, { recursive: true, force: true });
});

describe("one pinned image per step", () => {
  const logs: string[] = [];
  const node = (): NodeConf => ({
    nodeName: "n1",
    confDir: site.confDir,
    spoolDir: spool,
    killWait: 5,
    hostUid: 0,
    log: (l, m) => logs.push(`${l}: ${m}`),
  });
  const record = (stepId: number, localIds: number[]): StepRecord => {
    const tasks: TaskRecord[] = localIds.map((i) => ({
      localId: i,
      globalId: i,
      argv: ["true"],
      env: { PATH: "/usr/bin:/bin" },
    }));
    return {
      jobId: 4242,
      stepId,
      kind: "normal",
      runtime: "shifter",
      uid: TASK_UID,
      gid: TASK_GID,
      user: "nobody",
      home: "/tmp",
      cwd: "/tmp",
      argv: ["true"],
      env: {},
      tasks,
      totalTasks: 2,
      nodeId: 0,
      nnodes: 1,
      pty: false,
      container: { value: TAG, volumes: [], modules: [], env: [], clearEnv: false, options: {} },
    };
  };
  const imageOf = async (s: StepRecord) => {
    const spec = await host.run(node(), s, s.tasks[0] as TaskRecord);
    return typeof spec === "object" ? spec.env.SHIFTER_IMAGE : undefined;
  };

  it("a second record of the same step (another process under srun) uses the first one's pin", async () => {
    const a = record(0, [0]);
    const b = record(0, [1]);
    const other = record(1, [0]);
    try {
      await host.setup(node(), a);
      retag("docker:app-v2:1");
      await host.setup(node(), b);
      await host.setup(node(), other);
      expect(await imageOf(a)).toBe(imageId(TAG));
      expect(await imageOf(b)).toBe(imageId(TAG));
      // The re-tag was real: another step resolves to the new id.
      expect(await imageOf(other)).toBe(imageId("docker:app-v2:1"));
      await host.cleanup(node(), a);
      expect(readdirSync(spool)).toContain("shifter-4242.0");
    } finally {
      await host.cleanup(node(), a);
      await host.cleanup(node(), b);
      await host.cleanup(node(), other);
    }
    expect(readdirSync(spool)).toEqual([]);
  });

  it("holds across jobrt exec processes, one per task, and leaves nothing in SpoolDir", async () => {
    const go = join(tempDir("jobrt-shifter-go-"), "go");
    chownSync(join(go, ".."), TASK_UID, TASK_GID);
    const env = (procid: number) => ({
      ...process.env,
      PATH: "/usr/bin:/bin",
      SLURM_JOB_ID: "777",
      SLURM_STEP_ID: "0",
      SLURM_PROCID: String(procid),
      SLURM_LOCALID: String(procid),
      SLURM_NTASKS: "2",
      SLURM_JOB_USER: "nobody",
    });
    const args = ["exec", "--conf-dir", site.confDir, "--runtime", "shifter", "--container", TAG, "--"];
    const first = spawn(
      process.execPath,
      ["--", jobrtBin, ...args, "sh", "-c", `cat /etc/jobrt-image; while [ ! -e ${go} ]; do sleep 0.1; done`],
      {
        uid: TASK_UID,
        gid: TASK_GID,
        cwd: "/tmp",
        env: env(0),
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let firstOut = "";
    let firstErr = "";
    first.stderr.on("data", (d: Buffer) => {
      firstErr += d.toString();
    });
    const done = new Promise<number | null>((resolve) => first.on("close", (code) => resolve(code)));
    try {
      await new Promise<void>((resolve) =>
        first.stdout.on("data", (d: Buffer) => {
          firstOut += d.toString();
          if (firstOut.includes("\n")) resolve();
        }),
      );
      expect(firstOut).toBe(`${TAG}\n`);
      // "jobs" holds jobrt's own crash records (jobrt gc), not the runtime's.
      expect(readdirSync(spool).filter((n) => n !== "jobs")).toEqual(["shifter-777.0"]);
      retag("docker:app-v2:1");
      const second = await jobrt([...args, "cat", "/etc/jobrt-image"], {
        uid: TASK_UID,
        gid: TASK_GID,
        cwd: "/tmp",
        env: env(1),
      });
      expect(second).toMatchObject({ code: 0, stdout: `${TAG}\n` });
      mkdirSync(go, { recursive: true });
      expect(await done).toBe(0);
      expect(firstErr).toBe("");
    } finally {
      // Let the first task end by itself (killing only jobrt would orphan the task's process group).
      mkdirSync(go, { recursive: true });
      if (first.exitCode === null && first.signalCode === null) {
        const timer = setTimeout(() => first.kill("SIGTERM"), 30_000);
        await done;
        clearTimeout(timer);
      }
      rmSync(join(go, ".."), { recursive: true, force: true });
    }
    expect(readdirSync(spool)).toEqual([]);
    expect(existsSync(join(spool, "shifter-777.0"))).toBe(false);
  });
});
