/** `jobrt check`'s mpi section outside a Slurm step (docs/cli.md): one line, no wire-up to look at. */
export const NO_STEP =
  "mpi: not checked: not in a Slurm step (SLURM_JOB_ID, SLURM_STEP_ID unset), so there is no MPI wire-up; run it as the step's program (srun --mpi=... jobrt check ...) to check one";
