import type { Socket } from "node:net";
import { decodeBytes } from "@jobrt/core";

/** Who a joining task is (docs/node-step.md, "The wire protocol"): what its own `jobrt exec` had. */
export interface JoinRequest {
  /** The joiner's pid: its task forker's, once it has joined. */
  pid: number;
  cwd: string;
  /** Its `jobrt exec` arguments: "exec", the options, the task's command. */
  argv: string[];
  env: Record<string, string>;
}

/** The most a join request may hold: a task's environment and argv, as Linux's ARG_MAX bounds them. */
const MAX_JOIN_BYTES = 8 * 1024 * 1024;
/**
 * How long a connection may take to say who it is: the entry sends it at once, and the node's
 * jobrt does not end its step while a connection is still being read (a stopped or hung peer).
 */
const JOIN_REQUEST_MS = 10_000;

/** Parses "J1" NUL pid NUL cwd NUL argc NUL argv... NUL env "K=V"...; throws on anything else. */
export function parseJoinRequest(payload: Buffer): JoinRequest {
  const fields: string[] = [];
  let at = 0;
  while (at <= payload.length) {
    let end = payload.indexOf(0, at);
    if (end < 0) end = payload.length;
    fields.push(decodeBytes(payload.subarray(at, end)));
    at = end + 1;
  }
  const [version, pid, cwd, argc, ...rest] = fields;
  if (version !== "J1") throw new Error(`not a version 1 join request: ${JSON.stringify(version?.slice(0, 20))}`);
  const n = Number(argc);
  if (!/^\d+$/.test(pid ?? "") || !/^\d+$/.test(argc ?? "") || n > rest.length || cwd === undefined)
    throw new Error("a join request with a bad pid, argc or cwd");
  const env: Record<string, string> = {};
  for (const entry of rest.slice(n)) {
    const eq = entry.indexOf("=");
    if (eq > 0) env[entry.slice(0, eq)] = entry.slice(eq + 1);
  }
  return { pid: Number(pid), cwd, argv: rest.slice(0, n), env };
}

/** Reads one join request from a new connection: "<bytes>\n" then the payload. */
export function readJoinRequest(socket: Socket): Promise<JoinRequest> {
  return new Promise((resolve, reject) => {
    let buffered = Buffer.alloc(0);
    const timer = setTimeout(() => done(new Error("the joiner did not say who it is in time")), JOIN_REQUEST_MS);
    const done = (error?: Error, request?: JoinRequest) => {
      clearTimeout(timer);
      socket.off("data", onData).off("end", onEnd).off("error", onEnd);
      if (error) reject(error);
      else resolve(request!);
    };
    const onEnd = () => done(new Error("the joiner went away before it said who it is"));
    const onData = (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      const nl = buffered.indexOf(0x0a);
      const head = nl < 0 ? buffered.toString("latin1") : buffered.subarray(0, nl).toString("latin1");
      const bytes = /^\d{1,9}$/.test(head) ? Number(head) : Number.NaN;
      if (nl < 0 ? head.length > 9 : !(bytes <= MAX_JOIN_BYTES))
        return done(new Error("a join request that is not one"));
      if (nl < 0 || buffered.length < nl + 1 + bytes) return;
      // Nothing comes after the request until the joiner has its answer.
      try {
        done(undefined, parseJoinRequest(buffered.subarray(nl + 1, nl + 1 + bytes)));
      } catch (error) {
        done(error as Error);
      }
    };
    socket.on("data", onData).on("end", onEnd).on("error", onEnd);
  });
}
