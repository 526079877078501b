/* A chain of convolutions as one persistent kernel (issue 12; the contract
 * is in gpu_kernels.cuh, the engine's choice in gpu_tune.cu).
 *
 * At batch 1 a predecoder's layers are far too small for a kernel each: a
 * 128 -> 128 layer over 8^3 cells is 0.45 GFLOP, a few microseconds of
 * tensor-core work on 132 SMs, but as a kernel of its own it pays a launch,
 * a pipeline fill and a drain, and every CTA re-reads its tile's weights
 * from L2. Here one cooperative grid runs every layer, with a grid barrier
 * between layers instead of a kernel boundary.
 *
 * Work. A layer is an implicit GEMM: rows = output cells, columns = output
 * channels, K = taps x input channels. Its work items are (brick, column
 * block, K slice): a brick is 64 output cells (bd x bh x bw, chosen per
 * stack), a column block bn = 16 or 32 output channels, a K slice cs input
 * channels over all taps. Each CTA takes a contiguous range of items, so
 * consecutive items share their (column block, K slice) and the weight slice
 * stays in shared memory. Per item the CTA stages the brick's input
 * window (brick + halo) for its cs channels in shared memory once, FP16,
 * and every tap reads it through ldmatrix at a shifted row address: no
 * per-tap re-read of the input from L2.
 *
 * Inside a CTA, 8 warps: warp w takes an eighth of the item's k16 steps for
 * all 64 rows and bn columns (4 x bn/8 independent accumulators, so the
 * tensor pipe always has work), and the eight partial tiles are summed
 * through shared memory by the whole CTA, a column pair per thread.
 * mma.sync.m16n8k16, FP16 in, FP32 accumulate. The next layer's first
 * weight slice is loaded before the barrier that ends a layer.
 *
 * Between layers. A layer's result goes to an FP32 NDHWC buffer: stored
 * when the layer is not split over K, added with vector atomics (red.add)
 * when it is. The next layer's window load adds the bias, applies ReLU and
 * rounds to FP16, as a per-layer kernel's epilogue would. The last layer's
 * result is written NCDHW FP16 after the last barrier. Buffers are zeroed
 * one phase before a split layer adds into them (layer 0's in the previous
 * run's final phase; buffers are allocated zeroed), so no extra barrier.
 */
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include "gpu_kernels.cuh"
#include "gpu_mma.cuh"

namespace cg = cooperative_groups;

namespace {

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

__global__ void __launch_bounds__(ST_THREADS, 1) k_stack(const __grid_constant__ nnk_stack s) {
  extern __shared__ __align__(16) unsigned char st_smem[];
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

int round_up(int v, int m) { return (v + m - 1) / m * m; }
/* A layer's result row and packed-weight column stride: every column block fits. */
int stack_mst(int M) { return round_up(M, 16 * ST_NQ); }

/* Estimated time (ns) of one layer with bn, ks on G CTAs (the tuner then
 * measures the whole stack; this only picks a point per layer). Rates per
 * SM: ~2.5 FLOP/ps of mma.sync, ~40 B/ns from L2, ~700 ns of latency per
 * item (window load, barriers). */
double layer_cost(const nnk_stack_layer &ly, int n_bricks, int S, int G, int first) {
  const int taps = ly.k[0] * ly.k[1] * ly.k[2];
  const long long items = (long long)n_bricks * ((ly.M + ly.bn - 1) / ly.bn) * ly.ks;
  const long long per = (items + G - 1) / G;
  const double flops = 2.0 * ST_ROWS * ly.bn * ly.cs * taps;
  const double win = (double)ly.cs * S * (first ? 2 : 4), wts = 2.0 * ly.bn * ly.cs * taps;
  const double out = ST_ROWS * ly.bn * 4.0 * (ly.ks > 1 ? 2 : 1);
  const long long reloads = per / n_bricks + 2 < per ? per / n_bricks + 2 : per;
  return per * (flops / 2500.0 + win / 40.0 + out / 40.0 + 700.0) + reloads * wts / 40.0;
}

size_t layer_smem(const nnk_stack_layer &ly, int S) {
  const int taps = ly.k[0] * ly.k[1] * ly.k[2];
  return (size_t)ly.bn * ly.cs * taps * 2 + (size_t)ly.cs * S * 2;
}

}  // namespace

int nnk_stack_layer_ok(const nnk_conv &p) {
  if (p.N < 1 || p.C < 1 || p.M < 1 || p.C > ST_MAX_C || p.M > ST_MAX_C) return 0;
  for (int i = 0; i < 3; i++)
    if ((p.k[i] != 1 && p.k[i] != 3) || p.stride[i] != 1 || p.dil[i] != 1 || p.pad0[i] != (p.k[i] - 1) / 2 ||
        p.in3[i] != p.out3[i])
      return 0;
  const long long cells = (long long)p.N * p.out3[0] * p.out3[1] * p.out3[2];
  return cells * stack_mst(p.M > p.C ? p.M : p.C) < (1ll << 31);
}

size_t nnk_stack_weight_elems(const nnk_conv &p) {
  return (size_t)round_up(p.C, 16) * p.k[0] * p.k[1] * p.k[2] * stack_mst(p.M);
}

void nnk_stack_pack_weights(const nnk_conv &p, const float *w, __half *out) {
  const int taps = p.k[0] * p.k[1] * p.k[2], mst = stack_mst(p.M);
  for (size_t i = 0, n = nnk_stack_weight_elems(p); i < n; i++) out[i] = __float2half(0.0f);
  /* [chunk of 16 channels][tap][k half of 8][output channel (mst)][8 channels] */
  for (int m = 0; m < p.M; m++)
    for (int c = 0; c < p.C; c++)
      for (int t = 0; t < taps; t++) {
        const size_t at = ((((size_t)(c / 16) * taps + t) * 2 + (c % 16) / 8) * mst + m) * 8 + c % 8;
        out[at] = __float2half(w[((size_t)m * p.C + c) * taps + t]);
      }
}

int nnk_stack_plan(const nnk_conv *const *layers, int L, int sms, int force_bn, int force_ks, nnk_stack *s,
                   size_t *smem, size_t *acc_floats) {
  if (L < 2 || L > NNK_STACK_MAX_LAYERS || sms < 1) return 0;
  *s = nnk_stack{};
  const nnk_conv &p0 = *layers[0];
  for (int l = 0; l < L; l++) {
    const nnk_conv &p = *layers[l];
    if (!nnk_stack_layer_ok(p) || p.N != p0.N || (l && p.C != layers[l - 1]->M)) return 0;
    for (int i = 0; i < 3; i++)
      if (p.in3[i] != p0.in3[i]) return 0;
  }
  s->L = L;
  s->N = p0.N;
  s->D = p0.in3[0];
  s->H = p0.in3[1];
  s->W = p0.in3[2];
  /* The brick (64 cells) with the fewest padded cells plus halo. */
  static const int shapes[][3] = {{4, 4, 4}, {2, 4, 8}, {2, 8, 4}, {4, 2, 8}, {4, 8, 2}, {8, 2, 4}, {8, 4, 2},
                                  {1, 8, 8}, {8, 8, 1}, {8, 1, 8}, {1, 4, 16}, {1, 16, 4}, {1, 2, 32},
                                  {1, 1, 64}, {2, 2, 16}, {16, 2, 2}};
  double best = -1.0;
  const int dims[3] = {s->D, s->H, s->W};
  for (const auto &sh : shapes) {
    long long bricks = 1, halo = 1;
    for (int i = 0; i < 3; i++) {
      if (sh[i] > 1 && dims[i] == 1) bricks = -1;
      if (bricks < 0) break;
      bricks *= (dims[i] + sh[i] - 1) / sh[i];
      halo *= sh[i] + (dims[i] > 1 ? 2 : 0);
    }
    if (bricks < 0) continue;
    const double cost = (double)bricks * (ST_ROWS + 0.5 * halo);
    if (best < 0.0 || cost < best) {
      best = cost;
      for (int i = 0; i < 3; i++) {
        s->bk[i] = sh[i];
        s->nbk[i] = (dims[i] + sh[i] - 1) / sh[i];
      }
    }
  }
  if (best < 0.0) return 0;
  s->n_bricks = s->N * s->nbk[0] * s->nbk[1] * s->nbk[2];
  size_t need = 0, accn = 0;
  int max_items = 0;
  for (int l = 0; l < L; l++) {
    const nnk_conv &p = *layers[l];
    nnk_stack_layer &ly = s->layer[l];
    ly.C = p.C;
    ly.M = p.M;
    ly.mst = stack_mst(p.M);
    ly.relu = p.relu;
    for (int i = 0; i < 3; i++) {
      ly.k[i] = p.k[i];
      ly.pad0[i] = p.pad0[i];
    }
    const int S = (s->bk[0] + p.k[0] - 1) * (s->bk[1] + p.k[1] - 1) * (s->bk[2] + p.k[2] - 1);
    const int chunks = round_up(p.C, 16) / 16;
    int only_ks = 0; /* forced: the largest split <= force_ks that divides the chunks */
    for (int ks = 1; force_ks > 0 && ks <= chunks && ks <= force_ks; ks++)
      if (chunks % ks == 0) only_ks = ks;
    double lbest = -1.0;
    nnk_stack_layer pick = ly;
    for (int bn = 16; bn <= 16 * ST_NQ; bn *= 2)
      for (int ks = 1; ks <= chunks; ks++) {
        if (chunks % ks || (force_bn && bn != force_bn) || (only_ks && ks != only_ks)) continue;
        nnk_stack_layer c = ly;
        c.bn = bn;
        c.ks = ks;
        c.cs = chunks / ks * 16;
        if (layer_smem(c, S) + ST_FIXED_SMEM > ST_MAX_SMEM || c.cs / 16 * p.k[0] * p.k[1] * p.k[2] > ST_MAX_STEPS ||
            S > ST_MAX_WIN)
          continue;
        const double t = layer_cost(c, s->n_bricks, S, sms, l == 0);
        if (lbest < 0.0 || t < lbest) {
          lbest = t;
          pick = c;
        }
      }
    if (lbest < 0.0) return 0;
    ly = pick;
    ly.items = s->n_bricks * ((ly.M + ly.bn - 1) / ly.bn) * ly.ks;
    ly.w_bytes = (int)((size_t)ly.bn * ly.cs * p.k[0] * p.k[1] * p.k[2] * 2);
    /* Buffers rotate over three, so a layer never adds into what the layer
     * before it is reading; the last layer takes a fourth where it would
     * otherwise share layer 0's, which the final phase zeroes. */
    ly.abuf = l % 3;
    if (l == L - 1 && l % 3 == 0) ly.abuf = 3;
    const size_t sm = layer_smem(ly, S);
    if (sm > need) need = sm;
    if ((size_t)s->N * s->D * s->H * s->W * ly.mst > accn) accn = (size_t)s->N * s->D * s->H * s->W * ly.mst;
    if (ly.items > max_items) max_items = ly.items;
  }
  s->fixed_off = (int)round_up((int)need, 16);
  *smem = (size_t)s->fixed_off + ST_FIXED_SMEM;
  *acc_floats = accn;
  s->grid = max_items < sms ? max_items : sms;
  return 1;
}

cudaError_t nnk_stack_setup(size_t smem, int *blocks_per_sm) {
  cudaError_t e = cudaFuncSetAttribute(k_stack, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)ST_MAX_SMEM);
  if (e != cudaSuccess) return e;
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks_per_sm, k_stack, ST_THREADS, smem);
}

cudaError_t nnk_launch_stack(const nnk_stack &s, size_t smem, cudaStream_t st) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)s.grid);
  cfg.blockDim = dim3(ST_THREADS);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = st;
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeCooperative; /* every CTA resident: the grid barrier needs it */
  at[0].val.cooperative = 1;
  cfg.attrs = at;
  cfg.numAttrs = 1;
  cudaError_t e = cudaLaunchKernelEx(&cfg, k_stack, s);
  return e != cudaSuccess ? e : cudaGetLastError();
}
