import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { JsonEvent } from "../../packages/cli/dist/index.js";
import { jobrt, repoRoot, tempDir } from "../helpers/jobrt.js";

/** Every kind of the typed union, once: the compiler fails here when a kind is added or dropped. */
const KINDS: Record<JsonEvent["event"], true> = {
  "step-start": true,
  runtime: true,
  pull: true,
  setup: true,
  "task-start": true,
  output: true,
  "task-exit": true,
  cancel: true,
  cleanup: true,
  "step-end": true,
};

/** The `--json events` table of docs/cli.md: kind -> the field names its row mentions. */
function documentedEvents(): Map<string, Set<string>> {
  const text = readFileSync(join(repoRoot, "docs/cli.md"), "utf8");
  const section = text.slice(text.indexOf("### --json events"));
  const rows = section
    .slice(0, section.indexOf("\n### "))
    .split("\n")
    .filter((l) => /^\| `[a-z-]+` \|/.test(l));
  const out = new Map<string, Set<string>>();
  for (const row of rows) {
    const cells = row.split(" | ");
    const kind = /`([a-z-]+)`/.exec(cells[0]!)![1]!;
    out.set(kind, new Set([...(cells[2] ?? "").matchAll(/`([A-Za-z]+)`/g)].map((m) => m[1]!)));
  }
  return out;
}

function site() {
  const dir = tempDir("jobrt-json-");
  writeFileSync(join(dir, "jobrt.conf"), `SpoolDir=${join(dir, "spool")}\nKillWait=2\n`);
  return { dir, env: { JOBRT_CONF_DIR: dir } };
}

function events(stdout: string): JsonEvent[] {
  return stdout
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as JsonEvent);
}

describe("jobrt run --json events", () => {
  it("docs/cli.md documents every kind of the typed union, and nothing else", () => {
    expect([...documentedEvents().keys()].sort()).toEqual(Object.keys(KINDS).sort());
  });

  it("every event carries event, time and only fields docs/cli.md lists for its kind", async () => {
    const s = site();
    const ok = await jobrt(
      ["run", "-n", "2", "--runtime", "none", "--json", "sh", "-c", "echo out $SLURM_PROCID; echo err >&2"],
      { env: s.env },
    );
    expect(ok.code).toBe(0);
    const missing = await jobrt(["run", "--runtime", "none", "--json", "/nonexistent/jobrt-no-such-command"], {
      env: s.env,
    });
    expect(missing.code).toBe(127);
    const cancelled = await jobrt(["run", "--runtime", "none", "--json", "-t", "0:01", "sleep", "30"], {
      env: s.env,
      timeoutMs: 30_000,
    });
    const all = [...events(ok.stdout), ...events(missing.stdout), ...events(cancelled.stdout)];
    const docs = documentedEvents();
    const seen = new Set<string>();
    for (const e of all) {
      seen.add(e.event);
      expect(typeof e.time, JSON.stringify(e)).toBe("number");
      const allowed = docs.get(e.event);
      expect(allowed, `${e.event} is not in docs/cli.md`).toBeDefined();
      const undocumented = Object.keys(e).filter((k) => k !== "event" && k !== "time" && !allowed!.has(k));
      expect(undocumented, `${e.event} fields missing from docs/cli.md`).toEqual([]);
    }
    expect([...seen].sort()).toEqual([
      "cancel",
      "cleanup",
      "output",
      "runtime",
      "setup",
      "step-end",
      "step-start",
      "task-exit",
      "task-start",
    ]);
    expect(events(missing.stdout).find((e) => e.event === "task-exit")).toMatchObject({
      status: 127,
      error: "command not found",
    });
  });

  it("a runtime's own error code reaches step-end as causeCode, next to ERR_RUNTIME_HOOK", async () => {
    const s = site();
    const r = await jobrt(["run", "--runtime", "oci", "--json", "--container", join(s.dir, "no-such-bundle"), "true"], {
      env: s.env,
    });
    expect(r.code).toBe(1);
    const end = events(r.stdout).at(-1);
    expect(end).toMatchObject({
      event: "step-end",
      status: 1,
      code: "ERR_RUNTIME_HOOK",
      causeCode: expect.stringMatching(/^ERR_CONTAINER_/),
    });
  });
});
