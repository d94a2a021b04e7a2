// Runs `bwrap ARGS...` and forwards SIGINT, SIGTERM and SIGHUP to the sandbox's session, so the
// task's own handlers run and it exits in its own time (the host SIGKILLs after KillWait).
// bwrap does not forward signals, and bwrap dying (--die-with-parent) kills the whole sandbox.
// Usage: node forward.mjs BWRAP ARGS... (the runtime's ExecSpec; see src/command.ts).
import { spawn } from "node:child_process";

const [bwrap, ...args] = process.argv.slice(2);
if (!bwrap) {
  process.stderr.write("jobrt-runtime-bwrap forward.mjs: usage: forward.mjs BWRAP ARGS...\n");
  process.exit(2);
}
const env = { ...process.env };
if (env.JOBRT_BWRAP_NODE_OPTIONS !== undefined) {
  env.NODE_OPTIONS = env.JOBRT_BWRAP_NODE_OPTIONS;
  delete env.JOBRT_BWRAP_NODE_OPTIONS;
}

// fd 3 carries bwrap's JSON status: the first document names the sandbox's first process, which
// --new-session makes the leader of the sandbox's own process group.
const child = spawn(bwrap, ["--json-status-fd", "3", ...args], { env, stdio: ["inherit", "inherit", "inherit", "pipe"] });
let sandboxGroup = 0;
const pending = [];
let status = "";
child.stdio[3].setEncoding("utf8");
child.stdio[3].on("data", (chunk) => {
  status += chunk;
  const m = /"child-pid"\s*:\s*(\d+)/.exec(status);
  if (m && sandboxGroup === 0) {
    sandboxGroup = Number(m[1]);
    for (const sig of pending.splice(0)) deliver(sig);
  }
});

function deliver(sig) {
  try {
    // The sandbox's pid 1 (bwrap's reaper) ignores signals it has no handler for; the task gets it.
    process.kill(-sandboxGroup, sig);
  } catch {
    // already gone
  }
}

for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(sig, () => {
    if (sandboxGroup !== 0) deliver(sig);
    else if (child.exitCode === null) pending.push(sig);
  });
}

child.on("error", (err) => {
  process.stderr.write(`jobrt-runtime-bwrap: cannot run ${bwrap}: ${err.message}\n`);
  process.exit(127);
});
child.on("exit", (code, signal) => {
  if (signal) {
    // Die the same way, so the host sees the task's real end.
    for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) process.removeAllListeners(sig);
    process.kill(process.pid, signal);
    return;
  }
  process.exit(code ?? 1);
});
