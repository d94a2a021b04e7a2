/**
 * A real CNCF distribution registry (Debian's docker-registry) on 127.0.0.1 with its own config
 * and storage in a temp dir, and busybox images pushed to it with umoci and skopeo.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { chmodSync, cpSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { expect } from "vitest";
import { busyboxRootfs } from "./fixtures.js";
import { jobrtBin, tempDir } from "./jobrt.js";

export interface Registry {
  port: number;
  host: string;
  dir: string;
  storage: string;
  log: () => string;
  stop: () => Promise<void>;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

function must(argv: string[], what: string): string {
  const r = spawnSync(argv[0] as string, argv.slice(1), { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`${what}: ${argv.join(" ")} exited ${r.status}: ${r.stderr}`);
  return r.stdout;
}

/** Starts docker-registry on `address`; with `users`, it wants HTTP basic auth (an htpasswd file, bcrypt). */
export async function startRegistry(users?: Record<string, string>, address = "127.0.0.1"): Promise<Registry> {
  const dir = tempDir("jobrt-registry-");
  const storage = join(dir, "storage");
  const port = await freePort();
  let auth = "";
  if (users) {
    const file = join(dir, "htpasswd");
    writeFileSync(
      file,
      Object.entries(users)
        .map(([u, p]) => must(["htpasswd", "-nbB", u, p], "htpasswd").trim())
        .join("\n") + "\n",
    );
    auth = `auth:\n  htpasswd:\n    realm: jobrt-test\n    path: ${file}\n`;
  }
  const config = join(dir, "config.yml");
  writeFileSync(
    config,
    `version: 0.1\nlog:\n  level: info\n  accesslog:\n    disabled: false\nstorage:\n  filesystem:\n    rootdirectory: ${storage}\n  delete:\n    enabled: true\nhttp:\n  addr: ${address}:${port}\n${auth}`,
  );
  const logFile = join(dir, "registry.log");
  const { openSync } = await import("node:fs");
  const out = openSync(logFile, "a");
  const child: ChildProcess = spawn("docker-registry", ["serve", config], { stdio: ["ignore", out, out] });
  const host = `${address}:${port}`;
  for (let i = 0; ; i++) {
    const ok = await fetch(`http://${host}/v2/`).then(
      (r) => r.status === 200 || r.status === 401,
      () => false,
    );
    if (ok) break;
    if (i > 100 || child.exitCode !== null)
      throw new Error(`docker-registry did not start: ${readFileSync(logFile, "utf8")}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    port,
    host,
    dir,
    storage,
    log: () => readFileSync(logFile, "utf8"),
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill("SIGTERM");
      }),
  };
}

/**
 * Builds a busybox OCI image (umoci) whose /etc/jobrt-image holds `marker`, with the given image
 * config, and pushes it as `name:tag`. Returns the manifest digest.
 */
export function pushBusybox(
  reg: Registry,
  name: string,
  marker: string,
  o: {
    creds?: string;
    env?: string[];
    entrypoint?: string[];
    workdir?: string;
    extraFile?: { path: string; bytes: number };
    hostile?: boolean;
  } = {},
): string {
  const dir = tempDir("jobrt-image-");
  const layout = join(dir, "layout");
  const bundle = join(dir, "bundle");
  must(["umoci", "init", "--layout", layout], "umoci init");
  must(["umoci", "new", "--image", `${layout}:img`], "umoci new");
  must(["umoci", "unpack", "--rootless", "--image", `${layout}:img`, bundle], "umoci unpack");
  cpSync(busyboxRootfs(), join(bundle, "rootfs"), { recursive: true, verbatimSymlinks: true });
  writeFileSync(join(bundle, "rootfs/etc/jobrt-image"), `${marker}\n`);
  if (o.extraFile) writeFileSync(join(bundle, "rootfs", o.extraFile.path), Buffer.alloc(o.extraFile.bytes, marker));
  if (o.hostile) {
    // What a careless or hostile image may hold: a set-uid-root program and a world-writable dir.
    writeFileSync(join(bundle, "rootfs/etc/suid-root"), "#!/bin/sh\n", { mode: 0o4755 });
    chmodSync(join(bundle, "rootfs/etc/suid-root"), 0o4755);
    mkdirSync(join(bundle, "rootfs/etc/open"));
    chmodSync(join(bundle, "rootfs/etc/open"), 0o777);
  }
  chmodSync(join(bundle, "rootfs/tmp"), 0o1777);
  must(["umoci", "repack", "--image", `${layout}:img`, bundle], "umoci repack");
  const cfg = ["umoci", "config", "--image", `${layout}:img`];
  for (const e of o.env ?? []) cfg.push("--config.env", e);
  if (o.workdir) cfg.push("--config.workingdir", o.workdir);
  for (const e of o.entrypoint ?? []) cfg.push("--config.entrypoint", e);
  cfg.push("--config.cmd", "sh");
  must(cfg, "umoci config");
  const digestFile = join(dir, "digest");
  must(
    [
      "skopeo",
      "copy",
      "--quiet",
      "--dest-tls-verify=false",
      ...(o.creds ? ["--dest-creds", o.creds] : []),
      "--digestfile",
      digestFile,
      `oci:${layout}:img`,
      `docker://${reg.host}/${name}`,
    ],
    "skopeo copy (push)",
  );
  return readFileSync(digestFile, "utf8").trim();
}

/** The image tests' prerequisites: each tool on PATH, the built jobrt, root (`why`). Missing ones fail, never skip. */
export function expectImagePrerequisites(tools: readonly string[], why: string): void {
  for (const tool of tools) {
    expect(spawnSync("sh", ["-c", `command -v ${tool}`]).status, `${tool} is missing: run scripts/system-deps.sh`).toBe(
      0,
    );
  }
  expect(existsSync(jobrtBin), "build first").toBe(true);
  expect(process.getuid?.(), `these tests need root (${why})`).toBe(0);
}
