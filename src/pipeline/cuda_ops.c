/*
 * cuda_ops.c - the real launch ops of the worker pool and mapped memory
 * (CUDA builds only; pool_nocuda.c stands in without CUDA).
 */
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "pool.h"

static int launch_graph(void *user, cudaGraphExec_t g, cudaStream_t s) {
  (void)user;
  return (int)cudaGraphLaunch(g, s);
}

/* cudaHostFn_t has the same shape as cudaq__host_fn_t. */
static int enqueue_host_fn(void *user, cudaStream_t s, cudaq__host_fn_t fn, void *arg) {
  (void)user;
  return (int)cudaLaunchHostFunc(s, fn, arg);
}

static int sync_stream(void *user, cudaStream_t s) {
  (void)user;
  return (int)cudaStreamSynchronize(s);
}

static const cudaq__launch_ops_t real_ops = {launch_graph, enqueue_host_fn, sync_stream, NULL};

const cudaq__launch_ops_t *cudaq__cuda_launch_ops(void) { return &real_ops; }

int cudaq__mapped_alloc(size_t bytes, void **host, void **dev, int *mapped) {
  int n = 0;
  *mapped = 0;
  if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0) {
    void *h = NULL, *d = NULL;
    if (cudaHostAlloc(&h, bytes, cudaHostAllocMapped) != cudaSuccess) return -1;
    if (cudaHostGetDevicePointer(&d, h, 0) != cudaSuccess) {
      cudaFreeHost(h);
      return -1;
    }
    memset(h, 0, bytes);
    *host = h;
    *dev = d;
    *mapped = 1;
    return 0;
  }
  (void)cudaGetLastError(); /* clear the "no device" error */
  *host = *dev = calloc(1, bytes);
  return *host ? 0 : -1;
}

void cudaq__mapped_free(void *host, int mapped) {
  if (mapped)
    cudaFreeHost(host);
  else
    free(host);
}
