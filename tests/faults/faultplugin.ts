import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { repoRoot, tempDir } from "../helpers/jobrt.js";

/**
 * A real runtime package, `jobrt-runtime-fault`, installed in a PluginDir of its own. What it does
 * wrong comes from $JOBRT_FAULT in jobrt's environment (comma list): init-hang, setup-throw,
 * setup-slow, cleanup-throw, cleanup-slow, cleanup-hang (an hour), fini-throw. Every hook call is appended to
 * $JOBRT_FAULT_LOG, so tests can prove cleanup and fini ran.
 */
export function faultPluginDir(): string {
  const dir = tempDir("jobrt-fault-plugins-");
  const pkg = join(dir, "node_modules", "jobrt-runtime-fault");
  mkdirSync(pkg, { recursive: true });
  const core = new URL(`file://${join(repoRoot, "packages/core/dist/index.js")}`).href;
  writeFileSync(
    join(pkg, "package.json"),
    JSON.stringify({ name: "jobrt-runtime-fault", version: "0.0.1", type: "module", exports: "./index.js" }),
  );
  writeFileSync(
    join(pkg, "index.js"),
    `import { appendFileSync } from "node:fs";
import { definePlugin } from ${JSON.stringify(core)};
const faults = () => (process.env.JOBRT_FAULT ?? "").split(",");
const log = (what) => process.env.JOBRT_FAULT_LOG && appendFileSync(process.env.JOBRT_FAULT_LOG, what + "\\n");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export default definePlugin({ name: "fault", type: "runtime/fault", version: "0.0.1" }, {
  async init() { log("init"); if (faults().includes("init-hang")) await new Promise(() => {}); },
  async setup() {
    log("setup");
    if (faults().includes("setup-slow")) { log("setup-waiting"); await sleep(3000); }
    if (faults().includes("setup-throw")) throw new Error("injected setup failure");
  },
  async cleanup() {
    log("cleanup");
    if (faults().includes("cleanup-slow")) { log("cleanup-waiting"); await sleep(2000); log("cleanup-done"); }
    if (faults().includes("cleanup-hang")) { log("cleanup-hanging"); await sleep(3_600_000); }
    if (faults().includes("cleanup-throw")) throw new Error("injected cleanup failure");
  },
  fini() { log("fini"); if (faults().includes("fini-throw")) throw new Error("injected fini failure"); },
});
`,
  );
  return dir;
}
