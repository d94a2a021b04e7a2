import { spawn } from "node:child_process";
import { chmodSync, existsSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ContainerRequest, ExecSpec, NodeConf, StepRecord } from "@jobrt/core";
import { createTestNode, createTestStep, launchTask, pluginHost } from "@jobrt/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import plugin from "../src/index.js";
import { busyboxImage } from "./image.js";
import { tempDir } from "../../../tests/helpers/tmp.js";

const host = pluginHost(plugin);

let image: string;
let work: string;
beforeAll(async () => {
  image = busyboxImage();
  work = tempDir("jobrt-cc-work-");
  chmodSync(work, 0o755);
  await plugin.init({ context: "step" });
});
afterAll(async () => {
  await plugin.fini();
  rmSync(image, { recursive: true, force: true });
  rmSync(work, { recursive: true, force: true });
});

/** Runs one step through the plugin hooks and real ch-run, as the host does; always cleans up. */
async function runStep(container: Partial<ContainerRequest>, argv: string[], opts: { node?: NodeConf; tasks?: number; env?: Record<string, string> } = {}) {
  const node = opts.node ?? createTestNode();
  const step = createTestStep({ runtime: "charliecloud", tasks: opts.tasks ?? 1, argv, container: { value: image, ...container }, ...(opts.env ? { env: opts.env } : {}) });
  try {
    await host.setup(node, step);
    const results = [];
    for (const task of step.tasks) {
      await host.taskInit(node, step, task);
      const spec = (await host.run(node, step, task)) as ExecSpec;
      results.push({ spec, out: await launchTask(spec, step, task) });
    }
    return { node, step, results };
  } finally {
    await host.cleanup(node, step);
  }
}

describe("charliecloud runtime with real ch-run", () => {
  it("runs every task inside the image with its SLURM_* environment", async () => {
    const { results } = await runStep({}, ["sh", "-c", 'echo "$(cat /etc/jobrt-image) $SLURM_PROCID/$SLURM_NTASKS"'], { tasks: 3 });
    expect(results.map((r) => r.out.stdout.trim())).toEqual(["charliecloud-busybox 0/3", "charliecloud-busybox 1/3", "charliecloud-busybox 2/3"]);
    expect(results.every((r) => r.out.code === 0)).toBe(true);
    expect(results[0]?.spec.argv.slice(-5)).toEqual([image, "--", "sh", "-c", 'echo "$(cat /etc/jobrt-image) $SLURM_PROCID/$SLURM_NTASKS"']);
  });

  it("passes the task's exit status through ch-run", async () => {
    const { results } = await runStep({}, ["sh", "-c", "exit 42"]);
    expect(results[0]?.out.code).toBe(42);
  });

  it("binds --container-volume directories and starts in --container-workdir", async () => {
    writeFileSync(join(work, "input.txt"), "from the host\n");
    chmodSync(join(work, "input.txt"), 0o644);
    const { results } = await runStep({ volumes: [`${work}:/data`], workdir: "/data" }, ["sh", "-c", "pwd; cat input.txt"]);
    expect(results[0]?.out.stdout).toBe("/data\nfrom the host\n");
  });

  it("--container-env sets variables literally ($ and quotes kept); the host env still passes through", async () => {
    const { results } = await runStep({ env: ["MSG=it's $HOME \"quoted\""] }, ["sh", "-c", 'echo "$MSG|$HOST_ONLY"'], { env: { HOST_ONLY: "kept" } });
    expect(results[0]?.out.stdout).toBe(`it's $HOME "quoted"|kept\n`);
  });

  it("--container-clearenv keeps only SLURM_* and --container-env; the env file is removed at cleanup", async () => {
    const { node, results } = await runStep({ clearEnv: true, env: ["ONLY=this"] }, ["sh", "-c", 'echo "$ONLY|${HOST_ONLY:-unset}|$SLURM_PROCID"'], {
      env: { HOST_ONLY: "leaked" },
    });
    expect(results[0]?.out.stdout).toBe("this|unset|0\n");
    const envArg = results[0]?.spec.argv.find((a) => a.startsWith("--set-env="));
    expect(envArg).toMatch(new RegExp(`^--set-env=${node.spoolDir}/charliecloud/job\\d+\\.0/task0\\.env$`));
    expect(existsSync((envArg as string).slice("--set-env=".length))).toBe(false);
    expect(readdirSync(node.spoolDir)).toEqual([]);
  });

  it("--container-opt env-file= feeds a site or user env file to ch-run", async () => {
    const file = join(work, "site.env");
    writeFileSync(file, "FROM_FILE='file value'\n");
    chmodSync(file, 0o644);
    const { results } = await runStep({ options: { "env-file": [file] } }, ["sh", "-c", 'echo "$FROM_FILE"']);
    expect(results[0]?.out.stdout).toBe("file value\n");
  });

  it("a relative --container resolves against the step's cwd", async () => {
    const node = createTestNode();
    const step: StepRecord = createTestStep({ runtime: "charliecloud", cwd: join(image, ".."), container: { value: image.split("/").pop() as string } });
    await host.setup(node, step);
    try {
      const spec = (await host.run(node, step, step.tasks[0]!)) as ExecSpec;
      expect(spec.argv).toContain(image);
    } finally {
      await host.cleanup(node, step);
    }
  });

  it.runIf(process.getuid?.() === 0)("as root for an unprivileged job user: env files are the user's, and ch-run runs as that user", async () => {
    const node = createTestNode();
    chmodSync(node.spoolDir, 0o755);
    const step = createTestStep({ runtime: "charliecloud", argv: ["sh", "-c", 'id -u; echo "$V"'], container: { value: image, env: ["V=secret"] }, cwd: work });
    Object.assign(step, { uid: 65534, gid: 65534, user: "nobody", home: "/nonexistent" });
    const task = step.tasks[0]!;
    Object.assign(task.env, { USER: "nobody", HOME: "/nonexistent" });
    try {
      await host.setup(node, step);
      await host.taskInit(node, step, task);
      const spec = (await host.run(node, step, task)) as ExecSpec;
      const envFile = spec.argv.find((a) => a.startsWith("--set-env="))?.slice("--set-env=".length) as string;
      expect(statSync(envFile).uid).toBe(65534);
      expect(statSync(envFile).mode & 0o777).toBe(0o600);
      // The host drops both ids before starting the spec, as the launcher does.
      const out = await new Promise<string>((resolve, reject) => {
        const child = spawn(spec.argv[0] as string, spec.argv.slice(1), { cwd: spec.cwd, env: spec.env, uid: 65534, gid: 65534, stdio: ["ignore", "pipe", "pipe"] });
        let text = "";
        let err = "";
        child.stdout.on("data", (d) => (text += d));
        child.stderr.on("data", (d) => (err += d));
        child.on("error", reject);
        child.on("close", (code) => (code === 0 ? resolve(text) : reject(new Error(`exit ${code}: ${err}`))));
      });
      expect(out).toBe("65534\nsecret\n");
    } finally {
      await host.cleanup(node, step);
    }
    expect(readdirSync(node.spoolDir)).toEqual([]);
  });
});
