import { isAbsolute, join, posix } from "node:path";
import { type ConfSchema, loadConfFile } from "@jobrt/core";

/** charliecloud.conf in the site's conf dir (Slurm syntax, like oci.conf). Every key is optional. */
export interface CharliecloudConf {
  /** ch-run to use: an absolute path, or a name looked up on the host's PATH. */
  chRun: string;
  /** When non-empty, image directories must lie under one of these (after resolving symlinks). */
  imageDirs: string[];
  /** Whether jobs may add --container-volume binds. */
  allowBinds: boolean;
  /** Where the values came from, for messages. */
  file?: string;
}

const absoluteDir = (value: never): string | undefined => {
  const list = value as unknown as string[];
  const bad = list.find((p) => !isAbsolute(p) || posix.normalize(p) !== p.replace(/(.)\/$/, "$1"));
  return bad === undefined ? undefined : `${JSON.stringify(bad)} is not an absolute path in normal form`;
};

export const CONF_SCHEMA: ConfSchema = {
  ChRun: { type: "string", check: (v: never) => ((v as string) === "" ? "must not be empty" : undefined) },
  ImageDirs: { type: "list", check: absoluteDir },
  AllowBinds: { type: "bool" },
};

export const CONF_FILE = "charliecloud.conf";

/** Reads `<confDir>/charliecloud.conf`; embedded defaults when it does not exist. Errors name file:line. */
export function loadConf(confDir: string): CharliecloudConf {
  const path = join(confDir, CONF_FILE);
  const parsed = loadConfFile(path, CONF_SCHEMA);
  const v = parsed?.values ?? {};
  return {
    chRun: (v.ChRun as string | undefined) ?? "ch-run",
    imageDirs: (v.ImageDirs as string[] | undefined) ?? [],
    allowBinds: (v.AllowBinds as boolean | undefined) ?? true,
    ...(parsed ? { file: path } : {}),
  };
}
