/*
 * gate.cu - the gate graph of a pre-launched pipeline worker (gate.h;
 * pipeline.h, gpu_prelaunch): a one-block kernel that waits at the gate
 * word and copies the request into device memory, ahead of the worker's own
 * graph as a child node; or the worker's graph alone when its first kernel
 * waits at the gate itself (waits_at_gate). CUDA builds only; reached
 * through the launch ops (cuda_ops.c).
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

/* The gate kernel: one block waits and copies (cudaq_pipeline_gate_wait,
 * pipeline.h: one home for the gate's rule), then the worker's graph runs. */
__global__ void __launch_bounds__(kThreads) gate_kernel(cudaq_pipeline_gate_t a) { cudaq_pipeline_gate_wait(a); }

/* GPU-only completion, the gate graph's last node. G13 (as the stream
 * write it replaces; pairs with A13 in the pipeline's consumer): the fence
 * makes the graph's output, written by the kernels before this node, visible
 * system-wide before the word. */
__global__ void done_kernel(uint32_t *done) {
  __threadfence_system();
  cuda::atomic_ref<uint32_t, cuda::thread_scope_system>(*done).store(1u, cuda::memory_order_release);
}

}  // namespace

/* One device block per worker: [mailbox word][ticket][opened][passed][pad]
 * [request pointer][staging at 32]. */
extern "C" int cudaq__gate_alloc(void *user, uint64_t staging_bytes, cudaq_pipeline_gate_t *g) {
  (void)user;
  uint8_t *base = nullptr;
  const size_t bytes = 32 + (size_t)staging_bytes;
  cudaError_t e = cudaMalloc(&base, bytes);
  if (e != cudaSuccess) return (int)e;
  g->mailbox_dev = reinterpret_cast<void **>(base);
  g->ticket_dev = reinterpret_cast<uint32_t *>(base + 8);
  g->opened_dev = reinterpret_cast<uint32_t *>(base + 12);
  g->passed_dev = reinterpret_cast<uint32_t *>(base + 16);
  g->request_dev = reinterpret_cast<const uint8_t **>(base + 24);
  g->staging_dev = base + 32;
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

/* waits_at_gate: whatever the graph runs must come after the kernel that
 * waits, so the graph has one root node, that kernel (through child graphs
 * whose one root is again the next level's). cudaSuccess or
 * cudaErrorInvalidValue. */
static cudaError_t one_kernel_root(cudaGraph_t g) {
  for (int depth = 0; depth < 16; ++depth) {
    size_t n = 0;
    cudaError_t e = cudaGraphGetRootNodes(g, nullptr, &n);
    if (e != cudaSuccess) return e;
    if (n != 1) return cudaErrorInvalidValue;
    cudaGraphNode_t root;
    e = cudaGraphGetRootNodes(g, &root, &n);
    if (e != cudaSuccess) return e;
    cudaGraphNodeType t;
    e = cudaGraphNodeGetType(root, &t);
    if (e != cudaSuccess) return e;
    if (t == cudaGraphNodeTypeKernel) return cudaSuccess;
    if (t != cudaGraphNodeTypeGraph) return cudaErrorInvalidValue;
    e = cudaGraphChildGraphNodeGetGraph(root, &g);
    if (e != cudaSuccess) return e;
  }
  return cudaErrorInvalidValue;
}

/* self: the user graph waits at the gate itself (waits_at_gate): no gate
 * kernel in front of it (its one root node must be the kernel that waits:
 * cudaErrorInvalidValue otherwise). */
extern "C" int cudaq__gate_graph(void *user, cudaGraph_t user_graph, const cudaq_pipeline_gate_t *a, int self,
                                 cudaStream_t s, cudaGraphExec_t *out) {
  (void)user;
  cudaGraph_t g = nullptr;
  cudaGraphNode_t gate, child, done;
  cudaq_pipeline_gate_t args = *a;
  void *params[] = {&args};
  cudaKernelNodeParams kp = {};
  kp.func = reinterpret_cast<void *>(gate_kernel);
  kp.gridDim = dim3(1);
  kp.blockDim = dim3(kThreads);
  kp.kernelParams = params;
  cudaError_t e = self ? one_kernel_root(user_graph) : cudaSuccess;
  if (e != cudaSuccess) return (int)e;
  e = cudaGraphCreate(&g, 0);
  if (e == cudaSuccess && !self) e = cudaGraphAddKernelNode(&gate, g, nullptr, 0, &kp);
  if (e == cudaSuccess) e = cudaGraphAddChildGraphNode(&child, g, self ? nullptr : &gate, self ? 0 : 1, user_graph);
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

extern "C" void cudaq__gate_free(void *user, cudaq_pipeline_gate_t *g, cudaGraphExec_t exec) {
  (void)user;
  if (exec) cudaGraphExecDestroy(exec);
  if (g->mailbox_dev) cudaFree(g->mailbox_dev);
  g->mailbox_dev = nullptr;
}
