import { describe, expect, it } from "vitest";
import { requestFromOptions, parseCommandLine } from "../src/args.js";

const rules = { command: "run", components: true, needCommand: true } as const;

describe("parseCommandLine: empty values that would quietly mean 'not given'", () => {
  it.each([
    [["--runtime", "", "true"], "--runtime: empty value (leave the option out for the default runtime)"],
    [["--runtime=", "true"], "--runtime: empty value (leave the option out for the default runtime)"],
    [
      ["-n", "1", "true", ":", "--runtime", "", "true"],
      "--runtime: empty value (leave the option out for the default runtime)",
    ],
    [["--conf-dir", "", "true"], "--conf-dir: empty value (it would read configuration from the current directory)"],
  ])("%j is a usage error", (args, message) => {
    expect(() => parseCommandLine(args, rules)).toThrow(expect.objectContaining({ code: "ERR_USAGE", message }));
  });

  it("a named runtime and conf dir still parse", () => {
    const parsed = parseCommandLine(["--conf-dir", "/etc/jobrt", "--runtime", "none", "true"], rules);
    expect(parsed.step.get("conf-dir")).toEqual(["/etc/jobrt"]);
    expect(parsed.components[0]?.options.get("runtime")).toEqual(["none"]);
  });
});

describe("--container-device", () => {
  const deviceRules = { command: "run", components: true, needCommand: true } as const;
  it("is repeatable and travels as the request's devices, each component its own", () => {
    const parsed = parseCommandLine(
      [
        "--container",
        "b",
        "--container-device",
        "nvidia.com/gpu=0",
        "--container-device=acme.com/fpga=all",
        "true",
        ":",
        "--container",
        "c",
        "true",
      ],
      deviceRules,
    );
    expect(requestFromOptions(parsed.components[0]!.options)?.devices).toEqual([
      "nvidia.com/gpu=0",
      "acme.com/fpga=all",
    ]);
    expect(requestFromOptions(parsed.components[1]!.options)?.devices).toBeUndefined();
  });
  it.each([
    [["--container-device", "", "true"]],
    [["--container-device", "nvidia.com/gpu=0", "--container-device=", "true"]],
  ])("an empty name is a usage error, also after a good one: %j", (argv) => {
    const request = () => requestFromOptions(parseCommandLine(argv, deviceRules).components[0]!.options);
    expect(request).toThrow(expect.objectContaining({ code: "ERR_USAGE" }));
  });
});
