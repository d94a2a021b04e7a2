import { accessSync, constants, statSync } from "node:fs";
import type { CheckFinding, RuntimeTool } from "@jobrt/core";
import { type ShifterConf, confRef } from "./conf.js";
import type { UdiRootConf } from "./udiroot.js";

/**
 * Shifter's programs as this node has them. Shifter prints no version (it has no --version
 * option, and -V is a volume), so none is reported; udiRoot.conf names the install.
 */
function tool(name: string, path: string, source: string): RuntimeTool {
  try {
    if (!statSync(path).isFile()) return { name, source, path, problem: `${path} is not a file` };
    accessSync(path, constants.X_OK);
    return { name, source, path };
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return { name, source, path, problem: code === "ENOENT" ? `${path} does not exist: install Shifter or set ${name === "shifter" ? "ShifterPath" : "ShifterimgPath"} in shifter.conf` : `${path} cannot be run (${code})` };
  }
}

/** shifter (ShifterPath) and shifterimg (ShifterimgPath, else `<udiRootPath>/bin/shifterimg`). */
export function shifterTools(conf: ShifterConf, udi: UdiRootConf | undefined, shifterimg: string): RuntimeTool[] {
  const imgSource = conf.shifterimgPath ? confRef(conf, "ShifterimgPath") : udi?.udiRootPath ? `udiRootPath in ${conf.udiRootConf}` : "the default";
  return [tool("shifter", conf.shifterPath, conf.where.ShifterPath ? confRef(conf, "ShifterPath") : "the default ShifterPath"), tool("shifterimg", shifterimg, imgSource)];
}

/** A tool as a `jobrt check` finding; Shifter reports no version. */
export function toolFinding(t: RuntimeTool): CheckFinding {
  const subject = `tool ${t.name} (${t.source})`;
  return t.problem !== undefined ? { subject, status: "failed", detail: t.problem } : { subject, status: "ok", detail: `${t.path}, version not reported (shifter has no --version)` };
}
