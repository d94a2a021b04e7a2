import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { describe, expect, test } from "vitest";
import { createTestNode, createTestStep } from "../src/index.js";
import { tempDir } from "../../../tests/helpers/tmp.js";

describe("createTestStep: the environment the real host sets", () => {
  test("every task carries jobrt run's Slurm variables, SLURM_RUNTIME and SLURM_CONTAINER included", () => {
    const step = createTestStep({
      runtime: "oci",
      jobId: 42,
      stepId: 3,
      tasks: 2,
      container: { value: "/srv/bundle" },
    });
    const env = step.tasks[1]?.env ?? {};
    expect(env).toMatchObject({
      SLURM_JOB_ID: "42",
      SLURM_JOBID: "42",
      SLURM_STEP_ID: "3",
      SLURM_STEPID: "3",
      SLURM_PROCID: "1",
      SLURM_LOCALID: "1",
      SLURM_NTASKS: "2",
      SLURM_RUNTIME: "oci",
      SLURM_CONTAINER: "/srv/bundle",
      SLURM_STEP_TASKS_PER_NODE: "2",
    });
    expect(env.SLURM_JOB_USER).toBe(step.user);
    expect(env.LOGNAME).toBe(step.user);
  });
  test("a record holding some tasks of a larger step says so", () => {
    const step = createTestStep({ runtime: "none", tasks: [1, 3], totalTasks: 4 });
    expect(step.tasks.map((t) => t.globalId)).toEqual([1, 3]);
    expect(step.tasks.map((t) => t.env.SLURM_NTASKS)).toEqual(["4", "4"]);
    expect(step.tasks.map((t) => t.env.SLURM_STEP_TASKS_PER_NODE)).toEqual(["2", "2"]);
  });
  test("no temp dir is made for the default cwd", () => {
    expect(createTestStep({ runtime: "none" }).cwd).toBe(tmpdir());
  });
});

describe("createTestNode: cleans up after itself", () => {
  test("dispose() removes the dirs it made and leaves the ones it was given", () => {
    const mine = tempDir("jobrt-fixtures-test-");
    try {
      const node = createTestNode({ confDir: mine });
      expect(existsSync(node.spoolDir)).toBe(true);
      node.dispose();
      expect(existsSync(node.spoolDir)).toBe(false);
      expect(existsSync(mine)).toBe(true);
    } finally {
      rmSync(mine, { recursive: true, force: true });
    }
  });

  test("its dirs are made under $JOBRT_TEST_TMP (the repo's per-file dir)", () => {
    const node = createTestNode();
    expect(dirname(node.spoolDir)).toBe(process.env.JOBRT_TEST_TMP);
    expect(dirname(node.confDir)).toBe(process.env.JOBRT_TEST_TMP);
    node.dispose();
  });

  test("dispose() never deletes through a mount a plugin left in SpoolDir: it leaves the dir and throws naming it", () => {
    const data = tempDir("jobrt-fixtures-data-");
    writeFileSync(join(data, "precious"), "x");
    const node = createTestNode();
    const target = join(node.spoolDir, "rootfs");
    mkdirSync(target);
    execFileSync("mount", ["--bind", data, target]);
    try {
      expect(() => node.dispose()).toThrow(
        `createTestNode: dispose() could not remove: ${node.spoolDir}: left in place, mounted below it: ${target}`,
      );
      expect(readFileSync(join(target, "precious"), "utf8")).toBe("x");
    } finally {
      execFileSync("umount", ["-l", target]);
    }
    expect(readFileSync(join(data, "precious"), "utf8")).toBe("x");
  });
});
