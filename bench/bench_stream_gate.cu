/*
 * bench_stream_gate.cu - how fast can a host thread start GPU work that is
 * already enqueued? (issue 15, pipeline GPU stage: the lever behind the
 * pipeline's gpu_prelaunch). Host round trip, paced: the host starts the
 * work, the work's kernel stores a sequence number into mapped memory, the
 * host spins until it sees it; then (not timed) the next work is enqueued
 * and the host idles --gap us.
 *
 * Rows (each with and without a copy of --bytes from pinned host memory to
 * the device before the kernel, as a request's payload):
 *   launch on arrival    cudaMemcpyAsync + cudaGraphLaunch when the request comes
 *   wait-value gate      cuStreamWaitValue32 on a mapped word, enqueued ahead
 *                        with the copy and the graph; the host stores the word
 *   kernel gate          a one-thread kernel spinning on the mapped word,
 *                        enqueued ahead with the copy and the graph
 *   graph gate           one graph: gate kernel -> copy -> kernel, launched
 *                        ahead
 *   graph gate, loads    the same, the gate kernel itself copying the bytes
 *                        (16-byte loads of pinned memory; 1..8 blocks of 256)
 *   gate in the work kernel  one graph of one kernel that waits, copies and
 *                        answers (the gate inside the worker's first kernel)
 *   ..., fenced poll     the gates again, a system-scope fence before each
 *                        poll of the gate word
 *
 *   bench_stream_gate [--requests N] [--gap US] [--bytes B]
 */
#include <cuda.h>
#include <cuda/atomic>
#include <cuda_runtime.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "bench_cuda_check.h"
#include "cudaq/realtime/pipeline.h"

typedef CUresult (*wait_value32_fn)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
static wait_value32_fn g_wait;

__global__ void work_kernel(uint64_t *flag, uint64_t *seq, const uint8_t *in) {
  uint64_t s = *seq + 1 + (in ? in[0] * 0 : 0);
  *seq = s;
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*flag).store(s, cuda::memory_order_release);
}

/* Spins until the mapped gate word reaches `value` (cyclic >=). */
__global__ void gate_kernel(const uint32_t *gate, uint32_t value) {
  cuda::atomic_ref<const uint32_t, cuda::thread_scope_system> g(*gate);
  while ((int32_t)(g.load(cuda::memory_order_acquire) - value) < 0) {
  }
}

/* A gate kernel whose target comes from device memory (graph gate: the
 * ticket changes per launch, the graph does not). Thread 0 of each block
 * waits; then, with src, every thread copies its 16-byte pieces of the
 * request from pinned host memory into dst (all loads issued at once). */
__device__ __forceinline__ void gate_kernel_dev_body(const uint32_t *gate, uint32_t *ticket, const uint4 *src,
                                                     uint4 *dst, size_t n16, int fence);
__global__ void gate_kernel_dev(const uint32_t *gate, uint32_t *ticket, const uint4 *src, uint4 *dst,
                                size_t n16, int fence) {
  gate_kernel_dev_body(gate, ticket, src, dst, n16, fence);
}
/* fence: a system-scope fence before each poll of the gate word (as the
 * device-call dispatcher polls; the floor's round trip is shorter so). */
__device__ __forceinline__ void gate_kernel_dev_body(const uint32_t *gate, uint32_t *ticket, const uint4 *src,
                                                     uint4 *dst, size_t n16, int fence) {
  if (threadIdx.x == 0) {
    const uint32_t value = ticket[blockIdx.x] + 1;
    cuda::atomic_ref<const uint32_t, cuda::thread_scope_system> g(*gate);
    for (;;) {
      if (fence) __threadfence_system();
      if ((int32_t)(g.load(cuda::memory_order_acquire) - value) >= 0) break;
    }
    ticket[blockIdx.x] = value;
  }
  __syncthreads();
  if (!src) return;
  /* The pipeline's grid-wide copy with its loads in flight (pipeline.h). */
  cudaq__copy_in_flight<uint4, size_t>(src, dst, blockIdx.x * (size_t)blockDim.x + threadIdx.x, n16,
                                       (size_t)gridDim.x * blockDim.x);
}

enum { LAUNCH = 0, WAIT_VALUE = 1, KERNEL_GATE = 2, GRAPH_GATE = 3, GRAPH_GATE_LOADS = 4, IN_KERNEL = 5 };
static const char *kName[] = {"launch on arrival", "wait-value gate", "kernel gate", "graph gate",
                              "graph gate, loads", "gate in the work kernel"};

/* IN_KERNEL: the work kernel itself waits at the gate and copies the bytes
 * (one graph of one kernel). */
__global__ void gated_work_kernel(const uint32_t *gate, uint32_t *ticket, const uint4 *src, uint4 *dst,
                                  size_t n16, uint64_t *flag, uint64_t *seq, int fence) {
  gate_kernel_dev_body(gate, ticket, src, dst, n16, fence);
  __syncthreads();
  if (threadIdx.x == 0) {
    uint64_t s = *seq + 1;
    *seq = s;
    cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*flag).store(s, cuda::memory_order_release);
  }
}

/* blocks: GRAPH_GATE_LOADS, the gate kernel's blocks (they copy the bytes). */
static void run_row(int how, size_t bytes, size_t n, double gap_us, unsigned blocks = 1, int fence = 0) {
  cudaStream_t s;
  BENCH_CUDA_CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  uint64_t *flag, *flag_dev, *seq;
  uint32_t *gate, *gate_dev, *ticket;
  uint8_t *src = nullptr, *src_dev = nullptr, *dst = nullptr;
  BENCH_CUDA_CK(cudaHostAlloc(&flag, 8, cudaHostAllocMapped));
  BENCH_CUDA_CK(cudaHostGetDevicePointer((void **)&flag_dev, flag, 0));
  BENCH_CUDA_CK(cudaHostAlloc(&gate, 4, cudaHostAllocMapped));
  BENCH_CUDA_CK(cudaHostGetDevicePointer((void **)&gate_dev, gate, 0));
  BENCH_CUDA_CK(cudaMalloc(&seq, 8));
  BENCH_CUDA_CK(cudaMemset(seq, 0, 8));
  BENCH_CUDA_CK(cudaMalloc(&ticket, 4 * 64));
  BENCH_CUDA_CK(cudaMemset(ticket, 0, 4 * 64));
  if (bytes) {
    BENCH_CUDA_CK(cudaHostAlloc(&src, bytes, cudaHostAllocMapped));
    BENCH_CUDA_CK(cudaHostGetDevicePointer((void **)&src_dev, src, 0));
    BENCH_CUDA_CK(cudaMalloc(&dst, bytes));
  }
  *flag = 0;
  *gate = 0;
  /* The work: [copy] -> kernel, as one graph; with GRAPH_GATE a gate kernel first. */
  cudaGraph_t g;
  cudaGraphExec_t ge;
  BENCH_CUDA_CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  if (how == IN_KERNEL)
    gated_work_kernel<<<1, 256, 0, s>>>(gate_dev, ticket, bytes ? (const uint4 *)src_dev : nullptr, (uint4 *)dst,
                                        bytes / 16, flag_dev, seq, fence);
  if (how == GRAPH_GATE) gate_kernel_dev<<<1, 1, 0, s>>>(gate_dev, ticket, nullptr, nullptr, 0, fence);
  if (how == GRAPH_GATE_LOADS)
    gate_kernel_dev<<<blocks, 256, 0, s>>>(gate_dev, ticket, (const uint4 *)src_dev, (uint4 *)dst, bytes / 16,
                                           fence);
  if (bytes && how != LAUNCH && how != GRAPH_GATE_LOADS && how != IN_KERNEL)
    BENCH_CUDA_CK(cudaMemcpyAsync(dst, src_dev, bytes, cudaMemcpyDefault, s));
  if (how != IN_KERNEL) work_kernel<<<1, 1, 0, s>>>(flag_dev, seq, dst);
  BENCH_CUDA_CK(cudaStreamEndCapture(s, &g));
  BENCH_CUDA_CK(cudaGraphInstantiate(&ge, g, 0));
  BENCH_CUDA_CK(cudaGraphUpload(ge, s));
  BENCH_CUDA_CK(cudaStreamSynchronize(s));
  uint32_t t = 0;
  auto arm = [&]() {
    t++;
    if (how == WAIT_VALUE) {
      if (g_wait((CUstream)s, (CUdeviceptr)(uintptr_t)gate_dev, t, CU_STREAM_WAIT_VALUE_GEQ) != CUDA_SUCCESS) {
        fprintf(stderr, "cuStreamWaitValue32 failed\n");
        exit(1);
      }
    } else if (how == KERNEL_GATE) {
      gate_kernel<<<1, 1, 0, s>>>(gate_dev, t);
    }
    BENCH_CUDA_CK(cudaGraphLaunch(ge, s));
  };
  uint64_t *samples = (uint64_t *)malloc(n * 8);
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system> f(*flag);
  cuda::atomic_ref<uint32_t, cuda::thread_scope_system> gw(*gate);
  const uint64_t gap = (uint64_t)(gap_us * 1e3);
  if (how != LAUNCH) arm();
  for (size_t i = 0; i < n + 100; ++i) {
    const uint64_t until = bench_now_ns() + gap;
    while (bench_now_ns() < until) {
    }
    if (bytes) memset(src, (int)(i & 0xff), 64); /* the request's bytes, written by the host */
    const uint64_t t0 = bench_now_ns();
    if (how == LAUNCH) {
      if (bytes) BENCH_CUDA_CK(cudaMemcpyAsync(dst, src_dev, bytes, cudaMemcpyDefault, s));
      BENCH_CUDA_CK(cudaGraphLaunch(ge, s));
    } else {
      gw.store(t, cuda::memory_order_release);
    }
    while (f.load(cuda::memory_order_acquire) != i + 1) {
    }
    const uint64_t t1 = bench_now_ns();
    if (i >= 100) samples[i - 100] = t1 - t0;
    if (how != LAUNCH) arm();
  }
  if (how != LAUNCH) gw.store(t, cuda::memory_order_release); /* release the last one */
  BENCH_CUDA_CK(cudaStreamSynchronize(s));
  char name[112];
  const char *fenced = fence ? ", fenced poll" : "";
  if (how == IN_KERNEL)
    snprintf(name, sizeof name, "%s, %zu B%s", kName[how], bytes, fenced);
  else if (how == GRAPH_GATE_LOADS)
    snprintf(name, sizeof name, "%s (%u x 256), %zu B%s", kName[how], blocks, bytes, fenced);
  else
    snprintf(name, sizeof name, "%s, %zu B copy%s", kName[how], bytes, fenced);
  bench_print_row(name, n, bench_percentiles(samples, n));
  free(samples);
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  cudaStreamDestroy(s);
  cudaFreeHost(flag);
  cudaFreeHost(gate);
  cudaFree(seq);
  cudaFree(ticket);
  if (bytes) {
    cudaFreeHost(src);
    cudaFree(dst);
  }
}

int main(int argc, char **argv) {
  size_t n = 20000, bytes = 2048;
  double gap = 20;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--requests") && i + 1 < argc) n = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--gap") && i + 1 < argc) gap = atof(argv[++i]);
    else if (!strcmp(argv[i], "--bytes") && i + 1 < argc) bytes = strtoull(argv[++i], NULL, 10);
    else {
      fprintf(stderr, "usage: %s [--requests N] [--gap US] [--bytes B]\n", argv[0]);
      return 2;
    }
  }
  if (n < 1) n = 1;
  BENCH_EXIT_IF_NO_GPU();
  void *fn = NULL;
  cudaDriverEntryPointQueryResult q;
  BENCH_CUDA_CK(cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &fn, 12000, cudaEnableDefault, &q));
  g_wait = (wait_value32_fn)fn;
  cudaDeviceProp prop;
  BENCH_CUDA_CK(cudaGetDeviceProperties(&prop, 0));
  printf("bench_stream_gate: %s, %zu requests per row, %.0f us between an answer and the next request\n",
         prop.name, n, gap);
  bench_print_header();
  for (int how = LAUNCH; how <= GRAPH_GATE; ++how) {
    run_row(how, 0, n, gap);
    if (bytes) run_row(how, bytes, n, gap);
  }
  if (bytes > 8 * 16 * 256 * 8) bytes = 8 * 16 * 256 * 8;
  for (unsigned b = 1; bytes && b <= 8; b *= 2)
    if (bytes / 16 <= (size_t)b * 256 * 8) run_row(GRAPH_GATE_LOADS, bytes, n, gap, b);
  run_row(IN_KERNEL, 0, n, gap);
  if (bytes) run_row(IN_KERNEL, bytes, n, gap);
  /* The gates again, each poll of the word after a system-scope fence. */
  run_row(GRAPH_GATE, 0, n, gap, 1, 1);
  if (bytes && bytes / 16 <= 256 * 8) run_row(GRAPH_GATE_LOADS, bytes, n, gap, 1, 1);
  run_row(IN_KERNEL, 0, n, gap, 1, 1);
  if (bytes) run_row(IN_KERNEL, bytes, n, gap, 1, 1);
  return 0;
}
