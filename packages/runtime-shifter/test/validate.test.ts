import { chmodSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ContainerRequest, StepRecord } from "@jobrt/core";
import { isJobrtError } from "@jobrt/core";
import { afterAll, describe, expect, it } from "vitest";
import { type ShifterConf, loadShifterConf } from "../src/conf.js";
import { validateRequest } from "../src/request.js";
import { parseUdiRootConf } from "../src/udiroot.js";
import { tempDir } from "../../../tests/helpers/tmp.js";

const udi = parseUdiRootConf(
  [
    "siteFs=/global/home:/home;/scratch:/scratch",
    "module_gpu_siteEnv=CUDA=1",
    "module_mpich_siteEnvPrepend=LD_LIBRARY_PATH=/opt/udiImage/modules/mpich/lib",
    "module_openmpi_conflict=mpich",
    "module_old_enabled=0",
  ].join("\n"),
  "/etc/shifter/udiRoot.conf",
);

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
function scratch(): string {
  const dir = tempDir("shifter-conf-");
  dirs.push(dir);
  return dir;
}

function conf(lines: string[] = []): ShifterConf {
  const dir = scratch();
  writeFileSync(join(dir, "shifter.conf"), `${lines.join("\n")}\n`);
  chmodSync(join(dir, "shifter.conf"), 0o644);
  return loadShifterConf(dir, process.getuid?.() ?? 0);
}

function step(container: Partial<ContainerRequest>, extra: Partial<StepRecord> = {}): StepRecord {
  return {
    jobId: 1,
    stepId: 0,
    kind: "normal",
    runtime: "shifter",
    uid: 1000,
    gid: 1000,
    user: "u",
    home: "/home/u",
    cwd: "/home/u",
    argv: ["true"],
    env: {},
    tasks: [],
    totalTasks: 1,
    nodeId: 0,
    nnodes: 1,
    pty: false,
    container: { volumes: [], modules: [], env: [], clearEnv: false, options: {}, ...container },
    ...extra,
  };
}

function rejected(s: StepRecord, c = conf()): { code: string; message: string } {
  try {
    validateRequest(s, c, udi);
  } catch (error) {
    if (isJobrtError(error)) return { code: error.code, message: error.message };
    throw error;
  }
  throw new Error("request was accepted");
}

describe("image requests", () => {
  it("accepts the documented forms and canonicalises docker tags", () => {
    const c = conf();
    expect(validateRequest(step({ value: "docker:ubuntu:22.04" }), c, udi)?.image.canonical).toBe(
      "docker:ubuntu:22.04",
    );
    expect(validateRequest(step({ value: "docker:library/ubuntu" }), c, udi)?.image.canonical).toBe(
      "docker:library/ubuntu:latest",
    );
    const id = "a".repeat(64);
    expect(validateRequest(step({ value: `id:${id}` }), c, udi)?.image).toEqual({
      type: "id",
      tag: id,
      canonical: `id:${id}`,
    });
    expect(validateRequest(step({ value: "custom:myimage" }), c, udi)?.image.canonical).toBe("custom:myimage");
  });

  // Every one of these would be silently rewritten by Shifter into some other image name.
  const corpus: [string, RegExp][] = [
    ["docker:my image", /white space/],
    ["docker:ubuntu;rm -rf /", /white space|characters Shifter silently drops/],
    ["docker:a$(id)/b", /characters Shifter silently drops/],
    ["docker:ubuntu`id`", /characters Shifter silently drops/],
    ["docker:ubuntu;id", /characters Shifter silently drops/],
    ["docker:../../etc/passwd", /'\.\.'/],
    ["docker:a/../b", /'\.\.'/],
    ["docker:a//b", /empty path component/],
    ["docker:", /empty name/],
    ["", /is empty/],
    ["ubuntu:22.04", /has no image type/],
    ["id:abc", /64 lower-case hex/],
    [`id:${"A".repeat(64)}`, /64 lower-case hex/],
    ["local:/", /not allowed here/],
    ["docker:-rm", /must start with/],
    ["docker:a\nb", /white space/],
    ["docker:caf\u00e9", /characters Shifter silently drops/],
  ];
  for (const [image, rule] of corpus) {
    it(`rejects ${JSON.stringify(image)} naming --container and the rule`, () => {
      const r = rejected(step({ value: image }));
      expect(r.code).toBe("ERR_CONTAINER_IMAGE");
      expect(r.message).toMatch(/^--container /);
      expect(r.message).toMatch(rule);
    });
  }

  it("applies the site's image policy", () => {
    const c = conf([
      "ImageAllow=docker:library/*,docker:nersc/*",
      "ImageDeny=docker:nersc/bad*",
      "AllowedImageTypes=docker",
    ]);
    expect(validateRequest(step({ value: "docker:nersc/good:1" }), c, udi)?.image.canonical).toBe(
      "docker:nersc/good:1",
    );
    expect(rejected(step({ value: "docker:nersc/bad:1" }), c).message).toMatch(
      /denied by shifter.conf ImageDeny pattern "docker:nersc\/bad\*"/,
    );
    expect(rejected(step({ value: "docker:evil/x:1" }), c).message).toMatch(/not in shifter.conf ImageAllow/);
    expect(rejected(step({ value: `id:${"b".repeat(64)}` }), c).message).toMatch(/image type id is not allowed here/);
  });

  it("uses defaultImageType only when udiRoot.conf has one", () => {
    const withDefault = parseUdiRootConf("defaultImageType=docker", "/u.conf");
    expect(validateRequest(step({ value: "ubuntu:22.04" }), conf(), withDefault)?.image.canonical).toBe(
      "docker:ubuntu:22.04",
    );
  });

  it("allows local: only when both the site conf and udiRoot.conf allow it", () => {
    const local = parseUdiRootConf("allowLocalChroot=1", "/u.conf");
    const c = conf(["AllowedImageTypes=docker,local"]);
    expect(validateRequest(step({ value: "local:/" }), c, local)?.image).toMatchObject({ type: "local", tag: "/" });
    expect(() => validateRequest(step({ value: "local:/" }), c, udi)).toThrow(/allowLocalChroot=1/);
  });

  it("names shifter.conf:line when the default image is bad", () => {
    const c = conf(["# site default", `DefaultImage="docker:bad name"`]);
    const r = rejected(step({}), c);
    expect(r.message).toMatch(/shifter\.conf:2 DefaultImage "docker:bad name": contains white space/);
  });

  it("is not a Shifter step without an image, and refuses options without one", () => {
    expect(validateRequest({ ...step({}), container: undefined }, conf(), udi)).toBeUndefined();
    expect(rejected(step({ volumes: ["/home/a:/data"] })).message).toMatch(/without an image/);
  });

  it("refuses uid or gid 0", () => {
    expect(rejected(step({ value: "docker:x:1" }, { uid: 0 })).message).toMatch(/refuses to run as root/);
    expect(rejected(step({ value: "docker:x:1" }, { gid: 0 })).message).toMatch(/refuses to run as root/);
  });
});

describe("volumes", () => {
  it("accepts user volumes from siteFs sources with ro", () => {
    const r = validateRequest(
      step({ value: "docker:x:1", volumes: ["/home/u/data:/data:ro", "/scratch/run:/run-dir"] }),
      conf(),
      udi,
    );
    expect(r?.volumes).toEqual([
      { from: "/home/u/data", to: "/data", readOnly: true },
      { from: "/scratch/run", to: "/run-dir", readOnly: false },
    ]);
  });

  const corpus: [string, RegExp][] = [
    ["/home/a:/data;/home/b:/etc", /contains ';'/],
    ["/home/a,/home/b:/data", /characters Shifter silently drops/],
    ["/home/a b:/data", /white space/],
    ["/home/a:/data:ro,rec", /unknown flag/],
    ["/home/a:/data:rec", /for site mounts only/],
    ["/home/a:/data:slave", /for site mounts only/],
    ["/home/a:/data:ro:ro", /given twice/],
    ["/home/a:/data:rw", /unknown flag/],
    ["/home/../etc:/data", /contains '\.\.'/],
    ["/home/a:/data/../etc", /contains '\.\.'/],
    ["home/a:/data", /not an absolute path/],
    ["/home/a:data", /not an absolute path/],
    ["/home/a", /has no target/],
    ["/home/a:/etc", /under \/etc/],
    ["/home/a:/etc/ssh", /under \/etc/],
    ["/home/a:/etcetera", /under \/etc/],
    ["/home/a:/var", /under \/var/],
    ["/home/a:/var/lib/x", /under \/var/],
    ["/home/a:/opt/udiImage/x", /under \/opt\/udiImage/],
    ["/home/a:/opt", /is \/opt itself/],
    ["/home/a:/", /container's root/],
    ["/etc:/data", /not under an allowed source/],
    ["/home/a:/data:perNodeCache=size=10G", /not enabled here/],
    ["/home/a:/data=x", /characters Shifter silently drops/],
    ["/home/a@b:/data", /characters Shifter silently drops/],
    ['"/home/a":/data', /quotes/],
    ["/home/a/:/data", /not in normal form/],
    ["/home/a:/home", /would hide the site mount/],
  ];
  for (const [volume, rule] of corpus) {
    it(`rejects ${JSON.stringify(volume)}`, () => {
      const r = rejected(step({ value: "docker:x:1", volumes: [volume] }));
      expect(r.code).toBe("ERR_CONTAINER_REQUEST");
      expect(r.message).toMatch(/^--container-volume /);
      expect(r.message).toMatch(rule);
    });
  }

  it("allows exactly /var/tmp, and rejects duplicate targets and too many volumes", () => {
    expect(
      validateRequest(step({ value: "docker:x:1", volumes: ["/home/a:/var/tmp"] }), conf(), udi)?.volumes[0]?.to,
    ).toBe("/var/tmp");
    expect(rejected(step({ value: "docker:x:1", volumes: ["/home/a:/data", "/home/b:/data"] })).message).toMatch(
      /also the target of volume 1/,
    );
    const c = conf(["MaxVolumes=1"]);
    expect(rejected(step({ value: "docker:x:1", volumes: ["/home/a:/d1", "/home/b:/d2"] }), c).message).toMatch(
      /limit is 1/,
    );
  });

  it("applies site source and target policy and perNodeCache limits", () => {
    const c = conf([
      "AllowedVolumeSources=/scratch",
      "DeniedVolumeTargets=/data",
      "AllowPerNodeCache=yes",
      "MaxPerNodeCache=20G",
    ]);
    expect(rejected(step({ value: "docker:x:1", volumes: ["/home/a:/x"] }), c).message).toMatch(
      /AllowedVolumeSources: \/scratch/,
    );
    expect(rejected(step({ value: "docker:x:1", volumes: ["/scratch/a:/data/in"] }), c).message).toMatch(
      /DeniedVolumeTargets/,
    );
    const ok = validateRequest(
      step({ value: "docker:x:1", volumes: ["/x:/cache:perNodeCache=size=10G,fs=xfs"] }),
      c,
      udi,
    );
    expect(ok?.volumes[0]?.perNodeCache).toEqual({ options: "size=10G,fs=xfs", bytes: 10 * 1024 ** 3 });
    expect(rejected(step({ value: "docker:x:1", volumes: ["/x:/cache:perNodeCache=size=30G"] }), c).message).toMatch(
      /above the site limit/,
    );
    expect(
      rejected(step({ value: "docker:x:1", volumes: ["/x:/cache:perNodeCache=fs=ext4,size=1G"] }), c).message,
    ).toMatch(/fs="ext4" is not valid/);
  });
});

describe("modules, env, workdir, entrypoint, options", () => {
  it("validates modules against udiRoot.conf", () => {
    expect(validateRequest(step({ value: "docker:x:1", modules: ["gpu", "mpich"] }), conf(), udi)?.modules).toEqual([
      "gpu",
      "mpich",
    ]);
    expect(validateRequest(step({ value: "docker:x:1", modules: ["gpu,mpich"] }), conf(), udi)?.modules).toEqual([
      "gpu",
      "mpich",
    ]);
    expect(validateRequest(step({ value: "docker:x:1", modules: ["none"] }), conf(), udi)?.modules).toEqual(["none"]);
    expect(rejected(step({ value: "docker:x:1", modules: ["none,gpu"] })).message).toMatch(
      /'none' .* cannot be combined/,
    );
    expect(rejected(step({ value: "docker:x:1", modules: ["nope"] })).message).toMatch(
      /module nope is not defined in udiRoot.conf/,
    );
    expect(rejected(step({ value: "docker:x:1", modules: ["old"] })).message).toMatch(/disabled/);
    expect(rejected(step({ value: "docker:x:1", modules: ["mpich", "openmpi"] })).message).toMatch(
      /openmpi and mpich conflict/,
    );
    expect(rejected(step({ value: "docker:x:1", modules: ["my_mod"] })).message).toMatch(/no '_'/);
    expect(rejected(step({ value: "docker:x:1", modules: ["gpu,,mpich"] })).message).toMatch(/empty module name/);
    expect(rejected(step({ value: "docker:x:1", modules: ["gpu"] }), conf(["AllowedModules=mpich"])).message).toMatch(
      /AllowedModules: mpich/,
    );
  });

  const envCorpus: [string, RegExp][] = [
    ["1X=a", /not an identifier/],
    ["A-B=a", /not an identifier/],
    ["A B=a", /not an identifier/],
    ["$(id)=a", /not an identifier/],
    ["=a", /not an identifier/],
    ["NOVALUE", /must be NAME=VALUE/],
    ["EMPTY=", /empty value/],
    [`BIG=${"x".repeat(140 * 1024)}`, /argument limit/],
  ];
  for (const [entry, rule] of envCorpus) {
    it(`rejects --container-env ${JSON.stringify(entry.slice(0, 20))}`, () => {
      const r = rejected(step({ value: "docker:x:1", env: [entry] }));
      expect(r.message).toMatch(/^--container-env /);
      expect(r.message).toMatch(rule);
    });
  }

  it("checks workdir and entrypoint", () => {
    expect(
      validateRequest(step({ value: "docker:x:1", workdir: "/work dir", entrypoint: "image" }), conf(), udi),
    ).toMatchObject({ workdir: "/work dir", entrypoint: "image" });
    expect(rejected(step({ value: "docker:x:1", workdir: "relative/dir" })).message).toMatch(
      /^--container-workdir "relative\/dir": is not an absolute path/,
    );
    expect(rejected(step({ value: "docker:x:1", workdir: "/a/../b" })).message).toMatch(/'\.\.'/);
    expect(rejected(step({ value: "docker:x:1", entrypoint: "/bin/x -v" })).message).toMatch(
      /does not split the entrypoint/,
    );
    expect(rejected(step({ value: "docker:x:1", entrypoint: "x" })).message).toMatch(/not an absolute path/);
  });

  it("refuses --container-opt", () => {
    expect(rejected(step({ value: "docker:x:1", options: { foo: ["1"] } })).message).toMatch(
      /^--container-opt "foo": the shifter runtime takes no --container-opt/,
    );
  });
});

describe("shifter.conf", () => {
  it("fills defaults with no file", () => {
    const c = loadShifterConf(scratch(), 0);
    expect(c).toMatchObject({
      shifterPath: "/usr/bin/shifter",
      pullPolicy: "never",
      allowedImageTypes: ["docker", "custom", "id"],
      lookupTimeoutMs: 60_000,
    });
    expect(c.file).toBeUndefined();
  });

  const bad: [string, RegExp][] = [
    ["Bogus=1", /shifter\.conf:2:1: Bogus: unknown key/],
    ["PullPolicy=always", /shifter\.conf:2:\d+: PullPolicy: "always" is not one of never, if-missing/],
    ["ShifterPath=bin/shifter", /ShifterPath: "bin\/shifter" must be an absolute path/],
    ["AllowedImageTypes=docker,oci", /unknown image type "oci"/],
    ["LookupTimeout=0", /below the minimum 1/],
    ["MaxPerNodeCache=lots", /not a size/],
    ["AllowPerNodeCache=maybe", /not a boolean/],
    ["ImageAllow=docker:a b", /unexpected text after the value/],
    ["AllowedModules=my_mod", /no '_'/],
    ["StripEnv=1BAD", /not a variable-name glob/],
  ];
  for (const [line, rule] of bad) {
    it(`rejects ${line} with file:line`, () => {
      expect(() => conf(["# comment", line])).toThrow(rule);
    });
  }

  it("refuses a group- or world-writable file", () => {
    const dir = scratch();
    writeFileSync(join(dir, "shifter.conf"), "PullPolicy=never\n");
    chmodSync(join(dir, "shifter.conf"), 0o666);
    expect(() => loadShifterConf(dir, 0)).toThrow(/must not be group- or world-writable/);
  });
});
