import { type TaskRecord, carriesRawBytes, jobrtError } from "@jobrt/core";

/**
 * A container's argv and environment travel as JSON strings in config.json, which hold text, not
 * bytes: a byte that is not UTF-8 would reach the task as U+FFFD. Refused before anything starts,
 * naming the task and the argument or variable (docs/cli.md, "Bytes that are not UTF-8").
 */
export function refuseBytesNotUtf8(task: TaskRecord, withEnv: boolean, containerEnv: readonly string[]): void {
  const arg = task.argv.findIndex(carriesRawBytes);
  const variable = withEnv
    ? Object.entries(task.env).find(([k, v]) => carriesRawBytes(k) || carriesRawBytes(v))
    : undefined;
  const extra = containerEnv.find(carriesRawBytes);
  if (arg === -1 && variable === undefined && extra === undefined) return;
  const what =
    arg !== -1
      ? `argv[${arg}]`
      : variable
        ? `variable ${JSON.stringify(variable[0])}`
        : `--container-env ${JSON.stringify(extra!.split("=")[0])}`;
  throw jobrtError(
    "ERR_LAUNCH",
    {
      problem: `task ${task.globalId}: ${what} holds bytes that are not UTF-8, which runtime oci cannot pass (config.json is JSON text); use runtime none for it, or pass the bytes in a file`,
    },
    { details: { runtime: "runtime/oci" } },
  );
}
