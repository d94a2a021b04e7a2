// Baseline for launch-none: spawn N copies of a program concurrently and wait for all, the least
// any launcher written in Node must do.
import { spawn } from "node:child_process";

const n = Number(process.argv[2]);
const argv = process.argv.slice(3);
let left = n;
let worst = 0;
for (let i = 0; i < n; i++) {
  const child = spawn(argv[0], argv.slice(1), { stdio: "ignore" });
  child.on("close", (code) => {
    worst = Math.max(worst, code ?? 1);
    if (--left === 0) process.exit(worst);
  });
}
