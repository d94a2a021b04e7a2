import type { PullEvent } from "@jobrt/launcher";

/** Where pull progress goes: a terminal gets one line redrawn in place, -v plain start and end lines. */
export interface PullOutput {
  write(text: string): void;
  isTTY: boolean;
  verbose: number;
}

function mib(bytes: number): string {
  return `${(bytes / 1024 ** 2).toFixed(1)} MiB`;
}

/** `12.3 MiB, 3 layers, 4.1 MiB/s` (a total is shown when the runtime knows it). */
export function pullSummary(e: PullEvent): string {
  const seconds = e.elapsedMs / 1000;
  const rate = seconds > 0 ? e.bytes / seconds : 0;
  const bytes = e.totalBytes !== undefined ? `${mib(e.bytes)} of ${mib(e.totalBytes)}` : mib(e.bytes);
  const layers =
    e.totalLayers !== undefined
      ? `${e.layers} of ${e.totalLayers} layers`
      : `${e.layers} ${e.layers === 1 ? "layer" : "layers"}`;
  return `${bytes}, ${layers}, ${mib(rate)}/s`;
}

/**
 * Shows `pull` events on stderr (docs/cli.md, "Pull progress"): silent when stderr is not a
 * terminal unless -v, so logs and pipes get no carriage returns.
 */
export function showPull(e: PullEvent, out: PullOutput): void {
  if (out.isTTY) {
    // \r and erase-to-end-of-line redraw the one line; the end line stays, with a newline.
    if (e.phase === "end")
      out.write(
        `\r\x1b[K${e.ok ? `jobrt: pulled ${e.image}: ${pullSummary(e)} in ${(e.elapsedMs / 1000).toFixed(1)} s\n` : ""}`,
      );
    else out.write(`\r\x1b[Kjobrt: pulling ${e.image}: ${pullSummary(e)}`);
    return;
  }
  if (out.verbose < 1) return;
  if (e.phase === "start") out.write(`jobrt: pulling ${e.image}\n`);
  if (e.phase === "end")
    out.write(
      `jobrt: ${e.ok ? "pulled" : "failed to pull"} ${e.image}: ${pullSummary(e)} in ${(e.elapsedMs / 1000).toFixed(1)} s\n`,
    );
}
