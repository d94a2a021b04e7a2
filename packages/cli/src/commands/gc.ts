import { type OrphanFilter, collectOrphan, findOrphanSteps } from "@jobrt/launcher";
import { JobrtError } from "@jobrt/core";
import { flag, one, parseCommandLine, positiveInt } from "../args.js";
import { GC_HELP } from "../help.js";
import { type Host, createHost, say } from "../host.js";

/**
 * Cleans up the steps whose jobrt died (SIGKILL, OOM, power loss) and returns how many could not
 * be cleaned. Live steps are never touched.
 */
export async function collectGarbage(host: Host, quiet: boolean, filter: OrphanFilter = {}): Promise<number> {
  let failed = 0;
  for (const orphan of findOrphanSteps(host.node.spoolDir, filter)) {
    const result = await collectOrphan(orphan, host.registry, host.node);
    if (!result) continue;
    const what = `step ${orphan.jobId}.${orphan.stepId}`;
    if (result.errors.length > 0) {
      failed++;
      say(`gc: ${what}: cleanup failed, kept ${orphan.dir} for another try: ${result.errors.join("; ")}`);
    } else if (!quiet) {
      process.stdout.write(`gc: ${what}: killed ${result.killed} task process group(s); cleaned up ${result.cleaned.join(", ") || "no runtime"}\n`);
    } else {
      host.log("info", `gc: ${what} of a jobrt that died was cleaned up (${result.cleaned.join(", ") || "no runtime"})`);
    }
  }
  return failed;
}

export async function gcCommand(args: string[]): Promise<number> {
  const parsed = parseCommandLine(args, { allowed: new Set(["job", "verbose", "conf-dir", "help"]), components: false, needCommand: false, command: "gc" });
  if (flag(parsed.step, "help")) {
    process.stdout.write(GC_HELP);
    return 0;
  }
  if (parsed.components[0]!.argv.length > 0) throw new JobrtError("ERR_USAGE", `gc: unexpected argument ${JSON.stringify(parsed.components[0]!.argv[0])}`);
  // The Slurm Epilog collects what the ending job left (docs/slurm.md); same bound as run's --jobid.
  const jobText = one(parsed.step, "job");
  const filter: OrphanFilter = jobText === undefined ? {} : { jobId: positiveInt(jobText, "job", 4_294_967_000) };
  const host = createHost(one(parsed.step, "conf-dir"), parsed.step.get("verbose")?.length ?? 0);
  // In a Slurm Epilog: the node name the job's `jobrt exec` used (it is part of oci's container ids).
  if (process.env.SLURMD_NODENAME) host.node.nodeName = process.env.SLURMD_NODENAME;
  try {
    return (await collectGarbage(host, false, filter)) > 0 ? 1 : 0;
  } finally {
    await host.registry.fini();
  }
}
