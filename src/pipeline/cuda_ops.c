/*
 * cuda_ops.c - the real launch ops of the worker pool and mapped memory
 * (CUDA builds only; pool_nocuda.c stands in without CUDA).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h> /* types of cuStreamWriteValue32 only: the driver is reached through the runtime */
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

/* cuStreamWriteValue32 (v2), looked up once through the runtime so that the
 * library does not link libcuda itself (it must load on machines without a
 * driver). NULL where the driver does not offer it. */
typedef CUresult (*write_value32_fn)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
static write_value32_fn g_write_value32;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static int enqueue_word_store(void *user, cudaStream_t s, void *word_dev, uint32_t value) {
  (void)user;
  /* Default flags: a memory fence (like __threadfence_system, scoped to the
   * stream) orders the work before it in the stream ahead of the write. */
  return (int)g_write_value32((CUstream)s, (CUdeviceptr)(uintptr_t)word_dev, value,
                              CU_STREAM_WRITE_VALUE_DEFAULT);
}

/* The gate graph of a pre-launched worker (gate.cu). */
int cudaq__gate_alloc(void *user, uint64_t staging_bytes, cudaq_pipeline_gate_t *g);
int cudaq__gate_graph(void *user, cudaGraph_t user_graph, const cudaq_pipeline_gate_t *a, int self, cudaStream_t s,
                      cudaGraphExec_t *out);
void cudaq__gate_free(void *user, cudaq_pipeline_gate_t *g, cudaGraphExec_t exec);

static cudaq__launch_ops_t real_ops = {launch_graph,      enqueue_host_fn,   sync_stream,     NULL, NULL,
                                       cudaq__gate_alloc, cudaq__gate_graph, cudaq__gate_free};

static void *driver_fn(const char *name) {
  void *fn = NULL;
  enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q) == cudaSuccess &&
      q == cudaDriverEntryPointSuccess)
    return fn;
  return NULL;
}

static void resolve(void) {
  void *fn = driver_fn("cuStreamWriteValue32");
  if (fn) {
    g_write_value32 = (write_value32_fn)fn;
    real_ops.enqueue_word_store = enqueue_word_store;
  }
  (void)cudaGetLastError(); /* no driver / no device: leave the ops out, clear the error */
}

const cudaq__launch_ops_t *cudaq__cuda_launch_ops(void) {
  pthread_once(&g_once, resolve);
  return &real_ops;
}

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
