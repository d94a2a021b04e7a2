import type { Readable } from "node:stream";

/** Where lines go: a Writable, or anything with the same write/drain contract. */
export interface LineSink {
  write(data: Buffer | string): boolean;
  once(event: "drain" | "close" | "error", listener: () => void): unknown;
  off?(event: "drain" | "close" | "error", listener: () => void): unknown;
  /** A destination that is gone (its reader closed the pipe) takes no more output. */
  readonly destroyed?: boolean;
  readonly errored?: unknown;
}

/** A sink that hands each (already transformed) line to a function; it never applies back-pressure. */
export function functionSink(fn: (data: Buffer | string) => void): LineSink {
  return {
    write(data) {
      fn(data);
      return true;
    },
    once: () => undefined,
  };
}

/** A destination that failed (EPIPE: its reader went away) or was destroyed: output is dropped. */
function isGone(dest: LineSink): boolean {
  return Boolean(dest.destroyed || dest.errored);
}

/** Sources paused until their shared destination drains: one listener per destination, not per task. */
const waitingForDrain = new WeakMap<LineSink, Set<Readable>>();

function pauseUntilDrain(source: Readable, dest: LineSink): void {
  // Waiting for a destination that is gone would stall the task for ever.
  if (isGone(dest)) return;
  source.pause();
  let paused = waitingForDrain.get(dest);
  if (!paused) {
    const set = new Set<Readable>();
    paused = set;
    waitingForDrain.set(dest, set);
    const events = ["drain", "close", "error"] as const;
    const resumeAll = () => {
      for (const e of events) dest.off?.(e, resumeAll);
      waitingForDrain.delete(dest);
      for (const s of set) s.resume();
    };
    for (const e of events) dest.once(e, resumeAll);
  }
  paused.add(source);
}

/** Longest partial line held back; a longer line is passed on in pieces, unaltered. */
const MAX_PENDING = 64 * 1024;
const NL = 0x0a;

/**
 * Turns one piece of output into what is written: a whole line with its newline, or (for a line
 * longer than 64 KiB) part of one. `atLineStart` says whether the piece begins a line, where -l
 * puts its label.
 */
export type LineTransform = (piece: Buffer, atLineStart: boolean) => Buffer | string;

/**
 * Copies a task's output to a shared destination one whole line at a time, so lines from
 * different tasks never mix mid-line; `transform` adds srun's -l label or wraps a JSON event.
 * Works on bytes, so output that is not UTF-8 passes through unchanged. A last line without a
 * newline gets one, because another task's output may follow it.
 */
export function pipeLines(source: Readable, dest: LineSink, transform: LineTransform): Promise<void> {
  return new Promise((resolve) => {
    let pending: Buffer = Buffer.alloc(0);
    let atLineStart = true;
    const write = (data: Buffer | string) => {
      if (isGone(dest)) return;
      if (!dest.write(data)) pauseUntilDrain(source, dest);
    };
    const emitLines = (buf: Buffer, upTo: number) => {
      const parts: (Buffer | string)[] = [];
      let start = 0;
      while (start <= upTo) {
        const nl = buf.indexOf(NL, start);
        parts.push(transform(buf.subarray(start, nl + 1), atLineStart));
        atLineStart = true;
        start = nl + 1;
      }
      const first = parts[0];
      write(
        parts.length === 1 && first !== undefined
          ? first
          : Buffer.concat(parts.map((p) => (typeof p === "string" ? Buffer.from(p) : p))),
      );
    };
    source.on("data", (chunk: Buffer) => {
      const buf = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
      const last = buf.lastIndexOf(NL);
      if (last >= 0) {
        emitLines(buf, last);
        pending = buf.subarray(last + 1);
      } else {
        pending = buf;
      }
      if (pending.length > MAX_PENDING) {
        // Bounded memory: pass the long line on as it is; nothing is added to it.
        write(transform(pending, atLineStart));
        atLineStart = false;
        pending = Buffer.alloc(0);
      }
    });
    let finished = false;
    const finish = () => {
      if (finished) return;
      finished = true;
      if (pending.length > 0 || !atLineStart)
        write(transform(Buffer.concat([pending, Buffer.from("\n")]), atLineStart));
      pending = Buffer.alloc(0);
      resolve();
    };
    source.on("end", finish);
    source.on("error", finish);
    // A source destroyed by jobrt (its writer escaped and never closes it) ends without 'end'.
    source.on("close", finish);
  });
}
