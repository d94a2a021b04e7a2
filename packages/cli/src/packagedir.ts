import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * @jobrt/cli's own directory (this module is in its src/ or, bundled, its dist/): runtime packages
 * are resolved from beside it (docs/decisions.md, "Runtimes resolve from the site install root").
 */
export const cliPackageDir = join(dirname(fileURLToPath(import.meta.url)), "..");
