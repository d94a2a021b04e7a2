import { accessSync, constants, statSync } from "node:fs";

/**
 * Whether `path` is a file this process may execute: undefined when it is, else why not
 * ("does not exist", "is not a file", "cannot be run (EACCES)"), prefixed with the path.
 */
export function executableProblem(path: string): string | undefined {
  try {
    if (!statSync(path).isFile()) return `${path} is not a file`;
    accessSync(path, constants.X_OK);
    return undefined;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code === "ENOENT" ? `${path} does not exist` : `${path} cannot be run (${code})`;
  }
}
