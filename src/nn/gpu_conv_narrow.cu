/* The narrow channels-last convolution (issue 12): a 3 x 3 x 3 brick
 * convolution with at most 16 output channels, e.g. a predecoder's last
 * layer (128 -> 9), as algos NNK_CL_NARROW_BASE and up (the brick kernels'
 * contract, gpu_kernels.cuh).
 *
 * Why. On such a layer the wgmma brick (gpu_conv_wg.cu) is all overhead:
 * H100, d = 13, 128 -> 9 in 8.5 us of which 6.7 remain with no MMAs and no
 * weights (bench/results/nn-experiments-h100-2026-11-25b.md): its split K
 * runs over a cluster (two cluster barriers, remote reads of the partners'
 * tiles) and its weights arrive in mbarrier-guarded groups. Sixteen output
 * channels of a few thousand cells are ~0.4 GFLOP at most, so a CTA here
 * takes every input channel itself and splits K among its 8-24 warps instead:
 * no cluster, no mbarrier, one block barrier after its input window has
 * landed and two around the in-CTA sum.
 *
 * Shape. A CTA owns one plane of BH x 8 output cells (BH / 2 m16 tiles) and
 * all (<= 16) output channels (two n8 tiles). Shared memory: the weights of
 * every tap and every block of 16 input channels in the m16n8k16 B fragment
 * order (narrow_pack: per (tap, block) 32 lanes x 16 bytes, one conflict-free
 * 16-byte load per lane and k-step), copied before the PDL wait (they are
 * constants; the regb configurations instead load each work item's 9
 * fragments from global memory into the warp's registers, the first item's
 * before the PDL wait, the next one's ahead of the current one's MMAs: the
 * H200's choice at d = 13, 5.1 against 6.1 us); then the input window, 3 x (BH + 2) x 10 cells, a cell's
 * channels contiguous (row stride an odd multiple of 16 bytes: ldmatrix
 * conflict-free), channels past C zero-filled. Warp w of W (8, 16 or 24)
 * takes the work items (block, kd) w, w + W, ...: 9 taps each, every tap an ldmatrix of the
 * window at its offset per m16 tile and two MMAs. The warps' FP32 partial
 * tiles are then summed in a fixed order through shared memory (the window's
 * space), + bias, ReLU, stored by cl_store (NDHWC or NCDHW, the epilogue
 * chain included). */
#include "gpu_conv_cl.cuh"

namespace nncl {
namespace {

constexpr int NW_BW = 8;  /* output cells per brick row */
constexpr int NW_RLD = 20; /* row stride (floats) of a warp's partial tile in the sum */
/* Brick rows (the CTA's cells: bh x 8), warps (K split among them), and
 * where the weights are read from: shared memory (staged before the PDL
 * wait) or, regb, global memory straight into each warp's registers (a
 * work item's 9 fragments ahead of its MMAs; the CTA then needs shared
 * memory for the window and the in-CTA sum only). */
struct nw_cfg {
  int bh, warps, regb;
};
constexpr nw_cfg kNwCfg[NNK_CL_NARROW_CONFIGS] = {{2, 8, 0},  {4, 8, 0},  {8, 8, 0}, {2, 16, 0}, {4, 16, 0},
                                                  {4, 24, 0}, {2, 8, 1},  {4, 8, 1}, {2, 16, 1}, {4, 16, 1}};

/* Blocks of 16 input channels (the last one zero-padded). */
__host__ __device__ inline int nw_ncb(int C) { return (C + 15) / 16; }
/* Window row stride in halves: every block plus 8, an odd multiple of 16 bytes. */
__host__ __device__ inline int nw_rs(int C) { return nw_ncb(C) * 16 + 8; }
__host__ __device__ inline size_t nw_weight_bytes(int C) { return (size_t)27 * nw_ncb(C) * 32 * 16; }

size_t nw_smem_bytes(const nw_cfg &c, int C) {
  const size_t win = (size_t)3 * (c.bh + 2) * (NW_BW + 2) * nw_rs(C) * 2;
  const size_t red = (size_t)c.warps * c.bh * NW_BW * NW_RLD * 4;
  return (c.regb ? 0 : nw_weight_bytes(C)) + (win > red ? win : red);
}

__device__ __forceinline__ uint4 nw_lds128(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
  return v;
}

/* Work item it's 9 B fragments of this lane from the packed weights (regb). */
__device__ __forceinline__ void nw_ldb(const __half *w, int ncb, int it, int lane, uint4 (&b)[9]) {
  const int cb = it / 3, kd = it - cb * 3;
  const uint4 *p = reinterpret_cast<const uint4 *>(w) + (size_t)(kd * 9 * ncb + cb) * 32 + lane;
#pragma unroll
  for (int j = 0; j < 9; j++) b[j] = __ldg(p + (size_t)j * ncb * 32);
}

template <int BH, int NW_WARPS, bool OUT_CL, bool REGB>
__global__ void __launch_bounds__(NW_WARPS * 32) k_conv_narrow(cl_args a) {
  constexpr int NW_THREADS = NW_WARPS * 32, BM = BH * NW_BW, MT = BM / 16, HH = BH + 2, HW = NW_BW + 2, WCELLS = 3 * HH * HW;
  static_assert(BM % 16 == 0, "m16 tiles");
  extern __shared__ __align__(16) unsigned char cl_smem[];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int ncb = nw_ncb(a.C), rs = nw_rs(a.C), cpr = 2 * ncb; /* 16-byte chunks per window cell */
  const size_t wsb = REGB ? 0 : nw_weight_bytes(a.C); /* shared-memory weights */
  const uint32_t ws_u = nnk_smem_u32(cl_smem), win_u = ws_u + (uint32_t)wsb;
  const int items = 3 * ncb;
  const int nbx = (a.OW + NW_BW - 1) / NW_BW, nby = (a.OH + BH - 1) / BH;
  const int bx0 = (int)(blockIdx.x % (unsigned)nbx) * NW_BW, by0 = (int)(blockIdx.x / (unsigned)nbx % (unsigned)nby) * BH;
  const int bz0 = (int)(blockIdx.x / (unsigned)(nbx * nby)), nb = (int)blockIdx.z;

  nnk_pdl_launch_dependents();
  /* The weights are constants: copied (or the first item's loaded) before the dependency wait. */
  uint4 bnext[9];
  if constexpr (REGB) {
    if (warp < items) nw_ldb(a.w, ncb, warp, lane, bnext);
  } else {
    for (int i = tid, n = 27 * ncb * 32; i < n; i += NW_THREADS)
      nnk_cp_async16(ws_u + (uint32_t)i * 16, a.w + (size_t)i * 8);
    nnk_cp_async_commit();
  }
  nnk_pdl_wait(); /* the input is the previous kernel's output */
  const __half *xb = a.x + (size_t)nb * a.Pin * a.C;
  for (int i = tid; i < WCELLS * cpr; i += NW_THREADS) {
    const int c = i / cpr, q = i - c * cpr;
    const int id = bz0 - a.pad0[0] + c / (HH * HW), ih = by0 - a.pad0[1] + (c / HW) % HH,
              iw = bx0 - a.pad0[2] + c % HW;
    const bool ok = q * 8 < a.C && (unsigned)id < (unsigned)a.D && (unsigned)ih < (unsigned)a.H &&
                    (unsigned)iw < (unsigned)a.W;
    nnk_cp_async16(win_u + (uint32_t)(c * rs + q * 8) * 2,
                   ok ? xb + (((size_t)id * a.H + ih) * a.W + iw) * a.C + q * 8 : a.x, ok ? 16 : 0);
  }
  nnk_cp_async_commit();
  nnk_cp_async_wait<0>(); /* this thread's weight and window copies have landed */
  __syncthreads();        /* everyone's have */

  float acc[MT][2][4];
  nnk_acc_zero(acc);
  /* This lane's ldmatrix row of m16 tile mt (tile row r: brick row r / 8,
   * column r % 8) at tap (0, 0, 0), and its 8-channel half of a block. */
  uint32_t arow[MT];
#pragma unroll
  for (int mt = 0; mt < MT; mt++) {
    const int r = mt * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
    arow[mt] = win_u + (uint32_t)((((r / NW_BW) * HW + r % NW_BW) * rs + (lane >> 4) * 8) * 2);
  }
  for (int it = warp; it < items; it += NW_WARPS) {
    const int cb = it / 3, kd = it - cb * 3;
    const uint32_t aoff = (uint32_t)((kd * HH * HW * rs + cb * 16) * 2);
    const uint32_t bbase = ws_u + (uint32_t)(((kd * 9 * ncb + cb) * 32 + lane) * 16);
    uint4 bcur[9];
    if constexpr (REGB) { /* this item's fragments; the next item's loads go ahead of its MMAs */
#pragma unroll
      for (int j = 0; j < 9; j++) bcur[j] = bnext[j];
      if (it + NW_WARPS < items) nw_ldb(a.w, ncb, it + NW_WARPS, lane, bnext);
    }
#pragma unroll
    for (int j = 0; j < 9; j++) {
      const uint4 bq = REGB ? bcur[j] : nw_lds128(bbase + (uint32_t)(j * ncb * 512));
      const uint32_t toff = aoff + (uint32_t)(((j / 3) * HW + j % 3) * rs * 2);
#pragma unroll
      for (int mt = 0; mt < MT; mt++) {
        uint32_t af[4];
        nnk_ldmatrix_x4(af, arow[mt] + toff);
        nnk_mma16816(acc[mt][0], af, bq.x, bq.y);
        nnk_mma16816(acc[mt][1], af, bq.z, bq.w);
      }
    }
  }

  /* The warps' partial tiles summed in warp order (deterministic) through
   * shared memory, in the window's space: the barrier first lets every warp
   * finish its ldmatrix reads of the window. */
  __syncthreads();
  float *red = reinterpret_cast<float *>(cl_smem + wsb);
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int ni = 0; ni < 2; ni++)
#pragma unroll
      for (int e = 0; e < 4; e++)
        red[(warp * BM + mt * 16 + (lane >> 2) + (e >> 1) * 8) * NW_RLD + ni * 8 + 2 * (lane & 3) + (e & 1)] =
            acc[mt][ni][e];
  __syncthreads();
  const int nw = items < NW_WARPS ? items : NW_WARPS;
  for (int i = tid; i < BM * 16; i += NW_THREADS) {
    /* Output-contiguous order: channels fastest for NDHWC, cells for NCDHW. */
    const int r = OUT_CL ? i / 16 : i % BM, col = OUT_CL ? i % 16 : i / BM;
    const int y = by0 + r / NW_BW, x = bx0 + r % NW_BW;
    if (col >= a.M || y >= a.OH || x >= a.OW) continue;
    float v = 0.0f;
    for (int w = 0; w < nw; w++) v += red[(w * BM + r) * NW_RLD + col];
    cl_store<OUT_CL>(a, nb, (bz0 * a.OH + y) * a.OW + x, col, v);
  }
}

template <int BH, int WARPS, bool OUT_CL, bool REGB>
cudaError_t nw_launch_t(const cl_args &a, size_t smem, int batch, cudaStream_t s) {
  auto kern = k_conv_narrow<BH, WARPS, OUT_CL, REGB>;
  static bool attr_set = false;
  if (const cudaError_t e = cl_kernel_attrs(kern, attr_set)) return e;
  const unsigned od = (unsigned)(a.P / (a.OH * a.OW));
  const dim3 grid(od * (unsigned)((a.OH + BH - 1) / BH) * (unsigned)((a.OW + NW_BW - 1) / NW_BW), 1, (unsigned)batch);
  return nnk_launch_ex(kern, grid, dim3(WARPS * 32), smem, s, 1, a);
}

template <bool OUT_CL>
cudaError_t nw_launch_o(const cl_args &a, size_t smem, int cfg, int batch, cudaStream_t s) {
  switch (cfg) { /* kNwCfg */
    case 0: return nw_launch_t<2, 8, OUT_CL, false>(a, smem, batch, s);
    case 1: return nw_launch_t<4, 8, OUT_CL, false>(a, smem, batch, s);
    case 2: return nw_launch_t<8, 8, OUT_CL, false>(a, smem, batch, s);
    case 3: return nw_launch_t<2, 16, OUT_CL, false>(a, smem, batch, s);
    case 4: return nw_launch_t<4, 16, OUT_CL, false>(a, smem, batch, s);
    case 5: return nw_launch_t<4, 24, OUT_CL, false>(a, smem, batch, s);
    case 6: return nw_launch_t<2, 8, OUT_CL, true>(a, smem, batch, s);
    case 7: return nw_launch_t<4, 8, OUT_CL, true>(a, smem, batch, s);
    case 8: return nw_launch_t<2, 16, OUT_CL, true>(a, smem, batch, s);
    default: return nw_launch_t<4, 16, OUT_CL, true>(a, smem, batch, s);
  }
}

}  // namespace

int narrow_shape(const nnk_conv &p, int in_cl) { return cl_brick_shape(p, in_cl) && p.M >= 1 && p.M <= 16; }

int narrow_algo_ok(const nnk_conv &p, int in_cl, int j) {
  /* CUDAQ_NN_CL_NO_NARROW=1: not offered (A/B against the other kernels). */
  static const int no_narrow = cl_env_on("CUDAQ_NN_CL_NO_NARROW");
  if (no_narrow || j < 0 || j >= NNK_CL_NARROW_CONFIGS || !narrow_shape(p, in_cl) || device_cc() < 80) return 0;
  return nw_smem_bytes(kNwCfg[j], p.C) <= cl_smem_max();
}

size_t narrow_weight_elems(const nnk_conv &p) { return nw_weight_bytes(p.C) / 2; }

void narrow_pack(const nnk_conv &p, const float *w, __half *out) {
  /* [tap][block of 16 channels][lane][8 halves]: lane l's B fragments of
   * the two n8 tiles (b0, b1 of tile 0, then of tile 1); fragment register
   * r, half h holds k = 2 (l % 4) + h + 8 r, output channel l / 4 + 8 tile. */
  const int ncb = nw_ncb(p.C);
  for (int t = 0; t < 27; t++)
    for (int cb = 0; cb < ncb; cb++)
      for (int l = 0; l < 32; l++)
        for (int e = 0; e < 8; e++) {
          const int ni = e / 4, r = (e / 2) % 2, h = e % 2;
          const int c = cb * 16 + 2 * (l % 4) + h + 8 * r, m = l / 4 + 8 * ni;
          const float v = c < p.C && m < p.M ? w[((size_t)m * p.C + c) * 27 + t] : 0.0f;
          out[(((size_t)t * ncb + cb) * 32 + l) * 8 + e] = __float2half(v);
        }
}

cudaError_t narrow_launch(const cl_args &a, int j, int out_cl, int batch, cudaStream_t s) {
  const size_t smem = nw_smem_bytes(kNwCfg[j], a.C);
  return out_cl ? nw_launch_o<true>(a, smem, j, batch, s) : nw_launch_o<false>(a, smem, j, batch, s);
}

}  // namespace nncl
