import { mkdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { tempDir } from "../../../tests/helpers/tmp.js";
import { makeDirs } from "../src/index.js";

describe("makeDirs", () => {
  it("makes each missing dir with exactly the mode asked, under umask 077, and leaves what exists", () => {
    const root = tempDir("jobrt-makedirs-");
    mkdirSync(join(root, "had"), { mode: 0o700 });
    const old = process.umask(0o077);
    try {
      makeDirs(join(root, "had", "a", "b"), 0o755);
    } finally {
      process.umask(old);
    }
    expect(statSync(join(root, "had")).mode & 0o777).toBe(0o700);
    expect(statSync(join(root, "had", "a")).mode & 0o777).toBe(0o755);
    expect(statSync(join(root, "had", "a", "b")).mode & 0o777).toBe(0o755);
    makeDirs(join(root, "had", "a", "b"), 0o700);
    expect(statSync(join(root, "had", "a", "b")).mode & 0o777).toBe(0o755);
  });
});
