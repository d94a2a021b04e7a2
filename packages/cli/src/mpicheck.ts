import type { CheckFinding, LoadedRuntime } from "@jobrt/core";
import {
  CONTAINER_CAPABILITY,
  PMI_FD_CAPABILITY,
  type WireupEdits,
  requirePmiCapability,
  wireupEdits,
} from "@jobrt/launcher";
import { showFindings } from "./finding.js";
import { fabricFinding, pmixDirFinding, shmFinding, userNamespaceFinding } from "./mpinode.js";
import { type Wireup, definedEnv } from "./mpiwireup.js";
import { say } from "./say.js";

/** A component of the checked request, with the runtime it loaded. */
export interface MpiComponent {
  prefix: string;
  runtime: LoadedRuntime;
  /** Whether the request has a container (--container): what carries the host's edits to the runtime. */
  container: boolean;
}

const URI_VARIABLES = [
  "PMIX_SERVER_URI41",
  "PMIX_SERVER_URI4",
  "PMIX_SERVER_URI3",
  "PMIX_SERVER_URI21",
  "PMIX_SERVER_URI2",
  "PMIX_SERVER_URI",
];

/** The wire-up line, and the problems of the wire-up itself (before any runtime is looked at). */
function wireupFindings(w: Wireup): CheckFinding[] {
  const type = `SLURM_MPI_TYPE=${w.mpiType ?? "(unset)"}`;
  if (w.kind === "none")
    return [
      {
        subject: "wire-up",
        status: "ok",
        detail: `none (${type}): Slurm wires no ranks together, so an MPI program here starts as one singleton per task; fix, for MPI: srun --mpi=pmix or --mpi=pmi2`,
      },
    ];
  if (w.kind === "pmi2") {
    const ids = `PMI_RANK=${w.env.PMI_RANK ?? "(unset)"}, PMI_SIZE=${w.env.PMI_SIZE ?? "(unset)"}`;
    const head: CheckFinding = { subject: "wire-up", status: "ok", detail: `pmi2 (${type}; ${ids})` };
    if (w.pmiFd !== undefined) return [head, { subject: "PMI_FD", status: "ok", detail: `${w.pmiFd}, an open socket` }];
    const why =
      w.pmiProblem ?? "PMI_FD is not set: srun --mpi=pmi2 sets it; a wrapper between srun and jobrt dropped it";
    return [
      head,
      {
        subject: "PMI_FD",
        status: "failed",
        detail: `${why}; jobrt exec refuses this step; fix: start jobrt straight from srun (nothing between them may close PMI_FD), or srun --mpi=pmix`,
      },
    ];
  }
  const uri = URI_VARIABLES.find((v) => w.env[v] !== undefined);
  const ids = `PMIX_NAMESPACE=${w.env.PMIX_NAMESPACE ?? "(unset)"}, PMIX_RANK=${w.env.PMIX_RANK ?? "(unset)"}`;
  const out: CheckFinding[] = [{ subject: "wire-up", status: "ok", detail: `pmix (${type}; ${ids})` }];
  out.push(
    uri !== undefined
      ? { subject: "PMIx server", status: "ok", detail: `${uri}=${w.env[uri]}` }
      : {
          subject: "PMIx server",
          status: "failed",
          detail:
            "no PMIX_SERVER_URI* is set: the client cannot find its server; srun --mpi=pmix sets them, a wrapper dropped them",
        },
  );
  for (const [v, required] of [
    ["PMIX_SERVER_TMPDIR", true],
    ["PMIX_SYSTEM_TMPDIR", false],
  ] as const) {
    const f = pmixDirFinding(v, w.env[v], required);
    if (f !== undefined) out.push(f);
  }
  return out;
}

/** Ranks of this step on this node, from SLURM_STEP_TASKS_PER_NODE ("2(x3),1") at SLURM_NODEID. */
function ranksOnNode(env: Readonly<Record<string, string | undefined>>): number | undefined {
  const node = Number(env.SLURM_NODEID);
  const counts: number[] = [];
  for (const part of (env.SLURM_STEP_TASKS_PER_NODE ?? "").split(",")) {
    const m = /^(\d+)(?:\(x(\d+)\))?$/.exec(part);
    if (m === null) return undefined;
    for (let i = 0; i < Number(m[2] ?? 1); i++) counts.push(Number(m[1]));
  }
  return Number.isInteger(node) ? counts[node] : undefined;
}

/**
 * What the component's runtime does to the wire-up: whether it passes the PMI-2 socket (its
 * capabilities, and the refusal `jobrt exec` would give), and whether its task sees the PMIx
 * directories, /dev/shm and the user namespace as this process does. runtime none's task is a plain
 * process beside this one; every other runtime's task is its own container (docs/mpi.md).
 */
function componentFindings(w: Wireup, runtime: LoadedRuntime, container: boolean): CheckFinding[] {
  const out: CheckFinding[] = [];
  if (w.kind === "pmi2" && w.pmiFd !== undefined) {
    try {
      const how = requirePmiCapability(runtime.name, runtime.capabilities, w.pmiFd);
      const at = how === PMI_FD_CAPABILITY ? w.pmiFd : 3;
      out.push({
        subject: "PMI-2 socket",
        status: "ok",
        detail: `passed to the task at PMI_FD=${at} (capability "${how}")`,
      });
    } catch (error) {
      out.push({
        subject: "PMI-2 socket",
        status: "failed",
        detail: `jobrt exec refuses: ${(error as Error).message}`,
      });
    }
  }
  let edits: WireupEdits | undefined;
  try {
    edits = wireupEdits(definedEnv(w.env), runtime, asRoot(), container);
  } catch (error) {
    out.push({
      subject: "PMIx directories",
      status: "failed",
      detail: `jobrt exec refuses: ${(error as Error).message}`,
    });
    return out;
  }
  if (w.kind === "pmix") out.push(pmixDirectoriesFinding(runtime, edits));
  out.push(sharingFinding(w, runtime, edits));
  return out;
}

const asRoot = () => process.geteuid?.() === 0;

function pmixDirectoriesFinding(runtime: LoadedRuntime, edits: WireupEdits | undefined): CheckFinding {
  if (edits === undefined)
    return { subject: "PMIx directories", status: "ok", detail: "the task sees them as this process does" };
  const binds = edits.mounts.filter((m) => m.containerPath !== "/dev/shm").map((m) => m.hostPath);
  return {
    subject: "PMIx directories",
    status: "ok",
    detail: `bound into runtime ${runtime.name}'s container at the same path${binds.length === 1 ? "" : "s"}: ${binds.join(", ")}`,
  };
}

/**
 * Whether the node's ranks share memory: a host process does; the host asks a container runtime
 * for its namespaces and /dev/shm, which root's containers then share; a job user's (rootless)
 * containers keep a user and PID namespace each, across which CMA fails (docs/mpi.md).
 */
function sharingFinding(w: Wireup, runtime: LoadedRuntime, edits: WireupEdits | undefined): CheckFinding {
  const subject = "/dev/shm and user namespace";
  if (!runtime.capabilities.includes(CONTAINER_CAPABILITY))
    return {
      subject,
      status: "ok",
      detail:
        "the task's are this process's (above): the step's ranks on this node share them, so shared memory and CMA work",
    };
  const ranks = ranksOnNode(w.env);
  if (ranks === 1)
    return {
      subject,
      status: "ok",
      detail: "each task is its own container, but this node has one rank of the step: nothing to share",
    };
  const count = ranks !== undefined ? ` (${ranks} ranks on this node)` : "";
  if (edits !== undefined && asRoot())
    return {
      subject,
      status: "ok",
      detail: `runtime ${runtime.name}'s containers are asked for the host's network, IPC, PID and UTS namespaces and /dev/shm${count}, so shared memory and CMA work between them (unless a site conf declines, docs/mpi.md)`,
    };
  const why =
    edits === undefined
      ? `each task is its own runtime ${runtime.name} container${count}: they share no /dev/shm, IPC or PID namespace`
      : `each task is its own runtime ${runtime.name} container${count}, which as a job user has a user and PID namespace of its own`;
  return {
    subject,
    status: "failed",
    detail: `${why}, so MPI's shared-memory and CMA transports between them fail; fix: --runtime none, or one rank per node (srun --ntasks-per-node=1)`,
  };
}

/**
 * `jobrt check`'s mpi section (docs/cli.md): in a Slurm step, the step's wire-up and this node's side
 * of it, then each component's runtime against it; outside a step, one line saying there is none.
 * Problems go to stderr, each with its fix; true when there are none.
 */
export function checkMpi(w: Wireup, components: readonly MpiComponent[]): boolean {
  if (!w.inStep) {
    process.stdout.write(
      "mpi: not checked: not in a Slurm step (SLURM_JOB_ID, SLURM_STEP_ID unset), so there is no MPI wire-up; run it as the step's program (srun --mpi=... jobrt check ...) to check one\n",
    );
    return true;
  }
  let failed = showFindings("mpi", [...wireupFindings(w), shmFinding(), userNamespaceFinding(), fabricFinding()]);
  if (w.kind !== "none")
    for (const c of components)
      failed += showFindings(
        `${c.prefix}: mpi: runtime ${c.runtime.name}`,
        componentFindings(w, c.runtime, c.container),
      );
  if (failed > 0) say(`mpi: failed (${failed} problem${failed === 1 ? "" : "s"} with this step's wire-up)`);
  else process.stdout.write("mpi: ok\n");
  return failed === 0;
}
