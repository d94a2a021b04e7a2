import { accessSync, constants, statSync } from "node:fs";
import { delimiter, isAbsolute, join } from "node:path";
import { jobrtError } from "@jobrt/core";

/** Absolute path of ch-run: ChRun= as given when absolute, else looked up on the host's PATH. */
export function findChRun(chRun: string, path = process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin"): string {
  const candidates = isAbsolute(chRun)
    ? [chRun]
    : path
        .split(delimiter)
        .filter((d) => isAbsolute(d))
        .map((d) => join(d, chRun));
  for (const c of candidates) {
    try {
      if (statSync(c).isFile()) {
        accessSync(c, constants.X_OK);
        return c;
      }
    } catch {
      // try the next directory
    }
  }
  throw jobrtError(
    "ERR_RUNTIME_COMMAND",
    {
      problem: `ch-run ${JSON.stringify(chRun)} not found${isAbsolute(chRun) ? "" : " on PATH"}: install Charliecloud (Debian: apt-get install charliecloud-runtime) or set ChRun= in charliecloud.conf`,
    },
    { details: { runtime: "runtime/charliecloud", key: "ChRun" } },
  );
}
