import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CHECKS, type CheckId } from "../src/checks.js";
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

// Each flawed plugin must fail the check for its flaw: a suite that cannot fail proves nothing.
beforeAll(() => {
  out = tempDir("jobrt-testkit-detects-");
  const report = join(out, "report.json");
  // TMPDIR: the dirs the tmp-leak plugin makes in every check land in `out`, which is removed.
  const child = spawnSync(
    process.execPath,
    [
      vitestBin,
      "run",
      "--config",
      join(here, "fixtures/vitest.config.ts"),
      "--reporter=json",
      `--outputFile=${report}`,
    ],
    { cwd: join(here, "fixtures"), encoding: "utf8", timeout: 240_000, env: { ...process.env, CI: "1", TMPDIR: out } },
  );
  expect(child.status, `the child vitest should fail (the plugins are broken)\n${child.stderr.slice(-2000)}`).toBe(1);
  const json = JSON.parse(readFileSync(report, "utf8")) as { testResults: { assertionResults: AssertionResult[] }[] };
  results = json.testResults.flatMap((f) => f.assertionResults);
}, 300_000);
afterAll(() => rmSync(out, { recursive: true, force: true }));

function outcome(suite: string): Map<string, AssertionResult> {
  const map = new Map<string, AssertionResult>();
  for (const r of results.filter((r) => r.ancestorTitles[0] === suite)) {
    const id = /^\[(?:MUST|SHOULD)\] ([a-z.-]+)/.exec(r.title)?.[1];
    if (id) map.set(`${id}${/ \(([^)]*)\):/.exec(r.title)?.[0] ?? ""}`.replace(/ \(.*/, ""), r);
  }
  return map;
}

const expectations: [flaw: string, check: string, message: RegExp][] = [
  ["global-state", "state.concurrent-steps", /removed .*which step B's ExecSpec uses/],
  ["cleanup-needs-setup", "cleanup.without-setup", /cleanup threw TypeError \(not a JobrtError\)/],
  ["garbage-run", "run.result", /not an ExecSpec or NOT_SUPPORTED/],
  ["hidden-shell", "execspec.shell", /runs a shell command but spec.shell is not set/],
  ["unresolvable-argv", "execspec.argv", /is not an executable file on the spec's PATH/],
  ["plain-errors", "errors.invalid", /threw Error \(not a JobrtError\)/],
  ["leaves-files", "cleanup.leftovers", /SpoolDir .* still holds job\d+\.0/],
  ["cleanup-removes-step", "state.split-step", /cleanup of task 0's record removed/],
  ["wrong-api", "meta.shape", /built for runtime API 1, this jobrt needs API 2/],
  ["drops-argv", "execspec.task-argv", /does not contain the task argv/],
  ["bad-exit", "launch.exit-code", /task exited with 0, expected 7/],
  ["multiline-error", "errors.message", /is not one non-empty line/],
  ["signal-wrapper", "launch.sigterm", /SIGTERM handler did not complete within KillWait/],
  ["missing-to-1", "launch.missing-command", /gave exit 1,.*expected exit 127/],
  ["slurm-env-only", "launch.env", /lacks .*JOBRT_TESTKIT_ENV \(want "two words/],
  ["ignores-cwd", "launch.cwd", /the task ran in "\/", not the step's cwd/],
  [
    "wrong-view-root",
    "launch.missing-command-view",
    /the task ran .*jobrt-testkit-planted, which the kit planted on the host, but the view supervise.missingCommand declares \(root \/.*\/rootfs, 0 mounts\) does not have it \(missing\)/,
  ],
  ["ignores-workdir", "launch.workdir", /with --container-workdir \/tmp the task ran in "\/.*jobrt-testkit-cwd-/],
  ["setup-helper", "cleanup.processes", /still running after cleanup: pid \d+ \(sleep, state S\)/],
  ["tmp-leak", "cleanup.outside-spool", /after cleanup TMPDIR .* holds hostenv-\d+-/],
  ["wipes-spool", "cleanup.other-steps", /cleanup removed .*jobrt-testkit-other\.\d+.*which belong to another step/],
  ["module-state", "state.different-requests", /step a's ExecSpec holds .*which is step b's/],
  [
    "closes-pmi-fd",
    "mpi.pmi-fd",
    /what the task wrote to PMI_FD=\d+ did not reach the other end of the step's PMI-2 socket/,
  ],
  [
    "leaks-fd",
    "mpi.pmi-fd",
    /the task has descriptors [\d ]*\b7\b[\d ]*, expected exactly 0 1 2 \d+ \(stdio and PMI_FD/,
  ],
  [
    "declares-no-mpi",
    "mpi.pmi-fd",
    /declares the runtime cannot pass pmi2 \(kit self-test\), but the host ran the step/,
  ],
  ["declares-no-mpi", "mpi.pmix", /declares the runtime cannot pass pmix \(kit self-test\), but the host ran the step/],
  ["tasks-from-setup", "launch.join", /the joined task did not end with its own status 0/],
  ["accepts-no-container", "errors.container-required", /a step without --container was accepted/],
  ["bad-tools", "tools.shape", /tools returned \{"name":"hostenv-helper","path":"relative\/helper"\}, not a/],
  [
    "bad-check",
    "check.shape",
    /check returned \{"subject":"the request","status":"unchecked"\}, not a .*needs a detail/,
  ],
  [
    "check-fails-fixture",
    "check.fixture",
    /check reported the fixture request as failed: the request: hostenv refuses everything/,
  ],
  ["escapes", "pgid.background", /tracked by process group only .*the task's processes still ran: pid \d+ \(sh,/],
  [
    "escapes",
    "pgid.leader-kill",
    /after SIGKILL of only the process the host started.*the task's processes still ran: pid \d+ \(sh,/,
  ],
  [
    "wrapped-shell",
    "execspec.shell",
    /at argv\[1\] \(inside the wrapper's argv\) runs a shell command but spec.shell is not set/,
  ],
  [
    "failed-setup-leaves-files",
    "errors.cleanup-after-failure",
    /after the failed request "a container that cannot exist, made by the kit": SpoolDir .* still holds job\d+\.0/,
  ],
  ...(process.getuid?.() === 0
    ? ([
        ["root-only-files", "launch.tasks", /exited with 126|EACCES|Permission denied/],
        [
          "leaves-cgroup",
          "launch.background",
          /after the task's end and cleanup, the task's processes still ran: pid \d+ \(sh,/,
        ],
        // The fake device nodes are made with mknod: as root only.
        ["ignores-devices", "devices.given", /did not get the device's env JOBRT_TESTKIT_DEVICE/],
        ["ignores-devices", "devices.unallocated", /sees a device node of the host that the step was not given/],
        ["hides-pmix-dir", "mpi.pmix", /the task does not see the PMIx server's files in .* \(the kit's marker file\)/],
      ] as [string, string, RegExp][])
    : []),
  // CI installs umoci and skopeo; without them the check is skipped as not applicable.
  ...(["/usr/bin/umoci", "/usr/bin/skopeo"].every((t) => existsSync(t))
    ? [["ignores-image", "image.run", /exited with 1/] as [string, string, RegExp]]
    : []),
];

describe("the conformance suite catches broken plugins", () => {
  for (const [flaw, check, message] of expectations) {
    it(`${flaw} fails ${check}`, () => {
      const got = outcome(`flaw:${flaw}`);
      const r = got.get(check);
      expect(r, `no result for ${check} in flaw:${flaw}`).toBeDefined();
      expect(r?.status).toBe("failed");
      expect(r?.failureMessages.join("\n")).toMatch(message);
    });
  }

  it("every failure says what to do and points at the README the package ships", () => {
    const failed = results.filter((r) => r.status === "failed" && r.ancestorTitles[0]?.startsWith("flaw:"));
    expect(failed.length).toBeGreaterThan(expectations.length - 1);
    for (const r of failed) {
      const id = /^\[(?:MUST|SHOULD)\] ([a-z.-]+)/.exec(r.title)?.[1] as CheckId;
      expect(r.failureMessages.join("\n")).toContain(`what to do: ${CHECKS[id].fix}`);
      expect(r.failureMessages.join("\n")).toContain(
        `check ${id} is described in node_modules/@jobrt/testkit/README.md`,
      );
    }
  });

  it("a flawed plugin still passes the checks its flaw does not touch", () => {
    const got = outcome("flaw:multiline-error");
    const failed = [...got].filter(([, r]) => r.status === "failed").map(([id]) => id);
    expect(failed).toEqual(["errors.message"]);
    expect(got.get("launch.tasks")?.status).toBe("passed");
  });

  it("a wrapper whose task escapes to a session of its own fails nothing but the background checks (issue 24)", () => {
    // launch.background fails too where the kit's launches get no cgroup (then it is tracked by group as well).
    const failed = [...outcome("flaw:escapes")].filter(([, r]) => r.status === "failed").map(([id]) => id);
    expect(failed).toEqual(expect.arrayContaining(["pgid.background", "pgid.leader-kill"]));
    expect(failed.filter((id) => !["launch.background", "pgid.background", "pgid.leader-kill"].includes(id))).toEqual(
      [],
    );
  });

  it('level "must" turns a failing SHOULD check into a warning', () => {
    const got = outcome("lenient:drops-argv");
    expect(got.get("execspec.task-argv")?.status).toBe("passed");
    expect(got.get("meta.shape")?.status).toBe("passed");
    expect(got.get("cleanup.twice")?.status).toBe("skipped");
    expect(
      results.find((r) => r.ancestorTitles[0] === "lenient:drops-argv" && r.title.includes("cleanup.twice"))?.title,
    ).toContain("(skipped: demonstrating skip)");
    expect(got.get("launch.tasks")?.status).toBe("skipped");
  });
});
