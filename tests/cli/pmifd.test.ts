/**
 * `jobrt exec` under `srun --mpi=pmi2` (issue 37): Slurm's PMI-2 socket, named by PMI_FD, reaches
 * the task at its own number through runtime none, at fd 3 into an oci container (runc
 * --preserve-fds), and anything else PMI_FD could
 * name is refused in one line before a task starts (docs/mpi.md). The socket here is a real one
 * (Node's "pipe" stdio is a socketpair); tests/slurm/mpi.test.ts has real MPI under real Slurm.
 */
import { spawn } from "node:child_process";
import { closeSync, mkdirSync, openSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { busyboxBundle } from "../helpers/fixtures.js";
import { jobrtBin, tempDir } from "../helpers/jobrt.js";

const STEP = { SLURM_JOB_ID: "3737", SLURM_STEP_ID: "0", SLURM_PROCID: "0", SLURM_LOCALID: "0", SLURM_NTASKS: "1" };

function confDir(): string {
  const dir = tempDir("jobrt-pmifd-");
  mkdirSync(join(dir, "spool"));
  writeFileSync(join(dir, "jobrt.conf"), `SpoolDir=${join(dir, "spool")}\n`);
  return dir;
}

function text(stream: Readable | null | undefined): Promise<string> {
  return new Promise((resolve) => {
    let data = "";
    if (!stream) return resolve("");
    stream.setEncoding("utf8").on("data", (d: string) => {
      data += d;
    });
    stream.once("close", () => resolve(data));
  });
}

/**
 * `jobrt exec` with `fd3` as its descriptor `at` ("pipe": a socket whose other end is `socket`);
 * `conf`: an oci.conf for its conf dir.
 */
async function exec(
  args: string[],
  env: Record<string, string>,
  fd3: "pipe" | number | "ignore",
  { at = 3, conf }: { at?: number; conf?: string } = {},
) {
  const dir = confDir();
  if (conf !== undefined) writeFileSync(join(dir, "oci.conf"), conf);
  const stdio: ("pipe" | "ignore" | number)[] = ["ignore", "pipe", "pipe"];
  while (stdio.length < at) stdio.push("ignore");
  stdio[at] = fd3;
  const child = spawn(process.execPath, ["--", jobrtBin, "exec", ...args], {
    env: { ...process.env, JOBRT_CONF_DIR: dir, ...STEP, ...env },
    stdio,
  });
  const socket = fd3 === "pipe" ? (child.stdio[at] as Readable) : undefined;
  const [stdout, stderr, fromTask, code] = await Promise.all([
    text(child.stdout),
    text(child.stderr),
    text(socket),
    new Promise<number | null>((r) => child.once("close", (c) => r(c))),
  ]);
  return { stdout, stderr, fromTask, code };
}

const SHOW = 'readlink /proc/self/fd/$PMI_FD | cut -d: -f1; echo "rank $PMI_RANK" >&$PMI_FD';

describe("jobrt exec: Slurm's PMI-2 socket (PMI_FD)", () => {
  it("reaches a runtime none task at the number PMI_FD names, as the socket it is", async () => {
    const r = await exec(["--runtime", "none", "--", "sh", "-c", SHOW], { PMI_FD: "3", PMI_RANK: "0" }, "pipe");
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("socket\n");
    // What the task wrote to its PMI_FD reached the other end: the very socket, not a copy of a file.
    expect(r.fromTask).toBe("rank 0\n");
  }, 60_000);

  it("stays closed in the task when PMI_FD is not set (fd 3 inherited all the same)", async () => {
    const r = await exec(
      ["--runtime", "none", "--", "sh", "-c", "[ -e /proc/self/fd/3 ] && readlink /proc/self/fd/3; true"],
      {},
      "pipe",
    );
    expect(r.code).toBe(0);
    expect(r.stdout).not.toMatch(/socket/);
  }, 60_000);

  it.each([
    ["abc", "pipe", 'PMI_FD="abc" is not a descriptor number above 2'],
    ["1", "pipe", 'PMI_FD="1" is not a descriptor number above 2'],
    ["900", "pipe", "PMI_FD=900 names no open descriptor"],
  ] as const)(
    "refuses PMI_FD=%s in one line, starting no task",
    async (value, fd3, message) => {
      const r = await exec(["--runtime", "none", "--", "sh", "-c", "echo ran"], { PMI_FD: value }, fd3);
      expect(r.code).toBe(1);
      expect(r.stdout).toBe("");
      expect(r.stderr.trimEnd().split("\n")).toHaveLength(1);
      expect(r.stderr).toContain(`MPI wire-up: ${message}`);
    },
    60_000,
  );

  it("refuses a PMI_FD that is a file, not a socket", async () => {
    const dir = tempDir("jobrt-pmifd-file-");
    const fd = openSync(join(dir, "not-a-socket"), "w");
    try {
      const r = await exec(["--runtime", "none", "--", "sh", "-c", "echo ran"], { PMI_FD: "3" }, fd);
      expect(r.code).toBe(1);
      expect(r.stdout).toBe("");
      expect(r.stderr).toMatch(/^jobrt: MPI wire-up: PMI_FD=3 is not a socket, so it is not Slurm's PMI-2 connection/);
    } finally {
      closeSync(fd);
    }
  }, 60_000);

  it.each([5, 3])(
    "reaches an oci container from PMI_FD=%i at fd 3 with PMI_FD=3 (runc --preserve-fds), and no other descriptor does",
    async (at) => {
      const bundle = busyboxBundle(join(tempDir("jobrt-pmifd-bundle-"), "bundle"));
      const r = await exec(
        [
          "--runtime",
          "oci",
          "--container",
          bundle,
          "--",
          "sh",
          "-c",
          `echo "PMI_FD=$PMI_FD"; ls /proc/self/fd; ${SHOW}`,
        ],
        { PMI_FD: String(at), PMI_RANK: "2" },
        "pipe",
        { at },
      );
      expect(r.stderr).toBe("");
      expect(r.code).toBe(0);
      // ls's own 0-2 and 3, and the directory it lists (4): nothing else of runc's or jobrt's.
      expect(r.stdout).toBe("PMI_FD=3\n0\n1\n2\n3\n4\nsocket\n");
      expect(r.fromTask).toBe("rank 2\n");
    },
    60_000,
  );

  it("refuses a runtime with neither pmi-fd nor pass-fds (shifter) before any container is made", async () => {
    const r = await exec(
      ["--runtime", "shifter", "--container", "busybox", "--", "sh", "-c", "echo ran"],
      { PMI_FD: "3" },
      "pipe",
    );
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain(
      `MPI wire-up: runtime shifter cannot pass Slurm's PMI-2 socket (PMI_FD=3) into its tasks (no "pmi-fd" or "pass-fds" capability)`,
    );
  }, 60_000);

  it.each([
    ["RunTimeRun", 'RunTimeRun="runc --root /run/runc run %n.%j.%s.%t -b %b"'],
    [
      "RunTimeCreate",
      'RunTimeCreate="runc --root /run/runc create %n.%j.%s.%t -b %b"\nRunTimeStart="runc --root /run/runc start %n.%j.%s.%t"\nRunTimeQuery="runc --root /run/runc state %n.%j.%s.%t"',
    ],
  ])(
    "refuses an oci.conf whose %s is the site's own command, in one line, before its container",
    async (key, run) => {
      const bundle = busyboxBundle(join(tempDir("jobrt-pmifd-bundle-"), "bundle"));
      const conf = `${run}\nRunTimeKill="runc --root /run/runc kill -a %n.%j.%s.%t"\nRunTimeDelete="runc --root /run/runc delete --force %n.%j.%s.%t"\n`;
      const r = await exec(
        ["--runtime", "oci", "--container", bundle, "--", "sh", "-c", "echo ran"],
        { PMI_FD: "3" },
        "pipe",
        {
          conf,
        },
      );
      expect(r.code).toBe(1);
      expect(r.stdout).toBe("");
      expect(r.fromTask).toBe("");
      expect(r.stderr.trimEnd().split("\n")).toHaveLength(1);
      expect(r.stderr).toContain(
        `MPI wire-up: runtime oci cannot pass Slurm's PMI-2 socket into the container: ${key} of `,
      );
    },
    60_000,
  );
});
