# mpi4py under tests/slurm/mpi.test.ts: every rank prints the sum of all ranks, found by allreduce.
from mpi4py import MPI

comm = MPI.COMM_WORLD
total = comm.allreduce(comm.Get_rank(), op=MPI.SUM)
print(f"rank {comm.Get_rank()} of {comm.Get_size()} sum {total}", flush=True)
