/**
 * A command the image does not have ends the task with 127 (126 when it is there but not
 * executable), while every command the container does have keeps its own status: reached
 * through a bind or the host's /tmp, through an absolute symlink that only means something inside
 * the image, through the container's own PATH, or behind a directory of the same name (README,
 * Missing command). Real ch-run, a real busybox image.
 */
import { chmodSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ContainerRequest, ExecSpec } from "@jobrt/core";
import { createTestNode, createTestStep, launchTask, pluginHost } from "@jobrt/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import plugin from "../src/index.js";
import { busyboxImage } from "./image.js";
import { tempDir } from "../../../tests/helpers/tmp.js";

const host = pluginHost(plugin);
/** A script in the container that exits 1 by itself. */
const EXITS_ONE = "#!/bin/sh\necho ran:$0\nexit 1\n";
const PATH = "/usr/local/bin:/bin";

let image: string;
let tools: string;
beforeAll(async () => {
  image = busyboxImage();
  const local = join(image, "usr/local/bin");
  mkdirSync(local, { recursive: true });
  mkdirSync(join(local, "false"));
  mkdirSync(join(local, "jobrt-only-a-dir"));
  writeFileSync(join(image, "etc/not-executable"), EXITS_ONE, { mode: 0o644 });
  // Busybox runs the applet its argv[0] names: this one is `echo`.
  mkdirSync(join(image, "jobrt-links"));
  symlinkSync("/bin/busybox", join(image, "jobrt-links/echo"));
  mkdirSync(join(image, "jobrt-rootfs-only"));
  writeFileSync(join(image, "jobrt-rootfs-only/tool"), EXITS_ONE, { mode: 0o755 });
  symlinkSync("/jobrt-rootfs-only/tool", join(local, "jobrt-inside"));
  symlinkSync("/usr/bin/perl", join(local, "jobrt-host-perl"));
  symlinkSync("../../../../../../../../../usr/bin", join(local, "escape-bin"));
  symlinkSync("../../../../../../../../../etc", join(local, "escape-etc"));
  symlinkSync("../../etc", join(image, "escape-etc"));
  for (const [dir, name] of [["jobrt-path", "pathtool"], ["jobrt-hidden", "hiddentool"]] as const) {
    mkdirSync(join(image, dir));
    writeFileSync(join(image, dir, name), EXITS_ONE, { mode: 0o755 });
  }
  // A host dir: bound into the container, and reached through ch-run's bind of the host's /tmp.
  tools = tempDir("jobrt-cc-tools-");
  chmodSync(tools, 0o755);
  writeFileSync(join(tools, "boundtool"), EXITS_ONE, { mode: 0o755 });
  await plugin.init({ context: "step" });
});
afterAll(async () => {
  await plugin.fini();
  for (const d of [image, tools]) if (d) rmSync(d, { recursive: true, force: true });
});

/** Runs a one-task step through the plugin hooks and real ch-run; always cleans up. */
async function run(argv: string[], container: Partial<ContainerRequest> = {}, env: Record<string, string> = { PATH }) {
  const node = createTestNode();
  const step = createTestStep({ runtime: "charliecloud", tasks: 1, argv, env, container: { value: image, ...container } });
  try {
    await host.setup(node, step);
    const task = step.tasks[0];
    if (!task) throw new Error("no task");
    await host.taskInit(node, step, task);
    const out = await launchTask((await host.run(node, step, task)) as ExecSpec, step, task);
    return { ...out, status: { code: out.code, signal: out.signal ?? null } };
  } finally {
    await host.cleanup(node, step);
  }
}

describe("charliecloud: a command missing in the image", () => {
  it("not on PATH: 127; only a directory or a file without x bits: 126; `false` behind a directory named false: still 1", async () => {
    const [missing, absolute, dirOnly, noExec, viaDir] = await Promise.all([
      run(["jobrt-no-such-command"]),
      run(["/no/such/dir/cmd"]),
      run(["jobrt-only-a-dir"]),
      run(["/etc/not-executable"]),
      run(["false"]),
    ]);
    expect(missing.status).toEqual({ code: 127, signal: null });
    expect(missing.stderr).toContain("jobrt-no-such-command: command not found in the container");
    expect(absolute.status).toEqual({ code: 127, signal: null });
    expect(dirOnly.status).toEqual({ code: 126, signal: null });
    expect(noExec.status).toEqual({ code: 126, signal: null });
    expect(viaDir.status).toEqual({ code: 1, signal: null });
    expect(viaDir.stderr).toBe("");
  });

  it("present only through a --container-volume bind or the host's /tmp: runs and keeps its exit 1; without the bind: 127", async () => {
    const [bound, viaTmp, unbound, missingInTmp] = await Promise.all([
      run(["/mnt/boundtool"], { volumes: [`${tools}:/mnt`] }),
      run([join(tools, "boundtool")]),
      run(["/mnt/boundtool"]),
      run([join(tools, "no-such-tool")]),
    ]);
    expect(bound.status).toEqual({ code: 1, signal: null });
    expect(bound.stdout).toBe("ran:/mnt/boundtool\n");
    expect(viaTmp.status).toEqual({ code: 1, signal: null });
    expect(unbound.status).toEqual({ code: 127, signal: null });
    expect(missingInTmp.status).toEqual({ code: 127, signal: null });
  });

  it("absolute symlinks resolve in the image: to /bin/busybox and to an image-only file they run; to the host's /usr/bin/perl: 127", async () => {
    const [bb, inside, hostOnly] = await Promise.all([run(["/jobrt-links/echo", "via busybox"]), run(["jobrt-inside"]), run(["jobrt-host-perl", "-e", "exit 0"])]);
    expect(bb.status).toEqual({ code: 0, signal: null });
    expect(bb.stdout).toBe("via busybox\n");
    expect(inside.status).toEqual({ code: 1, signal: null });
    expect(inside.stdout).toBe("ran:/usr/local/bin/jobrt-inside\n");
    expect(hostOnly.status).toEqual({ code: 127, signal: null });
  });

  it("an image symlink pointing out (../../etc, ../../../../usr/bin) stays inside: the image's files count, the host's do not", async () => {
    const [perl, deepEtc, rootEtc] = await Promise.all([
      run(["/usr/local/bin/escape-bin/perl", "-e", "exit 0"]),
      run(["/usr/local/bin/escape-etc/not-executable"]),
      run(["/escape-etc/not-executable"]),
    ]);
    expect(perl.status).toEqual({ code: 127, signal: null });
    expect(deepEtc.status).toEqual({ code: 126, signal: null });
    expect(rootEtc.status).toEqual({ code: 126, signal: null });
  });

  it("PATH is the container's: --container-env PATH wins, --container-clearenv drops the job's (execvp's default applies)", async () => {
    const env = { PATH: "/jobrt-hidden:/usr/local/bin:/bin" };
    const [onPath, hidden, cleared, clearedSh] = await Promise.all([
      run(["pathtool"], { env: ["PATH=/jobrt-path:/bin"] }, env),
      run(["hiddentool"], { env: ["PATH=/jobrt-path:/bin"] }, env),
      run(["hiddentool"], { clearEnv: true }, env),
      run(["sh", "-c", "exit 1"], { clearEnv: true }, env),
    ]);
    expect(onPath.status).toEqual({ code: 1, signal: null });
    expect(onPath.stdout).toBe("ran:/jobrt-path/pathtool\n");
    expect(hidden.status).toEqual({ code: 127, signal: null });
    expect(cleared.status).toEqual({ code: 127, signal: null });
    expect(clearedSh.status).toEqual({ code: 1, signal: null });
  });
});
