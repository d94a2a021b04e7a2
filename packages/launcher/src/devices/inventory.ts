import { statSync } from "node:fs";
import { messageOf } from "@jobrt/core";
import { readSpecText, specFiles } from "./cdiregistry.js";
import { type CdiSpec, type SpecEdits, parseCdiSpec } from "./cdispec.js";
import type { DeviceConf } from "./resolve.js";
import { untrustedHostPath } from "./rootpath.js";

/** One CDI device the node's spec dirs describe. */
export interface CdiDeviceListing {
  /** `vendor.com/class=name`. */
  name: string;
  /** The spec file that describes it (the one that wins, by the dirs' priority). */
  spec: string;
}

/** What `jobrt check` and `jobrt runtimes` show of the node's CDI devices (docs/devices.md). */
export interface CdiInventory {
  specDirs: string[];
  devices: CdiDeviceListing[];
  /** Each a line a device request on this node would fail with (a bad spec, a missing node, a conflict). */
  problems: string[];
}

/** What a step would be refused for each node and mount of `edits` (as resolve.ts says it). */
function hostPathProblems(edits: SpecEdits, asRoot: boolean): string[] {
  const problems: string[] = [];
  for (const n of edits.deviceNodes) {
    const host = n.hostPath ?? n.path;
    try {
      statSync(host);
    } catch {
      problems.push(`device node ${host} does not exist on this node`);
      continue;
    }
    const untrusted = asRoot ? untrustedHostPath("device node", host) : undefined;
    if (untrusted !== undefined) problems.push(untrusted);
  }
  for (const m of asRoot ? edits.mounts : []) {
    const untrusted = untrustedHostPath("mount source", m.hostPath);
    if (untrusted !== undefined) problems.push(untrusted);
  }
  return problems;
}

function readSpecs(dir: string, asRoot: boolean, problems: string[]): CdiSpec[] {
  const specs: CdiSpec[] = [];
  let files: string[];
  try {
    files = specFiles(dir, asRoot);
  } catch (error) {
    problems.push(messageOf(error));
    return specs;
  }
  for (const file of files) {
    try {
      specs.push(parseCdiSpec(readSpecText(file, asRoot), file));
    } catch (error) {
      problems.push(messageOf(error));
    }
  }
  return specs;
}

/**
 * Every device of the spec dirs, read as a step would read them (priority, conflicts, the trust
 * rules as root), except that a bad file is listed as a problem instead of failing the rest.
 */
export function cdiInventory(conf: Pick<DeviceConf, "specDirs">, asRoot = process.getuid?.() === 0): CdiInventory {
  const problems: string[] = [];
  const found = new Map<string, { spec: CdiSpec; edits: SpecEdits; dir: number; claims: string[] }>();
  conf.specDirs.forEach((dir, prio) => {
    for (const spec of readSpecs(dir, asRoot, problems)) {
      for (const d of spec.devices) {
        const name = `${spec.kind}=${d.name}`;
        const old = found.get(name);
        if (old && old.dir === prio) old.claims.push(spec.file);
        else found.set(name, { spec, edits: d.edits, dir: prio, claims: [spec.file] });
      }
    }
  });
  const devices: CdiDeviceListing[] = [];
  for (const [name, f] of [...found].sort(([a], [b]) => a.localeCompare(b))) {
    if (f.claims.length > 1)
      problems.push(
        `CDI spec ${f.claims.at(-1)}: devices: ${name} is also described by ${f.claims.slice(0, -1).join(", ")} (two specs of one directory claim one name)`,
      );
    for (const problem of [...hostPathProblems(f.spec.edits, asRoot), ...hostPathProblems(f.edits, asRoot)])
      problems.push(`CDI spec ${f.spec.file}: ${name}: ${problem}`);
    devices.push({ name, spec: f.spec.file });
  }
  return { specDirs: [...conf.specDirs], devices, problems: [...new Set(problems)] };
}
