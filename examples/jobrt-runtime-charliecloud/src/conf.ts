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

const absoluteDir = (list: string[]): string | undefined => {
  const bad = list.find((p) => !isAbsolute(p) || posix.normalize(p) !== p.replace(/(.)\/$/, "$1"));
  return bad === undefined ? undefined : `${JSON.stringify(bad)} is not an absolute path in normal form`;
};

export const CONF_SCHEMA = {
  ChRun: { type: "string", check: (v: string) => (v === "" ? "must not be empty" : undefined) },
  ImageDirs: { type: "list", check: absoluteDir },
  AllowBinds: { type: "bool" },
} satisfies ConfSchema;

export const CONF_FILE = "charliecloud.conf";

/** Reads `<confDir>/charliecloud.conf`; embedded defaults when it does not exist. Errors name file:line. */
export function loadConf(confDir: string): CharliecloudConf {
  const path = join(confDir, CONF_FILE);
  const parsed = loadConfFile(path, CONF_SCHEMA);
  return {
    chRun: parsed?.values.ChRun ?? "ch-run",
    imageDirs: parsed?.values.ImageDirs ?? [],
    allowBinds: parsed?.values.AllowBinds ?? true,
    ...(parsed ? { file: path } : {}),
  };
}
