import type { CheckFinding, RuntimeTool } from "@jobrt/core";
import { executableProblem } from "@jobrt/host-services";
import { type ShifterConf, confRef } from "./conf.js";
import type { UdiRootConf } from "./udiroot.js";

/**
 * Shifter's programs as this node has them. Shifter prints no version (it has no --version
 * option, and -V is a volume), so none is reported; udiRoot.conf names the install.
 */
function tool(name: string, path: string, source: string): RuntimeTool {
  const problem = executableProblem(path);
  if (problem === undefined) return { name, source, path };
  const missing = problem === `${path} does not exist`;
  return {
    name,
    source,
    path,
    problem: missing
      ? `${problem}: install Shifter or set ${name === "shifter" ? "ShifterPath" : "ShifterimgPath"} in shifter.conf`
      : problem,
  };
}

/** shifter (ShifterPath) and shifterimg (ShifterimgPath, else `<udiRootPath>/bin/shifterimg`). */
export function shifterTools(conf: ShifterConf, udi: UdiRootConf | undefined, shifterimg: string): RuntimeTool[] {
  const imgSource = conf.shifterimgPath
    ? confRef(conf, "ShifterimgPath")
    : udi?.udiRootPath
      ? `udiRootPath in ${conf.udiRootConf}`
      : "the default";
  return [
    tool(
      "shifter",
      conf.shifterPath,
      conf.where.ShifterPath ? confRef(conf, "ShifterPath") : "the default ShifterPath",
    ),
    tool("shifterimg", shifterimg, imgSource),
  ];
}

/** A tool as a `jobrt check` finding; Shifter reports no version. */
export function toolFinding(t: RuntimeTool): CheckFinding {
  const subject = `tool ${t.name} (${t.source})`;
  return t.problem !== undefined
    ? { subject, status: "failed", detail: t.problem }
    : { subject, status: "ok", detail: `${t.path}, version not reported (shifter has no --version)` };
}
