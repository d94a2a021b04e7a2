import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";

export default function setup(): void {
  const pkg = fileURLToPath(new URL("..", import.meta.url));
  const tsc = fileURLToPath(new URL("../../../node_modules/.bin/tsc", import.meta.url));
  execFileSync(tsc, ["-b", pkg], { stdio: "inherit" });
}
