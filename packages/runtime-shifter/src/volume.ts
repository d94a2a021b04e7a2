import { posix } from "node:path";
import { parseSize } from "@jobrt/core";
import type { ShifterConf } from "./conf.js";
import { reject, show } from "./reject.js";
import type { UdiRootConf } from "./udiroot.js";

export interface PerNodeCache {
  /** Shifter's own spelling of the options, e.g. `size=10G,fs=xfs`. */
  options: string;
  bytes: number;
}

/** A validated user volume: `from` is a path inside the container (Shifter resolves it there). */
export interface Volume {
  from: string;
  to: string;
  readOnly: boolean;
  perNodeCache?: PerNodeCache;
}

/** Shifter keeps only these characters in a volume path and silently drops the rest. */
const PATH_CHARS = /^[A-Za-z0-9_.+/-]+$/;
const PER_NODE_CACHE_KEYS: Record<string, RegExp> = {
  size: /^\d+[bkmgtpe]?$/i,
  bs: /^\d+[bkmgtpe]?$/i,
  fs: /^xfs$/,
  method: /^loop$/,
};

function checkPath(field: string, spec: string, which: "source" | "target", path: string): void {
  if (path === "") throw reject(field, spec, `the ${which} is empty; write from:to[:ro]`);
  if (!PATH_CHARS.test(path)) {
    throw reject(
      field,
      spec,
      `the ${which} ${show(path)} has characters Shifter silently drops or reads as separators (allowed: letters, digits, _ . + - /)`,
    );
  }
  if (!path.startsWith("/")) throw reject(field, spec, `the ${which} ${show(path)} is not an absolute path`);
  if (path.split("/").includes("..") || path.includes(".."))
    throw reject(field, spec, `the ${which} ${show(path)} contains '..'`);
  if (posix.normalize(path) !== path || (path.length > 1 && path.endsWith("/"))) {
    throw reject(
      field,
      spec,
      `the ${which} ${show(path)} is not in normal form (write ${posix.normalize(path).replace(/(.)\/$/, "$1")})`,
    );
  }
}

const under = (path: string, prefix: string) => prefix === "/" || path === prefix || path.startsWith(`${prefix}/`);

/** Where a user may not mount, by Shifter's own rule (a plain string prefix, as VolumeMap.c compares). */
function shifterForbiddenTarget(to: string): string | undefined {
  if (to === "/") return "is the container's root";
  if (to === "/var/tmp") return undefined;
  if (to.startsWith("/etc")) return "is under /etc, which Shifter reserves for the site's files";
  if (to.startsWith("/var")) return "is under /var, which Shifter reserves (only /var/tmp itself is allowed)";
  if (to.startsWith("/opt/udiImage")) return "is under /opt/udiImage, which Shifter reserves for site modules";
  if (to === "/opt") return "is /opt itself, which Shifter reserves";
  return undefined;
}

/** Validates one `--container-volume` value with Shifter's user rules plus the site's policy. */
export function parseVolume(spec: string, field: string, conf: ShifterConf, udi: UdiRootConf | undefined): Volume {
  if (spec.includes(";"))
    throw reject(
      field,
      spec,
      "contains ';', which Shifter reads as a second volume map: give one volume per --container-volume",
    );
  if (/[\s"'\0]/.test(spec))
    throw reject(field, spec, "contains white space, quotes or NUL, which Shifter silently drops");
  const fields = spec.split(":");
  if (fields.length < 2)
    throw reject(field, spec, "has no target: write from:to[:ro] (both absolute paths inside the container)");
  const [from, to, ...flags] = fields as [string, string, ...string[]];
  checkPath(field, spec, "source", from);
  checkPath(field, spec, "target", to);
  const forbidden = shifterForbiddenTarget(to);
  if (forbidden) throw reject(field, spec, `the target ${to} ${forbidden}`);
  const denied = conf.deniedVolumeTargets.find((d) => under(to, d));
  if (denied)
    throw reject(field, spec, `the target ${to} is under ${denied}, denied by shifter.conf DeniedVolumeTargets`);
  const volume: Volume = { from, to, readOnly: false };
  const seen = new Set<string>();
  for (const flag of flags) {
    const name = (flag.includes("=") ? flag.slice(0, flag.indexOf("=")) : flag).toLowerCase();
    if (seen.has(name)) throw reject(field, spec, `the flag ${name} is given twice`);
    seen.add(name);
    if (name === "ro") {
      if (flag.includes("=")) throw reject(field, spec, "the flag ro takes no value");
      volume.readOnly = true;
    } else if (name === "pernodecache") {
      volume.perNodeCache = parsePerNodeCache(flag.slice(flag.indexOf("=") + 1), field, spec, conf);
    } else if (name === "rec" || name === "slave" || name === "private") {
      throw reject(field, spec, `the flag ${name} is for site mounts only (users may give ro and perNodeCache=...)`);
    } else {
      throw reject(
        field,
        spec,
        `unknown flag ${show(flag)} (allowed: ro, perNodeCache=size=<n>[,bs=<n>,fs=xfs,method=loop])`,
      );
    }
  }
  if (!volume.perNodeCache) {
    // Shifter resolves `from` inside the container, so only paths the site mounts (siteFs) or the
    // image holds are reachable; the site decides which prefixes users may bind.
    const sources = conf.allowedVolumeSources ?? (udi?.siteFs ?? [{ from: "/home", to: "/home" }]).map((s) => s.to);
    if (!sources.some((s) => under(from, s))) {
      const which = conf.allowedVolumeSources ? "shifter.conf AllowedVolumeSources" : "udiRoot.conf siteFs targets";
      throw reject(
        field,
        spec,
        `the source ${from} is not under an allowed source (${which}: ${sources.join(", ") || "none"})`,
      );
    }
  }
  return volume;
}

function parsePerNodeCache(text: string, field: string, spec: string, conf: ShifterConf): PerNodeCache {
  if (!conf.allowPerNodeCache)
    throw reject(field, spec, "perNodeCache volumes are not enabled here (shifter.conf AllowPerNodeCache)");
  const opts = new Map<string, string>();
  for (const item of text.split(",")) {
    const eq = item.indexOf("=");
    const key = eq < 0 ? item : item.slice(0, eq);
    const value = eq < 0 ? "" : item.slice(eq + 1);
    const re = PER_NODE_CACHE_KEYS[key];
    if (!re) throw reject(field, spec, `perNodeCache option ${show(key)} is unknown (size, bs, fs=xfs, method=loop)`);
    if (opts.has(key)) throw reject(field, spec, `perNodeCache option ${key} is given twice`);
    if (!re.test(value)) throw reject(field, spec, `perNodeCache option ${key}=${show(value)} is not valid`);
    opts.set(key, value);
  }
  const size = opts.get("size");
  if (size === undefined) throw reject(field, spec, "perNodeCache needs size=<n>[bkmgtpe]");
  const bytes = parseSize(size) as number;
  if (bytes <= 0) throw reject(field, spec, "perNodeCache size must be above 0");
  if (conf.maxPerNodeCache !== undefined && bytes > conf.maxPerNodeCache) {
    throw reject(field, spec, `perNodeCache size ${size} is above the site limit (shifter.conf MaxPerNodeCache)`);
  }
  return { options: text, bytes };
}

/** Checks the volume set: count, duplicate targets, and targets that would hide a site mount. */
export function checkVolumeSet(
  volumes: Volume[],
  specs: string[],
  field: string,
  conf: ShifterConf,
  udi: UdiRootConf | undefined,
): void {
  if (volumes.length > conf.maxVolumes) {
    throw reject(
      field,
      specs.join(" "),
      `${volumes.length} volumes requested; the limit is ${conf.maxVolumes} (shifter.conf MaxVolumes)`,
    );
  }
  const targets = new Map<string, number>();
  const site = new Set((udi?.siteFs ?? [{ from: "/home", to: "/home" }]).map((s) => s.to));
  volumes.forEach((v, i) => {
    const prev = targets.get(v.to);
    if (prev !== undefined)
      throw reject(field, specs[i] as string, `the target ${v.to} is also the target of volume ${prev + 1}`);
    if (site.has(v.to))
      throw reject(
        field,
        specs[i] as string,
        `the target ${v.to} would hide the site mount at ${v.to} (udiRoot.conf siteFs)`,
      );
    targets.set(v.to, i);
  });
}
