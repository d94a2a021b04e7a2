import { chmodSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type ContainerRequest, JobrtError } from "@jobrt/core";
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
  it("the job's NODE_OPTIONS reaches the task unchanged, and does not reach the forwarder", async () => {
    // Were it applied to the forwarder (node), node would refuse to start: no such module.
    const value = "--require /nonexistent/jobrt-bwrap-preload.js";
    const r = await runTask(["sh", "-c", 'printf %s "$NODE_OPTIONS"'], { env: { NODE_OPTIONS: value } });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(value);
  });

  it("an existing command keeps its own exit status: false exits 1, a file that is not executable 126", async () => {
    expect((await runTask(["false"])).code).toBe(1);
    const script = join(dir, "not-executable.sh");
    writeFileSync(script, "#!/bin/sh\nexit 0\n", { mode: 0o644 });
    expect((await runTask([script])).code).toBe(126);
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

  it("a rootfs without env is refused at setup, naming the option", async () => {
    const empty = join(dir, "empty-rootfs");
    mkdirSync(empty, { recursive: true });
    const step = createTestStep({ runtime: "bwrap", tasks: 1, cwd: dir, container: { value: empty } });
    const err = await pluginHost(bwrap)
      .setup(node, step)
      .then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(JobrtError);
    expect((err as JobrtError).code).toBe("ERR_CONTAINER_IMAGE");
    expect((err as JobrtError).message).toContain(`--container "${empty}": has no /usr/bin/env or /bin/env`);
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
