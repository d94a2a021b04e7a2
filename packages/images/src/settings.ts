import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { isAbsolute, join } from "node:path";
import { type ConfSchema, confError, jobrtError, messageOf, parseConf, parseSize } from "@jobrt/core";

/** The site's image settings: `images.conf` in jobrt's conf dir (Slurm syntax, like oci.conf). */
export interface ImageSettings {
  /** The file they came from, or undefined for the built-in defaults. */
  file?: string;
  /** Root of the node-local image cache. */
  cacheDir: string;
  /** Size limit of the whole cache in bytes; least recently used images go first past it. */
  cacheSize: number;
  /** Registries (host[:port]) reached over plain HTTP or with unverified TLS. */
  insecureRegistries: string[];
  /** Time limit of one pull + unpack, in ms. */
  pullTimeoutMs: number;
  /** The cluster's image store on a filesystem every node sees (docs/images.md), when set. */
  sharedStore?: string;
  /** Size limit of the shared store in bytes (LRU past it). */
  sharedStoreSize: number;
  /** How long a shared-store lease lasts without renewal, in ms. */
  sharedLeaseMs: number;
  /** Names this cluster in the shared store's job pins. */
  clusterName: string;
  /** The site's trust policy (containers-policy.json(5)), given to every skopeo call (trust.ts). */
  trustPolicy: string;
  /** Where signatures are looked up (containers-registries.d(5)), given to every skopeo call. */
  trustRegistriesDir: string;
}

export const DEFAULT_TRUST_POLICY = "/etc/containers/policy.json";
export const DEFAULT_TRUST_REGISTRIES_DIR = "/etc/containers/registries.d";

export const DEFAULT_CACHE_SIZE = 20 * 1024 ** 3;

/** A cache or store size above 0 (core's parseSize), undefined otherwise. */
function positiveSize(text: string): number | undefined {
  const n = parseSize(text);
  return n !== undefined && n > 0 ? n : undefined;
}

const sizeCheck = (v: string) =>
  positiveSize(v) === undefined
    ? `${JSON.stringify(v)} is not a size (bytes, or a number with K, M, G or T)`
    : undefined;
const pathCheck = (v: string) => (isAbsolute(v) ? undefined : `${JSON.stringify(v)} is not an absolute path`);

export const IMAGES_CONF_SCHEMA = {
  CacheDir: { type: "string", check: pathCheck },
  CacheSize: { type: "string", check: sizeCheck },
  InsecureRegistries: { type: "list" },
  PullTimeout: { type: "int", min: 1, max: 86_400 },
  SharedStore: { type: "string", check: pathCheck },
  SharedStoreSize: { type: "string", check: sizeCheck },
  SharedLeaseTime: { type: "int", min: 1, max: 3600 },
  TrustPolicy: { type: "string", check: pathCheck },
  TrustRegistriesDir: { type: "string", check: pathCheck },
  ClusterName: {
    type: "string",
    check: (v: string) =>
      /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(v) ? undefined : `${JSON.stringify(v)} is not a cluster name`,
  },
} satisfies ConfSchema;

/**
 * The default cache: machine-wide under /var/cache when jobrt runs as root (it then keeps public
 * images for everyone and private ones per user), else the user's own XDG cache.
 */
export function defaultCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  if ((process.getuid?.() ?? -1) === 0) return "/var/cache/jobrt/images";
  const xdg = env.XDG_CACHE_HOME;
  return join(xdg && isAbsolute(xdg) ? xdg : join(homedir(), ".cache"), "jobrt", "images");
}

/** Reads `<confDir>/images.conf`; a missing file gives the defaults, a bad one an ERR_CONF with file:line. */
export function loadImageSettings(confDir: string): ImageSettings {
  const file = join(confDir, "images.conf");
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return defaults();
    throw jobrtError("ERR_CONF", { where: file, problem: `cannot read: ${messageOf(error)}` }, { details: { file } });
  }
  const parsed = parseConf(text, { file, schema: IMAGES_CONF_SCHEMA });
  const v = parsed.values;
  const d = defaults();
  const insecure = v.InsecureRegistries ?? [];
  for (const r of insecure) {
    if (!/^[A-Za-z0-9.-]+(?::[0-9]{1,5})?$|^\[[0-9a-fA-F:]+\](?::[0-9]{1,5})?$/.test(r)) {
      throw confError(
        parsed.where.InsecureRegistries ?? { file, line: 1, column: 1 },
        "InsecureRegistries",
        `${JSON.stringify(r)} is not HOST[:PORT]`,
      );
    }
  }
  return {
    file,
    cacheDir: typeof v.CacheDir === "string" ? v.CacheDir : d.cacheDir,
    // CacheSize's check has made sure a size that is set parses.
    cacheSize: (v.CacheSize === undefined ? undefined : positiveSize(v.CacheSize)) ?? d.cacheSize,
    insecureRegistries: insecure,
    pullTimeoutMs: typeof v.PullTimeout === "number" ? v.PullTimeout * 1000 : d.pullTimeoutMs,
    ...(typeof v.SharedStore === "string" ? { sharedStore: v.SharedStore } : {}),
    sharedStoreSize:
      (v.SharedStoreSize === undefined ? undefined : positiveSize(v.SharedStoreSize)) ?? d.sharedStoreSize,
    sharedLeaseMs: typeof v.SharedLeaseTime === "number" ? v.SharedLeaseTime * 1000 : d.sharedLeaseMs,
    clusterName: typeof v.ClusterName === "string" ? v.ClusterName : d.clusterName,
    trustPolicy: typeof v.TrustPolicy === "string" ? v.TrustPolicy : d.trustPolicy,
    trustRegistriesDir: typeof v.TrustRegistriesDir === "string" ? v.TrustRegistriesDir : d.trustRegistriesDir,
  };
}

function defaults(): ImageSettings {
  return {
    cacheDir: defaultCacheDir(),
    cacheSize: DEFAULT_CACHE_SIZE,
    insecureRegistries: [],
    pullTimeoutMs: 600_000,
    sharedStoreSize: 200 * 1024 ** 3,
    sharedLeaseMs: 60_000,
    clusterName: "cluster",
    trustPolicy: DEFAULT_TRUST_POLICY,
    trustRegistriesDir: DEFAULT_TRUST_REGISTRIES_DIR,
  };
}
