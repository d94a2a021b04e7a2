import { readFileSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { dirname, join, posix } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { CHECKS } from "../src/checks.js";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

// Failure messages send authors to README.md's table, so it must list every check and ship.
describe("the README the failure messages point at", () => {
  it("lists every check with its level, and nothing else", () => {
    const readme = readFileSync(join(root, "README.md"), "utf8");
    const rows = [...readme.matchAll(/^\| ([a-z][^|]*) \| (MUST|SHOULD) \|/gm)].flatMap((m) =>
      (m[1] as string).split(",").map((id) => [id.trim().replace(/`/g, ""), m[2]] as const),
    );
    expect(Object.fromEntries(rows)).toEqual(
      Object.fromEntries(Object.entries(CHECKS).map(([id, c]) => [id, c.level])),
    );
  });

  it("ships, with every source file the source maps (and so the failures' stack frames) name", () => {
    const packed = spawnSync("pnpm", ["pack", "--dry-run", "--json"], { cwd: root, encoding: "utf8" });
    expect(packed.status, packed.stderr).toBe(0);
    const files = new Set((JSON.parse(packed.stdout) as { files: { path: string }[] }).files.map((f) => f.path));
    expect(files).toContain("README.md");
    const maps = [...files].filter((f) => f.endsWith(".js.map"));
    expect(maps.length).toBeGreaterThan(5);
    for (const map of maps) {
      for (const source of (JSON.parse(readFileSync(join(root, map), "utf8")) as { sources: string[] }).sources) {
        expect(files, `${map} names ${source}`).toContain(posix.join(posix.dirname(map), source));
      }
    }
  });
});
