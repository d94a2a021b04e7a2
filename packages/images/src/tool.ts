import { spawn } from "node:child_process";

/** How an external tool (skopeo, umoci, flock, the image helper) is run. */
export interface ToolOptions {
  env: Record<string, string>;
  uid?: number;
  gid?: number;
  timeoutMs: number;
  cwd?: string;
  /** Written to the tool's stdin (then closed); stdin is /dev/null without it. */
  input?: string;
  /** Each piece of stderr as it arrives (it is collected too). */
  onStderr?: (chunk: string) => void;
}

export interface ToolResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: Buffer;
  stderr: string;
  timedOut: boolean;
}

const LIMIT = 16 << 20;

/**
 * Runs argv without a shell, as `uid`/`gid` when given, in its own process group (so a time-out
 * kills the tool and everything it started), and collects its output. Never rejects for a
 * non-zero exit: the caller words the error; it rejects only when the program cannot start.
 */
export function runTool(argv: string[], o: ToolOptions): Promise<ToolResult> {
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
      if (outLength < LIMIT) out.push(d);
      outLength += d.length;
    });
    child.stderr?.setEncoding("utf8").on("data", (d: string) => {
      if (stderr.length < LIMIT) stderr += d;
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
    child.on("error", (error) => {
      clearTimeout(timer);
      reject(new Error(`cannot run ${argv[0]}: ${error.message}`));
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout: Buffer.concat(out), stderr, timedOut });
    });
    // A tool may exit without reading its input (`flock -n` on a busy lock): EPIPE is no error of
    // ours, its exit status says what happened (it crashed `jobrt images prune` next to a pull).
    child.stdin?.on("error", () => {});
    if (o.input !== undefined) child.stdin?.end(o.input);
  });
}

/** The last meaningful line of a tool's stderr (skopeo prints `time=... level=fatal msg="..."`). */
export function toolMessage(r: ToolResult): string {
  if (r.timedOut) return "timed out and was killed";
  const lines = r.stderr.trim().split("\n").filter((l) => l.trim() !== "");
  let last = lines[lines.length - 1] ?? "";
  const msg = /msg="((?:[^"\\]|\\.)*)"/.exec(last);
  if (msg) last = (msg[1] as string).replace(/\\(.)/g, "$1");
  // skopeo words every failure to reach an image as a parse error of its name; the cause follows.
  last = last.replace(/^Error parsing image name "[^"]*": /, "");
  const how = r.signal ? `was killed by ${r.signal}` : `exited with status ${r.code}`;
  return last ? last : how;
}
