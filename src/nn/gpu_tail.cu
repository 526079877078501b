/* The predecoder tail kernel (issue 12): a threshold chain read through the
 * index maps of one or two matrix products, with their parity epilogues, as
 * one small kernel (the operation: nnk_tail in gpu_kernels.cuh; where it
 * applies: nng_plan_tails in gpu_fuse.cu).
 *
 * Why its own kernel: the generic steps it replaces (the chain's kernel and
 * the paired products with interpreted epilogues, gpu_kernels.cu) ran
 * ~14 us at d = 13 on the H100 for a few thousand additions, most of it the
 * generic interpreter's code being fetched. Here every operation is compiled
 * in: a thread's work is a handful of loads, adds and one store.
 *
 * Exactness: the planner admits only integer-valued operands whose sums stay
 * below 2^24, so every partial sum is an exact float and the lanes may add in
 * any order; the result is then rounded to the products' element type and
 * cast as the generic steps do, which makes the outputs bit-identical. */
#include <cuda_fp16.h>

#include "gpu_ew.cuh"
#include "gpu_kernels.cuh"

namespace {

/* Up to PRE k-steps of a lane's first output: map entries and B, read before
 * the dependency wait (constants only). */
constexpr int PRE = 4;

/* Element idx of map buffer src: E's element ((X > thr) * V, as the chain
 * stores it) or the buffer's. */
template <typename T>
__device__ __forceinline__ float elem(const nnk_tail &q, const nnk_tail_prod &p, int src, int64_t idx, float thr) {
  if (src == p.e_src) return ld_float_type(q.x, q.x_dt, idx) > thr ? ld_float_type(q.v, q.v_dt, q.v_scalar ? 0 : idx) : 0.0f;
  return tof<T>(static_cast<const T *>(p.bufs[src])[idx]);
}

/* One product over blocks [0, nblk) of its part of the grid. A group of
 * 2^lg lanes computes one output: lane l sums k = l, l + G, ...; the group
 * reduces by shuffles inside a warp, or (G > 32, one output per block)
 * through shared memory. Every thread runs every iteration (the loop bound
 * is the block's), so the shuffles and barriers are uniform. */
template <typename T>
__device__ void tail_part(const nnk_tail &q, const nnk_tail_prod &p, unsigned blk, unsigned nblk) {
  __shared__ float red[NNK_TAIL_BLOCK / 32];
  const int lg = p.lg, G = 1 << lg, lane = threadIdx.x & (G - 1);
  const int64_t per_blk = NNK_TAIL_BLOCK >> lg, total = p.M * p.N;
  const T *B = static_cast<const T *>(p.b);
  const float thr = ld_float_type(q.thr, q.thr_dt, 0);
  int64_t base = (int64_t)blk * per_blk;
  int64_t t = base + (threadIdx.x >> lg);
  int srcs[PRE];
  int32_t idxs[PRE];
  float bs[PRE];
#pragma unroll
  for (int r = 0; r < PRE; r++) {
    const int64_t k = lane + (int64_t)r * G;
    srcs[r] = -1;
    if (t >= total || k >= p.K) continue;
    const int64_t i = t / p.N, j = t - i * p.N, e = i * p.sai + k * p.sak;
    srcs[r] = p.src[e];
    idxs[r] = p.idx[e];
    bs[r] = tof<T>(B[k * p.sbk + j * p.sbj]);
  }
  nnk_pdl_wait(); /* X, V, the map buffers and the addend are read after it (the planner admits only
                   * constants for B, the maps and thr, read above) */
  const int64_t first = base;
  for (; base < total; base += (int64_t)nblk * per_blk, t += (int64_t)nblk * per_blk) {
    const bool active = t < total;
    const int64_t i = active ? t / p.N : 0, j = active ? t - i * p.N : 0;
    float s = 0.0f;
    int64_t k = lane;
    if (active && base == first) { /* the prefetched k-steps */
#pragma unroll
      for (int r = 0; r < PRE; r++)
        if (srcs[r] >= 0) s += elem<T>(q, p, srcs[r], idxs[r], thr) * bs[r];
      k += (int64_t)PRE * G;
    }
    for (; active && k < p.K; k += G) {
      const int64_t e = i * p.sai + k * p.sak;
      s += elem<T>(q, p, p.src[e], p.idx[e], thr) * tof<T>(B[k * p.sbk + j * p.sbj]);
    }
    for (int w = (G < 32 ? G : 32) / 2; w > 0; w >>= 1) s += __shfl_xor_sync(0xffffffffu, s, w);
    if (G > 32) { /* one output per block: the warps' sums through shared memory */
      if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = s;
      __syncthreads();
      s = 0.0f;
      if (threadIdx.x == 0)
        for (int w = 0; w < G / 32; w++) s += red[w];
      __syncthreads(); /* red is rewritten by the next iteration */
    }
    if (lane != 0 || !active) continue;
    const T v = fromf<T>(s); /* the product's result in its element type */
    if (p.epi == 0) {
      static_cast<T *>(p.y)[t] = v;
      continue;
    }
    /* Cast to INT32, the optional Add and r - (r / c) * c, in 32-bit wrapping
     * arithmetic with the engine's Div rules (nnk_idiv32). */
    uint32_t r = (uint32_t)(int32_t)(long long)tof<T>(v);
    if (p.addend) r += (uint32_t)p.addend[t];
    const int32_t quo = nnk_idiv32((int32_t)r, p.c);
    p.out[t] = (int32_t)(r - (uint32_t)quo * (uint32_t)p.c);
  }
}

template <typename T>
__global__ void __launch_bounds__(NNK_TAIL_BLOCK) k_tail(nnk_tail q) {
  nnk_pdl_launch_dependents();
  /* Each product by name (a dynamic index into the parameters would copy
   * them to local memory). */
  if (q.n > 1 && blockIdx.x >= q.p[0].blocks) tail_part<T>(q, q.p[1], blockIdx.x - q.p[0].blocks, q.p[1].blocks);
  else tail_part<T>(q, q.p[0], blockIdx.x, q.p[0].blocks);
}

}  // namespace

cudaError_t nnk_launch_tail(const nnk_tail &q, int half, cudaStream_t s) {
  const unsigned blocks = q.p[0].blocks + (q.n > 1 ? q.p[1].blocks : 0);
  const dim3 grid(blocks), block(NNK_TAIL_BLOCK);
  return half ? nnk_launch_ex(k_tail<__half>, grid, block, 0, s, 1, q) : nnk_launch_ex(k_tail<float>, grid, block, 0, s, 1, q);
}
