import { chmodSync, chownSync, lstatSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, test } from "vitest";
import { loadImageSettings } from "../src/settings.js";
import { makeUserStore } from "../src/userstore.js";
import { tempDir } from "../../../tests/helpers/tmp.js";

/** A conf dir whose images.conf names a fresh CacheDir (not made yet). */
function site() {
  const dir = tempDir("jobrt-userstore-");
  const cache = join(dir, "cache");
  writeFileSync(join(dir, "images.conf"), `CacheDir=${cache}\n`);
  return { settings: loadImageSettings(dir), conf: join(dir, "images.conf"), cache, users: join(cache, "users") };
}

const NOBODY = { uid: 65534, gid: 65534 };
const modeOf = (p: string) => lstatSync(p).mode & 0o7777;

/** The line makeUserStore refuses with: ERR_CONF naming images.conf and CacheDir. */
function refusal(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    expect((error as { code?: string }).code).toBe("ERR_CONF");
    return (error as Error).message;
  }
  throw new Error("makeUserStore did not refuse");
}

describe("a user's store in the node cache, made by root (docs/runtime-oci.md, The image cache)", () => {
  beforeAll(() => {
    expect(process.getuid?.(), "these tests need root (they make dirs of other uids)").toBe(0);
  });

  test("root makes users/ sticky 1777 and the job user's store theirs, 0700", () => {
    const s = site();
    expect(makeUserStore(s.settings, 65534, NOBODY)).toBe(join(s.users, "65534"));
    expect({ uid: lstatSync(s.users).uid, mode: modeOf(s.users) }).toEqual({ uid: 0, mode: 0o1777 });
    const st = lstatSync(join(s.users, "65534"));
    expect({ uid: st.uid, mode: st.mode & 0o7777 }).toEqual({ uid: 65534, mode: 0o700 });
  });

  test("a users/ others may write without the sticky bit, one of another uid's, or a symlink is refused in one line", () => {
    const cases: [(users: string) => void, string][] = [
      [(u) => chmodSync(u, 0o777), "(mode 0777) lets others rename the stores in it: not used"],
      [(u) => chownSync(u, 4242, 4242), "belongs to uid 4242: not used"],
    ];
    for (const [spoil, why] of cases) {
      const s = site();
      mkdirSync(s.users, { recursive: true, mode: 0o755 });
      spoil(s.users);
      const line = refusal(() => makeUserStore(s.settings, 65534, NOBODY));
      expect(line).toContain(`${s.conf}: CacheDir ${s.cache}: ${s.users} ${why}`);
      expect(line).toContain(`install -d -m 1777 ${s.users}`);
      expect(line).not.toContain("\n");
      expect(readdirSync(s.users)).toEqual([]);
    }
    const s = site();
    const elsewhere = tempDir("jobrt-userstore-elsewhere-");
    mkdirSync(s.cache);
    symlinkSync(elsewhere, s.users);
    expect(refusal(() => makeUserStore(s.settings, 65534, NOBODY))).toContain(
      `CacheDir ${s.cache}: ${s.users} is not a directory (a symbolic link?): not used`,
    );
    expect(readdirSync(elsewhere)).toEqual([]);
  });

  test("a store another user made first is never used, by root either", () => {
    const s = site();
    makeUserStore(s.settings, 0);
    mkdirSync(join(s.users, "65534"), { mode: 0o755 });
    chownSync(join(s.users, "65534"), 4242, 4242);
    expect(refusal(() => makeUserStore(s.settings, 65534, NOBODY))).toBe(
      `${s.conf}: CacheDir ${s.cache}: ${join(s.users, "65534")} belongs to uid 4242, not to uid 65534: not used (another user made it); root removes it (rm -r ${join(s.users, "65534")}) and the next step makes it anew`,
    );
    expect(lstatSync(join(s.users, "65534")).uid).toBe(4242);
  });
});
