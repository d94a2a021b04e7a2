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

/** A runtime package in `dir`'s node_modules whose init works. */
function working(dir: string, pkg: string, type: string): void {
  const at = join(dir, "node_modules", pkg);
  mkdirSync(at, { recursive: true });
  writeFileSync(
    join(at, "package.json"),
    JSON.stringify({ name: pkg, version: "3.0.1", type: "module", exports: "./index.js" }),
  );
  writeFileSync(
    join(at, "index.js"),
    `import { definePlugin } from ${JSON.stringify(core)};
export default definePlugin({ name: ${JSON.stringify(type.slice(8))}, type: ${JSON.stringify(type)}, version: "3.0.1", accepts: [] }, {});\n`,
  );
}

describe("jobrt runtimes", () => {
  // A site sees which registry each runtime came from: an unscoped name the site meant to take from
  // its own registry but npm fetched from the public one is a dependency-confusion install
  // (docs/site.md, "Runtimes from the site's own registry"; issue 40, item 3).
  it("shows where npm fetched each runtime from (its lockfile's resolved URL), and - without npm's lockfile", async () => {
    const conf = tempDir("jobrt-runtimes-conf-");
    const plugins = tempDir("jobrt-runtimes-plugins-");
    working(plugins, "jobrt-runtime-bwrapx", "runtime/bwrapx");
    working(plugins, "@acme/jobrt-runtime-fast", "runtime/@acme/fast");
    working(plugins, "jobrt-runtime-copied", "runtime/copied");
    const site = "http://registry.site.example/";
    const lock = {
      name: "site",
      lockfileVersion: 3,
      packages: {
        "node_modules/jobrt-runtime-bwrapx": {
          version: "3.0.1",
          resolved: "https://registry.npmjs.org/jobrt-runtime-bwrapx/-/jobrt-runtime-bwrapx-3.0.1.tgz",
        },
        "node_modules/@acme/jobrt-runtime-fast": {
          version: "3.0.1",
          resolved: `${site}@acme/jobrt-runtime-fast/-/jobrt-runtime-fast-3.0.1.tgz`,
        },
      },
    };
    writeFileSync(join(plugins, "node_modules/.package-lock.json"), JSON.stringify(lock));
    writeFileSync(
      join(conf, "jobrt.conf"),
      `PluginDir=${plugins}\nRuntimePlugins=bwrapx,@acme/fast,copied\nDefRuntimePlugin=copied\nSpoolDir=${tempDir("jobrt-runtimes-spool-")}\n`,
    );
    const r = await jobrt(["runtimes", "--json"], { env: { JOBRT_CONF_DIR: conf } });
    expect(r.code, r.stderr).toBe(0);
    const list = (JSON.parse(r.stdout) as { runtimes: Record<string, unknown>[] }).runtimes;
    expect(list.map((x) => [x.name, x.resolved])).toEqual([
      ["bwrapx", lock.packages["node_modules/jobrt-runtime-bwrapx"].resolved],
      ["@acme/fast", lock.packages["node_modules/@acme/jobrt-runtime-fast"].resolved],
      ["copied", undefined],
    ]);
    const text = await jobrt(["runtimes"], { env: { JOBRT_CONF_DIR: conf } });
    const lines = text.stdout.split("\n");
    expect(lines[0]).toMatch(/PATH +FROM$/);
    expect(lines.find((l) => l.startsWith("bwrapx"))).toMatch(
      / https:\/\/registry\.npmjs\.org\/jobrt-runtime-bwrapx\/-\/\S+$/,
    );
    expect(lines.find((l) => l.startsWith("copied"))).toMatch(/jobrt-runtime-copied +-$/);
  }, 60_000);

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
