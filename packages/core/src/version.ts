import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

/**
 * The version in the package.json one directory above a module (dist/x.js → package.json), so a
 * plugin's meta.version always says what is installed. Pass `import.meta.url`.
 */
export function packageVersion(moduleUrl: string): string {
  const path = fileURLToPath(new URL("../package.json", moduleUrl));
  const version = (JSON.parse(readFileSync(path, "utf8")) as { version?: unknown }).version;
  if (typeof version !== "string") throw new Error(`${path} has no version`);
  return version;
}
