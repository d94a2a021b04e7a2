export { main } from "./main.js";
export { stepFromSlurm } from "./commands/exec.js";
