import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunResult, repoRoot, runProgram } from "../helpers/jobrt.js";
import { freePort } from "./registry.js";
import { tempDir } from "../helpers/tmp.js";

// The path docs/writing-a-runtime.md gives authors before jobrt's first npm release: a clone,
// `pnpm release --local` (a registry on loopback holding the tree as it is), then `npm create
// jobrt-runtime` and a site install against it. Runs in a copy of the committed tree.

let root: string;
let work: string;
let env: NodeJS.ProcessEnv;
let url: string;
let local: RunResult;

function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^(npm|pnpm)_config_/i.test(k)) out[k] = v;
  return {
    ...out,
    npm_config_update_notifier: "false",
    npm_config_fund: "false",
    npm_config_audit: "false",
    TURBO_TELEMETRY_DISABLED: "1",
    ...extra,
  };
}

async function ok(argv: string[], cwd: string, timeoutMs = 300_000): Promise<RunResult> {
  const r = await runProgram(argv, { cwd, env, timeoutMs });
  if (r.code !== 0)
    throw new Error(
      `${argv.join(" ")} (in ${cwd}) exited ${r.code ?? r.signal}\n${r.stdout.slice(-3000)}\n${r.stderr.slice(-3000)}`,
    );
  return r;
}

/** Alive and not a zombie (the registry's parent exited, so init reaps it when it gets to it). */
function running(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z /.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

function registryPid(): number {
  return Number(readFileSync(join(root, "state/registry.pid"), "utf8"));
}

beforeAll(async () => {
  root = tempDir("jobrt-local-release-");
  // Its own npm cache: npx would reuse a create-jobrt-runtime of the same version from another run.
  env = cleanEnv({
    JOBRT_LOCAL_REGISTRY_DIR: join(root, "state"),
    JOBRT_LOCAL_REGISTRY_PORT: String(await freePort()),
    npm_config_cache: join(root, "npm-cache"),
  });
  work = join(root, "repo");
  mkdirSync(work);
  await ok(["sh", "-c", `git -C '${repoRoot}' archive --format=tar HEAD | tar -x -C '${work}'`], root);
  await ok(["pnpm", "install", "--frozen-lockfile", "--offline", "--reporter=silent"], work);
  // A pending core minor, whatever else the tree holds: the registry must serve it versioned.
  writeFileSync(join(work, ".changeset/e2e-local.md"), '---\n"@jobrt/core": minor\n---\n\nA new core API.\n');
  local = await runProgram(["pnpm", "release", "--local"], { cwd: work, env, timeoutMs: 600_000 });
  if (local.code !== 0)
    throw new Error(
      `pnpm release --local exited ${local.code}\n${local.stdout.slice(-3000)}\n${local.stderr.slice(-3000)}`,
    );
  url = readFileSync(join(root, "state/registry.url"), "utf8").trim();
}, 900_000);

afterAll(async () => {
  if (work && existsSync(join(root, "state/registry.pid")))
    await runProgram(["pnpm", "release", "--local-stop"], { cwd: work, env, timeoutMs: 60_000 });
  if (root) rmSync(root, { recursive: true, force: true });
});

/** The version `changeset version` gives core: the largest bump its pending changesets name. */
function nextCoreVersion(): string {
  const [major, minor, patch] = (coreManifest().version as string).split(".").map(Number) as [number, number, number];
  const bumps = readdirSync(join(work, ".changeset"))
    .filter((f) => f.endsWith(".md") && f !== "README.md")
    .map(
      (f) =>
        /^\s*"@jobrt\/core":\s*(major|minor|patch)\s*$/m.exec(readFileSync(join(work, ".changeset", f), "utf8"))?.[1],
    );
  if (bumps.includes("major")) return `${major + 1}.0.0`;
  return bumps.includes("minor") ? `${major}.${minor + 1}.0` : `${major}.${minor}.${patch + 1}`;
}

const coreManifest = () => JSON.parse(readFileSync(join(work, "packages/core/package.json"), "utf8"));

describe("pnpm release --local: trying jobrt before its first npm release", () => {
  it("publishes every package, its pending changesets versioned (the next release), leaving the tree as it was", () => {
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
    for (const name of [
      "@jobrt/cli",
      "@jobrt/core",
      "@jobrt/launcher",
      "@jobrt/testkit",
      "create-jobrt-runtime",
      "jobrt-runtime-charliecloud",
    ]) {
      expect(local.stderr).toMatch(new RegExp(`\n  ${name}@\\d+\\.\\d+\\.\\d+\n`));
    }
    expect(local.stderr).not.toContain("(the tree has");
    expect(local.stderr).toContain(`  @jobrt/core@${nextCoreVersion()}\n`);
    expect(nextCoreVersion()).not.toBe(coreManifest().version);
    // Versioned in a copy: the tree keeps its versions and its changesets.
    expect(existsSync(join(work, ".changeset/e2e-local.md"))).toBe(true);
    // The hint names a fresh npm cache and --yes (docs/writing-a-runtime.md; issue 40, item 6).
    expect(local.stderr).toContain(
      `  export npm_config_cache="$(mktemp -d)"\n  npm create --yes --registry=${url} jobrt-runtime`,
    );
  });

  it("a runtime that uses core API newer than the last release is served with a peer range that requires the next core (issue 40, item 1)", async () => {
    const served = (await (await fetch(`${url}@jobrt%2fruntime-oci`)).json()) as {
      "dist-tags": { latest: string };
      versions: Record<string, { peerDependencies?: Record<string, string> }>;
    };
    const latest = served.versions[served["dist-tags"].latest];
    expect(latest?.peerDependencies?.["@jobrt/core"]).toBe(`^${nextCoreVersion()}`);
    // The tree itself keeps its range: the floor is raised in the versioned copy only.
    const tree = JSON.parse(readFileSync(join(work, "packages/runtime-oci/package.json"), "utf8"));
    expect(tree.peerDependencies["@jobrt/core"]).toBe("workspace:^2.0.0");
  });

  it("npm create jobrt-runtime and a site install work against it", async () => {
    const author = join(root, "author");
    mkdirSync(author);
    await ok(["npm", "create", "--yes", `--registry=${url}`, "jobrt-runtime", "jobrt-runtime-hello"], author);
    const project = join(author, "jobrt-runtime-hello");
    writeFileSync(join(project, ".npmrc"), `@jobrt:registry=${url}\n`);
    await ok(["npm", "install"], project);
    await ok(["npm", "run", "build"], project);
    const packed = (await ok(["npm", "pack", "--silent"], project)).stdout.trim().split("\n").pop() as string;

    const site = join(root, "site");
    mkdirSync(site);
    writeFileSync(join(site, ".npmrc"), `@jobrt:registry=${url}\n`);
    writeFileSync(join(site, "package.json"), '{ "name": "site", "private": true }\n');
    await ok(["npm", "install", "@jobrt/cli", join(project, packed)], site);
    const conf = join(root, "etc");
    mkdirSync(conf);
    writeFileSync(
      join(conf, "jobrt.conf"),
      `RuntimePlugins=hello\nDefRuntimePlugin=hello\nSpoolDir=${join(root, "spool")}\n`,
    );
    env = { ...env, JOBRT_CONF_DIR: conf };
    const r = await ok(
      ["npx", "jobrt", "run", "-n", "2", "sh", "-c", 'echo "$SLURM_PROCID $SLURM_RUNTIME"'],
      site,
      120_000,
    );
    expect(r.stdout.trim().split("\n").sort()).toEqual(["0 hello", "1 hello"]);
    const core = JSON.parse(readFileSync(join(site, "node_modules/@jobrt/core/package.json"), "utf8"));
    expect(core.version).toBe(nextCoreVersion());
  });

  it("--local-stop stops the registry it started, and only that", async () => {
    const pid = registryPid();
    expect(running(pid)).toBe(true);
    const r = await ok(["pnpm", "release", "--local-stop"], work, 60_000);
    expect(r.stderr).toContain("local-registry: stopped");
    expect(running(pid)).toBe(false);
    const again = await ok(["pnpm", "release", "--local-stop"], work, 60_000);
    expect(again.stderr).toContain("local-registry: not running");
  });
});
