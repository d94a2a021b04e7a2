#!/usr/bin/env node
import { main } from "./main.js";

process.exitCode = await main(process.argv.slice(2));
// Plugins or stdin may hold the event loop open; the step is over, so leave now. stdout and
// stderr are synchronous for files and pipes on Linux, so nothing written is lost.
process.exit();
