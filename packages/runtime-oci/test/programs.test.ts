/**
 * The create/start programs that are not TypeScript (src/createstart.pl, src/watchdog.sh) pass
 * their languages' own checks (package.json's build copies them to dist/ beside watchdog.js).
 */
import { spawnSync } from "node:child_process";
import { describe, expect, test } from "vitest";

const src = (name: string) => new URL(`../src/${name}`, import.meta.url).pathname;

describe("create/start programs in their own files", () => {
  test("createstart.pl compiles (perl -c, with strict)", () => {
    const r = spawnSync("perl", ["-f", "-c", src("createstart.pl")], { encoding: "utf8" });
    expect(r.stderr).toBe(`${src("createstart.pl")} syntax OK\n`);
    expect(r.status).toBe(0);
  });

  test("watchdog.sh parses (sh -n)", () => {
    const r = spawnSync("sh", ["-n", src("watchdog.sh")], { encoding: "utf8" });
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
  });
});
