import {
  type JobrtError,
  type JobrtErrorDetails,
  RUNTIME_API_VERSION,
  type RuntimeTool,
  isJobrtError,
  messageOf,
  normalizeRuntimeName,
} from "@jobrt/core";
import { cdiInventory } from "@jobrt/launcher";
import { cdiDeviceLines } from "./cdidevices.js";
import { installedFrom } from "./installedfrom.js";
import type { Host } from "./host.js";

export interface RuntimeListing {
  name: string;
  type: string;
  default: boolean;
  package?: string;
  version?: string;
  path?: string;
  /** Where npm fetched the package from (its lockfile's `resolved`): the site registry or another. */
  resolved?: string;
  apiVersion?: number;
  compatible: boolean;
  capabilities: string[];
  /** Why it cannot be used, when it cannot. */
  problem?: string;
  code?: string;
  /** The programs it runs on this node (its `tools` hook); absent when it has no such hook. */
  tools?: RuntimeTool[];
  /** Why its tools could not be listed (its `tools` hook failed). */
  toolsProblem?: string;
}

/** Loads every allowed runtime (context "node") and describes it, problems included. */
export async function describeRuntimes(host: Host): Promise<RuntimeListing[]> {
  const out: RuntimeListing[] = [];
  for (const allowed of host.site.runtimePlugins) {
    const name = normalizeRuntimeName(allowed);
    const item: RuntimeListing = {
      name: name.name,
      type: name.type,
      default: name.name === host.site.defRuntimePlugin,
      compatible: false,
      capabilities: [],
    };
    try {
      // The registry locates the package once; a load that fails after that names it in its error.
      const index = await host.registry.load(name.name, "node");
      const info = host.registry.info(index);
      Object.assign(item, { package: info.package, path: info.path });
      item.apiVersion = host.registry.plugin(index).meta.apiVersion;
      item.compatible = true;
      item.capabilities = info.capabilities;
      item.version = info.version;
      await describeTools(host, index, item);
    } catch (error) {
      item.problem = messageOf(error);
      if (isJobrtError(error)) {
        Object.assign(item, originOf(error.details));
        item.code = error.code;
        if (error.code === "ERR_RUNTIME_API_VERSION") item.apiVersion = error.details.apiVersion as number;
      }
    }
    const resolved = item.package && item.path ? installedFrom(item.path, item.package) : undefined;
    if (resolved !== undefined) item.resolved = resolved;
    out.push(item);
  }
  return out;
}

/** The package a failed load had located, as its error names it (none when it found none). */
function originOf(details: JobrtErrorDetails): Pick<RuntimeListing, "package" | "version" | "path"> {
  if (details.package === undefined) return {};
  return {
    package: details.package,
    ...(details.version !== undefined ? { version: details.version } : {}),
    ...(details.path !== undefined ? { path: details.path } : {}),
  };
}

async function describeTools(host: Host, index: number, item: RuntimeListing): Promise<void> {
  try {
    const tools = await host.registry.tools(index, host.node);
    if (tools !== undefined) item.tools = tools;
  } catch (error) {
    item.toolsProblem = messageOf(error);
  }
}

/** Padded columns, the last one left as it is. */
function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const fmt = (r: string[]) =>
    r
      .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd();
  return `${[header, ...rows].map(fmt).join("\n")}\n`;
}

/** One row per tool of each runtime: where it is and its version, or why it is missing. */
function toolRows(list: RuntimeListing[]): string[][] {
  const rows: string[][] = [];
  for (const r of list) {
    if (r.toolsProblem !== undefined) rows.push([r.name, "-", "-", `cannot list: ${r.toolsProblem}`]);
    else if (r.tools === undefined)
      rows.push([r.name, "-", "-", r.compatible ? "not reported (the runtime has no tools hook)" : "-"]);
    else if (r.tools.length === 0) rows.push([r.name, "(none)", "-", "runs no program of its own"]);
    for (const t of r.tools ?? [])
      rows.push([
        r.name,
        t.name,
        t.version ?? "-",
        t.problem !== undefined ? `MISSING: ${t.problem}` : `${t.path ?? "-"} (${t.source})`,
      ]);
  }
  return rows;
}

export async function listRuntimes(host: Host, json: boolean): Promise<number> {
  const list = await describeRuntimes(host);
  try {
    await host.registry.fini();
  } catch (error) {
    process.stderr.write(`jobrt: ${(error as JobrtError).message}\n`);
  }
  // Whether steps on this node get a cgroup (probed as this user, with this jobrt.conf).
  const proctrack = host.tracking();
  const cdi = cdiInventory(host.site.devices);
  if (json) {
    process.stdout.write(
      `${JSON.stringify({ apiVersion: RUNTIME_API_VERSION, proctrack, runtimes: list, cdi }, null, 2)}\n`,
    );
  } else {
    const rows = list.map((r) => [
      `${r.name}${r.default ? " (default)" : ""}`,
      r.package ?? "-",
      r.version ?? "-",
      r.compatible ? `ok (API ${r.apiVersion})` : `NO: ${r.problem ?? "unknown"}`,
      r.capabilities.join(",") || "-",
      r.path ?? "-",
      r.resolved ?? "-",
    ]);
    const header = ["RUNTIME", "PACKAGE", "VERSION", "API", "CAPABILITIES", "PATH", "FROM"];
    const widths = header.map((h, i) =>
      Math.max(h.length, ...rows.map((r) => (i === 3 && !r[3]!.startsWith("ok") ? 0 : r[i]!.length))),
    );
    const fmt = (r: string[]) =>
      r
        .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!)))
        .join("  ")
        .trimEnd();
    process.stdout.write(`${[header, ...rows].map(fmt).join("\n")}\n`);
    const how =
      proctrack.kind === "pgid"
        ? `process groups only${proctrack.fallback ? ` (${proctrack.fallback})` : ""}`
        : `${proctrack.kind} (below ${proctrack.path?.replace(/\/jobrt-probe\.\d+$/, "")})`;
    process.stdout.write(`\n${table(["RUNTIME", "TOOL", "VERSION", "PATH"], toolRows(list))}\n`);
    process.stdout.write(`process tracking (ProcTrack=${host.site.procTrack}): ${how}\n`);
    const devices = cdiDeviceLines(cdi);
    process.stdout.write(`\n${[...devices.out, ...devices.problems].join("\n")}\n`);
  }
  return list.every((r) => r.compatible) ? 0 : 1;
}
