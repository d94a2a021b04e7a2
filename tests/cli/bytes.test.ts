/**
 * Arguments and environment are bytes: srun hands a task `\xff` as the byte 0xff and passes an
 * environment entry whatever its name (only `=` and NUL are special). jobrt does the same for
 * runtime none (run and exec), and runtime oci, whose config.json is JSON text, refuses a byte it
 * cannot carry in one line instead of altering it. Bash's $'\xff' makes the bytes: Node's own spawn
 * would write them as UTF-8.
 */
import { spawn } from "node:child_process";
import { readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { busyboxBundle } from "../helpers/fixtures.js";
import { jobrtBin, tempDir } from "../helpers/jobrt.js";

const SLURM_TASK = "SLURM_JOB_ID=4712 SLURM_STEP_ID=0 SLURM_PROCID=0 SLURM_LOCALID=0";

function site(oci = ""): { dir: string; spool: string } {
  const dir = tempDir("jobrt-bytes-");
  const spool = join(dir, "spool");
  writeFileSync(join(dir, "jobrt.conf"), `SpoolDir=${spool}\nKillWait=2\n`);
  if (oci) writeFileSync(join(dir, "oci.conf"), oci);
  return { dir, spool };
}

/** `jobrt <jobrtArgs>` from bash, so that $'...' in them are raw bytes; its output as bytes. */
function jobrtBytes(
  conf: string,
  prefix: string,
  jobrtArgs: string,
): Promise<{ code: number | null; stdout: Buffer; stderr: Buffer }> {
  const script = `exec ${prefix} '${process.execPath}' -- '${jobrtBin}' ${jobrtArgs}`;
  const child = spawn("bash", ["-c", script], {
    env: { ...process.env, JOBRT_CONF_DIR: conf },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  child.stdout.on("data", (d: Buffer) => out.push(d));
  child.stderr.on("data", (d: Buffer) => err.push(d));
  return new Promise((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout: Buffer.concat(out), stderr: Buffer.concat(err) }));
  });
}

describe.each([
  ["jobrt run", "", "run --runtime none"],
  ["jobrt exec", `env ${SLURM_TASK}`, "exec --runtime none"],
])("%s, runtime none: bytes reach the task unchanged", (_name, prefix, command) => {
  it("an argument 0xff arrives as 0xff, not as U+FFFD", async () => {
    const s = site();
    const r = await jobrtBytes(s.dir, prefix, `${command} printf '%s|' $'\\xff' $'a\\xc3(b' 'é'`);
    expect(r.code, String(r.stderr)).toBe(0);
    expect(r.stdout).toEqual(Buffer.from([0xff, 0x7c, 0x61, 0xc3, 0x28, 0x62, 0x7c, 0xc3, 0xa9, 0x7c]));
  });

  it("a value 0xfe and a name with a space arrive as set (the task reads its own environ)", async () => {
    const s = site();
    const r = await jobrtBytes(s.dir, `${prefix} env 'A B=1' X=$'\\xfe'`, `${command} cat /proc/self/environ`);
    expect(r.code, String(r.stderr)).toBe(0);
    const entries = r.stdout.toString("latin1").split("\0");
    expect(entries).toContain("A B=1");
    expect(entries).toContain("X=\xfe");
  });
});

describe("runtime oci: what config.json cannot carry is refused, not altered", () => {
  let bundle: string;
  const oci =
    'RunTimeQuery="runc --root /run/runc state %n.%u.%j.%s.%t"\nRunTimeRun="runc --root /run/runc run %n.%u.%j.%s.%t -b %b"\nRunTimeKill="runc --root /run/runc kill -a %n.%u.%j.%s.%t"\nRunTimeDelete="runc --root /run/runc delete --force %n.%u.%j.%s.%t"\n';
  beforeAll(() => {
    bundle = busyboxBundle(join(tempDir("jobrt-bytes-bundle-"), "bundle"));
  });

  it("an argument 0xff: one line naming the task and the argument, exit 1, nothing left in SpoolDir", async () => {
    const s = site(oci);
    const r = await jobrtBytes(s.dir, "", `run --runtime oci --container '${bundle}' printf '%s' $'\\xff'`);
    expect(r.code).toBe(1);
    const stderr = r.stderr.toString("utf8");
    expect(stderr).toMatch(
      /^jobrt: runtime runtime\/oci run failed: task 0: argv\[2\] holds bytes that are not UTF-8, which runtime oci cannot pass \(config\.json is JSON text\); use runtime none for it, or pass the bytes in a file\n/,
    );
    expect(r.stdout.length).toBe(0);
    // Nothing ran (printf would have written the byte) and runtime oci left no step dir.
    expect(readdirSync(s.spool).filter((f) => f.startsWith("oci-"))).toEqual([]);
  });

  it("a --container-env value 0xfe is refused the same way, naming the option and the variable", async () => {
    const s = site(oci);
    const r = await jobrtBytes(s.dir, "", `run --runtime oci --container '${bundle}' --container-env Y=$'\\xfe' true`);
    expect(r.code).toBe(1);
    expect(r.stderr.toString("utf8")).toMatch(
      /^jobrt: runtime runtime\/oci run failed: task 0: --container-env "Y" holds bytes that are not UTF-8/,
    );
  });

  it("a variable name with a space and UTF-8 arguments pass into the container", async () => {
    const s = site(oci);
    const r = await jobrtBytes(
      s.dir,
      "env 'A B=1'",
      `run --runtime oci --container '${bundle}' cat /proc/self/environ`,
    );
    expect(r.code, r.stderr.toString()).toBe(0);
    expect(r.stdout.toString("utf8").split("\0")).toContain("A B=1");
  });
});
