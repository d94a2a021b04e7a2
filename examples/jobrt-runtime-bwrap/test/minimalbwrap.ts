import { accessSync, constants } from "node:fs";
import { delimiter, join } from "node:path";
import { type ExecSpec, definePlugin, jobrtError, packageVersion } from "@jobrt/core";

/** The step state: what setup decided, the same for every task of the step. */
interface State {
  bwrap: string;
  args: string[];
}

function findBwrap(): string {
  for (const dir of (process.env.PATH ?? "/usr/bin:/bin").split(delimiter)) {
    try {
      accessSync(join(dir, "bwrap"), constants.X_OK);
      return join(dir, "bwrap");
    } catch {
      // the next PATH entry
    }
  }
  throw jobrtError("ERR_CONTAINER_NOT_CONFIGURED", { problem: "runtime bwrap needs bwrap on PATH" });
}

export default definePlugin<State>(
  {
    name: "bwrap",
    type: "runtime/bwrap",
    version: packageVersion(import.meta.url),
    capabilities: ["container"],
    accepts: [],
  },
  {
    setup({ step }) {
      // The host's tree read-only, the step's cwd writable, a /dev, /proc and /tmp of its own. The
      // sandbox's init dies with bwrap, and the kernel kills the rest of its pid namespace.
      const args = ["--unshare-pid", "--die-with-parent", "--new-session", "--ro-bind", "/", "/"];
      args.push("--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--bind", step.cwd, step.cwd);
      return { bwrap: findBwrap(), args: [...args, "--chdir", step.cwd] };
    },
    run({ step, task, state }): ExecSpec {
      if (!state) throw jobrtError("ERR_RUNTIME_CONTRACT", { problem: "bwrap: run before setup" });
      return {
        argv: [state.bwrap, ...state.args, "--", ...task.argv],
        env: task.env,
        cwd: step.cwd,
        supervise: {
          // bwrap forwards no signal and dies of one: the host signals the sandbox's session.
          stop: "child-group",
          // bwrap exits 1 when it cannot exec the command: the host looks it up as the sandbox sees it.
          missingCommand: {
            command: task.argv[0] ?? "",
            view: {
              root: "/",
              mounts: [
                { destination: "/dev" },
                { destination: "/proc" },
                { destination: "/tmp", empty: true },
                { destination: step.cwd, source: step.cwd },
              ],
            },
            path: task.env.PATH,
            cwd: step.cwd,
            exitCodes: [1],
          },
        },
      };
    },
  },
);
