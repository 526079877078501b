/*
 * gate.cu - the gate graph of a pre-launched pipeline worker (gate.h;
 * pipeline.h, gpu_prelaunch): a one-block kernel that waits at the gate
 * word and copies the request into device memory, ahead of the worker's own
 * graph as a child node. CUDA builds only; reached through the launch ops
 * (cuda_ops.c).
 *
 * Why a kernel and not cuStreamWaitValue32 + cudaMemcpyAsync: measured on
 * an H100 (bench/bench_stream_gate), paced requests, 2 KiB: a copy enqueued
 * behind a stream wait or a gate kernel starts 10-13 us after the gate
 * opens (the copy engine's wake-up); this kernel's own 16-byte loads answer
 * in 5.2 us, against 8.6 us for cudaMemcpyAsync + cudaGraphLaunch on
 * arrival. One block: more blocks polling the word measured slower.
 */
#include <cuda/atomic>
#include <cuda_runtime.h>

#include "gate.h"

namespace {

constexpr unsigned kThreads = 256;
constexpr int kInFlight = 8; /* loads per thread issued before their stores */

/* Items [from, to) of src to dst, kInFlight loads per thread in flight. */
template <typename T>
__device__ void copy_items(const T *__restrict__ src, T *__restrict__ dst, uint32_t from, uint32_t to) {
  for (uint32_t base = from; base < to; base += kInFlight * kThreads) {
    T v[kInFlight];
#pragma unroll
    for (int k = 0; k < kInFlight; ++k) {
      const uint32_t i = base + k * kThreads + threadIdx.x;
      if (i < to) v[k] = src[i];
    }
#pragma unroll
    for (int k = 0; k < kInFlight; ++k) {
      const uint32_t i = base + k * kThreads + threadIdx.x;
      if (i < to) dst[i] = v[k];
    }
  }
}

/* The request at slot (header, then arg_len bytes; at most cap items) into
 * staging: one item per thread first (the header among them), then the
 * rest once the header says how much there is. */
template <typename T>
__device__ void copy_request(const uint8_t *slot, uint8_t *staging, uint64_t staging_bytes) {
  __shared__ uint32_t n_items;
  const T *src = reinterpret_cast<const T *>(slot);
  T *dst = reinterpret_cast<T *>(staging);
  const uint64_t cap64 = staging_bytes / sizeof(T);
  const uint32_t cap = cap64 > 0xffffffffu ? 0xffffffffu : (uint32_t)cap64;
  const uint32_t first = cap < kThreads ? cap : kThreads;
  copy_items(src, dst, 0, first);
  __syncthreads(); /* the header's items are in staging */
  if (threadIdx.x == 0) {
    const uint64_t arg_len = reinterpret_cast<const volatile uint32_t *>(staging)[2]; /* offset 8 */
    const uint64_t total = (24 + arg_len + sizeof(T) - 1) / sizeof(T);
    n_items = total < cap ? (uint32_t)total : cap;
  }
  __syncthreads();
  if (n_items > first) copy_items(src, dst, first, n_items);
}

__global__ void __launch_bounds__(kThreads) gate_kernel(cudaq__gate_args_t a) {
  __shared__ uint32_t slot; /* nslots: no request (CUDAQ__GATE_CANCEL) */
  if (threadIdx.x == 0) {
    const uint32_t want = *a.ticket_dev + 1;
    cuda::atomic_ref<uint64_t, cuda::thread_scope_system> g(*const_cast<uint64_t *>(a.gate_dev));
    uint64_t v;
    /* A14 pairs with R14 (open_gate in pool.c): once the word carries this
     * run's ticket, the slot's request bytes are visible to the loads
     * below (issued after the barrier that follows this acquire). */
    do {
      v = g.load(cuda::memory_order_acquire);
    } while ((int32_t)((uint32_t)(v >> 32) - want) < 0);
    *a.ticket_dev = want; /* read again by the next run, stream-ordered after this one */
    const uint32_t s = (uint32_t)v;
    slot = s < a.nslots ? s : a.nslots;
  }
  __syncthreads();
  if (slot == a.nslots) { /* released without a request: an empty one (24 zero bytes) */
    if (threadIdx.x < 6) reinterpret_cast<uint32_t *>(a.staging_dev)[threadIdx.x] = 0;
    return;
  }
  const uint8_t *src = a.ring_dev + (uint64_t)slot * a.stride;
  if (((uintptr_t)a.ring_dev | a.stride | (uintptr_t)a.staging_dev) % 16 == 0)
    copy_request<uint4>(src, a.staging_dev, a.staging_bytes);
  else
    copy_request<uint2>(src, a.staging_dev, a.staging_bytes);
}

/* GPU-only completion, the gate graph's last node. G13 (as the stream
 * write it replaces; pairs with A13 in the pipeline's consumer): the fence
 * makes the graph's output, written by the kernels before this node, visible
 * system-wide before the word. */
__global__ void done_kernel(uint32_t *done) {
  __threadfence_system();
  cuda::atomic_ref<uint32_t, cuda::thread_scope_system>(*done).store(1u, cuda::memory_order_release);
}

}  // namespace

/* One device block per worker: [mailbox word][ticket][pad to 16][staging]. */
extern "C" int cudaq__gate_alloc(void *user, uint64_t staging_bytes, cudaq__gate_args_t *g) {
  (void)user;
  uint8_t *base = nullptr;
  const size_t bytes = 16 + (size_t)staging_bytes;
  cudaError_t e = cudaMalloc(&base, bytes);
  if (e != cudaSuccess) return (int)e;
  g->mailbox_dev = reinterpret_cast<void **>(base);
  g->ticket_dev = reinterpret_cast<uint32_t *>(base + 8);
  g->staging_dev = base + 16;
  g->staging_bytes = staging_bytes;
  void *staging = g->staging_dev;
  e = cudaMemset(base, 0, bytes);
  if (e == cudaSuccess) e = cudaMemcpy(g->mailbox_dev, &staging, sizeof staging, cudaMemcpyHostToDevice);
  /* Both on the legacy stream: done before any worker stream launches a gate graph. */
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    cudaFree(base);
    g->mailbox_dev = nullptr;
    return (int)e;
  }
  return 0;
}

extern "C" int cudaq__gate_graph(void *user, cudaGraph_t user_graph, const cudaq__gate_args_t *a,
                                 cudaStream_t s, cudaGraphExec_t *out) {
  (void)user;
  cudaGraph_t g = nullptr;
  cudaGraphNode_t gate, child, done;
  cudaq__gate_args_t args = *a;
  void *params[] = {&args};
  cudaKernelNodeParams kp = {};
  kp.func = reinterpret_cast<void *>(gate_kernel);
  kp.gridDim = dim3(1);
  kp.blockDim = dim3(kThreads);
  kp.kernelParams = params;
  cudaError_t e = cudaGraphCreate(&g, 0);
  if (e == cudaSuccess) e = cudaGraphAddKernelNode(&gate, g, nullptr, 0, &kp);
  if (e == cudaSuccess) e = cudaGraphAddChildGraphNode(&child, g, &gate, 1, user_graph);
  if (e == cudaSuccess && a->done_dev) {
    uint32_t *word = a->done_dev;
    void *dparams[] = {&word};
    cudaKernelNodeParams dp = {};
    dp.func = reinterpret_cast<void *>(done_kernel);
    dp.gridDim = dim3(1);
    dp.blockDim = dim3(1);
    dp.kernelParams = dparams;
    e = cudaGraphAddKernelNode(&done, g, &child, 1, &dp);
  }
  if (e == cudaSuccess) e = cudaGraphInstantiate(out, g, 0);
  if (e == cudaSuccess) e = cudaGraphUpload(*out, s);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  if (g) cudaGraphDestroy(g); /* the exec keeps what it needs */
  return (int)e;
}

extern "C" void cudaq__gate_free(void *user, cudaq__gate_args_t *g, cudaGraphExec_t exec) {
  (void)user;
  if (exec) cudaGraphExecDestroy(exec);
  if (g->mailbox_dev) cudaFree(g->mailbox_dev);
  g->mailbox_dev = nullptr;
}
