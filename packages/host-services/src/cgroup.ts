import { readFileSync } from "node:fs";

/** One line of /proc/<pid>/cgroup: the process's cgroup in one hierarchy. */
export interface CgroupMembership {
  /** The hierarchy id; "0" for cgroup2. */
  id: string;
  /** The v1 controllers of the hierarchy; [] for cgroup2 (and a v1 hierarchy with none, "name=" only). */
  controllers: string[];
  /** The cgroup, relative to the hierarchy's root ("/" for the root); it may hold ':'. */
  path: string;
}

/** Parses /proc/<pid>/cgroup text. */
export function parseCgroups(text: string): CgroupMembership[] {
  const out: CgroupMembership[] = [];
  for (const line of text.split("\n")) {
    const [id, controllers, ...rest] = line.split(":");
    if (id === undefined || id === "" || controllers === undefined) continue;
    out.push({ id, controllers: controllers === "" ? [] : controllers.split(","), path: rest.join(":") });
  }
  return out;
}

/** The cgroups of `pid` (this process by default); none when /proc says nothing. */
export function procCgroups(pid: number | "self" = "self"): CgroupMembership[] {
  try {
    return parseCgroups(readFileSync(`/proc/${pid}/cgroup`, "utf8"));
  } catch {
    return [];
  }
}

/** The cgroup2 line ("0::/path"), which a v1 hierarchy never matches. */
export function isCgroup2(m: CgroupMembership): boolean {
  return m.id === "0" && m.controllers.length === 0;
}
