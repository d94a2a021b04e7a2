// Compares each package's public API (its exported names, api/<package>.txt, and their declarations
// in the built .d.ts files) with the API of its last release, recorded in api/released/<package>.json,
// and fails when an export (or a member of an exported interface or class) was removed or changed
// while .changeset/ holds less than a major for that package (docs/releasing.md, "API check").
//
//   node scripts/api-compat.mjs             the check (scripts/test.sh); needs the packages built
//   node scripts/api-compat.mjs --record    after `pnpm changeset version`: the build becomes the
//                                           released API (api/released/, core's catalog codes too),
//                                           api/compatible.txt is emptied
//   node scripts/api-compat.mjs --released  for `pnpm release`: api/released/ must be this build, at
//                                           the versions being published
//   --root DIR                              the tree to read (default: this one)
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { apiSurface, entryPackages } from "./api-surface.mjs";
import { recordErrorCodes } from "./peer-floor.mjs";

const args = process.argv.slice(2);
const rootArg = args.indexOf("--root");
const root = rootArg >= 0 ? resolve(args[rootArg + 1]) : join(dirname(fileURLToPath(import.meta.url)), "..");
const mode = args.includes("--record") ? "record" : args.includes("--released") ? "released" : "check";
const releasedDir = join(root, "api", "released");
const acceptFile = join(root, "api", "compatible.txt");
const ACCEPT_HEADER = [
  "# Reviewed changes api-compat.mjs reports that do not break a caller, one a line:",
  "# <package> <Export>[.<member>] <why it is compatible>; an export's line covers its members.",
  '# Emptied by --record at each release (docs/releasing.md, "API check").',
  "",
].join("\n");

/** The bump each package gets from the pending changesets: the largest named for it. */
function pendingBumps() {
  const order = { none: 0, patch: 1, minor: 2, major: 3 };
  const bumps = new Map();
  const dir = join(root, ".changeset");
  if (!existsSync(dir)) return bumps;
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".md") && f !== "README.md")) {
    const front = /^---\n([\s\S]*?)\n---/.exec(readFileSync(join(dir, file), "utf8"))?.[1] ?? "";
    for (const m of front.matchAll(/^\s*["']?([^"':\s]+)["']?\s*:\s*(major|minor|patch|none)\s*$/gm)) {
      const [, name, bump] = m;
      if (order[bump] > order[bumps.get(name)?.bump ?? "none"]) bumps.set(name, { bump, file: `.changeset/${file}` });
    }
  }
  return bumps;
}

const short = (text) => (text.length > 120 ? `${text.slice(0, 117)}...` : text);

/** What a caller of the released API loses: removed exports and members, changed declarations. */
function breakingChanges(released, current) {
  const out = [];
  for (const [name, was] of Object.entries(released.exports)) {
    const now = current.exports[name];
    if (!now) {
      out.push({ key: name, what: `${name} removed` });
      continue;
    }
    if (was.kind !== now.kind || was.text !== now.text) {
      out.push({ key: name, what: `${name} changed: ${short(was.text)} -> ${short(now.text)}` });
    }
    for (const [member, text] of Object.entries(was.members ?? {})) {
      const key = `${name}.${member}`;
      const nowText = now.members?.[member];
      if (nowText === undefined) out.push({ key, what: `${key} removed` });
      else if (nowText !== text) out.push({ key, what: `${key} changed: ${short(text)} -> ${short(nowText)}` });
    }
  }
  return out;
}

/** api/compatible.txt as "<package> <key>" → why. */
function acceptedChanges() {
  const accepted = new Map();
  if (!existsSync(acceptFile)) return accepted;
  for (const line of readFileSync(acceptFile, "utf8").split("\n")) {
    const m = /^(\S+)\s+(\S+)\s+(\S.*)$/.exec(line);
    if (m && !line.startsWith("#")) accepted.set(`${m[1]} ${m[2]}`, m[3]);
  }
  return accepted;
}

function readReleased(dir) {
  const file = join(releasedDir, `${dir}.json`);
  return existsSync(file) ? JSON.parse(readFileSync(file, "utf8")) : undefined;
}

const problems = [];
const packages = entryPackages(root);
if (mode === "record") {
  const pending = [...pendingBumps().keys()];
  if (pending.length > 0) {
    console.error(
      `api-compat: .changeset/ still holds changesets (for ${pending.join(", ")}); run pnpm changeset version first`,
    );
    process.exit(1);
  }
  mkdirSync(releasedDir, { recursive: true });
  for (const pkg of packages) {
    writeFileSync(join(releasedDir, `${pkg.dir}.json`), `${JSON.stringify(await apiSurface(pkg), null, 2)}\n`);
  }
  writeFileSync(acceptFile, ACCEPT_HEADER);
  // The catalog released with this core: the floor peer-floor.mjs holds the next version's plugins to.
  if (existsSync(join(root, "packages/core/src/catalog.ts"))) recordErrorCodes(root);
  console.log(`api-compat: recorded the released API of ${packages.length} packages in api/released/`);
  process.exit(0);
}

const bumps = pendingBumps();
const accepted = acceptedChanges();
const used = new Set();
for (const pkg of packages) {
  const released = readReleased(pkg.dir);
  const current = await apiSurface(pkg);
  const name = pkg.manifest.name;
  if (!released) {
    // A package never released has no API to keep; its first release records one.
    if (mode === "released")
      problems.push(`api/released/${pkg.dir}.json is missing: run node scripts/api-compat.mjs --record`);
    continue;
  }
  if (mode === "released") {
    if (released.version !== current.version || JSON.stringify(released) !== JSON.stringify(current)) {
      problems.push(
        `api/released/${pkg.dir}.json records ${name}@${released.version}, not the ${current.version} being published: run node scripts/api-compat.mjs --record after pnpm changeset version and commit it`,
      );
    }
    continue;
  }
  const changes = breakingChanges(released, current).filter((c) => {
    // An entry for an export covers its members too.
    const key = [`${name} ${c.key}`, `${name} ${c.key.split(".")[0]}`].find((k) => accepted.has(k));
    if (key === undefined) return true;
    used.add(key);
    return false;
  });
  if (changes.length === 0) continue;
  const bump = bumps.get(name);
  if (bump?.bump === "major") {
    console.log(
      `api-compat: ${name}: ${changes.length} breaking change(s) since ${released.version}, released as a major (${bump.file})`,
    );
    continue;
  }
  problems.push(
    `${name} changed its API since ${released.version} (api/released/${pkg.dir}.json) with ${bump ? `a ${bump.bump} (${bump.file})` : "no changeset"}, which needs a major: ${changes.map((c) => c.what).join("; ")}. Keep the old export beside the new one, or add a changeset with "${name}": major, or list a reviewed compatible change in api/compatible.txt`,
  );
}
for (const key of accepted.keys()) {
  if (!used.has(key) && mode === "check")
    problems.push(`api/compatible.txt: "${key}" matches no change; remove the line`);
}
if (problems.length > 0) {
  for (const p of problems) console.error(`api-compat: ${p}`);
  process.exit(1);
}
