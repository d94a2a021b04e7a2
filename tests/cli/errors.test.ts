import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { jobrt, repoRoot, tempDir } from "../helpers/jobrt.js";

/** code -> [hint, exit] from the table docs/errors.md is generated with. */
function documented(): Map<string, { hint: string; exit: number }> {
  const rows = readFileSync(join(repoRoot, "docs/errors.md"), "utf8")
    .split("\n")
    .filter((l) => l.startsWith("| `ERR_"));
  return new Map(
    rows.map((row) => {
      const cells = row.split(" | ");
      return [
        /`(ERR_[A-Z_]+)`/.exec(cells[0]!)![1]!,
        { hint: cells[3]!, exit: Number(cells[4]!.replace(/\s*\|\s*$/, "")) },
      ];
    }),
  );
}

function site() {
  const dir = tempDir("jobrt-errors-");
  writeFileSync(join(dir, "jobrt.conf"), `SpoolDir=${join(dir, "spool")}\n`);
  return { dir, env: { JOBRT_CONF_DIR: dir } };
}

describe("error catalog in the CLI", () => {
  it("exits with the status docs/errors.md gives each code, and -v prints the code's hint", async () => {
    const s = site();
    const docs = documented();
    const cases: [string, string[]][] = [
      ["ERR_USAGE", ["run", "-v", "-n", "0", "true"]],
      ["ERR_RUNTIME_NAME", ["run", "-v", "--runtime", "../x", "true"]],
      ["ERR_RUNTIME_NOT_ALLOWED", ["run", "-v", "--runtime", "jobrt-test-not-allowed", "true"]],
      ["ERR_LAUNCH", ["run", "-v", "--runtime", "none", "--chdir", join(s.dir, "no-such-dir"), "true"]],
    ];
    for (const [code, args] of cases) {
      const r = await jobrt(args, { env: s.env });
      const entry = docs.get(code)!;
      expect(r.stderr, code).toContain(`[${code}]\nhint: ${entry.hint}\n`);
      expect(r.code, code).toBe(entry.exit);
    }
  });
});
