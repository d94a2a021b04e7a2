import { describe, expect, it } from "vitest";
import { planFromSlurm } from "../src/session/plan.js";
import { expandHostList, expandTasksPerNode, hetFromSlurm } from "../src/session/slurmenv.js";

const USER = { uid: 1000, gid: 1000, user: "alice", home: "/home/alice" };
const stepFromSlurm = (env: NodeJS.ProcessEnv, argv: string[], runtime: string) =>
  planFromSlurm(env, argv, runtime, USER, "/tmp");

// Recorded from a real heterogeneous step on Slurm 22.05 (`srun -n1 env : -n2 env`, two nodes):
// the task with SLURM_PROCID=1 on nodeb. Slurm gives no component number; jobrt derives it.
const HET_TASK = {
  SLURMD_NODENAME: "nodeb",
  SLURM_GTIDS: "1,2",
  SLURM_HET_SIZE: "2",
  SLURM_JOBID: "1",
  SLURM_JOB_ID: "1",
  SLURM_JOB_ID_PACK_GROUP_0: "1",
  SLURM_JOB_ID_PACK_GROUP_1: "2",
  SLURM_JOB_NODELIST: "nodea,nodeb",
  SLURM_JOB_NODELIST_PACK_GROUP_0: "nodea",
  SLURM_JOB_NODELIST_PACK_GROUP_1: "nodeb",
  SLURM_JOB_UID: "0",
  SLURM_JOB_USER: "root",
  SLURM_LOCALID: "0",
  SLURM_NNODES: "2",
  SLURM_NODEID: "1",
  SLURM_NTASKS: "3",
  SLURM_PACK_SIZE: "2",
  SLURM_PROCID: "1",
  SLURM_STEPID: "0",
  SLURM_STEP_ID: "0",
  SLURM_STEP_NODELIST: "nodea,nodeb",
  SLURM_STEP_NUM_NODES: "2",
  SLURM_STEP_NUM_TASKS: "3",
  SLURM_STEP_TASKS_PER_NODE: "1,2",
};

describe("Slurm task environment", () => {
  it("expands host lists and tasks-per-node as Slurm prints them", () => {
    expect(expandHostList("nodea,node[01-03,7],x[1-2]y")).toEqual([
      "nodea",
      "node01",
      "node02",
      "node03",
      "node7",
      "x1y",
      "x2y",
    ]);
    expect(expandTasksPerNode("2(x3),1")).toEqual([2, 2, 2, 1]);
    expect(expandTasksPerNode("1,2")).toEqual([1, 2]);
  });

  it("derives the heterogeneous component and its task offset from a real het task", () => {
    expect(hetFromSlurm(HET_TASK)).toEqual({ component: 1, size: 2, taskOffset: 1 });
    expect(hetFromSlurm({ ...HET_TASK, SLURMD_NODENAME: "nodea", SLURM_PROCID: "0", SLURM_NODEID: "0" })).toEqual({
      component: 0,
      size: 2,
      taskOffset: 0,
    });
  });

  it("reads the newer _HET_GROUP_ names too, with compressed lists", () => {
    const env = {
      SLURM_HET_SIZE: "3",
      SLURMD_NODENAME: "n05",
      SLURM_JOB_NODELIST_HET_GROUP_0: "n[01-02]",
      SLURM_JOB_NODELIST_HET_GROUP_1: "n03",
      SLURM_JOB_NODELIST_HET_GROUP_2: "n[04-05]",
      SLURM_STEP_NODELIST: "n[01-05]",
      SLURM_STEP_TASKS_PER_NODE: "4(x2),1,2(x2)",
    };
    expect(hetFromSlurm(env)).toEqual({ component: 2, size: 3, taskOffset: 9 });
  });

  it("builds a one-task StepRecord from the task's variables", () => {
    const step = stepFromSlurm(HET_TASK, ["hostname"], "oci");
    expect(step).toMatchObject({
      jobId: 1,
      stepId: 0,
      kind: "normal",
      runtime: "oci",
      totalTasks: 3,
      nodeId: 1,
      nnodes: 2,
      het: { component: 1, size: 2, taskOffset: 1 },
    });
    expect(step.tasks).toHaveLength(1);
    expect(step.tasks[0]).toMatchObject({ localId: 0, globalId: 1, argv: ["hostname"] });
    expect(step.tasks[0]!.env.SLURM_RUNTIME).toBe("oci");
  });

  it("recognises Slurm's special step ids", () => {
    expect(stepFromSlurm({ ...HET_TASK, SLURM_STEP_ID: "4294967291" }, ["x"], "none").kind).toBe("batch");
  });

  it("refuses to run outside a Slurm step, naming the variable", () => {
    expect(() => stepFromSlurm({}, ["x"], "none")).toThrow(
      /not inside a Slurm job step \(SLURM_JOB_ID\/SLURM_JOBID is not set\)/,
    );
  });
});

describe("planFromSlurm: what `jobrt exec` adds to Slurm's environment", () => {
  it("sets SLURM_CONTAINER to the --container value, as `jobrt run` does", () => {
    const container = { value: "/shared/bundle", volumes: [], modules: [], env: [], clearEnv: false, options: {} };
    const step = planFromSlurm(HET_TASK, ["x"], "oci", USER, "/tmp", container);
    expect(step.tasks[0]!.env.SLURM_CONTAINER).toBe("/shared/bundle");
    expect(step.container).toEqual(container);
  });
  it("sets no SLURM_CONTAINER without a container", () => {
    expect(planFromSlurm(HET_TASK, ["x"], "none", USER, "/tmp").tasks[0]!.env.SLURM_CONTAINER).toBeUndefined();
  });
});
