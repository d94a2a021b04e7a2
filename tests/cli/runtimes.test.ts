/**
 * `jobrt runtimes` lists each allowed runtime from one registry load: a runtime that fails after
 * its package was found is still listed with that package, version and path, taken from the
 * load's error (issue 25, item 3: the listing no longer locates each package itself first).
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { jobrt, repoRoot, tempDir } from "../helpers/jobrt.js";

const core = new URL(`file://${join(repoRoot, "packages/core/dist/index.js")}`).href;

/** A PluginDir with jobrt-runtime-busy, whose init always fails. */
function pluginDir(): string {
  const dir = tempDir("jobrt-runtimes-plugins-");
  const pkg = join(dir, "node_modules", "jobrt-runtime-busy");
  mkdirSync(pkg, { recursive: true });
  writeFileSync(
    join(pkg, "package.json"),
    JSON.stringify({ name: "jobrt-runtime-busy", version: "1.4.2", type: "module", exports: "./index.js" }),
  );
  writeFileSync(
    join(pkg, "index.js"),
    `import { definePlugin } from ${JSON.stringify(core)};
export default definePlugin({ name: "busy", type: "runtime/busy", version: "1.4.2", accepts: [] }, { init() { throw new Error("device busy"); } });\n`,
  );
  return dir;
}

describe("jobrt runtimes", () => {
  it("lists a runtime whose init fails with its package, version and path, and one not installed without", async () => {
    const conf = tempDir("jobrt-runtimes-conf-");
    const plugins = pluginDir();
    writeFileSync(
      join(conf, "jobrt.conf"),
      `PluginDir=${plugins}\nRuntimePlugins=busy,ghost\nDefRuntimePlugin=busy\nSpoolDir=${tempDir("jobrt-runtimes-spool-")}\n`,
    );
    const r = await jobrt(["runtimes", "--json"], { env: { JOBRT_CONF_DIR: conf } });
    expect(r.code).toBe(1);
    const list = JSON.parse(r.stdout) as { runtimes: Record<string, unknown>[] };
    expect(list.runtimes[0]).toMatchObject({
      name: "busy",
      type: "runtime/busy",
      default: true,
      package: "jobrt-runtime-busy",
      version: "1.4.2",
      path: join(plugins, "node_modules", "jobrt-runtime-busy"),
      compatible: false,
      code: "ERR_RUNTIME_INIT",
      problem: expect.stringContaining("device busy"),
    });
    expect(list.runtimes[1]).toMatchObject({ name: "ghost", compatible: false, code: "ERR_RUNTIME_NOT_FOUND" });
    expect(list.runtimes[1]).not.toHaveProperty("package");
    expect(list.runtimes[1]).not.toHaveProperty("path");
  }, 60_000);
});
