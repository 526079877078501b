/* The predecoder tail's device code (the operation: nnk_tail in
 * gpu_kernels.cuh), shared by its kernel (gpu_tail.cu) and the device
 * program (gpu_devprog.cu). Why it exists and why it is exact: gpu_tail.cu.
 * tail_part must be run by every thread of blocks of NNK_TAIL_BLOCK threads. */
#ifndef CUDAQ_NN_GPU_TAIL_CUH
#define CUDAQ_NN_GPU_TAIL_CUH

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

}  // namespace

#endif
