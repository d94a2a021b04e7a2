/**
 * The conformance checks, each with a stable id and an RFC 2119 level. MUST checks always fail the
 * suite; SHOULD checks fail it too unless the author asks for `level: "must"`, in which case a
 * failing SHOULD check is reported as a warning annotation (the OCI runtime-tools idea of a
 * compliance threshold). `fix` says what to do when the check fails; it is printed with the
 * failure, with a pointer to the package's README.md (shipped in the package), which lists them.
 */
export type CheckLevel = "MUST" | "SHOULD";

export const CHECKS = {
  "meta.shape": {
    level: "MUST",
    title: "meta has name, type runtime/<name>, version and this core's API version",
    fix: "build meta with definePlugin from a current @jobrt/core; meta.type must be runtime/<meta.name>",
  },
  "meta.version": {
    level: "SHOULD",
    title: "meta.version is a semantic version",
    fix: "set meta.version from your package.json (packageVersion(import.meta.url))",
  },
  "hooks.present": {
    level: "MUST",
    title: "every hook is a function (validate optional)",
    fix: "define every hook (definePlugin fills in the ones you leave out)",
  },
  "lifecycle.init-fini": {
    level: "MUST",
    title: "init and fini succeed in every context and are idempotent",
    fix: "make init and fini safe to call twice",
  },
  "lifecycle.reload": {
    level: "MUST",
    title: "the plugin can be initialised again after fini (re-loaded)",
    fix: "release in fini everything init took, so init can run again",
  },
  "step.sequence": {
    level: "MUST",
    title: "setup → taskInit → run → cleanup succeeds on a step with several tasks",
    fix: "the named hook failed on a plain valid step: read its error above",
  },
  "run.result": {
    level: "MUST",
    title: "run returns an ExecSpec or NOT_SUPPORTED only, as declared",
    fix: "return an ExecSpec {argv, env, cwd} or NOT_SUPPORTED from run, as capabilities.runs declares",
  },
  "execspec.argv": {
    level: "MUST",
    title: "ExecSpec argv[0] is an absolute executable or resolvable on the spec's PATH",
    fix: "use an absolute path for argv[0], or a program on the PATH of the spec's env",
  },
  "execspec.env-cwd": {
    level: "MUST",
    title: "ExecSpec env holds only strings and cwd is an existing absolute directory",
    fix: "pass env as an object of strings and cwd as an existing absolute directory",
  },
  "execspec.shell": {
    level: "MUST",
    title: "ExecSpec is not a shell command unless the plugin declares shell",
    fix: "pass the task argv as argv entries, never as a `sh -c` string (shell: true is for site-configured commands)",
  },
  "execspec.task-argv": {
    level: "SHOULD",
    title: "ExecSpec argv carries the task's argv unchanged",
    fix: "append the task's argv unchanged to your wrapper's argv",
  },
  "cleanup.without-setup": {
    level: "MUST",
    title: "cleanup succeeds when setup never ran",
    fix: "let cleanup cope with no state (ctx.state is undefined when setup never ran)",
  },
  "cleanup.after-failed-start": {
    level: "MUST",
    title: "cleanup succeeds after setup when no task was started",
    fix: "let cleanup remove what setup made even when no task ran",
  },
  "cleanup.twice": {
    level: "MUST",
    title: "cleanup succeeds when called twice",
    fix: "make cleanup idempotent: ignore what is already gone",
  },
  "cleanup.leftovers": {
    level: "MUST",
    title: "after cleanup nothing is left in SpoolDir",
    fix: "remove in cleanup every file and dir your hooks made in SpoolDir",
  },
  "cleanup.processes": {
    level: "MUST",
    title: "no process started for the step (by a hook or a task) is running after cleanup; zombies do not count",
    fix: "keep the pid of every helper a hook starts in the step state and kill it in cleanup",
  },
  "cleanup.outside-spool": {
    level: "MUST",
    title: "nothing the step made is left outside SpoolDir (TMPDIR, /tmp) after cleanup",
    fix: "make per-step files under node.spoolDir, named after the step, instead of os.tmpdir() or /tmp, and remove them in cleanup",
  },
  "cleanup.other-steps": {
    level: "MUST",
    title: "cleanup leaves other steps' files in SpoolDir alone",
    fix: "remove only the paths this step's state names, never a glob over SpoolDir or SpoolDir itself",
  },
  "state.concurrent-steps": {
    level: "MUST",
    title: "two concurrent steps do not share or disturb per-step state",
    fix: "keep per-step data in the state setup returns and name files after the step, never in module scope",
  },
  "state.split-step": {
    level: "MUST",
    title:
      "one step split over two records (one task each, as under srun) sets up concurrently and cleans up independently",
    fix: "remove only what this record's tasks used; remove a dir the step shares only when it is empty",
  },
  "state.different-requests": {
    level: "MUST",
    title: "two concurrent steps with different requests each run with their own argv, env and cwd",
    fix: "read the request only from the hook's context (ctx.step, ctx.task, ctx.state), never from module-level variables",
  },
  "errors.invalid": {
    level: "MUST",
    title: "an invalid request fails with a JobrtError carrying the declared code",
    fix: "throw jobrtError(code, { problem }) from @jobrt/core for a bad request",
  },
  "errors.cleanup-after-failure": {
    level: "MUST",
    title: "cleanup succeeds after a failed setup and leaves nothing behind",
    fix: "let cleanup cope with a setup that failed halfway (and with a SpoolDir that is not a directory)",
  },
  "errors.message": {
    level: "SHOULD",
    title: "error messages are one non-empty line",
    fix: "keep JobrtError messages to one line; put details in `details`",
  },
  "errors.container-required": {
    level: "MUST",
    title: "a step without a container is refused with an ERR_CONTAINER_* JobrtError",
    fix: "throw a JobrtError with an ERR_CONTAINER_* code from setup when ctx.step.container is missing",
  },
  "validate.accepts": {
    level: "SHOULD",
    title: "validate accepts a valid request and creates nothing in SpoolDir",
    fix: "make validate check the request only: no files, no processes",
  },
  "tools.shape": {
    level: "MUST",
    title: "tools (when the plugin has it) lists well-formed tools and creates nothing in SpoolDir",
    fix: "return an array of {name, source, path?, version?, problem?} from tools: path absolute, problem only for a tool the runtime cannot use; look, never write",
  },
  "check.shape": {
    level: "MUST",
    title: "check (when the plugin has it) returns well-formed findings and creates nothing in SpoolDir",
    fix: 'return an array of {subject, status: "ok"|"failed"|"unchecked", detail?} from check, with a detail for every "unchecked"; look, never write',
  },
  "check.fixture": {
    level: "SHOULD",
    title: "check finds nothing wrong with the fixture request, which the suite launches",
    fix: 'a request that runs must not be reported "failed" by check: read the failed finding\'s detail',
  },
  "launch.tasks": {
    level: "MUST",
    title: "each task's ExecSpec (or own argv) really runs and prints its marker",
    fix: "run the printed argv by hand and read its stderr; files the job user runs must be readable and executable by that user",
  },
  "launch.exit-code": {
    level: "SHOULD",
    title: "a task's exit status passes through the runtime",
    fix: "exec the task, or pass its exit status on unchanged",
  },
  "launch.no-leftover-processes": {
    level: "SHOULD",
    title: "no process of a task's process group survives cleanup",
    fix: "make the task's processes end with it: exec the task, or wait for it and kill what it started",
  },
  "launch.sigterm": {
    level: "MUST",
    title: "a task's SIGTERM handler runs and completes within KillWait",
    fix: 'let the task itself get the stop signal: a wrapper that forwards signals sets `signals: "leader"` in the ExecSpec, passes SIGTERM on and waits for the task instead of killing it; one that forwards nothing and runs the task under its only child (bwrap --unshare-pid --new-session) sets `supervise: { stop: "child-group" }` and the host signals the sandbox',
  },
  "launch.missing-command": {
    level: "MUST",
    title: "a task whose command does not exist exits with 127",
    fix: "pass the task's exit status on unchanged; a wrapper that execs the command itself and exits with a status of its own when it cannot declares `supervise.missingCommand` (the sandbox's view, PATH, cwd, that status) and the host makes it 127 (126 for one it cannot execute)",
  },
  "launch.missing-command-view": {
    level: "MUST",
    title: "the sandbox view supervise.missingCommand declares is the sandbox's filesystem",
    fix: "set supervise.missingCommand.view.root to the host path of the sandbox's / (the rootfs the wrapper runs the task in; / for a sandbox of the host's tree) and list its mounts in the order the wrapper makes them: the host looks a failed command up there",
  },
  "launch.env": {
    level: "MUST",
    title: "the task's whole environment arrives, not only SLURM_*",
    fix: "hand ctx.task.env to the task whole (ExecSpec env, or the container's environment), not a filtered copy",
  },
  "launch.cwd": {
    level: "MUST",
    title: "the task runs in the step's cwd (or the container's --container-workdir)",
    fix: "a runtime that starts the task itself: set the ExecSpec's cwd to ctx.step.cwd; a wrapper (the ExecSpec runs a sandbox tool that starts the task) gets no help from the ExecSpec's cwd: pass ctx.step.cwd, or the request's workdir, to the wrapper's own option (bwrap --chdir DIR, ch-run --cd=DIR, runc's process.cwd)",
  },
  "launch.workdir": {
    level: "MUST",
    title: "a runtime that accepts workdir starts the task in --container-workdir",
    fix: "start the task in ctx.step.container.workdir when it is set: pass it to the wrapper's own option (bwrap --chdir DIR, ch-run --cd=DIR, runc's process.cwd) or as the ExecSpec's cwd for a runtime that starts the task itself",
  },
  "devices.given": {
    level: "MUST",
    title: "a runtime that accepts devices shows the task the device node it was given, with the device's env",
    fix: "apply ctx.step.container.deviceEdits: make or bind each deviceNodes entry at its path (from its hostPath), set its env (docs/devices.md, the runtime table)",
  },
  "devices.unallocated": {
    level: "MUST",
    title: "a device node of the host the step was not given is not there in the task",
    fix: "give the task a /dev of its own (runc's tmpfs, bwrap --dev) holding only the given nodes; a runtime that shows the host's /dev by design skips this check and says so in its README",
  },
  "launch.background": {
    level: "MUST",
    title: "a background process the task leaves is gone after the task's end and cleanup",
    fix: "keep every process of the task inside what the host tracks: no sandbox in a session or cgroup of its own that outlives the task (bwrap --die-with-parent --unshare-pid)",
  },
  "pgid.background": {
    level: "MUST",
    title:
      "tracked by process group only (ProcTrack=pgid, no cgroup), a background process the task leaves is gone after the task's end and cleanup",
    fix: "a wrapper that puts the task in a session of its own (bwrap --new-session, setsid) must make it die with the wrapper and take its children along: bwrap --die-with-parent --unshare-pid, or a pid namespace whose init is the task's",
  },
  "pgid.leader-kill": {
    level: "MUST",
    title:
      'with signals: "leader" or supervise.stop, SIGKILL of only the process the host started leaves nothing of the task (ProcTrack=pgid, no cgroup)',
    fix: "a wrapper the host does not stop through its group cannot pass SIGKILL on: everything it starts must die with it (bwrap --die-with-parent --unshare-pid, prctl PR_SET_PDEATHSIG), also what sits in a session of its own",
  },
  "image.run": {
    level: "MUST",
    title: "a runtime that accepts options.image runs --container-image REF: the task sees the image's files",
    fix: "in setup, acquire the image with @jobrt/images' acquireStepImage (it gives the rootfs), run the task in it, and give it back with releaseStepImage in cleanup (docs/writing-a-runtime.md, Images)",
  },
  "launch.join": {
    level: "MUST",
    title:
      "two tasks of a step on one node share one jobrt (docs/node-step.md): the second joins the first's, and both run through the runtime, each with its own output and status",
    fix: "keep a task's part declarative: what taskInit and run return (the ExecSpec) must not depend on state of the process that ran setup, since a joined task's hooks run in the node's jobrt while its process is the joiner's",
  },
  "mpi.pmi-fd": {
    level: "MUST",
    title:
      "under srun --mpi=pmi2, run as jobrt exec runs it, the task writes to the very socket PMI_FD names and holds no other inherited descriptor (or, declared cannot, the host refuses the step with ERR_MPI_WIREUP)",
    fix: 'declare "pmi-fd" in meta.capabilities when the task gets the host\'s descriptors at their numbers, or "pass-fds" and carry TaskRecord.passedFds (3, 4, ...) into the sandbox (runc --preserve-fds); a runtime that cannot declares mpi: { pmi2: { cannot: REASON } } in the suite (docs/mpi.md)',
  },
  "mpi.pmix": {
    level: "MUST",
    title:
      "under srun --mpi=pmix the task sees PMIX_SERVER_TMPDIR at the same path and writes to it (or, declared cannot, the host refuses the step with ERR_MPI_WIREUP)",
    fix: "a container runtime lists devices in meta.accepts and applies ctx.step.container.deviceEdits' mounts (same path inside) and hostNamespaces; one that cannot declares mpi: { pmix: { cannot: REASON } } in the suite and refuses such a step with ERR_MPI_WIREUP (docs/mpi.md)",
  },
} as const satisfies Record<string, { level: CheckLevel; title: string; fix: string }>;

export type CheckId = keyof typeof CHECKS;
