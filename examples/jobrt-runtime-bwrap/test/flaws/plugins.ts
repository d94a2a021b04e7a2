import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ExecSpec, NOT_SUPPORTED, type RuntimePlugin, definePlugin } from "@jobrt/core";
import bwrap from "../../src/index.js";
import type { SandboxState } from "../../src/sandbox.js";

/** One deliberate flaw each: the kinds of mistakes a wrapper runtime makes (issue 14's list). */
export type Flaw =
  | "tmp-leak"
  | "slurm-env-only"
  | "module-state"
  | "wipes-spool"
  | "setup-helper"
  | "outlives-sigterm"
  | "ignores-cwd"
  | "missing-to-1"
  | "sigterm-cut-short"
  | "escapes"
  | "view-of-host";

/** Pids of the helpers "setup-helper" leaves running: the suite kills them when it ends. */
export const strayHelpers: number[] = [];

/** Marks the sandboxes "outlives-sigterm" orphans, so the suite can find and end exactly those. */
export const ORPHAN_MARK = `jobrt-bwrap-flaw-${process.pid}-${Date.now()}`;

// Only the "module-state" flaw uses it: per-step state in module scope, the API 1 habit.
let lastState: SandboxState | undefined;

type Spec = ExecSpec;

/** The spec without the host's supervision: bwrap as a naive wrapper would start it. */
function unsupervised(spec: Spec): Spec {
  const { supervise: _, ...rest } = spec;
  return rest;
}

function edit(flaw: Flaw, spec: Spec): Spec {
  switch (flaw) {
    case "slurm-env-only":
      return { ...spec, env: Object.fromEntries(Object.entries(spec.env).filter(([k]) => k.startsWith("SLURM_"))) };
    case "ignores-cwd": {
      const argv = [...spec.argv];
      argv[argv.indexOf("--chdir") + 1] = "/";
      return { ...spec, argv };
    }
    case "missing-to-1": {
      // bwrap's own exit 1 for a command it cannot exec, passed on as it is.
      const { missingCommand: _, ...supervise } = spec.supervise ?? {};
      return { ...spec, supervise };
    }
    case "sigterm-cut-short": {
      // bwrap signalled with its whole group: it dies at once and takes the sandbox with it
      // (--die-with-parent), the task's handler cut short.
      const { stop: _, ...supervise } = spec.supervise ?? {};
      return { ...spec, supervise };
    }
    case "escapes": {
      // The sandbox in a session of its own (--new-session) without --die-with-parent and
      // --unshare-pid: what the task leaves in the background outlives it unless a cgroup kills it.
      const argv = spec.argv.filter((a) => a !== "--die-with-parent" && a !== "--unshare-pid");
      return { ...spec, argv };
    }
    case "view-of-host": {
      // Run with --container ROOTFS, but declares the host's tree as the sandbox's /: a command the
      // image lacks and the host has is "found", and bwrap's exit 1 for it stays 1.
      const check = spec.supervise?.missingCommand;
      if (!check) return spec;
      return { ...spec, supervise: { ...spec.supervise, missingCommand: { ...check, view: { ...check.view, root: "/" } } } };
    }
    case "outlives-sigterm": {
      // "leader" (bwrap alone gets the signal) and without --die-with-parent: bwrap dies, its
      // sandbox (its own session) runs on.
      const argv = spec.argv.filter((a) => a !== "--die-with-parent");
      argv.splice(1, 0, "--setenv", "JOBRT_BWRAP_FLAW_MARK", ORPHAN_MARK);
      return { ...unsupervised(spec), argv, signals: "leader" };
    }
    default:
      return spec;
  }
}

/** The real bwrap runtime with one flaw. */
export function flawedBwrap(flaw: Flaw): RuntimePlugin<SandboxState> {
  const real = bwrap;
  return definePlugin<SandboxState>(real.meta, {
    init: (ctx) => real.init(ctx),
    fini: () => real.fini(),
    validate: (ctx) => real.validate?.(ctx),
    taskInit: (ctx) => real.taskInit(ctx),
    async setup(ctx) {
      const state = (await real.setup(ctx)) as SandboxState;
      if (flaw === "tmp-leak") mkdtempSync(join(tmpdir(), `bwrap-${ctx.step.jobId}-`));
      if (flaw === "module-state") lastState = state;
      if (flaw === "setup-helper") {
        const helper = spawn("sleep", ["300"], { detached: true, stdio: "ignore" });
        helper.unref();
        if (helper.pid) strayHelpers.push(helper.pid);
      }
      return state;
    },
    async run(ctx) {
      const state = flaw === "module-state" ? lastState : ctx.state;
      const spec = await real.run({ ...ctx, state });
      if (spec === NOT_SUPPORTED || !state) return spec;
      return edit(flaw, spec);
    },
    async cleanup(ctx) {
      await real.cleanup(ctx);
      if (flaw === "wipes-spool") {
        for (const name of readdirSync(ctx.node.spoolDir)) rmSync(join(ctx.node.spoolDir, name), { recursive: true, force: true });
      }
    },
  });
}

/** Ends the sandboxes "outlives-sigterm" orphaned: only processes carrying this run's mark. */
export function killOrphans(): void {
  for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(ORPHAN_MARK)) process.kill(Number(pid), "SIGKILL");
    } catch {
      // gone, or not ours to read
    }
  }
}
