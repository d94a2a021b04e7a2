import { readdirSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { repoRoot } from "../helpers/jobrt.js";

// docs/architecture.md, "File names": modules and tests are lowercase words run together; dashes
// are for names a person types (packages, commands, the scripts and benchmarks run by name).
const SKIPPED_DIRS = new Set(["node_modules", "dist", "bench", ".turbo"]);

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.isDirectory()) {
      if (!SKIPPED_DIRS.has(entry.name)) out.push(...sources(join(dir, entry.name)));
    } else if (/\.(ts|mts|mjs|cjs|js|pl|sh)$/.test(entry.name)) out.push(join(dir, entry.name));
  }
  return out;
}

describe("file names (docs/architecture.md)", () => {
  it("no module, program or test under packages/, examples/ or tests/ has a dash or a capital in its name", () => {
    const files = ["packages", "examples", "tests"].flatMap((top) =>
      readdirSync(join(repoRoot, top), { withFileTypes: true })
        .filter((d) => d.isDirectory() || top === "tests")
        .flatMap((d) => (d.isDirectory() ? sources(join(repoRoot, top, d.name)) : [])),
    );
    expect(files.length).toBeGreaterThan(300);
    const offending = files
      .map((f) => relative(repoRoot, f))
      .filter((f) => !/^[a-z0-9]+(\.[a-z0-9]+)*$/.test(f.split("/").pop() ?? ""));
    expect(offending).toEqual([]);
  });
});
