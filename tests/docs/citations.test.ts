import { readFileSync, readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, test } from "vitest";
import { repoRoot } from "../helpers/jobrt.js";

// Comments, test names and scripts cite only documents inside the repo (docs/decisions.md says
// where the decisions live): a reader of a published package or a clone has no access to the
// team's research notes, so "spec 3.4" or "DESIGN.md section 4" point nowhere.
const roots = ["packages", "examples", "tests", "scripts", "bench", ".ci"];
const skip = new Set(["node_modules", "dist", ".turbo", "coverage"]);
const sources = /\.(ts|mts|mjs|js|sh|md)$/;

function* files(dir: string): Generator<string> {
  for (const name of readdirSync(dir)) {
    if (skip.has(name)) continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* files(path);
    else if (sources.test(name) && !name.startsWith("CHANGELOG")) yield path;
  }
}

const outside = [/\bspecs\//, /\bDESIGN\.md\b/, /\bspec (section )?\d/i, /\bspec §/];

function hits(pattern: RegExp): string[] {
  const found: string[] = [];
  for (const root of roots) {
    for (const file of files(join(repoRoot, root))) {
      if (file === import.meta.filename) continue;
      readFileSync(file, "utf8")
        .split("\n")
        .forEach((line, i) => {
          if (pattern.test(line)) found.push(`${relative(repoRoot, file)}:${i + 1}: ${line.trim()}`);
        });
    }
  }
  return found;
}

describe("citations point inside the repo", () => {
  for (const pattern of outside) {
    test(`nothing cites ${pattern.source}`, () => {
      expect(hits(pattern)).toEqual([]);
    });
  }
  test("every docs/*.md a source names exists", () => {
    const missing = hits(/\bdocs\/[\w.-]+\.md\b/).filter((hit) => {
      const names = hit.slice(hit.indexOf(": ") + 2).match(/\bdocs\/[\w.-]+\.md\b/g) ?? [];
      return names.some((name) => !exists(join(repoRoot, name)));
    });
    expect(missing).toEqual([]);
  });
});

function exists(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}
