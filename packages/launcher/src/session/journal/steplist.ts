import { basename } from "node:path";
import { IMAGE_OPTION_KEY, messageOf } from "@jobrt/core";
import { shownText } from "@jobrt/host-services";
import { isSameProcess } from "../../processidentity.js";
import { hostAlive } from "./collect.js";
import { type JournalEntry, listEntries, recordedPids } from "./journalgc.js";
import type { Spool } from "./spool.js";
import { collectsFor } from "./userjournals.js";

/** One component of a step as `jobrt ps` shows it. */
export interface StepComponentView {
  runtime: string;
  /** `--container` (a bundle path, a shifter image). */
  container?: string;
  /** `--container-image`. */
  image?: string;
  /** `--container-id` (or `SLURM_CONTAINER_ID`): what the step's containers are named after. */
  containerId?: string;
  /** Tasks of the component on this node. */
  tasks: number;
}

/** A journal entry as `jobrt ps` shows it (docs/cli.md, "jobrt ps"). */
export interface StepView {
  jobId: number;
  stepId: number;
  /** "run": a `jobrt run` step; "exec": one `jobrt exec` task of a Slurm step. */
  kind: "run" | "exec";
  /** The task id of an "exec" entry. */
  task?: number;
  /** The journal's owner: whose steps these are, whatever the record says. */
  uid: number;
  /**
   * running: its jobrt runs; starting: its jobrt runs and has not journaled its components yet (the
   * step's cgroup is journaled first, session.ts); dead: its jobrt is gone.
   */
  state: "running" | "starting" | "dead";
  /** The pid of the step's jobrt. */
  hostPid?: number;
  /** When the entry was made (ms since the epoch). */
  since?: number;
  components: StepComponentView[];
  /** For a dead step: what `jobrt gc` would do with it, in a word, then in a sentence. */
  gcAction?: "collect" | "leave" | "set-aside";
  gc?: string;
  /** What could not be read of the entry (its record is junk, a pids file is a FIFO, ...). */
  problem?: string;
}

/**
 * A string of a record, shown: at most 4096 characters, escaped as core's shownText says, so a
 * user's record cannot drive root's terminal or fake a row.
 */
function text(v: unknown): string | undefined {
  if (typeof v !== "string" || v === "") return undefined;
  return shownText(v.slice(0, 4096));
}

/**
 * A journaled component, read as the untrusted JSON it may be (a job user writes its own journal):
 * only strings and arrays of the expected types are taken, anything else is left out.
 */
function componentView(c: unknown): StepComponentView | undefined {
  if (typeof c !== "object" || c === null) return undefined;
  const r = c as Record<string, unknown>;
  const container =
    typeof r.container === "object" && r.container !== null ? (r.container as Record<string, unknown>) : {};
  const options =
    typeof container.options === "object" && container.options !== null
      ? (container.options as Record<string, unknown>)
      : {};
  const images = options[IMAGE_OPTION_KEY];
  const image = Array.isArray(images) ? text(images[0]) : undefined;
  const containerId = Array.isArray(options.id) ? text(options.id[0]) : undefined;
  const value = text(container.value);
  return {
    runtime: text(r.runtime) ?? "?",
    ...(value ? { container: value } : {}),
    ...(image ? { image } : {}),
    ...(containerId ? { containerId } : {}),
    tasks: Array.isArray(r.tasks) ? r.tasks.length : 0,
  };
}

/** What `jobrt gc` would do with a dead entry (collect.ts, collectOrphans). */
function gcVerdict(spool: Spool, entry: JournalEntry, view: StepView): [NonNullable<StepView["gcAction"]>, string] {
  if (!collectsFor(spool, entry.record))
    return [
      "leave",
      "leave it: its record names another user or a group the user is not in (root's gc acts only as the journal's user)",
    ];
  let live = 0;
  try {
    const boot = typeof entry.host?.boot === "string" ? entry.host.boot : "";
    live = recordedPids(spool, entry.dir).filter((p) => isSameProcess(p.pid, p.start, boot)).length;
  } catch (error) {
    view.problem = `pids: ${messageOf(error)}`;
    return ["set-aside", "set it aside as <entry>.bad-<ms>: its pids file can never be read"];
  }
  const runtimes = view.components.map((c) => c.runtime).join(", ") || "no runtime (no record written)";
  const claimed = entry.staleClaim ? " (a gc that died had begun)" : "";
  return [
    "collect",
    `collect it${claimed}: kill ${live} task process group(s) left running, clean up ${runtimes}, remove the entry`,
  ];
}

function entryView(spool: Spool, entry: JournalEntry): StepView {
  const name = basename(entry.dir).replace(/\.gc-\d+-\d+$/, "");
  const exec = /^exec-\d+\.(\d+)\.\d+$/.exec(name);
  const record = entry.record as unknown as Record<string, unknown> | undefined;
  const components = Array.isArray(record?.components)
    ? record.components.map(componentView).filter((c) => c !== undefined)
    : [];
  const alive = hostAlive(entry);
  const view: StepView = {
    jobId: entry.jobId,
    stepId: entry.stepId,
    kind: exec ? "exec" : "run",
    ...(exec ? { task: Number(exec[1]) } : {}),
    uid: spool.uid,
    state: !alive ? "dead" : components.length > 0 ? "running" : "starting",
    ...(Number.isSafeInteger(entry.host?.pid) ? { hostPid: entry.host?.pid } : {}),
    ...(entry.since !== undefined ? { since: Math.round(entry.since) } : {}),
    components,
  };
  if (record !== undefined && !Array.isArray(record.components)) view.problem = "step.json holds no components list";
  if (!alive) [view.gcAction, view.gc] = gcVerdict(spool, entry, view);
  return view;
}

/**
 * The steps of one journal, live and dead, as `jobrt ps` lists them: the entries gc finds
 * (listEntries, with the journal user's rights on a foreign journal), each read as untrusted JSON.
 */
export function listSteps(spool: Spool): StepView[] {
  return listEntries(spool)
    .map((entry) => entryView(spool, entry))
    .sort((a, b) => a.jobId - b.jobId || a.stepId - b.stepId || (a.task ?? 0) - (b.task ?? 0));
}
