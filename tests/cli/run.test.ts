import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { failureLine, jobrt, jobrtBin, repoRoot, runProgram, tempDir } from "../helpers/jobrt.js";
import { NO_STEP } from "../helpers/mpicheck.js";

const runtimeNoneVersion = (
  JSON.parse(readFileSync(join(repoRoot, "packages/runtime-none/package.json"), "utf8")) as { version: string }
).version;

/** A conf dir whose jobrt.conf puts the spool in a temp dir, so each test can check for leftovers. */
function site(extra = "") {
  const dir = tempDir("jobrt-cli-");
  const spool = join(dir, "spool");
  writeFileSync(join(dir, "jobrt.conf"), `SpoolDir=${spool}\nKillWait=2\n${extra}`);
  return { dir, spool, env: { JOBRT_CONF_DIR: dir } };
}

function spoolLeftovers(spool: string): string[] {
  if (!existsSync(spool)) return [];
  const jobs = join(spool, "jobs");
  const left = readdirSync(spool).filter((f) => f !== "jobs");
  if (existsSync(jobs))
    left.push(
      ...readdirSync(jobs)
        .filter((f) => f !== "next-jobid" && f !== "node")
        .map((f) => `jobs/${f}`),
    );
  return left;
}

async function waitUntil(check: () => boolean, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("jobrt run: tasks and environment", () => {
  it("runs N tasks with Slurm-compatible variables", async () => {
    const s = site("NodeName=node7\n");
    const r = await jobrt(
      [
        "run",
        "-n",
        "4",
        "--runtime",
        "none",
        "--jobid",
        "42",
        "sh",
        "-c",
        'echo "$SLURM_PROCID $SLURM_LOCALID $SLURM_NTASKS $SLURM_JOB_ID $SLURM_STEP_ID $SLURMD_NODENAME $SLURM_RUNTIME $SLURM_NNODES $SLURM_NODEID"',
      ],
      { env: s.env },
    );
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout.trim().split("\n").sort()).toEqual([0, 1, 2, 3].map((i) => `${i} ${i} 4 42 0 node7 none 1 0`));
    expect(spoolLeftovers(s.spool)).toEqual([]);
  });

  it("gives concurrent steps of one job different step ids, and fresh jobs fresh ids", async () => {
    const s = site();
    const runs = await Promise.all(
      [1, 2, 3].map(() =>
        jobrt(["run", "--runtime", "none", "--jobid", "9", "sh", "-c", "echo $SLURM_STEP_ID; sleep 0.3"], {
          env: s.env,
        }),
      ),
    );
    expect(runs.map((r) => r.stdout.trim()).sort()).toEqual(["0", "1", "2"]);
    const fresh = await Promise.all(
      [1, 2].map(() => jobrt(["run", "--runtime", "none", "sh", "-c", "echo $SLURM_JOB_ID"], { env: s.env })),
    );
    const ids = fresh.map((r) => Number(r.stdout.trim()));
    expect(ids[0]).not.toBe(ids[1]);
    expect(ids.every((i) => i >= 1)).toBe(true);
  });

  it("never hands a step id out twice while the job runs, also after the step that had it ended (as Slurm)", async () => {
    const s = site();
    const done = join(s.dir, "done");
    const step = async () =>
      (
        await jobrt(["run", "--runtime", "none", "--jobid", "12", "sh", "-c", "echo $SLURM_STEP_ID"], { env: s.env })
      ).stdout.trim();
    const long = jobrt(
      [
        "run",
        "--runtime",
        "none",
        "--jobid",
        "12",
        "sh",
        "-c",
        `echo $SLURM_STEP_ID; while [ ! -e ${done} ]; do sleep 0.05; done`,
      ],
      { env: s.env },
    );
    try {
      await waitUntil(() => existsSync(join(s.spool, "jobs/12/step-0")));
      expect(await step()).toBe("1");
      expect(await step()).toBe("2");
    } finally {
      // Ends the long step also when an expectation failed: nothing of this test outlives it.
      writeFileSync(done, "");
    }
    expect((await long).stdout).toBe("0\n");
    // The job ended with its last step: nothing of it stays, and the id starts a new job.
    expect(spoolLeftovers(s.spool)).toEqual([]);
    expect(await step()).toBe("0");
  });

  it("labels lines with -l and never interleaves lines mid-line", async () => {
    const s = site();
    // Each task writes 200 lines in small pieces; labelled whole lines must come out intact.
    const script = 'i=0; while [ $i -lt 200 ]; do printf "task-$SLURM_PROCID-"; printf "line-$i\\n"; i=$((i+1)); done';
    const r = await jobrt(["run", "-n", "4", "-l", "--runtime", "none", "sh", "-c", script], { env: s.env });
    expect(r.code).toBe(0);
    const lines = r.stdout.trim().split("\n");
    expect(lines).toHaveLength(800);
    for (const line of lines) expect(line).toMatch(/^(\d): task-\1-line-\d+$/);
  });

  it("--export=NONE passes no user variables; --export=A,B=x passes only those", async () => {
    const s = site();
    const env = { ...s.env, JOBRT_SECRET: "s3cret", KEEP: "kept" };
    const none = await jobrt(["run", "--runtime", "none", "--export=NONE", "/usr/bin/env"], { env });
    expect(none.code).toBe(0);
    expect(none.stdout).not.toContain("JOBRT_SECRET");
    expect(none.stdout).toContain("SLURM_PROCID=0");
    const some = await jobrt(["run", "--runtime", "none", "--export", "KEEP,EXTRA=x y", "/usr/bin/env"], { env });
    expect(some.stdout).toContain("KEEP=kept\n");
    expect(some.stdout).toContain("EXTRA=x y\n");
    expect(some.stdout).not.toContain("JOBRT_SECRET");
    const all = await jobrt(["run", "--runtime", "none", "/usr/bin/env"], { env });
    expect(all.stdout).toContain("JOBRT_SECRET=s3cret");
  });

  it("passes Node-looking arguments such as --env-file= to the task untouched", async () => {
    const s = site();
    const r = await jobrt(["run", "--runtime", "none", "echo", "--env-file=/nonexistent", "--inspect"], { env: s.env });
    expect(r.stderr).toBe("");
    expect(r.stdout).toBe("--env-file=/nonexistent --inspect\n");
    const direct = await runProgram([jobrtBin, "run", "--runtime", "none", "echo", "--env-file=/nonexistent"], {
      env: { ...process.env, ...s.env },
    });
    expect(direct.stdout).toBe("--env-file=/nonexistent\n");
    expect(direct.code).toBe(0);
  });

  it("-D sets the working directory; a missing one is a launch error", async () => {
    const s = site();
    const dir = tempDir();
    const r = await jobrt(["run", "--runtime", "none", "-D", dir, "pwd"], { env: s.env });
    expect(r.stdout.trim()).toBe(dir);
    const bad = await jobrt(["run", "--runtime", "none", "-D", "/nonexistent/dir", "pwd"], { env: s.env });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toBe("jobrt: task 0: cannot change to directory /nonexistent/dir: no such directory\n");
  });
});

describe("jobrt run: output and input files", () => {
  it("-o with %t writes one file per task; -e splits stderr; patterns expand", async () => {
    const s = site("NodeName=nodex\n");
    const dir = tempDir();
    const r = await jobrt(
      [
        "run",
        "-n",
        "3",
        "--runtime",
        "none",
        "--jobid",
        "77",
        "-o",
        join(dir, "out-%j.%s.%t.%N.%n.%%"),
        "-e",
        join(dir, "err-%3t"),
        "sh",
        "-c",
        "echo out $SLURM_PROCID; echo err $SLURM_PROCID >&2",
      ],
      { env: s.env },
    );
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("");
    expect(readdirSync(dir).sort()).toEqual([
      "err-000",
      "err-001",
      "err-002",
      "out-77.0.0.nodex.0.%",
      "out-77.0.1.nodex.0.%",
      "out-77.0.2.nodex.0.%",
    ]);
    for (const t of [0, 1, 2]) {
      expect(readFileSync(join(dir, `out-77.0.${t}.nodex.0.%`), "utf8")).toBe(`out ${t}\n`);
      expect(readFileSync(join(dir, `err-00${t}`), "utf8")).toBe(`err ${t}\n`);
    }
  });

  it("-o without %t collects all tasks (and stderr) in one file, whole lines, labelled with -l", async () => {
    const s = site();
    const out = join(tempDir(), "all.txt");
    const r = await jobrt(
      [
        "run",
        "-n",
        "3",
        "-l",
        "--runtime",
        "none",
        "-o",
        out,
        "sh",
        "-c",
        "echo o$SLURM_PROCID; echo e$SLURM_PROCID >&2",
      ],
      { env: s.env },
    );
    expect(r.code).toBe(0);
    expect(readFileSync(out, "utf8").trim().split("\n").sort()).toEqual([
      "0: e0",
      "0: o0",
      "1: e1",
      "1: o1",
      "2: e2",
      "2: o2",
    ]);
  });

  it("-i all copies stdin to every task; -i N only to task N; -i none gives none; -i FILE reads a file", async () => {
    const s = site();
    const all = await jobrt(["run", "-n", "2", "-l", "--runtime", "none", "cat"], { env: s.env, input: "hello\n" });
    expect(all.stdout.split("\n").filter(Boolean).sort()).toEqual(["0: hello", "1: hello"]);
    const one = await jobrt(["run", "-n", "2", "-l", "-i", "1", "--runtime", "none", "sh", "-c", "cat; echo end"], {
      env: s.env,
      input: "only-one\n",
    });
    expect(one.stdout.split("\n").filter(Boolean).sort()).toEqual(["0: end", "1: end", "1: only-one"]);
    const none = await jobrt(["run", "-i", "none", "--runtime", "none", "sh", "-c", "cat; echo done"], {
      env: s.env,
      input: "ignored\n",
    });
    expect(none.stdout).toBe("done\n");
    const dir = tempDir();
    for (const t of [0, 1]) writeFileSync(join(dir, `in-${t}`), `file ${t}\n`);
    const file = await jobrt(["run", "-n", "2", "-l", "-i", join(dir, "in-%t"), "--runtime", "none", "cat"], {
      env: s.env,
    });
    expect(file.stdout.split("\n").filter(Boolean).sort()).toEqual(["0: file 0", "1: file 1"]);
    const bad = await jobrt(["run", "-n", "2", "-i", "5", "--runtime", "none", "cat"], { env: s.env });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe("jobrt: --input: task 5 does not exist (the step has 2 tasks)\n");
  });
});

describe("jobrt run: exit status", () => {
  it.each([
    [["true"], 0],
    [["sh", "-c", "exit 3"], 3],
    [["sh", "-c", "kill -9 $$"], 137],
    [["sh", "-c", "kill -TERM $$"], 143],
  ])("%j exits %i", async (argv, status) => {
    const s = site();
    const r = await jobrt(["run", "--runtime", "none", ...argv], { env: s.env });
    expect(r.code).toBe(status);
    expect(spoolLeftovers(s.spool)).toEqual([]);
  });

  it("takes the highest task status", async () => {
    const s = site();
    const r = await jobrt(["run", "-n", "4", "--runtime", "none", "sh", "-c", "exit $SLURM_PROCID"], { env: s.env });
    expect(r.code).toBe(3);
  });

  it("a missing program exits 127 with one clear line", async () => {
    const s = site();
    const r = await jobrt(["run", "--runtime", "none", "no-such-program-xyz"], { env: s.env });
    expect(r.code).toBe(127);
    expect(r.stderr).toBe(
      `jobrt: task 0: cannot execute no-such-program-xyz: command not found\n${failureLine("task 0", "Exited with exit code 127")}`,
    );
  });

  it("1,000 tasks under ulimit -n 1024: plain output falls back to direct writes; -l says what to do", async () => {
    const s = site();
    const sh = (args: string) =>
      runProgram(["sh", "-c", `ulimit -n 1024; exec '${process.execPath}' -- '${jobrtBin}' ${args}`], {
        env: { ...process.env, ...s.env },
      });
    const plain = await sh(`run -n 1000 --runtime none sh -c 'echo $SLURM_PROCID'`);
    expect(plain.stderr).toBe("");
    expect(plain.code).toBe(0);
    expect(new Set(plain.stdout.trim().split("\n")).size).toBe(1000);
    const labelled = await sh("run -n 1000 -l --runtime none true");
    expect(labelled.code).toBe(1);
    expect(labelled.stderr).toBe(
      "jobrt: 1000 tasks with -l, --json or a shared --output/--error file need about 3064 open files, but the limit is 1024: raise it (ulimit -n), or use per-task files (-o out-%t)\n",
    );
    expect(spoolLeftovers(s.spool)).toEqual([]);
  });

  it("a reader slower than the tasks still gets every line, and no warning", async () => {
    const s = site();
    // The reader sleeps while 20 tasks write 100,000 lines: jobrt's writes to the full pipe queue
    // up, and must all be written before it exits (they were dropped by process.exit once).
    const r = await runProgram(
      ["sh", "-c", `'${process.execPath}' -- '${jobrtBin}' run -n 20 --runtime none seq 1 5000 | (sleep 2; wc -l)`],
      {
        env: { ...process.env, ...s.env },
      },
    );
    expect(r.stderr).toBe("");
    expect(r.stdout.trim()).toBe("100000");
  });

  it("a line longer than 64 KiB passes in pieces, labelled once, nothing added", async () => {
    const s = site();
    const r = await jobrt(
      [
        "run",
        "-n",
        "1",
        "-l",
        "--runtime",
        "none",
        "sh",
        "-c",
        'head -c 300000 /dev/zero | tr "\\0" x; echo; echo short',
      ],
      { env: s.env },
    );
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`0: ${"x".repeat(300_000)}\n0: short\n`);
  });

  it("-n 256 /bin/true completes", async () => {
    const s = site();
    const r = await jobrt(["run", "-n", "256", "--runtime", "none", "/bin/true"], { env: s.env });
    expect(r.code).toBe(0);
    expect(r.stderr).toBe("");
  });
});

describe("jobrt run: srun's per-task failure lines", () => {
  // Task 0 and 1 exit 3, task 2 exits 0, tasks 3 and 5 are SIGKILLed, task 4 SIGUSR1ed.
  const mixed = [
    "sh",
    "-c",
    "case $SLURM_PROCID in 0|1) exit 3;; 2) exit 0;; 3|5) kill -KILL $$;; 4) kill -USR1 $$;; esac",
  ];

  it("one line per outcome after the step, tasks in Slurm's ranges, in task order, none for exit 0", async () => {
    const s = site("NodeName=node7\n");
    const r = await jobrt(["run", "-n", "6", "--runtime", "none", ...mixed], { env: s.env });
    expect(r.stderr).toBe(
      failureLine("tasks 0-1", "Exited with exit code 3", "node7") +
        failureLine("tasks 3,5", "Killed", "node7") +
        failureLine("task 4", "User defined signal 1", "node7"),
    );
    // SIGUSR1 (10) is the highest status: 128 + 10.
    expect(r.code).toBe(138);
    expect(spoolLeftovers(s.spool)).toEqual([]);
  });

  it("--json: stdout stays one JSON event per line; the lines go to stderr, and task-exit events say the same", async () => {
    const s = site("NodeName=node7\n");
    const r = await jobrt(["run", "-n", "6", "--runtime", "none", "--json", ...mixed], { env: s.env });
    expect(r.code).toBe(138);
    expect(r.stderr).toBe(
      failureLine("tasks 0-1", "Exited with exit code 3", "node7") +
        failureLine("tasks 3,5", "Killed", "node7") +
        failureLine("task 4", "User defined signal 1", "node7"),
    );
    const events = r.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { event: string; task?: number; code?: number | null; signal?: string | null });
    const exits = events.filter((e) => e.event === "task-exit").sort((a, b) => (a.task ?? 0) - (b.task ?? 0));
    expect(exits.map((e) => [e.task, e.code, e.signal])).toEqual([
      [0, 3, null],
      [1, 3, null],
      [2, 0, null],
      [3, null, "SIGKILL"],
      [4, null, "SIGUSR1"],
      [5, null, "SIGKILL"],
    ]);
  });

  /** Task 0 dies of the signal; task 1 handles it and exits 3. Resolves once jobrt has ended. */
  async function signalled(signal: NodeJS.Signals) {
    const s = site("NodeName=node7\n");
    const { spawn } = await import("node:child_process");
    const script = "[ $SLURM_PROCID = 0 ] && exec sleep 60; trap 'exit 3' INT TERM; while :; do sleep 1; done";
    const child = spawn(
      process.execPath,
      ["--", jobrtBin, "run", "-n", "2", "--runtime", "none", "--json", "sh", "-c", script],
      { env: { ...process.env, ...s.env }, stdio: ["ignore", "pipe", "pipe"] },
    );
    let stdout = "";
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      stderr += d;
    });
    const started = new Promise<void>((resolve) => {
      child.stdout.setEncoding("utf8").on("data", (d: string) => {
        stdout += d;
        // Both tasks started, and task 1's shell is in its loop (its trap is set).
        if (stdout.split('"task-start"').length === 3) setTimeout(resolve, 500);
      });
    });
    const closed = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
    await started;
    child.kill(signal);
    return { code: await closed, stderr, spool: s.spool };
  }

  it("SIGTERM to jobrt: the task the signal ended gets its line ('Terminated'), as under srun", async () => {
    const r = await signalled("SIGTERM");
    expect(r.stderr).toBe(
      failureLine("task 0", "Terminated", "node7") + failureLine("task 1", "Exited with exit code 3", "node7"),
    );
    expect(r.code).toBe(143);
    expect(spoolLeftovers(r.spool)).toEqual([]);
  });

  it("SIGINT to jobrt (Ctrl-C): no line for the task the signal ended, as srun after Ctrl-C; an exit code still gets one", async () => {
    const r = await signalled("SIGINT");
    expect(r.stderr).toBe(failureLine("task 1", "Exited with exit code 3", "node7"));
    expect(r.code).toBe(130);
    expect(spoolLeftovers(r.spool)).toEqual([]);
  });

  it("a heterogeneous step: tasks numbered within each component, each component its own lines, as srun does", async () => {
    const s = site("NodeName=node7\n");
    const r = await jobrt(
      [
        "run",
        "-n",
        "2",
        "--runtime",
        "none",
        "sh",
        "-c",
        "exit 3",
        ":",
        "-n",
        "2",
        "--runtime",
        "none",
        "sh",
        "-c",
        "exit $SLURM_PROCID",
      ],
      { env: s.env },
    );
    expect(r.code).toBe(3);
    // Component 1's tasks are SLURM_PROCID 2 and 3: its task 0 exits 2, its task 1 exits 3.
    expect(r.stderr).toBe(
      failureLine("tasks 0-1", "Exited with exit code 3", "node7") +
        failureLine("task 0", "Exited with exit code 2", "node7") +
        failureLine("task 1", "Exited with exit code 3", "node7"),
    );
  });
});

describe("jobrt run: bad input is one line and the documented exit status", () => {
  it.each([
    [["-n", "0", "true"], 2, 'jobrt: --ntasks: "0" is not a whole number from 1 to 100000'],
    [["-n", "-1", "true"], 2, 'jobrt: --ntasks: "-1" is not a whole number from 1 to 100000'],
    [["-n", "x", "true"], 2, 'jobrt: --ntasks: "x" is not a whole number from 1 to 100000'],
    [["--frobnicate", "true"], 2, "jobrt: run: unknown option --frobnicate (see jobrt run --help)"],
    [
      ["--runtime", "../x", "true"],
      2,
      "jobrt: invalid runtime name \"../x\": use a name like 'oci', 'runtime/oci' or '@scope/name' (lower case letters, digits, '.', '_', '-')",
    ],
    [
      ["--runtime", "Missing", "true"],
      2,
      "jobrt: invalid runtime name \"Missing\": use a name like 'oci', 'runtime/oci' or '@scope/name' (lower case letters, digits, '.', '_', '-')",
    ],
    [
      ["--runtime", "missing", "true"],
      2,
      "jobrt: runtime missing is not allowed on this node (RuntimePlugins=none,oci,shifter)",
    ],
    [
      ["-t", "soon", "true"],
      2,
      'jobrt: invalid time limit "soon": use minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS',
    ],
    [["-o", "/tmp/x-%q", "true"], 2, 'jobrt: --output: unknown pattern %q in "/tmp/x-%q" (use %j %s %t %n %N %%)'],
    [["--export", "1BAD", "true"], 2, 'jobrt: --export: "1BAD" is not a variable name'],
    [["--runtime", "none"], 2, "jobrt: run: no command given"],
    [["true", ":"], 2, "jobrt: component 1: no command after ':'"],
    [
      ["true", ":", "--jobid", "3", "true"],
      2,
      "jobrt: --jobid applies to the whole step: give it before the first ':'",
    ],
  ])("jobrt run %j", async (args, code, line) => {
    const s = site();
    const r = await jobrt(["run", ...args], { env: s.env });
    expect(r.stderr).toBe(`${line}\n`);
    expect(r.code).toBe(code);
    expect(r.stdout).toBe("");
    expect(spoolLeftovers(s.spool)).toEqual([]);
  });

  it("a --container-image or --container holding DEL, C1 controls, separators or a bidi override: its one line shows them escaped", async () => {
    const s = site();
    const unshown = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u;
    const failed = "jobrt: runtime runtime/oci setup failed: ";
    for (const [option, value, line] of [
      [
        "--container-image",
        "docker://reg.example/a\u202eb:1",
        `${failed}--container-image "docker://reg.example/a\\u{202e}b:1": "a\\u{202e}b" is not a valid repository name (lower-case components separated by '/')`,
      ],
      [
        "--container-image",
        "docker://reg.example/a\u2028b\u009b2J",
        `${failed}--container-image "docker://reg.example/a\\u{2028}b\\x9b2J": must not contain white space or NUL`,
      ],
      [
        "--container-image",
        "oci:/nonexistent/\u202e\u007f\u009b",
        `${failed}--container-image oci:/nonexistent/\\u{202e}\\x7f\\x9b: cannot read the image manifest: `,
      ],
      [
        "--container",
        "/nonexistent/\u202e\u0085\u2029",
        `${failed}cannot read /nonexistent/\\u{202e}\\x85\\u{2029}/config.json: no such file (is --container an OCI bundle directory?)`,
      ],
    ] as const) {
      const r = await jobrt(["run", "--runtime", "oci", option, value, "true"], { env: s.env });
      expect(r.stderr.startsWith(line), r.stderr).toBe(true);
      expect(r.stderr.endsWith("\n")).toBe(true);
      expect(r.stderr.slice(0, -1)).not.toMatch(unshown);
      expect(r.code).toBe(1);
    }
  });

  it("an unparsable jobrt.conf line names file:line and exits 2", async () => {
    const s = site("KillWait=soon\n");
    const r = await jobrt(["run", "--runtime", "none", "true"], { env: s.env });
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`jobrt: ${join(s.dir, "jobrt.conf")}:3:10: KillWait: "soon" is not an integer\n`);
  });

  it("an unknown jobrt.conf key names file:line", async () => {
    const s = site("SpoolDri=/x\n");
    const r = await jobrt(["run", "--runtime", "none", "true"], { env: s.env });
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`jobrt: ${join(s.dir, "jobrt.conf")}:3:1: SpoolDri: unknown key\n`);
  });

  it("--uid is refused for a non-root caller", async () => {
    // nobody cannot read a root-only temp dir, so point it at a conf dir that does not exist.
    const r = await jobrt(["run", "--runtime", "none", "--uid", "root", "true"], {
      env: { JOBRT_CONF_DIR: "/nonexistent/jobrt" },
      uid: 65534,
      gid: 65534,
      cwd: "/",
    });
    expect(r.code).toBe(2);
    expect(r.stderr).toBe("jobrt: --uid/--gid: only root may run tasks as another user or group\n");
  });

  it("--help and --version print to stdout and exit 0", async () => {
    const help = await jobrt(["run", "--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("Usage: jobrt run");
    for (const option of [
      "--ntasks",
      "--runtime",
      "--container",
      "--label",
      "--output",
      "--error",
      "--input",
      "--chdir",
      "--export",
      "--time",
      "--jobid",
      "--uid",
      "--verbose",
      "--json",
      "--conf-dir",
    ]) {
      expect(help.stdout).toContain(option);
    }
    const version = await jobrt(["--version"]);
    expect(version.stdout).toMatch(/^jobrt \d+\.\d+\.\d+\n$/);
  });
});

describe("jobrt run: users, signals, time limits", () => {
  it("--uid nobody really runs as 65534:65534 with HOME/USER set", async () => {
    const s = site();
    const r = await jobrt(
      [
        "run",
        "--runtime",
        "none",
        "--uid",
        "nobody",
        "--gid",
        "nogroup",
        "sh",
        "-c",
        'echo "$(id -u):$(id -g):$(id -G):$USER:$HOME"',
      ],
      { env: s.env, cwd: "/tmp" },
    );
    expect(r.stderr).toBe("");
    expect(r.stdout).toBe("65534:65534:65534:nobody:/nonexistent\n");
  });

  it("SIGTERM mid-step stops every task, runs cleanup, leaves nothing, exits 143", async () => {
    const s = site();
    // Task pids come from the --json task-start events, so there is no file a task may not have written yet.
    const { spawn } = await import("node:child_process");
    const child = spawn(
      process.execPath,
      ["--", jobrtBin, "run", "-n", "3", "--runtime", "none", "--json", "sleep", "60"],
      {
        env: { ...process.env, ...s.env },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let stdout = "";
    const pids: number[] = [];
    const started = new Promise<void>((resolve) => {
      child.stdout.setEncoding("utf8").on("data", (d: string) => {
        stdout += d;
        for (const line of d.split("\n").filter((l) => l.includes('"task-start"')))
          pids.push((JSON.parse(line) as { pid: number }).pid);
        if (pids.length === 3) resolve();
      });
    });
    const closed = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
    await started;
    child.kill("SIGTERM");
    expect(await closed).toBe(143);
    const events = stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { event: string; status?: number });
    expect(events.filter((e) => e.event === "task-exit").map((e) => e.status)).toEqual([143, 143, 143]);
    expect(events.some((e) => e.event === "cleanup")).toBe(true);
    expect(events.at(-1)).toMatchObject({ event: "step-end", status: 143 });
    for (const pid of pids) expect(() => process.kill(pid, 0)).toThrow();
    expect(spoolLeftovers(s.spool)).toEqual([]);
  });

  it("a task that ignores SIGTERM is killed after KillWait", async () => {
    const s = site();
    const r = await jobrt(
      ["run", "--runtime", "none", "-t", "0:1", "sh", "-c", "trap '' TERM; sleep 30 & wait; sleep 30"],
      { env: s.env },
    );
    expect(r.stderr).toContain("cancelled: time limit of 1 s reached");
    expect(r.code).toBeGreaterThanOrEqual(137);
  });

  it("-t stops the step like Ctrl-C when the limit passes", async () => {
    const s = site();
    const r = await jobrt(["run", "--runtime", "none", "-t", "0:1", "sleep", "30"], { env: s.env });
    expect(r.code).toBe(143);
    expect(r.stderr).toMatch(/^jobrt: step \d+\.0 cancelled: time limit of 1 s reached\n/);
    expect(r.stderr.split("\n").slice(1).join("\n")).toBe(failureLine("task 0", "Terminated"));
  });
});

describe("jobrt run -v", () => {
  it("says where each runtime was resolved from and what it runs, and adds stack traces to errors", async () => {
    const s = site();
    const r = await jobrt(["run", "-v", "--runtime", "none", "--conf-dir", s.dir, "true"]);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain(`jobrt: conf dir ${s.dir}; runtimes resolved from `);
    expect(r.stderr).toContain(`jobrt: runtime runtime/none: @jobrt/runtime-none@${runtimeNoneVersion} from /`);
    expect(r.stderr).toMatch(/jobrt: runtime runtime\/none: \S+ from \/\S+\/runtime-none\/dist\/index\.js\n/);
    expect(r.stderr).toMatch(/jobrt: task 0: exec \["true"\] in \//);
    const bad = await jobrt(["run", "-v", "--runtime", "../x", "true"], { env: s.env });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("[ERR_RUNTIME_NAME]");
    expect(bad.stderr).toMatch(/\n\s+at /);
  });
});

describe("jobrt run --json", () => {
  it("emits one JSON event per line: step start, runtime, setup, task start with pid, output, exit, cleanup, step end", async () => {
    const s = site();
    const r = await jobrt(["run", "-n", "2", "--runtime", "none", "--json", "sh", "-c", "echo hi $SLURM_PROCID"], {
      env: s.env,
    });
    expect(r.code).toBe(0);
    const events = r.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const kinds = events.map((e) => e.event);
    expect(kinds[0]).toBe("step-start");
    expect(kinds).toContain("runtime");
    expect(kinds).toContain("setup");
    expect(kinds.filter((k) => k === "task-start")).toHaveLength(2);
    expect(events.filter((e) => e.event === "task-start").every((e) => typeof e.pid === "number")).toBe(true);
    expect(
      events
        .filter((e) => e.event === "output")
        .map((e) => e.data)
        .sort(),
    ).toEqual(["hi 0", "hi 1"]);
    expect(kinds.at(-2)).toBe("cleanup");
    expect(events.at(-1)).toMatchObject({ event: "step-end", status: 0 });
  });
});

describe("jobrt runtimes and check", () => {
  it("lists each allowed runtime with package, version and API status", async () => {
    const s = site("RuntimePlugins=none,shifter\n");
    const r = await jobrt(["runtimes", "--json"], { env: s.env });
    const list = JSON.parse(r.stdout) as {
      runtimes: { name: string; package: string; compatible: boolean; version: string }[];
    };
    expect(list.runtimes.map((x) => x.name)).toEqual(["none", "shifter"]);
    expect(list.runtimes[0]).toMatchObject({
      package: "@jobrt/runtime-none",
      compatible: true,
      version: runtimeNoneVersion,
    });
    const text = await jobrt(["run", "--runtime", "list"], { env: s.env });
    expect(text.stdout).toMatch(/^RUNTIME\s+PACKAGE\s+VERSION\s+API/);
    expect(text.stdout).toContain("@jobrt/runtime-none");
  });

  it("jobrt check validates without starting anything", async () => {
    const s = site();
    const marker = join(tempDir(), "started");
    const r = await jobrt(["check", "--runtime", "none", "sh", "-c", `touch ${marker}`], { env: s.env });
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`component 0: runtime none: ok\n${NO_STEP}\n`);
    expect(existsSync(marker)).toBe(false);
  });
});

describe("jobrt run: heterogeneous steps", () => {
  it("numbers tasks globally across components and sets the het variables", async () => {
    const s = site();
    const r = await jobrt(
      [
        "run",
        "-l",
        "-n",
        "2",
        "--runtime",
        "none",
        "sh",
        "-c",
        'echo "a $SLURM_PROCID $SLURM_HET_SIZE $SLURM_HET_JOB_OFFSET"',
        ":",
        "-n",
        "1",
        "--runtime",
        "runtime/none",
        "sh",
        "-c",
        'echo "b $SLURM_PROCID $SLURM_HET_SIZE $SLURM_HET_JOB_OFFSET"',
      ],
      { env: s.env },
    );
    expect(r.code).toBe(0);
    expect(r.stdout.trim().split("\n").sort()).toEqual(["0: a 0 2 0", "1: a 1 2 0", "2: b 2 2 1"]);
  });

  it("carries -o and --export over to later components, as srun does", async () => {
    const s = site();
    const out = join(tempDir(), "het.out");
    const r = await jobrt(
      [
        "run",
        "--runtime",
        "none",
        "-o",
        out,
        "--export",
        "ONLY=1",
        "sh",
        "-c",
        'echo "a $ONLY $HOME"',
        ":",
        "--runtime",
        "none",
        "sh",
        "-c",
        'echo "b $ONLY"',
      ],
      { env: s.env },
    );
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("");
    expect(readFileSync(out, "utf8").split("\n").filter(Boolean).sort()).toEqual(["a 1 /root", "b 1"]);
  });

  it("a bad runtime in any component fails the step before anything starts", async () => {
    const s = site();
    const marker = join(tempDir(), "started");
    const r = await jobrt(["run", "--runtime", "none", "touch", marker, ":", "--runtime", "nope", "true"], {
      env: s.env,
    });
    expect(r.code).toBe(2);
    expect(r.stderr).toBe("jobrt: runtime nope is not allowed on this node (RuntimePlugins=none,oci,shifter)\n");
    expect(existsSync(marker)).toBe(false);
  });
});

describe("plugins loaded from PluginDir", () => {
  it("a runtime whose setup fails fails the step with its error, exit 1, and cleanup still runs", async () => {
    const plugins = tempDir("jobrt-plugins-");
    const pkgDir = join(plugins, "node_modules", "jobrt-runtime-failing");
    mkdirSync(pkgDir, { recursive: true });
    const log = join(plugins, "calls.log");
    const coreUrl = new URL("../../packages/core/dist/index.js", import.meta.url).href;
    writeFileSync(
      join(pkgDir, "package.json"),
      JSON.stringify({ name: "jobrt-runtime-failing", version: "0.1.0", type: "module", exports: "./index.js" }),
    );
    writeFileSync(
      join(pkgDir, "index.js"),
      `import { appendFileSync } from "node:fs";
import { definePlugin } from ${JSON.stringify(coreUrl)};
export default definePlugin({ name: "failing", type: "runtime/failing", version: "0.1.0" }, {
  setup() { appendFileSync(${JSON.stringify(log)}, "setup\\n"); throw new Error("the scratch filesystem is not mounted"); },
  cleanup() { appendFileSync(${JSON.stringify(log)}, "cleanup\\n"); },
  fini() { appendFileSync(${JSON.stringify(log)}, "fini\\n"); },
});`,
    );
    const s = site(`PluginDir=${plugins}\nRuntimePlugins=none,failing\n`);
    const marker = join(tempDir(), "started");
    const r = await jobrt(["run", "--runtime", "failing", "touch", marker], { env: s.env });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe("jobrt: runtime runtime/failing setup failed: the scratch filesystem is not mounted\n");
    expect(existsSync(marker)).toBe(false);
    expect(readFileSync(log, "utf8")).toBe("setup\ncleanup\nfini\n");
    expect(spoolLeftovers(s.spool)).toEqual([]);
  });
});

describe("jobrt exec outside Slurm", () => {
  it("fails with one clear line and exit 2", async () => {
    const r = await jobrt(["exec", "--runtime", "none", "--", "true"], {
      env: { SLURM_JOB_ID: "", SLURM_JOBID: "", SLURM_STEP_ID: "", SLURM_PROCID: "" },
    });
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      "jobrt: exec: not inside a Slurm job step (SLURM_JOB_ID/SLURM_JOBID is not set); run it as 'srun ... jobrt exec ...', or use 'jobrt run' outside Slurm\n",
    );
  });

  it("runs one task from a Slurm-like environment and exits with its status", async () => {
    const dir = tempDir();
    writeFileSync(join(dir, "jobrt.conf"), `SpoolDir=${join(dir, "spool")}\n`);
    const env = {
      JOBRT_CONF_DIR: dir,
      SLURM_JOB_ID: "500",
      SLURM_STEP_ID: "3",
      SLURM_PROCID: "5",
      SLURM_LOCALID: "1",
      SLURM_NTASKS: "8",
      SLURMD_NODENAME: "n9",
    };
    const r = await jobrt(
      ["exec", "--runtime", "none", "--", "sh", "-c", 'echo "$SLURM_PROCID $SLURM_RUNTIME $SLURMD_NODENAME"; exit 6'],
      { env },
    );
    expect(r.stdout).toBe("5 none n9\n");
    expect(r.code).toBe(6);
    // srun prints the task's failure line itself; jobrt exec adds none.
    expect(r.stderr).toBe("");
  });
});
