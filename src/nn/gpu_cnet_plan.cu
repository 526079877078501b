/* The cluster kernel's plan (gpu_cnet.cu runs it; the contract is in
 * gpu_kernels.cuh): work split, shared-memory layout in either mode, and
 * the grid mode's buffer sizes. Host code only. */
#include "gpu_cnet.cuh"
#include "gpu_kernels.cuh"

namespace {
size_t align16(size_t v) { return (v + 15) / 16 * 16; }
}  // namespace

/* The widest activation row of the plan's layers, in halves. */
static int cn_max_row(const nnk_cnet &s) {
  int max_row = 0;
  for (int l = 0; l < s.L; l++) {
    const int a = cn_row(s.layer[l].C), b = cn_row(s.layer[l].M);
    max_row = a > max_row ? a : max_row;
    max_row = b > max_row ? b : max_row;
  }
  return max_row;
}

/* The layout after the windows: weight buffers, split sums, the zero row, masks. */
static size_t cn_layout_tail(nnk_cnet *s, size_t at, int max_wbytes) {
  for (int b = 0; b < 2; b++) {
    s->off_w[b] = at;
    at += align16((size_t)max_wbytes);
  }
  s->off_red = at; /* the split-tap partial sums: 8 warps x 32 lanes x 16 floats */
  at += (size_t)CN_WARPS * 32 * 16 * sizeof(float);
  s->off_zero = at;
  at += 128;
  s->off_mask = at; /* cn_masks: a word per owned row */
  at += align16((size_t)s->R * sizeof(uint32_t));
  return at;
}

int nnk_cnet_plan(const nnk_conv *const *layers, int L, int cl, int split, int wg, int gm, int push, nnk_cnet *s,
                  size_t *smem) {
  if (L < 1 || L > NNK_CNET_MAX_LAYERS || cl < 1 || cl > (gm ? 4096 : 16)) return 0;
  *s = nnk_cnet{};
#if !defined(CUDAQ_NN_HAVE_SM90A)
  wg = 0; /* no sm_90a code in this build */
#endif
  const nnk_conv &p0 = *layers[0];
  int max_wbytes = 0, max_wbytes_wg = 0; /* wg: the weights plus their zero blocks */
  for (int l = 0; l < L; l++) {
    const nnk_conv &p = *layers[l];
    if (!nnk_stack_layer_ok(p) || p.N != p0.N || p.C > CN_MAX_CH || p.M > CN_MAX_CH ||
        (l && p.C != layers[l - 1]->M))
      return 0;
    for (int i = 0; i < 3; i++)
      if (p.in3[i] != p0.in3[i]) return 0;
    const int taps = p.k[0] * p.k[1] * p.k[2], c16 = (p.C + 15) / 16;
    const size_t elems = nnk_stack_weight_elems(p); /* [c16][taps][2][mst][8] */
    nnk_cnet_layer &ly = s->layer[l];
    ly.C = p.C;
    ly.M = p.M;
    ly.mst = (int)(elems / ((size_t)c16 * taps * 16));
    for (int i = 0; i < 3; i++) ly.k[i] = p.k[i];
    ly.relu = p.relu;
    ly.w_bytes = (int)(elems * sizeof(__half));
    if (ly.mst < 32 || ly.mst % 16) return 0; /* four n8 tiles are loaded in pairs */
    if (ly.w_bytes > max_wbytes) max_wbytes = ly.w_bytes;
    if (ly.w_bytes + cn_tail_bytes(ly.mst) > max_wbytes_wg) max_wbytes_wg = ly.w_bytes + cn_tail_bytes(ly.mst);
  }
  s->L = L;
  const int max_row = cn_max_row(*s);
  s->N = p0.N;
  s->D = p0.in3[0];
  s->H = p0.in3[1];
  s->W = p0.in3[2];
  const long long P = (long long)s->D * s->H * s->W;
  if (P < 1 || P > (1 << 20)) return 0;
  s->P = (int)P;
  s->cl = cl;
  s->R = (s->P + cl - 1) / cl;
  s->gm = gm ? 1 : 0;
  /* Grid mode: every CTA owns a row (a CTA without one would read its
   * neighbours' rows without their waiting for it: cn_wait_flag's
   * symmetric neighbourhood needs owners on both sides). */
  if (gm) s->cl = (s->P + s->R - 1) / s->R;
  const int mtiles = (s->R + 15) / 16;
  /* m16 tiles per warp, or m64 blocks per warpgroup (two warpgroups) */
  s->nb = (mtiles + 3) / 4;
  /* wgmma (H200, nn-cluster-wgmma-h200-2026-11-28.md): faster than
   * mma.sync alone with one m64 block a CTA (d = 7: 18.3 against 18.7 us,
   * d = 9: 17.4 against 19.7), not with three (d = 13: no faster alone,
   * 2-2.5 us slower in the realtime graph at 100k requests/s). The engine
   * asks for 2 only when planned for one inference at a time. */
  s->wg = wg == 1 || (wg == 2 && s->nb == 1);
  if (s->wg) max_wbytes = max_wbytes_wg;
  s->mi = s->wg ? (s->nb + 1) / 2 : (mtiles + CN_WARPS - 1) / CN_WARPS;
  if (s->mi > CN_MAX_MI) return 0;
  for (int l = 0; l < L; l++) /* n8 tiles per warp (cn_layer): past 16 output channels the weights are zero */
    s->layer[l].nt = split && s->layer[l].M <= 16 ? 2 : 4;
  s->r_magic = (unsigned)((((unsigned long long)1 << 32) + s->R - 1) / s->R); /* q / R = umulhi(q, r_magic): q R < 2^32 */
  s->halo = s->H * s->W + s->W + 1;
  s->win_rows = s->R + 2 * s->halo;
  /* (channel, row) index / win_rows as a multiply-high: exact while index x win_rows < 2^32 */
  if ((unsigned long long)layers[0]->C * s->win_rows * s->win_rows >= (1ull << 32)) return 0;
  s->wr_magic = (unsigned)((((unsigned long long)1 << 32) + s->win_rows - 1) / s->win_rows);
  /* push: two windows and no activation buffers, where they fit (else the gather) */
  s->push = push && !gm && L > 1;
  for (;;) {
    size_t at = 0;
    for (int b = 0; b < 2; b++) { /* grid mode: the activations live in global memory (gact) */
      s->off_act[b] = at;
      if (!gm && !s->push) at += align16((size_t)s->R * max_row * 2);
    }
    s->off_win = at;
    at += align16((size_t)s->win_rows * max_row * 2);
    s->off_win2 = at;
    if (s->push) at += align16((size_t)s->win_rows * max_row * 2);
    at = cn_layout_tail(s, at, max_wbytes);
    if (at <= CN_MAX_SMEM) {
      *smem = at;
      return 1;
    }
    if (!s->push) return 0;
    s->push = 0;
  }
}

void nnk_cnet_grid_bytes(const nnk_cnet &s, size_t *act_bytes, size_t *flag_bytes) {
  *act_bytes = (size_t)s.N * s.P * cn_max_row(s) * sizeof(__half);
  *flag_bytes = (size_t)s.N * (s.L > 1 ? s.L - 1 : 1) * s.cl * sizeof(unsigned);
}
