// A package's peer range on @jobrt/core must not admit a core that lacks what the package uses: every
// name it imports from @jobrt/core and every catalog code (ERR_...) it names. The floor is the last
// release's core (api/released/core.json for its exports, api/released/error-codes.json for its
// catalog): a range whose minimum is that release or older may use only what that release had
// (docs/releasing.md, "Peer floors"; issue 40, item 1). Run at the version step, after `changeset
// version` and before `api-compat.mjs --record` replaces the record of the last release.
//
//   node scripts/peer-floor.mjs           the check: one line per package whose range is too low
//   node scripts/peer-floor.mjs --fix     raise each such range to ^<core's version in the tree>
//   node scripts/peer-floor.mjs --record  api/released/error-codes.json from this tree's catalog
//   --root DIR                            the tree to read (default: this one)
import { existsSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const CORE = "@jobrt/core";
const CATALOG_KEY = /^ {2}(ERR_[A-Z0-9_]+):/gm;

/** The catalog codes core's source declares: the keys of ERROR_CATALOG. */
function catalogCodes(root) {
  const text = readFileSync(join(root, "packages/core/src/catalog.ts"), "utf8");
  return [...text.matchAll(CATALOG_KEY)].map((m) => m[1]).sort();
}

/** Writes api/released/error-codes.json: the catalog of the core being released. */
export function recordErrorCodes(root) {
  const version = JSON.parse(readFileSync(join(root, "packages/core/package.json"), "utf8")).version;
  const file = join(root, "api/released/error-codes.json");
  writeFileSync(file, `${JSON.stringify({ package: CORE, version, codes: catalogCodes(root) }, null, 2)}\n`);
}

const parse = (v) => v.split(".").map(Number);
function older(a, b) {
  const [x, y] = [parse(a), parse(b)];
  for (let i = 0; i < 3; i++) if (x[i] !== y[i]) return x[i] < y[i];
  return false;
}

/** Every `.ts` file under dir, tests and declarations left out. */
function sources(dir) {
  const out = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...sources(path));
    else if (/\.ts$/.test(entry.name) && !/\.(d|test)\.ts$/.test(entry.name)) out.push(path);
  }
  return out;
}

/** The names a package's src imports or re-exports from @jobrt/core, and the catalog codes it names. */
function usesOfCore(pkgDir, codes) {
  const names = new Set();
  const named = new Set();
  for (const file of sources(join(pkgDir, "src"))) {
    const text = readFileSync(file, "utf8");
    for (const m of text.matchAll(/(?:import|export)\s+(?:type\s+)?\{([^}]*)\}\s*from\s*"@jobrt\/core"/g)) {
      for (const part of m[1].split(",")) {
        const name = part
          .trim()
          .replace(/^type\s+/, "")
          .split(/\s+as\s+/)[0];
        if (name) names.add(name);
      }
    }
    for (const m of text.matchAll(/"(ERR_[A-Z0-9_]+)"/g)) if (codes.has(m[1])) named.add(m[1]);
  }
  return { names, codes: named };
}

/** Publishable packages (packages/*, examples/*) with a peer range on core. */
function peerPackages(root) {
  const out = [];
  for (const group of ["packages", "examples"]) {
    if (!existsSync(join(root, group))) continue;
    for (const dir of readdirSync(join(root, group)).sort()) {
      const file = join(root, group, dir, "package.json");
      if (!existsSync(file) || !existsSync(join(root, group, dir, "src"))) continue;
      const manifest = JSON.parse(readFileSync(file, "utf8"));
      const range = manifest.peerDependencies?.[CORE];
      if (!manifest.private && range) out.push({ file, pkgDir: dirname(file), manifest, range });
    }
  }
  return out;
}

function readJson(file, what) {
  if (!existsSync(file)) {
    console.error(`peer-floor: ${file} is missing (${what}); run node scripts/api-compat.mjs --record`);
    process.exit(1);
  }
  return JSON.parse(readFileSync(file, "utf8"));
}

/** What each package uses that the core its range's minimum admits lacks. */
function tooLow(root) {
  const released = readJson(join(root, "api/released/core.json"), "the last release's core API");
  const releasedCodes = readJson(join(root, "api/released/error-codes.json"), "the last release's catalog");
  const exported = new Set(Object.keys(released.exports));
  const had = new Set(releasedCodes.codes);
  const codes = new Set(catalogCodes(root));
  const out = [];
  for (const pkg of peerPackages(root)) {
    const min = /(\d+\.\d+\.\d+)/.exec(pkg.range)?.[1];
    if (min === undefined || older(released.version, min)) continue;
    const uses = usesOfCore(pkg.pkgDir, codes);
    const missing = [...[...uses.names].filter((n) => !exported.has(n)), ...[...uses.codes].filter((c) => !had.has(c))];
    if (missing.length > 0) out.push({ ...pkg, missing, releasedVersion: released.version });
  }
  return out;
}

/** The check, or --fix: one line per package whose range is too low; exit 1 when one is left. */
function main(args) {
  const rootArg = args.indexOf("--root");
  const root = rootArg >= 0 ? resolve(args[rootArg + 1]) : join(dirname(fileURLToPath(import.meta.url)), "..");
  if (args.includes("--record")) return recordErrorCodes(root);
  const coreVersion = JSON.parse(readFileSync(join(root, "packages/core/package.json"), "utf8")).version;
  const problems = [];
  for (const pkg of tooLow(root)) {
    const prefix = pkg.range.startsWith("workspace:") ? "workspace:" : "";
    const wanted = `${prefix}^${coreVersion}`;
    const versioned = older(pkg.releasedVersion, coreVersion);
    if (args.includes("--fix") && versioned) {
      pkg.manifest.peerDependencies[CORE] = wanted;
      writeFileSync(pkg.file, `${JSON.stringify(pkg.manifest, null, 2)}\n`);
      console.log(`peer-floor: ${pkg.manifest.name}: peer ${CORE} ${pkg.range} -> ${wanted}`);
      continue;
    }
    const fix = versioned ? `write "${wanted}"` : `core is still ${coreVersion}: run pnpm changeset version first`;
    problems.push(
      `${pkg.manifest.name}: its peer range ${pkg.range} on ${CORE} admits ${pkg.releasedVersion}, which lacks ${pkg.missing.join(", ")}; ${fix} (${pkg.file})`,
    );
  }
  for (const p of problems) console.error(`peer-floor: ${p}`);
  if (problems.length > 0) process.exitCode = 1;
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) main(process.argv.slice(2));
