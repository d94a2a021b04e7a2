import { execFileSync } from "node:child_process";
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { tempDir } from "../../../tests/helpers/tmp.js";
import { asUser } from "../src/asuser.js";
import { runFileOps } from "../src/fileops.js";

const root = process.getuid?.() === 0;
const nobody = { uid: 65534, gid: 65534 };

/** A dir nobody owns and may write in, inside a dir everyone may enter. */
function userDir(): string {
  const base = tempDir("hs-fileops-");
  chmodSync(base, 0o755);
  const dir = join(base, "user");
  mkdirSync(dir, { mode: 0o700 });
  chownSync(dir, nobody.uid, nobody.gid);
  return dir;
}

/** A root-only dir holding a file `secret`. */
function rootOnly(): string {
  const dir = tempDir("hs-rootonly-");
  chmodSync(dir, 0o700);
  writeFileSync(join(dir, "secret"), "root's\n", { mode: 0o600 });
  return dir;
}

describe("runFileOps", () => {
  test("as this process: mkdir, write, read, rmdir, remove; each op has its own result", () => {
    const dir = tempDir("hs-fileops-");
    const results = runFileOps(
      [
        { op: "mkdir", path: join(dir, "d"), mode: 0o750 },
        { op: "write", dir: join(dir, "d"), name: "f", content: "x\n", mode: 0o640 },
        { op: "read", path: join(dir, "d", "f") },
        { op: "rmdir", path: join(dir, "d") },
        { op: "read", path: join(dir, "missing") },
        { op: "remove", path: join(dir, "d") },
      ],
      undefined,
    );
    expect(results.map((r) => r.ok)).toEqual([true, true, true, false, false, true]);
    expect(results[2]).toEqual({ ok: true, value: "x\n" });
    expect(results[3]).toMatchObject({ code: "ENOTEMPTY" });
    expect(results[4]).toMatchObject({ code: "ENOENT" });
    expect(existsSync(join(dir, "d"))).toBe(false);
  });

  test("hostile: a FIFO for a file is refused at once, not waited on", () => {
    const dir = tempDir("hs-fileops-");
    execFileSync("mkfifo", [join(dir, "config.json")]);
    const [r] = runFileOps([{ op: "read", path: join(dir, "config.json") }], undefined);
    expect(r).toMatchObject({ ok: false, error: expect.stringContaining("not a regular file") });
  });

  test("hostile: a file over the read limit (a sparse 1 GiB config.json) is refused without being read", () => {
    const dir = tempDir("hs-fileops-");
    const file = join(dir, "config.json");
    writeFileSync(file, "");
    truncateSync(file, 1024 ** 3);
    const before = process.memoryUsage().rss;
    const [r] = runFileOps([{ op: "read", path: file }], undefined);
    expect(r).toMatchObject({
      ok: false,
      code: "EFBIG",
      error: expect.stringContaining("more than the 16777216-byte limit"),
    });
    // Not read, not allocated (Buffer.alloc would have zero-filled the whole GiB first).
    expect(process.memoryUsage().rss - before).toBeLessThan(256 * 1024 * 1024);
  });

  test.runIf(root)(
    "as a job user, from root, in this process: what it makes is the user's, with the modes asked",
    () => {
      const dir = userDir();
      const results = runFileOps(
        [
          { op: "mkdir", path: join(dir, "task-0"), mode: 0o770 },
          { op: "write", dir: join(dir, "task-0"), name: "environment", content: "A=1\n", mode: 0o600 },
        ],
        nobody,
      );
      expect(results).toEqual([{ ok: true }, { ok: true }]);
      for (const path of [join(dir, "task-0"), join(dir, "task-0", "environment")]) {
        const st = statSync(path);
        expect([st.uid, st.gid]).toEqual([nobody.uid, nobody.gid]);
      }
      expect(statSync(join(dir, "task-0")).mode & 0o777).toBe(0o770);
      expect(readFileSync(join(dir, "task-0", "environment"), "utf8")).toBe("A=1\n");
      expect([process.geteuid?.(), process.getegid?.()]).toEqual([0, 0]);
    },
  );

  test.runIf(root)("hostile: a symlink the user swaps in for a parent reaches only what the user may touch", () => {
    const dir = userDir();
    const secret = rootOnly();
    symlinkSync(secret, join(dir, "task-0"));
    const results = runFileOps(
      [
        { op: "read", path: join(dir, "task-0", "secret") },
        { op: "write", dir: join(dir, "task-0"), name: "secret", content: "user's\n", mode: 0o600 },
        { op: "remove", path: join(dir, "task-0", "secret") },
      ],
      nobody,
    );
    expect(results.map((r) => [r.ok, r.ok ? undefined : r.code])).toEqual([
      [false, "EACCES"],
      [false, "EACCES"],
      [true, undefined],
    ]);
    // remove reports what it could not take; the file itself is still root's and whole.
    expect(results[2]).toMatchObject({ value: [expect.stringContaining("secret")] });
    expect(readFileSync(join(secret, "secret"), "utf8")).toBe("root's\n");
  });
});

describe("asUser", () => {
  test.runIf(root)("restores root's ids and groups when the work throws", () => {
    const groups = process.getgroups?.();
    expect(() =>
      asUser(nobody, () => {
        expect([process.geteuid?.(), process.getegid?.()]).toEqual([nobody.uid, nobody.gid]);
        throw new Error("boom");
      }),
    ).toThrow("boom");
    expect([process.geteuid?.(), process.getegid?.(), process.getgroups?.()]).toEqual([0, 0, groups]);
  });

  test.runIf(root)("an id the system refuses half-way (gid taken, uid unknown): every id and group is back", () => {
    const groups = process.getgroups?.();
    expect(() => asUser({ uid: 4294967295, gid: nobody.gid }, () => "ran")).toThrow();
    expect([process.geteuid?.(), process.getegid?.(), process.getgroups?.()]).toEqual([0, 0, groups]);
  });
});

describe("runFileOps when the user's ids cannot be taken", () => {
  test.runIf(root)("never throws: every op fails, saying why, and nothing is done", () => {
    const dir = tempDir("hs-fileops-");
    const results = runFileOps(
      [
        { op: "mkdir", path: join(dir, "d"), mode: 0o700 },
        { op: "read", path: join(dir, "missing") },
      ],
      { uid: 4294967295, gid: nobody.gid },
    );
    expect(results).toEqual([
      { ok: false, error: expect.stringContaining("cannot take the ids of uid 4294967295") },
      { ok: false, error: expect.stringContaining("cannot take the ids of uid 4294967295") },
    ]);
    expect(existsSync(join(dir, "d"))).toBe(false);
    expect([process.geteuid?.(), process.getegid?.()]).toEqual([0, 0]);
  });
});
