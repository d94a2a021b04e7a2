import { join } from "node:path";
import type { ErrorCode } from "@jobrt/core";
import type { InvalidCase } from "./options.js";
import type { SuiteKit } from "./suitekit.js";

/** Codes a runtime may give for a container that does not exist (as errors.container-required accepts). */
const CONTAINER_CODES: readonly ErrorCode[] = [
  "ERR_CONTAINER_IMAGE",
  "ERR_CONTAINER_REQUEST",
  "ERR_CONTAINER_NOT_CONFIGURED",
];

/**
 * The invalid requests the error checks run: the author's, or, for a runtime that requires a
 * container and declared none, one the kit makes itself: a container under a fresh empty temp dir,
 * which cannot exist. Without it, cleanup after a failed setup would go unchecked for exactly the
 * runtimes whose setup fails most (a missing image).
 */
export function invalidCases(kit: SuiteKit): InvalidCase[] {
  const declared = kit.options.invalid ?? [];
  if (declared.length > 0 || kit.caps.container !== "required") return declared;
  const missing = (): { value: string } => ({
    value: join(kit.tempDir("nocontainer"), "jobrt-testkit-no-such-container"),
  });
  return [{ title: "a container that cannot exist, made by the kit", container: missing, code: CONTAINER_CODES }];
}
