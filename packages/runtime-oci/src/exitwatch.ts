import { readFileSync } from "node:fs";
import { procStat } from "@jobrt/host-services";

/** How the container's exit is watched: by us as its subreaper (with its status), or by polling. */
export interface ExitWatch {
  reaper: boolean;
  /** The raw wait status, or undefined when it cannot be known. */
  status: Promise<number | undefined>;
}

function creds(pid: number): { uids: number[]; gids: number[] } | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/status`, "utf8");
    const field = (name: string) =>
      (new RegExp(`^${name}:\\s*(.*)$`, "m").exec(text)?.[1] ?? "").trim().split(/\s+/).map(Number);
    return { uids: field("Uid"), gids: field("Gid") };
  } catch {
    return undefined;
  }
}

/**
 * True when /proc shows us the zombie's exit_code: the kernel hides it (prints 0) unless we may
 * ptrace-read the process, which for a zombie means root or identical uids and gids.
 */
function canReadExitCode(pid: number): boolean {
  const uid = process.geteuid?.() ?? -1;
  if (uid === 0) return true;
  const c = creds(pid);
  const gid = process.getegid?.() ?? -1;
  return !!c?.uids.every((u) => u === uid) && !!c?.gids.every((g) => g === gid);
}

/** The supervisor's step 3 (supervisor.ts): watches for the init's exit: as its subreaper (SIGCHLD, with its status) or by a 5 ms poll. */
export function watchExit(pid: number, subreaper: boolean, log: (m: string) => void): ExitWatch {
  const first = procStat(pid);
  const reaper = subreaper && first?.ppid === process.pid;
  if (!reaper) {
    log(
      `not the container's parent (${subreaper ? "the runtime did not leave it to us" : "no subreaper"}): exit status will not be available`,
    );
  }
  const status = new Promise<number | undefined>((resolve) => {
    const check = () => {
      const st = procStat(pid);
      if (reaper) {
        if (st?.state === "Z") {
          stop();
          resolve(canReadExitCode(pid) ? st.exitCode : undefined);
        } else if (!st) {
          stop();
          resolve(undefined);
        }
      } else if (!st || st.state === "Z" || st.startTime !== first?.startTime) {
        stop();
        resolve(undefined);
      }
    };
    const timer = setInterval(check, reaper ? 100 : 5);
    const stop = () => {
      clearInterval(timer);
      process.removeListener("SIGCHLD", check);
    };
    if (reaper) process.on("SIGCHLD", check);
    check();
  });
  return { reaper, status };
}
