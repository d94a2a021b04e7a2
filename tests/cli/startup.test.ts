import { existsSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { isBuiltin } from "node:module";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { busyboxBundle } from "../helpers/fixtures.js";
import { jobrtBin, repoRoot, runProgram, tempDir } from "../helpers/jobrt.js";

// Loading modules was the largest part of jobrt's own start-up (docs/performance.md, "Where the
// time goes in jobrt exec"): each command runs from the CLI's bundle (dist/bin.js, the chunk the
// commands share and its own chunk), @jobrt/core (one file, shared with the runtime plugins) and
// the runtime it names — no other command's code, no module of @jobrt/launcher. `jobrt run` and
// `jobrt exec` run from dist/steps.cjs, a script compiled with V8's code cache (src/codecache.ts),
// not an ES module: no module load hook sees it.

/** Every file module a jobrt command loads, in load order, recorded by a module load hook. */
async function loadedModules(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number | null; stderr: string; loaded: string[] }> {
  const dir = tempDir("jobrt-startup-");
  const log = join(dir, "loaded.txt");
  writeFileSync(log, "");
  writeFileSync(join(dir, "jobrt.conf"), `SpoolDir=${join(dir, "spool")}\n`);
  writeFileSync(
    join(dir, "hooks.mjs"),
    `import { appendFileSync } from "node:fs";\nexport async function load(url, context, next) {\n  if (url.startsWith("file:")) appendFileSync(${JSON.stringify(log)}, url + "\\n");\n  return next(url, context);\n}\n`,
  );
  writeFileSync(
    join(dir, "register.mjs"),
    `import { register } from "node:module";\nregister(${JSON.stringify(pathToFileURL(join(dir, "hooks.mjs")).href)});\n`,
  );
  const r = await runProgram([process.execPath, "--import", join(dir, "register.mjs"), "--", jobrtBin, ...args], {
    env: { ...process.env, JOBRT_CONF_DIR: dir, ...env },
  });
  const loaded = readFileSync(log, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((url) => relative(repoRoot, fileURLToPath(url)));
  return { code: r.code, stderr: r.stderr, loaded };
}

const SLURM_TASK = { SLURM_JOB_ID: "4711", SLURM_STEP_ID: "0", SLURM_PROCID: "0", SLURM_LOCALID: "0" };

describe("what a command loads", () => {
  it("jobrt exec: the bundle's entry, core and runtime/none, nothing else (not the chunk the other commands share)", async () => {
    const r = await loadedModules(["exec", "--runtime", "none", "/bin/true"], SLURM_TASK);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.loaded.sort()).toEqual([
      "packages/cli/dist/bin.js",
      "packages/core/dist/index.js",
      "packages/runtime-none/dist/index.js",
    ]);
  }, 60_000);

  it("jobrt run: the same", async () => {
    const r = await loadedModules(["run", "--runtime", "none", "/bin/true"]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.loaded.sort()).toEqual([
      "packages/cli/dist/bin.js",
      "packages/core/dist/index.js",
      "packages/runtime-none/dist/index.js",
    ]);
  }, 60_000);

  it("jobrt run --runtime oci from a bundle dir: runtime-oci and host-services as one module each, not @jobrt/images", async () => {
    // A step without an image needs none of the image code (runtime-oci imports it when a step
    // names one); each package is one module (scripts/rolldown-package.mjs). Before both, this step
    // loaded 90 modules of the three packages.
    const bundle = busyboxBundle(tempDir("jobrt-startup-bundle-"));
    const r = await loadedModules(["run", "--runtime", "oci", "--container", bundle, "/bin/true"]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.loaded.sort()).toEqual([
      "packages/cli/dist/bin.js",
      "packages/core/dist/index.js",
      "packages/host-services/dist/index.js",
      "packages/runtime-oci/dist/index.js",
    ]);
  }, 60_000);

  it("jobrt --version loads neither a command nor a runtime", async () => {
    const r = await loadedModules(["--version"]);
    expect(r.code).toBe(0);
    expect(r.loaded.sort()).toEqual(["packages/cli/dist/bin.js", "packages/core/dist/index.js"]);
  }, 60_000);

  it.each([
    ["exec", SLURM_TASK],
    ["run", {}],
  ] as const)(
    "jobrt %s loads neither node:module nor Node 20's JavaScript rimraf",
    async (command, env) => {
      // Each is a builtin compiled at every start for a few lines' work: a runtime's lookup path, the
      // removal of a step's spool entry.
      const dir = tempDir("jobrt-startup-");
      writeFileSync(join(dir, "jobrt.conf"), `SpoolDir=${join(dir, "spool")}\n`);
      writeFileSync(
        join(dir, "builtins.cjs"),
        `process.on("exit", () => require("node:fs").writeFileSync(${JSON.stringify(join(dir, "builtins.txt"))}, process.moduleLoadList.join("\\n")));\n`,
      );
      const r = await runProgram(
        [process.execPath, "-r", join(dir, "builtins.cjs"), "--", jobrtBin, command, "--runtime", "none", "/bin/true"],
        { env: { ...process.env, JOBRT_CONF_DIR: dir, ...env } },
      );
      expect(r.stderr).toBe("");
      expect(r.code).toBe(0);
      const builtins = readFileSync(join(dir, "builtins.txt"), "utf8").split("\n");
      // The list is real: what every jobrt start needs is in it.
      expect(builtins).toContain("NativeModule child_process");
      expect(
        builtins.filter((m) => /^NativeModule (module|internal\/source_map\/source_map|internal\/fs\/rimraf)$/.test(m)),
      ).toEqual([]);
      // The step's entry was made and released (a job dir per step; exec's last task takes the journal).
      const jobs = join(dir, "spool", "jobs");
      expect(existsSync(join(dir, "spool"))).toBe(true);
      expect(existsSync(jobs) ? readdirSync(jobs).filter((n) => /^\d+$/.test(n)) : []).toEqual([]);
    },
    60_000,
  );

  it("jobrt images loads @jobrt/images and no runtime package (image management is no runtime's)", async () => {
    const r = await loadedModules(["images", "list", "--json"]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.loaded.filter((f) => f.startsWith("packages/images/"))).toContain("packages/images/dist/index.js");
    expect(r.loaded.filter((f) => /^packages\/runtime-/.test(f))).toEqual([]);
  }, 60_000);

  it("the bundle holds only the CLI's, the launcher's and host-services' code: runtime packages stay imports", () => {
    // A runtime bundled into the CLI finds its helper programs (runtime-oci's dist/*-main.js,
    // located from its own import.meta.url) beside the CLI instead: `jobrt images prune` broke so.
    // @jobrt/host-services locates nothing beside itself and shares no state, and the steps script
    // may require nothing but core: it is carried in the bundle like the launcher that imports it.
    expect(
      readdirSync(join(repoRoot, "packages/host-services/src")).filter((f) =>
        readFileSync(join(repoRoot, "packages/host-services/src", f), "utf8").includes("import.meta"),
      ),
    ).toEqual([]);
    const dist = join(repoRoot, "packages/cli/dist");
    const maps = readdirSync(dist).filter((f) => /^(bin(-.*)?\.js|steps\.cjs)\.map$/.test(f));
    expect(maps).toContain("bin.js.map");
    expect(maps).toContain("steps.cjs.map");
    const packages = new Set(
      maps.flatMap((m) =>
        (JSON.parse(readFileSync(join(dist, m), "utf8")) as { sources: string[] }).sources.map((s) =>
          relative(repoRoot, resolve(dirname(join(dist, m)), s))
            .split("/")
            .slice(0, 2)
            .join("/"),
        ),
      ),
    );
    expect([...packages].sort()).toEqual(["packages/cli", "packages/host-services", "packages/launcher"]);
  });

  it.each(["core", "host-services", "images", "runtime-oci"])(
    "packages/%s/dist/index.js is one module of the package's own sources; other packages stay imports",
    (name) => {
      const dist = join(repoRoot, "packages", name, "dist");
      const code = readFileSync(join(dist, "index.js"), "utf8");
      const specifiers = [...code.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*)"([^"]+)"/g)].map((m) => m[1] ?? "");
      // Nothing relative: each module the package would load on its own is in this file.
      expect(specifiers.filter((id) => id.startsWith("."))).toEqual([]);
      // A bundled @jobrt package would be a second instance of it (JobrtError, NOT_SUPPORTED).
      const map = JSON.parse(readFileSync(join(dist, "index.js.map"), "utf8")) as { sources: string[] };
      const owners = new Set(
        map.sources.map((s) => relative(join(repoRoot, "packages"), resolve(dist, s)).split("/")[0]),
      );
      expect([...owners]).toEqual([name]);
    },
  );

  it("dist/steps.cjs imports nothing and requires only @jobrt/core and Node's builtins: what the code cache loader gives it", () => {
    // A vm.Script cannot import() on Node 20 without an experimental loader that warns on stderr.
    const steps = readFileSync(join(repoRoot, "packages/cli/dist/steps.cjs"), "utf8");
    expect(steps).not.toMatch(/\bimport\(/);
    const required = [...new Set([...steps.matchAll(/\brequire\("([^"]+)"\)/g)].map((m) => m[1] ?? ""))];
    expect(required).toContain("@jobrt/core");
    expect(required.filter((id) => id !== "@jobrt/core" && !isBuiltin(id))).toEqual([]);
    expect(steps).toMatch(/\n\/\/ jobrt-steps-hash [0-9a-f]{64}\n/);
  });
});
