import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { tempDir } from "../../../tests/helpers/tmp.js";

// The plugin's own tests: built with make's warnings as errors and GCC's static analyzer (its
// linter), then loaded by test/harness.c, which plays Slurm's side of the SPANK calls it makes.
// tests/slurm/spank.test.ts runs it under real srun and slurmstepd.
const pkg = join(dirname(fileURLToPath(import.meta.url)), "..");
const STRICT = ["-std=c11", "-D_POSIX_C_SOURCE=200809L", "-Wall", "-Wextra", "-Wpedantic", "-Werror"];

function run(argv: string[], env: NodeJS.ProcessEnv = {}): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(argv[0]!, argv.slice(1), { encoding: "utf8", cwd: pkg, env: { ...process.env, ...env } });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe("jobrt's SPANK plugin, loaded by a harness in Slurm's place", () => {
  let plugin: string;
  let harness: string;
  const drive = (context: string, plugstack: string[], options: string[], argv: string[], env = {}) =>
    run([harness, plugin, context, ...plugstack, "--options", ...options, "--argv", ...argv], env);

  beforeAll(() => {
    const dir = tempDir("jobrt-spank-build-");
    plugin = join(dir, "jobrtspank.so");
    harness = join(dir, "harness");
    const make = run(["make", "-s", `OUT=${plugin}`]);
    if (make.status !== 0) throw new Error(`make exited ${make.status}: ${make.stderr}`);
    const cc = run(["cc", ...STRICT, "-rdynamic", "-o", harness, "test/harness.c", "-ldl"]);
    if (cc.status !== 0) throw new Error(`cc harness.c exited ${cc.status}: ${cc.stderr}`);
  });

  it("GCC's analyzer finds nothing in the plugin or the harness", () => {
    for (const file of ["src/jobrtspank.c", "test/harness.c"]) {
      const r = run(["cc", ...STRICT, "-fanalyzer", "-c", "-o", "/dev/null", file]);
      expect(r.stderr).toBe("");
      expect(r.status).toBe(0);
    }
  });

  it("exports what Slurm's plugin loader looks for: spank type, the name jobrt, the two hooks", () => {
    const r = run(["nm", "-D", "--defined-only", plugin]);
    const names = r.stdout.split("\n").map((l) => l.split(" ").pop());
    expect(names).toEqual(
      expect.arrayContaining([
        "plugin_name",
        "plugin_type",
        "plugin_version",
        "slurm_spank_init",
        "slurm_spank_task_init",
      ]),
    );
    expect(readFileSync(plugin).includes(Buffer.from("jobrt\0"))).toBe(true);
  });

  it("registers every option of the generated header in srun, slurmstepd and sbatch", () => {
    const count = Number(
      /#define JOBRT_OPTION_COUNT (\d+)/.exec(readFileSync(join(pkg, "src/options.h"), "utf8"))?.[1],
    );
    expect(count).toBeGreaterThan(10);
    for (const context of ["local", "remote", "allocator"])
      expect(drive(context, ["jobrt=/bin/sh"], [], []).stdout).toBe(`init rc=0\nregistered ${count}\n`);
  });

  it("in a task: the options become JOBRT_SPANK_OPTIONS, the program JOBRT_SPANK_PROGRAM, argv[0] jobrt's entry", () => {
    const r = drive("remote", ["jobrt=/bin/sh"], ["runtime=oci", "container-image=reg#app:1"], ["/bin/echo", "hi"]);
    expect(r.stderr).toBe("");
    expect(r.stdout).toBe(
      [
        "init rc=0",
        "registered 15",
        "option runtime rc=0",
        "option container-image rc=0",
        "setenv JOBRT_SPANK_OPTIONS=runtime=oci\ncontainer-image=reg#app:1\n",
        "setenv JOBRT_SPANK_PROGRAM=/bin/echo",
        "task_init rc=0",
        "argv0 /bin/sh",
        "",
      ].join("\n"),
    );
  });

  it("a task of a step without the plugin's options is left as it is", () => {
    const r = drive("remote", ["jobrt=/bin/sh"], [], ["/bin/echo", "hi"]);
    expect(r.stdout).toBe("init rc=0\nregistered 15\ntask_init rc=0\nargv0 /bin/echo\n");
  });

  it.each([
    ["local", "container-save=/x", "jobrt: --container-save: jobrt has no saving the container as an image"],
    ["local", "container-remap-root", "jobrt: --container-remap-root: jobrt has no remapping the user to root"],
    ["allocator", "runtime=none", "jobrt: --runtime: sbatch and salloc do not take jobrt's options; give them to srun"],
    ["local", "container-workdir=/a\nb", "jobrt: --container-workdir: a value with a line break"],
  ])("%s %s: refused in one line naming the option", (context, option, line) => {
    const r = drive(context, [], [option], []);
    expect(r.stdout).toContain(`option ${option.split("=")[0]} rc=-1\n`);
    expect(r.stderr).toBe(`${line}\n`);
  });

  it("under srun --multi-prog (argv is the file's name and text): the task fails, it would run without jobrt", () => {
    const r = drive("remote", ["jobrt=/bin/sh"], ["runtime=none"], ["multi.conf", "0 /bin/true\n1 /bin/false\n"]);
    expect(r.stdout).toContain("task_init rc=-1\nargv0 multi.conf\n");
    expect(r.stderr).toBe(
      "jobrt: srun --multi-prog does not take jobrt's options: give each line jobrt exec and its options\n",
    );
  });

  it("a task of a heterogeneous step (SLURM_HET_SIZE): fails, since Slurm gives every component the options", () => {
    const r = drive("remote", ["jobrt=/bin/sh"], ["runtime=none"], ["/bin/echo"], { SLURM_HET_SIZE: "2" });
    expect(r.stdout).toContain("task_init rc=-1\nargv0 /bin/echo\n");
    expect(r.stderr).toBe(
      "jobrt: a heterogeneous step does not take jobrt's SPANK options (Slurm gives them to every component alike): give each component jobrt exec and its options\n",
    );
  });

  it("a plugstack.conf line without jobrt=, or with another argument, fails slurmstepd's init in one line", () => {
    expect(drive("remote", [], [], []).stderr).toBe(
      "jobrt: plugstack.conf: the plugin needs jobrt=/absolute/path/of/jobrt\n",
    );
    const r = drive("remote", ["jobrt=relative/jobrt"], [], []);
    expect(r.stdout).toMatch(/^init rc=-1\n/);
    expect(r.stderr).toBe(
      "jobrt: plugstack.conf: jobrt=relative/jobrt: the plugin takes jobrt=/absolute/path/of/jobrt only\n",
    );
  });

  it("jobrt= naming no program fails the task in one line before its program is touched", () => {
    const r = drive("remote", ["jobrt=/nonexistent/jobrt"], ["runtime=none"], ["/bin/echo"]);
    expect(r.stdout).toContain("task_init rc=-1\nargv0 /bin/echo\n");
    expect(r.stdout).not.toContain("setenv");
    expect(r.stderr).toBe("jobrt: plugstack.conf jobrt=/nonexistent/jobrt: No such file or directory\n");
  });
});
