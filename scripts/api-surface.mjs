// A package's public API as the build shows it: the names its public entry exports (values from the
// built module at run time, types from its declaration files) and, for api-compat.mjs, each name's
// declaration text. Shared by scripts/api-list.mjs and scripts/api-compat.mjs. Needs the build.
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";

/** Every directory under packages/ whose manifest has a public entry, with that manifest. */
export function entryPackages(root) {
  const out = [];
  for (const dir of readdirSync(join(root, "packages")).sort()) {
    const pkgDir = join(root, "packages", dir);
    const manifest = JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8"));
    const entry = manifest.exports?.["."];
    if (entry) out.push({ dir, pkgDir, manifest, entry });
  }
  return out;
}

/** Names `export { a, type B } from "..."`, `export type { C } from`, `export declare ...` and `export default` give. */
function typeNames(dts) {
  const names = new Set();
  for (const m of dts.matchAll(/export\s+type\s*\{([^}]*)\}/g)) for (const n of m[1].split(",")) add(names, n);
  for (const m of dts.matchAll(/export\s*\{([^}]*)\}/g)) {
    for (const n of m[1].split(",")) if (/^\s*type\s/.test(n)) add(names, n.replace(/^\s*type\s/, ""));
  }
  for (const m of dts.matchAll(/export\s+(?:declare\s+)?(?:interface|type)\s+([A-Za-z_$][\w$]*)/g)) names.add(m[1]);
  return names;
}

function add(set, entry) {
  const name = entry
    .trim()
    .split(/\s+as\s+/)
    .at(-1)
    ?.trim();
  if (name) set.add(name);
}

/** The entry's exported values (sorted) and its types that are not also values (sorted). */
export async function exportedNames({ pkgDir, entry }) {
  const mod = await import(pathToFileURL(join(pkgDir, entry.default)).href);
  const values = Object.keys(mod).sort();
  const types = [...typeNames(readFileSync(join(pkgDir, entry.types), "utf8"))]
    .filter((n) => !values.includes(n))
    .sort();
  return { values, types };
}

/** The text without comments; string literals are kept whole (a "//" in one is no comment). */
function stripComments(text) {
  return text.replace(
    /("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`(?:[^`\\]|\\.)*`)|\/\*[\s\S]*?\*\/|\/\/[^\n]*/g,
    (m, str) => (str ? m : ""),
  );
}

/** Splits at `sep` where no bracket or string is open. */
function splitTopLevel(text, sep) {
  const parts = [];
  let depth = 0;
  let quote = "";
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote) {
      if (c === "\\") i++;
      else if (c === quote) quote = "";
    } else if (c === '"' || c === "'" || c === "`") quote = c;
    else if ("({[".includes(c)) depth++;
    else if (")}]".includes(c)) depth--;
    else if (c === sep && depth === 0) {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(text.slice(start));
  return parts.map((p) => p.replace(/\s+/g, " ").trim()).filter((p) => p !== "");
}

const DECLARATION =
  /^(?:export\s+)?(?:default\s+)?(?:declare\s+)?(?:abstract\s+)?(function|const|let|var|class|interface|type|enum|namespace)\s+([A-Za-z_$][\w$]*)/;

/** A declaration file's top-level statements: declarations by name, re-exports, imports. */
function parseDts(file) {
  const text = stripComments(readFileSync(file, "utf8"));
  // tsc starts each top-level statement of a declaration file at column 0 and indents the rest.
  const statements = text
    .split(/\n(?=(?:export|declare|interface|type|import|function|const|class|abstract|enum|namespace)\b)/)
    .map((s) => s.replace(/\s+/g, " ").trim().replace(/;$/, ""))
    .filter((s) => s !== "");
  const declarations = new Map();
  const links = new Map();
  for (const s of statements) {
    const reexport = /^export\s+(?:type\s+)?\{([^}]*)\}\s*(?:from\s+"([^"]+)")?$/.exec(s);
    const imported = /^import\s+(?:type\s+)?\{([^}]*)\}\s*from\s+"([^"]+)"$/.exec(s);
    const link = reexport ?? imported;
    if (link) {
      for (const part of link[1].split(",")) {
        const [from, as = from] = part
          .trim()
          .replace(/^type\s+/, "")
          .split(/\s+as\s+/);
        if (from) links.set(as.trim(), { name: from.trim(), module: link[2] });
      }
      continue;
    }
    const dflt = /^export\s+default\s+([A-Za-z_$][\w$]*)$/.exec(s);
    if (dflt) {
      links.set("default", { name: dflt[1] });
      continue;
    }
    const m = DECLARATION.exec(s);
    if (m) declarations.set(m[2], [...(declarations.get(m[2]) ?? []), { kind: m[1], text: s }]);
  }
  return { declarations, links };
}

function moduleFile(fromFile, spec) {
  const base = join(dirname(fromFile), spec.replace(/\.js$/, ""));
  return [`${base}.d.ts`, join(base, "index.d.ts")].find((f) => existsSync(f));
}

/** A class or interface as its heading and its members by name, so a member added is told from one changed. */
function shape(kind, declared) {
  // How a name is exported (`export declare`, or `declare` and an export list) is no API change.
  const texts = declared.map((t) => t.replace(/^(?:export\s+)?(?:default\s+)?(?:declare\s+)?/, ""));
  if (kind !== "interface" && kind !== "class") return { kind, text: texts.join(" ") };
  const members = {};
  const heads = [];
  for (const text of texts) {
    const open = text.indexOf("{");
    heads.push(text.slice(0, open).trim());
    for (const member of splitTopLevel(text.slice(open + 1, text.lastIndexOf("}")), ";")) {
      const key =
        /^(?:(?:readonly|static|public|protected|abstract|declare|get|set)\s+)*(#?[\w$]+|\[[^\]]*\]|"[^"]*")/.exec(
          member,
        )?.[1] ?? member;
      members[key] = members[key] ? `${members[key]}; ${member}` : member;
    }
  }
  return { kind, text: heads.join(" "), members };
}

/** The declaration an exported name stands for, followed through re-exports and imports. */
function declarationOf(file, name, cache, depth = 0) {
  if (!cache.has(file)) cache.set(file, parseDts(file));
  const { declarations, links } = cache.get(file);
  const found = declarations.get(name);
  if (found)
    return shape(
      found[0].kind,
      found.map((d) => d.text),
    );
  const link = links.get(name);
  if (!link || depth > 20) return { kind: "unknown", text: `(no declaration of ${name} found in the build)` };
  if (link.module === undefined) return declarationOf(file, link.name, cache, depth + 1);
  if (!link.module.startsWith(".")) return { kind: "re-export", text: `${link.name} from "${link.module}"` };
  const next = moduleFile(file, link.module);
  if (!next) return { kind: "unknown", text: `(${link.module} has no declaration file)` };
  return declarationOf(next, link.name, cache, depth + 1);
}

/** Every exported name of a package with its declaration, as api-compat.mjs records and compares them. */
export async function apiSurface(pkg) {
  const { values, types } = await exportedNames(pkg);
  const entryFile = join(pkg.pkgDir, pkg.entry.types);
  const cache = new Map();
  const exports = {};
  for (const name of [...values, ...types].sort()) exports[name] = declarationOf(entryFile, name, cache);
  return { package: pkg.manifest.name, version: pkg.manifest.version, exports };
}
