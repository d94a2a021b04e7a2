import { execFileSync } from "node:child_process";
import { cpSync, existsSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ExecSpec } from "@jobrt/core";
import { createTestNode, createTestStep, launchTask, pluginHost } from "@jobrt/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import plugin from "../src/index.js";
import { busyboxImage } from "./image.js";
import { tempDir } from "../../../tests/helpers/tmp.js";

// --container-image through the host's image service (@jobrt/images, docs/images.md): the same
// reference, pin and cache as runtime-oci, run here as a directory by ch-run.
const host = pluginHost(plugin);
const haveTools = ["/usr/bin/umoci", "/usr/bin/skopeo"].every((t) => existsSync(t));

let work: string;
let layout: string;
beforeAll(async () => {
  await plugin.init({ context: "step" });
  if (!haveTools) return; // the prerequisite test below fails, saying what is missing
  work = tempDir("jobrt-cc-oci-");
  layout = join(work, "layout");
  const bundle = join(work, "bundle");
  const umoci = (...args: string[]) => execFileSync("umoci", args, { stdio: "pipe" });
  umoci("init", "--layout", layout);
  umoci("new", "--image", `${layout}:t`);
  umoci("unpack", "--rootless", "--image", `${layout}:t`, bundle);
  const image = busyboxImage(join(work, "image"));
  cpSync(image, join(bundle, "rootfs"), { recursive: true, verbatimSymlinks: true });
  umoci("repack", "--image", `${layout}:t`, bundle);
});
afterAll(async () => {
  await plugin.fini();
  if (work) rmSync(work, { recursive: true, force: true });
});

describe("charliecloud --container-image", () => {
  it("prerequisites: umoci and skopeo are here (scripts/system-deps.sh installs them; this suite never skips)", () => {
    expect(haveTools).toBe(true);
  });

  it("runs the task in the image the host's image service acquired, and gives it back at cleanup", async () => {
    const node = createTestNode();
    writeFileSync(join(node.confDir, "images.conf"), `CacheDir=${join(work, "cache")}\n`);
    const step = createTestStep({ runtime: "charliecloud", tasks: 1, argv: ["cat", "/etc/jobrt-image"], container: { options: { image: [`oci:${layout}:t`] } } });
    await host.validate(node, step);
    try {
      await host.setup(node, step);
      const task = step.tasks[0]!;
      await host.taskInit(node, step, task);
      const spec = (await host.run(node, step, task)) as ExecSpec;
      expect(spec.argv.some((a) => a.startsWith(join(work, "cache")))).toBe(true);
      const out = await launchTask(spec, step, task);
      expect(out).toMatchObject({ code: 0, stdout: "charliecloud-busybox\n" });
    } finally {
      await host.cleanup(node, step);
    }
    expect(readdirSync(node.spoolDir).filter((n) => n.startsWith("oci-image-"))).toEqual([]);
  });

  it("the site's trust policy holds here too: a refused image fails setup in one line before anything is pulled", async () => {
    const node = createTestNode();
    const policy = join(node.confDir, "policy.json");
    // The layout's own dir is refused, everything else accepted: the scope is the image's path.
    writeFileSync(policy, JSON.stringify({ default: [{ type: "insecureAcceptAnything" }], transports: { oci: { [layout]: [{ type: "reject" }] } } }));
    const cache = join(work, "cache-refused");
    writeFileSync(join(node.confDir, "images.conf"), `CacheDir=${cache}\nTrustPolicy=${policy}\n`);
    const step = createTestStep({ runtime: "charliecloud", tasks: 1, argv: ["true"], container: { options: { image: [`oci:${layout}:t`] } } });
    await host.validate(node, step);
    try {
      await expect(host.setup(node, step)).rejects.toMatchObject({
        code: "ERR_IMAGE_UNTRUSTED",
        message: expect.stringMatching(new RegExp(`^[^\n]*--container-image oci:${layout}:t is refused \\(policy ${policy}, transports\\.oci\\."${layout}", requirement reject\\)$`)),
      });
    } finally {
      await host.cleanup(node, step);
    }
    const left = existsSync(cache) ? readdirSync(cache, { recursive: true, encoding: "utf8" }) : [];
    expect(left.filter((p) => /[0-9a-f]{64}$/.test(p))).toEqual([]);
  });

  it("refuses --container and --container-image together", async () => {
    const node = createTestNode();
    const step = createTestStep({ runtime: "charliecloud", tasks: 1, argv: ["true"], container: { value: "/srv/x", options: { image: [`oci:${layout}:t`] } } });
    await expect(host.validate(node, step)).rejects.toThrow("give either --container (an image directory) or --container-image, not both");
  });
});
