import type { StepRecord, TaskRecord } from "@jobrt/core";
import { describe, expect, it } from "vitest";
import { loadShifterConf } from "../src/conf.js";
import { buildExecSpec } from "../src/exec.js";
import { validateRequest } from "../src/request.js";
import { parseUdiRootConf } from "../src/udiroot.js";

const udi = parseUdiRootConf("siteFs=/global/home:/home\nmodule_gpu_siteEnv=CUDA=1\nmodule_mpich_enabled=1", "/u.conf");
const conf = {
  ...loadShifterConf("/nonexistent-dir", 0),
  shifterPath: "/opt/shifter/bin/shifter",
  stripEnv: ["SECRET_*"],
};
const ID = "c".repeat(64);

function step(container: NonNullable<StepRecord["container"]>): StepRecord {
  return {
    jobId: 7,
    stepId: 1,
    kind: "normal",
    runtime: "shifter",
    uid: 1000,
    gid: 1000,
    user: "u",
    home: "/home/u",
    cwd: "/home/u/run",
    argv: ["-weird-argv0"],
    env: {},
    tasks: [],
    totalTasks: 1,
    nodeId: 0,
    nnodes: 1,
    pty: false,
    container,
  };
}

const task: TaskRecord = {
  localId: 0,
  globalId: 0,
  argv: ["-weird-argv0", "--image=docker:evil", "a b"],
  env: {
    PATH: "/usr/bin:/bin",
    SLURM_PROCID: "0",
    SHIFTER_IMAGE: "evil",
    SHIFTER_IMAGETYPE: "docker",
    SHIFTER_VOLUME: "/:/mnt",
    SHIFTER_MODULE: "gpu",
    SLURM_SPANK_SHIFTER_IMAGE: "evil",
    _SLURM_SPANK_OPTION_shifter_image: "evil",
    SECRET_TOKEN: "x",
    LD_LIBRARY_PATH: "/opt/lib",
  },
};

describe("the shifter argv and env (docs/runtime-shifter.md, What runs)", () => {
  it("puts every option in --name=value form, ends with --, and pins the image in the env", () => {
    const c = step({
      value: "docker:ubuntu",
      volumes: ["/home/u/in:/in:ro", "/home/u/out:/out"],
      modules: ["gpu", "mpich"],
      env: ["A=1", "B=x y"],
      workdir: "/in",
      entrypoint: "/bin/run",
      clearEnv: true,
      options: {},
    });
    const req = validateRequest(c, conf, udi)!;
    const spec = buildExecSpec(
      conf.shifterPath,
      conf,
      req,
      { type: "id", value: ID, request: req.image.canonical },
      c,
      task,
    );
    expect(spec.argv).toEqual([
      "/opt/shifter/bin/shifter",
      "--volume=/home/u/in:/in:ro",
      "--volume=/home/u/out:/out",
      "--module=gpu,mpich",
      "--workdir=/in",
      "--entrypoint=/bin/run",
      "--env=A=1",
      "--env=B=x y",
      "--clearenv",
      "--",
      "-weird-argv0",
      "--image=docker:evil",
      "a b",
    ]);
    expect(spec.cwd).toBe("/home/u/run");
    expect(spec.shell).toBeUndefined();
    expect(spec.env).toEqual({
      PATH: "/usr/bin:/bin",
      SLURM_PROCID: "0",
      LD_LIBRARY_PATH: "/opt/lib",
      SHIFTER_IMAGETYPE: "id",
      SHIFTER_IMAGE: ID,
      SHIFTER_IMAGEREQUEST: "docker:ubuntu:latest",
    });
  });

  it("uses bare --workdir / --entrypoint for the image's own, and nothing when not asked", () => {
    const c = step({
      value: "docker:ubuntu:1",
      volumes: [],
      modules: [],
      env: [],
      workdir: "image",
      entrypoint: "image",
      clearEnv: false,
      options: {},
    });
    const req = validateRequest(c, conf, udi)!;
    const spec = buildExecSpec(
      conf.shifterPath,
      conf,
      req,
      { type: "id", value: ID, request: "docker:ubuntu:1" },
      c,
      task,
    );
    expect(spec.argv.slice(0, 4)).toEqual(["/opt/shifter/bin/shifter", "--workdir", "--entrypoint", "--"]);
    const plain = step({ value: "docker:ubuntu:1", volumes: [], modules: [], env: [], clearEnv: false, options: {} });
    const spec2 = buildExecSpec(
      conf.shifterPath,
      conf,
      validateRequest(plain, conf, udi)!,
      { type: "id", value: ID, request: "docker:ubuntu:1" },
      plain,
      task,
    );
    expect(spec2.argv.slice(0, 2)).toEqual(["/opt/shifter/bin/shifter", "--"]);
    expect(Object.keys(spec2.env).filter((k) => k.includes("SHIFTER"))).toEqual([
      "SHIFTER_IMAGETYPE",
      "SHIFTER_IMAGE",
      "SHIFTER_IMAGEREQUEST",
    ]);
  });
});
