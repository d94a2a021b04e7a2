// Checks the Shifter STAND-IN against the interface in docs/shifter-interface.md (sections 1 and
// 6), so the plugin's own tests cannot pass by agreeing with a loose fake. The grammar is checked
// against util-linux getopt(1), which uses the same glibc getopt_long engine as shifter.
import { execFileSync, spawn } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunResult, runProgram } from "../helpers/jobrt.js";
// @ts-expect-error: plain JS module of the stand-in, typed by JSDoc only
import { getoptLong } from "./standin/getopt.mjs";
// @ts-expect-error: plain JS module of the stand-in, typed by JSDoc only
import { SHIFTER_LONGOPTS, SHIFTER_OPTSTRING } from "./standin/options.mjs";
import { type StandinSite, TASK_GID, TASK_UID, createStandinSite, imageId } from "./standin/layout.js";

const LONG = "help,verbose,image:,volume:,module:,env:,env-file:,clearenv,workdir::,entrypoint::,entry::";

type Parsed = { options: { opt: string; name?: string; arg: string | null }[]; rest: string[]; error?: string };

/** util-linux getopt's normalised output for argv (the oracle). */
function oracle(args: string[]): { out: string; err: string; code: number } {
  try {
    const out = execFileSync("getopt", ["-o", SHIFTER_OPTSTRING, "-l", LONG, "-n", "shifter", "--", ...args], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    });
    return { out: out.trim(), err: "", code: 0 };
  } catch (error) {
    const e = error as { stderr: string; status: number };
    return { out: "", err: e.stderr.split("\n")[0] ?? "", code: e.status };
  }
}

const sq = (s: string) => `'${s.replace(/'/g, "'\\''")}'`;
const shorts = new Map([
  ["h", "no"],
  ["n", "no"],
  ["v", "no"],
  ["V", "req"],
  ["i", "req"],
  ["e", "req"],
  ["E", "no"],
  ["w", "opt"],
  ["m", "req"],
]);

/** The stand-in parser's result in getopt(1)'s output format. */
function standinNormalised(args: string[]): { out: string; err: string; code: number } {
  const r = getoptLong("shifter", args, SHIFTER_OPTSTRING, SHIFTER_LONGOPTS) as Parsed;
  if (r.error) return { out: "", err: r.error, code: 1 };
  const parts: string[] = [];
  for (const o of r.options) {
    if (o.name) {
      parts.push(`--${o.name}`);
      const kind = ["help", "verbose", "clearenv"].includes(o.name) ? "no" : "arg";
      if (kind === "arg") parts.push(sq(o.arg ?? ""));
    } else {
      parts.push(`-${o.opt}`);
      if (shorts.get(o.opt) !== "no") parts.push(sq(o.arg ?? ""));
    }
  }
  parts.push("--", ...r.rest.map(sq));
  return { out: parts.join(" "), err: "", code: 0 };
}

describe("stand-in grammar = glibc getopt_long (util-linux getopt as oracle)", () => {
  // shifter-interface.md 1.1 grammar table, including its traps.
  const table: string[][] = [
    ["--image=docker:ubuntu:22.04", "--", "ls", "-l"],
    ["--image", "docker:ubuntu", "ls"],
    ["-i", "docker:x", "-V", "/a:/b", "-V/c:/d:ro", "echo"],
    ["-idocker:x", "echo"],
    ["--workdir", "/tmp", "ls"], // bare workdir; "/tmp" becomes the command
    ["--workdir=/tmp", "ls"],
    ["-w/tmp", "ls"],
    ["-w", "/tmp", "ls"],
    ["--entrypoint", "/bin/x"],
    ["--entrypoint=/bin/x -v", "a"],
    ["--entry=/bin/x"],
    ["--imag=docker:x", "--volu=/a:/b", "cmd"], // unambiguous prefixes
    ["--e", "x"], // ambiguous
    ["--env", "A=1", "--env-file=/f", "-eB=2", "cmd"],
    ["--clearenv=1"],
    ["-E", "-v", "-n", "-vEn", "cmd"],
    ["--module=gpu,mpich", "-m", "none", "cmd"],
    ["ls", "--image=x"], // stops at the first non-option
    ["--", "--image=x"],
    ["-x"],
    ["--bogus"],
    ["--bogus=1"],
    ["-i"],
    ["--image"],
    ["-", "x"],
    ["-vi", "docker:x", "--", "-", "--"],
    ["--help"],
    ["-h", "--verbose"],
  ];
  for (const args of table) {
    it(JSON.stringify(args), () => {
      const expected = oracle(args);
      const actual = standinNormalised(args);
      expect(actual.code).toBe(expected.code === 0 ? 0 : 1);
      if (expected.code === 0) expect(actual.out).toBe(expected.out);
      else expect(actual.err).toBe(expected.err);
    });
  }

  it("differs from util-linux only where the spec says: --entr picks the entrypoint option", () => {
    // glibc treats --entrypoint and --entry as one option (same flag and value), util-linux does not.
    expect(oracle(["--entr=/x"]).code).toBe(1);
    expect(standinNormalised(["--entr=/x"]).out).toBe("--entrypoint '/x' --");
  });
});

let site: StandinSite;
const BUSYBOX = "docker:busybox:latest";

beforeAll(() => {
  site = createStandinSite({
    udiRoot: [
      "module_gpu_siteEnv=CUDA_VISIBLE=all MODVAR=module",
      "module_gpu_siteEnvPrepend=PATH=/opt/udiImage/modules/gpu/bin",
      "module_mpich_siteEnvAppend=LIBS=/mpich",
      "module_mpich_conflict=openmpi",
      "module_openmpi_siteEnv=MPI=openmpi",
      "module_off_enabled=0",
      "module_hookfail_userhook=/bin/false",
      "siteEnvAppend=LIBS=/site",
    ],
  });
  site.addImage(BUSYBOX, {
    dirs: ["data", "deep/existing"],
    env: ["IMGVAR=image", "MODVAR=image", "EMPTYVAR="],
    workdir: "/deep",
  });
  site.addImage("docker:private:1", { userAcl: [1234], groupAcl: [4321] });
  site.addImage("docker:entry:1", { entry: "/bin/echo entry", cmd: "from-cmd" });
  site.addImage("docker:warn:1", { extraMeta: ["USER: someone"] });
  mkdirSync(join(site.siteHome, "work"), { recursive: true });
  chownSync(join(site.siteHome, "work"), TASK_UID, TASK_GID);
  writeFileSync(join(site.siteHome, "work/input.txt"), "from-host\n");
});
afterAll(() => site?.remove());

function shifter(
  args: string[],
  env: Record<string, string> = {},
  opts: { uid?: number; cwd?: string } = {},
): Promise<RunResult> {
  return runProgram([site.shifter, ...args], {
    uid: opts.uid ?? TASK_UID,
    gid: opts.uid === 0 ? 0 : TASK_GID,
    cwd: opts.cwd ?? "/tmp",
    env: { PATH: "/usr/bin:/bin", ...env },
  });
}

describe("stand-in shifter: behaviour (shifter-interface.md 1.2-1.8)", () => {
  it("runs the command in the image as the caller, cwd kept, status passed through", async () => {
    const r = await shifter([
      `--image=${BUSYBOX}`,
      "--",
      "sh",
      "-c",
      "id -u; id -g; cat /etc/jobrt-image; pwd; exit 7",
    ]);
    expect(r).toMatchObject({ code: 7, stdout: `${TASK_UID}\n${TASK_GID}\n${BUSYBOX}\n/tmp\n`, stderr: "" });
  });

  it("--help prints on stdout and exits 0; a parse error prints getopt's message, Missing an argument!, usage on stdout, exit 1", async () => {
    const help = await shifter(["--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/Usage:/);
    const bad = await shifter(["--bogus"]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toBe(`${site.shifter}: unrecognized option '--bogus'\nMissing an argument!\n`);
    expect(bad.stdout).toMatch(/^\nUsage:\nshifter /);
  });

  it("bare --workdir takes no separate argument: the next word becomes the command", async () => {
    const r = await shifter([`--image=${BUSYBOX}`, "--workdir", "/tmp", "ls"]);
    expect(r.code).toBe(127);
    expect(r.stderr).toBe(`${site.shifter}: /tmp: Permission denied\n`);
    const attached = await shifter([`--image=${BUSYBOX}`, "--workdir=/data", "pwd"]);
    expect(attached).toMatchObject({ code: 0, stdout: "/data\n" });
    const bare = await shifter([`--image=${BUSYBOX}`, "--workdir", "--", "pwd"]);
    expect(bare).toMatchObject({ code: 0, stdout: "/deep\n" });
  });

  it("a missing cwd stays in / with shifter's warning; a missing command is 127 with argv0: cmd: error", async () => {
    const r = await shifter([`--image=${BUSYBOX}`, "pwd"], {}, { cwd: "/work" });
    expect(r).toMatchObject({
      code: 0,
      stdout: "/\n",
      stderr: "Failed to switch to working dir: /work, staying in /\n",
    });
    const missing = await shifter([`--image=${BUSYBOX}`, "no-such-cmd"]);
    expect(missing).toMatchObject({ code: 127, stderr: `${site.shifter}: no-such-cmd: No such file or directory\n` });
  });

  it("stops at the first non-option and honours --", async () => {
    const r = await shifter([`--image=${BUSYBOX}`, "echo", "--image=x", "-V", "y"]);
    expect(r).toMatchObject({ code: 0, stdout: "--image=x -V y\n" });
  });

  it("silently filters image names (why the plugin must reject them)", async () => {
    const r = await shifter(["--image=docker:busy box:lat$est", "cat", "/etc/jobrt-image"]);
    expect(r).toMatchObject({ code: 0, stdout: `${BUSYBOX}\n` });
  });

  it("takes the image from SHIFTER_IMAGETYPE+SHIFTER_IMAGE only as a pair, CLI first", async () => {
    const id = imageId(BUSYBOX);
    const pair = await shifter(["cat", "/etc/jobrt-image"], { SHIFTER_IMAGETYPE: "id", SHIFTER_IMAGE: id });
    expect(pair).toMatchObject({ code: 0, stdout: `${BUSYBOX}\n` });
    const half = await shifter(["true"], { SHIFTER_IMAGE: id });
    expect(half.code).toBe(1);
    expect(half.stderr).toBe("No image specified, or specified incorrectly!\n");
    const spank = await shifter(["cat", "/etc/jobrt-image"], {
      SLURM_SPANK_SHIFTER_IMAGETYPE: "id",
      SLURM_SPANK_SHIFTER_IMAGE: id,
    });
    expect(spank.stdout).toBe(`${BUSYBOX}\n`);
    const cli = await shifter(["--image=docker:entry:1", "cat", "/etc/jobrt-image"], {
      SHIFTER_IMAGETYPE: "id",
      SHIFTER_IMAGE: id,
    });
    expect(cli.stdout).toBe("docker:entry:1\n");
  });

  it("uses SHIFTER_VOLUME unless a --volume is given, which discards it", async () => {
    const fromEnv = await shifter([`--image=${BUSYBOX}`, "cat", "/data/input.txt"], {
      SHIFTER_VOLUME: "/home/work:/data",
    });
    expect(fromEnv).toMatchObject({ code: 0, stdout: "from-host\n", stderr: "" });
    const cli = await shifter(
      [`--image=${BUSYBOX}`, "--volume=/home/work:/other", "sh", "-c", "ls /data; cat /other/input.txt"],
      { SHIFTER_VOLUME: "/home/work:/data" },
    );
    expect(cli).toMatchObject({ code: 0, stdout: "from-host\n" });
  });

  it("refuses to run as root", async () => {
    const r = await shifter([`--image=${BUSYBOX}`, "true"], {}, { uid: 0 });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe("Failed to lookup username or attempted to run as root.\n\n");
  });

  it("fails lookups, missing ids and ACLs with shifter's messages", async () => {
    const miss = await shifter(["--image=docker:nope", "true"]);
    expect(miss.code).toBe(1);
    expect(miss.stderr).toBe("FAILED to lookup docker image nope\n");
    expect(miss.stdout).toMatch(/Usage:/);
    const noMeta = await shifter([`--image=id:${"f".repeat(64)}`, "true"]);
    expect(noMeta).toMatchObject({ code: 1, stderr: "FAILED to find requested image.\n" });
    // The ACL'd image is hidden from lookup; by id, the .meta ACL refuses it.
    expect((await shifter(["--image=docker:private:1", "true"])).stderr).toBe(
      "FAILED to lookup docker image private:1\n",
    );
    const acl = await shifter([`--image=id:${imageId("docker:private:1")}`, "true"]);
    expect(acl).toMatchObject({ code: 1, stderr: "FAILED permission denied to image\n" });
    const warn = await shifter(["--image=docker:warn:1", "echo", "ran"]);
    expect(warn).toMatchObject({ code: 0, stdout: "WARNING: Couldn't understand key: USER\nran\n" });
  });

  const volumeCases: [string, string][] = [
    ["/home/work:/etc", "Invalid Volume Map: /home/work:/etc, aborting! 1"],
    ["/home/work:/var/lib", "Invalid Volume Map: /home/work:/var/lib, aborting! 1"],
    ["/home/work:/opt", "Invalid Volume Map: /home/work:/opt, aborting! 1"],
    ["/home/work:/opt/udiImage/x", "Invalid Volume Map: /home/work:/opt/udiImage/x, aborting! 1"],
    ["home/work:/data", "Invalid Volume Map: home/work:/data, aborting! 1"],
    ["/home/../etc:/data", "Invalid Volume Map: /home/../etc:/data, aborting! 1"],
    ["/home/work:/data:rec", "Invalid Volume Map: /home/work:/data:rec, aborting! 2"],
    ["/home/work:/data:ro:RO", "Invalid Volume Map: /home/work:/data:ro:RO, aborting! 3"],
  ];
  for (const [map, message] of volumeCases) {
    it(`volume ${map}: ${message.split(",").at(-1)}`, async () => {
      const r = await shifter([`--image=${BUSYBOX}`, `--volume=${map}`, "true"]);
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(`${message}\nFailed to parse volume map options\n`);
      expect(r.stdout).toMatch(/Usage:/);
    });
  }

  it("volume rules at mount time: from inside the container, to creatable only at top level, ro really read-only, /tmp shared", async () => {
    const unknown = await shifter([`--image=${BUSYBOX}`, "--volume=/home/work:/data:bogus", "true"]);
    expect(unknown.stderr).toBe(
      "Unknown flag: bogus\nInvalid mount flags specified: bogus\nFailed to parse volume map options\n",
    );
    const hostOnly = await shifter([`--image=${BUSYBOX}`, "--volume=/work:/data", "true"]);
    expect(hostOnly).toMatchObject({
      code: 1,
      stderr: `FAILED to find real path for volume "from": /work\nFAILED to setup user-requested mounts.\n`,
    });
    const nested = await shifter([`--image=${BUSYBOX}`, "--volume=/home/work:/deep/new/x", "true"]);
    expect(nested.stderr).toBe(
      'FAILED to create volume "to": /deep/new/x, cannot create mount points in that location\nFAILED to setup user-requested mounts.\n',
    );
    const top = await shifter([
      `--image=${BUSYBOX}`,
      "--volume=/home/work:/newtop:ro",
      "sh",
      "-c",
      "cat /newtop/input.txt; touch /newtop/x 2>/dev/null || echo ro-refused; touch /rootfile 2>/dev/null || echo root-ro",
    ]);
    expect(top).toMatchObject({ code: 0, stdout: "from-host\nro-refused\nroot-ro\n" });
    const rw = await shifter([
      `--image=${BUSYBOX}`,
      "--volume=/home/work:/data",
      "sh",
      "-c",
      "echo written > /data/out.txt; echo tmp > /tmp/standin-shared-$$; echo $$",
    ]);
    expect(rw.code).toBe(0);
    expect(readFileSync(join(site.siteHome, "work/out.txt"), "utf8")).toBe("written\n");
    const shared = `/tmp/standin-shared-${rw.stdout.trim()}`;
    expect(existsSync(shared)).toBe(true);
    rmSync(shared);
  });

  it("assembles the environment in shifter's order and drops setuid-unsafe variables", async () => {
    const r = await shifter(
      [`--image=${BUSYBOX}`, "--module=gpu,mpich", "--env=CLI=cli", "--env=IMGVAR=cli", "--env=MODVAR=cli", "/bin/env"],
      { CALLER: "caller", IMGVAR: "caller", LIBS: "/caller", LD_LIBRARY_PATH: "/host/lib", TMPDIR: "/host/tmp" },
    );
    expect(r.code).toBe(0);
    const env = Object.fromEntries(
      r.stdout
        .trim()
        .split("\n")
        .map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]),
    );
    expect(env).toMatchObject({
      CALLER: "caller",
      IMGVAR: "cli",
      MODVAR: "module",
      CLI: "cli",
      CUDA_VISIBLE: "all",
      LIBS: "/caller:/mpich:/site",
      PATH: "/opt/udiImage/modules/gpu/bin:/usr/bin:/bin",
      SHIFTER_RUNTIME: "1",
      SHIFTER_IMAGE: imageId(BUSYBOX),
      SHIFTER_IMAGEREQUEST: BUSYBOX,
    });
    expect(env).not.toHaveProperty("LD_LIBRARY_PATH");
    expect(env).not.toHaveProperty("TMPDIR");
    expect(env).not.toHaveProperty("EMPTYVAR");
    const clear = await shifter([`--image=${BUSYBOX}`, "--clearenv", "--env=PATH=/bin", "/bin/env"], {
      CALLER: "caller",
    });
    expect(clear.stdout.split("\n").filter(Boolean).sort()).toEqual(
      [
        "IMGVAR=image",
        "LIBS=/site",
        "MODVAR=image",
        "PATH=/bin",
        `SHIFTER_IMAGE=${imageId(BUSYBOX)}`,
        `SHIFTER_IMAGEREQUEST=${BUSYBOX}`,
        "SHIFTER_RUNTIME=1",
      ].sort(),
    );
  });

  it("rejects bad --env values and module selections with shifter's messages", async () => {
    for (const bad of ["NOEQ", "=x", "EMPTY="]) {
      const r = await shifter([`--image=${BUSYBOX}`, `--env=${bad}`, "true"]);
      expect(r.code).toBe(1);
    }
    const none = await shifter([`--image=${BUSYBOX}`, "--module=none,gpu", "true"]);
    expect(none.stderr).toBe("Unknown shifter module: none\nInvalid shifter module selection: none,gpu\n");
    const off = await shifter([`--image=${BUSYBOX}`, "--module=off", "true"]);
    expect(off.stderr).toBe(
      "WARNING: module off is not enabled for use.\nUnknown shifter module: off\nInvalid shifter module selection: off\n",
    );
    const clash = await shifter([`--image=${BUSYBOX}`, "--module=mpich,openmpi", "true"]);
    expect(clash.stderr).toBe(
      "ERROR: cannot load conflicting modules mpich and openmpi\nInvalid shifter module selection: mpich,openmpi\n",
    );
    const hook = await shifter([`--image=${BUSYBOX}`, "--module=hookfail", "echo", "never"]);
    expect(hook).toMatchObject({ code: 1, stdout: "", stderr: "Failed to setup module hookfail\n" });
  });

  it("entrypoint rules: bare uses ENTRY + CMD, =X replaces it, none defined is fatal", async () => {
    expect((await shifter(["--image=docker:entry:1", "--entrypoint"])).stdout).toBe("entry from-cmd\n");
    expect((await shifter(["--image=docker:entry:1", "--entrypoint", "--", "args"])).stdout).toBe("entry args\n");
    expect((await shifter(["--image=docker:entry:1", "--entrypoint=/bin/echo", "x"])).stdout).toBe("x\n");
    const none = await shifter([`--image=${BUSYBOX}`, "--entrypoint"]);
    expect(none).toMatchObject({ code: 1, stderr: "Image does not have a defined entrypoint.\n" });
  });

  it("refuses a udiRoot.conf with an unknown key, a missing required key, or group/world write", async () => {
    const original = readFileSync(site.udiRootConf, "utf8");
    const variants = [`${original}bogusKey=1\n`, original.replace(/^imagePath=.*\n/m, ""), original];
    try {
      for (const [i, text] of variants.entries()) {
        writeFileSync(site.udiRootConf, text);
        chmodSync(site.udiRootConf, i === 2 ? 0o664 : 0o644);
        const r = await shifter([`--image=${BUSYBOX}`, "true"]);
        expect(r).toMatchObject({ code: 1, stdout: "", stderr: "FAILED to parse udiRoot configuration.\n" });
      }
    } finally {
      writeFileSync(site.udiRootConf, original);
      chmodSync(site.udiRootConf, 0o644);
    }
    expect((await shifter([`--image=${BUSYBOX}`, "true"])).code).toBe(0);
  });

  it("runs local: images without checking allowLocalChroot, as Shifter 22.02 does (so the plugin must)", async () => {
    const r = await shifter([
      `--image=local:${site.imagePath}/${imageId("docker:entry:1")}`,
      "cat",
      "/etc/jobrt-image",
    ]);
    expect(r).toMatchObject({ code: 0, stdout: "docker:entry:1\n" });
  });

  it("reads --env-file inside the container after --env is parsed, keeping quotes, skipping comments", async () => {
    writeFileSync(join(site.siteHome, "work/vars.env"), '# comment\n\nFROM_FILE="quoted"\nCLI=file\n');
    const r = await shifter([`--image=${BUSYBOX}`, "--env-file=/home/work/vars.env", "--env=CLI=cli", "/bin/env"]);
    expect(r).toMatchObject({ code: 0, stderr: "" });
    expect(r.stdout.split("\n")).toEqual(expect.arrayContaining(['FROM_FILE="quoted"', "CLI=cli"]));
    // A host path the container does not see (the file is read inside the root, as the user).
    const missing = await shifter([`--image=${BUSYBOX}`, "--env-file=/work/main/package.json", "true"]);
    expect(missing).toMatchObject({ code: 1, stderr: "Failed to read env file: /work/main/package.json\n" });
  });

  it("falls back to SHIFTER_IMAGEREQUEST when no type/tag pair is set", async () => {
    const r = await shifter(["cat", "/etc/jobrt-image"], { SHIFTER_IMAGEREQUEST: "docker:entry:1" });
    expect(r).toMatchObject({ code: 0, stdout: "docker:entry:1\n" });
  });

  it("the task keeps shifter's pid; signals reach it and its death by signal is mirrored", async () => {
    const child = spawn(site.shifter, [`--image=${BUSYBOX}`, "sh", "-c", "echo $$; exec sleep 30"], {
      uid: TASK_UID,
      gid: TASK_GID,
      cwd: "/tmp",
      env: { PATH: "/usr/bin:/bin" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    try {
      const pid = await new Promise<string>((resolve) =>
        child.stdout.once("data", (d: Buffer) => resolve(d.toString().trim())),
      );
      expect(Number(pid)).toBe(child.pid);
      const done = new Promise<[number | null, string | null]>((resolve) =>
        child.on("close", (code, signal) => resolve([code, signal])),
      );
      child.kill("SIGTERM");
      expect(await done).toEqual([null, "SIGTERM"]);
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    }
    const self = await shifter([`--image=${BUSYBOX}`, "sh", "-c", "kill -INT $$"]);
    expect(self.signal).toBe("SIGINT");
  });
});

describe("stand-in shifterimg (shifter-interface.md 1.9)", () => {
  const img = (args: string[], uid = TASK_UID) =>
    runProgram([site.shifterimg, ...args], { uid, gid: TASK_GID, env: { PATH: "/usr/bin:/bin" } });

  it("lookup prints exactly one id line and exits 0; a miss is silent with exit 1", async () => {
    expect(await img(["lookup", BUSYBOX])).toMatchObject({ code: 0, stdout: `${imageId(BUSYBOX)}\n`, stderr: "" });
    expect(await img(["lookup", "docker:busybox"])).toMatchObject({ code: 0, stdout: `${imageId(BUSYBOX)}\n` });
    expect(await img(["lookup", "docker:nothere:1"])).toMatchObject({ code: 1, stdout: "", stderr: "" });
    expect((await img(["-v", "lookup", "docker:nothere:1"])).stdout).toMatch(/^Got response: 404\n/);
    expect(await img(["lookup", "docker:private:1"])).toMatchObject({ code: 1, stdout: "" });
  });

  it("accepts only the long --user/--group forms; -u is an invalid option", async () => {
    const r = await img(["-u", "nobody", "lookup", BUSYBOX]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`${site.shifterimg}: invalid option -- 'u'\n`);
    expect((await img(["--user=nobody", "lookup", BUSYBOX])).code).toBe(0);
  });

  it("pull prints status lines and exits 0 even on FAILURE; a READY pull makes lookup succeed", async () => {
    site.addPullable("docker:fresh:1", "READY");
    site.addPullable("docker:broken:1", "FAILURE");
    const bad = await img(["pull", "docker:broken:1"]);
    expect(bad.code).toBe(0);
    expect(bad.stdout).toMatch(
      /\r\x1b\[2K\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d Pulling Image: docker:broken:1, status: PENDING/,
    );
    expect(bad.stdout).toMatch(/status: FAILURE\n$/);
    expect((await img(["lookup", "docker:broken:1"])).code).toBe(1);
    const good = await img(["-v", "pull", "docker:fresh:1"]);
    expect(
      good.stdout
        .split("\n")
        .filter(Boolean)
        .map((l) => l.replace(/^\S+ /, "")),
    ).toEqual([
      "Pulling Image: docker:fresh:1, status: PENDING",
      "Pulling Image: docker:fresh:1, status: PULLING",
      "Pulling Image: docker:fresh:1, status: EXAMINATION",
      "Pulling Image: docker:fresh:1, status: CONVERSION",
      "Pulling Image: docker:fresh:1, status: TRANSFER",
      "Pulling Image: docker:fresh:1, status: READY",
    ]);
    expect((await img(["lookup", "docker:fresh:1"])).stdout).toBe(`${imageId("docker:fresh:1")}\n`);
  });

  it("images lists readable images sorted by tag in shifterimg's columns", async () => {
    const r = await img(["images"]);
    const rows = r.stdout.split("\n").filter(Boolean);
    const tags = rows.map((l) => l.trim().split(/\s+/).at(-1));
    expect(tags).toEqual([...tags].sort());
    expect(rows[0]).toMatch(/^standin {4}docker {5}READY {4}[0-9a-f]{10} {3}\S+ \S+/);
    expect(tags).not.toContain("private:1");
  });

  it("reports an unreachable gateway", async () => {
    const saved = readFileSync(site.gatewayFile, "utf8");
    execFileSync("mv", [site.gatewayFile, `${site.gatewayFile}.away`]);
    try {
      expect(await img(["lookup", BUSYBOX])).toMatchObject({
        code: 1,
        stdout: "ERROR: failed to contact the image gateway.\n",
      });
    } finally {
      execFileSync("mv", [`${site.gatewayFile}.away`, site.gatewayFile]);
    }
    expect(readFileSync(site.gatewayFile, "utf8")).toBe(saved);
  });
});
