import type { HetInfo } from "@jobrt/core";

/**
 * Expands a Slurm host list ("nodea,node[01-03,7],x") into names. One bracket group per name, as
 * Slurm prints them; anything else is taken literally.
 */
export function expandHostList(list: string): string[] {
  const out: string[] = [];
  // Split on commas that are not inside brackets.
  const parts = list.match(/[^,[]+(?:\[[^\]]*\][^,[]*)*/g) ?? [];
  for (const part of parts) {
    const m = /^([^[]*)\[([^\]]*)\](.*)$/.exec(part);
    if (!m) {
      out.push(part);
      continue;
    }
    const [, prefix, ranges, suffix] = m as unknown as [string, string, string, string];
    for (const range of ranges.split(",")) {
      const [lo, hi] = range.split("-");
      if (hi === undefined) {
        out.push(`${prefix}${lo}${suffix}`);
        continue;
      }
      const width = lo!.length;
      for (let i = Number(lo); i <= Number(hi); i++) out.push(`${prefix}${String(i).padStart(width, "0")}${suffix}`);
    }
  }
  return out;
}

/** Decodes "2(x3),1" (SLURM_STEP_TASKS_PER_NODE) into [2, 2, 2, 1]. */
export function expandTasksPerNode(text: string): number[] {
  const out: number[] = [];
  for (const item of text.split(",")) {
    const m = /^(\d+)(?:\(x(\d+)\))?$/.exec(item.trim());
    if (!m) return [];
    for (let i = 0; i < Number(m[2] ?? 1); i++) out.push(Number(m[1]));
  }
  return out;
}

/** How many tasks of the step run on this node (SLURMD_NODENAME in the step's node list); 1 if unknown. */
export function nodeTaskCount(env: NodeJS.ProcessEnv): number {
  const at = expandHostList(env.SLURM_STEP_NODELIST ?? "").indexOf(env.SLURMD_NODENAME ?? "");
  const count = at < 0 ? undefined : expandTasksPerNode(env.SLURM_STEP_TASKS_PER_NODE ?? "")[at];
  return count !== undefined && count > 0 ? count : 1;
}

/**
 * Which component of a heterogeneous step this task belongs to. Slurm (22.05 at least) exports no
 * component number to the tasks of a heterogeneous step, only SLURM_HET_SIZE and per-component
 * node lists (SLURM_JOB_NODELIST_HET_GROUP_<n>, or _PACK_GROUP_<n> in older releases). Components
 * never share a node, so the node decides; the task offset is the number of tasks on the step's
 * nodes of earlier components.
 */
export function hetFromSlurm(env: NodeJS.ProcessEnv): HetInfo | undefined {
  const size = Number(env.SLURM_HET_SIZE ?? env.SLURM_PACK_SIZE);
  if (!Number.isInteger(size) || size < 2) return undefined;
  const node = env.SLURMD_NODENAME ?? "";
  const groupNodes = (n: number) =>
    expandHostList(env[`SLURM_JOB_NODELIST_HET_GROUP_${n}`] ?? env[`SLURM_JOB_NODELIST_PACK_GROUP_${n}`] ?? "");
  let component = -1;
  for (let n = 0; n < size; n++) if (groupNodes(n).includes(node)) component = n;
  if (component < 0) return { component: 0, size, taskOffset: 0 };
  const stepNodes = expandHostList(env.SLURM_STEP_NODELIST ?? "");
  const perNode = expandTasksPerNode(env.SLURM_STEP_TASKS_PER_NODE ?? "");
  const earlier = new Set(Array.from({ length: component }, (_, n) => groupNodes(n)).flat());
  let taskOffset = 0;
  stepNodes.forEach((name, i) => {
    if (earlier.has(name)) taskOffset += perNode[i] ?? 0;
  });
  return { component, size, taskOffset };
}
