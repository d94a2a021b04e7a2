#!/usr/bin/env -S node --
// The "--" stops Node 20 from reading options such as --env-file= out of the job's own argv.
import { main } from "./main.js";

process.exitCode = await main(process.argv.slice(2));
// Plugins or stdin may hold the event loop open; the step is over, so leave now. stdout and
// stderr are synchronous for files and pipes on Linux, so nothing written is lost.
process.exit();
