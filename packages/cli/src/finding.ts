import type { CheckFinding } from "@jobrt/core";
import { say } from "./say.js";

const SHOWN: Record<CheckFinding["status"], string> = { ok: "ok", failed: "failed", unchecked: "not checked" };

/**
 * `jobrt check`'s finding lines (docs/cli.md): `HEAD: SUBJECT: ok|failed|not checked: DETAIL`, failed
 * ones on stderr. Returns the number that failed.
 */
export function showFindings(head: string, findings: readonly CheckFinding[]): number {
  let failed = 0;
  for (const f of findings) {
    const line = `${head}: ${f.subject}: ${SHOWN[f.status]}${f.detail !== undefined ? `: ${f.detail}` : ""}`;
    if (f.status === "failed") {
      say(line);
      failed++;
    } else process.stdout.write(`${line}\n`);
  }
  return failed;
}
