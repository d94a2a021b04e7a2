import { isAbsolute } from "node:path";
import { type ConfSchema, type ParsedConf, confError } from "@jobrt/core";
import { DEFAULT_CDI_SPEC_DIRS } from "./cdiregistry.js";
import { isCdiKind } from "./cdispec.js";
import { DEFAULT_DEVICE_CONF, type DeviceConf } from "./resolve.js";

/** jobrt.conf's device keys: siteconf.ts spreads them into its schema. */
export const DEVICE_SCHEMA = {
  CdiSpecDirs: { type: "list" },
  CdiDefaultDevices: { type: "list" },
  CdiGresKind: { type: "string" },
  CdiGresMap: { type: { enum: { index: "index" as const, uuid: "uuid" as const } } },
} satisfies ConfSchema;

/** The device keys of a parsed jobrt.conf (or none: the defaults), each checked at its line (docs/devices.md). */
export function deviceConfFrom(parsed: ParsedConf<typeof DEVICE_SCHEMA> | undefined): DeviceConf {
  const conf: DeviceConf = { specDirs: [...DEFAULT_CDI_SPEC_DIRS], ...DEFAULT_DEVICE_CONF, defaults: [] };
  if (!parsed) return conf;
  const v = parsed.values;
  if (v.CdiSpecDirs !== undefined) {
    conf.specDirs = v.CdiSpecDirs;
    const bad = conf.specDirs.find((d) => !isAbsolute(d));
    if (bad !== undefined)
      throw confError(parsed.where.CdiSpecDirs!, "CdiSpecDirs", `${JSON.stringify(bad)} must be an absolute path`);
  }
  if (v.CdiGresKind !== undefined) {
    if (!isCdiKind(v.CdiGresKind))
      throw confError(
        parsed.where.CdiGresKind!,
        "CdiGresKind",
        `${JSON.stringify(v.CdiGresKind)} is not a CDI kind (vendor.com/class)`,
      );
    conf.gresKind = v.CdiGresKind;
  }
  if (v.CdiGresMap !== undefined) conf.gresMap = v.CdiGresMap;
  if (v.CdiDefaultDevices !== undefined) conf.defaults = v.CdiDefaultDevices;
  return conf;
}
