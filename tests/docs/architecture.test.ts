import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { repoRoot } from "../helpers/jobrt.js";

// docs/architecture.md lists each package's edges to our other packages; a newcomer reads the
// layering from it, so it must say what the package.json files say.
function documented(): Map<string, string[]> {
  const text = readFileSync(join(repoRoot, "docs/architecture.md"), "utf8");
  const edges = new Map<string, string[]>();
  for (const m of text.matchAll(/^- `(@jobrt\/[a-z-]+)` →(.*)$/gm)) {
    edges.set(m[1]!, [...m[2]!.matchAll(/`(@jobrt\/[a-z-]+)`/g)].map((d) => d[1]!).sort());
  }
  return edges;
}

function declared(): Map<string, string[]> {
  const edges = new Map<string, string[]>();
  for (const dir of readdirSync(join(repoRoot, "packages"))) {
    const pkg = JSON.parse(readFileSync(join(repoRoot, "packages", dir, "package.json"), "utf8")) as {
      name: string;
      dependencies?: Record<string, string>;
      peerDependencies?: Record<string, string>;
    };
    const deps = Object.keys({ ...pkg.dependencies, ...pkg.peerDependencies }).filter((n) => n.startsWith("@jobrt/"));
    edges.set(pkg.name, [...new Set(deps)].sort());
  }
  return edges;
}

describe("docs/architecture.md's package edges", () => {
  it("are the packages' own dependencies, every package listed once", () => {
    const doc = documented();
    expect(doc.size).toBeGreaterThan(0);
    expect(Object.fromEntries([...doc].sort())).toEqual(Object.fromEntries([...declared()].sort()));
  });
});

/** Every file under packages/<dir>/src that imports (or import()s) a runtime package, with the import. */
function runtimeImports(dir: string): string[] {
  const src = join(repoRoot, "packages", dir, "src");
  const found: string[] = [];
  for (const file of readdirSync(src, { recursive: true, encoding: "utf8" })) {
    if (!/\.[cm]?ts$/.test(file)) continue;
    const text = readFileSync(join(src, file), "utf8");
    for (const m of text.matchAll(/(?:from\s*|import\s*\(\s*)["']((?:@jobrt\/runtime-|jobrt-runtime-)[^"']*)["']/g))
      found.push(`${dir}/src/${file}: ${m[1]}`);
  }
  return found;
}

// Runtimes reach the host through the registry, by name: the cli depends on the first-party ones
// only so that one install has them. Image management is a host package any runtime can use
// (docs/decisions.md, "Images are a host package, not a runtime's"), so jobrt images needs none.
describe("runtime packages", () => {
  it("are imported by no source of the cli or of @jobrt/images", () => {
    expect([...runtimeImports("cli"), ...runtimeImports("images")]).toEqual([]);
  });
  it("are no dependency of @jobrt/images", () => {
    expect(
      declared()
        .get("@jobrt/images")
        ?.filter((n) => n.startsWith("@jobrt/runtime-")),
    ).toEqual([]);
  });
});
