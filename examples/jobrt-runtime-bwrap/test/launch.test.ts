import { chmodSync, copyFileSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ContainerRequest } from "@jobrt/core";
import { type TestNode, createTestNode, createTestStep, launchTask, pluginHost } from "@jobrt/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import bwrap from "../src/index.js";
import { tempDir } from "../../../tests/helpers/tmp.js";

let node: TestNode;
let dir: string;
beforeAll(() => {
  node = createTestNode();
  dir = tempDir("jobrt-bwrap-launch-");
  chmodSync(dir, 0o755);
});
afterAll(() => {
  node.dispose();
  rmSync(dir, { recursive: true, force: true });
});

/** One task through setup, run and a real launch, then cleanup: as the host runs it. */
async function runTask(argv: string[], options: { env?: Record<string, string>; container?: Partial<ContainerRequest> } = {}) {
  const host = pluginHost(bwrap);
  const step = createTestStep({ runtime: "bwrap", tasks: 1, argv, cwd: dir, ...options });
  await host.setup(node, step);
  try {
    const task = step.tasks[0]!;
    return await launchTask(await host.run(node, step, task), step, task, { timeoutMs: 30_000 });
  } finally {
    await host.cleanup(node, step);
  }
}

describe("bwrap launches", () => {
  it("the task is bwrap's own: no other process between the host and bwrap, the job's NODE_OPTIONS unchanged", async () => {
    const value = "--require /nonexistent/jobrt-bwrap-preload.js";
    const r = await runTask(["sh", "-c", 'printf %s "$NODE_OPTIONS"'], { env: { NODE_OPTIONS: value } });
    expect(r.argv[0]).toMatch(/\/bwrap$/);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(value);
  });

  it("an existing command keeps its own exit status: false exits 1, a file that is not executable 126", async () => {
    expect((await runTask(["false"])).code).toBe(1);
    expect((await runTask(["/etc/passwd"])).code).toBe(126);
    // Also in the step's cwd bound under the sandbox's own /tmp (a tmpfs the host knows is empty
    // but for that bind): the host sees the file through the bind.
    const script = join(dir, "not-executable.sh");
    writeFileSync(script, "#!/bin/sh\nexit 0\n", { mode: 0o644 });
    expect((await runTask([script])).code).toBe(126);
  });

  it("a missing command is 127 with one line of the host's after bwrap's own; a command named like a variable runs", async () => {
    const r = await runTask(["jobrt-bwrap-no-such-command"]);
    expect(r.code).toBe(127);
    expect(r.stderr.trim().split("\n")).toEqual([
      "bwrap: execvp jobrt-bwrap-no-such-command: No such file or directory",
      "jobrt-bwrap-no-such-command: command not found in the container (exit status 127)",
    ]);
    const tool = join(dir, "A=B");
    writeFileSync(tool, "#!/bin/sh\necho ran\n", { mode: 0o755 });
    expect(await runTask([tool])).toMatchObject({ code: 0, stdout: "ran\n" });
  });

  it("--container-volume binds read-only when asked, --container-env sets a variable over the task's", async () => {
    const src = join(dir, "vol");
    mkdirSync(src, { recursive: true });
    writeFileSync(join(src, "marker"), "from-the-volume");
    const r = await runTask(["sh", "-c", 'cat /mnt/marker; echo " $X"; touch /mnt/new 2>/dev/null && echo writable || echo read-only'], {
      env: { X: "task" },
      container: { volumes: [`${src}:/mnt:ro`], env: ["X=request"] },
    });
    expect(r.stdout).toBe("from-the-volume request\nread-only\n");
  });

  it("a rootfs without env runs its commands, and its missing ones are 127", async () => {
    const bare = join(dir, "bare-rootfs");
    for (const d of ["bin", "dev", "proc", "tmp"]) mkdirSync(join(bare, d), { recursive: true });
    copyFileSync("/bin/busybox", join(bare, "bin/busybox"));
    symlinkSync("busybox", join(bare, "bin/sh"));
    const ok = await runTask(["/bin/sh", "-c", "echo in-bare"], { container: { value: bare } });
    expect(ok, ok.stderr).toMatchObject({ code: 0, stdout: "in-bare\n" });
    expect((await runTask(["env"], { container: { value: bare }, env: { PATH: "/bin" } })).code).toBe(127);
  });

  it("without bwrap on PATH setup says what to install", async () => {
    const saved = process.env.PATH;
    process.env.PATH = dir;
    try {
      const step = createTestStep({ runtime: "bwrap", tasks: 1, cwd: dir });
      await expect(pluginHost(bwrap).setup(node, step)).rejects.toMatchObject({ code: "ERR_CONTAINER_NOT_CONFIGURED", message: expect.stringContaining("apt-get install bubblewrap") });
    } finally {
      process.env.PATH = saved;
    }
  });
});
