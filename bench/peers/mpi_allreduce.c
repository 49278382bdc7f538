/* Cross-check for `trainbench probe comm`: MPI_Allreduce of floats (sum, in place) with Open MPI, timed like
 * the probe (warm-up, barrier, mean of N calls, slowest rank), over a geometric size sweep.
 *   mpicc -O2 -o /tmp/mpi_allreduce bench/peers/mpi_allreduce.c
 *   mpirun --allow-run-as-root --oversubscribe -np 2 /tmp/mpi_allreduce 8388608 268435456 2 20 5
 * Arguments: min bytes, max bytes, step factor, iterations, warm-up iterations. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const long min_bytes = argc > 1 ? atol(argv[1]) : 8L << 20, max_bytes = argc > 2 ? atol(argv[2]) : 256L << 20;
  const double factor = argc > 3 ? atof(argv[3]) : 2;
  const int iters = argc > 4 ? atoi(argv[4]) : 20, warmup = argc > 5 ? atoi(argv[5]) : 5;
  if (rank == 0) printf("# Open MPI MPI_Allreduce float sum in place, %d ranks\n", ranks);
  for (double size = (double)min_bytes; size <= (double)max_bytes; size *= factor) {
    const long count = (long)size / 4;
    float* data = malloc(count * sizeof(float));
    for (long i = 0; i < count; ++i) data[i] = (float)(i % 11 + 3 * (rank + 1));
    for (int i = 0; i < warmup; ++i) MPI_Allreduce(MPI_IN_PLACE, data, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    const double begin = MPI_Wtime();
    for (int i = 0; i < iters; ++i) MPI_Allreduce(MPI_IN_PLACE, data, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double mean = (MPI_Wtime() - begin) / iters, slowest = 0;
    MPI_Reduce(&mean, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      const double algbw = (double)count * 4 / slowest / 1e9;
      printf("%13ld %13ld  float  time(us) %10.1f  algbw %7.3f  busbw %7.3f GB/s\n", count * 4, count, slowest * 1e6, algbw,
             algbw * 2 * (ranks - 1) / ranks);
    }
    free(data);
  }
  MPI_Finalize();
  return 0;
}
