import { type ExecSpec, encodeBytes } from "@jobrt/core";

/** Where a task starts: as this user, inside this cgroup (its cgroup.procs file). */
export interface ForkOptions {
  user?: { uid: number; gid: number };
  cgroupProcs?: string;
}

function checkNul(field: string): void {
  if (field.includes("\0"))
    throw new TypeError(
      `argument or environment value must be a string without null bytes: ${JSON.stringify(field.slice(0, 100))}`,
    );
}

/** A code unit of the range that carries a byte that is not UTF-8 (core's rawbytes.ts). */
const MAYBE_RAW = /[\udc80-\udcff]/;

/** A field's length in bytes: the task gets the bytes a string carries, not their UTF-8 look-alikes. */
function fieldBytes(field: string): number {
  return MAYBE_RAW.test(field) ? encodeBytes(field).length : Buffer.byteLength(field);
}

function writeField(out: Buffer, field: string, at: number): number {
  return MAYBE_RAW.test(field) ? encodeBytes(field).copy(out, at) : out.write(field, at);
}

/**
 * One start request for the task forker (the format is in forker.pl): "<bytes>\n", then
 * NUL-separated fields: id, the forker fds for the task's 0 1 2, the descriptors passed on purpose
 * ("k:n,..."), uid, gid, cgroup.procs, cwd, argc, argv..., env "K=V"... Sized first, then encoded straight into one Buffer: a few hundred tasks
 * start at once, and per-variable strings and arrays made while every task's state is live were
 * most of what the launch burst allocated, which grows V8's young generation and the peak RSS
 * (docs/performance.md). Throws on a NUL byte in any field, before anything is sent.
 */
export function forkRequest(
  id: number,
  fds: readonly number[],
  spec: ExecSpec,
  { user, cgroupProcs }: ForkOptions,
  extra: readonly (readonly [number, number])[] = [],
): Buffer {
  const head = [
    String(id),
    String(fds[0]),
    String(fds[1]),
    String(fds[2]),
    extra.map(([k, n]) => `${k}:${n}`).join(","),
    user ? String(user.uid) : "",
    user ? String(user.gid) : "",
    cgroupProcs ?? "",
    spec.cwd,
    String(spec.argv.length),
  ];
  const { argv, env } = spec;
  // Indexed loops and for-in (own keys only, as Object.keys): for-of allocates an iterator result
  // per step until V8 optimises the function, and Object.keys an array per task.
  let bytes = -1;
  for (let i = 0; i < head.length + argv.length; i++) {
    const field = i < head.length ? head[i]! : argv[i - head.length]!;
    checkNul(field);
    bytes += 1 + fieldBytes(field);
  }
  for (const name in env) {
    const value = env[name];
    if (value === undefined || !Object.hasOwn(env, name)) continue;
    if (name.includes("\0") || value.includes("\0")) checkNul(`${name}=${value}`);
    bytes += 2 + fieldBytes(name) + fieldBytes(value);
  }
  const prefix = `${bytes}\n`;
  const out = Buffer.allocUnsafe(prefix.length + bytes);
  let at = out.write(prefix, 0, "latin1");
  for (let i = 0; i < head.length + argv.length; i++) {
    if (i > 0) out[at++] = 0;
    at += writeField(out, i < head.length ? head[i]! : argv[i - head.length]!, at);
  }
  for (const name in env) {
    const value = env[name];
    if (value === undefined || !Object.hasOwn(env, name)) continue;
    out[at++] = 0;
    at += writeField(out, name, at);
    out[at++] = 0x3d;
    at += writeField(out, value, at);
  }
  return out;
}
