import { execFileSync } from "node:child_process";
import { chmodSync, copyFileSync, cpSync, existsSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { NodeConf } from "@jobrt/core";
import type { TestContext } from "vitest";
import { type SuiteKit, fail } from "./suitekit.js";

const MARK = "jobrt-testkit-image";
const TOOLS = ["umoci", "skopeo"];

function onPath(tool: string): boolean {
  return (process.env.PATH ?? "/usr/bin:/bin").split(":").some((d) => d !== "" && existsSync(join(d, tool)));
}

/** Why the image check does not apply to this suite, or undefined when it does. */
function notApplicable(kit: SuiteKit): string | undefined {
  if (!(kit.plugin.meta.accepts ?? []).includes("options.image"))
    return "not applicable: meta.accepts has no options.image (--container-image)";
  if (!kit.launch) return "real-launch checks turned off (launch: false)";
  const missing = TOOLS.filter((t) => !onPath(t));
  if (missing.length > 0) return `not applicable: no ${missing.join(", ")} on PATH to make and read an OCI image`;
  if (!busybox()) return "not applicable: no static busybox (/bin/busybox) to put in the image";
  return undefined;
}

function busybox(): string | undefined {
  return ["/bin/busybox", "/usr/bin/busybox"].find((p) => existsSync(p));
}

/** A one-layer OCI layout (`oci:DIR:t`) holding busybox, an /etc/passwd and a marker file. */
function makeLayout(kit: SuiteKit): string {
  const dir = kit.tempDir("image");
  chmodSync(dir, 0o755);
  const [layout, bundle] = [join(dir, "layout"), join(dir, "bundle")];
  const umoci = (...args: string[]) => execFileSync("umoci", args, { stdio: "pipe" });
  umoci("init", "--layout", layout);
  umoci("new", "--image", `${layout}:t`);
  umoci("unpack", "--rootless", "--image", `${layout}:t`, bundle);
  const rootfs = join(bundle, "rootfs");
  for (const d of ["bin", "etc", "tmp", "proc", "sys", "dev"]) mkdirSync(join(rootfs, d), { recursive: true });
  copyFileSync(busybox() as string, join(rootfs, "bin/busybox"));
  chmodSync(join(rootfs, "bin/busybox"), 0o755);
  for (const a of ["sh", "cat", "echo"]) symlinkSync("busybox", join(rootfs, "bin", a));
  writeFileSync(join(rootfs, "etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n");
  writeFileSync(join(rootfs, "etc/group"), "root:x:0:\n");
  writeFileSync(join(rootfs, `etc/${MARK}`), `${MARK}:ok\n`);
  chmodSync(join(rootfs, "tmp"), 0o1777);
  umoci("repack", "--image", `${layout}:t`, bundle);
  execFileSync("chmod", ["-R", "a+rX", layout]);
  return layout;
}

/** The suite's node with its own image cache: the author's conf dir copied, plus an images.conf. */
function imageNode(kit: SuiteKit): NodeConf {
  const n = kit.node();
  const conf = kit.tempDir("imageconf");
  cpSync(n.confDir, conf, { recursive: true });
  const cache = kit.tempDir("imagecache");
  chmodSync(cache, 0o755);
  writeFileSync(join(conf, "images.conf"), `CacheDir=${cache}\n`);
  return { ...n, confDir: conf };
}

/**
 * A runtime that lists `options.image` in meta.accepts runs `--container-image REF` through the
 * host's image service (@jobrt/images, docs/writing-a-runtime.md): the task sees the image's files.
 */
export function registerImageChecks(kit: SuiteKit): void {
  kit.check("image.run", async (ctx: TestContext) => {
    const why = notApplicable(kit);
    if (why) ctx.skip(why);
    const layout = makeLayout(kit);
    const n = imageNode(kit);
    const s = kit.step({
      tasks: 1,
      argv: ["cat", `/etc/${MARK}`],
      container: { options: { image: [`oci:${layout}:t`] } },
    });
    try {
      const [r] = await kit.launchAll(s, await kit.setupAndRun(n, s));
      if (r?.code !== 0)
        fail(`the task exited with ${r?.code ?? r?.signal}; stderr: ${r?.stderr.trim().slice(0, 300)}`);
      if (!r.stdout.includes(`${MARK}:ok`))
        fail(`the task did not see the image's /etc/${MARK}; it printed ${JSON.stringify(r.stdout.slice(0, 300))}`);
    } finally {
      await kit.cleanup(n, s);
    }
  });
}
