import { jobrtError } from "@jobrt/core";
import { collectImages, loadImageSettings } from "@jobrt/images";
import { flag, one, parseCommandLine, positiveInt } from "../args.js";
import { createHost } from "../host.js";
import { say } from "../say.js";

/**
 * `jobrt gc`: cleans up the steps whose jobrt died (SIGKILL, OOM, power loss), with `--job N` only
 * those of job N (a Slurm Epilog). Live steps are never touched. Exit 1 when one could not be
 * cleaned (it is kept for another try, or set aside when trying again cannot help).
 */
export async function gcCommand(args: string[]): Promise<number> {
  const parsed = parseCommandLine(args, { command: "gc", components: false, needCommand: false });
  if (flag(parsed.step, "help")) {
    process.stdout.write((await import("../help.js")).GC_HELP);
    return 0;
  }
  if (parsed.components[0]!.argv.length > 0)
    throw jobrtError("ERR_USAGE", {
      problem: `gc: unexpected argument ${JSON.stringify(parsed.components[0]!.argv[0])}`,
    });
  const jobText = one(parsed.step, "job");
  const jobId = jobText === undefined ? undefined : positiveInt(jobText, "job", 4_294_967_295);
  const pidText = one(parsed.step, "pid");
  // Linux's largest pid (PID_MAX_LIMIT, 2^22).
  const hostPid = pidText === undefined ? undefined : positiveInt(pidText, "pid", 4_194_304);
  const host = createHost(one(parsed.step, "conf-dir"), parsed.step.get("verbose")?.length ?? 0);
  try {
    const results = await host.collectOrphans({
      ...(jobId !== undefined ? { jobId } : {}),
      ...(hostPid !== undefined ? { hostPid } : {}),
    });
    for (const r of results) {
      if (r.report !== undefined) say(r.report);
      else
        process.stdout.write(
          `gc: step ${r.jobId}.${r.stepId}: killed ${r.killed} task process group(s); cleaned up ${r.cleaned.join(", ") || "no runtime"}\n`,
        );
    }
    // After the dead steps' cleanup, which gives back their images: what is left mounted is unused.
    for (const line of await collectImages(loadImageSettings(host.node.confDir), jobId))
      process.stdout.write(`${line}\n`);
    return results.some((r) => r.errors.length > 0) ? 1 : 0;
  } finally {
    await host.registry.fini();
  }
}
