/* The stack kernel's device code (gpu_stack.cu says what it does and how),
 * shared by k_stack and the device program (gpu_devprog.cu). */
#ifndef CUDAQ_NN_GPU_STACK_CUH
#define CUDAQ_NN_GPU_STACK_CUH

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include "gpu_kernels.cuh"
#include "gpu_mma.cuh"

namespace {

namespace cg = cooperative_groups;

constexpr int ST_THREADS = 256;
constexpr int ST_ROWS = 64;     /* cells per brick */
constexpr int ST_WARPS = ST_THREADS / 32;
constexpr int ST_NQ = 2;        /* n16 pairs per item at most: bn <= 32 */
constexpr int ST_UNROLL = 2;    /* k16 steps whose fragments are loaded together */
constexpr int ST_RED_LD = 16 * ST_NQ + 4; /* partial-tile row stride in floats: float2 stores bank-conflict-free */
constexpr int ST_MAX_C = 1024;     /* input channels of a layer (its bias slice lives in shared memory) */
constexpr int ST_MAX_STEPS = 1024; /* k16 steps of an item (their window offsets live in shared memory) */
constexpr int ST_MAX_WIN = 1024;   /* cells of an item's input window (their positions live in shared memory) */
constexpr size_t ST_MAX_SMEM = 227 * 1024;
/* red, bias slice, step, tap and row tables */
constexpr size_t ST_FIXED_SMEM =
    (size_t)ST_WARPS * ST_ROWS * ST_RED_LD * 4 + ST_MAX_C * 4 + (ST_MAX_STEPS + 32 + 2 * ST_ROWS + ST_MAX_WIN) * 4;

__device__ __forceinline__ void add2(float *p, float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float2 *>(p), make_float2(a, b));
#else
  atomicAdd(p, a);
  atomicAdd(p + 1, b);
#endif
}

/* Zeroes n floats (n % 4 == 0, 16-byte aligned) with the whole grid. */
__device__ void grid_zero(float *p, size_t n) {
  float4 *q = reinterpret_cast<float4 *>(p);
  const float4 z = make_float4(0.f, 0.f, 0.f, 0.f);
  for (size_t i = (size_t)blockIdx.x * ST_THREADS + threadIdx.x; i < n / 4; i += (size_t)gridDim.x * ST_THREADS)
    q[i] = z;
}

__device__ __forceinline__ float st_act(float v, const float *b, int c, int relu) {
  v += b ? b[c] : 0.0f;
  return relu ? nnk_relu_nan(v) : v;
}

/* Brick b -> batch item and origin (output cell coordinates). */
__device__ __forceinline__ void brick_origin(const nnk_stack &s, int b, int &nb, int &o0, int &o1, int &o2) {
  const int per = s.nbk[0] * s.nbk[1] * s.nbk[2];
  nb = b / per;
  b -= nb * per;
  o0 = b / (s.nbk[1] * s.nbk[2]) * s.bk[0];
  o1 = (b / s.nbk[2]) % s.nbk[1] * s.bk[1];
  o2 = b % s.nbk[2] * s.bk[2];
}

/* Block 0's cycle stamps when s.prof is set (CUDAQ_NN_STACK_PROF): where a
 * run's time goes, printed by cudaq_nn_gpu_describe. */
__device__ __forceinline__ void prof(const nnk_stack &s, int at) {
  if (s.prof && blockIdx.x == 0 && threadIdx.x == 0) s.prof[at] = clock64();
}

/* The input window of one item: [8-channel group][window cell][8] FP16, zero
 * outside the volume and past C. A thread takes a window cell (its
 * position from wpos: no division here) and WU channel groups of it at a
 * time, all loads of a batch in flight before any is converted. */
template <int WU>
__device__ __forceinline__ void load_window(const nnk_stack &s, const nnk_stack_layer &ly, int l, const float *prev,
                                            int pmst, const float *bias_s, int prelu, __half *slab, const int *wpos,
                                            int g8, int S, int nb, int o0, int o1, int o2, int c0) {
  const int P = s.D * s.H * s.W;
  for (int cell = threadIdx.x; cell < S; cell += ST_THREADS) {
    const int wp = wpos[cell];
    const int gd = o0 + (wp & 1023) - ly.pad0[0], gh = o1 + ((wp >> 10) & 1023) - ly.pad0[1],
              gw = o2 + (wp >> 20) - ly.pad0[2];
    const bool in = (unsigned)gd < (unsigned)s.D && (unsigned)gh < (unsigned)s.H && (unsigned)gw < (unsigned)s.W;
    const size_t at = in ? ((size_t)gd * s.H + gh) * s.W + gw : 0;
    for (int g0 = 0; g0 < g8; g0 += WU) {
      float v[WU][8];
#pragma unroll
      for (int u = 0; u < WU; u++) {
        const int cb = c0 + (g0 + u) * 8;
        if (l == 0) { /* NCDHW FP16 */
#pragma unroll
          for (int e = 0; e < 8; e++)
            v[u][e] = in && g0 + u < g8 && cb + e < ly.C ? __half2float(s.x[((size_t)nb * ly.C + cb + e) * P + at]) : 0.0f;
        } else if (in && g0 + u < g8) { /* the previous layer's FP32 sums, NDHWC */
          const float4 *q = reinterpret_cast<const float4 *>(prev + ((size_t)nb * P + at) * pmst + cb);
          const float4 x0 = q[0], x1 = q[1];
          v[u][0] = x0.x, v[u][1] = x0.y, v[u][2] = x0.z, v[u][3] = x0.w;
          v[u][4] = x1.x, v[u][5] = x1.y, v[u][6] = x1.z, v[u][7] = x1.w;
        }
      }
#pragma unroll
      for (int u = 0; u < WU; u++) {
        const int g = g0 + u;
        if (g >= g8) break;
        __half2 hv[4];
#pragma unroll
        for (int e = 0; e < 8; e += 2) {
          float a = v[u][e], b = v[u][e + 1];
          if (l != 0) { /* bias + activation of the previous layer; zero outside the volume and past C */
            a = in && c0 + g * 8 + e < ly.C ? st_act(a, bias_s, g * 8 + e, prelu) : 0.0f;
            b = in && c0 + g * 8 + e + 1 < ly.C ? st_act(b, bias_s, g * 8 + e + 1, prelu) : 0.0f;
          }
          hv[e / 2] = __floats2half2_rn(a, b);
        }
        *reinterpret_cast<uint4 *>(slab + ((size_t)g * S + cell) * 8) = *reinterpret_cast<uint4 *>(hv);
      }
    }
  }
}

/* The CTA's contiguous share [*i0, *i1) of a layer's work items. */
__device__ __forceinline__ void item_range(const nnk_stack_layer &ly, int *i0, int *i1) {
  *i0 = (int)((long long)blockIdx.x * ly.items / gridDim.x);
  *i1 = (int)((long long)(blockIdx.x + 1) * ly.items / gridDim.x);
}

/* Work group grp (items grp * n_bricks ...): its first output channel n0
 * (column block) and first input channel c0 (K slice). */
__device__ __forceinline__ void group_origin(const nnk_stack_layer &ly, int grp, int *n0, int *c0) {
  const int nblk = grp / ly.ks;
  *n0 = nblk * ly.bn;
  *c0 = (grp - nblk * ly.ks) * ly.cs;
}

/* Layer l's weight slice of group grp ([chunk][tap][k half][bn][8] from the
 * packed [chunk][tap][k half][mst][8]) into wsm through cp.async (one commit
 * group; the caller waits), and the slice's bias of layer l - 1 (applied by
 * this layer's window load) into bias_s. The caller has made both free. */
__device__ void load_weights(const nnk_stack &s, int l, int grp, __half *wsm, float *bias_s) {
  const nnk_stack_layer &ly = s.layer[l];
  const int taps = ly.k[0] * ly.k[1] * ly.k[2], g8 = ly.cs / 8;
  int n0, c0;
  group_origin(ly, grp, &n0, &c0);
  const int units = g8 * taps * ly.bn;
  for (int j = threadIdx.x; j < units; j += ST_THREADS) {
    const int n = j % ly.bn, rest = j / ly.bn, h = rest & 1, t = (rest >> 1) % taps, c = (rest >> 1) / taps;
    nnk_cp_async16(wsm + (size_t)j * 8, ly.w + ((((size_t)(c0 / 16 + c) * taps + t) * 2 + h) * ly.mst + n0 + n) * 8);
  }
  nnk_cp_async_commit();
  const float *pb = l ? s.layer[l - 1].b : NULL;
  if (pb)
    for (int c = threadIdx.x; c < ly.cs; c += ST_THREADS) bias_s[c] = c0 + c < ly.C ? pb[c0 + c] : 0.0f;
}

/* The whole stack, run by every thread of a cooperative grid of blocks of
 * ST_THREADS threads (any number of blocks) with the plan's shared memory
 * (nnk_stack_plan's *smem bytes, 16-byte aligned) at st_smem: the body of
 * k_stack and of the device program's stack step (gpu_devprog.cu). */
__device__ __forceinline__ void stack_run(const nnk_stack &s, unsigned char *st_smem) {
  float *red = reinterpret_cast<float *>(st_smem + s.fixed_off);
  float *bias_s = red + ST_WARPS * ST_ROWS * ST_RED_LD;
  int *aoff = reinterpret_cast<int *>(bias_s + ST_MAX_C);
  int *tapoff = aoff + ST_MAX_STEPS;
  int *rowbase = tapoff + 32;
  int *rowpos = rowbase + ST_ROWS; /* brick row -> rd | rh << 10 | rw << 20 */
  int *wpos = rowpos + ST_ROWS;    /* window cell -> zd | zh << 10 | zw << 20 */
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int P = s.D * s.H * s.W;
  int held_l = -1, held_g = -1; /* the layer and group whose weight slice is in shared memory */

  prof(s, 0);
  nnk_pdl_wait(); /* layer 0's input may come from the kernel before (no-op without PDL) */
  for (int l = 0; l < s.L; l++) {
    const nnk_stack_layer &ly = s.layer[l];
    if (l + 1 < s.L && s.layer[l + 1].ks > 1)
      grid_zero(s.acc[s.layer[l + 1].abuf], (size_t)s.N * P * s.layer[l + 1].mst);
    const int sd = s.bk[0] + ly.k[0] - 1, sh = s.bk[1] + ly.k[1] - 1, sw = s.bk[2] + ly.k[2] - 1;
    const int S = sd * sh * sw, taps = ly.k[0] * ly.k[1] * ly.k[2];
    const int nsteps = ly.cs / 16 * taps, g8 = ly.cs / 8;
    if (tid < taps) {
      const int td = tid / (ly.k[1] * ly.k[2]), th = (tid / ly.k[2]) % ly.k[1], tw = tid % ly.k[2];
      tapoff[tid] = (td * sh + th) * sw + tw;
    }
    if (tid < ST_ROWS) {
      const int rd = tid / (s.bk[1] * s.bk[2]), rh = (tid / s.bk[2]) % s.bk[1], rw = tid % s.bk[2];
      rowbase[tid] = (rd * sh + rh) * sw + rw;
      rowpos[tid] = rd | rh << 10 | rw << 20;
    }
    for (int c = tid; c < S; c += ST_THREADS) wpos[c] = c / (sh * sw) | (c / sw) % sh << 10 | c % sw << 20;
    __syncthreads(); /* tapoff */
    /* k16 step st = chunk * taps + tap reads the window at (2 chunk S + tapoff[tap]) x 16 bytes. */
    for (int st = tid; st < nsteps; st += ST_THREADS) aoff[st] = (2 * (st / taps) * S + tapoff[st % taps]) * 16;
    const float *pb = l ? s.layer[l - 1].b : NULL;
    const int prelu = l ? s.layer[l - 1].relu : 0, pmst = l ? s.layer[l - 1].mst : 0;
    const float *prev = l ? s.acc[s.layer[l - 1].abuf] : NULL;
    __half *wsm = reinterpret_cast<__half *>(st_smem);
    __half *slab = reinterpret_cast<__half *>(st_smem + ly.w_bytes);
    float *outp = s.acc[ly.abuf];
    int i0, i1;
    item_range(ly, &i0, &i1);
    const int s0 = warp * nsteps / ST_WARPS, s1 = (warp + 1) * nsteps / ST_WARPS;
    const int nq = ly.bn / 16;
    for (int it = i0; it < i1; it++) {
      const int grp = it / s.n_bricks, b = it - grp * s.n_bricks;
      int n0, c0;
      group_origin(ly, grp, &n0, &c0);
      int nb, o0, o1, o2;
      brick_origin(s, b, nb, o0, o1, o2);
      if (held_l != l || held_g != grp) {
        load_weights(s, l, grp, wsm, bias_s);
        held_l = l;
        held_g = grp;
        __syncthreads(); /* bias_s before the window */
      }
      load_window<4>(s, ly, l, prev, pmst, pb ? bias_s : NULL, prelu, slab, wpos, g8, S, nb, o0, o1, o2, c0);
      nnk_cp_async_wait<0>();
      __syncthreads(); /* window and weights complete */
      if (it == i0) prof(s, 1 + l * 4);

      /* Warp w takes k16 steps [w nsteps / 8, (w + 1) nsteps / 8) for all 64 rows (4 m16 tiles) and
       * bn columns: 4 x bn/8 independent accumulators, 4 + bn/16 ldmatrix per 4 x bn/8 MMAs. */
      uint32_t abase[4];
#pragma unroll
      for (int mi = 0; mi < 4; mi++)
        abase[mi] = nnk_smem_u32(slab) +
                    (uint32_t)(((lane >> 4) * S + rowbase[mi * 16 + (lane & 7) + ((lane >> 3) & 1) * 8]) * 16);
      const uint32_t bbase = nnk_smem_u32(wsm) + (uint32_t)(((((lane >> 3) & 1) * ly.bn) + (lane & 7) + ((lane >> 4) << 3)) * 16);
      const uint32_t bstep = (uint32_t)(2 * ly.bn * 16);
      float acc[4][2 * ST_NQ][4];
#pragma unroll
      for (int mi = 0; mi < 4; mi++)
#pragma unroll
        for (int j = 0; j < 2 * ST_NQ; j++)
#pragma unroll
          for (int e = 0; e < 4; e++) acc[mi][j][e] = 0.0f;
      for (int st = s0; st < s1; st += ST_UNROLL) {
        uint32_t af[ST_UNROLL][4][4], bf[ST_UNROLL][ST_NQ][4];
#pragma unroll
        for (int u = 0; u < ST_UNROLL; u++)
          if (st + u < s1) {
            const uint32_t ao = aoff[st + u];
#pragma unroll
            for (int mi = 0; mi < 4; mi++) nnk_ldmatrix_x4(af[u][mi], abase[mi] + ao);
#pragma unroll
            for (int q = 0; q < ST_NQ; q++)
              if (q < nq) nnk_ldmatrix_x4(bf[u][q], bbase + (st + u) * bstep + q * 256);
          }
#pragma unroll
        for (int u = 0; u < ST_UNROLL; u++)
          if (st + u < s1)
#pragma unroll
            for (int q = 0; q < ST_NQ; q++)
              if (q < nq)
#pragma unroll
                for (int mi = 0; mi < 4; mi++) {
                  nnk_mma16816(acc[mi][2 * q], af[u][mi], bf[u][q][0], bf[u][q][1]);
                  nnk_mma16816(acc[mi][2 * q + 1], af[u][mi], bf[u][q][2], bf[u][q][3]);
                }
      }
      if (it == i0) prof(s, 2 + l * 4);
      /* Each warp's partial tile to red[warp]; fragment element e of (mi, j): row 16 mi + lane/4
       * (+8 for e >= 2), column 8 j + 2 (lane % 4) (+1 for odd e). */
      float *mine = red + warp * ST_ROWS * ST_RED_LD;
#pragma unroll
      for (int mi = 0; mi < 4; mi++)
#pragma unroll
        for (int j = 0; j < 2 * ST_NQ; j++)
          if (j < 2 * nq)
#pragma unroll
            for (int h = 0; h < 2; h++)
              *reinterpret_cast<float2 *>(mine + (mi * 16 + (lane >> 2) + 8 * h) * ST_RED_LD + j * 8 + 2 * (lane & 3)) =
                  make_float2(acc[mi][j][2 * h], acc[mi][j][2 * h + 1]);
      __syncthreads(); /* every warp's partial tile is in red */
      /* The sum over warps, a column pair per thread at a time: stored, or added (K split over CTAs). */
      const int hb = ly.bn == 32 ? 4 : 3; /* log2 of the column pairs per row */
      for (int pr = tid; pr < ST_ROWS * ly.bn / 2; pr += ST_THREADS) {
        const int row = pr >> hb, col = 2 * (pr & ((1 << hb) - 1)), rp = rowpos[row];
        const int od = o0 + (rp & 1023), oh = o1 + ((rp >> 10) & 1023), ow = o2 + (rp >> 20);
        if (od >= s.D || oh >= s.H || ow >= s.W || n0 + col >= ly.M) continue;
        float2 v = make_float2(0.0f, 0.0f);
#pragma unroll
        for (int w = 0; w < ST_WARPS; w++) {
          const float2 o = *reinterpret_cast<const float2 *>(red + (w * ST_ROWS + row) * ST_RED_LD + col);
          v.x += o.x;
          v.y += o.y;
        }
        float *dst = outp + ((size_t)nb * P + ((size_t)od * s.H + oh) * s.W + ow) * ly.mst + n0 + col;
        if (ly.ks > 1) add2(dst, v.x, v.y);
        else *reinterpret_cast<float2 *>(dst) = v;
      }
      __syncthreads(); /* window, weights (when they change), bias and red are free for the next item */
      if (it == i0) prof(s, 3 + l * 4);
    }
    /* The next layer's first weight slice (constants) goes out before the barrier. */
    if (l + 1 < s.L) {
      int j0, j1;
      item_range(s.layer[l + 1], &j0, &j1);
      if (j0 < j1) {
        load_weights(s, l + 1, j0 / s.n_bricks, wsm, bias_s);
        held_l = l + 1;
        held_g = j0 / s.n_bricks;
      }
    }
    /* The layer's sums (stores and red.add) before any CTA's next window load:
     * the runtime's grid barrier (the launch is cooperative) orders them. On the
     * H100 it measured 1.2-1.4 us per layer faster than a spin on one counter
     * (bench/results/nn-stack-h100-2026-11-24.md). */
    cg::this_grid().sync();
    prof(s, 4 + l * 4);
  }

  /* Last layer: bias, activation, FP16, NCDHW; layer 0's buffer zeroed for the next run when it splits K. */
  const nnk_stack_layer &z = s.layer[s.L - 1];
  const float *last = s.acc[z.abuf];
  const size_t total = (size_t)s.N * z.M * P, stride = (size_t)gridDim.x * ST_THREADS;
  for (size_t i = (size_t)blockIdx.x * ST_THREADS + threadIdx.x; i < total; i += stride) {
    const size_t cell = i % P, nc = i / P;
    const int c = (int)(nc % z.M);
    const size_t nb = nc / z.M;
    s.y[i] = __float2half(st_act(last[(nb * P + cell) * z.mst + c], z.b, c, z.relu));
  }
  if (s.layer[0].ks > 1) grid_zero(s.acc[s.layer[0].abuf], (size_t)s.N * P * s.layer[0].mst);
  prof(s, NNK_STACK_PROF_SLOTS - 1);
}

}  // namespace

#endif
