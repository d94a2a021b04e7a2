import { NOT_SUPPORTED, RUNTIME_API_VERSION, checkAccepted, emptyRequest } from "@jobrt/core";
import { createTestNode, createTestStep, pluginHost } from "@jobrt/testkit";
import { describe, expect, it } from "vitest";
import plugin from "../src/index.js";

describe("runtime/none", () => {
  it("names itself and speaks this core's API", () => {
    expect(plugin.meta).toMatchObject({ name: "none", type: "runtime/none", apiVersion: RUNTIME_API_VERSION });
    expect(plugin.meta.version).toMatch(/^\d+\.\d+\.\d+/);
  });

  it("ignores --container and lets the host run the task", async () => {
    const node = createTestNode();
    const host = pluginHost(plugin);
    const step = createTestStep({ runtime: "none", tasks: 2, container: { value: "/some/bundle" } });
    await host.setup(node, step);
    for (const task of step.tasks) {
      await host.taskInit(node, step, task);
      expect(await host.run(node, step, task)).toBe(NOT_SUPPORTED);
    }
    await host.cleanup(node, step);
  });

  it("refuses devices, which a task on the host cannot be given, and accepts every other field", () => {
    const request = { ...emptyRequest(), devices: ["nvidia.com/gpu=0"] };
    expect(() => checkAccepted(plugin.meta.type, plugin.meta.accepts ?? [], request)).toThrow(
      /runtime none does not accept --container-device/,
    );
    expect(() =>
      checkAccepted(plugin.meta.type, plugin.meta.accepts ?? [], { ...emptyRequest(), value: "b", volumes: ["/a:/b"] }),
    ).not.toThrow();
  });
});
