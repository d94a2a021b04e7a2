import { closeSync, constants, fstatSync, lstatSync, openSync, readSync } from "node:fs";
import { basename, dirname, isAbsolute, join } from "node:path";
import { confDirFrom } from "@jobrt/launcher";
import { cliPackageDir } from "./packagedir.js";
import { say } from "./say.js";

/** The file beside an install that names its conf dir (docs/site.md, "The Epilog without a wrapper"). */
const CONF_DIR_FILE = "jobrt.confdir";

/**
 * The install root: the directory whose node_modules holds @jobrt/cli (a site prefix, or a global
 * install's lib/); undefined when jobrt does not run from a node_modules tree (a source checkout).
 */
function installRoot(packageDir = cliPackageDir): string | undefined {
  const scope = dirname(packageDir);
  if (basename(scope) !== "@jobrt" || basename(dirname(scope)) !== "node_modules") return undefined;
  return dirname(dirname(scope));
}

/** Why a file or directory root relies on could be someone else's, or undefined when it is root's alone. */
function notRootsAlone(stat: { uid: number; mode: number }): string | undefined {
  if (stat.uid !== 0) return `owned by uid ${stat.uid}, not root`;
  if ((stat.mode & 0o022) !== 0) return `writable by group or others (mode ${(stat.mode & 0o7777).toString(8)})`;
  return undefined;
}

/**
 * The conf dir named by `<install root>/jobrt.confdir`: one absolute path. The Epilog runs as root
 * with no environment, so the file (and its directory) count only when root's alone; anything else
 * is one warning and the default.
 */
function confDirFromInstall(root: string | undefined = installRoot()): string | undefined {
  if (root === undefined) return undefined;
  const file = join(root, CONF_DIR_FILE);
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    say(`${file}: ignored (${(error as NodeJS.ErrnoException).code}); using /etc/jobrt`);
    return undefined;
  }
  try {
    const stat = fstatSync(fd);
    const fileWhy = !stat.isFile()
      ? "not a regular file"
      : stat.size > 4096
        ? "larger than 4096 bytes"
        : notRootsAlone(stat);
    const dirWhy = notRootsAlone(lstatSync(root));
    if (fileWhy !== undefined || dirWhy !== undefined) {
      say(`${file}: ignored: ${fileWhy ?? `its directory is ${dirWhy}`}; using /etc/jobrt`);
      return undefined;
    }
    const buffer = Buffer.alloc(stat.size);
    const text = buffer
      .subarray(0, readSync(fd, buffer, 0, stat.size, 0))
      .toString("utf8")
      .trim();
    if (!isAbsolute(text) || text.includes("\n") || text.includes("\0")) {
      say(`${file}: ignored: not one absolute path; using /etc/jobrt`);
      return undefined;
    }
    return text;
  } finally {
    closeSync(fd);
  }
}

/** Where the conf dir is: --conf-dir, else $JOBRT_CONF_DIR, else `<install root>/jobrt.confdir`, else /etc/jobrt. */
export function siteConfDir(option: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  if (option !== undefined || env.JOBRT_CONF_DIR) return confDirFrom(option, env);
  return confDirFromInstall() ?? confDirFrom(undefined, env);
}
