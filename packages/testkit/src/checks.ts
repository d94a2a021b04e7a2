/**
 * The conformance checks, each with a stable id and an RFC 2119 level. MUST checks always fail the
 * suite; SHOULD checks fail it too unless the author asks for `level: "must"`, in which case a
 * failing SHOULD check is reported as a warning annotation (the OCI runtime-tools idea of a
 * compliance threshold).
 */
export type CheckLevel = "MUST" | "SHOULD";

export const CHECKS = {
  "meta.shape": { level: "MUST", title: "meta has name, type runtime/<name>, version and this core's API version" },
  "meta.version": { level: "SHOULD", title: "meta.version is a semantic version" },
  "hooks.present": { level: "MUST", title: "every hook is a function (validate optional)" },
  "lifecycle.init-fini": { level: "MUST", title: "init and fini succeed in every context and are idempotent" },
  "lifecycle.reload": { level: "MUST", title: "the plugin can be initialised again after fini (re-loaded)" },
  "step.sequence": { level: "MUST", title: "setup → taskInit → run → cleanup succeeds on a step with several tasks" },
  "run.result": { level: "MUST", title: "run returns an ExecSpec or NOT_SUPPORTED only, as declared" },
  "execspec.argv": { level: "MUST", title: "ExecSpec argv[0] is an absolute executable or resolvable on the spec's PATH" },
  "execspec.env-cwd": { level: "MUST", title: "ExecSpec env holds only strings and cwd is an existing absolute directory" },
  "execspec.shell": { level: "MUST", title: "ExecSpec is not a shell command unless the plugin declares shell" },
  "execspec.task-argv": { level: "SHOULD", title: "ExecSpec argv carries the task's argv unchanged" },
  "cleanup.without-setup": { level: "MUST", title: "cleanup succeeds when setup never ran" },
  "cleanup.after-failed-start": { level: "MUST", title: "cleanup succeeds after setup when no task was started" },
  "cleanup.twice": { level: "MUST", title: "cleanup succeeds when called twice" },
  "cleanup.leftovers": { level: "MUST", title: "after cleanup nothing is left in SpoolDir" },
  "state.concurrent-steps": { level: "MUST", title: "two concurrent steps do not share or disturb per-step state" },
  "state.split-step": {
    level: "MUST",
    title: "one step split over two records (one task each, as under srun) sets up concurrently and cleans up independently",
  },
  "errors.invalid": { level: "MUST", title: "an invalid request fails with a JobrtError carrying the declared code" },
  "errors.cleanup-after-failure": { level: "MUST", title: "cleanup succeeds after a failed setup and leaves nothing behind" },
  "errors.message": { level: "SHOULD", title: "error messages are one non-empty line" },
  "errors.container-required": { level: "MUST", title: "a step without a container is refused with an ERR_CONTAINER_* JobrtError" },
  "validate.accepts": { level: "SHOULD", title: "validate accepts a valid request and creates nothing in SpoolDir" },
  "launch.tasks": { level: "MUST", title: "each task's ExecSpec (or own argv) really runs and prints its marker" },
  "launch.exit-code": { level: "SHOULD", title: "a task's exit status passes through the runtime" },
  "launch.no-leftover-processes": { level: "SHOULD", title: "no process of a task's process group survives cleanup" },
} as const satisfies Record<string, { level: CheckLevel; title: string }>;

export type CheckId = keyof typeof CHECKS;
