import { readFileSync } from "node:fs";
import { decodeBytes } from "@jobrt/core";

/**
 * jobrt's own arguments and environment with every byte kept (core's decodeBytes): Node decodes
 * process.argv and process.env as UTF-8 and turns each byte that is not into U+FFFD, but srun hands
 * a task its bytes unchanged. Only when Node's copy shows a U+FFFD are the originals read back from
 * /proc/self/cmdline and /proc/self/environ, so the usual start reads nothing.
 */
const LOSSY = "\ufffd";

function procEntries(file: string): Buffer[] | undefined {
  let bytes: Buffer;
  try {
    bytes = readFileSync(file);
  } catch {
    return undefined;
  }
  const entries: Buffer[] = [];
  for (let start = 0; start < bytes.length; ) {
    const end = bytes.indexOf(0, start);
    entries.push(bytes.subarray(start, end === -1 ? bytes.length : end));
    start = end === -1 ? bytes.length : end + 1;
  }
  return entries;
}

/** process.argv.slice(2), each argument as its bytes. */
export function rawArgs(): string[] {
  const args = process.argv.slice(2);
  if (!args.some((a) => a.includes(LOSSY))) return args;
  const cmdline = procEntries("/proc/self/cmdline");
  if (!cmdline || cmdline.length < args.length) return args;
  // The arguments are the last entries of the command line (before them: node, its options, the script).
  const tail = cmdline.slice(cmdline.length - args.length);
  return tail.every((bytes, i) => bytes.toString("utf8") === args[i]) ? tail.map(decodeBytes) : args;
}

/** process.env, each name and value as its bytes. */
export function rawEnvironment(): NodeJS.ProcessEnv {
  const env = process.env;
  if (!Object.entries(env).some(([k, v]) => k.includes(LOSSY) || v?.includes(LOSSY))) return env;
  const environ = procEntries("/proc/self/environ");
  if (!environ) return env;
  const out: NodeJS.ProcessEnv = { ...env };
  for (const entry of environ) {
    const eq = entry.indexOf(0x3d);
    if (eq <= 0) continue;
    const [name, value] = [entry.subarray(0, eq), entry.subarray(eq + 1)];
    const lossyName = name.toString("utf8");
    // Only a variable Node still holds as read (not one jobrt changed) is replaced by its bytes.
    if (env[lossyName] !== value.toString("utf8") || !(lossyName + env[lossyName]).includes(LOSSY)) continue;
    delete out[lossyName];
    out[decodeBytes(name)] = decodeBytes(value);
  }
  return out;
}
