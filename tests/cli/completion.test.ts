import { mkdirSync, symlinkSync } from "node:fs";
import { dirname, join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { jobrt, jobrtBin, runProgram, tempDir } from "../helpers/jobrt.js";

// The completion scripts are run by the real shells, with `jobrt` on PATH as a site has it.
let env: NodeJS.ProcessEnv;
let home: string;
beforeAll(() => {
  home = tempDir("jobrt-completion-");
  mkdirSync(join(home, "bin"));
  symlinkSync(jobrtBin, join(home, "bin/jobrt"));
  env = {
    ...process.env,
    PATH: `${join(home, "bin")}:${dirname(process.execPath)}:${process.env.PATH}`,
    HOME: home,
    ZDOTDIR: home,
    JOBRT_CONF_DIR: tempDir("jobrt-noconf-"),
  };
});

/** What bash's completion offers for the words typed so far (the last one being completed). */
async function bashComplete(words: string[]): Promise<string[]> {
  const script = `source <(jobrt completion bash) || exit 9
COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 ))
_jobrt || exit 8
printf '%s\\n' "\${COMPREPLY[@]}"`;
  const result = await runProgram(["bash", "--norc", "--noprofile", "-c", script, "bash", ...words], { env });
  expect(result.stderr, words.join(" ")).toBe("");
  expect(result.code, words.join(" ")).toBe(0);
  return result.stdout.split("\n").filter((w) => w !== "");
}

/** The long and short options a help text names on its usage and option lines. */
function helpOptions(help: string): string[] {
  const lines = help.split("\n").filter((line) => /^(Usage:|\s+(-|jobrt ))/.test(line));
  return [
    ...new Set(
      lines.flatMap((line) =>
        [...line.matchAll(/(?<![\w-])(--[a-z][a-z0-9-]*|-[a-zA-Z]\b)/g)].map((m) => m[1] as string),
      ),
    ),
  ];
}

describe("jobrt completion bash", () => {
  it("completes every command jobrt --help lists", async () => {
    const { stdout } = await jobrt(["--help"]);
    const listed = [...(stdout.split(/^Commands:\n/m)[1]?.split("\n\n")[0] ?? "").matchAll(/^ {2}([a-z]+) /gm)].map(
      (m) => m[1],
    );
    expect(listed.length).toBeGreaterThan(6);
    expect((await bashComplete(["jobrt", ""])).sort()).toEqual([...listed, "--help", "--version"].sort());
    expect(await bashComplete(["jobrt", "ru"])).toEqual(["run", "runtimes"]);
  });

  it("completes each command's options: every option its --help names", async () => {
    for (const command of ["run", "exec", "gc", "ps", "runtimes", "images"]) {
      const help = (await jobrt([command, "--help"])).stdout;
      const offered = await bashComplete(["jobrt", command, "-"]);
      expect(offered, command).toEqual(expect.arrayContaining(helpOptions(help).filter((o) => o !== "--version")));
      expect(offered, command).toContain("--help");
    }
    expect(await bashComplete(["jobrt", "run", "-n", "4", "--container-i"])).toEqual([
      "--container-image",
      "--container-id",
    ]);
    expect(await bashComplete(["jobrt", "check", "--ch"])).toEqual(["--chdir"]);
  });

  it("offers the options a command takes that its help does not name (jobrt ps -v), from the option table", async () => {
    expect(await bashComplete(["jobrt", "ps", "-"])).toEqual(expect.arrayContaining(["--verbose", "-v"]));
    expect((await jobrt(["ps", "-v"], { env })).code).toBe(0);
  });

  it("completes --runtime with the names jobrt runtimes --json lists", async () => {
    const names = (
      JSON.parse((await jobrt(["runtimes", "--json"], { env })).stdout) as { runtimes: { name: string }[] }
    ).runtimes.map((r) => r.name);
    expect(names).toContain("oci");
    expect((await bashComplete(["jobrt", "run", "--runtime", ""])).sort()).toEqual([...names].sort());
    expect(await bashComplete(["jobrt", "exec", "--runtime", "o"])).toEqual(["oci"]);
  });

  it("completes a command's words, and files for a path option", async () => {
    expect(await bashComplete(["jobrt", "images", ""])).toEqual(["list", "prune"]);
    expect(await bashComplete(["jobrt", "completion", ""])).toEqual(["bash", "zsh"]);
    expect(await bashComplete(["jobrt", "help", "ima"])).toEqual(["images"]);
    mkdirSync(join(home, "bundle-a"));
    expect(await bashComplete(["jobrt", "run", "--container", join(home, "bundle-")])).toEqual([
      join(home, "bundle-a"),
    ]);
  });
});

describe("jobrt completion zsh", () => {
  it("loads under compinit without a word on stderr and registers _jobrt for jobrt", async () => {
    const script = `autoload -U compinit && compinit -u -d "$HOME/zcompdump" || exit 9
source <(jobrt completion zsh) || exit 8
print -r -- "$_comps[jobrt]" "$+functions[_jobrt]" "$_jobrt_opts_run"`;
    const result = await runProgram(["zsh", "-f", "-c", script], { env });
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    const [fn, defined, ...runOptions] = result.stdout.trim().split(" ");
    expect([fn, defined]).toEqual(["_jobrt", "1"]);
    expect(runOptions).toEqual(expect.arrayContaining(helpOptions((await jobrt(["run", "--help"])).stdout)));
  });
});

describe("jobrt completion, bad input", () => {
  it("an unknown shell is one line and exit 2", async () => {
    const result = await jobrt(["completion", "fish"]);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe("");
    expect(result.stderr.trim().split("\n")).toHaveLength(1);
    expect(result.stderr).toContain('unknown shell "fish"');
  });
});
