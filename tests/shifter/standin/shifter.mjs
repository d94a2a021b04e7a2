// @ts-check
// The Shifter STAND-IN's `shifter` (tests only; not Shifter, not for production).
// Invoked by its sh wrapper as: node shifter.mjs <udiRoot.conf> <argv0> <planfile> xARG...
// It does what shifter does before exec: udiRoot.conf, env intake, getopt_long grammar, image
// lookup through shifterimg, .meta and ACLs, volume and module rules with Shifter's messages,
// environment assembly, command/workdir rules. Then it writes a plan (a sh fragment) that the
// wrapper runs with `.`: the plan execs an unprivileged user+mount namespace that builds the
// container root on a tmpfs at udiMount and execs the command chrooted, as the calling user. So,
// like shifter, the task keeps the wrapper's pid and its exit status or signal is its own.

import { spawnSync } from "node:child_process";
import {
  accessSync,
  constants,
  existsSync,
  lstatSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { posix } from "node:path";
import { Exit, aclAllows, filterTag, parseImageDescriptor, readUdiRootConf } from "./common.mjs";
import { getoptLong } from "./getopt.mjs";
import { SHIFTER_LONGOPTS, SHIFTER_OPTSTRING } from "./options.mjs";

const SHORT_USAGE = [
  "",
  "Usage:",
  "shifter [-h|--help] [-v|--verbose] [--image=<imageType>:<imageTag>]",
  "    [--entrypoint[=command]] [--workdir[=/path]] [-E|--clearenv]",
  "    [-e|--env=<var>=<value>] [--env-file=/env/file]",
  "    [-V|--volume=/path/to/bind:/mnt/in/image[:<flags>][;...]]",
  "    [-m|--module=<modulelist>]",
  "    [-- /command/to/exec/in/shifter [args...]]",
  "",
];
const LONG_HELP = [
  ...SHORT_USAGE,
  "(Shifter stand-in for jobrt's tests.) Images: --image=type:tag, or SHIFTER_IMAGETYPE and",
  "SHIFTER_IMAGE in the environment. Volumes must be absolute from:to pairs; targets under /etc,",
  "/var and /opt/udiImage are reserved. LD_* and TMPDIR are dropped from the environment.",
  "",
];

/** glibc drops these for setuid programs (unsecvars.h); shifter is setuid, so its env never has them. */
const UNSECURE_ENV = new Set([
  "GCONV_PATH",
  "GETCONF_DIR",
  "HOSTALIASES",
  "LD_AUDIT",
  "LD_DEBUG",
  "LD_DEBUG_OUTPUT",
  "LD_DYNAMIC_WEAK",
  "LD_HWCAP_MASK",
  "LD_LIBRARY_PATH",
  "LD_ORIGIN_PATH",
  "LD_PRELOAD",
  "LD_PROFILE",
  "LD_SHOW_AUXV",
  "LD_USE_LOAD_BIAS",
  "LOCALDOMAIN",
  "LOCPATH",
  "MALLOC_TRACE",
  "NIS_PATH",
  "NLSPATH",
  "RESOLV_HOST_CONF",
  "RES_OPTIONS",
  "TMPDIR",
  "TZDIR",
]);

const usage = (/** @type {number} */ status, /** @type {string[]} */ stderr = []) =>
  new Exit(status, stderr, SHORT_USAGE);
const q = (/** @type {string} */ s) => `'${s.replace(/'/g, "'\\''")}'`;

/** @typedef {{from: string, to: string, ro: boolean, perNodeCache?: string}} VolumeMap */

/**
 * VolumeMap.c's user rules: maps split on `;`, fields on `:`, quotes around a map removed, paths
 * silently filtered, then the path, flag and target rules with Shifter's messages and codes.
 * @returns {VolumeMap[]}
 */
function parseVolumes(/** @type {string} */ raw, /** @type {Map<string, string>} */ values) {
  /** @type {VolumeMap[]} */
  const out = [];
  for (let map of raw.split(";")) {
    if (map === "") continue;
    if (map.length >= 2 && map.startsWith('"') && map.endsWith('"')) map = map.slice(1, -1);
    const invalid = (/** @type {number} */ code) =>
      usage(1, [`Invalid Volume Map: ${map}, aborting! ${code}`, "Failed to parse volume map options"]);
    const fields = map.split(":");
    const keep = (/** @type {string} */ p) => [...p].filter((c) => /[A-Za-z0-9_:.+/-]/.test(c)).join("");
    const from = keep(fields[0] ?? "");
    const to = keep(fields[1] ?? "");
    if (!from.startsWith("/") || !to.startsWith("/") || from.includes("..") || to.includes("..")) throw invalid(1);
    if (
      to !== "/var/tmp" &&
      (to.startsWith("/etc") || to.startsWith("/var") || to.startsWith("/opt/udiImage") || to === "/opt")
    )
      throw invalid(1);
    /** @type {VolumeMap} */
    const vol = { from, to, ro: false };
    const seen = new Set();
    for (const flag of fields.slice(2)) {
      const name = (flag.includes("=") ? flag.slice(0, flag.indexOf("=")) : flag).toLowerCase();
      if (seen.has(name)) throw invalid(3);
      seen.add(name);
      if (name === "ro") vol.ro = true;
      else if (name === "rec" || name === "slave" || name === "private") throw invalid(2);
      else if (name === "pernodecache") {
        if (!values.get("perNodeCachePath") || !values.get("mkfsXfsPath")) throw invalid(2);
        const size = /(?:^|,)size=(\d+[bkmgtpe]?)(?:,|$)/i.exec(flag.slice(flag.indexOf("=") + 1));
        if (!size) throw invalid(2);
        vol.perNodeCache = /** @type {string} */ (size[1]);
      } else {
        throw usage(1, [
          `Unknown flag: ${flag}`,
          `Invalid mount flags specified: ${flag}`,
          "Failed to parse volume map options",
        ]);
      }
    }
    out.push(vol);
  }
  return out;
}

/** Container paths → host paths, for the root shifter assembles (image, site mounts, volumes). */
class RootView {
  /** @param {string} imageRoot */
  constructor(imageRoot) {
    /** @type {{ctr: string, host: string}[]} */
    this.binds = [];
    /** Directories created on the root tmpfs. @type {Set<string>} */
    this.created = new Set(["/"]);
    this.imageRoot = imageRoot;
  }
  bind(/** @type {string} */ ctr, /** @type {string} */ host) {
    // A later mount on the same path hides the earlier one.
    this.binds = this.binds.filter((b) => b.ctr !== ctr);
    this.binds.push({ ctr, host });
    this.binds.sort((a, b) => b.ctr.length - a.ctr.length);
  }
  /** @returns {string | undefined} */
  toHost(/** @type {string} */ p) {
    for (const b of this.binds) {
      if (p === b.ctr) return b.host;
      if (p.startsWith(b.ctr === "/" ? "/" : `${b.ctr}/`)) return posix.join(b.host, p.slice(b.ctr.length));
    }
    return undefined;
  }
  /** Resolves a container path with symlinks followed inside the container. @returns {string | undefined} */
  resolve(/** @type {string} */ path) {
    let parts = path.split("/").filter(Boolean);
    let cur = "/";
    let hops = 0;
    while (parts.length > 0) {
      const c = /** @type {string} */ (parts.shift());
      if (c === ".") continue;
      if (c === "..") {
        cur = posix.dirname(cur);
        continue;
      }
      const next = posix.join(cur, c);
      const host = this.toHost(next);
      if (host === undefined) {
        if (!this.created.has(next)) return undefined;
        cur = next;
        continue;
      }
      let st;
      try {
        st = lstatSync(host);
      } catch {
        return undefined;
      }
      if (st.isSymbolicLink()) {
        if (++hops > 40) return undefined;
        const target = readlinkSync(host);
        parts = [...target.split("/").filter(Boolean), ...parts];
        if (target.startsWith("/")) cur = "/";
        continue;
      }
      cur = next;
    }
    return cur;
  }
  /** A directory in the container? */
  isDir(/** @type {string} */ ctr) {
    const r = this.resolve(ctr);
    if (r === undefined) return false;
    const host = this.toHost(r);
    if (host === undefined) return this.created.has(r);
    try {
      return statSync(host).isDirectory();
    } catch {
      return false;
    }
  }
}

/** @param {string} file */
function readMeta(file) {
  /** @type {{env: string[], entry?: string[], cmd?: string[], workdir?: string, userAcl?: number[], groupAcl?: number[], format?: string}} */
  const meta = { env: [] };
  const split = (/** @type {string} */ v) => (v.startsWith("[") ? JSON.parse(v) : v.split(/\s+/).filter(Boolean));
  const ids = (/** @type {string} */ v) => v.split(",").filter(Boolean).map(Number);
  for (const line of readFileSync(file, "utf8").split("\n")) {
    const m = /^([A-Z_]+):\s?(.*)$/.exec(line);
    if (!m) continue;
    const [, key, value] = /** @type {[string, string, string]} */ (/** @type {unknown} */ (m));
    if (key === "FORMAT") meta.format = value;
    else if (key === "ENV") meta.env.push(value);
    else if (key === "ENTRY") meta.entry = split(value);
    else if (key === "CMD") meta.cmd = split(value);
    else if (key === "WORKDIR") meta.workdir = value;
    else if (key === "USERACL") meta.userAcl = ids(value);
    else if (key === "GROUPACL") meta.groupAcl = ids(value);
    else if (key !== "VOLUME") process.stdout.write(`WARNING: Couldn't understand key: ${key}\n`);
  }
  return meta;
}

function main() {
  const [confPath, argv0, planPath, ...prefixed] = /** @type {string[]} */ (process.argv.slice(2));
  const args = prefixed.map((a) => a.slice(1)); // the wrapper's "x" prefix (see layout.ts)
  const conf = readUdiRootConf(/** @type {string} */ (confPath));
  const v = conf.values;
  const env = process.env;

  // Environment intake (before shifter clears its own environment).
  /** @type {{type: string, tag: string} | undefined} */
  let image;
  let request;
  const pick = (/** @type {string} */ name) => env[name] ?? env[`SLURM_SPANK_${name}`];
  const envType = filterTag(pick("SHIFTER_IMAGETYPE") ?? "", false);
  const envTag = filterTag(pick("SHIFTER_IMAGE") ?? "", envType === "docker" || envType === "local");
  if (envType !== "" && envTag !== "") image = { type: envType, tag: envTag };
  request = pick("SHIFTER_IMAGEREQUEST");
  if (!image && request) image = parseImageDescriptor(request, conf);
  let rawVolumes = pick("SHIFTER_VOLUME") ?? "";
  let moduleSel = pick("SHIFTER_MODULE");

  // Command line.
  const parsed = getoptLong(/** @type {string} */ (argv0), args, SHIFTER_OPTSTRING, SHIFTER_LONGOPTS);
  if (parsed.error) throw usage(1, [parsed.error, "Missing an argument!"]);
  let cliVolumes = 0;
  /** @type {string[]} */
  const envArgs = [];
  /** @type {string | undefined} */
  let envFile;
  let clearEnv = false;
  /** @type {string | null | undefined} */
  let workdir;
  let useEntry = false;
  /** @type {string | undefined} */
  let entrypoint;
  for (const o of parsed.options) {
    const arg = /** @type {string} */ (o.arg);
    switch (o.opt) {
      case "h":
        throw new Exit(0, [], LONG_HELP);
      case "i": {
        const d = parseImageDescriptor(arg, conf);
        if (!d) {
          const known = ["docker", "custom", "id", "local"].includes(arg.split(":")[0] ?? "");
          throw usage(1, [
            ...(known || v.get("defaultImageType")
              ? []
              : ["FAILED to determine image type, and no defaultImageType in udiRoot.conf"]),
            'Incorrect format for image identifier: need "image_type:image_desc", e.g., docker:ubuntu:14.04',
          ]);
        }
        image = d;
        request = arg;
        break;
      }
      case "V":
        // A command-line volume discards every volume that came from the environment (PR #87).
        if (cliVolumes++ === 0) rawVolumes = "";
        rawVolumes += `;${arg}`;
        break;
      case "m":
        moduleSel = arg;
        break;
      case "e": {
        const eq = arg.indexOf("=");
        if (eq <= 0 || eq === arg.length - 1) throw usage(1, [`Invalid environment variable specification: ${arg}`]);
        envArgs.push(arg);
        break;
      }
      case "F":
        envFile = arg;
        break;
      case "E":
        clearEnv = true;
        break;
      case "w":
        workdir = o.arg;
        break;
      case "P":
        useEntry = true;
        if (o.arg !== null) entrypoint = o.arg;
        break;
      default:
        break;
    }
  }
  if (!image) throw usage(1, ["No image specified, or specified incorrectly!"]);

  // Image id: id: as given, local: a host path, docker/custom through shifterimg (as the user).
  let id = image.tag;
  if (image.type === "docker" || image.type === "custom") {
    const tool = posix.join(/** @type {string} */ (v.get("udiRootPath")), "bin/shifterimg");
    const r = spawnSync(tool, ["lookup", `${image.type}:${image.tag}`], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
    });
    const line = r.status === 0 ? (r.stdout ?? "").split("\n").find((l) => l !== "" && !l.includes(":")) : undefined;
    if (!line) throw usage(1, [`FAILED to lookup ${image.type} image ${image.tag}`]);
    id = line.trim();
  }
  // No allowLocalChroot gate for local: here, on purpose: in Shifter 22.02 the gate tests a field
  // nothing sets (docs/shifter-interface.md 1.2), so local: images run whatever udiRoot.conf says. Policy is the plugin's.
  const volumes = parseVolumes(rawVolumes, v);

  // Modules: --module, else SHIFTER_MODULE, else defaultModules; "none" only as the whole string.
  const selection = moduleSel ?? v.get("defaultModules") ?? "";
  /** @type {import("./common.mjs").Module[]} */
  const modules = [];
  if (selection !== "" && selection !== "none") {
    /** @type {string[]} */
    const problems = [];
    for (const name of selection.split(",")) {
      const mod = conf.modules.get(name);
      if (mod && !mod.enabled) problems.push(`WARNING: module ${name} is not enabled for use.`);
      if (!mod?.enabled) {
        problems.push(`Unknown shifter module: ${name}`);
        break;
      }
      const clash = modules.find((m) => m.conflict.includes(name) || mod.conflict.includes(m.name));
      if (clash) {
        problems.push(`ERROR: cannot load conflicting modules ${clash.name} and ${name}`);
        break;
      }
      modules.push(mod);
    }
    if (problems.length > 0) throw usage(1, [...problems, `Invalid shifter module selection: ${selection}`]);
  }

  // Image data and ACL.
  let imageRoot;
  /** @type {ReturnType<typeof readMeta>} */
  let m = { env: [] };
  if (image.type === "local") imageRoot = image.tag;
  else {
    const metaFile = posix.join(/** @type {string} */ (v.get("imagePath")), `${id}.meta`);
    if (!existsSync(metaFile)) throw new Exit(1, ["FAILED to find requested image."]);
    m = readMeta(metaFile);
    imageRoot = posix.join(/** @type {string} */ (v.get("imagePath")), id);
  }
  if (!aclAllows(m.userAcl, m.groupAcl)) throw new Exit(1, ["FAILED permission denied to image"]);
  const uid = /** @type {number} */ (process.getuid?.());
  const gid = /** @type {number} */ (process.getgid?.());
  if (uid === 0 || gid === 0) throw new Exit(1, ["Failed to lookup username or attempted to run as root.\n"]);

  // Command and working directory (docs/shifter-interface.md 1.5).
  let command = parsed.rest;
  if (useEntry) {
    const entry = entrypoint !== undefined ? [entrypoint] : m.entry;
    if (!entry) throw new Exit(1, ["Image does not have a defined entrypoint."]);
    command = [...entry, ...(command.length > 0 || entrypoint !== undefined ? command : (m.cmd ?? []))];
  } else if (command.length === 0) command = ["/bin/sh"];
  let wd;
  if (workdir === undefined) wd = process.cwd();
  else if (workdir === null) {
    if (!m.workdir) throw new Exit(1, ["No workdir specified on command line or in image definition."]);
    wd = m.workdir;
  } else wd = workdir;

  // The root: a tmpfs at udiMount holding the image's top level, /etc from the image and etcPath,
  // host /dev /sys /proc /tmp /var/tmp, siteFs, module copyPaths, then the user's volumes.
  const R = /** @type {string} */ (v.get("udiMount"));
  const view = new RootView(imageRoot);
  /** @type {string[]} */
  const script = [
    `R=${q(R)}`,
    'fail() { echo "$1" >&2; exit 1; }',
    `/bin/mount -t tmpfs -o mode=0755 shifter-udiroot "$R" || fail 'FAILED to setup image.'`,
  ];
  const imgFail = "|| fail 'FAILED to setup image.'";
  const SYSTEM = new Set(["etc", "proc", "dev", "sys", "tmp"]);
  for (const ent of readdirSync(imageRoot, { withFileTypes: true })) {
    const ctr = `/${ent.name}`;
    const src = posix.join(imageRoot, ent.name);
    if (SYSTEM.has(ent.name) && ent.isDirectory()) continue;
    if (ent.isSymbolicLink()) {
      script.push(`/bin/ln -s ${q(readlinkSync(src))} "$R"${q(ctr)} ${imgFail}`);
      view.bind(ctr, src);
    } else if (ent.isDirectory() || ent.isFile()) {
      script.push(`${ent.isDirectory() ? "/bin/mkdir" : "/usr/bin/touch"} "$R"${q(ctr)} ${imgFail}`);
      script.push(`/bin/mount --rbind ${q(src)} "$R"${q(ctr)} ${imgFail}`);
      script.push(`/bin/mount -o remount,bind,ro "$R"${q(ctr)} ${imgFail}`);
      view.bind(ctr, src);
    }
  }
  script.push(`/bin/mkdir "$R/etc" ${imgFail}`);
  if (existsSync(posix.join(imageRoot, "etc")))
    script.push(`/bin/cp -RP ${q(posix.join(imageRoot, "etc"))}/. "$R/etc/" ${imgFail}`);
  script.push(`/bin/cp -RP ${q(/** @type {string} */ (v.get("etcPath")))}/. "$R/etc/" ${imgFail}`);
  view.created.add("/etc");
  for (const sys of ["dev", "sys", "proc", "tmp"]) {
    script.push(`/bin/mkdir "$R/${sys}" && /bin/mount --rbind /${sys} "$R/${sys}" ${imgFail}`);
    view.bind(`/${sys}`, `/${sys}`);
  }
  if (existsSync("/var/tmp") && view.isDir("/var/tmp")) {
    script.push(`/bin/mount --bind /var/tmp "$R/var/tmp" ${imgFail}`);
    view.bind("/var/tmp", "/var/tmp");
  }
  const mountAt = (/** @type {string} */ to, /** @type {string} */ failMsg, /** @type {string} */ what) => {
    if (view.isDir(to)) return /** @type {string} */ (view.resolve(to));
    if (posix.dirname(to) === "/" && view.resolve(to) === undefined) {
      script.push(`/bin/mkdir "$R"${q(to)} || fail ${q(failMsg)}`);
      view.created.add(to);
      return to;
    }
    throw new Exit(1, [
      `FAILED to create volume "${what}": ${to}, cannot create mount points in that location`,
      failMsg,
    ]);
  };
  for (const entry of (v.get("siteFs") ?? "/home:/home")
    .split(";")
    .map((s) => s.trim())
    .filter(Boolean)) {
    const [from, to0, ...flags] = entry.split(":");
    const to = to0?.startsWith("/") ? to0 : /** @type {string} */ (from);
    const at = mountAt(to, "FAILED to setup image.", "to");
    script.push(`/bin/mount --rbind ${q(/** @type {string} */ (from))} "$R"${q(at)} ${imgFail}`);
    if (flags.includes("ro")) script.push(`/bin/mount -o remount,bind,ro "$R"${q(at)} ${imgFail}`);
    view.bind(at, /** @type {string} */ (from));
  }
  for (const mod of modules) {
    if (!mod.copyPath) continue;
    const at = `/opt/udiImage/modules/${mod.name}`;
    script.push(
      `/bin/mkdir -p "$R"${q(at)} && /bin/mount --rbind ${q(mod.copyPath)} "$R"${q(at)} && /bin/mount -o remount,bind,ro "$R"${q(at)} ${imgFail}`,
    );
    for (const p of ["/opt", "/opt/udiImage", "/opt/udiImage/modules"]) view.created.add(p);
    view.bind(at, mod.copyPath);
  }
  const userFail = "FAILED to setup user-requested mounts.";
  for (const vol of volumes) {
    const at = mountAt(vol.to, userFail, "to");
    if (vol.perNodeCache) {
      script.push(
        `/bin/mount -t tmpfs -o size=${vol.perNodeCache} shifter-pernodecache "$R"${q(at)} || fail ${q(userFail)}`,
      );
      continue;
    }
    const resolved = view.resolve(vol.from);
    const host = resolved === undefined ? undefined : view.toHost(resolved);
    let ok = false;
    try {
      ok = host !== undefined && statSync(host).isDirectory();
    } catch {}
    if (!ok) throw new Exit(1, [`FAILED to find real path for volume "from": ${vol.from}`, userFail]);
    script.push(`/bin/mount --rbind ${q(/** @type {string} */ (host))} "$R"${q(at)} || fail ${q(userFail)}`);
    if (vol.ro) script.push(`/bin/mount -o remount,bind,ro "$R"${q(at)} || fail ${q(userFail)}`);
    view.bind(at, /** @type {string} */ (host));
  }
  if (v.get("mountUdiRootWritable") !== "1")
    script.push(`/bin/mount -o remount,bind,ro "$R" || fail 'FAILED to remount udiRoot readonly, fail!'`);

  // Environment, in shifter's order (docs/shifter-interface.md 1.4).
  /** @type {Record<string, string>} */
  const out = {};
  if (!clearEnv)
    for (const [k, val] of Object.entries(env)) if (!UNSECURE_ENV.has(k) && val !== undefined) out[k] = val;
  if (request) out.SHIFTER_IMAGEREQUEST = request;
  out.SHIFTER_IMAGE = id;
  const put = (/** @type {string} */ kv) => {
    const eq = kv.indexOf("=");
    if (eq > 0 && eq < kv.length - 1) out[kv.slice(0, eq)] = kv.slice(eq + 1);
  };
  for (const e of m.env) put(e);
  if (envFile !== undefined) {
    const r = view.resolve(envFile.startsWith("/") ? envFile : posix.join(wd, envFile));
    const host = r === undefined ? undefined : view.toHost(r);
    let text;
    try {
      text = readFileSync(/** @type {string} */ (host), "utf8");
    } catch {
      throw new Exit(1, [`Failed to read env file: ${envFile}`]);
    }
    for (const line of text.split("\n")) {
      if (line.trim() === "" || line.trimStart().startsWith("#")) continue;
      const eq = line.indexOf("=");
      if (eq <= 0 || eq === line.length - 1)
        throw new Exit(1, [`Invalid environment variable specification in ${envFile}: ${line}`]);
      put(line);
    }
  }
  for (const e of envArgs) put(e);
  const siteEnv = (
    /** @type {string[]} */ set,
    /** @type {string[]} */ app,
    /** @type {string[]} */ pre,
    /** @type {string[]} */ unset,
  ) => {
    for (const kv of set) put(kv);
    for (const kv of app) {
      const [k, val] = [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)];
      out[k] = out[k] ? `${out[k]}:${val}` : val;
    }
    for (const kv of pre) {
      const [k, val] = [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)];
      out[k] = out[k] ? `${val}:${out[k]}` : val;
    }
    for (const k of unset) delete out[k];
  };
  for (const mod of modules) siteEnv(mod.siteEnv, mod.siteEnvAppend, mod.siteEnvPrepend, mod.siteEnvUnset);
  const words = (/** @type {string} */ k) => (v.get(k) ?? "").split(/\s+/).filter(Boolean);
  siteEnv(words("siteEnv"), words("siteEnvAppend"), words("siteEnvPrepend"), words("siteEnvUnset"));

  // Working directory and command lookup, as chdir and execvpe would see them inside the root.
  /** @type {string[]} */
  const stderrLines = [];
  if (!view.isDir(wd) || !canEnter(view, wd)) {
    stderrLines.push(`Failed to switch to working dir: ${wd}, staying in /`);
    wd = "/";
  }
  const cmd = /** @type {string} */ (command[0]);
  const problem = findCommand(view, cmd, wd, out.PATH ?? "/bin:/usr/bin");
  for (const l of stderrLines) process.stderr.write(`${l}\n`);
  if (problem) throw new Exit(127, [`${argv0}: ${cmd}: ${problem}`]);

  for (const mod of modules) {
    if (!mod.userhook) continue;
    script.push(
      `/usr/bin/unshare --user --map-user=${uid} --map-group=${gid} --root="$R" --wd=/ -- ${q(mod.userhook)} || fail ${q(`Failed to setup module ${mod.name}`)}`,
    );
  }
  // dash exports PWD into every exec; give the command exactly the environment shifter built.
  script.push(out.PWD === undefined ? "unset PWD" : `PWD=${q(out.PWD)}; export PWD`);
  script.push(
    `exec /usr/bin/setpriv --no-new-privs /usr/bin/unshare --user --map-user=${uid} --map-group=${gid} --root="$R" --wd=${q(wd)} -- ${command.map(q).join(" ")}`,
  );

  const traceDir = posix.join(/** @type {string} */ (v.get("udiRootPath")), "trace");
  if (existsSync(traceDir)) {
    const record = {
      tool: "shifter",
      args,
      image: { ...image, id },
      request,
      volumes,
      modules: modules.map((x) => x.name),
      env: out,
      command,
      workdir: wd,
      uid,
      gid,
      clearEnv,
    };
    writeFileSync(posix.join(traceDir, `${Date.now()}-${process.pid}.json`), `${JSON.stringify(record)}\n`);
  }

  const plan = [
    `/bin/rm -f ${q(/** @type {string} */ (planPath))}`,
    "trap - HUP INT TERM",
    `exec /usr/bin/env -i ${Object.entries(out)
      .map(([k, val]) => q(`${k}=${val}`))
      .join(
        " ",
      )} /usr/bin/unshare --user --map-root-user --mount --propagation slave /bin/sh -c ${q(script.join("\n"))} shifter-setup`,
  ];
  writeFileSync(/** @type {string} */ (planPath), `${plan.join("\n")}\n`);
  return 0;
}

function canEnter(/** @type {RootView} */ view, /** @type {string} */ dir) {
  const r = view.resolve(dir);
  const host = r === undefined ? undefined : view.toHost(r);
  if (host === undefined) return r !== undefined;
  try {
    accessSync(host, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** execvpe's answer for `cmd` in the container: undefined when it would run, else the strerror text. */
function findCommand(
  /** @type {RootView} */ view,
  /** @type {string} */ cmd,
  /** @type {string} */ wd,
  /** @type {string} */ path,
) {
  const check = (/** @type {string} */ ctr) => {
    const r = view.resolve(ctr);
    const host = r === undefined ? undefined : view.toHost(r);
    if (host === undefined) return r === undefined ? "No such file or directory" : "Permission denied";
    try {
      if (statSync(host).isDirectory()) return "Permission denied";
      accessSync(host, constants.X_OK);
      return undefined;
    } catch (error) {
      return /** @type {NodeJS.ErrnoException} */ (error).code === "EACCES"
        ? "Permission denied"
        : "No such file or directory";
    }
  };
  if (cmd === "") return "No such file or directory";
  if (cmd.includes("/")) return check(cmd.startsWith("/") ? cmd : posix.join(wd, cmd));
  let sawEacces = false;
  for (const dir of path.split(":")) {
    const p = check(posix.join(dir === "" ? wd : dir.startsWith("/") ? dir : posix.join(wd, dir), cmd));
    if (p === undefined) return undefined;
    if (p === "Permission denied") sawEacces = true;
  }
  return sawEacces ? "Permission denied" : "No such file or directory";
}

try {
  process.exitCode = main();
} catch (error) {
  if (!(error instanceof Exit)) throw error;
  for (const l of error.stderr) process.stderr.write(`${l}\n`);
  for (const l of error.stdout) process.stdout.write(`${l}\n`);
  process.exitCode = error.status;
}
