import { describe, expect, it } from "vitest";
import { SPANK_OPTIONS, optionsFromSpank } from "../src/spankoptions.js";

const options = (encoded: string, env: NodeJS.ProcessEnv = {}) => Object.fromEntries(optionsFromSpank(encoded, env));

describe("optionsFromSpank: pyxis's options as jobrt exec's", () => {
  it.each([
    ["ubuntu:24.04", "docker://docker.io/ubuntu:24.04"],
    ["nvcr.io#nvidia/pytorch:24.01-py3", "docker://nvcr.io/nvidia/pytorch:24.01-py3"],
    ["10.0.0.1:5000#busybox:1", "docker://10.0.0.1:5000/busybox:1"],
    ["docker://reg.example/app:1", "docker://reg.example/app:1"],
    ["oci-archive:/images/app.tar", "oci-archive:/images/app.tar"],
  ])("--container-image=%s is %s", (given, ref) => {
    expect(options(`container-image=${given}\n`)).toEqual({ "container-image": [ref] });
  });

  it.each([
    ["alice@reg.example#app:1", "USER@ is enroot's credentials, which jobrt has not; drop it"],
    ["/images/app.sqsh", "an image file is enroot's; give oci-archive:/images/app.sqsh for an OCI archive"],
    ["#app", "expected [REGISTRY#]IMAGE[:TAG]"],
  ])("--container-image=%s is refused: %s", (given, why) => {
    expect(() => optionsFromSpank(`container-image=${given}\n`, {})).toThrow(
      `srun --container-image: ${given}: ${why}`,
    );
  });

  it("--container-mounts: each of the list a volume, SRC alone bound at the same path", () => {
    expect(options("container-mounts=/data:/in:ro,/scratch,/a:/b:rw\n")).toEqual({
      "container-volume": ["/data:/in:ro", "/scratch:/scratch", "/a:/b:rw"],
    });
  });

  it.each([
    ["/a:/b:x-create=dir", "jobrt takes the flags ro and rw only, not x-create=dir"],
    ["/a:/b:ro:extra", "expected SRC[:DST[:ro|rw]]"],
  ])("--container-mounts=%s is refused: %s", (mount, why) => {
    expect(() => optionsFromSpank(`container-mounts=${mount}\n`, {})).toThrow(
      `srun --container-mounts: ${mount}: ${why}`,
    );
  });

  it("--container-env: the named variables keep the task's values inside the container", () => {
    expect(options("container-env=FOO,BAR\n", { FOO: "1", BAR: "a=b" })).toEqual({
      "container-env": ["FOO=1", "BAR=a=b"],
    });
  });

  it("--runtime, --container-workdir and --container-device pass as they are, the device list split", () => {
    expect(options("runtime=oci\ncontainer-workdir=/w\ncontainer-device=a.example/x=1,gpu=gres\n")).toEqual({
      runtime: ["oci"],
      "container-workdir": ["/w"],
      "container-device": ["a.example/x=1", "gpu=gres"],
    });
  });

  it("a refused option or one the table lacks (another version's plugin) is refused by name", () => {
    expect(() => optionsFromSpank("container-save=/x\n", {})).toThrow(
      "srun --container-save: jobrt has no saving the container as an image",
    );
    expect(() => optionsFromSpank("container-frobnicate=1\n", {})).toThrow(
      "srun --container-frobnicate: not an option of jobrt's SPANK plugin (a plugin of another version?)",
    );
  });

  it("every option's name is one srun can register (SPANK's 75 characters, no '=')", () => {
    for (const o of SPANK_OPTIONS) expect(o.name).toMatch(/^[a-z][a-z-]{1,74}$/);
  });
});
