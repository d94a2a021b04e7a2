import { isAbsolute } from "node:path";
import { type ParsedConf, confError } from "@jobrt/core";
import { DEFAULT_CDI_SPEC_DIRS } from "./cdi-registry.js";
import { isCdiKind } from "./cdi-spec.js";
import { DEFAULT_DEVICE_CONF, type DeviceConf } from "./resolve.js";

/** The device keys of a parsed jobrt.conf (or none: the defaults), each checked at its line (docs/devices.md). */
export function deviceConfFrom(parsed: ParsedConf | undefined): DeviceConf {
  const conf: DeviceConf = { specDirs: [...DEFAULT_CDI_SPEC_DIRS], ...DEFAULT_DEVICE_CONF, defaults: [] };
  if (!parsed) return conf;
  const v = parsed.values;
  if (v.CdiSpecDirs !== undefined) {
    conf.specDirs = v.CdiSpecDirs as string[];
    const bad = conf.specDirs.find((d) => !isAbsolute(d));
    if (bad !== undefined) throw confError(parsed.where.CdiSpecDirs!, "CdiSpecDirs", `${JSON.stringify(bad)} must be an absolute path`);
  }
  if (v.CdiGresKind !== undefined) {
    if (!isCdiKind(v.CdiGresKind as string)) throw confError(parsed.where.CdiGresKind!, "CdiGresKind", `${JSON.stringify(v.CdiGresKind)} is not a CDI kind (vendor.com/class)`);
    conf.gresKind = v.CdiGresKind as string;
  }
  if (v.CdiGresMap !== undefined) {
    const map = (v.CdiGresMap as string).toLowerCase();
    if (map !== "index" && map !== "uuid") throw confError(parsed.where.CdiGresMap!, "CdiGresMap", `${JSON.stringify(v.CdiGresMap)} is not one of index, uuid`);
    conf.gresMap = map;
  }
  if (v.CdiDefaultDevices !== undefined) conf.defaults = v.CdiDefaultDevices as string[];
  return conf;
}
