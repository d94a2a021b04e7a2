import { chmodSync, existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { tempDir } from "../../../tests/helpers/tmp.js";
import { joinStepShare, leaveStepShare, publishStepShare, readStepShare } from "../src/stepshare.js";

function options(dir: string, taskIds: number[], logged: string[] = []) {
  return { dir, taskIds, log: (level: string, message: string) => logged.push(`${level}: ${message}`) };
}

describe("step-shared value", () => {
  test("the first publisher wins, every process reads it, the last one out removes the dir", () => {
    const dir = join(tempDir("hs-spool-"), "spool", "rt-7.0");
    const a = options(dir, [0, 1]);
    const b = options(dir, [2]);
    expect(joinStepShare({ ...a, makeParent: true })).toBe(dir);
    expect(joinStepShare(b)).toBe(dir);
    expect(readStepShare(dir, "pin")).toBeUndefined();
    expect(publishStepShare(dir, "pin", "first\n")).toBe("published");
    expect(publishStepShare(dir, "pin", "second\n")).toBe("taken");
    expect(readStepShare(dir, "pin")).toBe("first\n");
    leaveStepShare(a);
    expect(readStepShare(dir, "pin")).toBe("first\n");
    leaveStepShare(b);
    expect(existsSync(dir)).toBe(false);
  });

  test("hostile: a dir others may enter is not used, and not removed", () => {
    const dir = join(tempDir("hs-spool-"), "rt-7.0");
    mkdirSync(dir);
    chmodSync(dir, 0o777);
    const logged: string[] = [];
    expect(joinStepShare(options(dir, [0], logged))).toBeUndefined();
    expect(logged[0]).toContain("is not a private directory of this user");
    leaveStepShare(options(dir, [0]));
    expect(existsSync(dir)).toBe(true);
  });
});
