import { existsSync, mkdirSync, readFileSync, readdirSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { busyboxBundle, busyboxRootfs } from "../helpers/fixtures.js";
import { type RunResult, repoRoot, runProgram } from "../helpers/jobrt.js";
import { type LocalRegistry, registryEnv, startRegistry, stopAllRegistries } from "./registry.js";
import { tempDir } from "../helpers/tmp.js";

// The path of a plugin author and a site, for real: a local verdaccio, the repository's own release
// flow (changesets + `pnpm release`) publishing into it, then a fresh directory outside the repo that
// installs jobrt with npm and runs tasks through runtimes found by package name.

interface Plan {
  releases: { name: string; type: string; oldVersion: string; newVersion: string }[];
}
interface Manifest {
  name: string;
  version: string;
  private?: boolean;
  dependencies?: Record<string, string>;
  keywords?: string[];
  peerDependencies?: Record<string, string>;
}

let root: string;
let registry: LocalRegistry | undefined;
let env: NodeJS.ProcessEnv;
let work: string;
let site: string;
let confDir: string;
let published: Map<string, Manifest>;
const plans: Record<string, Plan> = {};
const changed: Record<string, string[]> = {};
let releaseOutput = "";

async function run(
  argv: string[],
  cwd: string,
  extraEnv: Record<string, string> = {},
  timeoutMs = 300_000,
): Promise<RunResult> {
  return runProgram(argv, { cwd, env: { ...env, ...extraEnv }, timeoutMs });
}

async function ok(
  argv: string[],
  cwd: string,
  extraEnv: Record<string, string> = {},
  timeoutMs?: number,
): Promise<RunResult> {
  const r = await run(argv, cwd, extraEnv, timeoutMs);
  if (r.code !== 0)
    throw new Error(
      `${argv.join(" ")} (in ${cwd}) exited ${r.code ?? r.signal}\n${r.stdout.slice(-3000)}\n${r.stderr.slice(-3000)}`,
    );
  return r;
}

/**
 * The test registry has no uplinks: what the published packages depend on from npm (the launcher's
 * yaml) is mirrored into it from the copy's installed dependencies, packed as npm would fetch them,
 * with their own dependencies in turn.
 */
async function mirrorThirdParty(packages: Manifest[], from: string): Promise<void> {
  const seen = new Set<string>();
  const queue = packages.flatMap((p) =>
    Object.keys(p.dependencies ?? {})
      .filter((d) => !d.startsWith("@jobrt/"))
      .map((d) => ({ name: d, by: p.name })),
  );
  for (let next = queue.shift(); next; next = queue.shift()) {
    if (seen.has(next.name)) continue;
    seen.add(next.name);
    const dir = installedDir(from, next.by, next.name);
    const manifest = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as Manifest;
    for (const d of Object.keys(manifest.dependencies ?? {})) queue.push({ name: d, by: manifest.name });
    const packed = await ok(["npm", "pack", "--json", "--pack-destination", root, dir], root);
    const [tarball] = JSON.parse(packed.stdout) as { filename: string }[];
    await ok(["npm", "publish", "--ignore-scripts", join(root, tarball!.filename)], root);
  }
}

/** Where pnpm installed `name` for the workspace package (or mirrored package) `by`. */
function installedDir(work: string, by: string, name: string): string {
  const candidates = [
    ...readdirSync(join(work, "packages")).map((d) => join(work, "packages", d)),
    ...readdirSync(join(work, "examples")).map((d) => join(work, "examples", d)),
    work,
  ];
  for (const c of candidates) {
    if (!existsSync(join(c, "package.json"))) continue;
    const own = JSON.parse(readFileSync(join(c, "package.json"), "utf8")) as Manifest;
    if (own.name !== by && c !== work) continue;
    const at = join(c, "node_modules", name);
    if (existsSync(join(at, "package.json"))) return realpathSync(at);
  }
  const store = join(work, "node_modules/.pnpm/node_modules", name);
  if (existsSync(join(store, "package.json"))) return realpathSync(store);
  throw new Error(
    `${name} (a dependency of ${by}) is not installed in ${work}: cannot mirror it into the test registry`,
  );
}

/** Publishable workspace packages of a checkout, by the globs in its pnpm-workspace.yaml. */
function workspacePackages(dir: string): Map<string, Manifest> {
  const text = readFileSync(join(dir, "pnpm-workspace.yaml"), "utf8");
  const groups = [...text.matchAll(/^\s*-\s*["']?([^"'\n*]+?)\/\*["']?\s*$/gm)].map((m) => m[1] as string);
  const out = new Map<string, Manifest>();
  for (const group of groups) {
    if (!existsSync(join(dir, group))) continue;
    for (const entry of readdirSync(join(dir, group))) {
      const manifest = join(dir, group, entry, "package.json");
      if (!existsSync(manifest)) continue;
      const pkg = JSON.parse(readFileSync(manifest, "utf8")) as Manifest;
      if (!pkg.private) out.set(pkg.name, pkg);
    }
  }
  return out;
}

/** What a patch changeset makes of a version: the versions below follow the committed tree's. */
function nextPatch(version: string): string {
  const [major, minor, patch] = version.split(".").map(Number);
  return `${major}.${minor}.${patch! + 1}`;
}

const committedVersion = (name: string): string => workspacePackages(repoRoot).get(name)!.version;

async function git(cwd: string, ...args: string[]): Promise<RunResult> {
  return ok(["git", "-c", "user.name=jobrt release test", "-c", "user.email=release@example.invalid", ...args], cwd);
}

async function plan(name: string, changeset: string): Promise<void> {
  const file = join(work, ".changeset", `e2e-${name}.md`);
  writeFileSync(file, changeset);
  const out = join(root, `plan-${name}.json`);
  await ok(["pnpm", "exec", "changeset", "status", `--output=${out}`], work);
  plans[name] = JSON.parse(readFileSync(out, "utf8")) as Plan;
  rmSync(file);
}

beforeAll(async () => {
  root = tempDir("jobrt-publish-");
  registry = await startRegistry(join(root, "registry"));
  env = registryEnv(registry.userconfig, registry.url);
  const r = await runProgram(["npm", "config", "get", "registry"], { env, cwd: root });
  // Guard: everything below publishes; it must reach the loopback registry and nothing else.
  expect(r.stdout.trim()).toBe(registry.url);

  // A copy of the committed tree: changesets rewrites versions and tags commits, which must never
  // happen in the real work tree.
  work = join(root, "repo");
  mkdirSync(work);
  await ok(["sh", "-c", `git -C '${repoRoot}' archive --format=tar HEAD | tar -x -C '${work}'`], root);
  // The tree's own pending changesets belong to its next real release: the copy starts without
  // them, so the plans and versions below are this test's alone.
  for (const f of readdirSync(join(work, ".changeset")))
    if (f.endsWith(".md") && f !== "README.md") rmSync(join(work, ".changeset", f));
  if (!/^\s*-\s*["']?examples\/\*["']?\s*$/m.test(readFileSync(join(work, "pnpm-workspace.yaml"), "utf8"))) {
    throw new Error(
      "pnpm-workspace.yaml does not list examples/*: the example runtime and the starter would be neither versioned nor published",
    );
  }
  await git(work, "init", "-q", "-b", "main");
  await git(work, "add", "-A");
  await git(work, "commit", "-q", "-m", "import");
  // Dependencies come from the machine's usual registry (the store is warm, so offline).
  const installed = await runProgram(["pnpm", "install", "--frozen-lockfile", "--offline", "--reporter=silent"], {
    cwd: work,
    timeoutMs: 300_000,
  });
  if (installed.code !== 0) throw new Error(`pnpm install in the copy failed: ${installed.stdout}${installed.stderr}`);
  // From here on every package (scoped and unscoped) goes to the test registry; .npmrc is git-ignored.
  writeFileSync(join(work, ".npmrc"), `registry=${registry.url}\n@jobrt:registry=${registry.url}\n`);

  // Independent versions: a fix to one runtime bumps only it; a core minor forces no majors.
  await plan("core-minor", '---\n"@jobrt/core": minor\n---\n\nA new core API.\n');
  await plan("charliecloud-patch", '---\n"jobrt-runtime-charliecloud": patch\n---\n\nFix a bind message.\n');
  writeFileSync(
    join(work, ".changeset", "e2e-charliecloud.md"),
    '---\n"jobrt-runtime-charliecloud": patch\n---\n\nFix a bind message.\n',
  );
  await git(work, "add", "-A");
  await git(work, "commit", "-q", "-m", "changeset");
  await ok(["pnpm", "exec", "changeset", "version"], work);
  changed.version = (await git(work, "status", "--porcelain")).stdout
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => l.slice(3));
  // The version step records the API being released (docs/releasing.md): pnpm release checks it.
  await ok(["pnpm", "exec", "turbo", "run", "build", "--output-logs=errors-only"], work);
  await ok(["node", "scripts/api-compat.mjs", "--record"], work);
  await git(work, "add", "-A");
  await git(work, "commit", "-q", "-m", "Version packages");

  const release = await run(["pnpm", "release", "--no-test"], work);
  releaseOutput = `${release.stdout}\n${release.stderr}`;
  if (release.code !== 0) throw new Error(`pnpm release failed (${release.code})\n${releaseOutput.slice(-6000)}`);
  published = workspacePackages(work);

  // A plugin built for another API major, published like any third-party runtime.
  const old = join(root, "oldapi");
  mkdirSync(old);
  writeFileSync(
    join(old, "package.json"),
    JSON.stringify({
      name: "jobrt-runtime-oldapi",
      version: "2.0.0",
      type: "module",
      exports: "./index.js",
      keywords: ["jobrt-runtime"],
      license: "MIT",
    }),
  );
  writeFileSync(
    join(old, "index.js"),
    'const noop = () => {};\nexport default { meta: { name: "oldapi", type: "runtime/oldapi", version: "2.0.0", apiVersion: 1 }, init: noop, fini: noop, setup: noop, cleanup: noop, taskInit: noop, run: noop };\n',
  );
  await ok(["npm", "publish"], old);

  await mirrorThirdParty([...published.values()], work);

  // The site: a fresh directory outside the repository, npm only.
  site = join(root, "site");
  mkdirSync(site);
  writeFileSync(join(site, "package.json"), '{ "name": "hpc-site", "private": true }\n');
  await ok(
    ["npm", "install", "@jobrt/cli", "@jobrt/runtime-oci", "jobrt-runtime-charliecloud", "jobrt-runtime-oldapi"],
    site,
  );
  confDir = join(root, "etc-jobrt");
  mkdirSync(confDir);
  writeFileSync(
    join(confDir, "jobrt.conf"),
    `RuntimePlugins=none,oci,charliecloud,ghost,oldapi\nSpoolDir=${join(root, "spool")}\n`,
  );
}, 900_000);

afterAll(async () => {
  await stopAllRegistries();
  if (root) rmSync(root, { recursive: true, force: true });
}, 60_000);

/** `npx jobrt ...` in the site, with its conf dir. */
function jobrt(args: string[]): Promise<RunResult> {
  return run(["npx", "jobrt", ...args], site, { JOBRT_CONF_DIR: confDir }, 120_000);
}

describe("release flow", () => {
  it("the examples are workspace packages, so they are versioned and published with the rest", () => {
    expect([...published.keys()]).toEqual(
      expect.arrayContaining(["@jobrt/core", "@jobrt/cli", "@jobrt/testkit", "jobrt-runtime-charliecloud"]),
    );
  });

  it("a patch to one runtime bumps only that runtime", () => {
    expect(plans["charliecloud-patch"]?.releases.map((r) => [r.name, r.type, r.newVersion])).toEqual([
      ["jobrt-runtime-charliecloud", "patch", nextPatch(committedVersion("jobrt-runtime-charliecloud"))],
    ]);
    expect(changed.version?.sort()).toEqual([
      ".changeset/e2e-charliecloud.md",
      "examples/jobrt-runtime-charliecloud/CHANGELOG.md",
      "examples/jobrt-runtime-charliecloud/package.json",
    ]);
  });

  it("a minor of core forces no major on any plugin", () => {
    const releases = plans["core-minor"]?.releases ?? [];
    expect(releases.find((r) => r.name === "@jobrt/core")).toMatchObject({
      type: "minor",
      newVersion: `${committedVersion("@jobrt/core").split(".")[0]}.1.0`,
    });
    expect(releases.filter((r) => r.type === "major")).toEqual([]);
  });

  it("pnpm release published every package at its version, with workspace: ranges rewritten", async () => {
    for (const [name, pkg] of published) {
      const r = await ok(["npm", "view", `${name}@${pkg.version}`, "--json"], root);
      const view = JSON.parse(r.stdout) as Manifest & { dist?: unknown };
      expect(view.version, name).toBe(pkg.version);
      expect(r.stdout, `${name} was published with a workspace: range`).not.toContain("workspace:");
    }
    const cc = JSON.parse((await ok(["npm", "view", "jobrt-runtime-charliecloud", "--json"], root)).stdout) as Manifest;
    expect(cc.version).toBe(nextPatch(committedVersion("jobrt-runtime-charliecloud")));
    expect(cc.peerDependencies).toEqual({ "@jobrt/core": `^${committedVersion("@jobrt/core").split(".")[0]}.0.0` });
    expect(cc.keywords).toContain("jobrt-runtime");
  });

  it("publishing again publishes nothing (versions already on the registry are skipped)", async () => {
    const again = await run(["pnpm", "exec", "changeset", "publish"], work);
    expect(again.code).toBe(0);
    expect(`${again.stdout}${again.stderr}`).toMatch(/No unpublished projects to publish|already published/i);
  });
});

describe("a site installs jobrt and runtimes with npm", () => {
  it("npx jobrt --version prints the published CLI version", async () => {
    const r = await jobrt(["--version"]);
    expect(r.stdout.trim()).toBe(`jobrt ${published.get("@jobrt/cli")?.version}`);
  });

  it("jobrt runtimes lists what is allowed, resolved from the site's node_modules, with versions", async () => {
    const r = await jobrt(["runtimes", "--json"]);
    const list = (
      JSON.parse(r.stdout) as {
        runtimes: {
          name: string;
          package?: string;
          version?: string;
          path?: string;
          compatible: boolean;
          code?: string;
          problem?: string;
        }[];
      }
    ).runtimes;
    const by = new Map(list.map((x) => [x.name, x]));
    expect([...by.keys()]).toEqual(["none", "oci", "charliecloud", "ghost", "oldapi"]);
    const siteModules = realpathSync(join(site, "node_modules"));
    for (const [name, pkg] of [
      ["none", "@jobrt/runtime-none"],
      ["oci", "@jobrt/runtime-oci"],
      ["charliecloud", "jobrt-runtime-charliecloud"],
    ] as const) {
      expect(by.get(name), name).toMatchObject({
        package: pkg,
        version: published.get(pkg)?.version,
        compatible: true,
      });
      expect(by.get(name)?.path).toBe(join(siteModules, pkg));
    }
    expect(by.get("ghost")).toMatchObject({ compatible: false, code: "ERR_RUNTIME_NOT_FOUND" });
    expect(by.get("oldapi")).toMatchObject({
      compatible: false,
      code: "ERR_RUNTIME_API_VERSION",
      package: "jobrt-runtime-oldapi",
      version: "2.0.0",
    });
    // Not every allowed runtime is usable, and the command says so.
    expect(r.code).toBe(1);
  });

  it("runs tasks through the charliecloud runtime with real ch-run", async () => {
    const r = await jobrt([
      "run",
      "-n",
      "2",
      "--runtime",
      "charliecloud",
      "--container",
      busyboxRootfs(),
      "sh",
      "-c",
      'echo "$(cat /etc/jobrt-image) $SLURM_PROCID"',
    ]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout.trim().split("\n").sort()).toEqual(["jobrt-busybox-image 0", "jobrt-busybox-image 1"]);
  });

  it("runs a task through the oci runtime with real runc", async () => {
    const bundle = busyboxBundle(join(root, "bundle"));
    const r = await jobrt(["run", "--runtime", "oci", "--container", bundle, "cat", "/etc/jobrt-image"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe("jobrt-busybox-image");
  });

  it("refuses an installed runtime that RuntimePlugins does not allow", async () => {
    expect(existsSync(join(site, "node_modules/@jobrt/runtime-shifter/package.json"))).toBe(true);
    const r = await jobrt(["run", "--runtime", "shifter", "true"]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(
      /^jobrt: .*runtime shifter is not allowed on this node \(RuntimePlugins=none,oci,charliecloud,ghost,oldapi\)/,
    );
  });

  it("refuses an allowed runtime that is not installed, naming the packages it looked for", async () => {
    const r = await jobrt(["run", "--runtime", "ghost", "true"]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(
      /runtime ghost is not installed: none of @jobrt\/runtime-ghost, jobrt-runtime-ghost can be resolved/,
    );
  });

  it("refuses a plugin built for another API major with a clear message", async () => {
    const r = await jobrt(["run", "--runtime", "oldapi", "true"]);
    expect(r.code).not.toBe(0);
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
    expect(r.stderr).toMatch(
      /runtime runtime\/oldapi from package jobrt-runtime-oldapi@2\.0\.0 \(.*\) was built for runtime API 1, this jobrt needs API 2: install a version of the plugin made for API 2/,
    );
  });
});

describe("a plugin author goes from an empty directory to a published runtime", () => {
  it("npm create jobrt-runtime → npm install → npm test → npm publish → a site runs it", async () => {
    const author = join(root, "author");
    mkdirSync(author);
    await ok(["npm", "create", "--yes", "jobrt-runtime@latest", "jobrt-runtime-hello"], author);
    const project = join(author, "jobrt-runtime-hello");
    // The author's machine: @jobrt packages from the test registry, everything else (typescript,
    // vitest) from the machine's usual registry. ~/.npmrc is read, never written.
    const authorEnv: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(env)) if (!/^npm_config_(userconfig|registry)$/.test(k)) authorEnv[k] = v;
    writeFileSync(join(project, ".npmrc"), `@jobrt:registry=${registry?.url}\n`);
    const install = await runProgram(["npm", "install"], { cwd: project, env: authorEnv, timeoutMs: 300_000 });
    expect(install.code, install.stderr).toBe(0);
    const test = await runProgram(["npm", "test"], { cwd: project, env: authorEnv, timeoutMs: 300_000 });
    expect(test.code, test.stdout.slice(-3000)).toBe(0);
    expect(test.stdout).toMatch(/\d+ passed/);
    // prepublishOnly builds and tests again; the package goes to the test registry only.
    await ok(["npm", "publish"], project);

    await ok(["npm", "install", "jobrt-runtime-hello"], site);
    const conf = join(root, "etc-hello");
    mkdirSync(conf);
    writeFileSync(
      join(conf, "jobrt.conf"),
      `RuntimePlugins=hello\nDefRuntimePlugin=hello\nSpoolDir=${join(root, "spool")}\n`,
    );
    const r = await run(
      ["npx", "jobrt", "run", "-n", "2", "sh", "-c", 'echo "$SLURM_PROCID $JOBRT_RUNTIME_STEP"'],
      site,
      { JOBRT_CONF_DIR: conf },
      120_000,
    );
    expect(r.code, r.stderr).toBe(0);
    expect(
      r.stdout
        .trim()
        .split("\n")
        .map((l) => l.split(" ")[0])
        .sort(),
    ).toEqual(["0", "1"]);
    expect(r.stdout).toMatch(/^0 \d+\.\d+$/m);
  });
});
