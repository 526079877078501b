/* Channels-last tensor-core convolution for FP16 engines (issue 12; see
 * gpu_kernels.cuh for the contract).
 *
 * An implicit GEMM per batch item: M = output cells, N = output channels,
 * K = taps x input channels, mma.sync.m16n8k16 (FP16 in, FP32 accumulation),
 * bias + ReLU + the cast to FP16 fused into the epilogue. Unlike gpu_tc.cu
 * (NCDHW in and out, input staged and transposed per CTA), both operands go
 * through the textbook multistage pipeline: each k-step of 32 is one
 * cp.async copy of an A tile (BM cells x 32 channels) and a B tile (BN
 * output channels x 32) into a ring of STAGES (4 or 8) shared-memory slots, one
 * barrier per step, ldmatrix + mma from the slot that landed.
 *
 * Layouts. in_cl: X is NDHWC (a cell's C channels contiguous, C % 8 == 0):
 * a k-step is (tap, block of 32 channels) and a row of the A tile is two
 * 16-byte copies of one input cell's channels, zero-filled by cp.async
 * (src-size 0) where the tap falls into the padding or past C. Otherwise X
 * is NCDHW: K is ordered tap-major over the real channels (k = t * C + c,
 * so a 3-channel first layer is 81 k values, not 27 padded blocks), each
 * element is a 2-byte gather through a per-k table, loaded into registers
 * before the step's MMAs and stored to shared memory after them. out_cl: Y
 * is written NDHWC, else NCDHW.
 *
 * Weights are packed once at engine create (nnk_cl_pack_weights) as
 * [Npad][Kpad] halves in the k order of the input layout; Npad covers every
 * tile and Kpad every k-step, so B copies never need a bounds check.
 *
 * Split K. With split S > 1, the S CTAs of a cluster (1 x 1 x S, sm_90)
 * each run a contiguous share of the k-steps; their FP32 partial tiles meet
 * in shared memory and each CTA reduces and stores BM / S rows of the tile
 * reading its partners' tiles through distributed shared memory. A small
 * layer thereby fills the GPU without a workspace, atomics or a second
 * kernel.
 */
#include "gpu_conv_cl.cuh"

namespace {

using namespace nncl;

constexpr int CL_MAX_GATHER_K = 2048; /* NCDHW input: the k table lives in shared memory */

struct cl_cfg {
  int bm, bn, warps_m, warps;
};
constexpr cl_cfg kClCfg[NNK_CL_CONFIGS] = {{64, 64, 2, 4},  {32, 64, 2, 4}, {64, 32, 2, 4},
                                           {32, 32, 2, 4},  {64, 16, 4, 4}, {128, 16, 4, 4},
                                           {128, 64, 2, 4}, {128, 128, 2, 8}, {64, 128, 2, 4}};
constexpr int kClSplit[NNK_CL_SPLITS] = {1, 2, 4, 8, 16};
constexpr int kClStages[NNK_CL_DEPTHS] = {4, 8}; /* shared-memory ring depths */

/* Input coordinates of tap (0,0,0) for output cell o (stride and padding applied). */
__device__ inline void cl_base(const cl_args &a, int o, int &bd, int &bh, int &bw) {
  const int od = o / (a.OH * a.OW), oh = (o / a.OW) % a.OH, ow = o % a.OW;
  bd = od * a.stride[0] - a.pad0[0];
  bh = oh * a.stride[1] - a.pad0[1];
  bw = ow * a.stride[2] - a.pad0[2];
}


/* Input element e (NCDHW linear index) as FP16: from X, or through the
 * copy map of an absorbed copy (converted as Cast does where its buffer
 * holds another type). */
__device__ __forceinline__ unsigned short cl_load_x(const cl_args &a, size_t e) {
  if (!a.f.x_idx) return reinterpret_cast<const unsigned short *>(a.x)[e];
  const int k = a.f.x_src[e];
  const int64_t idx = a.f.x_idx[e];
  if (!a.f.x_dts) return static_cast<const unsigned short *>(a.f.x_bufs[k])[idx];
  return cast_to_half_bits(a.f.x_bufs[k], a.f.x_dts[k], idx);
}


template <int BM, int BN, int WARPS_M, int WARPS, bool IN_CL, bool OUT_CL, int STAGES>
__global__ void __launch_bounds__(WARPS * 32) k_conv_cl(cl_args a) {
  constexpr int THREADS = WARPS * 32, WARPS_N = WARPS / WARPS_M;
  constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;
  constexpr int MI = WM / 16, NI = WN / 8;
  constexpr int A_ST = BM * CL_LDS, B_ST = BN * CL_LDS; /* halves per slot */
  constexpr int RPT = BM * 4 / THREADS;                  /* A rows (or row items) per thread */
  static_assert(MI >= 1 && NI >= 2 && NI % 2 == 0 && (BM * 4) % THREADS == 0 && WARPS % WARPS_M == 0, "tile");
  extern __shared__ __align__(16) unsigned char cl_smem[];
  __half *As = reinterpret_cast<__half *>(cl_smem);
  __half *Bs = As + STAGES * A_ST;
  int *ktab = reinterpret_cast<int *>(Bs + STAGES * B_ST); /* NCDHW input: [kpad] */

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp % WARPS_M, wn = warp / WARPS_M;
  const int cell0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
  const int rank = (int)(blockIdx.z % (unsigned)a.split), nb = (int)(blockIdx.z / (unsigned)a.split);
  const int s_begin = (int)((long long)a.ksteps * rank / a.split);
  const int s_end = (int)((long long)a.ksteps * (rank + 1) / a.split);
  const int nst = s_end - s_begin;

  /* A loader. in_cl: thread copies 16-byte chunk q = tid % 4 of rows
   * tid / 4 + THREADS / 4 j. NCDHW: item i = tid + THREADS j is row i % BM, chunk i / BM
   * (consecutive threads on consecutive cells: coalesced gathers). */
  int rb_d[RPT], rb_h[RPT], rb_w[RPT], a_row[RPT];
  bool rvalid[RPT];
#pragma unroll
  for (int j = 0; j < RPT; j++) {
    const int r = IN_CL ? (tid >> 2) + THREADS / 4 * j : (tid + THREADS * j) % BM;
    a_row[j] = r;
    rvalid[j] = cell0 + r < a.P;
    cl_base(a, rvalid[j] ? cell0 + r : 0, rb_d[j], rb_h[j], rb_w[j]);
  }
  const int a_q = IN_CL ? (tid & 3) : 0;
  int a_qj[RPT];
#pragma unroll
  for (int j = 0; j < RPT; j++) a_qj[j] = IN_CL ? a_q : (tid + THREADS * j) / BM;

  nnk_pdl_launch_dependents();
  if (!IN_CL) {
    /* k -> (channel, tap): c | kd << 16 | kh << 21 | kw << 26, -1 past taps * C. */
    const int kreal = a.taps * a.C;
    for (int k = tid; k < a.kpad; k += THREADS) {
      int v = -1;
      if (k < kreal) {
        const int t = k / a.C, c = k - t * a.C;
        const int kd = t / (a.kh * a.kw), kh = (t / a.kw) % a.kh, kw = t % a.kw;
        v = c | kd << 16 | kh << 21 | kw << 26;
      }
      ktab[k] = v;
    }
    __syncthreads(); /* the table is complete before the first gather */
  }

  /* in_cl: the tap and channel block of the next step to load, stepped. */
  int lt = 0, lcb = 0, lkd = 0, lkh = 0, lkw = 0;
  if (IN_CL) {
    lt = s_begin / a.ncb;
    lcb = s_begin - lt * a.ncb;
    lkd = lt / (a.kh * a.kw);
    lkh = (lt / a.kw) % a.kh;
    lkw = lt % a.kw;
  }
  uint4 pend[RPT]; /* NCDHW: gathered row chunks waiting for their slot */

  auto issue_a_cl = [&](int slot) {
    __half *dst = As + slot * A_ST;
    const int id0 = lkd * a.dil[0], ih0 = lkh * a.dil[1], iw0 = lkw * a.dil[2];
    const int c = lcb * CL_BK + a_q * 8;
#pragma unroll
    for (int j = 0; j < RPT; j++) {
      const int id = rb_d[j] + id0, ih = rb_h[j] + ih0, iw = rb_w[j] + iw0;
      const bool ok = rvalid[j] && c < a.C && (unsigned)id < (unsigned)a.D && (unsigned)ih < (unsigned)a.H &&
                      (unsigned)iw < (unsigned)a.W;
      const __half *src = ok ? a.x + (((size_t)nb * a.Pin + ((size_t)id * a.H + ih) * a.W + iw) * a.C + c) : a.x;
      nnk_cp_async16(dst + a_row[j] * CL_LDS + a_q * 8, src, ok ? 16 : 0);
    }
    if (++lcb == a.ncb) {
      lcb = 0;
      lt++;
      if (++lkw == a.kw) {
        lkw = 0;
        if (++lkh == a.kh) lkh = 0, lkd++;
      }
    }
  };
  auto gather_a = [&](int s) {
#pragma unroll
    for (int j = 0; j < RPT; j++) {
      uint32_t h[4] = {0, 0, 0, 0};
#pragma unroll
      for (int e = 0; e < 8; e++) {
        const int v = ktab[s * CL_BK + a_qj[j] * 8 + e];
        unsigned short x = 0;
        if (v >= 0 && rvalid[j]) {
          const int c = v & 0xffff, kd = (v >> 16) & 31, kh = (v >> 21) & 31, kw = (v >> 26) & 31;
          const int id = rb_d[j] + kd * a.dil[0], ih = rb_h[j] + kh * a.dil[1], iw = rb_w[j] + kw * a.dil[2];
          if ((unsigned)id < (unsigned)a.D && (unsigned)ih < (unsigned)a.H && (unsigned)iw < (unsigned)a.W)
            x = cl_load_x(a, ((size_t)nb * a.C + c) * a.Pin + ((size_t)id * a.H + ih) * a.W + iw);
        }
        h[e >> 1] |= (uint32_t)x << ((e & 1) * 16);
      }
      pend[j] = make_uint4(h[0], h[1], h[2], h[3]);
    }
  };
  auto store_a = [&](int slot) {
    __half *dst = As + slot * A_ST;
#pragma unroll
    for (int j = 0; j < RPT; j++) *reinterpret_cast<uint4 *>(dst + a_row[j] * CL_LDS + a_qj[j] * 8) = pend[j];
  };
  auto issue_b = [&](int s, int slot) {
    __half *dst = Bs + slot * B_ST;
    for (int i = tid; i < BN * 4; i += THREADS) {
      const int r = i >> 2, q = i & 3;
      nnk_cp_async16(dst + r * CL_LDS + q * 8, a.w + (size_t)(n0 + r) * a.kpad + s * CL_BK + q * 8, 16);
    }
  };

  float acc[MI][NI][4];
  nnk_acc_zero(acc);

  /* Prologue: steps 0 .. STAGES-2 in flight, one commit group each. The
   * weights are constants: their copies go out before the PDL wait (so they
   * overlap the previous kernel's tail) and join group 0; the activations,
   * which the previous kernel wrote, only after it. */
#pragma unroll
  for (int i = 0; i < STAGES - 1; i++)
    if (i < nst) issue_b(s_begin + i, i);
  nnk_pdl_wait();
#pragma unroll
  for (int i = 0; i < STAGES - 1; i++) {
    if (i < nst) {
      if (IN_CL) {
        issue_a_cl(i);
      } else {
        gather_a(s_begin + i);
        store_a(i);
      }
    }
    nnk_cp_async_commit();
  }

  for (int i = 0; i < nst; i++) {
    nnk_cp_async_wait<STAGES - 2>(); /* this thread's copies of step i have landed */
    __syncthreads();                /* everyone's have; everyone is done with slot (i - 1) % STAGES */
    const int nxt = i + STAGES - 1, nslot = nxt % STAGES;
    if (nxt < nst) {
      if (IN_CL) issue_a_cl(nslot);
      else gather_a(s_begin + nxt); /* registers now, shared memory after this step's MMAs */
      issue_b(s_begin + nxt, nslot);
    }
    nnk_cp_async_commit();
    const __half *Asl = As + (i % STAGES) * A_ST, *Bsl = Bs + (i % STAGES) * B_ST;
#pragma unroll
    for (int ks = 0; ks < CL_BK / 16; ks++) {
      uint32_t af[MI][4], bf[NI][2];
#pragma unroll
      for (int mi = 0; mi < MI; mi++)
        nnk_ldmatrix_x4(af[mi], Asl + (wm * WM + mi * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * CL_LDS + ks * 16 +
                                (lane >> 4) * 8);
#pragma unroll
      for (int n2 = 0; n2 < NI / 2; n2++)
        nnk_ldmatrix_b2(bf, n2, nnk_smem_u32(Bsl + (wn * WN + n2 * 16 + (lane & 7) + ((lane >> 4) << 3)) * CL_LDS +
                                             ks * 16 + ((lane >> 3) & 1) * 8));
      nnk_mma_tiles(acc, af, bf);
    }
    if (!IN_CL && nxt < nst) store_a(nslot); /* slot nslot was released by this step's barrier */
  }

  /* Fragment element e of (mi, ni): row lane/4 (+8 for e >= 2), column 2 (lane % 4) (+1 for odd e). */
  const int fr = wm * WM + (lane >> 2), fc = wn * WN + 2 * (lane & 3);
  cl_finish<BM, BN, THREADS, OUT_CL, 8>(a, acc, fr, fc, rank, nb, n0,
                                     [&](int r) { return cell0 + r < a.P ? cell0 + r : -1; });
}

/* The brick kernel (algos NNK_CL_ALGOS and up): NDHWC input, a 3 x 3 x 3
 * kernel, stride 1 and dilation 1 only (any padding). The CTA owns a brick
 * of BD x BH x BW output cells (the BM rows of its tile) and BN output
 * channels. Unlike k_conv_cl, which copies an A tile per (tap, channel
 * block) step, it stages the brick's input window (brick + halo, per block
 * of 32 channels) once: every tap's A fragments are ldmatrix reads of that
 * window at a per-tap offset. The weights come in groups of CL_BGROUP
 * k-steps (double-buffered, one barrier per group). Split K runs over the
 * channel blocks (a cluster of S CTAs, each a contiguous share of blocks and
 * every tap), summed by cl_finish as the tiles' are. Shared memory: two B
 * buffers of CL_BGROUP x BN rows, the windows of the CTA's channel blocks
 * ([block][window cell][CL_LDS]), then a table of the steps' offsets.
 * Measured (H100, nn-brick-h100-2026-11-25.md, nn-wgmma-h100-2026-11-25.md):
 * faster than the tiles at d = 5..13 (216-2744 cells of 128 channels; at
 * d = 13 since the four-channel split-K sum of cl_finish), slower than the
 * wgmma bricks (gpu_conv_wg.cu) on the shipped models' layers. */
constexpr int CL_BGROUP = 9; /* k-steps per copy group (two buffers: one computed, one in flight) */

struct brick_cfg {
  int bd, bh, bw, bn, warps_m, warps;
};
constexpr brick_cfg kBrickCfg[NNK_CL_BRICK_CONFIGS] = {{2, 4, 8, 64, 2, 4}, {2, 4, 8, 64, 2, 8},
                                                       {2, 4, 8, 32, 2, 4}, {2, 2, 8, 64, 2, 4},
                                                       {4, 4, 8, 64, 4, 8}, {2, 4, 8, 128, 2, 8},
                                                       {4, 4, 8, 128, 4, 8}};
constexpr int kBrickSplit[NNK_CL_BRICK_SPLITS] = {1, 2, 4};


template <int BD, int BH, int BW, int BN, int WARPS_M, int WARPS, bool OUT_CL>
__global__ void __launch_bounds__(WARPS * 32) k_conv_brick(cl_args a) {
  constexpr int BM = BD * BH * BW, THREADS = WARPS * 32, WARPS_N = WARPS / WARPS_M;
  constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N, MI = WM / 16, NI = WN / 8;
  constexpr int B_ST = BN * CL_LDS;
  static_assert(MI >= 1 && NI >= 2 && NI % 2 == 0 && WM % 16 == 0 && WARPS % WARPS_M == 0, "tile");
  extern __shared__ __align__(16) unsigned char cl_smem[];
  __half *Bs = reinterpret_cast<__half *>(cl_smem);
  __half *Win = Bs + 2 * CL_BGROUP * B_ST;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp % WARPS_M, wn = warp / WARPS_M;
  /* The kernel is 3 x 3 x 3 (nnk_cl_algo_ok): window shape and tap decoding
   * are constants, so the index math has no runtime divisions. */
  constexpr int HH = BH + 2, HW = BW + 2, wcells = brick_window(BD, BH, BW), TAPS = 27;
  const int OD = a.P / (a.OH * a.OW);
  const int nbx = (a.OW + BW - 1) / BW, nby = (a.OH + BH - 1) / BH;
  const int bx0 = (int)(blockIdx.x % (unsigned)nbx) * BW, by0 = (int)(blockIdx.x / (unsigned)nbx % (unsigned)nby) * BH;
  const int bz0 = (int)(blockIdx.x / (unsigned)(nbx * nby)) * BD;
  const int n0 = blockIdx.y * BN;
  const int rank = (int)(blockIdx.z % (unsigned)a.split), nb = (int)(blockIdx.z / (unsigned)a.split);
  const int cb_begin = a.ncb * rank / a.split, ncbl = a.ncb * (rank + 1) / a.split - cb_begin;
  const int nst = ncbl * TAPS, ngroups = (nst + CL_BGROUP - 1) / CL_BGROUP;
  /* Per step s (channel block cb_begin + s / 27, tap s % 27): x = its
   * window's offset in bytes from Win (tap applied), y = its weights' k
   * offset (k = tap * cpad + block * 32). Built once: no divisions in the loop. */
  int2 *tab = reinterpret_cast<int2 *>(Win + (size_t)ncbl_max(a) * wcells * CL_LDS);
  for (int st = tid; st < nst; st += THREADS) {
    const int cbl = st / TAPS, t = st - cbl * TAPS;
    const int tkd = t / 9, tkh = (t / 3) % 3, tkw = t % 3;
    tab[st] = make_int2((cbl * wcells + (tkd * HH + tkh) * HW + tkw) * CL_LDS * 2,
                        t * a.ncb * CL_BK + (cb_begin + cbl) * CL_BK);
  }

  /* This thread's B chunks of a step: 16-byte chunk c = tid + k THREADS of
   * BN rows x 4 (row c / 4, quarter c % 4 = tid % 4). */
  constexpr int KCH = (BN * 4 + THREADS - 1) / THREADS;
  const __half *bsrc[KCH];
  int bdst[KCH];
#pragma unroll
  for (int k = 0; k < KCH; k++) {
    const int c = tid + k * THREADS, r = c >> 2, q = c & 3;
    bsrc[k] = c < BN * 4 ? a.w + (size_t)(n0 + r) * a.kpad + q * 8 : NULL;
    bdst[k] = (r * CL_LDS + q * 8) * 2;
  }
  const uint32_t bs_u = nnk_smem_u32(Bs), win_u = nnk_smem_u32(Win);
  /* Group g: steps g CL_BGROUP .. into buffer buf (step j of the group in slot j). */
  auto issue_group = [&](int g, int buf) {
    const int s0 = g * CL_BGROUP, ns = min(CL_BGROUP, nst - s0);
    for (int j = 0; j < ns; j++) {
      const int boff = tab[s0 + j].y;
      const uint32_t slot = bs_u + (uint32_t)((buf * CL_BGROUP + j) * B_ST * 2);
#pragma unroll
      for (int k = 0; k < KCH; k++)
        if (BN * 4 % THREADS == 0 || bsrc[k]) nnk_cp_async16(slot + bdst[k], bsrc[k] + boff, 16);
    }
  };

  /* This lane's ldmatrix addresses: A (window cell of tap (0,0,0) for row
   * (lane & 7) + 8 ((lane >> 3) & 1) of each m16 tile, column half lane >> 4)
   * and B (as k_conv_cl), both before the step's offsets. */
  uint32_t aaddr[MI], baddr[NI / 2];
#pragma unroll
  for (int mi = 0; mi < MI; mi++) {
    const int r = wm * WM + mi * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
    const int cell = ((r / (BH * BW)) * HH + (r / BW) % BH) * HW + r % BW;
    aaddr[mi] = win_u + (uint32_t)((cell * CL_LDS + (lane >> 4) * 8) * 2);
  }
#pragma unroll
  for (int n2 = 0; n2 < NI / 2; n2++)
    baddr[n2] = (uint32_t)(((wn * WN + n2 * 16 + (lane & 7) + ((lane >> 4) << 3)) * CL_LDS + ((lane >> 3) & 1) * 8) * 2);

  float acc[MI][NI][4];
  nnk_acc_zero(acc);

  /* One k-step: window offset wo (bytes), B slot address bslot. */
  auto step = [&](int wo, uint32_t bslot) {
#pragma unroll
    for (int ks = 0; ks < CL_BK / 16; ks++) {
      uint32_t af[MI][4], bf[NI][2];
#pragma unroll
      for (int mi = 0; mi < MI; mi++) nnk_ldmatrix_x4(af[mi], aaddr[mi] + (uint32_t)wo + ks * 32);
#pragma unroll
      for (int n2 = 0; n2 < NI / 2; n2++) nnk_ldmatrix_b2(bf, n2, bslot + baddr[n2] + ks * 32);
      nnk_mma_tiles(acc, af, bf);
    }
  };

  nnk_pdl_launch_dependents();
  __syncthreads(); /* the step table is complete */
  /* Group 0: the weights (constants) of the first steps before the PDL
   * wait, the windows (the previous kernel's output) after it. */
  issue_group(0, 0);
  nnk_pdl_wait();
  for (int i = tid; i < ncbl * wcells * 4; i += THREADS) {
    const int q = i & 3, cell = (i >> 2) % wcells, cbl = (i >> 2) / wcells;
    const int hz = cell / (HH * HW), hy = (cell / HW) % HH, hx = cell % HW;
    const int id = bz0 - a.pad0[0] + hz, ih = by0 - a.pad0[1] + hy, iw = bx0 - a.pad0[2] + hx;
    const int c = (cb_begin + cbl) * CL_BK + q * 8;
    const bool ok = c < a.C && (unsigned)id < (unsigned)a.D && (unsigned)ih < (unsigned)a.H && (unsigned)iw < (unsigned)a.W;
    const __half *src = ok ? a.x + (((size_t)nb * a.Pin + ((size_t)id * a.H + ih) * a.W + iw) * a.C + c) : a.x;
    nnk_cp_async16(Win + (cbl * wcells + cell) * CL_LDS + q * 8, src, ok ? 16 : 0);
  }
  nnk_cp_async_commit();

  for (int g = 0; g < ngroups; g++) {
    /* Buffer (g + 1) & 1 was group g - 1's: every warp left it at the barrier
     * that ended the previous iteration. */
    if (g + 1 < ngroups) issue_group(g + 1, (g + 1) & 1);
    nnk_cp_async_commit();
    nnk_cp_async_wait<1>(); /* this thread's copies of group g (and the windows) have landed */
    __syncthreads();        /* everyone's have */
    const int s0 = g * CL_BGROUP, ns = min(CL_BGROUP, nst - s0);
    const uint32_t gslot = bs_u + (uint32_t)((g & 1) * CL_BGROUP * B_ST * 2);
    if (ns == CL_BGROUP) { /* unrolled: the table reads and copies of a full group go ahead of its MMAs */
#pragma unroll
      for (int j = 0; j < CL_BGROUP; j++) step(tab[s0 + j].x, gslot + j * B_ST * 2);
    } else {
      for (int j = 0; j < ns; j++) step(tab[s0 + j].x, gslot + j * B_ST * 2);
    }
    __syncthreads(); /* every warp is done with buffer g & 1 before group g + 2 is copied into it */
  }

  /* Row r of the tile -> output cell, -1 outside the output (partial brick). */
  auto out_cell = [&](int r) {
    const int z = bz0 + r / (BH * BW), y = by0 + (r / BW) % BH, x = bx0 + r % BW;
    return z < OD && y < a.OH && x < a.OW ? (z * a.OH + y) * a.OW + x : -1;
  };
  const int fr = wm * WM + (lane >> 2), fc = wn * WN + 2 * (lane & 3);
  cl_finish<BM, BN, THREADS, OUT_CL, 4>(a, acc, fr, fc, rank, nb, n0, out_cell);
}


size_t cl_smem_bytes(int cfg, int split, int stages, const cl_args &a, int in_cl) {
  const cl_cfg &c = kClCfg[cfg];
  size_t pipe = (size_t)stages * (c.bm + c.bn) * CL_LDS * 2 + (in_cl ? 0 : (size_t)a.kpad * 4);
  size_t red = split > 1 ? (size_t)c.bm * (c.bn + 4) * 4 : 0;
  return pipe > red ? pipe : red;
}

template <int BM, int BN, int WARPS_M, int WARPS, bool IN_CL, bool OUT_CL, int STAGES>
cudaError_t cl_launch_t(const cl_args &a, size_t smem, int batch, cudaStream_t s) {
  auto kern = k_conv_cl<BM, BN, WARPS_M, WARPS, IN_CL, OUT_CL, STAGES>;
  /* Clusters of 16 (split K 16) are beyond the portable 8: allowed per kernel. */
  static bool attr_set = false;
  if (const cudaError_t e = cl_kernel_attrs(kern, attr_set, true)) return e;
  const dim3 grid((unsigned)((a.P + BM - 1) / BM), (unsigned)((a.M + BN - 1) / BN), (unsigned)(batch * a.split));
  return nnk_launch_ex(kern, grid, dim3(WARPS * 32), smem, s, (unsigned)a.split, a);
}

template <bool IN_CL, bool OUT_CL, int ST>
cudaError_t cl_launch_c(const cl_args &a, size_t smem, int cfg, int batch, cudaStream_t s) {
  switch (cfg) {
    case 0: return cl_launch_t<64, 64, 2, 4, IN_CL, OUT_CL, ST>(a, smem, batch, s);
    case 1: return cl_launch_t<32, 64, 2, 4, IN_CL, OUT_CL, ST>(a, smem, batch, s);
    case 2: return cl_launch_t<64, 32, 2, 4, IN_CL, OUT_CL, ST>(a, smem, batch, s);
    case 3: return cl_launch_t<32, 32, 2, 4, IN_CL, OUT_CL, ST>(a, smem, batch, s);
    case 4: return cl_launch_t<64, 16, 4, 4, IN_CL, OUT_CL, ST>(a, smem, batch, s);
    case 5: return cl_launch_t<128, 16, 4, 4, IN_CL, OUT_CL, ST>(a, smem, batch, s);
    case 6: return cl_launch_t<128, 64, 2, 4, IN_CL, OUT_CL, ST>(a, smem, batch, s);
    case 7: return cl_launch_t<128, 128, 2, 8, IN_CL, OUT_CL, ST>(a, smem, batch, s);
    default: return cl_launch_t<64, 128, 2, 4, IN_CL, OUT_CL, ST>(a, smem, batch, s);
  }
}

template <bool IN_CL, bool OUT_CL>
cudaError_t cl_launch_l(const cl_args &a, size_t smem, int cfg, int stages, int batch, cudaStream_t s) {
  return stages == 8 ? cl_launch_c<IN_CL, OUT_CL, 8>(a, smem, cfg, batch, s)
                     : cl_launch_c<IN_CL, OUT_CL, 4>(a, smem, cfg, batch, s);
}

size_t brick_smem_bytes(int cfg, int split, const cl_args &a) {
  const brick_cfg &c = kBrickCfg[cfg];
  const size_t wc = (size_t)brick_window(c.bd, c.bh, c.bw), ncbl = (size_t)(a.ncb + split - 1) / split;
  /* B buffers, windows, step table */
  const size_t pipe = (size_t)2 * CL_BGROUP * c.bn * CL_LDS * 2 + ncbl * wc * CL_LDS * 2 + ncbl * a.taps * 8;
  const size_t red = split > 1 ? (size_t)c.bd * c.bh * c.bw * (c.bn + 4) * 4 : 0;
  return pipe > red ? pipe : red;
}

template <int BD, int BH, int BW, int BN, int WARPS_M, int WARPS, bool OUT_CL>
cudaError_t brick_launch_t(const cl_args &a, size_t smem, int batch, cudaStream_t s) {
  auto kern = k_conv_brick<BD, BH, BW, BN, WARPS_M, WARPS, OUT_CL>;
  static bool attr_set = false;
  if (const cudaError_t e = cl_kernel_attrs(kern, attr_set)) return e;
  const unsigned bricks = (unsigned)(((a.P / (a.OH * a.OW) + BD - 1) / BD) * ((a.OH + BH - 1) / BH) *
                                     ((a.OW + BW - 1) / BW));
  const dim3 grid(bricks, (unsigned)((a.M + BN - 1) / BN), (unsigned)(batch * a.split));
  return nnk_launch_ex(kern, grid, dim3(WARPS * 32), smem, s, (unsigned)a.split, a);
}

template <bool OUT_CL>
cudaError_t brick_launch(const cl_args &a, size_t smem, int cfg, int batch, cudaStream_t s) {
  switch (cfg) { /* kBrickCfg */
    case 0: return brick_launch_t<2, 4, 8, 64, 2, 4, OUT_CL>(a, smem, batch, s);
    case 1: return brick_launch_t<2, 4, 8, 64, 2, 8, OUT_CL>(a, smem, batch, s);
    case 2: return brick_launch_t<2, 4, 8, 32, 2, 4, OUT_CL>(a, smem, batch, s);
    case 3: return brick_launch_t<2, 2, 8, 64, 2, 4, OUT_CL>(a, smem, batch, s);
    case 4: return brick_launch_t<4, 4, 8, 64, 4, 8, OUT_CL>(a, smem, batch, s);
    case 5: return brick_launch_t<2, 4, 8, 128, 2, 8, OUT_CL>(a, smem, batch, s);
    default: return brick_launch_t<4, 4, 8, 128, 4, 8, OUT_CL>(a, smem, batch, s);
  }
}

/* Brick algo (>= NNK_CL_ALGOS) -> brick configuration and split. */
void brick_decode(int algo, int *cfg, int *split) {
  const int j = algo - NNK_CL_ALGOS;
  *cfg = j % NNK_CL_BRICK_CONFIGS;
  *split = kBrickSplit[j / NNK_CL_BRICK_CONFIGS];
}

/* algo -> tile configuration, split and ring depth. */
void cl_decode(int algo, int *cfg, int *split, int *stages) {
  *cfg = algo % NNK_CL_CONFIGS;
  *split = kClSplit[algo / NNK_CL_CONFIGS % NNK_CL_SPLITS];
  *stages = kClStages[algo / (NNK_CL_CONFIGS * NNK_CL_SPLITS)];
}


}  // namespace

int nnk_cl_supported(const nnk_conv &p, int in_cl) {
  if (p.N < 1 || p.N > 8191 || p.C < 1 || p.M < 1 || p.C > 65535) return 0;
  for (int i = 0; i < 3; i++)
    if (p.k[i] < 1 || p.k[i] > 31 || p.stride[i] < 1 || p.out3[i] < 1) return 0;
  if (in_cl && p.C % 8 != 0) return 0; /* a cell's channels start 16-byte aligned */
  cl_args a;
  cl_fill(p, in_cl, NULL, NULL, 1, &a);
  if (!in_cl && a.kpad > CL_MAX_GATHER_K) return 0;
  const int64_t pin = (int64_t)p.in3[0] * p.in3[1] * p.in3[2], pout = (int64_t)a.P;
  if ((int64_t)p.N * pin * p.C >= (1ll << 31) || (int64_t)p.N * pout * p.M >= (1ll << 31)) return 0;
  return 1;
}

int nnk_cl_algo_ok(const nnk_conv &p, int in_cl, int algo) {
  if (algo < 0 || algo >= NNK_CL_ALL_ALGOS || !nnk_cl_supported(p, in_cl)) return 0;
  int j;
  bool flat;
  if (wg_algo_decode(algo, &j, &flat)) return wg_algo_ok(p, in_cl, j, flat);
  if (algo >= NNK_CL_NARROW_BASE) return narrow_algo_ok(p, in_cl, algo - NNK_CL_NARROW_BASE);
  const int mw = cl_width_max(p);
  if (algo >= NNK_CL_ALGOS) { /* the brick kernel: NDHWC input, 3 x 3 x 3, stride 1, dilation 1 */
    /* CUDAQ_NN_CL_NO_BRICK=1: not offered (A/B against the tiles alone). */
    static const int no_brick = cl_env_on("CUDAQ_NN_CL_NO_BRICK");
    if (no_brick || !cl_brick_shape(p, in_cl)) return 0;
    int cfg, split;
    brick_decode(algo, &cfg, &split);
    if (kBrickCfg[cfg].bn > mw) return 0;
    cl_args a;
    cl_fill(p, in_cl, NULL, NULL, split, &a);
    if (split > 1 && (!device_has_clusters() || split > a.ncb)) return 0;
    return brick_smem_bytes(cfg, split, a) <= cl_smem_max();
  }
  int cfg, split, stages;
  cl_decode(algo, &cfg, &split, &stages);
  if (kClCfg[cfg].bn > mw) return 0;
  /* Split K over clusters of at most 8 CTAs, the portable size. With 16
   * (non-portable clusters) compute-sanitizer synccheck reports the
   * k-loop's __syncthreads as reached by divergent warps (H100, CUDA 13,
   * 2026-11-25; every split <= 8 is clean): not offered until explained.
   * CUDAQ_NN_CL_SPLIT16=1 offers it again (A/B, and to look into it). */
  static const int split16 = cl_env_on("CUDAQ_NN_CL_SPLIT16");
  if (split > 8 && !split16) return 0;
  cl_args a;
  cl_fill(p, in_cl, NULL, NULL, split, &a);
  if (split > 1 && (!device_has_clusters() || split > a.ksteps)) return 0;
  return cl_smem_bytes(cfg, split, stages, a, in_cl) <= cl_smem_max();
}

int nnk_cl_first_ok(const nnk_conv &p, int algo, int cd) {
  int j;
  bool flat;
  return wg_algo_decode(algo, &j, &flat) && nnk_cl_supported(p, 1) && wg_first_ok(p, j, flat, cd);
}

size_t nnk_cl_weight_elems(const nnk_conv &p, int in_cl) {
  cl_args a;
  cl_fill(p, in_cl, NULL, NULL, 1, &a);
  return cl_pack_off(p.M, a.kpad, cl_brick_shape(p, in_cl) ? CL_PACK_NARROW : CL_PACK_WG) +
         (narrow_shape(p, in_cl) ? narrow_weight_elems(p) : 0);
}

void nnk_cl_pack_weights(const nnk_conv &p, int in_cl, const float *w, __half *out) {
  cl_args a;
  cl_fill(p, in_cl, NULL, NULL, 1, &a);
  const int cpad = a.ncb * CL_BK;
  for (size_t i = 0, n = cl_pack_off(p.M, a.kpad, CL_PACK_WG); i < n; i++) out[i] = __float2half(0.0f);
  for (int m = 0; m < p.M; m++)
    for (int c = 0; c < p.C; c++)
      for (int t = 0; t < a.taps; t++) {
        const int k = in_cl ? t * cpad + c : t * p.C + c;
        out[(size_t)m * a.kpad + k] = __float2half(w[((size_t)m * p.C + c) * a.taps + t]);
      }
  if (cl_brick_shape(p, in_cl)) wg_pack(p, w, out + cl_pack_off(p.M, a.kpad, CL_PACK_WG));
  if (narrow_shape(p, in_cl)) narrow_pack(p, w, out + cl_pack_off(p.M, a.kpad, CL_PACK_NARROW));
}

cudaError_t nnk_launch_cl(const nnk_conv &p, int in_cl, int out_cl, const __half *w, const float *b, int algo,
                          cudaStream_t s, const nnk_conv_fuse *f) {
  if (f && ((f->x_idx && in_cl) || (f->epi && out_cl))) return cudaErrorInvalidValue;
  if (f && f->first.b && !nnk_cl_first_ok(p, algo, f->first.cd)) return cudaErrorInvalidValue; /* wgmma only */
  if ((int64_t)p.out3[0] * p.out3[1] * p.out3[2] == 0 || p.M == 0 || p.N == 0) return cudaSuccess;
  if (!nnk_cl_algo_ok(p, in_cl, algo)) return cudaErrorInvalidConfiguration;
  if (!in_cl && reinterpret_cast<uintptr_t>(p.x) % 2 != 0) return cudaErrorInvalidConfiguration;
  if (in_cl && reinterpret_cast<uintptr_t>(p.x) % 16 != 0) return cudaErrorInvalidConfiguration;
  int cfg, split, stages, j;
  bool flat;
  if (wg_algo_decode(algo, &j, &flat)) {
    cl_args a;
    cl_fill(p, in_cl, w, b, wg_split(j), &a, f);
    return wg_launch(a, j, flat, out_cl, p.N, s);
  }
  if (algo >= NNK_CL_NARROW_BASE) {
    cl_args a;
    cl_fill(p, in_cl, w, b, 1, &a, f);
    a.w = w + cl_pack_off(p.M, a.kpad, CL_PACK_NARROW);
    return narrow_launch(a, algo - NNK_CL_NARROW_BASE, out_cl, p.N, s);
  }
  if (algo >= NNK_CL_ALGOS) {
    brick_decode(algo, &cfg, &split);
    cl_args a;
    cl_fill(p, in_cl, w, b, split, &a, f);
    const size_t smem = brick_smem_bytes(cfg, split, a);
    return out_cl ? brick_launch<true>(a, smem, cfg, p.N, s) : brick_launch<false>(a, smem, cfg, p.N, s);
  }
  cl_decode(algo, &cfg, &split, &stages);
  cl_args a;
  cl_fill(p, in_cl, w, b, split, &a, f);
  const size_t smem = cl_smem_bytes(cfg, split, stages, a, in_cl);
  if (in_cl)
    return out_cl ? cl_launch_l<true, true>(a, smem, cfg, stages, p.N, s)
                  : cl_launch_l<true, false>(a, smem, cfg, stages, p.N, s);
  return out_cl ? cl_launch_l<false, true>(a, smem, cfg, stages, p.N, s)
                : cl_launch_l<false, false>(a, smem, cfg, stages, p.N, s);
}
