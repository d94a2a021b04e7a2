import { lchownSync, mkdirSync, readdirSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { makeStepDir } from "../src/stepdir.js";
import { tempDir } from "../../../tests/helpers/tmp.js";

const isRoot = process.getuid?.() === 0;

describe.runIf(isRoot)("the step spool dir is made walking every component without following a user's symlink", () => {
  test("missing parents are made 0755; the step dir gets the mode and owner asked for", () => {
    const base = tempDir("jobrt-stepdir-");
    const dir = join(base, "a/b/oci-job1-0");
    makeStepDir(dir, 0o770, { uid: 65534, gid: 65534 }, [65534]);
    expect(statSync(join(base, "a")).mode & 0o7777).toBe(0o755);
    expect(statSync(join(base, "a/b")).uid).toBe(0);
    const st = statSync(dir);
    expect([st.mode & 0o7777, st.uid, st.gid]).toEqual([0o770, 65534, 65534]);
    // Again (another task's host of the same step): fine.
    makeStepDir(dir, 0o770, { uid: 65534, gid: 65534 }, [65534]);
  });

  test("a symlink owned by another user anywhere on the way is refused, naming it; nothing is made behind it", () => {
    const base = tempDir("jobrt-stepdir-");
    const target = join(base, "target");
    mkdirSync(target);
    mkdirSync(join(base, "shared"));
    symlinkSync(target, join(base, "shared/nobody"));
    lchownSync(join(base, "shared/nobody"), 65534, 65534);
    expect(() => makeStepDir(join(base, "shared/nobody/sub/oci-job1-0"), 0o770, undefined, [])).toThrow(
      `${base}/shared/nobody is a symbolic link owned by uid 65534; refusing to follow it`,
    );
    expect(() => makeStepDir(join(base, "shared/nobody/oci-job1-0"), 0o770, undefined, [])).toThrow(
      /refusing to follow it/,
    );
    expect(readdirSync(target)).toEqual([]);
  });

  test("the last component as a symlink (even root's) or a file is refused; root's symlinks on the way are followed", () => {
    const base = tempDir("jobrt-stepdir-");
    mkdirSync(join(base, "real"));
    symlinkSync(join(base, "real"), join(base, "link"));
    makeStepDir(join(base, "link/oci-job1-0"), 0o770, undefined, []);
    expect(readdirSync(join(base, "real"))).toEqual(["oci-job1-0"]);
    symlinkSync(join(base, "real"), join(base, "real/oci-job2-0"));
    expect(() => makeStepDir(join(base, "real/oci-job2-0"), 0o770, undefined, [])).toThrow(
      `${base}/real/oci-job2-0 is a symbolic link; refusing to follow it`,
    );
    writeFileSync(join(base, "file"), "");
    expect(() => makeStepDir(join(base, "file/oci-job1-0"), 0o770, undefined, [])).toThrow(
      `${base}/file is not a directory`,
    );
  });

  test("an existing step dir that belongs to someone else is refused", () => {
    const base = tempDir("jobrt-stepdir-");
    mkdirSync(join(base, "oci-job1-0"));
    lchownSync(join(base, "oci-job1-0"), 65534, 65534);
    expect(() => makeStepDir(join(base, "oci-job1-0"), 0o770, undefined, [])).toThrow(
      `${base}/oci-job1-0 exists but belongs to uid 65534`,
    );
  });
});
