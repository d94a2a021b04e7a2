/*
 * The program of bench/mpi.mjs. Every rank prints the wall clock (CLOCK_REALTIME, µs) at which
 * it came past MPI_Init, so the benchmark sees when the last rank of a step was wired up. With
 * LAT and BW iterations > 0, ranks 0 and 1 then ping-pong an 8-byte and a 1 MiB message that many
 * times, checking every byte that came back, and rank 0 prints the half round trip in µs and the
 * bandwidth in MB/s; a wrong payload exits 3, so a broken transport cannot pass for a fast one.
 * Usage: mpi-pingpong LAT BW
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BIG (1 << 20)

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* A fixed pattern after the round number (the first 4 bytes), so an echo of a stale buffer fails. */
static void fill(unsigned char *buf, int n) {
  for (int i = 4; i < n; i++) buf[i] = (unsigned char)(i * 31 + 7);
}

static int intact(const unsigned char *buf, int n, int round, int whole) {
  int got;
  memcpy(&got, buf, sizeof got);
  if (got != round) return 0;
  for (int i = 4; whole && i < n; i++)
    if (buf[i] != (unsigned char)(i * 31 + 7)) return 0;
  return 1;
}

/*
 * Ranks 0 and 1 exchange n bytes iters times after iters/10 + 1 warm-up rounds; µs per round trip.
 * Rank 0 checks the round number of every echo and every byte of the last one (checking 1 MiB
 * each round would cost as much as sending it).
 */
static double pingpong(int rank, unsigned char *out, unsigned char *in, int n, int iters) {
  int warm = iters / 10 + 1;
  double start = 0;
  fill(out, n);
  for (int i = 0; i < warm + iters; i++) {
    if (i == warm) start = MPI_Wtime();
    memcpy(out, &i, sizeof i);
    if (rank == 0) {
      MPI_Send(out, n, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
      memset(in, 0, 8);
      MPI_Recv(in, n, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (!intact(in, n, i, i == warm + iters - 1)) {
        fprintf(stderr, "mpi-pingpong: the %d-byte payload came back wrong in round %d\n", n, i);
        MPI_Abort(MPI_COMM_WORLD, 3);
      }
    } else {
      MPI_Recv(in, n, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(in, n, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
    }
  }
  return (MPI_Wtime() - start) * 1e6 / iters;
}

int main(int argc, char **argv) {
  int rank, size;
  MPI_Init(&argc, &argv);
  double up = now_us();
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  printf("init %d %.0f\n", rank, up);
  fflush(stdout);
  int lat = argc > 2 ? atoi(argv[1]) : 0, bw = argc > 2 ? atoi(argv[2]) : 0;
  if (size >= 2 && rank < 2 && (lat > 0 || bw > 0)) {
    unsigned char *out = malloc(BIG), *in = malloc(BIG);
    double rtt = lat > 0 ? pingpong(rank, out, in, 8, lat) : 0;
    double big = bw > 0 ? pingpong(rank, out, in, BIG, bw) : 0;
    if (rank == 0) printf("latency_us %.3f bandwidth_MBps %.1f\n", rtt / 2, big > 0 ? 2.0 * BIG / big : 0);
    free(out);
    free(in);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
