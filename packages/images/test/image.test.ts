import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { fitImageUser, prepareImageConfig } from "../src/imageconfig.js";
import { parseImageReference, sourceName } from "../src/reference.js";
import { loadImageSettings } from "../src/settings.js";
import { tempDir } from "../../../tests/helpers/tmp.js";

const D = `sha256:${"ab".repeat(32)}`;

describe("image references", () => {
  test("registry references: host required, tag defaults to latest, a digest pins", () => {
    expect(parseImageReference("docker://127.0.0.1:5000/busybox:1")).toMatchObject({
      transport: "docker",
      registry: "127.0.0.1:5000",
      repository: "busybox",
      tag: "1",
    });
    expect(parseImageReference("docker://reg.example.org/team/app")).toMatchObject({
      repository: "team/app",
      tag: "latest",
    });
    const pinned = parseImageReference(`docker://localhost/app@${D}`);
    expect(pinned).toMatchObject({ digest: D });
    expect(pinned).not.toHaveProperty("tag");
    expect(sourceName(parseImageReference("docker://h.org/a:1"), D)).toBe(`docker://h.org/a@${D}`);
  });
  test.each([
    "docker://alice:s3cret@h.org/a:1",
    "docker://alice:s3cret@h.org/a",
    "docker://tok3n@127.0.0.1:5000/a@" + D,
  ])("%s: credentials do not go in a reference; where they go is said, and they are not echoed", (text) => {
    // Was: "… is not a sha256:<64 hex digits> digest" (or a tag error), quoting the password.
    let error: { code?: string; message?: string } = {};
    try {
      parseImageReference(text);
    } catch (e) {
      error = e as typeof error;
    }
    expect(error.code).toBe("ERR_CONTAINER_IMAGE");
    expect(error.message).toMatch(/credentials do not go in an image reference/);
    expect(error.message).toContain("skopeo login HOST");
    expect(error.message).toContain("~/.config/containers/auth.json");
    expect(error.message).toContain('"docker://<credentials>@');
    expect(error.message).not.toMatch(/s3cret|tok3n|alice/);
  });
  test("local layouts need absolute paths", () => {
    expect(parseImageReference("oci:/srv/layout:v1")).toMatchObject({
      transport: "oci",
      path: "/srv/layout",
      ref: "v1",
    });
    expect(parseImageReference("oci-archive:/srv/i.tar")).toMatchObject({
      transport: "oci-archive",
      path: "/srv/i.tar",
    });
    expect(() => parseImageReference("oci:layout:v1")).toThrow(/absolute path/);
  });
  test.each([
    ["busybox:1", /expected docker:\/\//],
    ["docker://busybox:1", /registry host/],
    ["docker://busybox/x", /not a registry host/],
    ["docker://h.org/Upper:1", /not a valid repository name/],
    ["docker://h.org/a:b@sha256:123", /not a sha256/],
    ["docker://h.org/a:bad tag", /white space/],
    ["docker://h.org/a:-x", /not a valid tag/],
  ])("%s is refused with ERR_CONTAINER_IMAGE", (text, why) => {
    expect(() => parseImageReference(text)).toThrow(why);
    try {
      parseImageReference(text);
    } catch (error) {
      expect((error as { code: string }).code).toBe("ERR_CONTAINER_IMAGE");
      expect((error as Error).message).toContain(JSON.stringify(text));
    }
  });
});

describe("images.conf", () => {
  test("keys, defaults and errors with file:line", () => {
    const dir = tempDir("jobrt-images-conf-");
    expect(loadImageSettings(dir)).toMatchObject({ cacheSize: 20 * 1024 ** 3, insecureRegistries: [] });
    writeFileSync(
      join(dir, "images.conf"),
      "CacheDir=/var/cache/x\ncachesize=2G\nInsecureRegistries=127.0.0.1:5000,reg.local\nPullTimeout=30\n",
    );
    expect(loadImageSettings(dir)).toMatchObject({
      cacheDir: "/var/cache/x",
      cacheSize: 2 * 1024 ** 3,
      insecureRegistries: ["127.0.0.1:5000", "reg.local"],
      pullTimeoutMs: 30_000,
    });
    writeFileSync(join(dir, "images.conf"), "CacheDir=/x\nCacheSize=lots\n");
    expect(() => loadImageSettings(dir)).toThrow(/images\.conf:2.*CacheSize/);
    // Core's parseSize takes 0 (shifter.conf does); a cache of 0 bytes is not a size here.
    writeFileSync(join(dir, "images.conf"), "CacheDir=/x\nSharedStoreSize=0\n");
    expect(() => loadImageSettings(dir)).toThrow(/images\.conf:2.*SharedStoreSize.*"0" is not a size/);
    writeFileSync(join(dir, "images.conf"), "CacheDir=relative\n");
    expect(() => loadImageSettings(dir)).toThrow(/images\.conf:1.*absolute/);
  });
});

describe("the cached image's config.json", () => {
  const umoci = () => ({
    process: {
      terminal: true,
      user: { uid: 1000, gid: 100 },
      args: ["/entry", "cmd"],
      env: ["PATH=/bin"],
      cwd: "/work",
    },
    root: { path: "rootfs" },
    mounts: [
      { destination: "/proc", type: "proc", source: "proc" },
      { destination: "/dev/pts", type: "devpts", source: "devpts" },
      { destination: "/etc/resolv.conf", type: "bind", source: "/etc/resolv.conf" },
    ],
    linux: {
      namespaces: [{ type: "pid" }, { type: "user" }],
      uidMappings: [{ containerID: 0, hostID: 0, size: 1 }],
      gidMappings: [{ containerID: 0, hostID: 0, size: 1 }],
    },
  });
  test("read-only rootfs, private /tmp, mounts without a mount point dropped, args = Entrypoint", () => {
    const rootfs = tempDir("jobrt-image-rootfs-");
    mkdirSync(join(rootfs, "proc"));
    mkdirSync(join(rootfs, "tmp"));
    const c = prepareImageConfig(umoci(), rootfs, ["/entry"]) as ReturnType<typeof umoci> & {
      root: { readonly: boolean };
    };
    expect(c.root).toEqual({ path: "rootfs", readonly: true });
    expect(c.process.args).toEqual(["/entry"]);
    expect(c.process.terminal).toBe(false);
    expect(c.mounts.map((m) => m.destination)).toEqual(["/proc", "/dev/pts", "/tmp"]);
  });
  test("a root job runs the image's User without a user namespace; a rootless job runs as container root, with a note", () => {
    const root = umoci();
    expect(fitImageUser(root, 0)).toBeUndefined();
    expect(root.linux.namespaces).toEqual([{ type: "pid" }]);
    expect(root.linux).not.toHaveProperty("uidMappings");
    expect(root.process.user).toEqual({ uid: 1000, gid: 100 });
    const user = umoci();
    expect(fitImageUser(user, 65534)).toMatch(/User is 1000:100.*uid 65534/);
    expect(user.process.user).toEqual({ uid: 0, gid: 0 });
    expect(user.linux.namespaces).toContainEqual({ type: "user" });
  });
});
