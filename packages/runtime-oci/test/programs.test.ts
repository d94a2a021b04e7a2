/**
 * The create/start program that is not TypeScript (src/createstart.pl, watchdog included) passes
 * its language's own check (package.json's build copies it to dist/, beside the package's index.js).
 */
import { spawnSync } from "node:child_process";
import { describe, expect, test } from "vitest";
import { findProgram } from "../src/conf.js";
import { createStartArgv } from "../src/createstart.js";
import { exitStatuses, tracedProgram } from "../../../tests/helpers/strace.js";
import { tempDir } from "../../../tests/helpers/tmp.js";

const src = (name: string) => new URL(`../src/${name}`, import.meta.url).pathname;

describe("the create/start program in its own file", () => {
  test("createstart.pl compiles (perl -c, with strict)", () => {
    const r = spawnSync("perl", ["-f", "-c", src("createstart.pl")], { encoding: "utf8" });
    expect(r.stderr).toBe(`${src("createstart.pl")} syntax OK\n`);
    expect(r.status).toBe(0);
  });
});

describe("createstart.pl: a child whose exec fails", () => {
  test("exits 127 (EXEC_FAILED): the missing-command look after a failed RunTimeCreate", () => {
    const perl = findProgram("perl", process.env.PATH);
    if (perl === undefined) throw new Error("createstart.pl needs perl on PATH");
    const taskDir = tempDir("jobrt-createstart-exec-");
    const argv = createStartArgv(
      perl,
      { taskDir, create: "exit 3", kill: "true", delete: "true" },
      {
        start: "true",
        startProblem: "",
        query: "true",
        kill: "true",
        delete: "true",
        timeouts: { create: 10_000, start: 10_000, query: 10_000, kill: 10_000, delete: 10_000 },
        graceMs: 1000,
        verbose: false,
      },
    );
    if (argv === undefined) throw new Error(`no prctl number for ${process.arch}`);
    // The look's argv is the last three arguments: a program that is not there instead.
    argv.splice(-3, 3, "/nonexistent/jobrt-lookup");
    const traced = tracedProgram(argv[0] as string);
    const r = spawnSync(traced.path, argv.slice(1), { encoding: "utf8" });
    expect(r.stderr).toMatch(/^jobrt-oci: RunTimeCreate exited with status 3: exit 3\n/);
    expect(r.status).toBe(125);
    // createstart.pl 125, the watchdog 0, RunTimeCreate's shell 3, the teardown's shells 0, the look 127.
    expect(exitStatuses(traced.trace).filter((s) => s !== 0 && s !== 3 && s !== 125)).toEqual([127]);
  });
});
