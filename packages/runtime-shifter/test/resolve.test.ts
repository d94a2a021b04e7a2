import { chmodSync, existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type NodeConf, type StepRecord, isJobrtError } from "@jobrt/core";
import { afterAll, describe, expect, it } from "vitest";
import { loadShifterConf } from "../src/conf.js";
import type { ImageRef } from "../src/image.js";
import { lastPullStatus, lookupImage } from "../src/resolve.js";
import { tempDir } from "../../../tests/helpers/tmp.js";

// shifterimg's answers the plugin must classify, including ones the real tool should never give
// (two lines, garbage, a hang): small scripts stand in for those, so each branch really runs.
const dir = tempDir("shifter-resolve-");
chmodSync(dir, 0o755);
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const HEX = "e".repeat(64);
const image: ImageRef = { type: "docker", tag: "app:1", canonical: "docker:app:1" };
const isRoot = process.getuid?.() === 0;
const node: NodeConf = {
  nodeName: "n",
  confDir: dir,
  spoolDir: dir,
  killWait: 1,
  hostUid: process.getuid?.() ?? 0,
  log: () => {},
};
const step = {
  uid: isRoot ? 65534 : (process.getuid?.() ?? 0),
  gid: isRoot ? 65534 : (process.getgid?.() ?? 0),
  user: "nobody",
  home: "/nonexistent",
} as StepRecord;
const conf = { ...loadShifterConf(join(dir, "no-such-conf-dir"), 0), lookupTimeoutMs: 1000 };

let n = 0;
function tool(body: string): string {
  const path = join(dir, `shifterimg-${++n}`);
  writeFileSync(path, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
  return path;
}

describe("shifterimg lookup results", () => {
  it("accepts exactly one 64-hex line with exit 0", async () => {
    expect(await lookupImage(tool(`echo ${HEX}`), image, node, step, conf)).toEqual({ kind: "found", id: HEX });
  });

  it("treats a silent exit 1 as missing, and anything else as an error quoting the tool", async () => {
    expect(await lookupImage(tool("exit 1"), image, node, step, conf)).toEqual({ kind: "missing" });
    const down = await lookupImage(
      tool('echo "ERROR: failed to contact the image gateway."; exit 1'),
      image,
      node,
      step,
      conf,
    );
    expect(down).toEqual({
      kind: "error",
      detail: "shifterimg lookup docker:app:1 failed (exit 1: ERROR: failed to contact the image gateway.)",
    });
    const two = await lookupImage(tool(`echo ${HEX}; echo ${HEX}`), image, node, step, conf);
    expect(two.kind).toBe("error");
    const junk = await lookupImage(tool("echo not-an-id"), image, node, step, conf);
    expect(junk).toMatchObject({ kind: "error", detail: expect.stringMatching(/not one 64-hex image id/) });
    const killed = await lookupImage(tool("kill -KILL $$"), image, node, step, conf);
    expect(killed).toMatchObject({ kind: "error", detail: expect.stringMatching(/killed by SIGKILL/) });
  });

  it("passes the image as one argv word and runs as the job user with a minimal env", async () => {
    const out = join(dir, "seen");
    writeFileSync(out, "");
    chmodSync(out, 0o666);
    process.env.JOBRT_TEST_SECRET = "must-not-leak";
    try {
      const r = await lookupImage(
        tool(`{ echo "$#|$1|$2|$(id -u):$(id -g)|$(pwd)"; env | sort; } > ${out}; echo ${HEX}`),
        image,
        node,
        step,
        conf,
      );
      expect(r.kind).toBe("found");
    } finally {
      delete process.env.JOBRT_TEST_SECRET;
    }
    const [first, ...env] = readFileSync(out, "utf8").trim().split("\n");
    expect(first).toBe(`2|lookup|docker:app:1|${step.uid}:${step.gid}|/`);
    expect(env.map((l) => l.slice(0, l.indexOf("=")))).toEqual(["HOME", "LOGNAME", "PATH", "PWD", "USER"]);
  });

  it("kills a hung shifterimg and everything it started after LookupTimeout", async () => {
    const pidFile = join(dir, "grandchild.pid");
    writeFileSync(pidFile, "");
    chmodSync(pidFile, 0o666);
    const started = Date.now();
    let error: unknown;
    try {
      await lookupImage(tool(`sleep 60 & echo $! > ${pidFile}; wait`), image, node, step, conf);
    } catch (e) {
      error = e;
    }
    expect(isJobrtError(error, "ERR_RUNTIME_TIMEOUT")).toBe(true);
    expect((error as Error).message).toBe(
      "shifterimg lookup docker:app:1 did not finish within 1 s (shifter.conf LookupTimeout); it was killed",
    );
    expect(Date.now() - started).toBeLessThan(20_000);
    const pid = Number(readFileSync(pidFile, "utf8"));
    await new Promise((r) => setTimeout(r, 200));
    expect(existsSync(`/proc/${pid}`) && !readFileSync(`/proc/${pid}/stat`, "utf8").includes(") Z ")).toBe(false);
  });

  it("says how to fix a missing shifterimg", async () => {
    await expect(lookupImage(join(dir, "nope"), image, node, step, conf)).rejects.toThrow(
      new RegExp(`cannot run shifterimg at ${join(dir, "nope")}: ENOENT: set ShifterimgPath in shifter.conf`),
    );
  });
});

describe("shifterimg pull output", () => {
  it("takes the last status of the \\r-rewritten progress line", () => {
    const out =
      "\r\x1b[2K2026-11-30T07:00:00 Pulling Image: docker:a:1, status: PENDING\r\x1b[2K2026-11-30T07:00:01 Pulling Image: docker:a:1, status: FAILURE\n";
    expect(lastPullStatus(out)).toBe("FAILURE");
    expect(lastPullStatus("")).toBeUndefined();
  });
});
