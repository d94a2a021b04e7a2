import { Readable, Writable } from "node:stream";
import { type NodeConf, RuntimeRegistry, type RuntimePlugin, type StepRecord } from "@jobrt/core";
import { type NodeStepOptions, StepCancel, runSession } from "@jobrt/launcher";

/** How one `jobrt exec` task of the kit's ended: the session's own result and what it said. */
export interface ExecOutcome {
  status: number;
  /** The step's first error: its code, and for a hook's error the code the runtime threw. */
  error?: { code: string; causeCode?: string; message: string };
  /** The session's one-line reports (what `jobrt exec` prints as `jobrt: LINE`). */
  reports: string[];
  stdout: string;
  stderr: string;
  /** How many tasks the session started. */
  started: number;
}

function collector(): { stream: Writable; text: () => string } {
  const chunks: Buffer[] = [];
  const stream = new Writable({
    write(chunk: Buffer | string, _encoding, done) {
      chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk));
      done();
    },
  });
  return { stream, text: () => Buffer.concat(chunks).toString("utf8") };
}

/**
 * Runs `record` (one task) as `jobrt exec` runs a task of a Slurm step: the launcher's own step
 * session in exec mode, so the MPI wire-up goes through the host's real path (PMI_FD checked,
 * placed for the runtime's capability, the container edits of docs/mpi.md added, every other
 * inherited descriptor closed). The session loads `plugin` through a registry of its own, which
 * inits it and finis it at the end, as a `jobrt exec` process does. Past `timeoutMs` the step is
 * cancelled as on SIGTERM. With `nodeStep` it is the node's jobrt of its step, which the step's
 * other tasks join (docs/node-step.md).
 */
export async function execTask(
  plugin: RuntimePlugin,
  node: NodeConf,
  record: StepRecord,
  timeoutMs: number,
  nodeStep?: NodeStepOptions,
): Promise<ExecOutcome> {
  const registry = new RuntimeRegistry({ resolve: async () => plugin, defaultRuntime: plugin.meta.name });
  const cancel = new StepCancel();
  const [out, err] = [collector(), collector()];
  const reports: string[] = [];
  let started = 0;
  const timer = setTimeout(() => cancel.request("SIGTERM", "the testkit's time limit"), timeoutMs);
  try {
    const result = await runSession(
      { mode: "exec", record },
      {
        registry,
        node,
        cancel,
        procTrack: "auto",
        report: (line) => reports.push(line),
        stdout: out.stream,
        stderr: err.stream,
        stdin: Readable.from([]),
        onEvent: (e) => {
          if (e.event === "task-start") started++;
        },
        ...(nodeStep ? { nodeStep } : {}),
      },
    );
    const e = result.error;
    const causeCode = typeof e?.details.causeCode === "string" ? e.details.causeCode : undefined;
    return {
      status: result.status,
      ...(e ? { error: { code: e.code, message: e.message, ...(causeCode ? { causeCode } : {}) } } : {}),
      reports,
      stdout: out.text(),
      stderr: err.text(),
      started,
    };
  } finally {
    clearTimeout(timer);
  }
}
