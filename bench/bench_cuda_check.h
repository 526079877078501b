/* bench_cuda_check.h - the GPU benchmarks' call checks: a failed CUDA
 * runtime call or library call ends the program with its file, line, the
 * call and the error (a benchmark has nothing to recover). One home for the
 * benchmarks built with nvcc (bench_gpu_dispatch, bench_graph_prelaunch,
 * soak_device, bench_nn_device_launch, bench_sysmem_read, the echo server they share),
 * and every GPU benchmark's skip without a device (BENCH_EXIT_IF_NO_GPU). */
#ifndef CUDAQ_BENCH_CUDA_CHECK_H
#define CUDAQ_BENCH_CUDA_CHECK_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "cudaq/realtime/cudaq_realtime.h"

/* Without a CUDA device: the skip line and exit status 77 (the GPU tests' convention), from main. */
#define BENCH_EXIT_IF_NO_GPU()                                                                            \
  do {                                                                                                    \
    int n_dev_ = 0;                                                                                       \
    if (cudaGetDeviceCount(&n_dev_) != cudaSuccess || n_dev_ == 0) {                                      \
      printf("skipped: no CUDA device\n");                                                                \
      return 77;                                                                                          \
    }                                                                                                     \
  } while (0)
#define BENCH_CUDA_CK(x)                                                                                  \
  do {                                                                                                    \
    cudaError_t e_ = (x);                                                                                 \
    if (e_ != cudaSuccess) {                                                                              \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));                  \
      exit(1);                                                                                            \
    }                                                                                                     \
  } while (0)
#define BENCH_CUDAQ_CK(x)                                                                                 \
  do {                                                                                                    \
    cudaq_status_t s_ = (x);                                                                              \
    if (s_ != CUDAQ_OK) {                                                                                 \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaq_last_error());                      \
      exit(1);                                                                                            \
    }                                                                                                     \
  } while (0)

#endif
