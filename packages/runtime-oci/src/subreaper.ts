import { fileURLToPath } from "node:url";

/**
 * The supervisor program, from either src/ (tests) or dist/. The host starts it through the perl
 * prefix of watchdog.ts, which makes it a child subreaper.
 */
export const SUPERVISOR_PROGRAM = fileURLToPath(new URL("../dist/supervisormain.js", import.meta.url));
