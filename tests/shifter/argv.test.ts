// Every argv the plugin builds must mean, to shifter's own parser, exactly the request: parse the
// ExecSpec with the stand-in's glibc getopt_long and shifter's option table, and compare.
import type { ContainerRequest, StepRecord, TaskRecord } from "../../packages/core/dist/index.js";
import { describe, expect, it } from "vitest";
// Internal modules of the built package (its public entry exports only the plugin).
import { loadShifterConf } from "../../packages/runtime-shifter/dist/conf.js";
import { buildExecSpec } from "../../packages/runtime-shifter/dist/exec.js";
import { validateRequest } from "../../packages/runtime-shifter/dist/request.js";
import { parseUdiRootConf } from "../../packages/runtime-shifter/dist/udiroot.js";
// @ts-expect-error: plain JS module of the stand-in, typed by JSDoc only
import { getoptLong } from "./standin/getopt.mjs";
// @ts-expect-error: plain JS module of the stand-in, typed by JSDoc only
import { SHIFTER_LONGOPTS, SHIFTER_OPTSTRING } from "./standin/options.mjs";

type Parsed = { options: { opt: string; arg: string | null }[]; rest: string[]; error?: string };

const udi = parseUdiRootConf(
  "siteFs=/global/home:/home;/scratch:/scratch\nmodule_gpu_siteEnv=A=1\nmodule_mpich_siteEnv=B=1",
  "/udiRoot.conf",
);
const conf = { ...loadShifterConf("/nonexistent", 0), shifterPath: "/usr/bin/shifter", allowPerNodeCache: true };
const ID = "d".repeat(64);

const shapes: Partial<ContainerRequest>[] = [
  {},
  { volumes: ["/home/u:/data"] },
  { volumes: ["/home/u/in:/in:ro", "/scratch/out:/out", "/x:/cache:perNodeCache=size=1G,fs=xfs"] },
  { modules: ["gpu"] },
  { modules: ["gpu,mpich"] },
  { modules: ["none"] },
  { workdir: "/data" },
  { workdir: "/dir with spaces" },
  { workdir: "image" },
  { entrypoint: "/bin/run" },
  { entrypoint: "image" },
  { env: ["A=1", "B=x=y", "C=two words", "D=-starts-with-dash", "E=--"] },
  { clearEnv: true },
  {
    volumes: ["/home/u:/data:ro"],
    modules: ["gpu"],
    workdir: "image",
    entrypoint: "/bin/run",
    env: ["A=1"],
    clearEnv: true,
  },
];
const argvs: string[][] = [
  ["true"],
  ["-v"],
  ["--", "x"],
  ["--image=docker:evil", "-V", "/:/mnt"],
  ["/tmp", "ls"],
  ["sh", "-c", "echo $0", "a b"],
];

function step(container: Partial<ContainerRequest>): StepRecord {
  return {
    jobId: 1,
    stepId: 0,
    kind: "normal",
    runtime: "shifter",
    uid: 1000,
    gid: 1000,
    user: "u",
    home: "/home/u",
    cwd: "/home/u",
    argv: ["true"],
    env: {},
    tasks: [],
    totalTasks: 1,
    nodeId: 0,
    nnodes: 1,
    pty: false,
    container: {
      value: "docker:ubuntu:22.04",
      volumes: [],
      modules: [],
      env: [],
      clearEnv: false,
      options: {},
      ...container,
    },
  };
}

describe("plugin argv, read back by shifter's parser", () => {
  for (const shape of shapes) {
    for (const argv of argvs) {
      it(`${JSON.stringify(shape)} ${JSON.stringify(argv)}`, () => {
        const s = step(shape);
        const req = validateRequest(s, conf, udi)!;
        const task: TaskRecord = { localId: 0, globalId: 0, argv, env: {} };
        const spec = buildExecSpec(
          conf.shifterPath,
          conf,
          req,
          { type: "id", value: ID, request: req.image.canonical },
          s,
          task,
        );
        const parsed = getoptLong("shifter", spec.argv.slice(1), SHIFTER_OPTSTRING, SHIFTER_LONGOPTS) as Parsed;
        expect(parsed.error).toBeUndefined();
        expect(parsed.rest).toEqual(argv);
        const of = (o: string) => parsed.options.filter((x) => x.opt === o).map((x) => x.arg);
        expect(of("i")).toEqual([]);
        expect(of("V")).toEqual(shape.volumes ?? []);
        expect(of("m")).toEqual(shape.modules ? [shape.modules.join(",")] : []);
        expect(of("w")).toEqual(shape.workdir === undefined ? [] : [shape.workdir === "image" ? null : shape.workdir]);
        expect(of("P")).toEqual(
          shape.entrypoint === undefined ? [] : [shape.entrypoint === "image" ? null : shape.entrypoint],
        );
        expect(of("e")).toEqual(shape.env ?? []);
        expect(of("E")).toEqual(shape.clearEnv ? [null] : []);
        expect(spec.env).toMatchObject({
          SHIFTER_IMAGETYPE: "id",
          SHIFTER_IMAGE: ID,
          SHIFTER_IMAGEREQUEST: "docker:ubuntu:22.04",
        });
      });
    }
  }
});
