import { spawn } from "node:child_process";
import { execFileSync } from "node:child_process";
import { symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { clipText } from "../src/conf.js";
import { MAX_CONF_BYTES } from "../src/conffile.js";
import { type ConfSchema, loadConfFile, parseConf, readConfText } from "../src/index.js";
import { tempDir } from "../../../tests/helpers/tmp.js";

// What a configuration file may be: only a regular file of at most MAX_CONF_BYTES, read without
// ever blocking; a dangling symlink is an error, a missing file is "no file".

const schema: ConfSchema = { SpoolDir: { type: "string" }, KillWait: { type: "int", min: 0, max: 100 } };
const dir = () => tempDir("jobrt-conffile-");

/**
 * Runs `read` with a FIFO at `fifo`. Code that opens the FIFO blocks the whole worker in a
 * synchronous open; a writer that turns up after a few seconds then releases it, so a regression
 * fails (the read returns text instead of refusing) rather than hanging the run.
 */
function withFifo(fifo: string, read: () => unknown): () => unknown {
  execFileSync("mkfifo", [fifo]);
  return () => {
    // Its own process group: killing only `timeout` left the shell blocked on the FIFO for good.
    const releaser = spawn("timeout", ["10", "sh", "-c", 'sleep 3; echo "KillWait=1" > "$1"', "sh", fifo], {
      stdio: "ignore",
      detached: true,
    });
    try {
      return read();
    } finally {
      if (releaser.pid !== undefined) process.kill(-releaser.pid, "SIGKILL");
    }
  };
}

describe("readConfText / loadConfFile: which files are read", () => {
  it("a missing file is undefined (embedded defaults); for an Include it is an error", () => {
    const d = dir();
    expect(readConfText(join(d, "jobrt.conf"), true)).toBeUndefined();
    expect(loadConfFile(join(d, "jobrt.conf"), schema)).toBeUndefined();
    expect(() => readConfText(join(d, "jobrt.conf"), false)).toThrow(`${join(d, "jobrt.conf")}: does not exist`);
  });

  it("a dangling symlink is an error naming the file and its target, not the defaults", () => {
    const d = dir();
    symlinkSync(join(d, "gone.conf"), join(d, "jobrt.conf"));
    expect(() => loadConfFile(join(d, "jobrt.conf"), schema)).toThrow(
      expect.objectContaining({
        code: "ERR_CONF",
        message: `${join(d, "jobrt.conf")}: is a dangling symlink (to ${JSON.stringify(join(d, "gone.conf"))})`,
      }),
    );
  });

  it("a symlink to a regular file is followed", () => {
    const d = dir();
    writeFileSync(join(d, "real.conf"), "KillWait=3\n");
    symlinkSync("real.conf", join(d, "jobrt.conf"));
    expect(loadConfFile(join(d, "jobrt.conf"), schema)?.values).toEqual({ KillWait: 3 });
  });

  it("a FIFO is refused without opening it (an open would block until a writer came)", () => {
    const d = dir();
    const path = join(d, "jobrt.conf");
    const read = withFifo(path, () => loadConfFile(path, schema));
    expect(read).toThrow(
      expect.objectContaining({
        code: "ERR_CONF",
        message: `${path}: is a FIFO; configuration is read only from regular files`,
      }),
    );
  });

  it.each([
    ["/dev/zero", "is a character device"],
    ["/dev/null", "is a character device"],
    ["/", "is a directory"],
  ])("%s is refused: %s", (path, what) => {
    expect(() => readConfText(path, true)).toThrow(`${path}: ${what}; configuration is read only from regular files`);
  });

  it("a file over the cap is refused with one line naming it and the limit; one at the cap is read", () => {
    const d = dir();
    const big = join(d, "big.conf");
    writeFileSync(big, `#${"x".repeat(MAX_CONF_BYTES)}\n`);
    expect(() => loadConfFile(big, schema)).toThrow(
      `${big}: is ${MAX_CONF_BYTES + 2} bytes, more than the 1048576-byte (1 MiB) limit for a configuration file`,
    );
    writeFileSync(big, `#${"x".repeat(MAX_CONF_BYTES - 2)}\n`);
    expect(loadConfFile(big, schema)?.values).toEqual({});
  });
});

describe("parseConf: Include targets", () => {
  it.each([
    // (/dev/zero, which an unfixed reader reads until memory runs out, is in tests/faults/input.test.ts.)
    ["/dev/null", "/dev/null: is a character device; configuration is read only from regular files"],
    ["/nonexistent/extra.conf", "/nonexistent/extra.conf: does not exist"],
  ])("Include %s is an error at the Include line", (target, what) => {
    const d = dir();
    writeFileSync(join(d, "jobrt.conf"), `KillWait=1\nInclude ${target}\n`);
    expect(() => loadConfFile(join(d, "jobrt.conf"), schema)).toThrow(`${join(d, "jobrt.conf")}:2:1: Include: ${what}`);
  });

  it("Include of a FIFO is refused without opening it", () => {
    const d = dir();
    const main = join(d, "jobrt.conf");
    writeFileSync(main, "Include extra.conf\n");
    const read = withFifo(join(d, "extra.conf"), () => loadConfFile(main, schema));
    expect(read).toThrow(
      `${main}:1:1: Include: ${join(d, "extra.conf")}: is a FIFO; configuration is read only from regular files`,
    );
  });

  it("a dangling symlink as Include target is an error", () => {
    const d = dir();
    symlinkSync(join(d, "gone.conf"), join(d, "extra.conf"));
    writeFileSync(join(d, "jobrt.conf"), "Include extra.conf\n");
    expect(() => loadConfFile(join(d, "jobrt.conf"), schema)).toThrow(
      `Include: ${join(d, "extra.conf")}: is a dangling symlink`,
    );
  });

  it("the cap counts Includes: files that include each other many times cannot add up past it", () => {
    const d = dir();
    // 7 levels of 4 Includes each end in 16384 reads of a 512-byte file: 8 MiB of text.
    const line = (name: string) => `Include ${name}\n`.repeat(4);
    writeFileSync(join(d, "leaf.conf"), `#${"x".repeat(510)}\n`);
    for (let i = 0; i < 7; i++) writeFileSync(join(d, `l${i}.conf`), line(i === 6 ? "leaf.conf" : `l${i + 1}.conf`));
    expect(() => loadConfFile(join(d, "l0.conf"), schema)).toThrow(
      /Include: .*: the configuration, with its Includes, is more than the 1048576-byte \(1 MiB\) limit$/,
    );
  });
});

describe("parseConf: hostile values", () => {
  const parse = (text: string) => parseConf(text, { file: "/etc/jobrt/jobrt.conf", schema });

  it("a NUL byte is refused at its file:line:column", () => {
    expect(() => parse("KillWait=1\nSpoolDir=/tmp/a\0b\n")).toThrow(
      expect.objectContaining({
        code: "ERR_CONF",
        message: "/etc/jobrt/jobrt.conf:2:16: contains a NUL byte",
        details: expect.objectContaining({ line: 2 }),
      }),
    );
  });

  it("an error about a huge value is a short line that keeps its start and its end", () => {
    const messageOf = (text: string) => {
      try {
        parse(text);
      } catch (error) {
        return (error as Error).message;
      }
      return "";
    };
    for (const [value, end] of [
      ["9".repeat(500_000), "9+ is above the maximum 100"],
      ["x".repeat(500_000), 'x+" is not an integer'],
    ]) {
      const message = messageOf(`KillWait=${value}\n`);
      expect(message.length).toBeLessThan(400);
      expect(message).toMatch(
        new RegExp(
          `^/etc/jobrt/jobrt\\.conf:1:10: KillWait: "?[9x]+\\.\\.\\.\\[\\d+ characters cut\\]\\.\\.\\.${end}$`,
        ),
      );
    }
    expect(messageOf(`${"K".repeat(500_000)}=1`)).toMatch(
      /^\/etc\/jobrt\/jobrt\.conf:1:1: K+\.\.\.\[\d+ characters cut\]\.\.\.K+: unknown key$/,
    );
    expect(clipText("short")).toBe("short");
  });

  it("repeated keys give at most 10 warnings and one line counting the rest", () => {
    const c = parse("KillWait=1\n".repeat(50_000));
    expect(c.warnings).toHaveLength(11);
    expect(c.warnings[0]).toBe(
      "/etc/jobrt/jobrt.conf:2: KillWait specified more than once (first at line 1); the last value wins",
    );
    expect(c.warnings[10]).toBe(
      "/etc/jobrt/jobrt.conf: 49989 more keys specified more than once (not shown); the last value of each wins",
    );
  });
});
