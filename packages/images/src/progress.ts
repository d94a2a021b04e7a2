import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";

/** What the image helper writes on stderr while skopeo copies: `progress BYTES BLOBS`. */
const LINE = /^progress (\d+) (\d+)$/;

/** How much of a pull is on disk: the bytes and the number of complete blobs in the OCI layout. */
export function layoutProgress(layout: string): { bytes: number; blobs: number } {
  let bytes = 0;
  let blobs = 0;
  const dir = join(layout, "blobs", "sha256");
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return { bytes, blobs };
  }
  for (const n of names) {
    try {
      bytes += statSync(join(dir, n)).size;
      if (/^[0-9a-f]{64}$/.test(n)) blobs++;
    } catch {
      // renamed away between readdir and stat
    }
  }
  return { bytes, blobs };
}

export function progressLine(p: { bytes: number; blobs: number }): string {
  return `progress ${p.bytes} ${p.blobs}\n`;
}

/** Calls `on` for each complete progress line of the helper's stderr chunks; returns the feeder. */
export function progressReader(on: (p: { bytes: number; blobs: number }) => void): (chunk: string) => void {
  let pending = "";
  return (chunk) => {
    pending += chunk;
    const lines = pending.split("\n");
    pending = lines.pop() ?? "";
    for (const l of lines) {
      const m = LINE.exec(l);
      if (m) on({ bytes: Number(m[1]), blobs: Number(m[2]) });
    }
  };
}
