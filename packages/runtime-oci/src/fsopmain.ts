/**
 * The file helper: runs a JSON list of FsOps from stdin as whoever started it (the plugin starts
 * it as the job user) and prints one result per op as JSON.
 */
import { readFileSync } from "node:fs";
import { type FsOp, applyFsOp } from "./fsops.js";

process.umask(0o077);
const ops = JSON.parse(readFileSync(0, "utf8")) as FsOp[];
process.stdout.write(JSON.stringify(ops.map(applyFsOp)));
