/** Entry point of the missing-command guard: `node guardmain.js '<LookupSpec JSON>' ARGV...`. */
import { guard } from "./guard.js";
import type { LookupSpec } from "./missingcommand.js";

try {
  guard(JSON.parse(process.argv[2] ?? "") as LookupSpec, process.argv.slice(3));
} catch (error) {
  process.stderr.write(`charliecloud: missing-command guard: ${(error as Error).message}\n`);
  process.exit(1);
}
