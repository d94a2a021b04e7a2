import type { CdiInventory } from "@jobrt/launcher";

/**
 * The node's CDI devices as `jobrt runtimes` and `jobrt check` print them (docs/devices.md): one
 * line per device with the spec file that describes it, then each problem of the spec dirs.
 */
export function cdiDeviceLines(inventory: CdiInventory): { out: string[]; problems: string[] } {
  const dirs = inventory.specDirs.join(", ");
  const out: string[] = [];
  if (inventory.devices.length === 0) out.push(`CDI devices: none (spec dirs ${dirs})`);
  else {
    out.push(`CDI devices (spec dirs ${dirs}):`);
    const width = Math.max(...inventory.devices.map((d) => d.name.length));
    for (const d of inventory.devices) out.push(`  ${d.name.padEnd(width)}  ${d.spec}`);
  }
  return { out, problems: inventory.problems.map((p) => `problem: ${p}`) };
}
