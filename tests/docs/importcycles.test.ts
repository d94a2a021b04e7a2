import { readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { repoRoot, tempDir } from "../helpers/jobrt.js";

// A value cycle between ES modules works only while no cycle member reads another's export during
// its own evaluation; one moved line turns it into a TDZ error at start-up (issue 40, item 7).
// Type-only imports are erased and do not count.

/** Relative value imports and re-exports of a module, as paths of the .ts files they name. */
function valueImports(file: string): string[] {
  const text = readFileSync(file, "utf8");
  const out: string[] = [];
  const pattern = /^(?:import|export)\s+(?!type\s)(?:[^;]*?\sfrom\s+)?"(\.{1,2}\/[^"]+)\.js";/gms;
  for (const m of text.matchAll(pattern)) out.push(resolve(dirname(file), `${m[1]}.ts`));
  return out;
}

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith(".ts") && !e.name.endsWith(".d.ts"))
    .map((e) => join(e.parentPath, e.name));
}

/** Every cycle's members, each once, found by a depth-first walk. */
function cycles(files: string[]): string[][] {
  const graph = new Map(files.map((f) => [f, valueImports(f).filter((i) => files.includes(i))]));
  const found: string[][] = [];
  const done = new Set<string>();
  const walk = (file: string, path: string[]): void => {
    const at = path.indexOf(file);
    if (at >= 0) return void found.push(path.slice(at));
    if (done.has(file)) return;
    for (const next of graph.get(file) ?? []) walk(next, [...path, file]);
    done.add(file);
  };
  for (const f of files) walk(f, []);
  return found;
}

describe("no value import cycle inside a package's src", () => {
  const roots = ["packages", "examples"].flatMap((top) =>
    readdirSync(join(repoRoot, top), { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => join(repoRoot, top, d.name, "src")),
  );

  it("finds the modules' imports (the scan sees what it checks)", () => {
    const host = join(repoRoot, "packages/cli/src/host.ts");
    expect(valueImports(host)).toContain(join(repoRoot, "packages/cli/src/confdir.ts"));
    const dir = tempDir("jobrt-cycles-");
    try {
      const write = (name: string, text: string) => writeFileSync(join(dir, name), text);
      write("a.ts", 'import { b } from "./b.js";\nexport const a = 1;\n');
      write("b.ts", 'import {\n  a,\n} from "./a.js";\nexport const b = 2;\n');
      write("c.ts", 'import type { a } from "./a.js";\nexport { b } from "./b.js";\n');
      const files = ["a.ts", "b.ts", "c.ts"].map((n) => join(dir, n));
      expect(cycles(files).map((c) => c.map((f) => relative(dir, f)))).toEqual([["a.ts", "b.ts"]]);
    } finally {
      rmSync(dir, { recursive: true });
    }
  });

  it.each(roots.map((r) => [relative(repoRoot, r), r]))("%s", (_name, root) => {
    let files: string[];
    try {
      files = sources(root);
    } catch {
      return;
    }
    expect(cycles(files).map((c) => c.map((f) => relative(root, f)).join(" -> "))).toEqual([]);
  });
});
