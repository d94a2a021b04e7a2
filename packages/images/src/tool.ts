import type { ToolResult } from "@jobrt/host-services";

// How an external tool (skopeo, umoci, flock, the image helper) is run: host-services' runner.
export { type ToolOptions, type ToolResult, runTool } from "@jobrt/host-services";

/** The last meaningful line of a tool's stderr (skopeo prints `time=... level=fatal msg="..."`). */
export function toolMessage(r: ToolResult): string {
  if (r.timedOut) return "timed out and was killed";
  const lines = r.stderr
    .trim()
    .split("\n")
    .filter((l) => l.trim() !== "");
  let last = lines[lines.length - 1] ?? "";
  const msg = /msg="((?:[^"\\]|\\.)*)"/.exec(last);
  if (msg) last = (msg[1] as string).replace(/\\(.)/g, "$1");
  // skopeo words every failure to reach an image as a parse error of its name; the cause follows.
  last = last.replace(/^Error parsing image name "[^"]*": /, "");
  const how = r.signal ? `was killed by ${r.signal}` : `exited with status ${r.code}`;
  return last ? last : how;
}
