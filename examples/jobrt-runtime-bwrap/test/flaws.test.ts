import { spawnSync } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Flaw } from "./flaws/plugins.js";
import { tempDir } from "../../../tests/helpers/tmp.js";

interface AssertionResult {
  ancestorTitles: string[];
  title: string;
  status: "passed" | "failed" | "skipped" | "pending" | "todo";
  failureMessages: string[];
}

const here = dirname(fileURLToPath(import.meta.url));
const vitestBin = join(dirname(createRequire(import.meta.url).resolve("vitest/package.json")), "vitest.mjs");
let out: string;
let results: AssertionResult[] = [];

// Each broken variant of the bwrap runtime must fail the testkit check for its flaw, run as an
// author runs the testkit (a vitest of its own): a conformance run that cannot fail proves nothing.
beforeAll(() => {
  out = tempDir("jobrt-bwrap-flaws-");
  const report = join(out, "report.json");
  // TMPDIR: the dirs the tmp-leak variant makes in every check land in `out`, which is removed.
  const child = spawnSync(
    process.execPath,
    [vitestBin, "run", "--config", join(here, "flaws/vitest.config.ts"), "--reporter=json", `--outputFile=${report}`],
    { cwd: join(here, "flaws"), encoding: "utf8", timeout: 600_000, env: { ...process.env, CI: "1", TMPDIR: out } },
  );
  expect(child.status, `the child vitest should fail (the runtimes are broken)\n${child.stderr.slice(-2000)}`).toBe(1);
  const json = JSON.parse(readFileSync(report, "utf8")) as { testResults: { assertionResults: AssertionResult[] }[] };
  results = json.testResults.flatMap((f) => f.assertionResults);
}, 660_000);
afterAll(() => rmSync(out, { recursive: true, force: true }));

/** check id → result, for one flaw's suite. */
function outcome(flaw: Flaw): Map<string, AssertionResult> {
  const map = new Map<string, AssertionResult>();
  for (const r of results.filter((r) => r.ancestorTitles[0] === `flaw:${flaw}`)) {
    const id = /^\[(?:MUST|SHOULD)\] ([a-z.-]+)/.exec(r.title)?.[1];
    if (id) map.set(id, r);
  }
  return map;
}

const expectations: [flaw: Flaw, check: string, message: RegExp][] = [
  ["tmp-leak", "cleanup.outside-spool", /after cleanup TMPDIR .* holds bwrap-\d+-/],
  ["slurm-env-only", "launch.env", /lacks .*JOBRT_TESTKIT_ENV/],
  ["module-state", "state.different-requests", /step a's ExecSpec holds .*which is step b's/],
  ["wipes-spool", "cleanup.other-steps", /cleanup removed .*which belong to another step/],
  ["setup-helper", "cleanup.processes", /still running after cleanup: pid \d+ \(sleep/],
  ["outlives-sigterm", "launch.sigterm", /SIGTERM handler did not complete within KillWait/],
  ["ignores-cwd", "launch.cwd", /the task ran in "\/", not the step's cwd/],
  ["missing-to-1", "launch.missing-command", /gave exit 1,.*bwrap: execvp.*expected exit 127/],
  ["sigterm-cut-short", "launch.sigterm", /SIGTERM handler did not complete within KillWait/],
  // Issue 24's escape: passes every check a cgroup helps with (launch.background included).
  ["escapes", "pgid.background", /tracked by process group only .*the task's processes still ran: pid \d+ \(sh,/],
  ["escapes", "pgid.leader-kill", /after SIGKILL of only the process the host started.*the task's processes still ran: pid \d+ \(sh,/],
  // Issue 40, item 4: the host's tree as the view of a rootfs sandbox passed every other check.
  ["view-of-host", "launch.missing-command-view", /jobrt-testkit-planted, which the kit planted on the host, is not in the sandbox \(the task gave exit 1,.*but the view supervise.missingCommand declares \(root \/, \d+ mounts\) has it/],
];

describe("the testkit catches a broken bwrap runtime", () => {
  for (const [flaw, check, message] of expectations) {
    it(`${flaw} fails ${check}`, () => {
      const r = outcome(flaw).get(check);
      expect(r, `no result for ${check} in flaw:${flaw}`).toBeDefined();
      expect(r?.status).toBe("failed");
      expect(r?.failureMessages.join("\n")).toMatch(message);
    });
  }

  it("the escaping sandbox fails nothing but the background checks (issue 24: it passed every other one)", () => {
    // launch.background fails too where the kit's launches get no cgroup (then it is tracked by group as well).
    const failed = [...outcome("escapes")].filter(([, r]) => r.status === "failed").map(([id]) => id);
    expect(failed).toEqual(expect.arrayContaining(["pgid.background", "pgid.leader-kill"]));
    expect(failed.filter((id) => !["launch.background", "pgid.background", "pgid.leader-kill"].includes(id))).toEqual([]);
  });

  it("a rootfs sandbox that declares the host's tree as its view fails nothing but the view check (issue 40, item 4)", () => {
    const failed = [...outcome("view-of-host")].filter(([, r]) => r.status === "failed").map(([id]) => id);
    expect(failed).toEqual(["launch.missing-command-view"]);
  });

  it("each broken variant still passes the launch of a plain task (the flaw is the only fault)", () => {
    for (const [flaw] of expectations) expect(outcome(flaw).get("launch.tasks")?.status, flaw).toBe("passed");
  });
});
