/**
 * ch-run's --set-env file format: NAME=VALUE a line. ch-run strips one pair of matching quotes
 * around the value, so every value is single-quoted to keep quotes inside it literal; ch-run runs
 * with --env-no-expand so `$` stays literal too. Values holding a newline cannot be written.
 */
export function formatEnvFile(vars: Iterable<[string, string]>): string {
  let out = "";
  for (const [name, value] of vars) {
    if (value.includes("\n") || value.includes("\0")) continue;
    out += `${name}='${value}'\n`;
  }
  return out;
}
