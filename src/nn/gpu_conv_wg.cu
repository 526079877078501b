/* The channels-last brick convolution on warpgroup MMAs (wgmma, sm_90a;
 * issue 12; the contract is the brick kernel's, gpu_kernels.cuh).
 *
 * Why. The mma.sync brick (gpu_conv_cl.cu) is latency-bound: each warp
 * loads every A and B fragment with ldmatrix before its MMAs, and at one or
 * two warps per scheduler the tensor pipe is busy 13-25% of the time (H100,
 * nn-brick-h100-2026-11-25.md). A wgmma reads both operands from shared
 * memory itself and runs asynchronously: the warpgroup issues a whole group
 * of k-steps back to back and waits once.
 *
 * Shape. A CTA owns PD planes of 8 x 8 output cells (one warpgroup, M = 64
 * rows, per plane) and BN output channels (wgmma N = BN). Per block of 32
 * input channels it stages the input window (PD + 2) x 10 x 10 cells once, as
 * four 8-channel planes: chunk q of cell c at ((block x 4 + q) x cells + c) x
 * 16 bytes. A wgmma's A is then a descriptor into that window: its 8 core
 * matrices (8 cells x 8 channels, rows 16 bytes apart) are the 8 rows of
 * the plane, 10 cells (160 bytes) apart, and a tap only moves the start
 * address; the next 8 channels are one chunk plane further. B (the
 * weights) is packed at engine create in core-matrix order (wg_pack:
 * [tap][block][k16 slice][n8 group][k half][8 rows][16 bytes]), so a k16
 * slice of the CTA's BN channels is one contiguous run: one bulk copy
 * (TMA) each, 18 per group of 9 k-steps, completing on the group buffer's
 * mbarrier; a ring of R groups in flight. Split K over channel blocks and
 * the epilogue are the brick kernel's (cl_finish).
 *
 * Measured (H100, bench/results/nn-wgmma-h100-2026-11-25.md): the shipped
 * models' 128 -> 128 layer at d = 13 in 11.4 us (mma.sync brick 17.5,
 * tile 19.3, cuDNN 20.2).
 *
 * Flat tiles (FLAT, algos NNK_CL_WGF_BASE and up). A brick rounds every
 * output plane up to 8 x 8 cells: a 10 x 10 plane (d = 9) computes 256
 * rows for 100 cells. For a "same" layer (3 x 3 x 3, stride 1, padding 1
 * on every side) the grid is instead flattened with row stride W + 1 and
 * plane stride (H + 1)(W + 1): the one padding column, row and plane
 * between neighbours serve as both's halo, and tap (dz, dy, dx) of every
 * output position o reads position o + (dz - 1) ps + (dy - 1) rs + dx - 1.
 * A CTA's M rows are PD x 64 consecutive positions (the pads among them
 * computed and dropped: 17% at d = 9 instead of 61%), its window the
 * positions from ps + rs + 1 before the first to as many after the last,
 * so a tap again only moves the A descriptor's start, and 8 consecutive
 * positions are one core matrix (128 bytes apart in M). */
#include "gpu_conv_cl.cuh"

namespace nncl {
namespace {

/* pd planes (warpgroups), bn output channels, a ring of r buffers of
 * WG_G k-steps of weights (all r issued before the PDL wait). */
struct wg_cfg {
  int pd, bn, r;
};
constexpr wg_cfg kWgCfg[NNK_CL_WG_CONFIGS] = {{1, 16, 3}, {1, 64, 3}, {1, 128, 2}, {2, 16, 3},
                                              {2, 64, 3}, {2, 128, 2}, {4, 64, 3},  {4, 128, 2}};
constexpr int kWgSplit[NNK_CL_WG_SPLITS] = {1, 2, 4};
constexpr int WG_PLANE = 8;     /* output cells per brick row and column */
constexpr int WG_HW = WG_PLANE + 2; /* window rows and columns */
constexpr int WG_G = 9;         /* k-steps per group: a third of a channel block's 27 taps */

/* Window cells of a brick of pd planes: (pd + 2) x 10 x 10. */
__host__ __device__ constexpr int wg_cells(int pd) { return (pd + 2) * WG_HW * WG_HW; }

/* A "same" layer's flattened grid (FLAT): row stride rs = W + 1, plane
 * stride ps = (H + 1) rs; a window reaches span = ps + rs + 1 positions
 * before its tile's first and after its last. */
struct wgf_geom {
  int rs, ps, span;
};
__host__ __device__ inline wgf_geom wgf_of(const cl_args &a) {
  wgf_geom g;
  g.rs = a.W + 1;
  g.ps = (a.H + 1) * g.rs;
  g.span = g.ps + g.rs + 1;
  return g;
}
/* n consecutive positions and span more on each side: a tile's window
 * (n = its positions) or its first-layer region (n = its window cells). */
__host__ __device__ inline int wgf_widen(int n, const wgf_geom &g) { return n + 2 * g.span; }
/* Window cells of a tile of pd x 64 positions. */
__host__ __device__ inline int wgf_cells(int pd, const cl_args &a) { return wgf_widen(pd * 64, wgf_of(a)); }
/* Positions up to and including the grid's last cell (the tiles cover them). */
__host__ __device__ inline int wgf_positions(const cl_args &a) {
  const wgf_geom g = wgf_of(a);
  return (a.D - 1) * g.ps + (a.H - 1) * g.rs + a.W;
}
/* Whether p is a "same" layer that the flat tiles run. */
inline bool wgf_shape(const nnk_conv &p) {
  for (int i = 0; i < 3; i++)
    if (p.pad0[i] != 1 || p.out3[i] != p.in3[i]) return false;
  return true;
}
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
constexpr int WG_TAPS = 27;
/* Position q of the flattened grid: its cell (z, y, x), or false on a
 * padding position (also q < 0 and q past the last plane). */
__device__ __forceinline__ bool wgf_cell(const cl_args &a, const wgf_geom &g, int q, int &z, int &y, int &x) {
  if (q < 0) return false;
  z = q / g.ps;
  const int r = q - z * g.ps;
  y = r / g.rs;
  x = r - y * g.rs;
  return z < a.D && y < a.H && x < a.W;
}
#endif

/* The wgmmas of one group of 9 taps of a channel block: A from the window
 * at descriptor da0 (the block's first tap of the group), tap (dy, dx) of
 * the group rs cells per dy and 1 per dx further, the next k16 slice two
 * chunk planes (2 wc cells) further; B from the group's buffer at
 * descriptor db0. A descriptor's low 14 bits are the address / 16, and no
 * sum leaves them. */
template <int BN>
__device__ __forceinline__ void wg_mmas9(float (&d)[BN / 2], uint64_t da0, uint64_t db0, int rs, int wc) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#pragma unroll
  for (int j = 0; j < WG_G; j++)
#pragma unroll
    for (int s = 0; s < CL_BK / 16; s++) {
      const uint64_t da = da0 + (uint64_t)((j / 3) * rs + j % 3 + s * 2 * wc);
      const uint64_t db = db0 + (uint64_t)((j * BN * CL_BK * 2 + s * BN * 32) >> 4);
      if constexpr (BN == 16) nnk_wgmma_n16(d, da, db);
      else if constexpr (BN == 64) nnk_wgmma_n64(d, da, db);
      else nnk_wgmma_n128(d, da, db);
    }
#endif
}
/* A brick's group: taps TG 9 .. TG 9 + 8 (plane TG of the window), every
 * offset a compile-time constant. */
template <int TG, int BN, int WCELLS>
__device__ __forceinline__ void wg_group_mmas(float (&d)[BN / 2], uint64_t da0, uint64_t db0) {
  wg_mmas9<BN>(d, da0 + (uint64_t)(TG * WG_HW * WG_HW), db0, WG_HW, WCELLS);
}

/* A folded first layer (a.f.first, nnk_first): shared memory after the
 * mbarriers holds its dynamic inputs around the window (a brick's (PD + 4)
 * x 12 x 12 cells, a flat tile's window plus span positions on each side,
 * per channel, FP32), per window cell a 27-bit mask of the taps that see a
 * nonzero input, and the dynamic channels' weights for the CTA's channel
 * blocks (FP32, [cd][27][blocks x 32], copied before the PDL wait).
 * The constant term b is read per window slot, in FP32 (H200, A/B in one
 * visit: 0.5-1.5 us faster per model than copying it into the window as
 * FP16 before the PDL wait and adding in place). */
constexpr int WG_FR = WG_HW + 2; /* rows and columns of the first layer's input region */
__host__ __device__ constexpr int wg_first_cells(int pd) { return (pd + 4) * WG_FR * WG_FR; }
/* A flat tile's region: its window and span more positions on each side. */
__host__ __device__ inline int wgf_first_cells(int pd, const cl_args &a) {
  return wgf_widen(wgf_cells(pd, a), wgf_of(a));
}
/* Byte offset of the weights in that region (after the inputs, rc cells,
 * and the masks, wc cells, of each dynamic channel), 16-aligned for their
 * float4 reads (a brick's rc + wc is a multiple of 4; a flat tile's need
 * not be). */
__host__ __device__ inline size_t wg_first_ws(int rc, int wc, int cd) {
  return (size_t)cd * (size_t)round_up(rc + wc, 4) * 4;
}
/* The region's bytes, with 16 for its alignment. */
__host__ __device__ inline size_t wg_first_bytes(int rc, int wc, int cd, int ncbl) {
  return 16 + wg_first_ws(rc, wc, cd) + (size_t)cd * 27 * ncbl * CL_BK * 4;
}
/* Elements of idx each thread of a brick loads before the PDL wait (constants). */
template <int PD> __host__ __device__ constexpr int wg_first_pre() {
  return (NNK_FIRST_MAX_CD * wg_first_cells(PD) + PD * 128 - 1) / (PD * 128);
}
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* Byte offset of that region: after the weight ring, the windows and the R mbarriers, 16-aligned. */
__device__ __forceinline__ size_t wg_first_off(const cl_args &a, int r, int step_bytes, int wcells) {
  return ((size_t)r * WG_G * step_bytes + (size_t)ncbl_max(a) * 4 * wcells * 16 + (size_t)r * 8 + 15) / 16 * 16;
}
/* Window cell c of the brick at (bz0, by0, bx0): its input coordinates, and whether they are in the grid. */
__device__ __forceinline__ bool wg_window_cell(const cl_args &a, int c, int bz0, int by0, int bx0, int &id, int &ih,
                                               int &iw) {
  id = bz0 - a.pad0[0] + c / (WG_HW * WG_HW);
  ih = by0 - a.pad0[1] + (c / WG_HW) % WG_HW;
  iw = bx0 - a.pad0[2] + c % WG_HW;
  return (unsigned)id < (unsigned)a.D && (unsigned)ih < (unsigned)a.H && (unsigned)iw < (unsigned)a.W;
}

/* Where a CTA's window and first-layer region lie: a brick of PD planes
 * at (bz0, by0, bx0). base(c): the region cell of window cell c's tap
 * (0, 0, 0); tap(t): tap t's cells from there; cell(): window cell c's
 * input coordinates and whether they are in the grid. */
template <int PD>
struct wg_brick_geo {
  int bz0, by0, bx0;
  __device__ int rc() const { return wg_first_cells(PD); }
  __device__ int wc() const { return wg_cells(PD); }
  __device__ int base(int c) const {
    return ((c / (WG_HW * WG_HW)) * WG_FR + (c / WG_HW) % WG_HW) * WG_FR + c % WG_HW;
  }
  __device__ int tap(int t) const { return ((t / 9) * WG_FR + (t / 3) % 3) * WG_FR + t % 3; }
  __device__ bool cell(const cl_args &a, int c, int &id, int &ih, int &iw) const {
    return wg_window_cell(a, c, bz0, by0, bx0, id, ih, iw);
  }
};
/* A flat tile whose window starts at position p0 (wcells cells): the
 * region starts span positions earlier, so base(c) = c. */
struct wg_flat_geo {
  wgf_geom g;
  int p0, wcells;
  __device__ int rc() const { return wgf_widen(wcells, g); }
  __device__ int wc() const { return wcells; }
  __device__ int base(int c) const { return c; }
  __device__ int tap(int t) const { return (t / 9) * g.ps + ((t / 3) % 3) * g.rs + t % 3; }
  __device__ bool cell(const cl_args &a, int c, int &id, int &ih, int &iw) const {
    return wgf_cell(a, g, p0 + c, id, ih, iw);
  }
};

/* The element of x that dynamic channel cd reads at grid cell (id, ih, iw), or -1. */
__device__ __forceinline__ int wg_first_idx(const cl_args &a, int cd, int id, int ih, int iw) {
  return a.f.first.idx[(size_t)cd * a.D * a.H * a.W + ((size_t)id * a.H + ih) * a.W + iw];
}
/* The first layer's region cell r of dynamic channel cd in a brick: its
 * element of x, or -1 (zero: outside the grid, or no dynamic source there). */
template <int PD>
__device__ __forceinline__ int wg_first_src(const cl_args &a, int i, int bz0, int by0, int bx0) {
  constexpr int RC = wg_first_cells(PD);
  const nnk_first &f = a.f.first;
  if (i >= f.cd * RC) return -1;
  const int cd = i / RC, r = i - cd * RC;
  const int id = bz0 - a.pad0[0] - 1 + r / (WG_FR * WG_FR), ih = by0 - a.pad0[1] - 1 + (r / WG_FR) % WG_FR,
            iw = bx0 - a.pad0[2] - 1 + r % WG_FR;
  if ((unsigned)id >= (unsigned)a.D || (unsigned)ih >= (unsigned)a.H || (unsigned)iw >= (unsigned)a.W) return -1;
  return wg_first_idx(a, cd, id, ih, iw);
}
/* The same in a flat tile's region (cells of wg_flat_geo::rc() per channel). */
__device__ __forceinline__ int wgf_first_src(const cl_args &a, const wg_flat_geo &geo, int i) {
  const int rc = geo.rc(), cd = i / rc;
  int id, ih, iw;
  return wgf_cell(a, geo.g, geo.p0 - geo.g.span + (i - cd * rc), id, ih, iw) ? wg_first_idx(a, cd, id, ih, iw) : -1;
}

/* The dynamic channels' weights of blocks cb_begin .. + ncbl into shared
 * memory ws (16-byte copies; constants, issued before the PDL wait). */
__device__ __forceinline__ void wg_first_weights(const cl_args &a, uint32_t ws_u, int cb_begin, int ncbl, int tid,
                                                 int threads) {
  const nnk_first &f = a.f.first;
  const int per_row = ncbl * CL_BK / 4; /* 16-byte chunks per (cd, tap) row */
  for (int i = tid; i < f.cd * 27 * per_row; i += threads) {
    const int row = i / per_row, k = i - row * per_row, ch = cb_begin * CL_BK + k * 4;
    const bool ok = ch < a.C;
    nnk_cp_async16(ws_u + (uint32_t)(i * 16), ok ? f.w + (size_t)row * f.ld + ch : f.w, ok ? 16 : 0);
  }
}

/* N elements of the region (x's elements src[k], or -1 for zero) as the
 * first layer reads them: every load issued before any is used (the
 * element type is switched on once, outside the loads), so a thread waits
 * for one round trip, not N (H200: -0.7 to -0.9 us per folded layer). Plain
 * loads, not __ldg: x may be written by the kernel before this one, which
 * can still run until nnk_pdl_wait. */
template <int N>
__device__ __forceinline__ void wg_first_xn(const nnk_first &f, const int (&src)[N], float (&v)[N]) {
  if (f.x_dt == CUDAQ_NN_INT32) { /* detection events: the shipped models' input */
    int32_t r[N];
#pragma unroll
    for (int k = 0; k < N; k++) r[k] = src[k] >= 0 ? static_cast<const int32_t *>(f.x)[src[k]] : 0;
#pragma unroll
    for (int k = 0; k < N; k++) v[k] = (float)r[k];
  } else if (f.x_dt == CUDAQ_NN_FLOAT) {
#pragma unroll
    for (int k = 0; k < N; k++) v[k] = src[k] >= 0 ? static_cast<const float *>(f.x)[src[k]] : 0.0f;
  } else {
#pragma unroll
    for (int k = 0; k < N; k++) v[k] = src[k] >= 0 ? ldf(f.x, f.x_dt, src[k]) : 0.0f;
  }
  if (f.half_x) {
#pragma unroll
    for (int k = 0; k < N; k++) v[k] = __half2float(__float2half(v[k]));
  }
}

/* After the region is staged (xs, by this thread) and the weights' copies
 * issued: the masks, then each window slot of the CTA's blocks: act(b +
 * sum_taps w x) as FP16, zero outside the grid or past the channels (the
 * next layer's padding). */
template <int THREADS, class Geo>
__device__ __forceinline__ void wg_first_window(const cl_args &a, unsigned char *fsm, unsigned char *win,
                                                const Geo &geo, int cb_begin, int ncbl, int tid) {
  const nnk_first &f = a.f.first;
  const int RC = geo.rc(), WCELLS = geo.wc();
  float *xs = reinterpret_cast<float *>(fsm);                   /* [cd][RC] */
  uint32_t *msk = reinterpret_cast<uint32_t *>(xs + f.cd * RC); /* [cd][WCELLS] */
  const float *ws = reinterpret_cast<const float *>(fsm + wg_first_ws(RC, WCELLS, f.cd)); /* [cd][27][ncbl x 32] */
  __syncthreads(); /* the region is staged before the masks read it */
  for (int i = tid; i < f.cd * WCELLS; i += THREADS) {
    const int cd = i / WCELLS, c = i - cd * WCELLS;
    const float *xb = xs + cd * RC + geo.base(c);
    uint32_t m = 0;
#pragma unroll
    for (int t = 0; t < 27; t++) m |= (xb[geo.tap(t)] != 0.0f ? 1u : 0u) << t;
    msk[i] = m; /* NaN counts as nonzero */
  }
  nnk_cp_async_wait<0>(); /* this thread's copies of the weights */
  __syncthreads(); /* the masks, and everyone's copies, before the slots are computed */
  const int row = ncbl * CL_BK;
  for (int i = tid; i < ncbl * 4 * WCELLS; i += THREADS) {
    const int q = i & 3, c = (i >> 2) % WCELLS, cbl = (i >> 2) / WCELLS;
    const int chl = cbl * CL_BK + q * 8; /* channel within the CTA's blocks */
    uint4 *slot = reinterpret_cast<uint4 *>(win + ((size_t)(cbl * 4 + q) * WCELLS + c) * 16);
    int id, ih, iw;
    if (!geo.cell(a, c, id, ih, iw) || cb_begin * CL_BK + chl >= a.C) {
      *slot = make_uint4(0u, 0u, 0u, 0u);
      continue;
    }
    const float4 *bp =
        reinterpret_cast<const float4 *>(f.b + (((size_t)id * a.H + ih) * a.W + iw) * f.ld + cb_begin * CL_BK + chl);
    const float4 b0 = __ldg(bp), b1 = __ldg(bp + 1);
    float v[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
    for (int cd = 0; cd < f.cd; cd++) {
      const float *xb = xs + cd * RC + geo.base(c);
      for (uint32_t m = msk[cd * WCELLS + c]; m; m &= m - 1) {
        const int t = __ffs((int)m) - 1;
        const float xv = xb[geo.tap(t)];
        const float4 *wp = reinterpret_cast<const float4 *>(ws + (cd * 27 + t) * row + chl);
        const float4 w0 = wp[0], w1 = wp[1];
        v[0] += xv * w0.x, v[1] += xv * w0.y, v[2] += xv * w0.z, v[3] += xv * w0.w;
        v[4] += xv * w1.x, v[5] += xv * w1.y, v[6] += xv * w1.z, v[7] += xv * w1.w;
      }
    }
    uint32_t h[4];
#pragma unroll
    for (int k = 0; k < 4; k++) {
      float lo = v[2 * k], hi = v[2 * k + 1];
      if (f.relu) lo = nnk_relu_nan(lo), hi = nnk_relu_nan(hi);
      const __half2 p2 = __floats2half2_rn(lo, hi);
      h[k] = *reinterpret_cast<const uint32_t *>(&p2);
    }
    *slot = make_uint4(h[0], h[1], h[2], h[3]);
  }
}
#endif

template <int PD, int BN, int R, bool OUT_CL, bool FLAT>
__global__ void __launch_bounds__(PD * 128) k_conv_wg(cl_args a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int BM = PD * 64, THREADS = PD * 128, G = WG_G, HW = WG_HW;
  constexpr int STEP_B = BN * CL_BK * 2; /* bytes of B per k-step */
  /* Window cells: a brick's (a constant) or a flat tile's (the grid's). */
  const wgf_geom fg = wgf_of(a);
  const int WCELLS = FLAT ? wgf_cells(PD, a) : wg_cells(PD);
  extern __shared__ __align__(16) unsigned char cl_smem[];
  const uint32_t bs_u = nnk_smem_u32(cl_smem), win_u = bs_u + R * G * STEP_B;
  const uint32_t bar_u = win_u + (uint32_t)(ncbl_max(a) * 4 * WCELLS * 16); /* R mbarriers, one per B buffer */

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp >> 2;
  const int OD = a.P / (a.OH * a.OW);
  const int nbx = (a.OW + WG_PLANE - 1) / WG_PLANE, nby = (a.OH + WG_PLANE - 1) / WG_PLANE;
  /* A brick's first output cell, or (FLAT) the tile's first position o0 and its window's first, o0 - span. */
  const int bx0 = FLAT ? 0 : (int)(blockIdx.x % (unsigned)nbx) * WG_PLANE;
  const int by0 = FLAT ? 0 : (int)(blockIdx.x / (unsigned)nbx % (unsigned)nby) * WG_PLANE;
  const int bz0 = FLAT ? 0 : (int)(blockIdx.x / (unsigned)(nbx * nby)) * PD;
  const int o0 = FLAT ? (int)blockIdx.x * BM : 0, p0 = o0 - fg.span;
  const int n0 = blockIdx.y * BN;
  const int rank = (int)(blockIdx.z % (unsigned)a.split), nb = (int)(blockIdx.z / (unsigned)a.split);
  const int cb_begin = a.ncb * rank / a.split, ncbl = a.ncb * (rank + 1) / a.split - cb_begin;
  const int ngroups = ncbl * (WG_TAPS / G); /* group g: channel block g / 3, taps (g % 3) 9 .. + 8 */

  /* The weights come in the core-matrix order of wg_pack (a.w): a step's
   * k16 slice for output channels n0 .. n0 + BN is one contiguous run of
   * BN x 32 bytes, moved by one bulk copy. Warp 0 issues a group's 18
   * copies on buffer buf's mbarrier, one per lane (lane 0 first arrives
   * with the group's bytes): a single thread issuing all of them held up
   * its warpgroup's wgmmas, which need all four warps. */
  const size_t slice = (size_t)round_up(a.M, 128) * 16; /* halves per (tap, block, k16 slice) */
  const __half *wsrc = a.w + (size_t)n0 * 16;
  static_assert(WG_G * (CL_BK / 16) <= 32, "a group's bulk copies are one per lane of a warp");
  auto issue_group = [&](int g, int buf) { /* by all of warp 0 */
    const int cbl = g / 3, t0 = (g - cbl * 3) * G;
    const uint32_t bar = bar_u + (uint32_t)(buf * 8);
    /* Release side: the copies' complete_tx on bar ends the phase that the
     * loop's nnk_mbar_wait (acquire) waits for. */
    if (lane == 0) nnk_mbar_arrive_expect_tx(bar, G * STEP_B);
    __syncwarp();
    if (lane < G * (CL_BK / 16)) {
      const int j = lane / (CL_BK / 16), s = lane % (CL_BK / 16);
      nnk_bulk_g2s(bs_u + (uint32_t)((buf * G + j) * STEP_B + s * BN * 32),
                   wsrc + (((size_t)(t0 + j) * a.ncb + cb_begin + cbl) * 2 + s) * slice, BN * 32, bar);
    }
  };

  float acc[1][BN / 8][4];
  nnk_acc_zero(acc);
  float(&d)[BN / 2] = reinterpret_cast<float(&)[BN / 2]>(acc);
  /* Descriptors: A (K-major, no swizzle) in the window, the next 8
   * channels a chunk plane (WCELLS x 16 bytes) further. A brick's
   * warpgroup takes a plane: core matrices of 8 cells (a row of the plane),
   * the next row HW cells further. A flat tile's warpgroup takes 64
   * consecutive positions: 8 per core matrix, the next 8 right after.
   * B: [n / 8][k half] core matrices, 128 bytes apart in K, 256 in N. */
  const uint64_t da_plane = FLAT ? nnk_wg_desc(win_u + (uint32_t)(wg * 64 * 16), WCELLS * 16, 128)
                                 : nnk_wg_desc(win_u + (uint32_t)(wg * HW * HW * 16), WCELLS * 16, HW * 16);
  const uint64_t db_base = nnk_wg_desc(bs_u, 128, 256);

  nnk_pdl_launch_dependents();
  if (warp == 0) {
    if (lane == 0) {
#pragma unroll
      for (int b = 0; b < R; b++) nnk_mbar_init(bar_u + (uint32_t)(b * 8), 1);
      nnk_mbar_init_fence();
    }
    __syncwarp(); /* the mbarriers are initialised before the warp's copies name them */
    /* The first R groups of weights (constants) before the PDL wait. */
    for (int g = 0; g < R && g < ngroups; g++) issue_group(g, g);
  }
  const bool first = a.f.first.b != nullptr;
  int pre[FLAT ? 1 : wg_first_pre<PD>()];
  const size_t first_off = wg_first_off(a, R, STEP_B, WCELLS);
  const wg_brick_geo<PD> bgeo{bz0, by0, bx0};
  const wg_flat_geo fgeo{fg, p0, WCELLS};
  if (first) { /* constants: the weights, the region's source indices */
    const int rc = FLAT ? fgeo.rc() : bgeo.rc();
    wg_first_weights(a, bs_u + (uint32_t)(first_off + wg_first_ws(rc, WCELLS, a.f.first.cd)), cb_begin, ncbl, tid,
                     THREADS);
    nnk_cp_async_commit();
    if constexpr (FLAT) {
      /* A flat region's size is the grid's: each thread parks the indices
       * of its elements in their own slots (read back by the same thread
       * after the wait). */
      int *xi = reinterpret_cast<int *>(cl_smem + first_off);
      for (int i = tid; i < a.f.first.cd * rc; i += THREADS) xi[i] = wgf_first_src(a, fgeo, i);
    } else {
#pragma unroll
      for (int k = 0; k < wg_first_pre<PD>(); k++) pre[k] = wg_first_src<PD>(a, tid + k * THREADS, bz0, by0, bx0);
    }
  }
  __syncthreads(); /* the mbarriers are initialised before anyone waits on them */
  nnk_pdl_wait();
  if (first) {
    unsigned char *fsm = cl_smem + first_off, *win = cl_smem + R * G * STEP_B;
    float *xs = reinterpret_cast<float *>(fsm);
    if constexpr (FLAT) {
      /* Four elements a pass: their indices (this thread's own slots) read
       * before any value is written over them. */
      const int n = a.f.first.cd * fgeo.rc();
      const int *xi = reinterpret_cast<const int *>(xs);
      for (int i0 = tid; i0 < n; i0 += 4 * THREADS) {
        int src[4];
        float v[4];
#pragma unroll
        for (int u = 0; u < 4; u++) src[u] = i0 + u * THREADS < n ? xi[i0 + u * THREADS] : -1;
        wg_first_xn(a.f.first, src, v);
#pragma unroll
        for (int u = 0; u < 4; u++)
          if (i0 + u * THREADS < n) xs[i0 + u * THREADS] = v[u];
      }
      wg_first_window<THREADS>(a, fsm, win, fgeo, cb_begin, ncbl, tid);
    } else {
      float v[wg_first_pre<PD>()]; /* pre[k] is -1 past the region */
      wg_first_xn(a.f.first, pre, v);
#pragma unroll
      for (int k = 0; k < wg_first_pre<PD>(); k++)
        if (tid + k * THREADS < a.f.first.cd * wg_first_cells(PD)) xs[tid + k * THREADS] = v[k];
      wg_first_window<THREADS>(a, fsm, win, bgeo, cb_begin, ncbl, tid);
    }
  } else {
    /* The window: thread tid copies quarter q = tid % 4 of its cells (tid /
     * 4 + k THREADS / 4) in every channel block. */
    const int q = tid & 3;
    for (int cell = tid >> 2; cell < WCELLS; cell += THREADS / 4) {
      int id, ih, iw;
      const bool in = FLAT ? fgeo.cell(a, cell, id, ih, iw) : bgeo.cell(a, cell, id, ih, iw);
      const __half *src =
          a.x + (in ? ((size_t)nb * a.Pin + ((size_t)id * a.H + ih) * a.W + iw) * a.C + cb_begin * CL_BK + q * 8 : 0);
      const uint32_t dst = win_u + (uint32_t)((q * WCELLS + cell) * 16);
      for (int cbl = 0; cbl < ncbl; cbl++) {
        const bool ok = in && (cb_begin + cbl) * CL_BK + q * 8 < a.C;
        nnk_cp_async16(dst + (uint32_t)(cbl * 4 * WCELLS * 16), ok ? src + cbl * CL_BK : a.x, ok ? 16 : 0);
      }
    }
    nnk_cp_async_commit();
  }

  /* The window: this thread's copies (or, folded, its stores) landed and are
   * visible to the async proxy the wgmmas read through; the barrier
   * publishes everyone's. */
  nnk_cp_async_wait<0>();
  nnk_fence_proxy_async();
  __syncthreads();

  for (int g = 0; g < ngroups; g++) {
    /* Group g + R - 1 goes into the buffer of group g - 1, whose wgmmas
     * every warpgroup waited for before the barrier that ended the
     * previous iteration. */
    if (warp == 0 && g > 0 && g + R - 1 < ngroups) issue_group(g + R - 1, (g + R - 1) % R);
    /* Acquire: group g's bulk copies (the (g / R)-th phase of its buffer's
     * mbarrier) have completed; pairs with their complete_tx. */
    nnk_mbar_wait(bar_u + (uint32_t)((g % R) * 8), (uint32_t)((g / R) & 1));
    const int cbl = g / 3, tg = g - cbl * 3;
    const uint64_t da0 = da_plane + (uint64_t)(cbl * 4 * WCELLS);
    const uint64_t db0 = db_base + (uint64_t)(((g % R) * G * STEP_B) >> 4);
    nnk_wg_fence();
    if constexpr (FLAT) {
      wg_mmas9<BN>(d, da0 + (uint64_t)(tg * fg.ps), db0, fg.rs, WCELLS);
    } else {
      constexpr int WC = wg_cells(PD);
      if (tg == 0) wg_group_mmas<0, BN, WC>(d, da0, db0);
      else if (tg == 1) wg_group_mmas<1, BN, WC>(d, da0, db0);
      else wg_group_mmas<2, BN, WC>(d, da0, db0);
    }
    nnk_wg_commit();
    nnk_wg_wait<0>();
    nnk_wg_pin(d);
    __syncthreads(); /* every warpgroup is done with buffer g % R before group g + R is copied into it */
  }

  /* Every phase has completed (each group was waited for): the split-K
   * sum may reuse the barriers' bytes once they are invalidated (cl_finish
   * has a barrier before it writes shared memory). */
  if (tid == 0)
#pragma unroll
    for (int b = 0; b < R; b++) nnk_mbar_inval(bar_u + (uint32_t)(b * 8));
  /* Row r of the tile: a brick's plane r / 64, row (r / 8) % 8, column r %
   * 8; a flat tile's position o0 + r. */
  auto out_cell = [&](int r) {
    if constexpr (FLAT) {
      int z, y, x;
      return wgf_cell(a, fg, o0 + r, z, y, x) ? (z * a.OH + y) * a.OW + x : -1;
    } else {
      const int z = bz0 + (r >> 6), y = by0 + ((r >> 3) & 7), x = bx0 + (r & 7);
      return z < OD && y < a.OH && x < a.OW ? (z * a.OH + y) * a.OW + x : -1;
    }
  };
  /* wgmma's accumulators: warp w % 4 of the warpgroup holds its rows
   * 16 (w % 4) .. + 15 in the m16n8 fragment layout. */
  const int fr = wg * 64 + (warp & 3) * 16 + (lane >> 2), fc = 2 * (lane & 3);
  cl_finish<BM, BN, THREADS, OUT_CL, 4>(a, acc, fr, fc, rank, nb, n0, out_cell);
#else
  __trap(); /* offered only where the sm_90a code exists (wg_algo_ok) */
#endif
}

/* Dynamic shared memory of configuration cfg at split (flat tiles or bricks). */
size_t wg_smem_bytes(int cfg, int split, const cl_args &a, bool flat) {
  const wg_cfg &c = kWgCfg[cfg];
  const size_t ncbl = (size_t)(a.ncb + split - 1) / split;
  const int wc = flat ? wgf_cells(c.pd, a) : wg_cells(c.pd);
  const int rc = flat ? wgf_first_cells(c.pd, a) : wg_first_cells(c.pd);
  /* B buffers, windows, mbarriers (then a folded first layer's region and masks) */
  const size_t pipe = (size_t)c.r * WG_G * c.bn * CL_BK * 2 + ncbl * 4 * (size_t)wc * 16 + (size_t)c.r * 8 +
                      (a.f.first.b ? wg_first_bytes(rc, wc, a.f.first.cd, (int)ncbl) : 0);
  const size_t red = split > 1 ? (size_t)c.pd * 64 * (c.bn + 4) * 4 : 0;
  return pipe > red ? pipe : red;
}

template <int PD, int BN, int R, bool OUT_CL, bool FLAT>
cudaError_t wg_launch_t(const cl_args &a, size_t smem, int batch, cudaStream_t s) {
  auto kern = k_conv_wg<PD, BN, R, OUT_CL, FLAT>;
  static bool attr_set = false;
  if (const cudaError_t e = cl_kernel_attrs(kern, attr_set)) return e;
  const unsigned tiles =
      FLAT ? (unsigned)((wgf_positions(a) + PD * 64 - 1) / (PD * 64))
           : (unsigned)(((a.P / (a.OH * a.OW) + PD - 1) / PD) * ((a.OH + WG_PLANE - 1) / WG_PLANE) *
                        ((a.OW + WG_PLANE - 1) / WG_PLANE));
  const dim3 grid(tiles, (unsigned)((a.M + BN - 1) / BN), (unsigned)(batch * a.split));
  return nnk_launch_ex(kern, grid, dim3(PD * 128), smem, s, (unsigned)a.split, a);
}

template <bool OUT_CL, bool FLAT>
cudaError_t wg_launch_o(const cl_args &a, size_t smem, int cfg, int batch, cudaStream_t s) {
  switch (cfg) { /* kWgCfg */
    case 0: return wg_launch_t<1, 16, 3, OUT_CL, FLAT>(a, smem, batch, s);
    case 1: return wg_launch_t<1, 64, 3, OUT_CL, FLAT>(a, smem, batch, s);
    case 2: return wg_launch_t<1, 128, 2, OUT_CL, FLAT>(a, smem, batch, s);
    case 3: return wg_launch_t<2, 16, 3, OUT_CL, FLAT>(a, smem, batch, s);
    case 4: return wg_launch_t<2, 64, 3, OUT_CL, FLAT>(a, smem, batch, s);
    case 5: return wg_launch_t<2, 128, 2, OUT_CL, FLAT>(a, smem, batch, s);
    case 6: return wg_launch_t<4, 64, 3, OUT_CL, FLAT>(a, smem, batch, s);
    default: return wg_launch_t<4, 128, 2, OUT_CL, FLAT>(a, smem, batch, s);
  }
}

/* Whether this build has the sm_90a code (CMake: CUDAQ_NN_HAVE_SM90A) and
 * the device runs it (compute capability 9.0 exactly). */
int wg_device_ok() {
#if defined(CUDAQ_NN_HAVE_SM90A)
  return device_cc() == 90;
#else
  return 0;
#endif
}

}  // namespace

int wg_split(int j) { return kWgSplit[j / NNK_CL_WG_CONFIGS % NNK_CL_WG_SPLITS]; }

int wg_algo_ok(const nnk_conv &p, int in_cl, int j, bool flat) {
  /* CUDAQ_NN_CL_NO_WG=1: neither offered; CUDAQ_NN_CL_NO_FLAT=1: no flat
   * tiles (A/B against the other kernels). */
  static const int no_wg = cl_env_on("CUDAQ_NN_CL_NO_WG"), no_flat = cl_env_on("CUDAQ_NN_CL_NO_FLAT");
  if (no_wg || (flat && (no_flat || !wgf_shape(p))) || j < 0 || j >= NNK_CL_WG_CONFIGS * NNK_CL_WG_SPLITS ||
      !cl_brick_shape(p, in_cl) || !wg_device_ok())
    return 0;
  const int cfg = j % NNK_CL_WG_CONFIGS, split = wg_split(j);
  if (kWgCfg[cfg].bn > cl_width_max(p)) return 0;
  cl_args a;
  cl_fill(p, in_cl, NULL, NULL, split, &a);
  if (split > 1 && (!device_has_clusters() || split > a.ncb)) return 0;
  return wg_smem_bytes(cfg, split, a, flat) <= cl_smem_max();
}

int wg_first_ok(const nnk_conv &p, int j, bool flat, int cd) {
  if (!wg_algo_ok(p, 1, j, flat) || cd < 1 || cd > NNK_FIRST_MAX_CD || p.N != 1) return 0;
  const int cfg = j % NNK_CL_WG_CONFIGS, split = wg_split(j);
  cl_args a;
  nnk_conv_fuse f = {};
  f.first.b = reinterpret_cast<const float *>(16); /* only its presence counts here */
  f.first.cd = cd;
  cl_fill(p, 1, NULL, NULL, split, &a, &f);
  return wg_smem_bytes(cfg, split, a, flat) <= cl_smem_max();
}

cudaError_t wg_launch(const cl_args &a, int j, bool flat, int out_cl, int batch, cudaStream_t s) {
  const int cfg = j % NNK_CL_WG_CONFIGS;
  const size_t smem = wg_smem_bytes(cfg, a.split, a, flat);
  cl_args b = a; /* the weights in wg_pack's order (nnk_cl_pack_weights) */
  b.w = a.w + cl_pack_off(a.M, a.kpad, CL_PACK_WG);
  if (flat)
    return out_cl ? wg_launch_o<true, true>(b, smem, cfg, batch, s) : wg_launch_o<false, true>(b, smem, cfg, batch, s);
  return out_cl ? wg_launch_o<true, false>(b, smem, cfg, batch, s) : wg_launch_o<false, false>(b, smem, cfg, batch, s);
}

void wg_pack(const nnk_conv &p, const float *w, __half *out) {
  /* [tap][channel block][k16 slice][n / 8][k half][n % 8][8 channels]: the
   * wgmma's core matrices (8 output channels x 8 input channels, 128
   * bytes), contiguous over output channels within a slice. */
  const int npad = round_up(p.M, 128), ncb = (p.C + CL_BK - 1) / CL_BK;
  const size_t n = (size_t)27 * ncb * 2 * npad * 16;
  for (size_t i = 0; i < n; i++) out[i] = __float2half(0.0f);
  for (int m = 0; m < p.M; m++)
    for (int c = 0; c < p.C; c++)
      for (int t = 0; t < 27; t++) {
        const int cb = c / CL_BK, kk = c % CL_BK, sl = kk / 16, h = (kk % 16) / 8, e = kk % 8;
        const size_t i = ((((size_t)(t * ncb + cb) * 2 + sl) * (npad / 8) + m / 8) * 2 + h) * 64 + (m % 8) * 8 + e;
        out[i] = __float2half(w[((size_t)m * p.C + c) * 27 + t]);
      }
}

}  // namespace nncl
