import { type Logger, type NodeConf, RuntimeRegistry, createPackageResolver } from "@jobrt/core";
import { type Collected, collectOrphans } from "./session/journal/collect.js";
import { type TrackerRecord, probeTracker } from "./session/proctrack/proctrack.js";
import { type Spool, openSpool } from "./session/journal/spool.js";
import { type StepView, listSteps } from "./session/journal/steplist.js";
import { userSpools } from "./session/journal/userjournals.js";
import { type SiteConfig, loadSiteConfig, nodeNameFor, spoolDirFor } from "./siteconf.js";

export interface HostOptions {
  /** The conf dir, holding jobrt.conf (none there: the embedded defaults). */
  confDir: string;
  /**
   * Where runtime packages are resolved from when jobrt.conf sets no PluginDir: the host program's
   * install root (docs/decisions.md, "Runtimes resolve from the site install root").
   */
  installDir: string;
  /** Where the host's lines go; the program decides which levels it shows. */
  log: Logger;
  /** The environment the node name is read from (SLURMD_NODENAME); default process.env. */
  env?: NodeJS.ProcessEnv;
}

/** A host program's view of this node: what every command of it starts from. */
export interface Host {
  site: SiteConfig;
  node: NodeConf;
  /** Resolves from PluginDir (else `installDir`), allows RuntimePlugins, defaults to DefRuntimePlugin. */
  registry: RuntimeRegistry;
  /** The directory runtime packages are resolved from. */
  pluginDir: string;
  /** How this node tracks a step's processes under its ProcTrack, probed as this user. */
  tracking(): TrackerRecord;
  /** The steps in this user's journal and, with `others` (root), the job users' journals of a shared SpoolDir. */
  steps(others: boolean): StepView[];
  /** Cleans up the steps whose host died (`jobrt gc`): this user's, and as root the job users' too. */
  collectOrphans(options: { jobId?: number; hostPid?: number }): Promise<Collected[]>;
}

/**
 * The host, assembled once for every program that runs steps on this node: jobrt.conf (its
 * warnings logged), the runtime registry with its package resolver, the node (its name from
 * SLURMD_NODENAME under Slurm, so `jobrt exec` and `jobrt gc` agree on SpoolDir's %n), and the
 * journals and process tracking of this node. Call `registry.fini()` when done.
 */
export function createHost(options: HostOptions): Host {
  const { log } = options;
  const site = loadSiteConfig(options.confDir);
  for (const warning of site.warnings) log("warn", warning);
  const pluginDir = site.pluginDir ?? options.installDir;
  const registry = new RuntimeRegistry({
    resolve: createPackageResolver({ baseDir: pluginDir, allow: site.runtimePlugins, log }),
    defaultRuntime: site.defRuntimePlugin,
    initTimeoutMs: site.pluginInitTimeout * 1000,
  });
  const nodeName = nodeNameFor(site, options.env);
  const node: NodeConf = {
    nodeName,
    confDir: site.confDir,
    spoolDir: spoolDirFor(site.spoolDir, nodeName),
    killWait: site.killWait,
    hostUid: process.getuid?.() ?? 0,
    log,
  };
  log(
    "verbose",
    `conf dir ${site.confDir}${site.file ? "" : " (no jobrt.conf: embedded defaults)"}; runtimes resolved from ${pluginDir}`,
  );
  return {
    site,
    node,
    registry,
    pluginDir,
    tracking: () => probeTracker(site.procTrack),
    steps: (others) => journals(node, others).flatMap(listSteps),
    async collectOrphans({ jobId, hostPid }) {
      const results: Collected[] = [];
      // Root also collects job users' journals in a shared SpoolDir: the Slurm Epilog (docs/slurm.md).
      for (const spool of journals(node, true)) {
        results.push(
          ...(await collectOrphans(spool, registry, node, {
            ...(jobId !== undefined ? { jobId } : {}),
            ...(hostPid !== undefined ? { hostPid } : {}),
            log: () => {},
          })),
        );
      }
      return results;
    },
  };
}

/**
 * This user's journal, if SpoolDir has one (never made here), then with `others` the job users'
 * (root only). openSpool checks the path to SpoolDir first, also when root has no journal there.
 */
function journals(node: NodeConf, others: boolean): Spool[] {
  const own = openSpool(node.spoolDir, node.nodeName, { create: false });
  return [...(own ? [own] : []), ...(others ? userSpools(node.spoolDir) : [])];
}
