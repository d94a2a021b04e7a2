import { describe, expect, it } from "vitest";
import { jobrt } from "../helpers/jobrt.js";

/** The commands `jobrt --help` lists: what a user can ask `jobrt help` about. */
async function listedCommands(): Promise<string[]> {
  const { stdout } = await jobrt(["--help"]);
  const section = stdout.split(/^Commands:\n/m)[1]?.split(/\n\n/)[0] ?? "";
  return [...section.matchAll(/^ {2}([a-z]+) /gm)].map((m) => m[1] as string);
}

describe("jobrt help CMD", () => {
  it("prints exactly what jobrt CMD --help prints, exit 0, for every listed command", async () => {
    const commands = await listedCommands();
    expect(commands).toEqual(expect.arrayContaining(["run", "exec", "gc", "check", "runtimes", "images", "ps"]));
    for (const command of commands) {
      const [viaHelp, viaOption] = await Promise.all([jobrt(["help", command]), jobrt([command, "--help"])]);
      expect(viaOption.code, command).toBe(0);
      expect(viaHelp.code, command).toBe(0);
      expect(viaHelp.stdout, command).toBe(viaOption.stdout);
      expect(viaHelp.stdout, command).toMatch(new RegExp(`^Usage: jobrt ${command}\\b`));
      expect(viaHelp.stderr, command).toBe("");
    }
  });

  it("no help line is wider than 100 columns (exec's list of run's options is wrapped)", async () => {
    for (const command of ["", ...(await listedCommands())]) {
      const { stdout } = await jobrt(command === "" ? ["--help"] : [command, "--help"]);
      for (const line of stdout.split("\n")) expect(line.length, `${command}: ${line}`).toBeLessThanOrEqual(100);
    }
  });

  it("an unknown command is one line on stderr and the usage-error status 2", async () => {
    const result = await jobrt(["help", "frobnicate"]);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe("");
    expect(result.stderr).toBe(
      'jobrt: help: unknown command "frobnicate" (commands: run, exec, runtimes, check, gc, ps, images, completion, help)\n',
    );
  });

  it("jobrt help alone is jobrt --help", async () => {
    const [plain, option] = await Promise.all([jobrt(["help"]), jobrt(["--help"])]);
    expect(plain.code).toBe(0);
    expect(plain.stdout).toBe(option.stdout);
  });
});
