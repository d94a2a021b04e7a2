import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { isJobrtError, jobrtError, messageOf, readConfText } from "@jobrt/core";
import { type CdiSpec, type SpecEdits, parseCdiSpec, specError } from "./cdispec.js";
import { rootAlone, untrustedPath } from "./rootpath.js";

/** The CDI spec dirs, lowest priority first: a later dir's device of one name wins (docs/devices.md). */
export const DEFAULT_CDI_SPEC_DIRS = ["/etc/cdi", "/var/run/cdi"];

export interface CdiDevice {
  /** `vendor.com/class=name`. */
  qualified: string;
  spec: CdiSpec;
  edits: SpecEdits;
}

/** Every device the spec dirs describe, by qualified name, and the names two specs of one dir claim. */
export interface CdiRegistry {
  devices: Map<string, CdiDevice>;
  conflicts: Map<string, string[]>;
}

export function specFiles(dir: string, asRoot: boolean): string[] {
  let names: string[];
  try {
    // Whoever may write the directory may put a spec there: as root, only root may.
    const st = statSync(dir);
    if (asRoot && !rootAlone(st))
      throw specError(dir, "(directory)", "must be owned by root and writable by no one else");
    const above = asRoot ? untrustedPath(dir) : undefined;
    if (above !== undefined)
      throw specError(dir, "(directory)", `${above}: root reads specs only through directories root alone may write`);
    names = readdirSync(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
    if (isJobrtError(error)) throw error;
    throw jobrtError("ERR_DEVICE", { problem: `CDI spec dir ${dir}: ${messageOf(error)}` }, { details: { path: dir } });
  }
  return names
    .filter((n) => /\.(json|yaml|yml)$/.test(n))
    .sort()
    .map((n) => join(dir, n));
}

/**
 * Reads a spec as root only from a file root owns and no one else may write: a spec names the
 * device nodes and host paths a container gets, so it is as trusted as jobrt.conf, and read as
 * jobrt.conf is (readConfText: a regular file, never blocking on a FIFO, at most 1 MiB).
 */
export function readSpecText(file: string, asRoot: boolean): string {
  const st = statSync(file);
  if (!st.isFile()) throw specError(file, "(file)", "is not a regular file");
  if (asRoot && !rootAlone(st)) throw specError(file, "(file)", "must be owned by root and writable by no one else");
  try {
    return readConfText(file, false) as string;
  } catch (error) {
    // Its message is "FILE: problem"; said again as a spec's, with the spec's code.
    const message = messageOf(error);
    throw specError(file, "(file)", message.startsWith(`${file}: `) ? message.slice(file.length + 2) : message);
  }
}

/** Loads every spec of `dirs` (lowest priority first), each file checked whole: a bad one is an error. */
export function loadCdiRegistry(dirs: readonly string[], asRoot = process.getuid?.() === 0): CdiRegistry {
  const devices = new Map<string, CdiDevice>();
  const priority = new Map<string, number>();
  const conflicts = new Map<string, string[]>();
  dirs.forEach((dir, prio) => {
    for (const file of specFiles(dir, asRoot)) {
      const spec = parseCdiSpec(readSpecText(file, asRoot), file);
      for (const d of spec.devices) {
        const qualified = `${spec.kind}=${d.name}`;
        const old = devices.get(qualified);
        if (old && priority.get(qualified) === prio) {
          conflicts.set(qualified, [...(conflicts.get(qualified) ?? [old.spec.file]), file]);
          continue;
        }
        devices.set(qualified, { qualified, spec, edits: d.edits });
        priority.set(qualified, prio);
        conflicts.delete(qualified);
      }
    }
  });
  return { devices, conflicts };
}
