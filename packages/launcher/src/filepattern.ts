import { jobrtError } from "@jobrt/core";

export interface FilePatternValues {
  jobId: number;
  stepId: number;
  /** Global task id; undefined when the name is shared by all tasks. */
  taskId?: number;
  nodeName: string;
  nodeId: number;
}

/** True when the pattern names one file per task (contains %t). */
export function isPerTask(pattern: string): boolean {
  return /%(?:\d+)?t/.test(pattern.replace(/%%/g, ""));
}

/**
 * The widest zero padding: Slurm's own maximum (it quietly uses 10 for anything wider). A wider
 * one is a usage error here, so `%999999999t` cannot ask for a gigabyte-long file name.
 */
export const MAX_PAD_WIDTH = 10;

/**
 * Expands srun's filename patterns: %j job id, %s step id, %t task id, %n node id, %N node name,
 * %% a percent sign; a number between % and the letter zero-pads (%3t → 007).
 */
export function expandFilePattern(pattern: string, option: string, v: FilePatternValues): string {
  return pattern.replace(/%(\d*)(.)/g, (_, width: string, c: string) => {
    if (Number(width) > MAX_PAD_WIDTH) {
      const shown = width.length > 12 ? `${width.slice(0, 12)}...` : width;
      throw jobrtError("ERR_USAGE", {
        problem: `${option}: padding width ${shown} in %${shown}${c} is more than ${MAX_PAD_WIDTH}`,
      });
    }
    const pad = (n: number) => String(n).padStart(width === "" ? 0 : Number(width), "0");
    switch (c) {
      case "%":
        return "%";
      case "j":
        return pad(v.jobId);
      case "s":
        return pad(v.stepId);
      case "t":
        if (v.taskId === undefined) throw jobrtError("ERR_USAGE", { problem: `${option}: %t has no value here` });
        return pad(v.taskId);
      case "n":
        return pad(v.nodeId);
      case "N":
        return v.nodeName;
      default:
        throw jobrtError("ERR_USAGE", {
          problem: `${option}: unknown pattern %${c} in ${JSON.stringify(pattern)} (use %j %s %t %n %N %%)`,
        });
    }
  });
}
