import { jobrtError } from "@jobrt/core";
import { type StepView, lookupUser } from "@jobrt/launcher";
import { flag, one, parseCommandLine } from "../args.js";
import { createHost } from "../host.js";

/** A step as `jobrt ps --json` prints it: the journal's view, with the user's name and the age. */
interface ShownStep extends StepView {
  user: string;
  /** Seconds since the entry was made. */
  ageSeconds?: number;
}

function userName(uid: number, names: Map<number, string>): string {
  let name = names.get(uid);
  if (name === undefined) {
    try {
      name = lookupUser(String(uid)).user;
    } catch {
      name = String(uid);
    }
    names.set(uid, name);
  }
  return name;
}

function age(seconds: number | undefined): string {
  if (seconds === undefined) return "-";
  const s = Math.max(0, Math.floor(seconds));
  const two = (n: number) => String(n).padStart(2, "0");
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${two(s % 60)}s`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h${two(Math.floor(s / 60) % 60)}m`;
  return `${Math.floor(s / 86_400)}d${two(Math.floor(s / 3600) % 24)}h`;
}

function row(s: ShownStep): string[] {
  const id = `${s.jobId}.${s.stepId}${s.kind === "exec" ? `.${s.task}` : ""}`;
  const named = (c: ShownStep["components"][number]) => (c.containerId !== undefined ? ` id ${c.containerId}` : "");
  const what =
    s.components
      .map((c) => (c.image !== undefined ? `image ${c.image}` : (c.container ?? "-")) + named(c))
      .join(", ") || "-";
  const tasks = s.components.reduce((n, c) => n + c.tasks, 0);
  return [
    id,
    s.kind,
    s.user,
    s.state,
    age(s.ageSeconds),
    String(s.hostPid ?? "-"),
    s.components.length > 0 ? String(tasks) : "-",
    s.components.map((c) => c.runtime).join(",") || "-",
    what,
  ];
}

function printTable(steps: ShownStep[]): void {
  const header = ["STEP", "KIND", "USER", "STATE", "AGE", "PID", "TASKS", "RUNTIME", "CONTAINER"];
  const rows = steps.map(row);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const fmt = (r: string[]) =>
    r
      .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd();
  const lines = [fmt(header)];
  for (const [i, s] of steps.entries()) {
    lines.push(fmt(rows[i]!));
    if (s.problem !== undefined) lines.push(`  unreadable: ${s.problem}`);
    if (s.gc !== undefined) lines.push(`  jobrt gc would ${s.gc}`);
  }
  process.stdout.write(`${lines.join("\n")}\n`);
}

/** `jobrt ps`: the steps of this node from the journal (docs/cli.md, "jobrt ps"). */
export async function psCommand(args: string[]): Promise<number> {
  const parsed = parseCommandLine(args, { command: "ps", components: false, needCommand: false });
  if (flag(parsed.step, "help")) {
    process.stdout.write((await import("../help.js")).PS_HELP);
    return 0;
  }
  if (parsed.components[0]!.argv.length > 0)
    throw jobrtError("ERR_USAGE", {
      problem: `ps: unexpected argument ${JSON.stringify(parsed.components[0]!.argv[0])}`,
    });
  const all = flag(parsed.step, "all");
  if (all && (process.getuid?.() ?? 0) !== 0)
    throw jobrtError("ERR_USAGE", { problem: "ps: --all is for root (a user sees their own steps: leave --all out)" });
  const host = createHost(one(parsed.step, "conf-dir"), parsed.step.get("verbose")?.length ?? 0);
  try {
    // Job users' journals are read with each user's rights (docs/reliability.md, "Threat model").
    const names = new Map<number, string>();
    const now = Date.now();
    const steps: ShownStep[] = host.steps(all).map((s) => ({
      ...s,
      user: userName(s.uid, names),
      ...(s.since !== undefined ? { ageSeconds: Math.max(0, Math.floor((now - s.since) / 1000)) } : {}),
    }));
    if (flag(parsed.step, "json"))
      process.stdout.write(`${JSON.stringify({ node: host.node.nodeName, steps }, null, 2)}\n`);
    else printTable(steps);
    return 0;
  } finally {
    await host.registry.fini();
  }
}
