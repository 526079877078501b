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
#include "gpu_stack.cuh"

namespace {

__global__ void __launch_bounds__(ST_THREADS, 1) k_stack(const __grid_constant__ nnk_stack s) {
  extern __shared__ __align__(16) unsigned char st_smem[];
  stack_run(s, st_smem);
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

int nnk_stack_plan(const nnk_conv *const *layers, int L, int sms, int force_bn, int force_ks, size_t smem_limit,
                   nnk_stack *s, size_t *smem, size_t *acc_floats) {
  if (L < 2 || L > NNK_STACK_MAX_LAYERS || sms < 1) return 0;
  if (smem_limit == 0 || smem_limit > ST_MAX_SMEM) smem_limit = ST_MAX_SMEM;
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
        if (layer_smem(c, S) + ST_FIXED_SMEM > smem_limit || c.cs / 16 * p.k[0] * p.k[1] * p.k[2] > ST_MAX_STEPS ||
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
