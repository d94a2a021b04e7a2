import { spawn, spawnSync } from "node:child_process";
import { existsSync, readFileSync, readdirSync, symlinkSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type ExecSpec, NOT_SUPPORTED, type TaskRecord, isJobrtError } from "@jobrt/core";
import fc from "fast-check";
import { syscallNumbers } from "@jobrt/host-services";
import { beforeAll, describe, expect, test } from "vitest";
import { pluginHost } from "@jobrt/testkit";
import plugin from "../src/index.js";
import {
  createStartConf,
  haveRunc,
  isRoot,
  leftoverTaskDir,
  makeBundle,
  openUp,
  processesWith,
  runModeConf,
  runcIds,
  stepTaskDir,
  writeConf,
} from "./fixtures.js";
import { makeNode, makeStep, runStep, tempDir, trackedJobs } from "./host.js";

const host = pluginHost(plugin);

const modes = [
  ["run mode", runModeConf],
  ["create/start mode", createStartConf],
] as const;

describe("with real runc", () => {
  // Never skipped: a machine without runc or root fails here, loudly (scripts/system-deps.sh).
  beforeAll(() => {
    expect(haveRunc, "runc is installed").toBe(true);
    expect(isRoot, "these tests run as root").toBe(true);
  });
  const bundle = makeBundle(join(tempDir(), "bundle"));
  const job = trackedJobs();

  for (const [name, conf] of modes) {
    describe(name, () => {
      test("-n 4: per-task containers, env and args reach the container, exit status 3 propagates, nothing is left", async () => {
        const confDir = writeConf(tempDir(), conf());
        const spoolDir = tempDir();
        const jobId = job();
        const r = await runStep(plugin, {
          confDir,
          spoolDir,
          jobId,
          ntasks: 4,
          env: { FOO: "bar baz" },
          argv: [
            "sh",
            "-c",
            'echo "task=$SLURM_PROCID foo=$FOO arg=$1 host=$(hostname)"; [ "$SLURM_PROCID" = 2 ] && exit 3; exit 0',
            "sh",
            'it\'s "quoted"',
          ],
          container: { value: bundle },
        });
        expect(r.setupError).toBeUndefined();
        expect(r.cleanupError).toBeUndefined();
        expect(r.tasks.map((t) => t.code)).toEqual([0, 0, 3, 0]);
        r.tasks.forEach((t, i) => {
          expect(t.stdout).toBe(`task=${i} foo=bar baz arg=it's "quoted" host=runc\n`);
        });
        expect(runcIds().filter((id) => id.includes(`.${jobId}.`))).toEqual([]);
        expect(readdirSync(spoolDir)).toEqual([]);
      });

      test("SIGTERM mid-step, to a container that ignores it: nothing is left (container, spool dir, process)", async () => {
        const confDir = writeConf(tempDir(), conf());
        const spoolDir = tempDir();
        const jobId = job();
        // The pid keeps the marker ours: another checkout's run of this file on the machine uses the same job ids.
        const marker = `sleep 98${process.pid}${jobId % 10}${name.length}`;
        const started = Date.now();
        const r = await runStep(plugin, {
          confDir,
          spoolDir,
          jobId,
          ntasks: 2,
          killWait: 2,
          // pid 1 of a pid namespace ignores SIGTERM without a handler: escalation must happen.
          argv: marker.split(" "),
          container: { value: bundle },
          signal: "SIGTERM",
          signalAfterMs: 1000,
        });
        expect(r.setupError).toBeUndefined();
        for (const t of r.tasks) expect(t.code === 0).toBe(false);
        expect(Date.now() - started).toBeLessThan(20_000);
        expect(runcIds().filter((id) => id.includes(`.${jobId}.`))).toEqual([]);
        expect(readdirSync(spoolDir)).toEqual([]);
        expect(processesWith(marker)).toEqual([]);
      });

      test("SIGTERM reaches the container's processes; a task that traps it and exits 7 reports 7", async () => {
        const out = tempDir();
        const r = await runStep(plugin, {
          confDir: writeConf(tempDir(), conf()),
          spoolDir: tempDir(),
          jobId: job(),
          ntasks: 2,
          argv: [
            "sh",
            "-c",
            'trap "echo got > /out/term-$SLURM_PROCID; exit 7" TERM; while :; do sleep 1 & wait $!; done',
          ],
          container: { value: bundle, volumes: [`${out}:/out`] },
          signal: "SIGTERM",
          signalAfterMs: 1000,
          killWait: 10,
        });
        expect(r.tasks.map((t) => [t.code, t.signal])).toEqual([
          [7, null],
          [7, null],
        ]);
        expect(readdirSync(out).sort()).toEqual(["term-0", "term-1"]);
      });

      test("bundle paths with a space and with $(touch ...) work and inject nothing", async () => {
        const base = tempDir();
        const pwned = join(base, "pwned");
        for (const dirName of ["my bundle", `b$(touch ${pwned})`, "q'uote"]) {
          const b = makeBundle(join(base, dirName));
          const confDir = writeConf(tempDir(), conf());
          const r = await runStep(plugin, {
            confDir,
            spoolDir: tempDir(),
            jobId: job(),
            argv: ["echo", "ok"],
            container: { value: b },
          });
          expect(r.setupError).toBeUndefined();
          expect(r.tasks[0]?.stdout).toBe("ok\n");
          expect(r.tasks[0]?.code).toBe(0);
        }
        expect(existsSync(pwned)).toBe(false);
      });
    });
  }

  // How soon the exit is noticed is a speed, measured in bench/exit-detection.mjs; what this checks
  // is the mechanism: no polling (Slurm queries on a back-off, dozens of times in 2.6 s).
  test("create/start waits for the container's exit without polling: RunTimeQuery runs once (after create; the task's own delete spares cleanup's), not on a schedule", async () => {
    const log = join(tempDir(), "queries");
    const confDir = writeConf(
      tempDir(),
      createStartConf().replace('RunTimeQuery="', `RunTimeQuery="echo q >> ${log}; `),
    );
    const r = await runStep(plugin, {
      confDir,
      spoolDir: tempDir(),
      jobId: job(),
      argv: ["sleep", "2.6"],
      container: { value: bundle },
    });
    expect(r.tasks[0]?.code).toBe(0);
    expect(r.tasks[0]?.durationMs ?? Number.NaN).toBeGreaterThanOrEqual(2600);
    expect(readFileSync(log, "utf8")).toBe("q\n");
  });

  test("create/start reports a container killed by a signal as that signal", async () => {
    const confDir = writeConf(tempDir(), createStartConf());
    const jobId = job();
    // An init can't be SIGKILLed from inside its own pid namespace: kill it from the host.
    const killer = setInterval(() => {
      const r = spawnSync("runc", ["--root", "/run/runc", "state", `testnode.root.${jobId}.0.0`], { encoding: "utf8" });
      if (r.status !== 0) return;
      const st = JSON.parse(r.stdout) as { status: string; pid: number };
      if (st.status === "running") {
        process.kill(st.pid, "SIGKILL");
        clearInterval(killer);
      }
    }, 100);
    try {
      const r = await runStep(plugin, {
        confDir,
        spoolDir: tempDir(),
        jobId,
        argv: ["sleep", "30"],
        container: { value: bundle },
      });
      expect(r.tasks[0]?.signal).toBe("SIGKILL");
    } finally {
      clearInterval(killer);
    }
  });

  test("a failing RunTimeCreate fails the task with status 125 and a message naming the command", async () => {
    const confDir = writeConf(tempDir(), createStartConf().replace("create %n", "create --no-such-flag %n"));
    const r = await runStep(plugin, {
      confDir,
      spoolDir: tempDir(),
      jobId: job(),
      argv: ["true"],
      container: { value: bundle },
    });
    expect(r.tasks[0]?.code).toBe(125);
    expect(r.tasks[0]?.stderr).toMatch(
      /jobrt-oci: RunTimeCreate exited with status \d+.*runc --root \/run\/runc create --no-such-flag/,
    );
  });

  test("cleanup kills and deletes a task's container after the task process died without teardown (W5)", async () => {
    const confDir = writeConf(tempDir(), createStartConf());
    const spoolDir = tempDir();
    const jobId = job();
    const marker = `sleep 97${process.pid}${jobId % 10}1`;
    // SIGKILL only the supervisor (not its process group): its container lives on until cleanup.
    const r = await runStep(plugin, {
      confDir,
      spoolDir,
      jobId,
      argv: marker.split(" "),
      container: { value: bundle },
      signal: "SIGKILL",
      signalAfterMs: 1500,
      killOnlyLeader: true,
    });
    expect(r.tasks[0]?.signal).toBe("SIGKILL");
    expect(runcIds().filter((id) => id.includes(`.${jobId}.`))).toEqual([]);
    expect(processesWith(marker)).toEqual([]);
    expect(readdirSync(spoolDir)).toEqual([]);
  });

  test("argv reaches the container byte-exact (config.json args) and a host command byte-exact (%@ through /bin/sh)", async () => {
    const tricky = fc.constantFrom(
      "'",
      '"',
      "\n",
      "$(touch /tmp/jobrt-pwned)",
      "`id`",
      "\\",
      "é",
      "日本",
      "🙂",
      " ",
      "*",
      "$HOME",
    );
    const arg = fc
      .array(
        fc.oneof(
          fc.string({ maxLength: 6 }).filter((s) => !s.includes("\0")),
          tricky,
        ),
        { minLength: 1, maxLength: 3 },
      )
      .map((p) => p.join(""));
    const cdir = writeConf(tempDir(), runModeConf());
    const idir = writeConf(tempDir(), 'IgnoreFileConfigJson=true\nRunTimeRun="%@"\n');
    await fc.assert(
      fc.asyncProperty(fc.array(arg, { minLength: 1, maxLength: 4 }), async (args) => {
        for (const confDir of [cdir, idir]) {
          const r = await runStep(plugin, {
            confDir,
            spoolDir: tempDir(),
            jobId: job(),
            argv: ["printf", "%s\\0", ...args],
            container: { value: bundle },
          });
          expect(r.tasks[0]?.code).toBe(0);
          expect(r.tasks[0]?.stdout).toBe(args.map((a) => `${a}\0`).join(""));
        }
      }),
      { numRuns: 8 },
    );
    expect(existsSync("/tmp/jobrt-pwned")).toBe(false);
  });

  test("one jobrt per task (srun ... jobrt exec): concurrent setups share the step dir, the last cleanup removes it", async () => {
    const confDir = writeConf(tempDir(), createStartConf());
    const spoolDir = tempDir();
    const jobId = job();
    const hosts = [0, 1, 2].map((t) =>
      runStep(plugin, {
        confDir,
        spoolDir,
        jobId,
        ntasks: 3,
        taskIds: [t],
        argv: ["sh", "-c", `sleep 0.${3 * t + 1}; echo $SLURM_LOCALID`],
        container: { value: bundle },
      }),
    );
    const results = await Promise.all(hosts);
    results.forEach((r, t) => {
      expect(r.setupError).toBeUndefined();
      expect(r.tasks[0]?.stdout).toBe(`${t}\n`);
    });
    expect(readdirSync(spoolDir)).toEqual([]);
  });

  test("without a query command (IgnoreFileConfigJson), Delete still runs at cleanup and Kill never hits a dead pid (W6, W7)", async () => {
    const out = tempDir();
    const conf = `IgnoreFileConfigJson=true\nRunTimeRun="%@"\nRunTimeKill="echo kill %p >> ${out}/log"\nRunTimeDelete="echo delete %t >> ${out}/log"\n`;
    const r = await runStep(plugin, {
      confDir: writeConf(tempDir(), conf),
      spoolDir: tempDir(),
      jobId: job(),
      ntasks: 2,
      argv: ["true"],
      container: { value: bundle },
    });
    expect(r.tasks.map((t) => t.code)).toEqual([0, 0]);
    expect(readFileSync(join(out, "log"), "utf8").split("\n").filter(Boolean).sort()).toEqual(["delete 0", "delete 1"]);
  });

  test("%p is the real pid of the task's runtime process: cleanup's Kill signals it while it runs (W6, W7)", async () => {
    const out = tempDir();
    const conf = `IgnoreFileConfigJson=true\nRunTimeRun="%@"\nRunTimeKill="echo %p > ${out}/kill; kill -s TERM %p"\nRunTimeDelete="echo %p > ${out}/delete"\n`;
    const confDir = writeConf(tempDir(), conf);
    const step = makeStep({
      confDir,
      spoolDir: tempDir(),
      jobId: job(),
      argv: ["sleep", "30"],
      container: { value: bundle },
    });
    const node = makeNode({ confDir, spoolDir: tempDir(), killWait: 5 });
    const task = step.tasks[0] as TaskRecord;
    await host.setup(node, step);
    await host.taskInit(node, step, task);
    const spec = (await host.run(node, step, task)) as ExecSpec;
    const child = spawn(spec.argv[0] as string, spec.argv.slice(1), { env: spec.env, cwd: spec.cwd, stdio: "ignore" });
    task.pid = child.pid;
    const exited = new Promise<NodeJS.Signals | null>((r) => child.on("exit", (_c, sig) => r(sig)));
    try {
      await new Promise((r) => setTimeout(r, 200));
      // The host gave up on the task (it still runs) and cleans up.
      await host.cleanup(node, step);
      expect(await exited).toBe("SIGTERM");
      expect(readFileSync(join(out, "kill"), "utf8")).toBe(`${child.pid}\n`);
      // Once the process is gone its pid is unknown, so a Delete that needs %p is not run.
      expect(existsSync(join(out, "delete"))).toBe(false);
    } finally {
      child.kill("SIGKILL");
    }
  });

  test("create/start when the runtime does not leave the container's init to the task (as a daemon would not): the exit is noticed but its status is unknown, so the task fails with 125, never 0", async () => {
    const nr = syscallNumbers(["prctl"])?.[0];
    // A subreaper of its own between the task and runc create keeps the init, and ends with it.
    const keeper = `perl -e 'syscall(${nr}, 36, 1, 0, 0, 0); exec @ARGV if !fork; 1 while wait != -1'`;
    const conf = createStartConf().replace(
      /RunTimeCreate="([^"]*)"/,
      `RunTimeCreate="(${keeper} $1 </dev/null >/dev/null 2>&1 &)"`,
    );
    const jobId = job();
    const r = await runStep(plugin, {
      confDir: writeConf(tempDir(), conf),
      spoolDir: tempDir(),
      jobId,
      argv: ["true"],
      container: { value: bundle },
    });
    expect(r.tasks[0]?.code).toBe(125);
    expect(r.tasks[0]?.stderr).toBe(
      "jobrt-oci: the container exited but its exit status is not available (see docs/runtime-oci.md, create/start mode)\n",
    );
    expect(runcIds().filter((id) => id.includes(`.${jobId}.`))).toEqual([]);
  });

  test("DisableHooks really removes the hooks (W10)", async () => {
    const base = tempDir();
    const marker = join(base, "hook-ran");
    const hooked = makeBundle(join(base, "hooked"), (c) => {
      c.hooks = { prestart: [{ path: "/bin/sh", args: ["sh", "-c", `echo ran >> ${marker}`] }] };
    });
    const control = await runStep(plugin, {
      confDir: writeConf(tempDir(), runModeConf()),
      spoolDir: tempDir(),
      jobId: job(),
      argv: ["true"],
      container: { value: hooked },
    });
    expect(control.tasks[0]?.code).toBe(0);
    expect(readFileSync(marker, "utf8")).toBe("ran\n");
    const r = await runStep(plugin, {
      confDir: writeConf(tempDir(), runModeConf("DisableHooks=prestart,poststop\n")),
      spoolDir: tempDir(),
      jobId: job(),
      argv: ["true"],
      container: { value: hooked },
    });
    expect(r.tasks[0]?.code).toBe(0);
    expect(readFileSync(marker, "utf8")).toBe("ran\n");
  });

  describe("the env file (CreateEnvFile)", () => {
    for (const [format, sep] of [
      ["null", "\0"],
      ["newline", "\n"],
    ] as const) {
      test(`${format}: config.json mode and wrapper mode (IgnoreFileConfigJson) write the filtered job env`, async () => {
        const out = tempDir();
        const env = { KEEP: "1", MULTI: "a\nb", SLURM_CONF: "/etc/slurm.conf" };
        const filters = `CreateEnvFile=${format}\nEnvExclude="^SLURM_CONF="\n`;
        const cfg = runModeConf(filters).replace('RunTimeRun="', `RunTimeRun="cp %e ${out}/config-mode && `);
        const wrap = `IgnoreFileConfigJson=true\n${filters}RunTimeRun="cp %e ${out}/wrapper-mode && %@"\n`;
        for (const [confText, file] of [
          [cfg, "config-mode"],
          [wrap, "wrapper-mode"],
        ] as const) {
          const r = await runStep(plugin, {
            confDir: writeConf(tempDir(), confText),
            spoolDir: tempDir(),
            jobId: job(),
            env,
            argv: ["true"],
            container: { value: bundle },
          });
          expect(r.tasks[0]?.code, r.tasks[0]?.stderr).toBe(0);
          const text = readFileSync(join(out, file), "utf8");
          expect(text.endsWith(sep)).toBe(true);
          const entries = text.slice(0, -1).split(sep);
          expect(entries).toContain("KEEP=1");
          expect(entries.some((e) => e.startsWith("SLURM_CONF="))).toBe(false);
          if (format === "null") expect(entries).toContain("MULTI=a\nb");
          else expect(entries.some((e) => e.startsWith("MULTI"))).toBe(false);
          if (file === "config-mode") expect(entries).toContain("TERM=xterm"); // merged from the bundle
        }
      });
    }
  });

  test("RunTimeEnvExclude applies to every runtime command, cleanup's too (W11)", async () => {
    const out = tempDir();
    const conf = runModeConf('RunTimeEnvExclude="^SECRET="\n')
      .replace('RunTimeRun="', `RunTimeRun="env > ${out}/run-env; `)
      .replace('RunTimeQuery="', `RunTimeQuery="env > ${out}/query-env; `);
    const r = await runStep(plugin, {
      confDir: writeConf(tempDir(), conf),
      spoolDir: tempDir(),
      jobId: job(),
      env: { SECRET: "s3", OTHER: "o" },
      argv: ["sh", "-c", 'echo "$SECRET"'],
      container: { value: bundle },
    });
    expect(r.tasks[0]?.stdout).toBe("s3\n"); // EnvExclude is separate: the job still sees it
    for (const f of ["run-env", "query-env"]) {
      const text = readFileSync(join(out, f), "utf8");
      expect(text).toContain("OTHER=o");
      expect(text).not.toContain("SECRET=");
    }
  });

  test("DisableCleanup keeps the generated files but still deletes the containers", async () => {
    const spoolDir = tempDir();
    const jobId = job();
    const r = await runStep(plugin, {
      confDir: writeConf(tempDir(), createStartConf("DisableCleanup=yes\nCreateEnvFile=newline\n")),
      spoolDir,
      jobId,
      argv: ["true"],
      container: { value: bundle },
    });
    expect(r.tasks[0]?.code).toBe(0);
    expect(readdirSync(stepTaskDir(spoolDir, jobId)).sort()).toEqual([
      "config.json",
      "container.deleted",
      "container.pid",
      "environment",
      "watchdog.pid",
    ]);
    expect(runcIds().filter((id) => id.includes(`.${jobId}.`))).toEqual([]);
  });

  test("leftover files from a crashed run do not stop the next launch (W9)", async () => {
    const spoolDir = tempDir();
    const jobId = job();
    leftoverTaskDir(spoolDir, jobId, { "config.json": "stale", environment: "stale" });
    const r = await runStep(plugin, {
      confDir: writeConf(tempDir(), runModeConf("CreateEnvFile=yes\n")),
      spoolDir,
      jobId,
      argv: ["echo", "fresh"],
      container: { value: bundle },
    });
    expect(r.tasks[0]?.stdout).toBe("fresh\n");
    expect(readdirSync(spoolDir)).toEqual([]);
  });

  test("cleanup removes a symlink planted in a task dir without following it (W14)", async () => {
    const victim = tempDir();
    writeFileSync(join(victim, "precious"), "keep me");
    const spoolDir = tempDir();
    const jobId = job();
    const taskDir = stepTaskDir(spoolDir, jobId);
    const r = await runStep(plugin, {
      confDir: writeConf(tempDir(), runModeConf()),
      spoolDir,
      jobId,
      argv: ["true"],
      container: { value: bundle },
      beforeCleanup: () => {
        symlinkSync(victim, join(taskDir, "link"));
        symlinkSync(join(victim, "precious"), join(taskDir, "config.json.bak"));
      },
    });
    expect(r.tasks[0]?.code).toBe(0);
    expect(readFileSync(join(victim, "precious"), "utf8")).toBe("keep me");
    expect(readdirSync(spoolDir)).toEqual([]);
  });

  test("ContainerPath and MountSpoolDir patterns place the step dir and its mount", async () => {
    const base = tempDir();
    const conf = runModeConf(`ContainerPath=${base}/cp/%u/%U\nMountSpoolDir=/tmp/spool-%t\n`);
    const bundleDir = makeBundle(join(base, "bundle"));
    // The mount point must be in the image: the plugin never has one created in the rootfs.
    mkdirSync(join(bundleDir, "rootfs/tmp/spool-0"));
    const r = await runStep(plugin, {
      confDir: writeConf(tempDir(), conf),
      spoolDir: tempDir(),
      jobId: job(),
      argv: ["sh", "-c", "ls /tmp/spool-0"],
      container: { value: bundleDir },
    });
    expect(r.tasks[0]?.code, r.tasks[0]?.stderr).toBe(0);
    expect(r.tasks[0]?.stdout).toBe("task-0\n");
    expect(readdirSync(join(base, "cp/root/0"))).toEqual([]);
  });

  test("what a wrapper leaves in %m goes with the last task; a container that could not be deleted keeps its task dir (W14)", async () => {
    const spoolDir = tempDir();
    const wrapper =
      'IgnoreFileConfigJson=true\nRunTimeRun="mkdir -p %m/cache && echo img > %m/cache/container.sqsh && %@"\n';
    const r = await runStep(plugin, {
      confDir: writeConf(tempDir(), wrapper),
      spoolDir,
      jobId: job(),
      ntasks: 2,
      argv: ["true"],
      container: { value: bundle },
    });
    expect(r.tasks.map((t) => t.code)).toEqual([0, 0]);
    expect(readdirSync(spoolDir)).toEqual([]);

    const stuckSpool = tempDir();
    const jobId = job();
    const logs: string[] = [];
    const stateFile = join(tempDir(), "state.json");
    writeFileSync(stateFile, JSON.stringify({ status: "stopped", pid: 0 }));
    const stuck = `RunTimeQuery="cat ${stateFile}"\nRunTimeRun="%@"\nRunTimeKill="true"\nRunTimeDelete="false"\n`;
    const r2 = await runStep(plugin, {
      confDir: writeConf(tempDir(), stuck),
      spoolDir: stuckSpool,
      jobId,
      argv: ["true"],
      container: { value: bundle },
      logs,
    });
    expect(r2.tasks[0]?.code).toBe(0);
    expect(readdirSync(join(stuckSpool, `oci-job${jobId}-0`))).toEqual(["task-0"]);
    expect(logs.join("\n")).toContain("container may still exist");
  });

  test("--container-env, --container-workdir and --container-volume", async () => {
    const data = tempDir();
    writeFileSync(join(data, "f"), "from host");
    const r = await runStep(plugin, {
      confDir: writeConf(tempDir(), runModeConf()),
      spoolDir: tempDir(),
      jobId: job(),
      argv: ["sh", "-c", 'echo "$X $(pwd) $(cat /data/f)"'],
      container: { value: bundle, env: ["X=y"], workdir: "/tmp", volumes: [`${data}:/data:ro`] },
    });
    expect(r.tasks[0]?.stdout).toBe("y /tmp from host\n");
  });

  test("a run as nobody uses rootless runc (embedded default), fitting a `runc spec --rootless` bundle to the job's ids", async () => {
    const base = openUp(tempDir());
    // Generated by root: its single-id mappings name uid 0; the plugin points them at nobody.
    const b = makeBundle(join(base, "rootless"), undefined, true);
    const spoolDir = openUp(tempDir());
    const r = await runStep(plugin, {
      confDir: tempDir(),
      spoolDir,
      jobId: job(),
      uid: 65534,
      gid: 65534,
      user: "nobody",
      argv: ["sh", "-c", "cat /proc/self/uid_map; id -u"],
      container: { value: b },
    });
    expect(r.setupError).toBeUndefined();
    expect(r.tasks[0]?.code, r.tasks[0]?.stderr).toBe(0);
    expect(r.tasks[0]?.stdout.replace(/\s+/g, " ").trim()).toBe("0 65534 1 0");
    expect(readdirSync(spoolDir)).toEqual([]);
  });

  test("create/start as nobody (rootless runc): the non-root supervisor still reads the real exit status", async () => {
    const base = openUp(tempDir());
    const b = makeBundle(
      join(base, "rootless"),
      (c) => {
        c.linux.uidMappings = [{ containerID: 0, hostID: 65534, size: 1 }];
        c.linux.gidMappings = [{ containerID: 0, hostID: 65534, size: 1 }];
      },
      true,
    );
    const R = "runc --rootless=true --root %m/runc";
    const ID = "%n.%U.%j.%s.%t";
    const conf = `RunTimeQuery="${R} state ${ID}"\nRunTimeCreate="${R} create ${ID} -b %b"\nRunTimeStart="${R} start ${ID}"\nRunTimeKill="${R} kill ${ID}"\nRunTimeDelete="${R} delete --force ${ID}"\n`;
    const spoolDir = openUp(tempDir());
    const r = await runStep(plugin, {
      confDir: writeConf(tempDir(), conf),
      spoolDir,
      jobId: job(),
      ntasks: 2,
      uid: 65534,
      gid: 65534,
      user: "nobody",
      argv: ["sh", "-c", "echo in; exit 3"],
      container: { value: b },
    });
    expect(r.setupError).toBeUndefined();
    expect(r.tasks.map((t) => [t.code, t.stdout, t.stderr])).toEqual([
      [3, "in\n", ""],
      [3, "in\n", ""],
    ]);
    expect(readdirSync(spoolDir)).toEqual([]);
  });

  test("a run as nobody with a bundle that has no user namespace fails in setup saying how to fix it", async () => {
    const base = openUp(tempDir());
    const r = await runStep(plugin, {
      confDir: tempDir(),
      spoolDir: openUp(tempDir()),
      jobId: job(),
      uid: 65534,
      gid: 65534,
      user: "nobody",
      argv: ["true"],
      container: { value: makeBundle(join(base, "rootful")) },
    });
    expect(isJobrtError(r.setupError, "ERR_CONTAINER_REQUEST")).toBe(true);
    expect((r.setupError as Error).message).toContain("runc spec --rootless");
    expect(r.tasks).toEqual([]);
  });
});

describe("without a container request or runtime", () => {
  test("no --container: NOT_SUPPORTED, the task runs directly", async () => {
    const r = await runStep(plugin, { confDir: tempDir(), spoolDir: tempDir(), argv: ["echo", "host"] });
    expect(r.tasks[0]?.spec).toBe(NOT_SUPPORTED);
    expect(r.tasks[0]?.stdout).toBe("host\n");
  });
  test("--container, no oci.conf and no runc on PATH: ERR_CONTAINER_NOT_CONFIGURED saying how to configure", async () => {
    const saved = process.env.PATH;
    process.env.PATH = "/nonexistent";
    try {
      const r = await runStep(plugin, {
        confDir: tempDir(),
        spoolDir: tempDir(),
        env: { PATH: "/nonexistent" },
        argv: ["true"],
        container: { value: "/b" },
      });
      expect(isJobrtError(r.setupError, "ERR_CONTAINER_NOT_CONFIGURED")).toBe(true);
      expect((r.setupError as Error).message).toMatch(/install runc .* or write an oci.conf/);
      expect(r.tasks).toEqual([]);
    } finally {
      process.env.PATH = saved;
    }
  });
  test("container options this runtime cannot honour are refused", async () => {
    const r = await runStep(plugin, {
      confDir: tempDir(),
      spoolDir: tempDir(),
      argv: ["true"],
      container: { value: "/b", modules: ["mpich"] },
    });
    expect(isJobrtError(r.setupError, "ERR_CONTAINER_REQUEST")).toBe(true);
  });
});
