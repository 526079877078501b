/*
 * bench_pdl_chain.cu - what a kernel boundary costs inside one CUDA graph
 * (issue 12): the NN engine runs a predecoder as a chain of 4-6 kernels
 * launched with programmatic dependent launch (PDL), so every boundary it
 * removes or cheapens is time off every inference. This measures the chain
 * with nothing else in it.
 *
 * A chain is N steps over G thread blocks of 256 threads. Step k's block b
 * reads 256 floats that block (b + 1) % G of step k - 1 wrote (step 0 reads
 * the last step's buffer of the previous replay), adds 1 and writes its own
 * 256: every step depends on another block's writes, as a convolution
 * layer depends on its neighbours' rows (a one-step chain: on its own). How a step waits for the one
 * before:
 *   plain   N kernels, each launched after the one before has ended
 *   pdl     N kernels with PDL: launch_dependents at the start, then
 *           griddepcontrol.wait (the engine's way)
 *   flag    N kernels with PDL, but a step waits for a counter of blocks
 *           done of the step before (ld.acquire.gpu; each block adds 1
 *           with a release after its writes) instead of griddepcontrol.wait;
 *           deadlock-free because a dependent grid is launched only after
 *           every block of the one before has started
 *   grid    one cooperative kernel, the N steps separated by the same
 *           counters (the engine's grid mode)
 *   cluster one kernel of one thread-block cluster (blocks <= 16): a step
 *           reads its neighbour's values of the step before from that
 *           block's shared memory (DSMEM) and the steps are separated by
 *           cluster barriers (the engine's cluster kernel's synchronisation)
 * Each replay: cudaGraphLaunch + cudaStreamSynchronize, timed on the host;
 * the floor row is a one-node graph (a 4-byte memset), as bench_nn_gpu's.
 * Counters are never reset: a block takes a ticket on its step's arrival
 * counter, and ticket / G is the replay it belongs to. After the run the
 * buffers are checked: every value must be N x replays (a step that read
 * too early would leave a smaller one).
 *
 *   bench_pdl_chain [--iters N] [--blocks 16,112] [--steps 1,2,4,5,8] [--rounds R]
 *
 * (The cluster rows run for block counts up to 16.)
 *
 * Prints p50 / p99 per (variant, blocks, steps), and the bad values.
 */
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench_common.h"
#include "bench_cuda_check.h"

#define CK(x) BENCH_CUDA_CK(x)

namespace {

constexpr int kThreads = 256;
constexpr int kMaxSteps = 16;

struct chain {
  float *buf[kMaxSteps]; /* step k's output, G x 256 */
  unsigned *arrive;      /* [kMaxSteps] tickets */
  unsigned *done;        /* [kMaxSteps] blocks finished, never reset */
  int steps, blocks;
};

__device__ __forceinline__ void pdl_launch_dependents() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ unsigned ld_acquire(const unsigned *p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

/* Block b's work in step k: read its neighbour's 256 values of step k - 1, write its own. */
__device__ __forceinline__ void step_work(const chain &c, int k) {
  /* A one-step chain reads the buffer it writes: its own values then, not a neighbour's (which may be
   * written already). */
  const int b = blockIdx.x, src = c.steps == 1 ? b : (b + 1) % c.blocks;
  const float *in = c.buf[(k + c.steps - 1) % c.steps];
  c.buf[k][b * kThreads + threadIdx.x] = __ldcg(in + src * kThreads + threadIdx.x) + 1.0f;
}

/* The counter handshake of step k (flag and grid variants). Acquire side:
 * thread 0 waits until done[k - 1] covers every block of this replay's
 * step k - 1 (pairs with the release below in those blocks), then the block
 * barrier passes it on. Step 0 waits for nothing in its replay. */
__device__ __forceinline__ void step_wait(const chain &c, int k) {
  __shared__ unsigned target;
  if (threadIdx.x == 0) {
    const unsigned ticket = atomicAdd(c.arrive + k, 1u);
    target = (ticket / (unsigned)c.blocks + 1u) * (unsigned)c.blocks;
    if (k > 0)
      while ((int)(ld_acquire(c.done + k - 1) - target) < 0) {
      }
  }
  __syncthreads();
}
/* Release side: after the block's writes (block barrier, then a GPU-scope
 * fence and the add), pairs with step_wait's acquire in the next step. */
__device__ __forceinline__ void step_arrive(const chain &c, int k) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(c.done + k, 1u);
  }
}

__global__ void __launch_bounds__(kThreads) k_plain(chain c, int k) { step_work(c, k); }
__global__ void __launch_bounds__(kThreads) k_pdl(chain c, int k) {
  pdl_launch_dependents();
  pdl_wait();
  step_work(c, k);
}
__global__ void __launch_bounds__(kThreads) k_flag(chain c, int k) {
  pdl_launch_dependents();
  step_wait(c, k);
  step_work(c, k);
  step_arrive(c, k);
}
__global__ void __launch_bounds__(kThreads) k_grid(chain c) {
  for (int k = 0; k < c.steps; k++) {
    step_wait(c, k);
    step_work(c, k);
    step_arrive(c, k);
  }
}

/* One cluster of c.blocks blocks: step k reads block src's values of step k
 * - 1 from its shared memory (step 0: the last step's global buffer of the
 * previous replay). Two shared buffers by step parity; the cluster barrier
 * that ends a step releases its shared writes and acquires the other
 * blocks' (barrier.cluster.arrive.release / wait.acquire), and a block
 * overwrites a buffer only after the barrier that ended the step in which
 * the others read it; the last barrier keeps every block resident until the
 * last remote read. The global writes are for the check. */
__global__ void __launch_bounds__(kThreads) k_cluster(chain c) {
  namespace cg = cooperative_groups;
  __shared__ float sm[2][kThreads];
  cg::cluster_group cl = cg::this_cluster();
  const int b = (int)cl.block_rank(), src = c.steps == 1 ? b : (b + 1) % c.blocks;
  for (int k = 0; k < c.steps; k++) {
    const float v = (k == 0 ? __ldcg(c.buf[c.steps - 1] + src * kThreads + threadIdx.x)
                            : cl.map_shared_rank(&sm[(k - 1) & 1][0], src)[threadIdx.x]) +
                    1.0f;
    sm[k & 1][threadIdx.x] = v;
    c.buf[k][b * kThreads + threadIdx.x] = v;
    cl.sync();
  }
}

enum { V_PLAIN, V_PDL, V_FLAG, V_GRID, V_CLUSTER, V_FLOOR, V_COUNT };
const char *kVariant[V_COUNT] = {"plain", "pdl", "flag", "grid", "cluster", "floor (1-node memset graph)"};

/* Launches step k of variant v (plain, pdl, flag: one step; cluster: the
 * whole chain, k unused) on s; returns the launch's error. */
cudaError_t launch(int v, const chain &c, int k, cudaStream_t s) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(c.blocks);
  cfg.blockDim = dim3(kThreads);
  cfg.stream = s;
  cudaLaunchAttribute at[1];
  if (v == V_PDL || v == V_FLAG) {
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = 1;
  } else if (v == V_CLUSTER) {
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = c.blocks;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    cfg.attrs = at;
    cfg.numAttrs = 1;
  }
  if (v == V_PLAIN) return cudaLaunchKernelEx(&cfg, k_plain, c, k);
  if (v == V_PDL) return cudaLaunchKernelEx(&cfg, k_pdl, c, k);
  if (v == V_FLAG) return cudaLaunchKernelEx(&cfg, k_flag, c, k);
  return cudaLaunchKernelEx(&cfg, k_cluster, c);
}

/* One row: builds the variant's graph, replays it iters times; returns the bad values. */
size_t row(int v, int blocks, int steps, int iters, unsigned *word) {
  chain c = {};
  c.steps = steps;
  c.blocks = blocks;
  for (int k = 0; k < steps; k++) {
    CK(cudaMalloc(&c.buf[k], (size_t)blocks * kThreads * sizeof(float)));
    CK(cudaMemset(c.buf[k], 0, (size_t)blocks * kThreads * sizeof(float)));
  }
  CK(cudaMalloc(&c.arrive, 2 * kMaxSteps * sizeof(unsigned)));
  CK(cudaMemset(c.arrive, 0, 2 * kMaxSteps * sizeof(unsigned)));
  c.done = c.arrive + kMaxSteps;
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int extra = 0; /* replays before the timed ones' warm-up (the cluster's trial launch) */
  if (v == V_CLUSTER) { /* a cluster that cannot be placed is reported, not fatal */
    cudaError_t e = launch(v, c, 0, s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      printf("%-44s not launched: %s\n", "cluster", cudaGetErrorString(e));
      CK(cudaStreamDestroy(s));
      for (int k = 0; k < steps; k++) CK(cudaFree(c.buf[k]));
      CK(cudaFree(c.arrive));
      return 0;
    }
    extra = 1;
  }
  cudaGraph_t g;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  if (v == V_FLOOR) {
    CK(cudaMemsetAsync(word, 0, sizeof(unsigned), s));
  } else if (v == V_GRID) {
    void *args[] = {&c};
    CK(cudaLaunchCooperativeKernel((void *)k_grid, dim3(blocks), dim3(kThreads), args, 0, s));
  } else if (v == V_CLUSTER) {
    CK(launch(v, c, 0, s));
  } else {
    for (int k = 0; k < steps; k++) CK(launch(v, c, k, s));
  }
  CK(cudaStreamEndCapture(s, &g));
  cudaGraphExec_t ge;
  CK(cudaGraphInstantiate(&ge, g, 0));
  const int warm = 200;
  std::vector<uint64_t> t(iters);
  for (int i = 0; i < warm + iters; i++) {
    const uint64_t t0 = bench_now_ns();
    CK(cudaGraphLaunch(ge, s));
    CK(cudaStreamSynchronize(s));
    if (i >= warm) t[i - warm] = bench_now_ns() - t0;
  }
  size_t bad = 0;
  if (v != V_FLOOR) {
    std::vector<float> h((size_t)blocks * kThreads);
    for (int k = 0; k < steps; k++) {
      CK(cudaMemcpy(h.data(), c.buf[k], h.size() * sizeof(float), cudaMemcpyDeviceToHost));
      const float want = (float)steps * (float)(extra + warm + iters - 1) + (float)(k + 1);
      for (float x : h) bad += x != want;
    }
  }
  char name[96];
  if (v == V_FLOOR) snprintf(name, sizeof name, "%s", kVariant[v]);
  else snprintf(name, sizeof name, "%s, %d blocks, %d steps", kVariant[v], blocks, steps);
  bench_print_row(name, t.size(), bench_percentiles(t.data(), t.size()));
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  CK(cudaStreamDestroy(s));
  for (int k = 0; k < steps; k++) CK(cudaFree(c.buf[k]));
  CK(cudaFree(c.arrive));
  return bad;
}

std::vector<int> parse_list(const char *s) {
  std::vector<int> v;
  for (const char *p = s; *p;) {
    char *e;
    const long x = strtol(p, &e, 10);
    if (e == p || x <= 0) {
      fprintf(stderr, "bench_pdl_chain: bad list '%s'\n", s);
      exit(2);
    }
    v.push_back((int)x);
    p = *e == ',' ? e + 1 : e;
    if (*e && *e != ',') {
      fprintf(stderr, "bench_pdl_chain: bad list '%s'\n", s);
      exit(2);
    }
  }
  return v;
}

}  // namespace

int main(int argc, char **argv) {
  int iters = 2000, rounds = 1;
  std::vector<int> blocks = {16, 112}, steps = {1, 2, 4, 5, 8};
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--blocks") && i + 1 < argc) blocks = parse_list(argv[++i]);
    else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = parse_list(argv[++i]);
    else {
      fprintf(stderr, "usage: bench_pdl_chain [--iters N] [--blocks 16,112] [--steps 1,2,4,5,8] [--rounds R]\n");
      return 2;
    }
  }
  if (iters < 1 || rounds < 1) {
    fprintf(stderr, "bench_pdl_chain: --iters and --rounds must be positive\n");
    return 2;
  }
  BENCH_EXIT_IF_NO_GPU();
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  int per_sm = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k_grid, kThreads, 0));
  /* Clusters of 16 (non-portable); where refused, those rows say they could not launch. */
  if (cudaFuncSetAttribute(k_cluster, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess)
    (void)cudaGetLastError();
  printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  for (int s : steps)
    if (s > kMaxSteps) {
      fprintf(stderr, "bench_pdl_chain: at most %d steps\n", kMaxSteps);
      return 2;
    }
  unsigned *word;
  CK(cudaMalloc(&word, sizeof(unsigned)));
  size_t bad = 0;
  bench_print_header();
  for (int r = 0; r < rounds; r++) {
    bad += row(V_FLOOR, 1, 1, iters, word);
    for (int b : blocks)
      for (int s : steps)
        for (int v = V_PLAIN; v <= V_CLUSTER; v++) {
          if (v == V_GRID && b > per_sm * prop.multiProcessorCount) continue;
          if (v == V_CLUSTER && b > 16) continue; /* the largest cluster (non-portable) */
          bad += row(v, b, s, iters, word);
        }
  }
  printf("bad values: %zu\n", bad);
  CK(cudaFree(word));
  return bad ? 1 : 0;
}
