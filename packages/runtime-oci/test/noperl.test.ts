/**
 * create/start without perl: createstart.pl is the whole task program, so `run` refuses the task
 * with ERR_LAUNCH naming what to do (docs/runtime-oci.md, create/start mode), and nothing starts.
 */
import { join } from "node:path";
import { type TaskRecord, isJobrtError } from "@jobrt/core";
import { pluginHost } from "@jobrt/testkit";
import { describe, expect, test, vi } from "vitest";
import plugin from "../src/index.js";
import { createStartConf, makeBundle, writeConf } from "./fixtures.js";
import { makeNode, makeStep, tempDir, trackedJobs } from "./host.js";

vi.mock("../src/conf.js", async (original) => {
  const conf = await original<typeof import("../src/conf.js")>();
  return {
    ...conf,
    findProgram: (name: string, path: string | undefined) =>
      name === "perl" ? undefined : conf.findProgram(name, path),
  };
});

const host = pluginHost(plugin);

describe("create/start without perl", () => {
  const job = trackedJobs();
  const bundle = makeBundle(join(tempDir(), "bundle"));

  test("run fails with ERR_LAUNCH saying create/start needs perl and naming RunTimeRun", async () => {
    const confDir = writeConf(tempDir(), createStartConf());
    const step = makeStep({ confDir, spoolDir: tempDir(), jobId: job(), argv: ["true"], container: { value: bundle } });
    const node = makeNode({ confDir, spoolDir: tempDir() });
    const task = step.tasks[0] as TaskRecord;
    try {
      await host.setup(node, step);
      await host.taskInit(node, step, task);
      const error = await host.run(node, step, task).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(isJobrtError(error, "ERR_LAUNCH")).toBe(true);
      expect((error as Error).message).toContain("create/start mode needs perl");
      expect((error as Error).message).toContain(`set RunTimeRun in ${join(confDir, "oci.conf")} for run mode`);
    } finally {
      await host.cleanup(node, step);
    }
  });
});
