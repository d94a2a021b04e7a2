import { MODULE_NAME_RE, type ShifterConf } from "./conf.js";
import { reject, show } from "./reject.js";
import type { UdiRootConf } from "./udiroot.js";

/**
 * Validates the requested modules. Each `--container-module` value may be one name or a comma
 * list (Shifter's own --module syntax); `none` disables the site defaults and must stand alone.
 * Returns the names to pass (["none"] for none), or [] when nothing was requested.
 */
export function parseModules(
  entries: string[],
  field: string,
  conf: ShifterConf,
  udi: UdiRootConf | undefined,
): string[] {
  const names: string[] = [];
  for (const entry of entries) {
    for (const name of entry.split(",")) {
      if (name === "") throw reject(field, entry, "has an empty module name");
      if (!MODULE_NAME_RE.test(name))
        throw reject(field, entry, `module name ${show(name)} is not valid (letters, digits, '.', '-'; no '_')`);
      if (names.includes(name)) throw reject(field, entry, `module ${name} is given twice`);
      names.push(name);
    }
  }
  if (names.includes("none")) {
    if (names.length > 1)
      throw reject(field, entries.join(","), "'none' disables every module and cannot be combined with other modules");
    return names;
  }
  for (const name of names) {
    const mod = udi?.modules.get(name);
    if (conf.allowedModules) {
      if (!conf.allowedModules.includes(name)) {
        throw reject(
          field,
          name,
          `module ${name} is not allowed here (shifter.conf AllowedModules: ${conf.allowedModules.join(", ") || "none"})`,
        );
      }
      if (mod && !mod.enabled)
        throw reject(field, name, `module ${name} is disabled in udiRoot.conf (module_${name}_enabled=0)`);
    } else {
      if (!mod)
        throw reject(
          field,
          name,
          `module ${name} is not defined in udiRoot.conf${udi ? ` (${udi.file})` : " (none found)"}`,
        );
      if (!mod.enabled)
        throw reject(field, name, `module ${name} is disabled in udiRoot.conf (module_${name}_enabled=0)`);
    }
    const clash = mod?.conflicts.find((c) => names.includes(c));
    if (clash)
      throw reject(
        field,
        names.join(","),
        `modules ${name} and ${clash} conflict (udiRoot.conf module_${name}_conflict)`,
      );
  }
  return names;
}
