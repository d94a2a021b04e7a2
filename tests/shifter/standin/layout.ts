// Builds a per-test site for the Shifter STAND-IN (tests only): wrappers for the stand-in
// `shifter` and `shifterimg`, a root-owned udiRoot.conf, VFS directory images made from the
// busybox rootfs, a JSON "image gateway", a siteFs home, and a jobrt conf dir whose shifter.conf
// points at the stand-in. The plugin only ever sees paths in shifter.conf.
import { createHash } from "node:crypto";
import { execFileSync } from "node:child_process";
import { chmodSync, chownSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { busyboxRootfs } from "../../helpers/fixtures.js";
import { tempDir } from "../../helpers/jobrt.js";

const here = dirname(fileURLToPath(import.meta.url));
export const TASK_UID = 65534;
export const TASK_GID = 65534;

export interface ImageSpec {
  /** Files to add to the image: container path → content. */
  files?: Record<string, string>;
  /** Directories to create in the image (e.g. volume targets). */
  dirs?: string[];
  env?: string[];
  entry?: string;
  cmd?: string;
  workdir?: string;
  userAcl?: number[];
  groupAcl?: number[];
  /** Extra raw .meta lines (e.g. "USER: x" to check the unknown-key warning). */
  extraMeta?: string[];
}

export interface StandinSite {
  root: string;
  shifter: string;
  shifterimg: string;
  udiRootConf: string;
  imagePath: string;
  gatewayFile: string;
  traceDir: string;
  /** Host directory mounted at /home in every container (siteFs), writable by the task user. */
  siteHome: string;
  /** A jobrt --conf-dir holding shifter.conf (and jobrt.conf) for this site. */
  confDir: string;
  /** Adds a READY image to the gateway and the image store; returns its id. */
  addImage(name: string, spec?: ImageSpec): string;
  /** Makes `name` pullable: a pull ends with `final` (READY adds the image). */
  addPullable(name: string, final: "READY" | "FAILURE", spec?: ImageSpec): string;
  /** Writes shifter.conf in confDir (ShifterPath/UdiRootConf lines are added unless given). */
  writeShifterConf(lines?: string[]): void;
  traces(): Record<string, unknown>[];
  remove(): void;
}

export interface SiteOptions {
  /** Extra udiRoot.conf lines (modules, siteEnv, defaultImageType, ...). */
  udiRoot?: string[];
}

/** What glibc removes from the environment of a setuid program (unsecvars.h). */
const UNSECURE_ENV = [
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
];

const q = (s: string) => `'${s.replace(/'/g, "'\\''")}'`;

function wrapper(script: string, conf: string, plan: boolean): string {
  const node = process.execPath;
  if (!plan)
    return `#!/bin/sh\n# Shifter STAND-IN (jobrt tests only)\nexec ${q(node)} ${q(script)} ${q(conf)} "$0" "$@"\n`;
  return [
    "#!/bin/sh",
    "# Shifter STAND-IN (jobrt tests only). Like shifter, ignore HUP/INT/TERM while setting up;",
    "# the plan restores them right before it execs the task in place of this shell.",
    "trap '' HUP INT TERM",
    "# A setuid program never sees these (glibc drops them for setuid binaries); neither does the stand-in.",
    `unset ${UNSECURE_ENV.join(" ")}`,
    "plan=$(/usr/bin/mktemp /tmp/shifter-standin-plan.XXXXXX) || exit 1",
    "# Node 20 acts on a --env-file anywhere in its argv, even after the script: prefix every",
    "# argument with x (the stand-in strips it) so shifter's own --env-file reaches shifter.",
    'n=$#; for a in "$@"; do set -- "$@" "x$a"; done; shift "$n"',
    `${q(node)} ${q(script)} ${q(conf)} "$0" "$plan" "$@"`,
    "rc=$?",
    'if [ "$rc" -ne 0 ] || [ ! -s "$plan" ]; then /bin/rm -f "$plan"; exit "$rc"; fi',
    '. "$plan"',
    "",
  ].join("\n");
}

export function imageId(name: string): string {
  return createHash("sha256").update(`standin-image:${name}`).digest("hex");
}

export function createStandinSite(options: SiteOptions = {}): StandinSite {
  const root = tempDir("jobrt-shifter-site-");
  chmodSync(root, 0o755);
  const dirs = ["bin", "etc", "images", "site-etc", "site-home", "udiMount", "trace", "gateway", "jobrt"];
  for (const d of dirs) mkdirSync(join(root, d), { recursive: true, mode: 0o755 });
  for (const d of ["trace", "gateway"]) chmodSync(join(root, d), 0o777);
  chownSync(join(root, "site-home"), TASK_UID, TASK_GID);
  const udiRootConf = join(root, "etc/udiRoot.conf");
  const shifter = join(root, "bin/shifter");
  const shifterimg = join(root, "bin/shifterimg");
  writeFileSync(shifter, wrapper(join(here, "shifter.mjs"), udiRootConf, true), { mode: 0o755 });
  writeFileSync(shifterimg, wrapper(join(here, "shifterimg.mjs"), udiRootConf, false), { mode: 0o755 });
  writeFileSync(
    join(root, "site-etc/passwd"),
    `root:x:0:0:root:/root:/bin/sh\nnobody:x:${TASK_UID}:${TASK_GID}:nobody:/home:/bin/sh\n`,
  );
  writeFileSync(join(root, "site-etc/group"), `root:x:0:\nnogroup:x:${TASK_GID}:\n`);
  const conf = [
    `udiMount=${join(root, "udiMount")}`,
    `loopMount=${join(root, "loopMount")}`,
    `imagePath=${join(root, "images")}`,
    `udiRootPath=${root}`,
    `etcPath=${join(root, "site-etc")}`,
    "modprobePath=/sbin/modprobe",
    "insmodPath=/sbin/insmod",
    "cpPath=/bin/cp",
    "mvPath=/bin/mv",
    "chmodPath=/bin/chmod",
    "ddPath=/bin/dd",
    "rootfsType=tmpfs",
    `imageGateway=file://${join(root, "gateway/gateway.json")}`,
    "system=standin",
    `siteFs=${join(root, "site-home")}:/home`,
    "siteEnv=SHIFTER_RUNTIME=1",
    ...(options.udiRoot ?? []),
  ];
  writeFileSync(udiRootConf, `# udiRoot.conf for the Shifter stand-in\n${conf.join("\n")}\n`, { mode: 0o644 });
  const gatewayFile = join(root, "gateway/gateway.json");
  const db = {
    system: "standin",
    images: {} as Record<string, unknown>,
    pullable: {} as Record<string, unknown>,
    pullDelayMs: 10,
  };
  const saveDb = () => writeFileSync(gatewayFile, `${JSON.stringify(db, null, 2)}\n`, { mode: 0o666 });
  saveDb();
  const loadDb = () => Object.assign(db, JSON.parse(readFileSync(gatewayFile, "utf8")));
  const imagePath = join(root, "images");

  const makeImage = (name: string, spec: ImageSpec): string => {
    const id = imageId(name);
    const dir = join(imagePath, id);
    rmSync(dir, { recursive: true, force: true });
    execFileSync("cp", ["-a", busyboxRootfs(), dir]);
    writeFileSync(join(dir, "etc/jobrt-image"), `${name}\n`);
    for (const d of spec.dirs ?? []) mkdirSync(join(dir, d), { recursive: true });
    for (const [path, content] of Object.entries(spec.files ?? {})) {
      mkdirSync(dirname(join(dir, path)), { recursive: true });
      writeFileSync(join(dir, path), content, { mode: 0o755 });
    }
    const meta = ["FORMAT: VFS", ...(spec.env ?? []).map((e) => `ENV: ${e}`)];
    if (spec.entry) meta.push(`ENTRY: ${spec.entry}`);
    if (spec.cmd) meta.push(`CMD: ${spec.cmd}`);
    if (spec.workdir) meta.push(`WORKDIR: ${spec.workdir}`);
    if (spec.userAcl) meta.push(`USERACL: ${spec.userAcl.join(",")}`);
    if (spec.groupAcl) meta.push(`GROUPACL: ${spec.groupAcl.join(",")}`);
    meta.push(...(spec.extraMeta ?? []));
    writeFileSync(join(imagePath, `${id}.meta`), `${meta.join("\n")}\n`);
    return id;
  };

  const site: StandinSite = {
    root,
    shifter,
    shifterimg,
    udiRootConf,
    imagePath,
    gatewayFile,
    traceDir: join(root, "trace"),
    siteHome: join(root, "site-home"),
    confDir: join(root, "jobrt"),
    addImage(name, spec = {}) {
      const id = makeImage(name, spec);
      loadDb();
      db.images[name] = { id, status: "READY", userAcl: spec.userAcl ?? [], groupAcl: spec.groupAcl ?? [] };
      saveDb();
      return id;
    },
    addPullable(name, final, spec = {}) {
      const id = final === "READY" ? makeImage(name, spec) : imageId(name);
      loadDb();
      db.pullable[name] = { id, final };
      saveDb();
      return id;
    },
    writeShifterConf(lines = []) {
      const has = (k: string) => lines.some((l) => l.toLowerCase().startsWith(`${k.toLowerCase()}=`));
      const all = [
        ...(has("ShifterPath") ? [] : [`ShifterPath=${shifter}`]),
        ...(has("UdiRootConf") ? [] : [`UdiRootConf=${udiRootConf}`]),
        ...lines,
      ];
      writeFileSync(join(root, "jobrt/shifter.conf"), `${all.join("\n")}\n`, { mode: 0o644 });
    },
    traces() {
      const out = execFileSync("sh", ["-c", `cat ${q(join(root, "trace"))}/*.json 2>/dev/null || true`], {
        encoding: "utf8",
      });
      return out
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>);
    },
    remove() {
      rmSync(root, { recursive: true, force: true });
    },
  };
  site.writeShifterConf();
  return site;
}
