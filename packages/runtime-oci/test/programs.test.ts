/**
 * The create/start program that is not TypeScript (src/createstart.pl, watchdog included) passes
 * its language's own check (package.json's build copies it to dist/, beside the package's index.js).
 */
import { spawnSync } from "node:child_process";
import { describe, expect, test } from "vitest";

const src = (name: string) => new URL(`../src/${name}`, import.meta.url).pathname;

describe("the create/start program in its own file", () => {
  test("createstart.pl compiles (perl -c, with strict)", () => {
    const r = spawnSync("perl", ["-f", "-c", src("createstart.pl")], { encoding: "utf8" });
    expect(r.stderr).toBe(`${src("createstart.pl")} syntax OK\n`);
    expect(r.status).toBe(0);
  });
});
