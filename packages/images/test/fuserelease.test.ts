import { existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { releaseImage } from "../src/cache.js";
import { tempDir } from "../../../tests/helpers/tmp.js";

const HEX = "cd".repeat(32);

describe.runIf(process.getuid?.() === 0)("root and a job user's squashfuse mount (docs/images.md, Rootless)", () => {
  test("root's release of a step image mounted with squashfuse leaves the user's mount dir as it is", async () => {
    // What a user's journal names: their store, whose mnt/ holds the FUSE mount, its marks and lease.
    const userStore = tempDir("jobrt-fuse-release-");
    const mnt = join(userStore, "mnt");
    mkdirSync(join(mnt, `${HEX}.inuse`), { recursive: true });
    const mark = `999999.1.7.0`;
    writeFileSync(join(mnt, `${HEX}.inuse`, mark), "");
    const before = readdirSync(mnt).sort();
    const logged: string[] = [];
    await releaseImage({ store: "/nonexistent", hex: HEX, mark, mountedIn: userStore, mountKind: "fuse" }, (m) =>
      logged.push(m),
    );
    expect(readdirSync(mnt).sort()).toEqual(before);
    expect(existsSync(join(mnt, `${HEX}.inuse`, mark))).toBe(true);
    expect(logged).toEqual([]);
  });
});
