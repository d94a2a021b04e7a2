import { lstatSync } from "node:fs";
import { join } from "node:path";

/** An OCI runtime config.json (runtime-spec), as umoci unpack writes it. */
type OciConfig = Record<string, unknown>;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function exists(rootfs: string, path: string): "dir" | "other" | undefined {
  try {
    const st = lstatSync(join(rootfs, path));
    return st.isDirectory() ? "dir" : st.isSymbolicLink() ? undefined : "other";
  } catch {
    return undefined;
  }
}

/**
 * The config.json kept with a cached image: umoci's translation of the image config (Env,
 * Entrypoint + Cmd, WorkingDir, User resolved in the image's /etc/passwd, as runtime-spec's
 * image-to-runtime conversion says), made fit to share. The rootfs is read-only, since every step
 * on the node runs from the same copy; /tmp is a private tmpfs instead. Mounts whose mount point the
 * image lacks are dropped (runc would have to create it inside the shared rootfs; /dev/* live on
 * runc's own /dev tmpfs). `process.args` becomes the Entrypoint: each task's argv follows it.
 */
export function prepareImageConfig(config: OciConfig, rootfs: string, entrypoint: string[]): OciConfig {
  config.root = { path: "rootfs", readonly: true };
  const proc = isObject(config.process) ? config.process : {};
  config.process = proc;
  proc.terminal = false;
  proc.args = entrypoint;
  const mounts = Array.isArray(config.mounts) ? config.mounts : [];
  config.mounts = mounts.filter((m) => {
    const dest = isObject(m) && typeof m.destination === "string" ? m.destination : "";
    return dest.startsWith("/dev/") || exists(rootfs, dest) !== undefined;
  });
  if (exists(rootfs, "/tmp") === "dir") {
    (config.mounts as unknown[]).push({
      destination: "/tmp",
      type: "tmpfs",
      source: "tmpfs",
      options: ["nosuid", "nodev", "mode=1777"],
    });
  }
  return config;
}

/**
 * Fits an image's config to the job user. A root job runs the image as its User says (no user
 * namespace, as docker and podman run it). A rootless job has only one id in its user namespace,
 * container root mapped to the job user, so it runs as that; an image that asks for another user
 * cannot be honoured, and the returned note says so.
 */
export function fitImageUser(config: OciConfig, jobUid: number): string | undefined {
  const linux = isObject(config.linux) ? config.linux : undefined;
  if (jobUid === 0) {
    if (linux) {
      if (Array.isArray(linux.namespaces))
        linux.namespaces = linux.namespaces.filter((n) => !(isObject(n) && n.type === "user"));
      delete linux.uidMappings;
      delete linux.gidMappings;
    }
    return undefined;
  }
  const proc = isObject(config.process) ? config.process : undefined;
  const user = proc && isObject(proc.user) ? proc.user : undefined;
  if (!proc || !user || (user.uid === 0 && user.gid === 0)) return undefined;
  const asked = `${String(user.uid)}:${String(user.gid)}`;
  proc.user = { uid: 0, gid: 0 };
  return `the image's User is ${asked}; a rootless container has only container root (mapped to uid ${jobUid}), so it runs as that`;
}
