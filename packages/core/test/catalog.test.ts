import { readFileSync, readdirSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { ERROR_CATALOG } from "../src/catalog.js";
import { JobrtError, catalogEntry, exitStatusOf, jobrtError } from "../src/index.js";

const repo = join(dirname(fileURLToPath(import.meta.url)), "../../..");

/** Every .ts file under a src directory of a package or example (the code that raises errors). */
function sourceFiles(): string[] {
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory() && e.name !== "node_modules" && e.name !== "dist") walk(p);
      else if (e.isFile() && e.name.endsWith(".ts") && /\/(src|template)\//.test(p)) out.push(p);
    }
  };
  for (const group of ["packages", "examples"]) {
    for (const name of readdirSync(join(repo, group))) walk(join(repo, group, name));
  }
  return out;
}

describe("error catalog", () => {
  it("keeps the stable codes, each with a template, a hint and exit 1 or 2", () => {
    // Codes are API: removing or renaming one breaks every caller that matches on it.
    expect(Object.keys(ERROR_CATALOG).sort()).toEqual([
      "ERR_CONF",
      "ERR_CONF_PATTERN",
      "ERR_CONTAINER_IMAGE",
      "ERR_CONTAINER_NOT_CONFIGURED",
      "ERR_CONTAINER_REQUEST",
      "ERR_DEVICE",
      "ERR_IMAGE_UNTRUSTED",
      "ERR_LAUNCH",
      "ERR_MPI_WIREUP",
      "ERR_NOT_IN_SLURM_STEP",
      "ERR_RUNTIME_AMBIGUOUS",
      "ERR_RUNTIME_API_VERSION",
      "ERR_RUNTIME_COMMAND",
      "ERR_RUNTIME_CONTRACT",
      "ERR_RUNTIME_FINI",
      "ERR_RUNTIME_HOOK",
      "ERR_RUNTIME_INDEX",
      "ERR_RUNTIME_INIT",
      "ERR_RUNTIME_INVALID",
      "ERR_RUNTIME_NAME",
      "ERR_RUNTIME_NOT_ALLOWED",
      "ERR_RUNTIME_NOT_FOUND",
      "ERR_RUNTIME_TIMEOUT",
      "ERR_SPOOL",
      "ERR_USAGE",
    ]);
    for (const [code, e] of Object.entries(ERROR_CATALOG)) {
      expect(code).toMatch(/^ERR_[A-Z_]+$/);
      expect([1, 2]).toContain(e.exit);
      expect(e.template.length, code).toBeGreaterThan(0);
      expect(e.hint.length, code).toBeGreaterThan(0);
      expect(e.when.length, code).toBeGreaterThan(0);
    }
  });

  it("builds the message from the code's template and keeps code, cause and details", () => {
    const cause = new Error("boom");
    const e = jobrtError(
      "ERR_RUNTIME_HOOK",
      { runtime: "runtime/x", hook: "setup", reason: "boom" },
      { cause, details: { runtime: "runtime/x" } },
    );
    expect(e).toBeInstanceOf(JobrtError);
    expect(e.message).toBe("runtime runtime/x setup failed: boom");
    expect(e.code).toBe("ERR_RUNTIME_HOOK");
    expect(e.cause).toBe(cause);
    expect(e.runtime).toBe("runtime/x");
  });

  it("does not expand braces that come from a parameter's value", () => {
    const e = jobrtError("ERR_RUNTIME_CONTRACT", { problem: "run must return {argv, env, cwd}" });
    expect(e.message).toBe("run must return {argv, env, cwd}");
  });

  it("refuses a missing parameter at compile time and at run time", () => {
    // @ts-expect-error the template needs runtime, hook and reason
    expect(() => jobrtError("ERR_RUNTIME_HOOK", { runtime: "runtime/x", hook: "setup" })).toThrow(
      /parameter reason is missing/,
    );
  });

  it("gives the CLI's exit status per code, 1 for a code outside the catalog", () => {
    expect(exitStatusOf("ERR_USAGE")).toBe(2);
    expect(exitStatusOf("ERR_CONF")).toBe(2);
    expect(exitStatusOf("ERR_LAUNCH")).toBe(1);
    expect(exitStatusOf("ERR_NOT_A_CODE")).toBe(1);
    expect(exitStatusOf("toString")).toBe(1);
    expect(catalogEntry("constructor")).toBeUndefined();
  });

  it("is the only way errors are built: no source outside errors.ts calls new JobrtError", () => {
    const files = sourceFiles();
    expect(files.length).toBeGreaterThan(50);
    const offenders = files
      .filter((f) => !f.endsWith("packages/core/src/errors.ts"))
      .filter((f) => /\bnew JobrtError\s*\(/.test(readFileSync(f, "utf8")))
      .map((f) => relative(repo, f));
    expect(offenders).toEqual([]);
  });
});
