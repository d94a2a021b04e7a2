/*
 * An MPI ring for tests/slurm/mpi.test.ts: rank 0 sends 1000 round the ring, each other rank adds
 * its rank, and rank 0 prints what came back (1000 + the sum of 1..size-1): a test sees that the
 * wire-up and messages between every neighbour pair worked.
 */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  int rank, size, token;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank == 0) {
    token = 1000;
    MPI_Send(&token, 1, MPI_INT, 1 % size, 0, MPI_COMM_WORLD);
    MPI_Recv(&token, 1, MPI_INT, size - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    printf("ring %d ranks token %d\n", size, token);
  } else {
    MPI_Recv(&token, 1, MPI_INT, rank - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    token += rank;
    MPI_Send(&token, 1, MPI_INT, (rank + 1) % size, 0, MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return 0;
}
