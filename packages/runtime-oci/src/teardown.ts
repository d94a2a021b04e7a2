import { type CommandResult, type ContainerState, parseState } from "./command.js";

/**
 * The kill/delete sequence (Slurm's `_kill_container`, runtime-oci.md W5, W7, W12), fixed: with a query command, kill
 * escalates (RunTimeKill, then SIGKILL to the container's pid) and delete runs whenever the
 * runtime still knows the container; without one (IgnoreFileConfigJson), Kill runs while the
 * task is alive and Delete always runs (W7). Never throws.
 */
export interface TeardownOptions {
  /** Runs a command key if its pattern can be expanded now; undefined when it was not run. */
  run(key: "RunTimeQuery" | "RunTimeKill" | "RunTimeDelete"): Promise<CommandResult | undefined>;
  hasQuery: boolean;
  /** Query-less mode: is the task's runtime process still running? */
  alive?: () => boolean;
  /** Sends SIGKILL to a pid with the job user's rights. */
  forceKill(pid: number): Promise<void>;
  /** The pid query-less mode kills. */
  pid?: number;
  /** What the caller already knows of the container, in place of the first RunTimeQuery. */
  firstState?: ContainerState;
  graceMs: number;
  log(level: "verbose" | "debug" | "warn", message: string): void;
  sleep?: (ms: number) => Promise<void>;
}

const ACTIVE = new Set(["creating", "created", "running", "paused"]);

const defaultSleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

type Key = "RunTimeQuery" | "RunTimeKill" | "RunTimeDelete";
type Run = (key: Key) => Promise<CommandResult | undefined>;

export async function teardown(o: TeardownOptions): Promise<"gone" | "deleted" | "left"> {
  // A command that throws (a timeout, a pattern that cannot be expanded) is logged, never thrown.
  const safe: Run = async (key) => {
    try {
      return await o.run(key);
    } catch (error) {
      o.log("warn", `${key}: ${(error as Error).message}`);
      return undefined;
    }
  };
  return o.hasQuery ? teardownByQuery(o, safe) : teardownWithoutQuery(o, safe);
}

/** With RunTimeQuery: what the runtime says of the container decides kill and delete. */
async function teardownByQuery(o: TeardownOptions, safe: Run): Promise<"gone" | "deleted" | "left"> {
  const first = o.firstState ? undefined : await safe("RunTimeQuery");
  let st = o.firstState ?? (first ? parseState(first) : undefined);
  if (!st && first?.code === 0) {
    // The query "succeeded" but printed no OCI state: the runtime is broken, not the container
    // gone. Slurm takes that for "already dead" and leaks a created container; delete it anyway.
    o.log(
      "warn",
      `RunTimeQuery exited 0 but printed no OCI state JSON (${JSON.stringify(first.stdout.trim().slice(0, 80))}); running RunTimeKill and RunTimeDelete anyway`,
    );
    await safe("RunTimeKill");
    const del = await safe("RunTimeDelete");
    if (del?.code === 0) return "deleted";
    o.log(
      "warn",
      `RunTimeDelete ${del ? `exited with status ${del.code ?? del.signal}: ${del.stderr.trim()}` : "did not run"}; taking the container for gone`,
    );
    return "gone";
  }
  if (!st) {
    // A query that timed out or was killed by a signal (Slurm signals every process of a step
    // on scancel) says nothing about the container: delete it anyway rather than leak it.
    if (!first || first.signal) {
      o.log("verbose", "RunTimeQuery gave no answer; running RunTimeDelete anyway");
      const del = await safe("RunTimeDelete");
      return del?.code === 0 ? "deleted" : "gone";
    }
    return "gone";
  }
  if (ACTIVE.has(st.status) && st.status !== "created") {
    st = await stopContainer(o, safe);
    if (!st) return "gone";
  }
  const del = await safe("RunTimeDelete");
  if (del && del.code !== 0)
    o.log("warn", `RunTimeDelete exited with status ${del.code ?? del.signal}: ${del.stderr.trim()}`);
  return del?.code === 0 ? "deleted" : "left";
}

/** RunTimeKill, then SIGKILL to the container's pid after the grace time; its state after that. */
async function stopContainer(o: TeardownOptions, safe: Run): Promise<ContainerState | undefined> {
  const sleep = o.sleep ?? defaultSleep;
  const query = async (): Promise<ContainerState | undefined> => {
    const r = await safe("RunTimeQuery");
    return r ? parseState(r) : undefined;
  };
  await safe("RunTimeKill");
  const deadline = Date.now() + o.graceMs;
  let delay = 2;
  for (;;) {
    const st = await query();
    if (!st || !ACTIVE.has(st.status)) return st;
    if (Date.now() >= deadline) {
      if (st.pid !== undefined) {
        o.log("verbose", `container still ${st.status} after ${o.graceMs} ms: SIGKILL to pid ${st.pid}`);
        await o.forceKill(st.pid);
      }
      await sleep(50);
      return query();
    }
    await sleep(delay);
    delay = Math.min(delay * 2, 100);
  }
}

/** Without a query (IgnoreFileConfigJson): Kill while the task's runtime process lives, Delete always. */
async function teardownWithoutQuery(o: TeardownOptions, safe: Run): Promise<"gone" | "deleted" | "left"> {
  const sleep = o.sleep ?? defaultSleep;
  if (o.alive?.()) {
    await safe("RunTimeKill");
    const deadline = Date.now() + o.graceMs;
    let delay = 2;
    while (o.alive() && Date.now() < deadline) {
      await sleep(delay);
      delay = Math.min(delay * 2, 100);
    }
    if (o.alive() && o.pid !== undefined) await o.forceKill(o.pid);
  }
  const del = await safe("RunTimeDelete");
  return del?.code === 0 ? "deleted" : del ? "left" : "gone";
}
