/* What the channels-last convolution kernels share (gpu_conv_cl.cu: the
 * tile and brick kernels; gpu_conv_wg.cu: the wgmma brick kernel): the
 * kernel arguments, the epilogue with its split-K sum, the brick window.
 * Internal to the engine (namespace nncl). */
#ifndef CUDAQ_NN_GPU_CONV_CL_CUH
#define CUDAQ_NN_GPU_CONV_CL_CUH

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include "gpu_ew.cuh"
#include "gpu_kernels.cuh"
#include "gpu_mma.cuh"

namespace nncl {

namespace cg = cooperative_groups;

constexpr int CL_BK = 32;           /* k per step */
constexpr int CL_LDS = CL_BK + 8;   /* row stride in halves: 80 bytes, ldmatrix conflict-free */
constexpr size_t CL_MAX_SMEM = 227 * 1024;

struct cl_args {
  const __half *x, *w;
  const float *b;
  __half *y;
  int C, M, P, Pin;       /* in channels, out channels, out cells, in cells */
  int OH, OW, D, H, W;    /* output plane dims, input dims */
  int stride[3], dil[3], pad0[3];
  int kh, kw, taps;       /* kernel height / width, taps */
  int kpad, ncb, ksteps;  /* packed K, channel blocks per tap (in_cl), k-steps */
  int split, relu;
  nnk_conv_fuse f;       /* NCDHW input through a copy map, epilogue chain */
};

__host__ __device__ inline int round_up(int v, int m) { return (v + m - 1) / m * m; }

/* The weight buffer of a convolution (nnk_cl_pack_weights) holds up to
 * three packings back to back, each of round_up(M, 128) x kpad halves but
 * the last: the tiles' and bricks' order, the wgmma kernel's (wg_pack,
 * where cl_brick_shape holds), the narrow kernel's (narrow_pack, where
 * narrow_shape holds). Packing k starts cl_pack_off(M, kpad, k) halves in. */
enum { CL_PACK_WG = 1, CL_PACK_NARROW = 2 }; /* packing 0, the tiles' and bricks', starts at 0 */
inline size_t cl_pack_off(int M, int kpad, int k) { return (size_t)k * round_up(M, 128) * kpad; }

/* The current device's compute capability as 10 major + minor (0 if it
 * cannot be read), asked once per process. */
inline int device_cc() {
  static int cc = -1;
  if (cc < 0) {
    int dev = 0, major = 0, minor = 0;
    cc = cudaGetDevice(&dev) == cudaSuccess &&
                 cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
                 cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess
             ? major * 10 + minor
             : 0;
  }
  return cc;
}
inline int device_has_clusters() { return device_cc() >= 90; }

/* The dynamic shared memory a CTA may opt into on the current device,
 * capped at CL_MAX_SMEM (227 KiB on sm_90; less on sm_8x: a configuration
 * that needs more is not offered there, and the kernels' attribute is set
 * to this), asked once per process. */
inline size_t cl_smem_max() {
  static size_t m = 0;
  if (!m) {
    int dev = 0, v = 0;
    m = cudaGetDevice(&dev) == cudaSuccess &&
                cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) == cudaSuccess && v > 0
            ? (size_t)v < CL_MAX_SMEM ? (size_t)v : CL_MAX_SMEM
            : 48 * 1024;
  }
  return m;
}

/* Lets kernel kern take cl_smem_max() bytes of dynamic shared memory (and,
 * with clusters on a device that has them, clusters beyond the portable 8),
 * once per kernel: done is the caller's per-kernel static flag. Idempotent,
 * so races between engines are benign (same values). */
template <typename K>
cudaError_t cl_kernel_attrs(K kern, bool &done, bool clusters = false) {
  if (done) return cudaSuccess;
  cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)cl_smem_max());
  if (e == cudaSuccess && clusters && device_has_clusters())
    e = cudaFuncSetAttribute(kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  done = e == cudaSuccess;
  return e;
}

/* An A/B switch: environment variable name set to "1". */
inline int cl_env_on(const char *name) {
  const char *e = getenv(name);
  return e && e[0] == '1';
}

/* No tile or brick wider than the output channels need: M rounded up to
 * 16, or a power of two up to 128 (wider only adds padding work). */
inline int cl_width_max(const nnk_conv &p) {
  int mw = 16;
  while (mw < p.M && mw < 128) mw *= 2;
  return mw;
}

/* The shape every brick kernel (mma.sync and wgmma) takes: NDHWC input, a
 * 3 x 3 x 3 kernel, stride 1, dilation 1 (any padding). */
inline int cl_brick_shape(const nnk_conv &p, int in_cl) {
  if (!in_cl) return 0;
  for (int i = 0; i < 3; i++)
    if (p.k[i] != 3 || p.stride[i] != 1 || p.dil[i] != 1) return 0;
  return 1;
}

/* One output element: + bias, ReLU, FP16, stored in the output layout, or
 * (NCDHW with an epilogue chain) handed to the chain as its seed. */
template <bool OUT_CL>
__device__ __forceinline__ void cl_store(const cl_args &a, int nb, int row, int col, float v) {
  v += a.b ? a.b[col] : 0.0f;
  if (a.relu) v = nnk_relu_nan(v);
  const size_t i = OUT_CL ? ((size_t)nb * a.P + row) * a.M + col : ((size_t)nb * a.M + col) * a.P + row;
  if (!OUT_CL && a.f.epi) {
    const __half seed = __float2half(v);
    fused_at_dev(a.f.epi, (int64_t)i, &seed);
    return;
  }
  a.y[i] = __float2half(v);
}

/* Four consecutive output channels col .. col + 3 of an NDHWC row (no
 * epilogue chain; M % 4 == 0, col % 4 == 0): + bias, ReLU, FP16, one 8-byte store. */
__device__ __forceinline__ void cl_store4_cl(const cl_args &a, int nb, int row, int col, float4 v) {
  if (a.b) {
    const float4 b = *reinterpret_cast<const float4 *>(a.b + col);
    v.x += b.x, v.y += b.y, v.z += b.z, v.w += b.w;
  }
  if (a.relu) v.x = nnk_relu_nan(v.x), v.y = nnk_relu_nan(v.y), v.z = nnk_relu_nan(v.z), v.w = nnk_relu_nan(v.w);
  const __half2 lo = __floats2half2_rn(v.x, v.y), hi = __floats2half2_rn(v.z, v.w);
  uint2 u;
  u.x = *reinterpret_cast<const uint32_t *>(&lo);
  u.y = *reinterpret_cast<const uint32_t *>(&hi);
  *reinterpret_cast<uint2 *>(a.y + ((size_t)nb * a.P + row) * a.M + col) = u;
}

/* The end of a channels-last kernel (tile or brick): the warp's accumulators
 * (fragment element e of (mi, ni): row fr + 16 mi (+8 for e >= 2), column
 * fc + 8 ni (+1 for odd e) of the BM x BN tile at output channel n0) + bias,
 * ReLU, stored; row_of(r) is tile row r's output cell, -1 outside the output.
 * With split K the CTAs of the cluster first sum their partial tiles: each
 * writes its tile to its own shared memory (once every copy has landed and
 * every warp is past its last ldmatrix), then sums rows [rank * BM / S,
 * (rank + 1) * BM / S) over the cluster through distributed shared memory
 * (the partners' tiles mapped once for splits up to MAXS). */
template <int BM, int BN, int THREADS, bool OUT_CL, int MAXS, int MI, int NI, typename RowOf>
__device__ __forceinline__ void cl_finish(const cl_args &a, const float (&acc)[MI][NI][4], int fr, int fc, int rank,
                                          int nb, int n0, RowOf row_of) {
  if (a.split == 1) {
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
      for (int e2 = 0; e2 < 2; e2++) {
        const int row = row_of(fr + mi * 16 + e2 * 8);
        if (row < 0) continue;
#pragma unroll
        for (int ni = 0; ni < NI; ni++)
#pragma unroll
          for (int e = 0; e < 2; e++) {
            const int col = n0 + fc + ni * 8 + e;
            if (col < a.M) cl_store<OUT_CL>(a, nb, row, col, acc[mi][ni][e2 * 2 + e]);
          }
      }
    return;
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(16) unsigned char cl_smem[];
  constexpr int RLD = BN + 4;
  float *red = reinterpret_cast<float *>(cl_smem);
  nnk_cp_async_wait<0>();
  __syncthreads();
#pragma unroll
  for (int mi = 0; mi < MI; mi++)
#pragma unroll
    for (int ni = 0; ni < NI; ni++)
#pragma unroll
      for (int e = 0; e < 4; e++) red[(fr + mi * 16 + (e >> 1) * 8) * RLD + fc + ni * 8 + (e & 1)] = acc[mi][ni][e];
  cg::cluster_group cluster = cg::this_cluster();
  /* Release of this CTA's partial tile (a fence restricted to its own
   * shared memory, then a relaxed arrival: cluster.sync's release arrival
   * costs a GPU-scope MEMBAR on sm_90), acquire of the partners' (the
   * wait). Pairs with the same three steps in the partners, whose reads
   * below follow their wait. */
  nnk_fence_release_smem_cluster();
  nnk_cluster_arrive_relaxed();
  nnk_cluster_wait();
  const int rows = BM / a.split, r0 = rank * rows;
  const float *part[MAXS]; /* the partners' tiles, mapped once (splits up to MAXS; beyond, per element) */
#pragma unroll
  for (int q = 0; q < MAXS; q++) part[q] = q < a.split ? cluster.map_shared_rank(red, q) : red;
  if (OUT_CL && a.M % 4 == 0 && a.split <= MAXS && reinterpret_cast<uintptr_t>(a.y) % 8 == 0 &&
      reinterpret_cast<uintptr_t>(a.b) % 16 == 0) {
    /* NDHWC: four channels per thread (float4 reads of the partial tiles,
     * one 8-byte store). */
    for (int i = threadIdx.x; i < rows * (BN / 4); i += THREADS) {
      const int r = r0 + i / (BN / 4), c = (i % (BN / 4)) * 4;
      const int row = row_of(r), col = n0 + c;
      if (row < 0 || col >= a.M) continue;
      float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
      for (int q = 0; q < MAXS; q++)
        if (q < a.split) {
          const float4 t = *reinterpret_cast<const float4 *>(part[q] + r * RLD + c);
          v.x += t.x, v.y += t.y, v.z += t.z, v.w += t.w;
        }
      cl_store4_cl(a, nb, row, col, v);
    }
  } else {
    for (int i = threadIdx.x; i < rows * BN; i += THREADS) {
      /* Output-contiguous order: channels fastest for NDHWC, cells for NCDHW. */
      const int r = r0 + (OUT_CL ? i / BN : i % rows), c = OUT_CL ? i % BN : i / rows;
      const int row = row_of(r), col = n0 + c;
      if (row < 0 || col >= a.M) continue;
      float v = 0.0f;
      if (a.split <= MAXS) {
#pragma unroll
        for (int q = 0; q < MAXS; q++)
          if (q < a.split) v += part[q][r * RLD + c];
      } else {
        for (int q = 0; q < a.split; q++) v += cluster.map_shared_rank(red, q)[r * RLD + c];
      }
      cl_store<OUT_CL>(a, nb, row, col, v);
    }
  }
  /* No CTA leaves while a partner may still read its shared memory: the
   * release arrival orders this thread's remote reads above before it, the
   * wait (acquire) the partners' before this CTA exits. A relaxed arrival
   * here measured 0.35-0.41 us faster per kernel (H200, 2026-11-27: no
   * GPU-scope MEMBAR waiting for the stores above), but the PTX ISA gives a
   * relaxed arrival no order against earlier reads (its own example puts
   * fence.acq_rel.cluster before it, which is that MEMBAR again): not used. */
  cluster.sync();
#else
  __trap(); /* the host offers split K only on sm_90 and later */
#endif
}

/* The window of a BD x BH x BW brick under the 3 x 3 x 3 kernel: (BD + 2) x (BH + 2) x (BW + 2) cells. */
__host__ __device__ constexpr int brick_window(int bd, int bh, int bw) { return (bd + 2) * (bh + 2) * (bw + 2); }

/* The most channel blocks a CTA of the split takes (shares differ by at most one). */
__host__ __device__ inline int ncbl_max(const cl_args &a) { return (a.ncb + a.split - 1) / a.split; }

/* Kernel arguments for p (layout in_cl) with packed weights w, bias b. */
inline void cl_fill(const nnk_conv &p, int in_cl, const __half *w, const float *b, int split, cl_args *a,
             const nnk_conv_fuse *f = NULL) {
  *a = cl_args{};
  if (f) a->f = *f;
  nnk_conv_args_common(p, w, b, a);
  for (int i = 0; i < 3; i++) a->stride[i] = p.stride[i];
  a->ncb = (p.C + CL_BK - 1) / CL_BK;
  a->kpad = in_cl ? a->taps * a->ncb * CL_BK : round_up(a->taps * p.C, CL_BK);
  a->ksteps = a->kpad / CL_BK;
  a->split = split;
}

/* The wgmma kernel (gpu_conv_wg.cu): on bricks, algos NNK_CL_WG_BASE and
 * up (j = algo - NNK_CL_WG_BASE, flat false); on flat tiles, algos
 * NNK_CL_WGF_BASE and up (j = algo - NNK_CL_WGF_BASE, flat true). */
int wg_algo_ok(const nnk_conv &p, int in_cl, int j, bool flat);
cudaError_t wg_launch(const cl_args &a, int j, bool flat, int out_cl, int batch, cudaStream_t s);
/* Whether wgmma algo j runs p with a first layer of cd dynamic channels
 * folded into its window (nnk_first; batch 1, shared memory). */
int wg_first_ok(const nnk_conv &p, int j, bool flat, int cd);
/* algo -> the wgmma kernel's j and whether it is a flat tile; false if algo is none of its. */
inline bool wg_algo_decode(int algo, int *j, bool *flat) {
  *flat = algo >= NNK_CL_WGF_BASE;
  *j = algo - (*flat ? NNK_CL_WGF_BASE : NNK_CL_WG_BASE);
  return (algo >= NNK_CL_WG_BASE && algo < NNK_CL_NARROW_BASE) ||
         (algo >= NNK_CL_WGF_BASE && algo < NNK_CL_ALL_ALGOS);
}
/* The split of wgmma algo j (cluster size). */
int wg_split(int j);
/* The wgmma kernel's weight order (where cl_brick_shape holds it follows
 * the channels-last packing in the same buffer, as many elements). */
void wg_pack(const nnk_conv &p, const float *w, __half *out);

/* The narrow brick kernel (gpu_conv_narrow.cu), algos NNK_CL_NARROW_BASE
 * and up; j = algo - NNK_CL_NARROW_BASE. Its weights (narrow_pack,
 * narrow_weight_elems halves) follow the wgmma kernel's in the same buffer
 * wherever narrow_shape holds. */
int narrow_shape(const nnk_conv &p, int in_cl);
int narrow_algo_ok(const nnk_conv &p, int in_cl, int j);
size_t narrow_weight_elems(const nnk_conv &p);
void narrow_pack(const nnk_conv &p, const float *w, __half *out);
cudaError_t narrow_launch(const cl_args &a, int j, int out_cl, int batch, cudaStream_t s);

}  // namespace nncl

#endif
