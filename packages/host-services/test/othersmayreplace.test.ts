import { chmodSync, mkdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { tempDir } from "../../../tests/helpers/tmp.js";
import { othersMayReplace } from "../src/index.js";

const S_IFDIR = 0o040000;

/** The modes (octal, so a failure names them) a directory of which the predicate holds for. */
const replaceable = (modes: number[]) =>
  modes.filter((mode) => othersMayReplace({ mode: S_IFDIR | mode })).map((mode) => mode.toString(8));

describe("othersMayReplace", () => {
  it("holds for a directory its group or others may write without the sticky bit", () => {
    const modes = [0o775, 0o757, 0o777, 0o770, 0o707, 0o2775, 0o4757];
    expect(replaceable(modes)).toEqual(modes.map((m) => m.toString(8)));
  });

  it("does not hold for a sticky one (1777, like /tmp) nor for one only its owner may write (0755)", () => {
    expect(replaceable([0o1777, 0o1775, 0o1757, 0o1770, 0o755, 0o700, 0o555, 0o1755, 0o000])).toEqual([]);
  });

  it("reads the mode stat gives for a real directory", () => {
    const at = join(tempDir("jobrt-othersmayreplace-"), "d");
    mkdirSync(at);
    const seen = [0o755, 0o775, 0o757, 0o1777].map((mode) => {
      chmodSync(at, mode);
      return othersMayReplace(statSync(at));
    });
    expect(seen).toEqual([false, true, true, false]);
  });
});
