import { spawn } from "node:child_process";

/** How an external tool is run. */
export interface ToolOptions {
  env: Record<string, string>;
  /** Run as this user (and `gid`, else the group of the same number). */
  uid?: number;
  gid?: number;
  /** Past it the tool's process group is SIGKILLed and the result says `timedOut`. */
  timeoutMs: number;
  /** "/" when not given. */
  cwd?: string;
  /** Written to the tool's stdin (then closed); stdin is /dev/null without it. */
  input?: string;
  /** Each piece of stderr as it arrives (it is collected too). */
  onStderr?: (chunk: string) => void;
  /** Output kept per stream, in bytes (stdout) or characters (stderr); the rest is read and dropped. 16 MiB by default. */
  maxOutput?: number;
}

export interface ToolResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: Buffer;
  stderr: string;
  timedOut: boolean;
}

/**
 * Runs argv without a shell, as `uid`/`gid` when given, in its own process group (so a time-out
 * kills the tool and everything it started), and collects its output up to the cap. Never rejects
 * for a non-zero exit: the caller words the error; it rejects only when the program cannot start,
 * with the spawn error's code kept.
 */
export function runTool(argv: string[], o: ToolOptions): Promise<ToolResult> {
  const limit = o.maxOutput ?? 16 << 20;
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0] as string, argv.slice(1), {
      env: o.env,
      cwd: o.cwd ?? "/",
      stdio: [o.input !== undefined ? "pipe" : "ignore", "pipe", "pipe"],
      detached: true,
      ...(o.uid !== undefined ? { uid: o.uid, gid: o.gid ?? o.uid } : {}),
    });
    const out: Buffer[] = [];
    let outLength = 0;
    let stderr = "";
    child.stdout?.on("data", (d: Buffer) => {
      if (outLength < limit) out.push(d.subarray(0, limit - outLength));
      outLength += d.length;
    });
    child.stderr?.setEncoding("utf8").on("data", (d: string) => {
      if (stderr.length < limit) stderr += d.slice(0, limit - stderr.length);
      o.onStderr?.(d);
    });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
      } catch {
        // already gone
      }
    }, o.timeoutMs);
    child.on("error", (error: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      reject(
        Object.assign(new Error(`cannot run ${argv[0]}: ${error.message}`, { cause: error }), { code: error.code }),
      );
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout: Buffer.concat(out), stderr, timedOut });
    });
    // A tool may exit without reading its input (`flock -n` on a busy lock): EPIPE is no error of
    // ours, its exit status says what happened.
    child.stdin?.on("error", () => {});
    if (o.input !== undefined) child.stdin?.end(o.input);
  });
}
