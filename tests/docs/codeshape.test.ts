import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { API } from "typescript/unstable/sync";
import { type Node, type SourceFile, SyntaxKind } from "typescript/unstable/ast";
import { describe, expect, it } from "vitest";
import { repoRoot } from "../helpers/jobrt.js";

// docs/architecture.md, "Code shape": one concept per file and functions a reader takes in at once.
// A number is the only rule a reviewer cannot argue about, so these are the two the brief gives.
const MAX_FILE_LINES = 400;
const MAX_FUNCTION_LINES = 60;

const FUNCTION_KINDS = new Set<SyntaxKind>([
  SyntaxKind.FunctionDeclaration,
  SyntaxKind.MethodDeclaration,
  SyntaxKind.ArrowFunction,
  SyntaxKind.FunctionExpression,
  SyntaxKind.Constructor,
  SyntaxKind.GetAccessor,
  SyntaxKind.SetAccessor,
]);

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name !== "test" && entry.name !== "dist" && entry.name !== "node_modules") out.push(...sources(path));
    } else if (entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts")) out.push(path);
  }
  return out;
}

function sourceFiles(): string[] {
  return ["packages", "examples"].flatMap((top) =>
    readdirSync(join(repoRoot, top), { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .flatMap((d) => {
        const src = join(repoRoot, top, d.name, "src");
        try {
          return sources(src);
        } catch {
          return [];
        }
      }),
  );
}

function lineOf(file: SourceFile, pos: number): number {
  return file.getLineAndCharacterOfPosition(pos).line + 1;
}

// An arrow function or function expression takes the name of what it is assigned to.
function nameOf(node: Node): string {
  const own = (node as { name?: Node }).name ?? (node.parent as { name?: Node } | undefined)?.name;
  if (node.kind === SyntaxKind.Constructor) return "constructor";
  return own && "text" in own ? String(own.text) : "<anonymous>";
}

interface LongFunction {
  key: string;
  line: string;
}

function longFunctions(file: SourceFile, path: string): LongFunction[] {
  const out: LongFunction[] = [];
  const visit = (node: Node): void => {
    if (FUNCTION_KINDS.has(node.kind)) {
      const start = lineOf(file, node.getStart(file));
      const length = lineOf(file, node.end) - start + 1;
      const name = nameOf(node);
      if (length > MAX_FUNCTION_LINES)
        out.push({ key: `${path} ${name}`, line: `${path}:${start} ${name} is ${length} lines` });
    }
    node.forEachChild(visit);
  };
  visit(file);
  return out;
}

describe("code shape (docs/architecture.md)", () => {
  const files = sourceFiles();

  it(`no source file under packages/*/src or examples/*/src is over ${MAX_FILE_LINES} lines`, () => {
    expect(files.length).toBeGreaterThan(100);
    const long = files.flatMap((f) => {
      const text = readFileSync(f, "utf8");
      const lines = text.split("\n").length - (text.endsWith("\n") ? 1 : 0);
      return lines > MAX_FILE_LINES ? [`${relative(repoRoot, f)}:1 is ${lines} lines`] : [];
    });
    expect(long).toEqual([]);
  });

  it(`no function in them spans more than ${MAX_FUNCTION_LINES} lines`, () => {
    const api = new API({ cwd: repoRoot });
    try {
      const snapshot = api.updateSnapshot({ openFiles: files });
      const long = files.flatMap((f) => {
        const file = snapshot.getDefaultProjectForFile(f)?.program.getSourceFile(f);
        if (!file) return [{ key: "", line: `${relative(repoRoot, f)}:1 could not be parsed` }];
        return longFunctions(file, relative(repoRoot, f));
      });
      expect(long.map((l) => l.line)).toEqual([]);
    } finally {
      api.close();
    }
  });
});
