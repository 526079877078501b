/* Tensor-core implicit-GEMM convolution for FP16 engines (see gpu_kernels.cuh).
 *
 * The convolution is a GEMM per batch item: M = output cells, N = output
 * channels, K = input channels x kernel taps, computed with
 * mma.sync.m16n8k16 (FP16 inputs, FP32 accumulation), bias + ReLU + the cast
 * to FP16 fused into the epilogue. Stride 1 only; any dilation, padding,
 * channel count and (up to 32) taps.
 *
 * Tiling. A CTA of 4 warps computes BM consecutive output cells x BN output
 * channels (one of the configurations in kTcCfg; the engine times them and
 * keeps the fastest). The warps are laid out WARPS_M x WARPS_N, each owning a
 * (BM / WARPS_M) x (BN / WARPS_N) block of m16n8 accumulators. K runs as
 * chunks of KC input channels (16 or 32), and inside a chunk over the taps.
 *
 * X (the A operand). With stride 1 the input index of output cell o through
 * tap t is ibase(o) + toff(t), and ibase is non-decreasing in o (out dims <=
 * in dims), so a CTA reads one contiguous range of R input cells starting at
 * lo = ibase(first cell). Per chunk it is copied with 16-byte cp.async into
 * `raw` ([KC][RS], NCDHW order: channel rows of cells; each row starts at the
 * 16-byte boundary at or below its first element, `sh` halves before it),
 * then transposed in shared memory into xs[cell][channel], rows of KC + 8
 * halves: 16-byte aligned and conflict-free for ldmatrix. The tap is then
 * only a row shift: a lane's ldmatrix row is ibase(o) - lo + toff(t). Reads
 * that fall into the padding, wrap into the next line or plane, or into the
 * neighbouring channel's cells are zeroed in registers with a per-row tap
 * mask (rmask, bit t), so whatever those positions hold never counts.
 *
 * W (the B operand) is re-laid out once at engine create as [tap][Npad][Cpad]
 * halves (nnk_tc_pack_weights): a lane's two B registers for (n, k) are two
 * aligned 32-bit loads, read from global memory (L2: all CTAs share the
 * layer's weights) TC_BDIST taps ahead of their use, without shared memory
 * (one tap ahead left each tap waiting for L2: ~0.7 us per tap on an H100).
 *
 * Per chunk, two barriers: B1 after the chunk's cp.async completed (raw is
 * visible to all; everyone is done with xs of the previous chunk), B2 after
 * the transpose (xs is complete; raw is free). The next chunk's cp.async is
 * issued after B2 and lands while the 27 taps of this chunk compute.
 */
#include <cuda_runtime.h>

#include "gpu_kernels.cuh"
#include "gpu_mma.cuh"

namespace {

constexpr int TC_THREADS = 128;
constexpr int TC_MAX_TAPS = 32;
constexpr int TC_BDIST = 4; /* stages (taps) between loading a B fragment and its use */
constexpr size_t TC_MAX_SMEM = 227 * 1024;    /* opt-in shared memory per block, sm_90 */

struct tc_cfg {
  int bm, bn, warps_m;
};
/* The candidates that the engine times (index = the plan's algo). */
constexpr tc_cfg kTcCfg[NNK_TC_CONFIGS] = {{64, 64, 2}, {32, 64, 2}, {64, 32, 2},
                                           {32, 32, 2}, {64, 16, 4}, {128, 16, 4}};

struct tc_args {
  const __half *x, *w;
  const float *b;
  __half *y;
  int C, M, P, Pin, batch; /* in channels, out channels, out cells, in cells, batch */
  int OH, OW, D, H, W;     /* output plane dims, input dims */
  int kh, kw, taps;        /* kernel height/width (for tap decomposition), taps */
  int dil[3], pad0[3];
  int cpad, npad;          /* packed weight strides */
  int R, RS, relu;         /* staged cells, raw row stride (halves), fused ReLU */
  int kc;                  /* channels per chunk (the kernel's KC; host only) */
};

/* Channel padding of the packed weights; a chunk is 32 channels when they
 * fit in shared memory (and C > 16), else 16 (cpad is a multiple of both). */
int tc_cpad_unit(int C) { return C <= 16 ? 16 : 32; }
int round_up(int v, int m) { return (v + m - 1) / m * m; }

/* Input index of tap (0,0,0) for output cell o: the tap adds toff(t). */
__host__ __device__ inline int tc_ibase(const tc_args &a, int o) {
  const int od = o / (a.OH * a.OW), oh = (o / a.OW) % a.OH, ow = o % a.OW;
  return ((od - a.pad0[0]) * a.H + (oh - a.pad0[1])) * a.W + (ow - a.pad0[2]);
}

__host__ __device__ inline int tc_toff(const tc_args &a, int t) {
  const int kd = t / (a.kh * a.kw), kh = (t / a.kw) % a.kh, kw = t % a.kw;
  return (kd * a.dil[0] * a.H + kh * a.dil[1]) * a.W + kw * a.dil[2];
}

/* Bit t set when tap t of output cell o reads inside the input volume. */
__device__ uint32_t tc_tap_mask(const tc_args &a, int o) {
  const int od = o / (a.OH * a.OW), oh = (o / a.OW) % a.OH, ow = o % a.OW;
  uint32_t m = 0;
  for (int t = 0; t < a.taps; t++) {
    const int kd = t / (a.kh * a.kw), kh = (t / a.kw) % a.kh, kw = t % a.kw;
    const int id = od - a.pad0[0] + kd * a.dil[0], ih = oh - a.pad0[1] + kh * a.dil[1];
    const int iw = ow - a.pad0[2] + kw * a.dil[2];
    if (id >= 0 && id < a.D && ih >= 0 && ih < a.H && iw >= 0 && iw < a.W) m |= 1u << t;
  }
  return m;
}





/* Copies chunk c (channels c * KC ..) of the CTA's input range into raw:
 * row k holds the 8-aligned run of global elements that starts at or below
 * element (channel c*KC + k, cell lo); channels past C are zeros. 16-byte
 * cp.async where the run lies inside the tensor, checked scalar copies at
 * its two ends. The caller commits the group. */
template <int KC>
__device__ void tc_issue_raw(const tc_args &a, int64_t xbase, int lo, int c, __half *raw) {
  const int per_row = a.RS / 8;
  const int64_t xtotal = (int64_t)a.batch * a.C * a.Pin;
  const unsigned short *X = reinterpret_cast<const unsigned short *>(a.x);
  for (int i = threadIdx.x; i < KC * per_row; i += TC_THREADS) {
    const int k = i / per_row, j = i - k * per_row, ci = c * KC + k;
    __half *dst = raw + k * a.RS + j * 8;
    if (ci >= a.C) {
      *reinterpret_cast<uint4 *>(dst) = make_uint4(0, 0, 0, 0);
      continue;
    }
    const int64_t e = ((xbase + (int64_t)ci * a.Pin + lo) & ~(int64_t)7) + j * 8;
    if (e >= 0 && e + 8 <= xtotal) {
      nnk_cp_async16(dst, X + e);
    } else {
      unsigned short *d = reinterpret_cast<unsigned short *>(dst);
      for (int q = 0; q < 8; q++) d[q] = e + q >= 0 && e + q < xtotal ? X[e + q] : (unsigned short)0;
    }
  }
}

/* raw ([KC][RS], cells along rows) -> xs ([R][KC + 8], channels along rows),
 * two channels per 32-bit store. */
template <int KC>
__device__ void tc_transpose(const tc_args &a, int64_t xbase, int lo, int c, const __half *raw, __half *xs) {
  const unsigned short *r16 = reinterpret_cast<const unsigned short *>(raw);
  const int64_t e = xbase + (int64_t)c * KC * a.Pin + lo; /* element (channel c * KC, cell lo) */
  const int pin8 = a.Pin & 7;
  int sh0 = (int)(e & 7); /* where cell lo sits in row k: (e + k * Pin) mod 8 */
#pragma unroll 2
  for (int k = 0; k < KC; k += 2) {
    const int sh1 = (sh0 + pin8) & 7;
    const unsigned short *row0 = r16 + k * a.RS + sh0, *row1 = r16 + (k + 1) * a.RS + sh1;
    for (int r = threadIdx.x; r < a.R; r += TC_THREADS)
      *reinterpret_cast<uint32_t *>(xs + r * (KC + 8) + k) = (uint32_t)row0[r] | ((uint32_t)row1[r] << 16);
    sh0 = (sh1 + pin8) & 7;
  }
}

template <int BM, int BN, int WARPS_M, int KC>
__global__ void __launch_bounds__(TC_THREADS) k_conv_tc(tc_args a) {
  nnk_pdl_begin();
  constexpr int WARPS_N = 4 / WARPS_M;
  constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;
  constexpr int MI = WM / 16, NI = WN / 8, KS = KC / 16;
  constexpr int LD = KC + 8; /* xs row stride in halves */
  static_assert(MI >= 1 && NI >= 2 && NI % 2 == 0, "warp tile");
  extern __shared__ __align__(16) unsigned char tc_smem[];
  __half *raw = reinterpret_cast<__half *>(tc_smem);                 /* [KC][RS] */
  __half *xs = raw + (size_t)KC * a.RS;                               /* [R][LD] */
  uint32_t *rmask = reinterpret_cast<uint32_t *>(xs + (size_t)a.R * LD); /* [BM] */
  int *toff_s = reinterpret_cast<int *>(rmask + BM);                    /* [TC_MAX_TAPS] */

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp % WARPS_M, wn = warp / WARPS_M;
  const int cell0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
  const int64_t xbase = (int64_t)blockIdx.z * a.C * a.Pin;
  const int last = min(cell0 + BM, a.P) - 1;
  const int lo = tc_ibase(a, cell0);
  const int nch = a.cpad / KC, S = nch * a.taps;

  /* B registers of stage s = chunk * taps + tap: for n = this lane's column
   * g = lane / 4 of each n8 tile, k = 2 * (lane % 4) (+1) and + 8 (+9). */
  const unsigned int *W32 = reinterpret_cast<const unsigned int *>(a.w);
  const int bn_lane = n0 + wn * WN + (lane >> 2), bk_lane = 2 * (lane & 3);
  auto load_b = [&](int c, int t, uint32_t (&b)[NI][KS][2]) {
#pragma unroll
    for (int ni = 0; ni < NI; ni++)
#pragma unroll
      for (int ks = 0; ks < KS; ks++) {
        const size_t e = ((size_t)t * a.npad + bn_lane + ni * 8) * a.cpad + c * KC + ks * 16 + bk_lane;
        b[ni][ks][0] = __ldg(W32 + e / 2);
        b[ni][ks][1] = __ldg(W32 + e / 2 + 4);
      }
  };

  /* Chunk and tap of a stage are stepped, never divided out: a runtime
   * integer division is a ~20-instruction dependent chain, and the loop had
   * five of them per tap on its critical path (SASS of 68cf81c). */
  tc_issue_raw<KC>(a, xbase, lo, 0, raw);
  nnk_cp_async_commit();
  for (int r = tid; r < BM; r += TC_THREADS) rmask[r] = cell0 + r < a.P ? tc_tap_mask(a, cell0 + r) : 0u;
  if (tid < a.taps) toff_s[tid] = tc_toff(a, tid);
  /* B registers in a ring of TC_BDIST stages: stage s lives in bq[s % TC_BDIST]
   * and is loaded TC_BDIST stages before its use (the stage loop is unrolled
   * by TC_BDIST so that the ring index is static). */
  uint32_t bq[TC_BDIST][NI][KS][2];
  int lc = 0, lt = 0; /* chunk and tap of the next stage whose B is loaded */
#pragma unroll
  for (int u = 0; u < TC_BDIST; u++)
    if (u < S) {
      load_b(lc, lt, bq[u]);
      if (++lt == a.taps) lt = 0, lc++;
    }
  __syncthreads(); /* rmask and toff_s are written */

  /* Per lane: ldmatrix row addresses (rows past the end read the last cell;
   * their results are never stored) and the tap masks of its fragment rows. */
  int arow[MI];
  uint32_t mk0[MI], mk1[MI];
#pragma unroll
  for (int mi = 0; mi < MI; mi++) {
    const int r = wm * WM + mi * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
    arow[mi] = tc_ibase(a, min(cell0 + r, last)) - lo;
    const int g = wm * WM + mi * 16 + (lane >> 2);
    mk0[mi] = rmask[g];
    mk1[mi] = rmask[g + 8];
  }
  const int akof = (lane >> 4) * 8;

  float acc[MI][NI][4];
  nnk_acc_zero(acc);

  int c = 0, t = 0; /* chunk and tap of stage s */
  for (int s0 = 0; s0 < S; s0 += TC_BDIST) {
#pragma unroll
    for (int u = 0; u < TC_BDIST; u++) {
      const int s = s0 + u; /* uniform over the block: the barriers below are reached by all */
      if (s >= S) break;
      if (t == 0) {
        nnk_cp_async_wait<0>(); /* this thread's copies of chunk c have landed */
        __syncthreads();     /* B1: everyone's; everyone is done reading xs */
        tc_transpose<KC>(a, xbase, lo, c, raw, xs);
        __syncthreads();     /* B2: xs holds chunk c; raw may be overwritten */
        if (c + 1 < nch) tc_issue_raw<KC>(a, xbase, lo, c + 1, raw);
        nnk_cp_async_commit();
      }
      const int toff = toff_s[t];
      uint32_t z0[MI], z1[MI];
#pragma unroll
      for (int mi = 0; mi < MI; mi++) {
        z0[mi] = (mk0[mi] >> t) & 1u ? 0xffffffffu : 0u;
        z1[mi] = (mk1[mi] >> t) & 1u ? 0xffffffffu : 0u;
      }
#pragma unroll
      for (int ks = 0; ks < KS; ks++) {
        uint32_t af[MI][4];
#pragma unroll
        for (int mi = 0; mi < MI; mi++) {
          nnk_ldmatrix_x4(af[mi], xs + (arow[mi] + toff) * LD + ks * 16 + akof);
          af[mi][0] &= z0[mi];
          af[mi][2] &= z0[mi];
          af[mi][1] &= z1[mi];
          af[mi][3] &= z1[mi];
        }
#pragma unroll
        for (int mi = 0; mi < MI; mi++)
#pragma unroll
          for (int ni = 0; ni < NI; ni++) nnk_mma16816(acc[mi][ni], af[mi], bq[u][ni][ks][0], bq[u][ni][ks][1]);
      }
      if (s + TC_BDIST < S) { /* this slot's next stage: s + TC_BDIST */
        load_b(lc, lt, bq[u]);
        if (++lt == a.taps) lt = 0, lc++;
      }
      if (++t == a.taps) t = 0, c++;
    }
  }

  /* Epilogue: + bias, ReLU, FP16, NCDHW store. Fragment rows are lane/4 and
   * lane/4 + 8, columns 2 * (lane % 4) and + 1. */
  __half *Y = a.y + (size_t)blockIdx.z * a.M * a.P;
#pragma unroll
  for (int mi = 0; mi < MI; mi++)
#pragma unroll
    for (int ni = 0; ni < NI; ni++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int row = cell0 + wm * WM + mi * 16 + (lane >> 2) + (e >> 1) * 8;
        const int col = n0 + wn * WN + ni * 8 + 2 * (lane & 3) + (e & 1);
        if (row >= a.P || col >= a.M) continue;
        float v = acc[mi][ni][e] + (a.b ? a.b[col] : 0.0f);
        if (a.relu) v = nnk_relu_nan(v);
        Y[(size_t)col * a.P + row] = __float2half(v);
      }
}

/* The kernel arguments for p with packed weights w and bias b, and the
 * staged range and chunk size for configuration cfg. Returns the dynamic
 * shared memory, 0 if it does not fit (or x is not 16-byte aligned). */
size_t tc_setup(const nnk_conv &p, const __half *w, const float *b, int cfg, tc_args *a) {
  const int bm = kTcCfg[cfg].bm, unit = tc_cpad_unit(p.C);
  *a = tc_args{};
  if (reinterpret_cast<uintptr_t>(p.x) % 16 != 0) return 0;
  nnk_conv_args_common(p, w, b, a);
  a->batch = p.N;
  a->cpad = round_up(p.C, unit);
  a->npad = round_up(p.M, 64);
  /* The widest staged range over the tiles (ibase is non-decreasing). */
  const int span = tc_toff(*a, a->taps - 1) + 1;
  int R = 0;
  for (int c0 = 0; c0 < a->P; c0 += bm) {
    const int r = tc_ibase(*a, (c0 + bm < a->P ? c0 + bm : a->P) - 1) - tc_ibase(*a, c0) + span;
    if (r > R) R = r;
  }
  a->R = R;
  a->RS = round_up(R + 7, 8); /* a row starts up to 7 halves before cell lo */
  for (a->kc = unit; a->kc >= 16; a->kc -= 16) {
    const size_t smem = (size_t)a->kc * a->RS * 2 + (size_t)R * (a->kc + 8) * 2 + (size_t)(bm + TC_MAX_TAPS) * 4;
    if (smem <= TC_MAX_SMEM) return smem;
  }
  return 0;
}

template <int BM, int BN, int WARPS_M, int KC>
cudaError_t tc_launch_t(const tc_args &a, size_t smem, int batch, cudaStream_t s) {
  auto kern = k_conv_tc<BM, BN, WARPS_M, KC>;
  /* Idempotent; set once per instantiation (races between engines are benign:
   * every caller sets the same value). */
  static bool attr_set = false;
  if (!attr_set) {
    cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)TC_MAX_SMEM);
    if (e != cudaSuccess) return e;
    attr_set = true;
  }
  dim3 grid((a.P + BM - 1) / BM, a.npad / BN, batch);
  return nnk_launch_ex(kern, grid, dim3(TC_THREADS), smem, s, 1, a);
}

template <int KC>
cudaError_t tc_launch_kc(const tc_args &a, size_t smem, int cfg, int batch, cudaStream_t s) {
  switch (cfg) {
    case 0: return tc_launch_t<64, 64, 2, KC>(a, smem, batch, s);
    case 1: return tc_launch_t<32, 64, 2, KC>(a, smem, batch, s);
    case 2: return tc_launch_t<64, 32, 2, KC>(a, smem, batch, s);
    case 3: return tc_launch_t<32, 32, 2, KC>(a, smem, batch, s);
    case 4: return tc_launch_t<64, 16, 4, KC>(a, smem, batch, s);
    default: return tc_launch_t<128, 16, 4, KC>(a, smem, batch, s);
  }
}

}  // namespace

int nnk_tc_supported(const nnk_conv &p) {
  const int taps = p.k[0] * p.k[1] * p.k[2];
  if (taps < 1 || taps > TC_MAX_TAPS || p.N < 1 || p.N > 65535 || p.C < 1 || p.M < 1) return 0;
  for (int i = 0; i < 3; i++)
    if (p.stride[i] != 1 || p.out3[i] < 1 || p.out3[i] > p.in3[i]) return 0; /* ibase non-decreasing */
  const int64_t pin = (int64_t)p.in3[0] * p.in3[1] * p.in3[2];
  if ((int64_t)round_up(p.C, 32) * pin >= (1ll << 31) || (int64_t)p.M * pin >= (1ll << 31)) return 0;
  for (int cfg = 0; cfg < NNK_TC_CONFIGS; cfg++)
    if (nnk_tc_config_ok(p, cfg)) return 1;
  return 0;
}

int nnk_tc_config_ok(const nnk_conv &p, int cfg) {
  if (cfg < 0 || cfg >= NNK_TC_CONFIGS) return 0;
  /* Tiles wider than the channels (rounded to 16, or to a power of two)
   * only add padding work. */
  int mw = 16;
  while (mw < p.M && mw < 64) mw *= 2;
  if (kTcCfg[cfg].bn > mw) return 0;
  tc_args a;
  return tc_setup(p, NULL, NULL, cfg, &a) != 0;
}

size_t nnk_tc_weight_elems(const nnk_conv &p) {
  return (size_t)p.k[0] * p.k[1] * p.k[2] * round_up(p.M, 64) * round_up(p.C, tc_cpad_unit(p.C));
}

void nnk_tc_pack_weights(const nnk_conv &p, const float *w, __half *out) {
  const int taps = p.k[0] * p.k[1] * p.k[2], npad = round_up(p.M, 64), cpad = round_up(p.C, tc_cpad_unit(p.C));
  for (size_t i = 0, n = nnk_tc_weight_elems(p); i < n; i++) out[i] = __float2half(0.0f);
  for (int m = 0; m < p.M; m++)
    for (int c = 0; c < p.C; c++)
      for (int t = 0; t < taps; t++)
        out[((size_t)t * npad + m) * cpad + c] = __float2half(w[((size_t)m * p.C + c) * taps + t]);
}

cudaError_t nnk_launch_tc(const nnk_conv &p, const __half *w, const float *b, int cfg, cudaStream_t s) {
  if ((int64_t)p.out3[0] * p.out3[1] * p.out3[2] == 0 || p.M == 0 || p.N == 0) return cudaSuccess;
  tc_args a;
  const size_t smem = cfg >= 0 && cfg < NNK_TC_CONFIGS ? tc_setup(p, w, b, cfg, &a) : 0;
  if (smem == 0) return cudaErrorInvalidConfiguration;
  return a.kc == 16 ? tc_launch_kc<16>(a, smem, cfg, p.N, s) : tc_launch_kc<32>(a, smem, cfg, p.N, s);
}
