import { describe, expect, it } from "vitest";
import { parseCommandLine } from "../src/args.js";
import { componentSpecs } from "../src/runspec.js";

const parse = (args: string[]) =>
  componentSpecs(parseCommandLine(args, { command: "run", components: true, needCommand: true }));

describe("componentSpecs: argv to the launcher's step plan", () => {
  it("carries -o, -e, -i, --export and -D over to later components unless they set their own, as srun does", () => {
    const [a, b, c] = parse([
      "-n",
      "2",
      "-o",
      "out-%t",
      "-D",
      "/tmp",
      "x",
      ":",
      "-e",
      "err",
      "y",
      ":",
      "-o",
      "own",
      "z",
    ]);
    expect(a).toMatchObject({ ntasks: 2, cwd: "/tmp", io: { output: "out-%t" }, argv: ["x"] });
    expect(b).toMatchObject({ ntasks: 1, cwd: "/tmp", io: { output: "out-%t", error: "err" }, argv: ["y"] });
    expect(c).toMatchObject({ io: { output: "own", error: "err" }, argv: ["z"] });
  });
  it("labels the whole step when any component asks for -l", () => {
    expect(parse(["x", ":", "-l", "y"]).map((s) => s.io.label)).toEqual([true, true]);
  });
  it("refuses an --input task id the step does not have, naming the count", () => {
    expect(() => parse(["-n", "2", "-i", "2", "x"])).toThrow("--input: task 2 does not exist (the step has 2 tasks)");
  });
  it("refuses a file pattern ending in a lone %, naming the component", () => {
    expect(() => parse(["x", ":", "-o", "out%", "y"])).toThrow('component 1: --output: "out%" ends with a lone %');
  });
});
