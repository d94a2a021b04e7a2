import { randomBytes } from "node:crypto";
import { chmodSync, chownSync, closeSync, mkdirSync, openSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { TestContext } from "vitest";
import { type ExecOutcome, execTask } from "./execsession.js";
import type { MpiCannot } from "./options.js";
import { pmiSocket } from "./pmisocket.js";
import { type SuiteKit, fail } from "./suitekit.js";

const MARK = "jobrt-testkit-mpi";

/**
 * What the task does under PMI-2: says which PMI_FD it got, lists its own descriptors (ls is not
 * the script's last command, so the shell forks it and the listing is the shell's, not ls's), and
 * writes the kit's line to PMI_FD. dash takes no descriptor above 9 in a redirection: then perl
 * (which the host's task forker needs anyway) writes it.
 */
function pmi2Script(token: string): string {
  const line = `${MARK}:hello ${token}`;
  return [
    `echo "${MARK}:pmi_fd=$PMI_FD"`,
    `echo "${MARK}:fds-begin"`,
    "ls /proc/$$/fd",
    `echo "${MARK}:fds-end"`,
    `(echo "${line}" >&"$PMI_FD") 2>/dev/null || perl -e 'open(my $s, ">&=", $ENV{PMI_FD}) or exit 3; print $s "${line}\\n"'`,
  ].join("; ");
}

/** The descriptors the task listed between the marks, sorted. */
function listedFds(stdout: string): string[] {
  const lines = stdout.split("\n");
  const begin = lines.indexOf(`${MARK}:fds-begin`);
  const end = lines.indexOf(`${MARK}:fds-end`);
  if (begin < 0 || end < begin) return [];
  return lines.slice(begin + 1, end).sort((a, b) => Number(a) - Number(b));
}

function shown(r: ExecOutcome): string {
  const reports = r.reports.length > 0 ? `; jobrt said: ${r.reports.join(" | ")}` : "";
  return `exit ${r.status}${reports}; the task's stdout ${JSON.stringify(r.stdout.slice(0, 400))}, stderr ${JSON.stringify(r.stderr.trim().slice(0, 300))}`;
}

/**
 * A wire-up the suite declares the runtime cannot give: the host must refuse the step before any
 * task starts, in one line, with ERR_MPI_WIREUP (the runtime's own refusal from a hook counts,
 * carried as the hook error's cause).
 */
function assertRefused(r: ExecOutcome, kind: string, declared: MpiCannot): void {
  const code = r.error?.code === "ERR_MPI_WIREUP" ? r.error.code : r.error?.causeCode;
  if (r.status === 0 && r.error === undefined)
    fail(
      `the suite declares the runtime cannot pass ${kind} (${declared.cannot}), but the host ran the step: remove mpi.${kind} from the suite's options if the task gets it, or refuse the step; ${shown(r)}`,
    );
  if (code !== "ERR_MPI_WIREUP")
    fail(
      `under ${kind}, which the suite declares the runtime cannot pass, the step failed with ${r.error?.code ?? "no error"}${r.error?.causeCode ? ` (${r.error.causeCode})` : ""}, not ERR_MPI_WIREUP: ${shown(r)}`,
    );
  if (r.started > 0) fail(`the host refused ${kind} only after a task started: ${shown(r)}`);
  if (r.reports.length !== 1 || r.reports[0]?.includes("\n"))
    fail(`the refusal of ${kind} is not one line: ${JSON.stringify(r.reports)}`);
}

/** Runs the PMI-2 task through the host's exec path with a socket of the kit's as PMI_FD. */
async function runPmi2(kit: SuiteKit, token: string): Promise<{ r: ExecOutcome; got: string; held: number }> {
  const dir = kit.tempDir("mpi");
  const socket = await pmiSocket(dir);
  // A descriptor the kit holds besides the socket: nothing of it may reach the task.
  const held = openSync(join(dir, "held"), "w");
  try {
    const n = kit.node();
    const s = kit.step({
      tasks: 1,
      argv: ["sh", "-c", pmi2Script(token)],
      env: { SLURM_MPI_TYPE: "pmi2", PMI_FD: String(socket.fd), PMI_RANK: "0", PMI_SIZE: "1", PMI_JOBID: "kit" },
    });
    const r = await execTask(kit.plugin, n, s, kit.launch?.timeoutMs ?? 60_000);
    return { r, got: r.started > 0 ? await socket.received(5000) : "", held };
  } finally {
    closeSync(held);
    socket.close();
  }
}

async function checkPmi2(kit: SuiteKit): Promise<void> {
  const token = randomBytes(6).toString("hex");
  const { r, got, held } = await runPmi2(kit, token);
  const declared = kit.options.mpi?.pmi2;
  if (declared) return assertRefused(r, "pmi2", declared);
  if (r.error) fail(`the host did not run the task under --mpi=pmi2: ${shown(r)}`);
  const seen = /^jobrt-testkit-mpi:pmi_fd=(\d*)$/m.exec(r.stdout)?.[1];
  if (!seen) fail(`the task's environment has no PMI_FD: ${shown(r)}`);
  if (!got.split("\n").includes(`${MARK}:hello ${token}`))
    fail(
      `what the task wrote to PMI_FD=${seen} did not reach the other end of the step's PMI-2 socket (it got ${JSON.stringify(got.slice(0, 200))}): ${shown(r)}`,
    );
  const fds = listedFds(r.stdout);
  const want = ["0", "1", "2", seen];
  if (fds.join(" ") !== want.join(" "))
    fail(
      `the task has descriptors ${fds.join(" ") || "(no listing)"}, expected exactly ${want.join(" ")} (stdio and PMI_FD; the kit held ${held} besides the socket): ${shown(r)}`,
    );
}

/** The PMIx server's directory as Slurm makes it: the job user's, holding a marker of the kit's. */
function pmixDir(kit: SuiteKit, token: string): string {
  const parent = kit.tempDir("pmix");
  // Root's and writable by no one else, as SlurmdSpoolDir is: the host binds it as root only then.
  chmodSync(parent, 0o755);
  const dir = join(parent, "server");
  mkdirSync(dir, { mode: 0o700 });
  writeFileSync(join(dir, "marker"), `${token}\n`);
  const user = kit.options.user;
  if (user && process.getuid?.() === 0) {
    chownSync(dir, user.uid, user.gid);
    chownSync(join(dir, "marker"), user.uid, user.gid);
  }
  return dir;
}

async function checkPmix(kit: SuiteKit): Promise<void> {
  const token = randomBytes(6).toString("hex");
  const dir = pmixDir(kit, token);
  const script = `echo "${MARK}:dir=$PMIX_SERVER_TMPDIR"; echo "${MARK}:marker=$(cat "$PMIX_SERVER_TMPDIR/marker")"; echo "${token}" > "$PMIX_SERVER_TMPDIR/from-task"`;
  const n = kit.node();
  const s = kit.step({
    tasks: 1,
    argv: ["sh", "-c", script],
    env: { SLURM_MPI_TYPE: "pmix", PMIX_SERVER_TMPDIR: dir, PMIX_NAMESPACE: "slurm.pmix.kit", PMIX_RANK: "0" },
  });
  const r = await execTask(kit.plugin, n, s, kit.launch?.timeoutMs ?? 60_000);
  const declared = kit.options.mpi?.pmix;
  if (declared) return assertRefused(r, "pmix", declared);
  if (r.error) fail(`the host did not run the task under --mpi=pmix: ${shown(r)}`);
  const lines = r.stdout.split("\n");
  if (!lines.includes(`${MARK}:dir=${dir}`)) fail(`the task's PMIX_SERVER_TMPDIR is not ${dir}: ${shown(r)}`);
  if (!lines.includes(`${MARK}:marker=${token}`))
    fail(`the task does not see the PMIx server's files in ${dir} (the kit's marker file): ${shown(r)}`);
  let back = "";
  try {
    back = readFileSync(join(dir, "from-task"), "utf8");
  } catch {
    // said below
  }
  if (back !== `${token}\n`)
    fail(
      `a file the task made in PMIX_SERVER_TMPDIR is not in ${dir} on the host (${JSON.stringify(back)}): ${shown(r)}`,
    );
}

/** The MPI wire-up of docs/mpi.md, through the host's `jobrt exec` path: each declared-away one refused. */
export function registerMpiChecks(kit: SuiteKit): void {
  const off = (ctx: TestContext) => {
    if (!kit.launch) ctx.skip("real-launch checks turned off (launch: false)");
  };
  const note = (cannot?: MpiCannot) => (cannot ? ` (declared cannot: ${cannot.cannot}; checks the refusal)` : "");
  kit.check(
    "mpi.pmi-fd",
    async (ctx) => {
      off(ctx);
      await checkPmi2(kit);
    },
    note(kit.options.mpi?.pmi2),
  );
  kit.check(
    "mpi.pmix",
    async (ctx) => {
      off(ctx);
      await checkPmix(kit);
    },
    note(kit.options.mpi?.pmix),
  );
}
