/**
 * Image pull progress (docs/cli.md, "Pull progress"): the built `jobrt`, a real docker-registry on
 * 127.0.0.1 (tests/helpers/registry.ts, stopped by pid), real skopeo and umoci. The terminal case
 * runs jobrt under a real pty (util-linux `script`), not a mock.
 */
import { spawnSync } from "node:child_process";
import { chmodSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { jobrt, jobrtBin, tempDir } from "../helpers/jobrt.js";
import { type Registry, pushBusybox, startRegistry, expectImagePrerequisites } from "../helpers/registry.js";

let nextJob = 760000 + (process.pid % 1000) * 20;
const jobId = () => String(++nextJob);

/** A conf dir with its own SpoolDir and an empty image cache, so every step pulls. */
function site(reg: Registry): string {
  const dir = tempDir("jobrt-progress-conf-");
  chmodSync(dir, 0o755);
  writeFileSync(join(dir, "jobrt.conf"), `SpoolDir=${join(dir, "spool")}\nKillWait=2\n`);
  writeFileSync(join(dir, "images.conf"), `CacheDir=${join(dir, "cache")}\nInsecureRegistries=${reg.host}\n`);
  return dir;
}

const SUMMARY = /\d+\.\d MiB, \d+ layers?, \d+\.\d MiB\/s/;

describe("image pull progress", () => {
  let reg: Registry;
  let ref: string;
  beforeAll(async () => {
    expectImagePrerequisites(["skopeo", "umoci", "docker-registry", "runc", "script"], "runc");
    reg = await startRegistry();
    pushBusybox(reg, "progress:1", "progress", { extraFile: { path: "etc/big", bytes: 8 << 20 } });
    ref = `docker://${reg.host}/progress:1`;
  });
  afterAll(async () => {
    await reg?.stop();
  });

  test("on a terminal: one line redrawn in place on stderr (bytes, layers, rate), then the pulled line", () => {
    const dir = site(reg);
    const cmd = [
      process.execPath,
      jobrtBin,
      "run",
      "--conf-dir",
      dir,
      "--jobid",
      jobId(),
      "--container-image",
      ref,
      "cat",
      "/etc/jobrt-image",
    ];
    // script gives jobrt a pty; the task's stdout goes to a file, so what the terminal showed is stderr.
    const out = join(tempDir("jobrt-progress-out-"), "stdout");
    const r = spawnSync("script", ["-qfec", `${cmd.map((a) => `'${a}'`).join(" ")} >'${out}'`, "/dev/null"], {
      encoding: "utf8",
      timeout: 120_000,
    });
    expect(readFileSync(out, "utf8")).toBe("progress\n");
    expect(r.status, r.stderr).toBe(0);
    const screen = r.stdout;
    const redraws = screen.split("\r\x1b[K").slice(1);
    expect(redraws.length, JSON.stringify(screen)).toBeGreaterThanOrEqual(2);
    for (const d of redraws.slice(0, -1))
      expect(d).toMatch(new RegExp(`^jobrt: pulling ${ref.replace(/[.:/]/g, "\\$&")}: ${SUMMARY.source}$`));
    const last = redraws[redraws.length - 1] as string;
    expect(last).toMatch(
      new RegExp(`^jobrt: pulled ${ref.replace(/[.:/]/g, "\\$&")}: ${SUMMARY.source} in \\d+\\.\\d s\\r?\\n$`),
    );
  });

  test("stderr not a terminal: silent; with -v one plain line at the start and one at the end", async () => {
    const quiet = await jobrt([
      "run",
      "--conf-dir",
      site(reg),
      "--jobid",
      jobId(),
      "--container-image",
      ref,
      "cat",
      "/etc/jobrt-image",
    ]);
    expect(quiet.stderr).toBe("");
    expect(quiet.stdout).toBe("progress\n");
    const loud = await jobrt([
      "run",
      "-v",
      "--conf-dir",
      site(reg),
      "--jobid",
      jobId(),
      "--container-image",
      ref,
      "true",
    ]);
    expect(loud.code).toBe(0);
    expect(loud.stderr).not.toContain("\r");
    const pulls = loud.stderr.split("\n").filter((l) => /^jobrt: (pulling|pulled) /.test(l));
    expect(pulls).toHaveLength(2);
    expect(pulls[0]).toBe(`jobrt: pulling ${ref}`);
    expect(pulls[1]).toMatch(
      new RegExp(`^jobrt: pulled ${ref.replace(/[.:/]/g, "\\$&")}: ${SUMMARY.source} in \\d+\\.\\d s$`),
    );
    // A cached image is no pull: no progress lines at all.
    const dir = site(reg);
    await jobrt(["run", "--conf-dir", dir, "--jobid", jobId(), "--container-image", ref, "true"]);
    const cached = await jobrt(["run", "-v", "--conf-dir", dir, "--jobid", jobId(), "--container-image", ref, "true"]);
    expect(cached.stderr).not.toMatch(/jobrt: pull/);
  });

  test("--json: pull events, start, progress and end, with growing bytes, between runtime and setup", async () => {
    const r = await jobrt([
      "run",
      "--json",
      "--conf-dir",
      site(reg),
      "--jobid",
      jobId(),
      "--container-image",
      ref,
      "true",
    ]);
    expect(r.code).toBe(0);
    expect(r.stderr).toBe("");
    const events = r.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const names = events.map((e) => e.event);
    const pulls = events.filter((e) => e.event === "pull");
    expect(pulls.map((e) => e.phase)[0]).toBe("start");
    expect(pulls.map((e) => e.phase).at(-1)).toBe("end");
    expect(pulls.slice(1, -1).every((e) => e.phase === "progress")).toBe(true);
    expect(pulls.length).toBeGreaterThanOrEqual(3);
    for (const e of pulls) {
      expect(Object.keys(e).sort()).toEqual(
        [
          "bytes",
          "component",
          "elapsedMs",
          "event",
          "image",
          "layers",
          "phase",
          "time",
          ...(e.phase === "end" ? ["ok"] : []),
        ].sort(),
      );
      expect(e.image).toBe(ref);
      expect(e.component).toBe(0);
    }
    const bytes = pulls.map((e) => e.bytes as number);
    expect(bytes).toEqual([...bytes].sort((a, b) => a - b));
    expect(bytes.at(-1)).toBeGreaterThan(1 << 20);
    expect(pulls.at(-1)?.ok).toBe(true);
    expect((pulls.at(-1)?.layers as number) >= 1).toBe(true);
    expect(names.indexOf("runtime")).toBeLessThan(names.indexOf("pull"));
    expect(names.lastIndexOf("pull")).toBeLessThan(names.indexOf("setup"));
  });
});
