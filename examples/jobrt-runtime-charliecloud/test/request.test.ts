import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import type { ContainerRequest, ErrorCode } from "@jobrt/core";
import { createTestNode, createTestStep, pluginHost } from "@jobrt/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import plugin from "../src/index.js";
import { busyboxImage } from "./image.js";
import { tempDir } from "../../../tests/helpers/tmp.js";

const host = pluginHost(plugin);

let image: string;
let confDir: string;
beforeAll(() => {
  image = busyboxImage();
  confDir = tempDir("jobrt-cc-conf-");
});
afterAll(() => {
  rmSync(image, { recursive: true, force: true });
  rmSync(confDir, { recursive: true, force: true });
});

function step(container: Partial<ContainerRequest> | undefined) {
  return createTestStep({ runtime: "charliecloud", ...(container ? { container: { value: image, ...container } } : {}) });
}

/** validate() is the submit-time check: the same rules as setup, nothing created. */
async function refusal(container: Partial<ContainerRequest> | undefined, conf?: string): Promise<{ code: ErrorCode; message: string }> {
  const dir = mkdtempSync(join(confDir, "c-"));
  if (conf !== undefined) writeFileSync(join(dir, "charliecloud.conf"), conf);
  const node = createTestNode({ confDir: dir });
  try {
    await host.validate(node, step(container));
  } catch (error) {
    const e = error as { code: ErrorCode; message: string };
    return { code: e.code, message: e.message };
  }
  throw new Error("the request was accepted");
}

describe("request validation", () => {
  it("accepts the fixture request", async () => {
    await expect(call(() => host.validate(createTestNode(), step({ volumes: ["/tmp:/mnt"], workdir: "/mnt", env: ["A=b"] })))).resolves.toBeUndefined();
  });

  it.each([
    [undefined, "ERR_CONTAINER_NOT_CONFIGURED", /needs --container <image directory>/],
    [{ value: "/nonexistent/img" }, "ERR_CONTAINER_IMAGE", /^--container "\/nonexistent\/img": image directory \/nonexistent\/img does not exist/],
    [{ value: "/etc/hostname" }, "ERR_CONTAINER_IMAGE", /is not a directory/],
    [{ value: "/etc" }, "ERR_CONTAINER_IMAGE", /has no \/etc\/passwd|neither \/bin nor \/usr\/bin/],
    [{ volumes: ["relative:/mnt"] }, "ERR_CONTAINER_REQUEST", /^--container-volume "relative:\/mnt": the source "relative" is not an absolute path/],
    [{ volumes: ["/tmp/../etc:/mnt"] }, "ERR_CONTAINER_REQUEST", /contains '\.\.'/],
    [{ volumes: ["/nonexistent-src:/mnt"] }, "ERR_CONTAINER_REQUEST", /the source \/nonexistent-src does not exist on this node/],
    [{ volumes: ["/tmp:/mnt/"] }, "ERR_CONTAINER_REQUEST", /not in normal form \(write \/mnt\)/],
    [{ volumes: ["/tmp:/"] }, "ERR_CONTAINER_REQUEST", /the container's root/],
    [{ env: ["NOEQUALS"] }, "ERR_CONTAINER_REQUEST", /^--container-env "NOEQUALS": write NAME=VALUE/],
    [{ env: ["A=line\nbreak"] }, "ERR_CONTAINER_REQUEST", /newline/],
    [{ workdir: "/does/not/exist" }, "ERR_CONTAINER_REQUEST", /^--container-workdir "\/does\/not\/exist": does not exist in the image/],
    [{ entrypoint: "/bin/sh" }, "ERR_CONTAINER_REQUEST", /^--container-entrypoint "\/bin\/sh": runtime charliecloud does not accept --container-entrypoint \(it takes --container, /],
    [{ modules: ["mpich"] }, "ERR_CONTAINER_REQUEST", /^--container-module "mpich": runtime charliecloud does not accept --container-module/],
    [{ options: { "env-file": ["rel.env"] } }, "ERR_CONTAINER_REQUEST", /env-file "rel.env": is not an absolute path/],
    [{ options: { "env-file": ["/nonexistent.env"] } }, "ERR_CONTAINER_REQUEST", /is not a readable file/],
    [{ options: { "private-tmp": ["maybe"] } }, "ERR_CONTAINER_REQUEST", /is not a boolean/],
    [{ options: { home: ["yes", "no"] } }, "ERR_CONTAINER_REQUEST", /give it once/],
  ] as [Partial<ContainerRequest> | undefined, ErrorCode, RegExp][])("refuses %j with %s", async (container, code, message) => {
    const got = await refusal(container);
    expect(got.code).toBe(code);
    expect(got.message).toMatch(message);
    expect(got.message).not.toContain("\n");
  });

  it("charliecloud.conf ImageDirs confines images (symlinks resolved) and AllowBinds=no refuses binds", async () => {
    const outside = await refusal({}, "ImageDirs=/srv/images,/opt/images\n");
    expect(outside.code).toBe("ERR_CONTAINER_IMAGE");
    expect(outside.message).toContain(`is not under ImageDirs=/srv/images,/opt/images (${confDir}/`);
    await expect(call(() => host.validate(createTestNode({ confDir: writeConf(`ImageDirs=${dirname(image)}\n`) }), step({})))).resolves.toBeUndefined();
    const binds = await refusal({ volumes: ["/tmp:/mnt"] }, "AllowBinds=no\n");
    expect(binds.message).toMatch(/binds are turned off on this node \(AllowBinds=no in .*charliecloud\.conf\)/);
  });

  it("charliecloud.conf errors name file:line:column and the key", async () => {
    const bad = await refusal({}, "# site\nImageDirs=relative/dir\n");
    expect(bad.code).toBe("ERR_CONF");
    expect(bad.message).toMatch(/charliecloud\.conf:2:\d+: ImageDirs: "relative\/dir" is not an absolute path/);
    const unknown = await refusal({}, "ChRunPath=/x\n");
    expect(unknown.message).toMatch(/charliecloud\.conf:1:1: ChRunPath: unknown key/);
  });

  it("setup fails with ERR_RUNTIME_COMMAND when ChRun is missing, and cleanup still succeeds", async () => {
    const node = createTestNode({ confDir: writeConf("ChRun=/nonexistent/ch-run\n") });
    const s = step({});
    await expect(call(() => host.setup(node, s))).rejects.toMatchObject({ code: "ERR_RUNTIME_COMMAND", message: expect.stringMatching(/ch-run "\/nonexistent\/ch-run" not found/) });
    await expect(call(() => host.cleanup(node, s))).resolves.toBeUndefined();
  });
});

/** Hooks may be synchronous; this turns a throw into a rejection for expect(...).rejects. */
function call<T>(fn: () => T): Promise<Awaited<T>> {
  return Promise.resolve().then(fn) as Promise<Awaited<T>>;
}

function writeConf(text: string): string {
  const dir = mkdtempSync(join(confDir, "w-"));
  writeFileSync(join(dir, "charliecloud.conf"), text);
  return dir;
}
