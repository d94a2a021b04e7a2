/**
 * A command the container does not have ends the task with 127 (126 when it is there but not
 * executable), in every mode, while every command the container does have keeps its own status:
 * reached through a bind, through an absolute symlink that only means something inside the
 * rootfs, through PATH of the bundle's config.json, or behind a directory of the same name
 * (docs/runtime-oci.md, Missing command). Real runc, the real busybox bundle.
 */
import { chmodSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, test } from "vitest";
import { type ExecSpec, NOT_SUPPORTED } from "@jobrt/core";
import plugin from "../src/index.js";
import { createStartConf, haveRunc, isRoot, makeBundle, openUp, runModeConf, writeConf } from "./fixtures.js";
import { type HostOptions, type TaskOutcome, runStep, tempDir, trackedJobs } from "./host.js";

const modes = [
  ["embedded runc run", () => tempDir()],
  ["oci.conf run mode", () => writeConf(tempDir(), runModeConf())],
  ["create/start mode", () => writeConf(tempDir(), createStartConf())],
] as const;

const NOT_FOUND = "command not found in the container";

/** A script in the container that exits 1 by itself. */
const EXITS_ONE = "#!/bin/sh\necho ran:$0\nexit 1\n";

function plant(rootfs: string): void {
  const local = join(rootfs, "usr/local/bin");
  mkdirSync(local, { recursive: true });
  // A directory named like a command: PATH search goes on to /bin/false; one with nothing after it is 126.
  mkdirSync(join(local, "false"));
  mkdirSync(join(local, "jobrt-only-a-dir"));
  // Absolute symlinks, meaningful inside the rootfs only.
  // Busybox runs the applet its argv[0] names: this one is `echo`.
  mkdirSync(join(rootfs, "jobrt-links"));
  symlinkSync("/bin/busybox", join(rootfs, "jobrt-links/echo"));
  mkdirSync(join(rootfs, "jobrt-rootfs-only"));
  writeFileSync(join(rootfs, "jobrt-rootfs-only/tool"), EXITS_ONE, { mode: 0o755 });
  symlinkSync("/jobrt-rootfs-only/tool", join(local, "jobrt-inside"));
  symlinkSync("/usr/bin/perl", join(local, "jobrt-host-perl"));
  // Relative symlinks that try to climb out of the rootfs: `..` stops at the container's /.
  symlinkSync("../../../../../../../../../usr/bin", join(local, "escape-bin"));
  symlinkSync("../../../../../../../../../etc", join(local, "escape-etc"));
  symlinkSync("../../etc", join(rootfs, "escape-etc"));
  // The bundle's PATH dir (see the PATH test) and a dir only the job's own PATH names.
  mkdirSync(join(rootfs, "jobrt-path"));
  writeFileSync(join(rootfs, "jobrt-path/pathtool"), EXITS_ONE, { mode: 0o755 });
  mkdirSync(join(rootfs, "jobrt-hidden"));
  writeFileSync(join(rootfs, "jobrt-hidden/hiddentool"), EXITS_ONE, { mode: 0o755 });
  writeFileSync(join(rootfs, "etc/not-executable"), EXITS_ONE, { mode: 0o644 });
}

describe("a command missing in the container", () => {
  // Never skipped: without runc or root these fail here, loudly (scripts/system-deps.sh).
  beforeAll(() => {
    expect(haveRunc, "runc is installed").toBe(true);
    expect(isRoot, "these tests run as root").toBe(true);
  });
  const bundle = makeBundle(join(tempDir(), "bundle"));
  plant(join(bundle, "rootfs"));
  // The same rootfs with PATH set by the bundle's config.json (it wins over the job's PATH).
  const pathBundle = makeBundle(join(tempDir(), "path-bundle"), (c) => {
    c.process.env = ["PATH=/jobrt-path:/bin", "TERM=xterm"];
  });
  plant(join(pathBundle, "rootfs"));
  const job = trackedJobs();

  test("as job user nobody (rootless runc, run and create/start): 127 for a missing command, an existing one keeps its 3", async () => {
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
    const createStart = `RunTimeQuery="${R} state ${ID}"\nRunTimeCreate="${R} create ${ID} -b %b"\nRunTimeStart="${R} start ${ID}"\nRunTimeKill="${R} kill ${ID}"\nRunTimeDelete="${R} delete --force ${ID}"\n`;
    const nobody = { uid: 65534, gid: 65534, user: "nobody", container: { value: b } };
    const run = async (confDir: string, argv: string[]) => {
      const r = await runStep(plugin, { confDir, spoolDir: openUp(tempDir()), jobId: job(), argv, ...nobody });
      expect(r.setupError).toBeUndefined();
      return r.tasks[0] as TaskOutcome;
    };
    const confs = [tempDir(), writeConf(tempDir(), createStart)];
    const results = await Promise.all(
      confs.flatMap((c) => [run(c, ["jobrt-no-such-command"]), run(c, ["sh", "-c", "exit 3"])]),
    );
    expect(results.map((t) => t.code)).toEqual([127, 3, 127, 3]);
  });

  for (const [mode, confDir] of modes) {
    describe(mode, () => {
      const run = async (argv: string[], extra: Partial<HostOptions> = {}): Promise<TaskOutcome> => {
        const r = await runStep(plugin, {
          confDir: confDir(),
          spoolDir: tempDir(),
          jobId: job(),
          argv,
          container: { value: bundle },
          ...extra,
        });
        expect(r.setupError).toBeUndefined();
        expect(r.cleanupError).toBeUndefined();
        return r.tasks[0] as TaskOutcome;
      };
      const status = (t: TaskOutcome) => ({ code: t.code, signal: t.signal });

      test("not on PATH: 127; only a directory or a file without x bits: 126; `false` behind a directory named false: still 1", async () => {
        const [missing, absolute, dirOnly, noExec, viaDir] = await Promise.all([
          run(["jobrt-no-such-command"]),
          run(["/no/such/dir/cmd"]),
          run(["jobrt-only-a-dir"]),
          run(["/etc/not-executable"]),
          run(["false"]),
        ]);
        expect(status(missing)).toEqual({ code: 127, signal: null });
        expect(missing.stderr).toContain(`jobrt-no-such-command: ${NOT_FOUND}`);
        // One line: create/start's own, with one prefix (it printed "jobrt-oci: jobrt-oci: ..."); in
        // run mode the host's (ExecSpec.supervise), which `jobrt run` prints as "jobrt: task N: ...".
        const prefix = mode === "create/start mode" ? "jobrt-oci: " : "";
        expect(missing.stderr).toMatch(new RegExp(`^${prefix}jobrt-no-such-command: ${NOT_FOUND}`, "m"));
        expect(missing.stderr.match(new RegExp(NOT_FOUND, "g"))).toHaveLength(1);
        expect(status(absolute)).toEqual({ code: 127, signal: null });
        expect(status(dirOnly)).toEqual({ code: 126, signal: null });
        expect(status(noExec)).toEqual({ code: 126, signal: null });
        expect(status(viaDir)).toEqual({ code: 1, signal: null });
        expect(viaDir.stderr).not.toContain("jobrt-oci");
      });

      test("present only through a --container-volume bind: runs and keeps its exit 1; without the bind: 127", async () => {
        const tools = tempDir();
        chmodSync(tools, 0o755);
        writeFileSync(join(tools, "boundtool"), EXITS_ONE, { mode: 0o755 });
        const [bound, unbound] = await Promise.all([
          run(["/jobrt-bound/boundtool"], { container: { value: bundle, volumes: [`${tools}:/jobrt-bound`] } }),
          run(["/jobrt-bound/boundtool"]),
        ]);
        expect(status(bound)).toEqual({ code: 1, signal: null });
        expect(bound.stdout).toBe("ran:/jobrt-bound/boundtool\n");
        expect(status(unbound)).toEqual({ code: 127, signal: null });
      });

      test("absolute symlinks resolve in the rootfs: to /bin/busybox and to a rootfs-only file they run; to the host's /usr/bin/perl: 127", async () => {
        const [bb, inside, hostOnly] = await Promise.all([
          run(["/jobrt-links/echo", "via busybox"]),
          run(["jobrt-inside"]),
          run(["jobrt-host-perl", "-e", "exit 0"]),
        ]);
        expect(status(bb)).toEqual({ code: 0, signal: null });
        expect(bb.stdout).toBe("via busybox\n");
        expect(status(inside)).toEqual({ code: 1, signal: null });
        expect(inside.stdout).toBe("ran:/usr/local/bin/jobrt-inside\n");
        expect(status(hostOnly)).toEqual({ code: 127, signal: null });
      });

      test("a rootfs symlink pointing out (../../etc, ../../../../usr/bin) stays inside: the rootfs's files count, the host's do not", async () => {
        const [env, perl, deepEtc, rootEtc] = await Promise.all([
          run(["/usr/local/bin/escape-bin/env", "true"]),
          run(["/usr/local/bin/escape-bin/perl", "-e", "exit 0"]),
          run(["/usr/local/bin/escape-etc/not-executable"]),
          run(["/escape-etc/not-executable"]),
        ]);
        expect(status(env)).toEqual({ code: 0, signal: null });
        // The host's /usr/bin/perl is no command of the container's.
        expect(status(perl)).toEqual({ code: 127, signal: null });
        // The rootfs's /etc/not-executable (the host's /etc has none): there, not executable.
        expect(status(deepEtc)).toEqual({ code: 126, signal: null });
        expect(status(rootEtc)).toEqual({ code: 126, signal: null });
      });

      // Run mode: the host looks only after the runtime failed (ExecSpec.supervise), never before the exec.
      if (mode !== "create/start mode") {
        test("a command that appears after the run hook keeps its own status: the host looks after the runtime failed", async () => {
          const tools = tempDir();
          chmodSync(tools, 0o755);
          let spec: ExecSpec | undefined;
          const late = await run(["/jobrt-late/latetool"], {
            container: { value: bundle, volumes: [`${tools}:/jobrt-late`] },
            beforeSpawn: (s) => {
              spec = s === NOT_SUPPORTED ? undefined : s;
              writeFileSync(join(tools, "latetool"), EXITS_ONE, { mode: 0o755 });
            },
          });
          expect(status(late)).toEqual({ code: 1, signal: null });
          expect(late.stdout).toBe("ran:/jobrt-late/latetool\n");
          // The runtime is the task's process; the host checks the command config.json names.
          expect(spec?.argv).not.toContain(process.execPath);
          expect(spec?.supervise?.missingCommand?.command).toBe("/jobrt-late/latetool");
        });
      }

      test("PATH is the container's (config.json's wins over the job's): a tool there runs and keeps 1, one only the job's PATH names is 127", async () => {
        const env = { PATH: "/jobrt-hidden:/usr/bin:/bin" };
        const [onPath, hidden] = await Promise.all([
          run(["pathtool"], { env, container: { value: pathBundle } }),
          run(["hiddentool"], { env, container: { value: pathBundle } }),
        ]);
        expect(status(onPath)).toEqual({ code: 1, signal: null });
        expect(onPath.stdout).toBe("ran:/jobrt-path/pathtool\n");
        expect(status(hidden)).toEqual({ code: 127, signal: null });
      });
    });
  }
});
