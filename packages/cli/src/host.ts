import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { type LogLevel, type NodeConf, RuntimeRegistry, createPackageResolver } from "@jobrt/core";
import { type SiteConfig, confDirFrom, loadSiteConfig } from "@jobrt/launcher";

/** The site install root: runtime packages are resolved from beside @jobrt/cli (DESIGN.md §4). */
export const cliPackageDir = join(dirname(fileURLToPath(import.meta.url)), "..");

export interface Host {
  site: SiteConfig;
  node: NodeConf;
  registry: RuntimeRegistry;
  verbose: number;
  log: (level: LogLevel, message: string) => void;
}

/** One line to stderr, prefixed like every jobrt message. */
export function say(message: string): void {
  process.stderr.write(`jobrt: ${message}\n`);
}

export function createHost(confDirOption: string | undefined, verbose: number): Host {
  const site = loadSiteConfig(confDirFrom(confDirOption));
  const log = (level: LogLevel, message: string) => {
    const shown = level === "error" || level === "warn" || (level === "info" && verbose >= 1) || (level === "verbose" && verbose >= 1) || verbose >= 2;
    if (shown) say(level === "warn" ? `warning: ${message}` : message);
  };
  for (const w of site.warnings) log("warn", w);
  const baseDir = site.pluginDir ?? cliPackageDir;
  const registry = new RuntimeRegistry({
    resolve: createPackageResolver({ baseDir, allow: site.runtimePlugins, log }),
    defaultRuntime: site.defRuntimePlugin,
    initTimeoutMs: site.pluginInitTimeout * 1000,
  });
  const node: NodeConf = {
    nodeName: site.nodeName,
    confDir: site.confDir,
    spoolDir: site.spoolDir,
    killWait: site.killWait,
    hostUid: process.getuid?.() ?? 0,
    log,
  };
  log("verbose", `conf dir ${site.confDir}${site.file ? "" : " (no jobrt.conf: embedded defaults)"}; runtimes resolved from ${baseDir}`);
  return { site, node, registry, verbose, log };
}

/** Finalises the registry after a step: a failing `fini` is reported and makes the status at least 1. */
export async function finishStep(host: Host, status: number): Promise<number> {
  try {
    await host.registry.fini();
    return status;
  } catch (error) {
    say((error as Error).message);
    return Math.max(status, 1);
  }
}
