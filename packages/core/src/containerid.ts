/**
 * A container's id (`--container-id`, `SLURM_CONTAINER_ID`): the CLI checks what a user gives,
 * a runtime checks its request again (its options may come from `--container-opt id=`).
 */

/**
 * runc's rule for a container id (libcontainer's idRegex, and not `.` or `..`), without a leading
 * `-`: the id is pasted into runtime commands that may run as root, where `-x` or `--root=/x`
 * would be read as an option.
 */
const VALID = /^[A-Za-z0-9_+.][A-Za-z0-9_+.-]*$/;
const MAX = 128;

/** Why `id` cannot name a container, or undefined when it can. Since core 2.1.0. */
export function containerIdProblem(id: string): string | undefined {
  if (id === "") return "empty value";
  if (id.length > MAX) return `${id.length} characters, at most ${MAX}`;
  if (id === "." || id === ".." || !VALID.test(id)) {
    return `${JSON.stringify(id)} is not a container id (letters, digits, '_', '+', '.', '-', not starting with '-', not . or ..)`;
  }
  return undefined;
}
