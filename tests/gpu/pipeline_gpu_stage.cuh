/*
 * pipeline_gpu_stage.cuh - a passthrough GPU stage for the pipeline, with
 * real captured graphs (host-dispatcher-worker-pool.md section 5): per
 * worker a stream, a device input buffer, a mapped output buffer and a
 * graph of one kernel that copies the input into the mapped output (uint4
 * loads, posted stores across PCIe) and, when the pipeline has a CPU stage,
 * stores the ready flag from the last block to finish (system-scope
 * release). One node: every extra graph node costs microseconds of launch
 * latency. And a pre-launch callback that DMA-copies the request payload from the
 * ring slot (slot_dev + 24) into the input buffer before each launch; or,
 * with mailbox_read set, no pre-launch call at all: the kernel reads the
 * slot's device address from the worker's mailbox (written by the
 * dispatcher before the launch) and copies the payload straight out of the
 * mapped ring. With a now() clock the stage also times, per launch, the
 * dispatcher's pre-launch call plus cudaGraphLaunch (pre- to post-launch
 * callback): the host API cost on the dispatcher thread. With self_gate = N
 * (gpu_prelaunch only) the kernel, N blocks, waits at the worker's gate
 * itself (cudaq_pipeline_gate_wait, waits_at_gate) and copies the payload
 * from the request's device copy (or, with gate_in_ring, straight from the
 * ring: cudaq_pipeline_gate_wait_in_ring): no gate kernel in front of it.
 * Shared by tests/gpu/test_pipeline_gpu.cu and bench/bench_pipeline_gpu.cu.
 */
#ifndef CUDAQ_PIPELINE_GPU_STAGE_CUH
#define CUDAQ_PIPELINE_GPU_STAGE_CUH

#include <cuda/atomic>
#include <cuda_runtime.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cudaq/realtime/pipeline.h"

#define PGS_MAX_WORKERS 64

struct pgs_worker {
  cudaStream_t stream;
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  uint8_t *d_in;
  unsigned *d_blocks_done;    /* blocks of the current launch that have finished */
  uint8_t *h_out, *h_out_dev; /* mapped */
  size_t bytes;               /* payload bytes copied per request (multiple of 16) */
  struct pgs_stage *stage;    /* the stage it belongs to */
};

struct pgs_stage {
  size_t payload;    /* bytes per request */
  int signal_ready;  /* graph ends with the ready-flag store (GPU + CPU mode) */
  uint32_t function_id;
  int last_error;    /* first CUDA error in the factory */
  int mailbox_read;  /* the kernel reads the payload from the slot (no DMA) */
  int self_gate;     /* N > 0 (gpu_prelaunch): the kernel, N blocks, waits at the gate itself */
  int gate_in_ring;  /* self_gate: read the request in the ring (cudaq_pipeline_gate_wait_in_ring) */
  uint64_t (*now)(void); /* set: time the launch calls (dispatcher thread only) */
  uint64_t t_pre;        /* pre-launch callback entered */
  uint64_t launch_n, launch_sum_ns, launch_max_ns, launch_over_100us, launch_over_1ms;
  pgs_worker w[PGS_MAX_WORKERS];
  int nw;
};

/* n items of src to dst by the whole grid, loads in flight before their
 * stores (pipeline.h's cudaq__copy_in_flight: a plain loop waits for each
 * load, 8 dependent L2 or PCIe round trips for 16 KiB on one block). */
template <typename T>
__device__ void pgs_copy(const T *__restrict__ src, T *__restrict__ dst, size_t n) {
  cudaq__copy_in_flight<T, size_t>(src, dst, blockIdx.x * (size_t)blockDim.x + threadIdx.x, n,
                                   (size_t)gridDim.x * blockDim.x);
}

/* The end of a passthrough kernel in GPU + CPU mode: the ready flag, once
 * every block's output stores are done. One block: its barrier orders the
 * block's stores before thread 0's release store (cumulative), no counter
 * needed. Several: the last block to count stores it. */
__device__ void pgs_publish(int *ready, unsigned *blocks_done) {
  if (!ready) return; /* GPU-only mode: the pipeline completes the request */
  __syncthreads();    /* this block's output stores come before thread 0's release / count */
  if (threadIdx.x != 0) return;
  if (gridDim.x > 1) {
    __threadfence_system();
    if (atomicAdd(blocks_done, 1u) + 1u != gridDim.x) return;
    /* Last block: every block's stores came before its count (fence above),
     * and the count is read here, so they come before this release. */
    *blocks_done = 0; /* for the next launch (stream-ordered after this one) */
  }
  /* Publishes the output to the CPU worker, whose CAS(1 -> 2) acquires
   * it. Store only: no RMW on mapped memory. */
  cuda::atomic_ref<int, cuda::thread_scope_system>(*ready).store(1, cuda::memory_order_release);
}

/* self_gate: waits at the worker's gate (every block calls it), then copies
 * the payload of the request's device copy (+24: 8-byte aligned). */
__global__ void pgs_selfgate_kernel(cudaq_pipeline_gate_t gate, uint4 *__restrict__ out, size_t n16, int *ready,
                                    unsigned *blocks_done, int in_ring) {
  const uint8_t *req = in_ring ? cudaq_pipeline_gate_wait_in_ring(gate) : cudaq_pipeline_gate_wait(gate);
  pgs_copy((const uint2 *)(req + CUDAQ_RPC_HEADER_SIZE), (uint2 *)out, 2 * n16);
  pgs_publish(ready, blocks_done);
}

__global__ void pgs_passthrough_kernel(const uint4 *__restrict__ in, uint4 *__restrict__ out, size_t n16,
                                       int *ready, unsigned *blocks_done, void *const *mailbox) {
  if (mailbox) {
    /* The slot's device address, written by the dispatcher before this
     * launch (the launch orders it); the payload at +24 is 8-byte aligned. */
    const uint2 *src = (const uint2 *)((const uint8_t *)*(void *const volatile *)mailbox + CUDAQ_RPC_HEADER_SIZE);
    pgs_copy(src, (uint2 *)out, 2 * n16);
  } else {
    pgs_copy(in, out, n16);
  }
  pgs_publish(ready, blocks_done);
}

/* Pre-launch DMA: ring slot payload -> the worker's input buffer. */
static void pgs_pre_launch(void *user, void *slot_dev, cudaStream_t s) {
  pgs_worker *w = (pgs_worker *)user;
  pgs_stage *st = w->stage;
  if (st->now) st->t_pre = st->now();
  if (!st->mailbox_read)
    cudaMemcpyAsync(w->d_in, (const uint8_t *)slot_dev + CUDAQ_RPC_HEADER_SIZE, w->bytes, cudaMemcpyDefault, s);
}

/* After a successful launch: the pre-launch call + cudaGraphLaunch time. */
static void pgs_post_launch(void *user, void *slot_dev, cudaStream_t s) {
  (void)slot_dev, (void)s;
  pgs_stage *st = ((pgs_worker *)user)->stage;
  uint64_t d = st->now() - st->t_pre;
  st->launch_n++;
  st->launch_sum_ns += d;
  if (d > st->launch_max_ns) st->launch_max_ns = d;
  st->launch_over_100us += d > 100000;
  st->launch_over_1ms += d > 1000000;
}

#define PGS_CK(x)                              \
  do {                                         \
    cudaError_t e_ = (x);                      \
    if (e_ != cudaSuccess) {                   \
      fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); \
      return (int)e_;                          \
    }                                          \
  } while (0)

/* The cudaq_gpu_stage_factory_t: user is a pgs_stage. */
static int pgs_factory(void *user, int id, cudaq_gpu_worker_resources_t *r) {
  pgs_stage *st = (pgs_stage *)user;
  pgs_worker *w = &st->w[id];
  memset(w, 0, sizeof *w);
  w->stage = st;
  w->bytes = (st->payload + 15) / 16 * 16;
  PGS_CK(cudaStreamCreateWithFlags(&w->stream, cudaStreamNonBlocking));
  PGS_CK(cudaMalloc(&w->d_in, w->bytes));
  PGS_CK(cudaMalloc(&w->d_blocks_done, sizeof(unsigned)));
  PGS_CK(cudaMemset(w->d_in, 0, w->bytes));
  PGS_CK(cudaMemset(w->d_blocks_done, 0, sizeof(unsigned)));
  PGS_CK(cudaHostAlloc(&w->h_out, w->bytes, cudaHostAllocMapped));
  PGS_CK(cudaHostGetDevicePointer((void **)&w->h_out_dev, w->h_out, 0));
  if (st->signal_ready && !r->ready_flag_dev) return -1;
  PGS_CK(cudaStreamBeginCapture(w->stream, cudaStreamCaptureModeThreadLocal));
  size_t n16 = w->bytes / 16;
  unsigned blocks = (unsigned)((n16 + 255) / 256);
  if (blocks == 0) blocks = 1;
  if (blocks > 64) blocks = 64;
  if (st->mailbox_read && !r->mailbox_dev) return -1;
  if (st->self_gate && !r->gate) return -1; /* no gate: gpu_prelaunch is off */
  if (st->self_gate)
    pgs_selfgate_kernel<<<(unsigned)st->self_gate, 256, 0, w->stream>>>(
        *r->gate, (uint4 *)w->h_out_dev, n16, st->signal_ready ? r->ready_flag_dev : nullptr, w->d_blocks_done,
        st->gate_in_ring);
  else
    pgs_passthrough_kernel<<<blocks, 256, 0, w->stream>>>((const uint4 *)w->d_in, (uint4 *)w->h_out_dev, n16,
                                                           st->signal_ready ? r->ready_flag_dev : nullptr,
                                                           w->d_blocks_done,
                                                           st->mailbox_read ? r->mailbox_dev : nullptr);
  r->waits_at_gate = st->self_gate != 0;
  PGS_CK(cudaStreamEndCapture(w->stream, &w->graph));
  PGS_CK(cudaGraphInstantiate(&w->exec, w->graph, 0));
  PGS_CK(cudaGraphUpload(w->exec, w->stream));
  PGS_CK(cudaStreamSynchronize(w->stream));
  r->graph_exec = w->exec;
  r->graph = w->graph; /* kept until pgs_release (gpu_prelaunch wraps it) */
  r->stream = w->stream;
  if (!st->mailbox_read || st->now) {
    r->pre_launch_fn = pgs_pre_launch;
    r->pre_launch_data = w;
  }
  if (st->now) {
    r->post_launch_fn = pgs_post_launch;
    r->post_launch_data = w;
  }
  r->function_id = st->function_id;
  r->gpu_output_host = w->h_out;
  r->gpu_output_size = st->payload;
  r->user_context = w;
  if (id + 1 > st->nw) st->nw = id + 1;
  return 0;
}

static void pgs_release(pgs_stage *st) {
  for (int i = 0; i < st->nw; ++i) {
    pgs_worker *w = &st->w[i];
    if (w->exec) cudaGraphExecDestroy(w->exec);
    if (w->graph) cudaGraphDestroy(w->graph);
    if (w->stream) cudaStreamDestroy(w->stream);
    cudaFree(w->d_in);
    cudaFree(w->d_blocks_done);
    if (w->h_out) cudaFreeHost(w->h_out);
  }
  st->nw = 0;
}

/* The graph-launch floor, same process: a graph of one kernel that stores a
 * sequence number into a mapped flag; the host launches it and spins until
 * it sees the number. With dma_bytes > 0 a cudaMemcpyAsync of that many
 * bytes from mapped memory precedes each launch (the pre-launch DMA).
 * Fills samples_ns[n]; returns 0 or a CUDA error. */
__global__ void pgs_floor_kernel(uint64_t *flag, uint64_t *seq_dev) {
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system> f(*flag);
  uint64_t s = *seq_dev + 1;
  *seq_dev = s;
  f.store(s, cuda::memory_order_release);
}

static int pgs_launch_floor(size_t n, uint64_t *samples_ns, size_t dma_bytes,
                            uint64_t (*now_ns)(void)) {
  cudaStream_t s;
  cudaGraph_t g;
  cudaGraphExec_t ge;
  uint64_t *flag, *flag_dev, *seq;
  uint8_t *src = NULL, *src_dev = NULL, *dst = NULL;
  PGS_CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  PGS_CK(cudaHostAlloc(&flag, sizeof *flag, cudaHostAllocMapped));
  PGS_CK(cudaHostGetDevicePointer((void **)&flag_dev, flag, 0));
  PGS_CK(cudaMalloc(&seq, sizeof *seq));
  PGS_CK(cudaMemset(seq, 0, sizeof *seq));
  if (dma_bytes) {
    PGS_CK(cudaHostAlloc(&src, dma_bytes, cudaHostAllocMapped));
    PGS_CK(cudaHostGetDevicePointer((void **)&src_dev, src, 0));
    PGS_CK(cudaMalloc(&dst, dma_bytes));
  }
  *flag = 0;
  PGS_CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  pgs_floor_kernel<<<1, 1, 0, s>>>(flag_dev, seq);
  PGS_CK(cudaStreamEndCapture(s, &g));
  PGS_CK(cudaGraphInstantiate(&ge, g, 0));
  PGS_CK(cudaGraphUpload(ge, s));
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system> f(*flag);
  for (size_t i = 0; i < n + 100; ++i) {
    uint64_t t0 = now_ns();
    if (dma_bytes) cudaMemcpyAsync(dst, src_dev, dma_bytes, cudaMemcpyDefault, s);
    cudaError_t e = cudaGraphLaunch(ge, s);
    if (e != cudaSuccess) return (int)e;
    while (f.load(cuda::memory_order_acquire) != i + 1) {
    }
    uint64_t t1 = now_ns();
    if (i >= 100) samples_ns[i - 100] = t1 - t0;
  }
  cudaStreamSynchronize(s);
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  cudaStreamDestroy(s);
  cudaFreeHost(flag);
  cudaFree(seq);
  if (dma_bytes) {
    cudaFreeHost(src);
    cudaFree(dst);
  }
  return 0;
}

#endif
