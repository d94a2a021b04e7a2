import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, symlinkSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { createRuntimeProject } from "../../examples/create-jobrt-runtime/dist/index.js";
import { CHECKS } from "../../packages/testkit/dist/index.js";
import { repoRoot, tempDir } from "../helpers/jobrt.js";

/**
 * Issue 40, item 6: docs/writing-a-runtime.md states how many checks the testkit runs against the
 * starter's plugin and which do not apply, and the starter's README lists the hooks of the file it
 * generates. Both must say what the code does: the numbers are read from a real run of the
 * generated package's own `npm test` (its vitest, on this tree's testkit).
 */

interface Outcome {
  title: string;
  status: string;
}

const HOOKS = ["init", "fini", "validate", "setup", "taskInit", "run", "cleanup", "describe", "tools", "check"];
const NUMBERS: Record<string, number> = { six: 6, seven: 7, eight: 8, nine: 9, ten: 10, eleven: 11, twelve: 12 };

const checkId = (title: string): string => /^\[(?:MUST|SHOULD)\] ([a-z.-]+)/.exec(title)?.[1] ?? title;

/** Links what the generated package would get from npm to this workspace's builds. */
function linkDeps(dir: string): void {
  const req = createRequire(join(repoRoot, "package.json"));
  const links: [string, string][] = [
    ["@jobrt/core", join(repoRoot, "packages/core")],
    ["@jobrt/testkit", join(repoRoot, "packages/testkit")],
    ["vitest", dirname(req.resolve("vitest/package.json"))],
  ];
  for (const [name, target] of links) {
    mkdirSync(dirname(join(dir, "node_modules", name)), { recursive: true });
    symlinkSync(target, join(dir, "node_modules", name));
  }
}

/** The generated package's test run: every test of its conformance suite with its status. */
function runStarterTests(): Outcome[] {
  const { dir } = createRuntimeProject({ dir: join(tempDir("jobrt-docs-starter-"), "jobrt-runtime-fast") });
  linkDeps(dir);
  const report = join(dir, "report.json");
  const vitest = join(dir, "node_modules/vitest/vitest.mjs");
  const r = spawnSync(process.execPath, [vitest, "run", "--reporter=json", `--outputFile=${report}`], {
    cwd: dir,
    encoding: "utf8",
    timeout: 240_000,
  });
  expect(r.status, `the starter's own tests pass\n${r.stdout.slice(-2000)}${r.stderr.slice(-2000)}`).toBe(0);
  const json = JSON.parse(readFileSync(report, "utf8")) as { testResults: { assertionResults: Outcome[] }[] };
  return json.testResults.flatMap((f) => f.assertionResults);
}

let outcomes: Outcome[] = [];
beforeAll(() => {
  outcomes = runStarterTests();
}, 300_000);

describe("docs/writing-a-runtime.md and the starter's README say what the starter does", () => {
  it("the number of checks the starter runs, and those that do not apply to it, are the real ones", () => {
    const doc = readFileSync(join(repoRoot, "docs/writing-a-runtime.md"), "utf8").replace(/\s+/g, " ");
    const m =
      /testkit runs its (\d+) checks against the starter plugin \((\d+|[a-z]+) do not apply to it: ((?:[^()]|\([^()]*\))*)\)/.exec(
        doc,
      );
    expect(m, "the sentence on the starter's checks").not.toBeNull();
    const [, total, skipped, list] = m as RegExpExecArray;
    // The checks, not the notes the kit adds after them (peer.minimum: docs' "Peer range" part).
    const checks = outcomes.filter((o) => /^\[(MUST|SHOULD)\] /.test(o.title));
    const notApplying = checks.filter((o) => o.status === "skipped").map((o) => checkId(o.title));
    expect(checks.length).toBeGreaterThan(30);
    expect(outcomes.filter((o) => !checks.includes(o)).map((o) => o.title)).toEqual([
      expect.stringMatching(/^\[NOTE\] peer\.minimum: /),
    ]);
    expect({ total: Number(total), skipped: NUMBERS[skipped as string] ?? Number(skipped) }).toEqual({
      total: checks.length,
      skipped: notApplying.length,
    });
    // The ids it names are exactly the checks that were skipped.
    const named = [...(list as string).matchAll(/`([a-z.-]+)`/g)]
      .map((n) => n[1] as string)
      .filter((id) => id in CHECKS);
    expect(named.sort()).toEqual(notApplying.sort());
  });

  it("the number of broken bwrap variants the page says the example runs is the number it runs", () => {
    const doc = readFileSync(join(repoRoot, "docs/writing-a-runtime.md"), "utf8").replace(/\s+/g, " ");
    const stated = /flaws\.test\.ts` runs ([a-z]+|\d+) such variants/.exec(doc)?.[1];
    expect(stated, "the sentence on flaws.test.ts").toBeDefined();
    const plugins = readFileSync(join(repoRoot, "examples/jobrt-runtime-bwrap/test/flaws/plugins.ts"), "utf8");
    const union = /export type Flaw =([^;]*);/.exec(plugins)?.[1] ?? "";
    const flaws = [...union.matchAll(/\| "([a-z0-9-]+)"/g)].length;
    expect(flaws).toBeGreaterThan(5);
    expect(NUMBERS[stated as string] ?? Number(stated)).toBe(flaws);
  });

  it("the starter's README lists the hooks its generated src/index.ts defines", () => {
    const readme = readFileSync(join(repoRoot, "examples/create-jobrt-runtime/README.md"), "utf8");
    const line = readme.split("\n").find((l) => l.startsWith("src/index.ts "));
    expect(line, "the README's src/index.ts line").toBeDefined();
    const listed = HOOKS.filter((h) => new RegExp(`\\b${h}\\b`).test((line as string).replace(/^src\/index\.ts/, "")));
    const template = readFileSync(join(repoRoot, "examples/create-jobrt-runtime/template/src/index.ts"), "utf8");
    // The hooks object's members, at its indentation: `setup({ step, log }) {`, `run(...): ExecSpec {`.
    const defined = [...template.matchAll(/^ {4}([a-zA-Z]+)(?:\(|: )/gm)].map((d) => d[1] as string);
    expect(defined.length).toBeGreaterThan(0);
    expect(
      defined.every((h) => HOOKS.includes(h)),
      `${defined} are hooks`,
    ).toBe(true);
    expect(listed.sort()).toEqual(defined.sort());
  });
});
