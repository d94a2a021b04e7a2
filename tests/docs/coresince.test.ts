import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { repoRoot } from "../helpers/jobrt.js";

/**
 * Issue 40, item 1: docs/writing-a-runtime.md's "Since core" table names every core export and
 * catalog code added since the last release (api/released/), so a plugin author can write the peer
 * range that what they use needs; each added export's declaration says "Since core".
 */

const read = (path: string) => readFileSync(join(repoRoot, path), "utf8");

function sinceTable(): string {
  const doc = read("docs/writing-a-runtime.md");
  const start = doc.indexOf("| Since core | Addition |");
  expect(start, "docs/writing-a-runtime.md has no 'Since core' table").toBeGreaterThan(0);
  const end = doc.indexOf("\n\n", start);
  return doc.slice(start, end);
}

const released = JSON.parse(read("api/released/core.json")) as { version: string; exports: Record<string, unknown> };
const releasedCodes = (JSON.parse(read("api/released/error-codes.json")) as { codes: string[] }).codes;
const exported = read("api/core.txt")
  .split("\n")
  .filter((l) => l !== "" && !l.startsWith("#"))
  .map((l) => l.replace(/^type\s+/, "").trim());
const codes = [...read("packages/core/src/catalog.ts").matchAll(/^ {2}(ERR_[A-Z0-9_]+):/gm)].map((m) => m[1] as string);

describe(`core additions since ${released.version}`, () => {
  const added = exported.filter((n) => !Object.hasOwn(released.exports, n));
  const addedCodes = codes.filter((c) => !releasedCodes.includes(c));

  it("every added export and catalog code is in writing-a-runtime.md's table", () => {
    const table = sinceTable();
    expect([...added, ...addedCodes].filter((n) => !table.includes(`\`${n}\``))).toEqual([]);
  });

  it("every added function or constant says in its declaration which core added it", () => {
    const undated = added.filter((name) => {
      const source = findDeclaration(name);
      return source !== undefined && !source.comment.includes("Since core");
    });
    expect(undated).toEqual([]);
  });
});

/** The doc comment above `export function|const NAME` in core's src, when it is declared that way. */
function findDeclaration(name: string): { comment: string } | undefined {
  const files = read("packages/core/src/index.ts")
    .split("\n")
    .map((l) => new RegExp(`\\b${name}\\b.*from "\\./([a-z]+)\\.js"`).exec(l)?.[1])
    .filter((f): f is string => f !== undefined);
  for (const file of files) {
    const text = read(`packages/core/src/${file}.ts`);
    const at = new RegExp(`\\nexport (?:async )?(?:function|const) ${name}\\b`).exec(text);
    if (!at) continue;
    const before = text.slice(0, at.index);
    const open = before.lastIndexOf("/**");
    return { comment: open >= 0 && before.lastIndexOf("*/") > open ? before.slice(open) : "" };
  }
  return undefined;
}
