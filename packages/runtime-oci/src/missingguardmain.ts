/** Entry point of the run-mode missing-command guard: `node missingguardmain.js TASKDIR group|leader ARGV...`. */
import { guard } from "./missingguard.js";

guard(process.argv[2] ?? "", process.argv[3] ?? "group", process.argv.slice(4));
