import { accessSync, constants, lstatSync, realpathSync, statSync } from "node:fs";
import { isAbsolute, join, posix, resolve } from "node:path";
import { type ContainerRequest, type StepRecord, containerImage, jobrtError, parseSlurmBool } from "@jobrt/core";
import type { CharliecloudConf } from "./conf.js";
import { reject, show } from "./reject.js";

export interface Bind {
  source: string;
  target: string;
}

/** A validated container request, in the terms of ch-run's options. */
export interface ChRunRequest {
  /** Absolute, symlink-free image directory. */
  image: string;
  binds: Bind[];
  /** `--container-env` NAME=VALUE pairs, in order. */
  env: [string, string][];
  clearEnv: boolean;
  /** Initial directory inside the container, when one applies. */
  workdir?: string;
  /** A host file in ch-run's --set-env format, from `--container-opt env-file=PATH`. */
  envFile?: string;
  privateTmp: boolean;
  home: boolean;
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const OPTION_KEYS = ["env-file", "private-tmp", "home", "image"] as const;

function checkGuestPath(field: string, spec: string, what: string, path: string): void {
  if (!path.startsWith("/")) throw reject(field, spec, `the ${what} ${show(path)} is not an absolute path`);
  if (path.split("/").includes("..")) throw reject(field, spec, `the ${what} ${show(path)} contains '..'`);
  const normal = posix.normalize(path).replace(/(.)\/$/, "$1");
  if (normal !== path) throw reject(field, spec, `the ${what} ${show(path)} is not in normal form (write ${normal})`);
}

/** True when `path` exists inside the image without following a final symlink out of it. */
function existsInImage(image: string, path: string): boolean {
  try {
    lstatSync(join(image, path));
    return true;
  } catch {
    return false;
  }
}

function under(path: string, prefix: string): boolean {
  return prefix === "/" || path === prefix || path.startsWith(`${prefix}/`);
}

function parseImage(c: ContainerRequest, conf: CharliecloudConf, cwd: string, rootfs: string | undefined): string {
  const field = rootfs === undefined ? "--container" : "--container-image";
  const value = rootfs ?? (c.value as string);
  if (value.includes("\0") || value.includes("\n"))
    throw reject(field, value, "contains a NUL or newline", "ERR_CONTAINER_IMAGE");
  const path = isAbsolute(value) ? value : resolve(cwd, value);
  let real: string;
  try {
    real = realpathSync(path);
  } catch {
    throw reject(
      field,
      value,
      `image directory ${path} does not exist (give a Charliecloud image directory, e.g. one made by ch-convert)`,
      "ERR_CONTAINER_IMAGE",
    );
  }
  if (!statSync(real).isDirectory()) {
    throw reject(
      field,
      value,
      `${real} is not a directory (this runtime runs image directories; SquashFS files are not supported)`,
      "ERR_CONTAINER_IMAGE",
    );
  }
  // ImageDirs limits what a job names; the host's image store is not the job's to name.
  if (rootfs === undefined && conf.imageDirs.length > 0 && !conf.imageDirs.some((d) => under(real, d))) {
    throw reject(
      field,
      value,
      `${real} is not under ImageDirs=${conf.imageDirs.join(",")}${conf.file ? ` (${conf.file})` : ""}`,
      "ERR_CONTAINER_IMAGE",
    );
  }
  for (const f of ["etc/passwd", "etc/group"]) {
    try {
      if (!statSync(join(real, f)).isFile()) throw new Error("not a file");
    } catch {
      throw reject(
        field,
        value,
        `the image has no /${f}; ch-run binds the host's over it, so create it (an empty file will do)`,
        "ERR_CONTAINER_IMAGE",
      );
    }
  }
  if (!existsInImage(real, "bin") && !existsInImage(real, "usr/bin")) {
    throw reject(
      field,
      value,
      `${real} has neither /bin nor /usr/bin: it does not look like an image directory`,
      "ERR_CONTAINER_IMAGE",
    );
  }
  return real;
}

function parseBind(spec: string, image: string): Bind {
  const field = "--container-volume";
  if (/[\0\n,]/.test(spec)) throw reject(field, spec, "contains a NUL, newline or ','");
  const parts = spec.split(":");
  if (parts.length > 2)
    throw reject(field, spec, "write SRC[:DST]; ch-run binds are read-write and take no flags such as :ro");
  const source = parts[0] as string;
  const target = parts[1] ?? source;
  checkGuestPath(field, spec, "source", source);
  checkGuestPath(field, spec, "target", target);
  if (target === "/") throw reject(field, spec, "the target is the container's root");
  try {
    statSync(source);
  } catch {
    throw reject(field, spec, `the source ${source} does not exist on this node`);
  }
  if (!existsInImage(image, target)) {
    throw reject(
      field,
      spec,
      `the target ${target} does not exist in the image (ch-run mounts images read-only, so it cannot create it)`,
    );
  }
  return { source, target };
}

function flag(key: string, values: string[]): boolean {
  const value = values[0] as string;
  const b = parseSlurmBool(value);
  if (b === undefined) throw reject(`--container-opt ${key}`, value, "is not a boolean (use yes/no, true/false, 1/0)");
  return b;
}

/** The step's `--container-image REF`, which the host's image service turns into a directory. */
export function imageReference(step: StepRecord): string | undefined {
  const ref = containerImage(step.container, "runtime/charliecloud");
  if (ref !== undefined && step.container?.value)
    throw reject(
      "--container-image",
      ref,
      "give either --container (an image directory) or --container-image, not both",
    );
  return ref;
}

/**
 * Checks a job's container request against ch-run and the site's charliecloud.conf. Throws a
 * JobrtError naming the option and the rule broken; touches nothing. `rootfs` is the directory
 * the image service gave for `--container-image` (setup only).
 */
export function parseRequest(step: StepRecord, conf: CharliecloudConf, rootfs?: string): ChRunRequest {
  const c = step.container;
  if (!c || (!c.value && rootfs === undefined)) {
    throw jobrtError(
      "ERR_CONTAINER_NOT_CONFIGURED",
      {
        problem:
          "runtime charliecloud needs --container <image directory> (a Charliecloud image, e.g. made with ch-convert)",
      },
      { details: { runtime: "runtime/charliecloud", key: "--container" } },
    );
  }
  // --container-module and --container-entrypoint are refused by the host: meta.accepts leaves them out.
  const image = parseImage(c, conf, step.cwd, rootfs);
  if (c.volumes.length > 0 && !conf.allowBinds) {
    throw reject(
      "--container-volume",
      c.volumes[0] as string,
      `binds are turned off on this node (AllowBinds=no${conf.file ? ` in ${conf.file}` : ""})`,
    );
  }
  const binds = c.volumes.map((v) => parseBind(v, image));
  const request: ChRunRequest = {
    image,
    binds,
    env: c.env.map(parseEnv),
    clearEnv: c.clearEnv,
    privateTmp: false,
    home: false,
  };
  for (const [key, values] of Object.entries(c.options)) applyOption(request, key, values);
  const workdir = workdirOf(c.workdir, step.cwd, image, binds);
  if (workdir !== undefined) request.workdir = workdir;
  return request;
}

/** One `--container-env NAME=VALUE`. */
function parseEnv(e: string): [string, string] {
  const eq = e.indexOf("=");
  const name = eq < 0 ? e : e.slice(0, eq);
  if (eq < 0) throw reject("--container-env", e, "write NAME=VALUE");
  if (!ENV_NAME.test(name))
    throw reject("--container-env", e, `${show(name)} is not a variable name ([A-Za-z_][A-Za-z0-9_]*)`);
  const value = e.slice(eq + 1);
  if (/[\0\n]/.test(value)) throw reject("--container-env", e, "the value contains a NUL or newline");
  return [name, value];
}

/** One `--container-opt KEY=VALUE` into the request. */
function applyOption(request: ChRunRequest, key: string, values: string[]): void {
  if (!(OPTION_KEYS as readonly string[]).includes(key)) {
    throw reject(
      "--container-opt",
      `${key}=${values[0] ?? ""}`,
      `unknown option for charliecloud (known: ${OPTION_KEYS.join(", ")})`,
    );
  }
  if (values.length !== 1) throw reject(`--container-opt ${key}`, values.join(","), "give it once");
  if (key === "env-file") request.envFile = readableEnvFile(values[0] as string);
  else if (key === "private-tmp") request.privateTmp = flag(key, values);
  else if (key === "home") request.home = flag(key, values);
}

function readableEnvFile(file: string): string {
  if (!isAbsolute(file)) throw reject("--container-opt env-file", file, "is not an absolute path");
  try {
    if (!statSync(file).isFile()) throw new Error("not a file");
    accessSync(file, constants.R_OK);
  } catch {
    throw reject("--container-opt env-file", file, "is not a readable file");
  }
  return file;
}

/** --container-workdir, checked; else the step's cwd when the container has it (as srun --chdir). */
function workdirOf(
  workdir: string | undefined,
  cwd: string,
  image: string,
  binds: ChRunRequest["binds"],
): string | undefined {
  const insideBind = (p: string) => binds.some((b) => under(p, b.target));
  if (workdir !== undefined) {
    checkGuestPath("--container-workdir", workdir, "directory", workdir);
    if (!existsInImage(image, workdir) && !insideBind(workdir))
      throw reject("--container-workdir", workdir, "does not exist in the image or under a --container-volume target");
    return workdir;
  }
  return isAbsolute(cwd) && (existsInImage(image, cwd) || insideBind(cwd)) ? cwd : undefined;
}
