import { execFileSync, spawn } from "node:child_process";
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { once } from "node:events";
import { dirname, join, relative } from "node:path";
import { describe, expect, test } from "vitest";
import { jobrtBin, repoRoot, runProgram } from "./jobrt.js";
import { removeTree, tempDir, tempRoot } from "./tmp.js";

const NOBODY = 65534;

function mount(args: string[]): () => void {
  const target = args[args.length - 1] as string;
  execFileSync("mount", args);
  return () => execFileSync("umount", ["-l", target]);
}

// A vitest run of its own: TMPDIR points its run dir into a dir of this test, so what it leaves is
// seen here and nothing of other runs on the machine is.
/** `interruptOn`: send vitest SIGINT (a Ctrl-C) once its output shows this text. */
async function nestedRun(
  body: string,
  interruptOn?: string,
): Promise<{ out: string; code: number | null; tmp: string }> {
  const project = tempDir("jobrt-tmptest-project-");
  const tmp = tempDir("jobrt-tmptest-tmpdir-");
  chmodSync(tmp, 0o1777);
  const config = join(repoRoot, "tests/helpers/tmpconfig.ts");
  writeFileSync(
    join(project, "vitest.config.mts"),
    `import { tempDirs } from ${JSON.stringify(config)};\nexport default { test: { include: ["*.check.ts"], globals: true, ...tempDirs } };\n`,
  );
  writeFileSync(
    join(project, "leak.check.ts"),
    `import { execFileSync } from "node:child_process";\nimport { mkdirSync } from "node:fs";\nimport { tempDir } from ${JSON.stringify(join(repoRoot, "tests/helpers/tmp.ts"))};\n${body}\n`,
  );
  const env: Record<string, string | undefined> = {
    ...process.env,
    TMPDIR: tmp,
    JOBRT_TEST_RUN_TMP: "",
    JOBRT_TEST_TMP: "",
    JOBRT_KEEP_TMP: "",
    NO_COLOR: "1",
    FORCE_COLOR: undefined,
  };
  const vitest = join(repoRoot, "node_modules/vitest/vitest.mjs");
  if (interruptOn === undefined) {
    const r = await runProgram([process.execPath, vitest, "run", "--root", project], {
      env,
      cwd: project,
      timeoutMs: 120_000,
    });
    return { out: r.stdout + r.stderr, code: r.code, tmp };
  }
  const child = spawn(process.execPath, [vitest, "run", "--root", project], {
    env,
    cwd: project,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let interrupted = false;
  const collect = (d: Buffer) => {
    out += d.toString();
    if (interrupted || !out.includes(interruptOn)) return;
    interrupted = true;
    child.kill("SIGINT");
  };
  child.stdout.on("data", collect);
  child.stderr.on("data", collect);
  const [code] = (await once(child, "close")) as [number | null];
  return { out, code, tmp };
}

describe("removeTree: what a test leaves is removed, and nothing else", () => {
  test("a planted symlink is removed, never followed", () => {
    const outside = tempDir("jobrt-tmptest-outside-");
    writeFileSync(join(outside, "keep"), "x");
    const tree = tempDir("jobrt-tmptest-");
    mkdirSync(join(tree, "a"));
    symlinkSync(outside, join(tree, "a", "dir-link"));
    symlinkSync(join(outside, "keep"), join(tree, "file-link"));
    expect(removeTree(tree)).toEqual([]);
    expect(existsSync(tree)).toBe(false);
    expect(readFileSync(join(outside, "keep"), "utf8")).toBe("x");
    // The dir itself given as a symlink: the link goes, its target stays.
    const link = join(tempDir("jobrt-tmptest-"), "link");
    symlinkSync(outside, link);
    expect(removeTree(link)).toEqual([]);
    expect(readFileSync(join(outside, "keep"), "utf8")).toBe("x");
  });

  test("a dir with a mount below it is left whole and named", () => {
    const data = tempDir("jobrt-tmptest-data-");
    writeFileSync(join(data, "precious"), "x");
    const tree = tempDir("jobrt-tmptest-");
    mkdirSync(join(tree, "rootfs", "mnt"), { recursive: true });
    writeFileSync(join(tree, "other"), "y");
    const unmount = mount(["--bind", data, join(tree, "rootfs", "mnt")]);
    try {
      const problems = removeTree(tree);
      expect(problems).toEqual([
        `${tree}: left in place, mounted below it: ${join(tree, "rootfs", "mnt")} (unmount, then remove it)`,
      ]);
      expect(existsSync(join(tree, "other"))).toBe(true);
      expect(readFileSync(join(data, "precious"), "utf8")).toBe("x");
    } finally {
      unmount();
    }
    expect(removeTree(tree)).toEqual([]);
    expect(readFileSync(join(data, "precious"), "utf8")).toBe("x");
  });

  test("a mount point whose name needs escaping in mountinfo is still seen", () => {
    const tree = tempDir("jobrt-tmptest-");
    const odd = join(tree, "a b\\c");
    mkdirSync(odd);
    const unmount = mount(["-t", "tmpfs", "tmpfs", odd]);
    try {
      expect(removeTree(tree)[0]).toContain("mounted below it");
      expect(existsSync(odd)).toBe(true);
    } finally {
      unmount();
    }
    expect(removeTree(tree)).toEqual([]);
  });

  test("dirs made read-only and owned by nobody are removed, also by nobody itself", async () => {
    const parent = tempDir("jobrt-tmptest-");
    chownSync(parent, NOBODY, NOBODY);
    const trees = ["by-root", "by-nobody"].map((name) => {
      const tree = join(parent, name);
      mkdirSync(join(tree, "ro", "deep"), { recursive: true });
      writeFileSync(join(tree, "ro", "deep", "file"), "x");
      writeFileSync(join(tree, "ro", "file"), "x", { mode: 0o400 });
      for (const d of [tree, join(tree, "ro"), join(tree, "ro", "deep")]) chownSync(d, NOBODY, NOBODY);
      mkdirSync(join(tree, "unsearchable"));
      writeFileSync(join(tree, "unsearchable", "file"), "x");
      chownSync(join(tree, "unsearchable"), NOBODY, NOBODY);
      chmodSync(join(tree, "unsearchable"), 0o400); // listable, but no entry can be looked up
      chmodSync(join(tree, "ro", "deep"), 0o500);
      chmodSync(join(tree, "ro"), 0o100); // not even listable
      return tree;
    });
    expect(removeTree(trees[0] as string)).toEqual([]);
    // The compiled helper, run as nobody: no root privilege makes the read-only dirs removable.
    const helper = join(repoRoot, "packages/testkit/dist/tempdirs.js");
    const script = `import(${JSON.stringify(helper)}).then((m) => console.log(JSON.stringify(m.removeTempDir(${JSON.stringify(trees[1])}))))`;
    const r = await runProgram([process.execPath, "-e", script], { uid: NOBODY, gid: NOBODY, cwd: "/" });
    expect(r).toMatchObject({ code: 0, stdout: "[]\n" });
    expect(readdirSync(parent)).toEqual([]);
  });

  test("a file or a missing path is fine too", () => {
    const file = join(tempDir("jobrt-tmptest-"), "f");
    writeFileSync(file, "x");
    expect(removeTree(file)).toEqual([]);
    expect(removeTree(file)).toEqual([]);
  });
});

describe("the per-file and per-run dirs", () => {
  test("this file's temp dirs are in a 1777 dir of its own inside this run's 0755 dir", () => {
    const run = process.env.JOBRT_TEST_RUN_TMP as string;
    expect(dirname(tempRoot())).toBe(run);
    expect(dirname(tempDir())).toBe(tempRoot());
    expect(statSync(run).mode & 0o7777).toBe(0o755);
    expect(statSync(tempRoot()).mode & 0o7777).toBe(0o1777);
    expect(readFileSync(join(tempRoot(), ".test-file"), "utf8")).toBe(`${import.meta.filename}\n`);
  });

  test("a clean run leaves nothing and passes", async () => {
    const r = await nestedRun(`test("t", () => { mkdirSync(tempDir("jobrt-x-") + "/sub"); });`);
    expect(r.code, r.out).toBe(0);
    expect(readdirSync(r.tmp).filter((n) => n.startsWith("jobrt-"))).toEqual([]);
  });

  test("a mount left below a test's dir fails the file and the run, names the file, and deletes nothing", async () => {
    const r = await nestedRun(
      `test("t", () => { const d = tempDir("jobrt-x-") + "/m"; mkdirSync(d); execFileSync("mount", ["-t", "tmpfs", "tmpfs", d]); execFileSync("touch", [d + "/precious"]); console.log("MOUNTED " + d); });`,
    );
    const mounted = /MOUNTED (\S+)/.exec(r.out)?.[1];
    expect(mounted, r.out).toBeDefined();
    try {
      expect(r.code, r.out).not.toBe(0);
      expect(r.out).toContain("this test file left:\n  temp dir left in place: ");
      expect(r.out).toMatch(/leak check \(.*\):\n\s+left by test files: f-\w+ \(.*leak\.check\.ts\)/);
      expect(existsSync(join(mounted as string, "precious"))).toBe(true);
    } finally {
      execFileSync("umount", ["-l", mounted as string]);
    }
  });

  test("a dir left in the run's dir after every file ended fails the run though every test passed", async () => {
    const r = await nestedRun(`test("t", () => { mkdirSync(process.env.JOBRT_TEST_RUN_TMP + "/stray"); });`);
    expect(r.code, r.out).not.toBe(0);
    expect(r.out).toContain("Tests  1 passed");
    expect(r.out).toMatch(/leak check \(.*\):\n\s+left by test files: stray \(unknown test file\)/);
    expect(readdirSync(r.tmp).filter((n) => n.startsWith("jobrt-"))).toEqual([]);
  });
});

describe("processes a test file leaves running", () => {
  test("are killed with their step's cgroup when the file ends, and fail the file", async () => {
    const body = `import { spawn } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
test("t", async () => {
  const conf = tempDir("jobrt-c-");
  writeFileSync(conf + "/jobrt.conf", "SpoolDir=" + conf + "/spool\\n");
  const argv = ["--", ${JSON.stringify(jobrtBin)}, "run", "--runtime", "none", "sh", "-c", "echo up > " + conf + "/up; exec sleep 600"];
  spawn(process.execPath, argv, { env: { ...process.env, JOBRT_CONF_DIR: conf }, detached: true, stdio: "ignore" }).unref();
  while (!existsSync(conf + "/up")) await new Promise((r) => setTimeout(r, 50));
});`;
    const r = await nestedRun(body);
    expect(r.code, r.out).not.toBe(0);
    expect(r.out).toMatch(
      /this test file left:\n(\s+still running after the file's tests: pid \d+ \((node|sleep), .*\): killed\n){2}/,
    );
    const cgroups = [...r.out.matchAll(/cgroup (\/sys\/fs\/cgroup\/\S+)/g)].map((m) => m[1] as string);
    expect(cgroups.length, r.out).toBeGreaterThan(0);
    expect(cgroups.filter((c) => existsSync(c))).toEqual([]);
    expect(r.out).not.toContain("still in use");
  });
});

describe("test files that end things their own way", () => {
  test("a process the file's afterAll has just told to go (a lock holder's stdin closed) is given time and passes", async () => {
    const body = `import { spawn } from "node:child_process";
const holder = spawn("sh", ["-c", "cat >/dev/null; sleep 0.5"], { stdio: ["pipe", "ignore", "ignore"] });
afterAll(() => holder.stdin.end());
test("t", () => {});`;
    const r = await nestedRun(body);
    expect(r.code, r.out).toBe(0);
  });

  test("a worker that drops root for good still gets its dir removed (by the run), and the run passes", async () => {
    const body = `process.setgroups([65534]);
process.setgid(65534);
process.setuid(65534);
test("t", () => { mkdirSync(tempDir("jobrt-x-") + "/sub"); });`;
    const r = await nestedRun(body);
    expect(r.code, r.out).toBe(0);
    expect(readdirSync(r.tmp).filter((n) => n.startsWith("jobrt-"))).toEqual([]);
  });
});

describe("an interrupted run", () => {
  test("Ctrl-C still ends the run's processes and removes its dirs", async () => {
    const body = `import { spawn } from "node:child_process";
test("t", async () => {
  spawn("sleep", ["600"], { detached: true, stdio: "ignore" }).unref();
  console.log("STARTED");
  await new Promise((r) => setTimeout(r, 600_000));
}, 700_000);`;
    const r = await nestedRun(body, "STARTED");
    expect(r.code, r.out).not.toBe(0);
    expect(r.out).toMatch(
      /leak check \(.*\):\n\s+still running at the end of the run: pid \d+ \(sleep, .*\): killed\n\s+left by test files: f-\w+ \(.*leak\.check\.ts\)/,
    );
    expect(readdirSync(r.tmp).filter((n) => n.startsWith("jobrt-"))).toEqual([]);
  });
});

describe("every temp dir of the tests goes through tempDir()", () => {
  const roots = [
    "tests",
    ...["packages", "examples"].flatMap((d) => readdirSync(join(repoRoot, d)).map((p) => `${d}/${p}/test`)),
  ].filter((d) => existsSync(join(repoRoot, d)));
  const skip = new Set(["node_modules", "dist", ".turbo"]);

  function* files(dir: string): Generator<string> {
    for (const name of readdirSync(dir)) {
      if (skip.has(name)) continue;
      const path = join(dir, name);
      if (statSync(path).isDirectory()) yield* files(path);
      else if (/\.(ts|mts|mjs)$/.test(name) && path !== import.meta.filename) yield path;
    }
  }

  test("no test makes one in the system temp dir itself", () => {
    const direct = /mkdtemp(Sync)?\(\s*(join\(\s*(tmpdir\(\)|["'`]\/tmp)|["'`]\/tmp)/;
    // The run's own dir; the fixture plugins whose flaw is a temp dir (the conformance check sets TMPDIR).
    const allowed = new Set([
      "tests/helpers/tmprun.ts",
      "tests/helpers/tmpsetup.ts",
      "packages/testkit/test/fixtures/plugins.ts",
      "examples/jobrt-runtime-bwrap/test/flaws/plugins.ts",
    ]);
    const found: string[] = [];
    for (const root of roots) {
      for (const file of files(join(repoRoot, root))) {
        const rel = relative(repoRoot, file);
        readFileSync(file, "utf8")
          .split("\n")
          .forEach((line, i) => {
            if (direct.test(line) && !allowed.has(rel))
              found.push(`${rel}:${i + 1}: ${line.trim()} (use tempDir() from tests/helpers/tmp.ts)`);
          });
      }
    }
    expect(found).toEqual([]);
  });

  test("every vitest project is wired to tests/helpers/tmpconfig.ts", () => {
    const projects = [
      "tests",
      ...["packages", "examples"].flatMap((d) => readdirSync(join(repoRoot, d)).map((p) => `${d}/${p}`)),
    ];
    const unwired = projects.filter(
      (p) =>
        existsSync(join(repoRoot, p, "vitest.config.ts")) &&
        !/tempDirs/.test(readFileSync(join(repoRoot, p, "vitest.config.ts"), "utf8")),
    );
    expect(unwired).toEqual([]);
  });
});
