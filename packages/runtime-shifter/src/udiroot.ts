import { statSync } from "node:fs";
import { jobrtError, readConfText } from "@jobrt/core";

/** The parts of Shifter's udiRoot.conf a launcher needs (Shifter's own syntax, not Slurm's). */
export interface UdiRootConf {
  file: string;
  udiRootPath?: string;
  imagePath?: string;
  defaultImageType?: string;
  allowLocalChroot: boolean;
  /** siteFs entries; `to` is where the host path appears in the container. */
  siteFs: { from: string; to: string }[];
  defaultModules: string[];
  modules: Map<string, UdiModule>;
}

export interface UdiModule {
  name: string;
  enabled: boolean;
  conflicts: string[];
}

/**
 * Reads udiRoot.conf the way Shifter does: `key=value`, a comment only when `#` is in column 0,
 * lines without `=` ignored, a trailing backslash continues the value, no quoting. Unknown keys are
 * left to Shifter itself (it fails on them); this reader only extracts what validation needs.
 */
export function parseUdiRootConf(text: string, file: string): UdiRootConf {
  const values = new Map<string, string>();
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    let line = lines[i] as string;
    while (line.endsWith("\\") && i + 1 < lines.length) line = line.slice(0, -1) + (lines[++i] as string);
    if (line.startsWith("#")) continue;
    const eq = line.indexOf("=");
    if (eq < 0) continue;
    values.set(line.slice(0, eq).trim(), line.slice(eq + 1).trim());
  }
  const conf: UdiRootConf = {
    file,
    allowLocalChroot: values.get("allowLocalChroot") === "1",
    siteFs: [],
    defaultModules: splitList(values.get("defaultModules") ?? ""),
    modules: new Map(),
  };
  const set = (key: string, field: "udiRootPath" | "imagePath" | "defaultImageType") => {
    const v = values.get(key);
    if (v) conf[field] = v;
  };
  set("udiRootPath", "udiRootPath");
  set("imagePath", "imagePath");
  set("defaultImageType", "defaultImageType");
  // Shifter's parser splits siteFs on ';' (the .rst says spaces; the code disagrees).
  const siteFs = values.get("siteFs") ?? "/home:/home";
  for (const entry of siteFs
    .split(";")
    .map((s) => s.trim())
    .filter((s) => s !== "")) {
    const [from, to] = entry.split(":");
    if (from) conf.siteFs.push({ from, to: to?.startsWith("/") ? to : from });
  }
  for (const [key, value] of values) {
    const m = /^module_([^_]+)_(.+)$/.exec(key);
    if (!m) continue;
    const name = m[1] as string;
    const mod = conf.modules.get(name) ?? { name, enabled: true, conflicts: [] };
    if (m[2] === "enabled") mod.enabled = value !== "0";
    if (m[2] === "conflict") mod.conflicts = splitList(value);
    conf.modules.set(name, mod);
  }
  return conf;
}

function splitList(text: string): string[] {
  return text.split(/[\s,]+/).filter((s) => s !== "");
}

/** Loads udiRoot.conf; a missing file at the default path means "no site facts" (undefined). */
export function loadUdiRootConf(path: string, explicit: boolean, hostUid: number): UdiRootConf | undefined {
  const text = readConfText(path, !explicit);
  if (text === undefined) return undefined;
  assertTrustedFile(path, hostUid, "udiRoot.conf");
  return parseUdiRootConf(text, path);
}

/**
 * A config that decides what runs as the job user must not be writable by anyone but its owner,
 * and the owner must be root or the host's own user (what Shifter itself demands of udiRoot.conf).
 */
export function assertTrustedFile(path: string, hostUid: number, what: string): void {
  const st = statSync(path);
  if (st.uid !== 0 && st.uid !== hostUid) {
    throw jobrtError(
      "ERR_CONF",
      { where: path, problem: `${what} must be owned by root (owner is uid ${st.uid})` },
      { details: { file: path } },
    );
  }
  if ((st.mode & 0o022) !== 0) {
    throw jobrtError(
      "ERR_CONF",
      {
        where: path,
        problem: `${what} must not be group- or world-writable (mode ${(st.mode & 0o777).toString(8)}): chmod go-w ${path}`,
      },
      {
        details: { file: path },
      },
    );
  }
}
