import {
  type Stats,
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  openSync,
  readFileSync,
  renameSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Script } from "node:vm";
import * as core from "@jobrt/core";
import type { Timings } from "./timings.js";

/**
 * `jobrt run` and `jobrt exec` from dist/steps.cjs, compiled with V8's code cache when there is a
 * trusted one. Node 20 caches no compiled code for ES modules, and compiling jobrt's own functions
 * was a large part of every step's start (docs/decisions.md, "The step commands run from a code
 * cache"). The script is CommonJS so vm.Script can take cached data; @jobrt/core is handed to it
 * from here, so runtime plugins and the CLI share one instance of it (JobrtError, NOT_SUPPORTED).
 */
export interface StepCommands {
  runCommand(args: string[], timings?: Timings): Promise<number>;
  execCommand(args: string[], timings?: Timings): Promise<number>;
}

/** The build appends the sha256 of the script; a cache is named after it, so an upgrade never reuses one. */
const HASH_LINE = /\n\/\/ jobrt-steps-hash ([0-9a-f]{64})\n/;
const MAX_CACHE_BYTES = 16 * 1024 * 1024;
/**
 * The file is this header, then V8's cached data: magic, payload length and CRC-32 (little
 * endian). V8 checks its own header but not its payload (release builds skip the checksum), and
 * a damaged payload crashes Node (SIGSEGV, SIGTRAP) in every run that reads it; so the bytes are
 * checked before V8 sees them and a damaged cache counts as none (docs/decisions.md, "The step
 * commands run from a code cache"). Trust is ownership; the CRC only catches damage.
 */
const MAGIC = Buffer.from("jrtcc01\n", "latin1");
const HEADER_BYTES = MAGIC.length + 8;

export function loadStepCommands(): StepCommands {
  const file = join(dirname(fileURLToPath(import.meta.url)), "steps.cjs");
  const source = readFileSync(file, "utf8");
  const hash = HASH_LINE.exec(source.slice(-256))?.[1];
  const cacheFile = hash === undefined ? undefined : join(dirname(file), cacheName(hash));
  const cached = cacheFile === undefined ? undefined : checkedPayload(readTrusted(cacheFile));
  const code = `(function (exports, require, module, __filename, __dirname) {${source}\n})`;
  const script = new Script(code, { filename: file, ...(cached ? { cachedData: cached } : {}) });
  // A missing or rejected cache is written when the command is done, off its critical path.
  if (cacheFile !== undefined && (!cached || script.cachedDataRejected))
    process.once("exit", () => writeCache(cacheFile, code, file));
  const module = { exports: {} as StepCommands };
  (script.runInThisContext() as (...args: unknown[]) => void)(module.exports, requireFor, module, file, dirname(file));
  return module.exports;
}

/**
 * `steps-<script hash>-node<version>-v8.<version><options>.cache`: V8 rejects cached data of
 * another Node or V8 build, so login and compute nodes that run different Node builds over one
 * shared install each keep their own instead of rewriting one at every switch.
 */
function cacheName(hash: string): string {
  const v8 = process.versions.v8.replace(/[^0-9A-Za-z.-]/g, "_");
  return `steps-${hash.slice(0, 16)}-node${process.versions.node}-v8.${v8}${flagsKey()}.cache`;
}

/** V8's bytes from a cache file, or undefined when its header or CRC-32 does not match (damaged, truncated, old format). */
function checkedPayload(file: Buffer | undefined): Buffer | undefined {
  if (file === undefined || file.length < HEADER_BYTES || !file.subarray(0, MAGIC.length).equals(MAGIC))
    return undefined;
  const payload = file.subarray(HEADER_BYTES);
  const ok =
    file.readUInt32LE(MAGIC.length) === payload.length && file.readUInt32LE(MAGIC.length + 4) === crc32(payload);
  return ok ? payload : undefined;
}

function withHeader(payload: Buffer): Buffer {
  const header = Buffer.alloc(HEADER_BYTES);
  MAGIC.copy(header);
  header.writeUInt32LE(payload.length, MAGIC.length);
  header.writeUInt32LE(crc32(payload), MAGIC.length + 4);
  return Buffer.concat([header, payload]);
}

/** zlib's CRC-32 (native): node:crypto's sha256 would cost more to load than the check is worth. */
function crc32(bytes: Buffer): number {
  return process.getBuiltinModule("node:zlib").crc32(bytes) >>> 0;
}

/**
 * V8 rejects cached data made under other flags: a cache per set of options Node was started with
 * (its command line and NODE_OPTIONS), so a user who runs jobrt with and without, say,
 * --max-old-space-size does not rewrite one cache at every switch. Default options keep the plain
 * name. FNV-1a: a name, not a check (trust comes from ownership), and node:crypto costs ms to load.
 */
function flagsKey(): string {
  const options = [...process.execArgv, process.env.NODE_OPTIONS ?? ""].join("\0");
  if (options === "") return "";
  let h = 0x811c9dc5;
  for (let i = 0; i < options.length; i++) h = Math.imul(h ^ options.charCodeAt(i), 0x01000193) >>> 0;
  return `-${h.toString(16).padStart(8, "0")}`;
}

function requireFor(id: string): unknown {
  if (id === "@jobrt/core") return core;
  const builtin = process.getBuiltinModule(id);
  if (builtin === undefined)
    throw new Error(`dist/steps.cjs requires ${JSON.stringify(id)}: only @jobrt/core and Node's builtins are provided`);
  return builtin;
}

/** Bytecode is code: it must belong to root or to us and be writable by nobody else, as its directory. */
function trusted(st: Stats): boolean {
  const euid = process.geteuid?.() ?? 0;
  return (st.uid === 0 || st.uid === euid) && (st.mode & 0o022) === 0;
}

function trustedDir(dir: string): boolean {
  try {
    const st = lstatSync(dir);
    return st.isDirectory() && trusted(st);
  } catch {
    return false;
  }
}

/** The cache, if it is a regular file (never through a symlink) we may trust; else undefined. */
function readTrusted(file: string): Buffer | undefined {
  if (!trustedDir(dirname(file))) return undefined;
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  try {
    const st = fstatSync(fd);
    return st.isFile() && trusted(st) && st.size <= MAX_CACHE_BYTES ? readFileSync(fd) : undefined;
  } catch {
    return undefined;
  } finally {
    closeSync(fd);
  }
}

/** Best effort: a read-only install, or one that belongs to another user, just runs without a cache. */
function writeCache(file: string, code: string, filename: string): void {
  if (!trustedDir(dirname(file))) return;
  const tmp = `${file}.${process.pid}.tmp`;
  try {
    // Opened before the eager compile: a user who may not write here (a job user under srun, with
    // a root-owned install) stops at once instead of compiling everything at each exit for nothing.
    const fd = openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644);
    try {
      writeSync(fd, withHeader(eagerCachedData(code, filename)));
    } finally {
      closeSync(fd);
    }
    // Whole or not at all: a reader never sees half a cache.
    renameSync(tmp, file);
  } catch {
    try {
      unlinkSync(tmp);
    } catch {
      // never created
    }
  }
}

/**
 * Cached data with every function compiled, not only those this run called: the first run may be
 * `jobrt run --help`, and the cache serves every later run, of either command. The flag is V8's
 * own switch for it; V8 takes the cache back under its default flags.
 */
function eagerCachedData(code: string, filename: string): Buffer {
  const v8 = process.getBuiltinModule("node:v8");
  let script: Script;
  v8.setFlagsFromString("--no-lazy");
  try {
    // Under another name than the running script's, or V8 hands back its lazily compiled one.
    script = new Script(code, { filename: `${filename}.eager` });
  } finally {
    v8.setFlagsFromString("--lazy");
  }
  // Made under the default flags: cached data carries a hash of them, and a run rejects another's.
  return script.createCachedData();
}
