import { fileURLToPath } from "node:url";
import type { LogLevel } from "@jobrt/core";
import { type Host as LauncherHost, createHost as createLauncherHost } from "@jobrt/launcher";
import { siteConfDir } from "./confdir.js";
import { cliPackageDir } from "./packagedir.js";
import { say } from "./say.js";

/** The launcher's host, with the CLI's verbosity and its log function (what -v shows). */
export interface Host extends LauncherHost {
  verbose: number;
  log: (level: LogLevel, message: string) => void;
}

/**
 * What `jobrt gc` reads from its environment, besides the conf dir it is given: the node name, the
 * default SpoolDir and image cache, where runc is found, runtime oci's time-outs.
 */
const GC_ENVIRONMENT = ["PATH", "HOME", "TMPDIR", "SLURMD_NODENAME", "XDG_CACHE_HOME", "JOBRT_OCI_TIMEOUTS"];

/**
 * This jobrt's `jobrt gc` with this host's configuration, for the task forker to run if jobrt dies
 * while its tasks run (the session adds `--job` and `--pid`).
 */
export function gcAfterDeath(host: Host): { argv: string[]; env: Record<string, string> } {
  const env: Record<string, string> = {};
  for (const name of GC_ENVIRONMENT) if (process.env[name] !== undefined) env[name] = process.env[name];
  return {
    argv: [
      process.execPath,
      "--",
      fileURLToPath(new URL("./bin.js", import.meta.url)),
      "gc",
      "--conf-dir",
      host.site.confDir,
    ],
    env,
  };
}

/** The launcher's host for this conf dir (--conf-dir, else the environment's or the install's), logging as -v says. */
export function createHost(confDirOption: string | undefined, verbose: number): Host {
  const log = (level: LogLevel, message: string) => {
    const shown =
      level === "error" ||
      level === "warn" ||
      (level === "info" && verbose >= 1) ||
      (level === "verbose" && verbose >= 1) ||
      verbose >= 2;
    if (shown) say(level === "warn" ? `warning: ${message}` : message);
  };
  return {
    ...createLauncherHost({ confDir: siteConfDir(confDirOption), installDir: cliPackageDir, log }),
    verbose,
    log,
  };
}
