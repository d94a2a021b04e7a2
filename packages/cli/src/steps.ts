// The commands that run a step, built as one CommonJS script (dist/steps.cjs) that codecache.ts
// compiles with V8's code cache: `jobrt run` and `jobrt exec` start without compiling their code.
export { execCommand } from "./commands/exec.js";
export { runCommand } from "./commands/run.js";
