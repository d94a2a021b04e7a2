/** Entry point of the run-mode missing-command guard: `node missingguard-main.js TASKDIR ARGV...`. */
import { guard } from "./missingguard.js";

guard(process.argv[2] ?? "", process.argv.slice(3));
