import { chmodSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, test } from "vitest";
import { sharedStoreProblem } from "../src/shared.js";
import { tempDir } from "../../../tests/helpers/tmp.js";

/** A SharedStore dir (0755) in a parent of its own (0755), both root's. */
function store() {
  const parent = join(tempDir("jobrt-sharedstore-"), "parent");
  const root = join(parent, "store");
  mkdirSync(root, { recursive: true, mode: 0o755 });
  chmodSync(parent, 0o755);
  return { parent, root };
}

describe("sharedStoreProblem: the modes of the store and the dirs above it (docs/images.md)", () => {
  beforeAll(() => {
    expect(process.getuid?.(), "root's store: these tests need root").toBe(0);
  });

  test("a sticky dir above the store is fine, one its group or others may write without the sticky bit is not", () => {
    const s = store();
    expect(sharedStoreProblem(s.root)).toBeUndefined();
    chmodSync(s.parent, 0o1777);
    expect(sharedStoreProblem(s.root)).toBeUndefined();
    for (const mode of [0o777, 0o775]) {
      chmodSync(s.parent, mode);
      expect(sharedStoreProblem(s.root)).toBe(`SharedStore ${s.root}: ${s.parent} is writable by others than root`);
    }
  });

  test("the store itself is refused when its group or others may write it, sticky or not", () => {
    const s = store();
    for (const mode of [0o1777, 0o777, 0o1775]) {
      chmodSync(s.root, mode);
      expect(sharedStoreProblem(s.root)).toBe(`SharedStore ${s.root}: ${s.root} is writable by others than root`);
    }
  });
});
