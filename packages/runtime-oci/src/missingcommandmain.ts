/**
 * The missing-command look of a create/start task whose RunTimeCreate failed (createstart.pl):
 * `node missingcommandmain.js TASKDIR` prints the task's missing-command line and exits with its
 * status (127/126), or exits 0 when the command may exist (missingcommand.ts).
 */
import { missingCommandIn } from "./missingcommand.js";

const missing = missingCommandIn(process.argv[2] ?? "");
if (missing) process.stdout.write(`${missing.message}\n`);
process.exit(missing?.status ?? 0);
