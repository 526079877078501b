/* A narrow chain of convolutions as one thread-block cluster (issue 12; the
 * contract is in gpu_kernels.cuh, the engine's choice in gpu_tune.cu).
 *
 * Why. The predecoders' fast family (3 -> 32 -> 32 -> 32 -> 9, 3 x 3 x 3)
 * is far too small for a kernel per layer: each layer costs about 3 us of
 * launch, fill and drain (5.8 us at d = 13) for well under 1 us of tensor
 * work, and the grid-wide stack kernel (gpu_stack.cu) pays a grid barrier
 * and an L2 round trip per layer. Here one cluster of CL CTAs (16, or 8
 * where 16 cannot be placed) holds the whole activation volume in shared
 * memory: a layer's result never leaves the SMs, and the only
 * synchronisation between layers is one cluster barrier.
 *
 * Work. CTA r owns positions [r R, r R + R) of the volume in row-major
 * (d, h, w) order and keeps their activations in shared memory, FP16,
 * channels last ([position][channel], a row of round16(C) + 8 halves so
 * that ldmatrix rows fall in distinct banks). A layer:
 *  1. gathers its window: the owned positions plus a halo of H W + W + 1
 *     on each side, read through distributed shared memory from whichever
 *     CTA owns them (layer 0: from the input tensor, NCDHW FP16, in global
 *     memory), 16 bytes at a time;
 *  2. runs an implicit GEMM on tensor cores (mma.sync m16n8k16, FP16 in,
 *     FP32 accumulate): rows = owned positions, columns = output channels
 *     (four n8 tiles; the packed weights are zero past M), K = taps x input
 *     channels. Warp w takes the m16 tiles w, w + 8, ... (with fewer than 8
 *     tiles, a tile's taps are split among 8 / tiles warps whose partial
 *     sums meet in shared memory); per (tap, 16-channel chunk) it loads the
 *     B fragments once (ldmatrix from the layer's weights, packed as the
 *     stack kernel packs them and copied to shared memory one layer ahead
 *     by one bulk copy, cn_load_weights) and then each of its tiles' A
 *     fragment, whose rows are the window rows shifted by the tap (a row
 *     whose tap falls outside the volume reads a zero row instead: the
 *     zero padding);
 *  3. adds the bias, applies ReLU and writes FP16 into the other of two
 *     activation buffers (the last layer: NCDHW FP16 to the output tensor).
 * Two activation buffers make one barrier per layer enough: layer l writes
 * buffer l % 2, which every CTA last read in layer l - 1's gather, before
 * it arrived at the barrier that ended layer l - 1.
 *
 * Rows pushed (s.push, the default where two windows fit: every shipped
 * fast model; 2026-11-29): no gather and no barrier between layers. Two
 * windows, layer l reading window l % 2; the epilogue writes the CTA's
 * own rows into the next window, and after the layer thread q issues one
 * bulk copy (cp.async.bulk shared::cta -> shared::cluster) of the rows
 * that CTA q's next window holds, counted on q's mbarrier for that window
 * (armed by q with the bytes it expects: its window's rows inside the
 * volume but its own). A CTA starts layer l once its window's mbarrier
 * phase completes: it waits only for its neighbours, when their rows
 * land. Overwrites are safe because the neighbourhood is symmetric: CTA q
 * pushed its layer l - 1 rows (which this CTA's layer l needed) only after
 * its own layer l - 1 products, its last read of the window this CTA now
 * writes into. One cluster barrier after the mbarriers' init (waited
 * before the first push) and the one before exit remain. (Pushing with
 * 16-byte remote stores and a release arrival was slower, below: the
 * arrival waited for every remote store.) H200: cluster kernel alone d7
 * fast 17.0 -> 15.6 us, d9 17.5 -> 16.4, d13 31.1 -> 28.4; qec-realtime
 * d13 fast, 12 workers, 100k requests/s: graph's kernels 41.75 -> 38.75-39
 * us p50. CUDAQ_NN_CNET_PUSH=0 gathers (comparisons).
 *
 * Status (H200, 2026-11-28, bench/results/nn-cluster-h200-2026-11-28.md,
 * nn-cluster-throughput-h200-2026-11-28.md): correct everywhere it
 * applies; alone slower than the per-layer kernels on the fast
 * predecoders (d = 5 and 7: 20-21 us against 13; d = 13: 34 us against
 * 19), but it holds 16 SMs where they spread over the GPU, so an engine
 * planned for concurrent inferences (options.concurrent, qec-realtime's
 * default) takes it: d = 13 fast hybrid 100k requests/s with 12 workers
 * and pre-launched graphs, against 88k planned for latency.
 * CUDAQ_NN_CNET=1 forces it, =0 leaves it out of tuning,
 * CUDAQ_NN_CNET_PROF=1 records CTA 0's phases (describe). Per d = 13
 * layer: gather 1.7-2.0 us (layer 0's start-up from global memory 3),
 * products + epilogue 5.5 (the epilogue waits for the last MMAs), bound
 * more by the shared-memory reads of the fragments (every warp loads the
 * layer's B fragments, 1 KB a step) than by mma.sync; 4 product warps of
 * up to 4 tiles each read half of that and were measured no faster as a
 * whole (H200, nn-cluster-pdl-h200-2026-11-28.md). The start-up that
 * reads only constants overlaps the kernel before (PDL).
 *
 * wgmma (cn_layer_wg, sm_90a; nn-cluster-wgmma-h200-2026-11-28.md): the
 * same A fragments from registers, B read once per warpgroup from shared
 * memory, batches of steps per fence. At N = 32 an m64n32k16 wgmma took
 * ~37-48 cycles (16 at the tensor peak); per 32 -> 32 layer at d = 13 the
 * products went 4.3 -> 3.7 us but the kernel did not get faster, and in
 * the realtime graph at 100k requests/s it was 2-2.5 us slower (d = 7:
 * 0.25-0.5 us): used where it measured faster, one inference at a time
 * with one m64 block a CTA (d = 5 to 9); mma.sync for concurrent engines.
 * Measured and not kept (same file): the rows pushed into the neighbours'
 * next window by 16-byte remote stores (the release arrival waits for
 * every remote store: slower; bulk copies on mbarriers, above, are kept), layer 0's taps along w folded into its channels
 * (its products 2.2 -> 0.8 us at d = 13, the kernel no faster). The
 * critical path is the window loads and barrier waits of the CTAs whose
 * window lies inside the volume; the next lever is more SMs per inference
 * (two clusters, or the per-layer kernels), not less work per CTA.
 *
 * Weights by bulk copy (2026-11-29, nn-cluster-grid-h200-2026-11-29.md):
 * one cp.async.bulk by thread 0 per layer, on an mbarrier per buffer,
 * where every thread issued 16-byte cp.async copies (0.5-1 us of a layer's
 * critical path for the 55 KB of a 32 -> 32 layer): cluster kernel alone
 * d = 7 18.7 -> 16.1 us, d = 13 32.6 -> 30.0; in the realtime graph at
 * 100k requests/s (d = 13 fast, 12 workers) the graph's kernels 44.75 ->
 * 40.5 us p50.
 *
 * Grid mode (nnk_cnet::gm, the engine's STACK_CGRID): the same layers on a
 * cooperative grid of ceil(P / R) CTAs per batch item, for volumes the
 * cluster's 16 SMs hold slowly or not at all. A layer's rows go to global
 * memory (two buffers, read back through L2 with ld.global.cg), and in
 * place of the cluster barrier each CTA releases a flag per layer
 * (st.release.gpu after the CTA barrier) and, before its next gather,
 * acquires the flags of only the CTAs whose rows its window holds (a
 * symmetric set: those are also the CTAs that read its rows, so two
 * buffers are enough). Flags count runs (epoch = this CTA's own layer-0
 * flag + 1), so nothing is reset between runs. H200, d = 13 fast, CTA 0:
 * per layer ~1.5 us flag wait + gather, ~2.4 us products and epilogue;
 * 19.3 us at 48 rows a CTA (58 CTAs) against 30.0 for the cluster and 18.9
 * for the per-layer kernels; at 18^3 cells (no cluster plan) 23.1 against
 * 26.8 for the per-layer kernels, which AUTO then keeps. Only for engines
 * planned for one inference at a time: concurrent engines' cooperative
 * grids take turns (qec-realtime d = 13 fast at 100k requests/s: 66k/s).
 *
 * Tried, not kept (2026-11-29): at d = 13 (11 m16 tiles on 8 warps) the
 * 3 tiles past the first 8 split by taps over 2 warps each, so that a
 * warp's longest chain is 54 + 27 steps instead of 2 x 54: slower (cluster
 * kernel 30.0 -> 34.8 us; realtime graph's kernels 40.5 -> 46.0): two
 * tiles in one step share the step's B fragments, so 54 two-tile steps
 * cost less than 81 one-tile steps plus the partial sums.
 *
 * Batch: cluster n of the grid (grid mode: CTAs [n cl, n cl + cl)) runs
 * batch item n. */
#include <cooperative_groups.h>

#include "gpu_cnet.cuh"
#include "gpu_ew.cuh"
#include "gpu_kernels.cuh"
#include "gpu_mma.cuh"

namespace {

namespace cg = cooperative_groups;


#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
/* Layer l's packed weights into buf: one bulk copy (the TMA engine) by
 * thread 0, completing the next phase of the buffer's mbarrier bar (the
 * reader waits on it: cn_wait_weights); nothing past the last layer. The
 * buffer's earlier readers finished before the __syncthreads before this
 * call. (cp.async by every thread, before: its issue took 0.5-1 us of the
 * layer's critical path for 55 KB at d = 13, H200.) */
__device__ __forceinline__ void cn_load_weights(const nnk_cnet &s, int l, unsigned char *buf, uint32_t bar) {
  if (l >= s.L) return;
  const int wb = s.layer[l].w_bytes; /* a multiple of 16 (nnk_stack_weight_elems: blocks of 8 halves x 2) */
  if (threadIdx.x == 0) {
    nnk_fence_proxy_async(); /* the buffer's generic-proxy reads before the copy's async-proxy writes */
    nnk_mbar_arrive_expect_tx(bar, (uint32_t)wb);
    nnk_bulk_g2s(nnk_smem_u32(buf), s.layer[l].w, (uint32_t)wb, bar);
  }
  if (s.wg) /* cn_layer_wg's zero blocks after the weights (this buffer held another layer's) */
    for (int i = wb + threadIdx.x * 16; i < wb + cn_tail_bytes(s.layer[l].mst); i += CN_THREADS * 16)
      *reinterpret_cast<uint4 *>(buf + i) = make_uint4(0, 0, 0, 0);
}
/* Waits for layer l's weights (buffer l % 2, its (l / 2)-th load): acquire,
 * the other end the bulk copy's complete_tx in cn_load_weights. */
__device__ __forceinline__ void cn_wait_weights(int l, uint32_t bar) { nnk_mbar_wait(bar, (uint32_t)(l >> 1) & 1u); }

/* The taps of each owned row that stay inside the volume, for kernel dims
 * k: bit t of mask[r] (t = (a k1 + b) k2 + c, the packed weights' tap
 * order) set when tap t of position p0 + r is inside. Computed once per
 * kernel (again only for a layer whose kernel dims differ from the
 * previous layer's), so that a layer's row setup is one shared-memory
 * load per tile instead of three divisions and a loop over the taps. */
__device__ __forceinline__ void cn_masks(const nnk_cnet &s, const int *k, int p0, int nown, uint32_t *mask) {
  const int HW = s.H * s.W;
  for (int r = threadIdx.x; r < nown; r += CN_THREADS) {
    const int p = p0 + r;
    const int pd = p / HW, ph = (p / s.W) % s.H, pw = p % s.W;
    uint32_t vd = 0, vh = 0, vw = 0, m = 0;
    for (int a = 0; a < k[0]; a++) vd |= (unsigned)(pd + a - (k[0] - 1) / 2 >= 0 && pd + a - (k[0] - 1) / 2 < s.D) << a;
    for (int b = 0; b < k[1]; b++) vh |= (unsigned)(ph + b - (k[1] - 1) / 2 >= 0 && ph + b - (k[1] - 1) / 2 < s.H) << b;
    for (int c = 0; c < k[2]; c++) vw |= (unsigned)(pw + c - (k[2] - 1) / 2 >= 0 && pw + c - (k[2] - 1) / 2 < s.W) << c;
    for (int a = 0, t = 0; a < k[0]; a++)
      for (int b = 0; b < k[1]; b++, t += k[2])
        if ((vd >> a) & (vh >> b) & 1u) m |= vw << t;
    mask[r] = m;
  }
}

/* The positions [lo, hi) of the volume that a window starting at position
 * base (its row 0) holds: the one home of that range for the push's
 * expected bytes, the pusher's copies and grid mode's flag waits. Empty
 * (hi <= lo) for a window past the volume's end (a CTA without rows where
 * cl > P / R, cluster mode only). */
struct cn_span {
  int lo, hi;
};
__device__ __forceinline__ cn_span cn_in_volume(const nnk_cnet &s, int base) {
  return cn_span{max(base, 0), min(base + s.win_rows, s.P)};
}

/* The window's bytes that other CTAs push for layer l (>= 1): its rows
 * inside the volume but this CTA's own. */
__device__ __forceinline__ uint32_t cn_push_bytes(const nnk_cnet &s, int l, int nown, int base) {
  const cn_span v = cn_in_volume(s, base);
  const int rows = max(0, v.hi - v.lo) - nown;
  return (uint32_t)(rows * cn_row(s.layer[l].C) * 2);
}

/* Layer 0's window from s.x (C channels, NCDHW FP16, batch item n), the
 * window's rows inside the volume (a row outside is never read: every tap
 * there is padding), but the channels in skip (bit c: channel c). Each
 * thread issues CN_BATCH loads before it stores any, so that their
 * latencies overlap. */
__device__ __forceinline__ void cn_window_x(const nnk_cnet &s, int C, int n, int base, int row_in, __half *win,
                                           uint32_t skip) {
  const __half *xn = s.x + (size_t)n * C * s.P;
  const int total = C * s.win_rows; /* (channel, row) pairs, rows fastest */
  for (int i0 = 0; i0 < total; i0 += CN_THREADS * CN_BATCH) {
    __half v[CN_BATCH];
    int at[CN_BATCH];
#pragma unroll
    for (int u = 0; u < CN_BATCH; u++) {
      const int i = i0 + u * CN_THREADS + (int)threadIdx.x;
      const int c = (int)__umulhi((unsigned)i, s.wr_magic); /* i / win_rows */
      const int j = i - c * s.win_rows, q = base + j;
      const bool ok = i < total && q >= 0 && q < s.P && !((skip >> c) & 1u);
      at[u] = ok ? j * row_in + c : -1;
      v[u] = ok ? xn[(size_t)c * s.P + q] : __float2half(0.0f);
    }
#pragma unroll
    for (int u = 0; u < CN_BATCH; u++)
      if (at[u] >= 0) win[at[u]] = v[u];
  }
}

/* Folded copy: this thread's batch of (dynamic channel, window row) pairs
 * from pair i0 on, rows fastest: e[u] the element of s.fold.x (-1: none,
 * the copy's constant zero or a row outside the volume), at[u] its place
 * in the window. */
__device__ __forceinline__ void cn_fold_indices(const nnk_cnet &s, int i0, int base, int row_in,
                                                int32_t (&e)[CN_BATCH], int (&at)[CN_BATCH]) {
  const int total = s.fold.cd * s.win_rows;
#pragma unroll
  for (int u = 0; u < CN_BATCH; u++) {
    const int i = i0 + u * CN_THREADS + (int)threadIdx.x;
    const int k = i >= s.win_rows ? 1 : 0; /* cd <= NNK_FIRST_MAX_CD = 2 */
    const int j = i - k * s.win_rows, q = base + j;
    const bool ok = i < total && q >= 0 && q < s.P;
    e[u] = ok ? __ldg(s.fold.idx + (size_t)k * s.P + q) : -1;
    at[u] = j * row_in + s.fold.ch[k];
  }
}
static_assert(NNK_FIRST_MAX_CD == 2, "cn_fold_indices splits a pair index into at most two channels");

/* Grid mode (s.gm): the flag of (batch item n, layer l, CTA r), and its
 * two ends. */
__device__ __forceinline__ unsigned *cn_flag(const nnk_cnet &s, int n, int l, int r) {
  return s.flags + ((size_t)n * (s.L - 1) + l) * s.cl + r;
}
__device__ __forceinline__ unsigned cn_ld_acquire(const unsigned *p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void cn_st_release(unsigned *p, unsigned v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}
/* Spins until the flag reaches this run's epoch (counters wrap: compared as
 * a signed difference). Every CTA of a cooperative grid is resident, so the
 * owner always gets there; a wait past 2 s (a broken invariant, not load)
 * traps, so that the launch fails with an error instead of hanging. */
__device__ __forceinline__ void cn_wait_flag(const unsigned *f, unsigned epoch) {
  unsigned long long t0 = 0;
  for (unsigned i = 1; (int)(cn_ld_acquire(f) - epoch) < 0; i++) {
    if (i % 1024) continue;
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (!t0) t0 = t;
    else if (t - t0 > 2000000000ull) __trap();
  }
}

/* The A operand's rows (cn_layer, cn_layer_wg): for m16 tile `tile` of the
 * owned rows, this lane's ldmatrix x4 row (lanes 0-7 rows 0-7, 8-15 rows
 * 8-15, lane / 16 the k half) as its window address, k half included, and
 * the taps of that row inside the volume (cn_masks; none for a row past the
 * CTA's or with use false: every tap then reads the zero row). */
__device__ __forceinline__ void cn_a_lane(const nnk_cnet &s, uint32_t win, int row_in, const uint32_t *mask, int nown,
                                          int tile, bool use, uint32_t &abase, uint32_t &vmask) {
  const int lane = threadIdx.x % 32;
  const int r = tile * 16 + (lane % 8) + 8 * ((lane / 8) % 2);
  abase = win + (uint32_t)((r + s.halo) * row_in * 2) + (lane / 16) * 16;
  vmask = r < nown && use ? mask[r] : 0u;
}

/* The epilogue of one m16 tile (bias, ReLU, FP16) from its accumulators in
 * the m16n8 C layout: rows lane / 4 and + 8, columns 2 (lane % 4) and + 1
 * of each n8 tile. Writes the next layer's activations (act_out, zeros past
 * M up to round16(M)) or, in the last layer, NCDHW FP16 to the output. */
template <int NT>
__device__ __forceinline__ void cn_store(const nnk_cnet &s, const nnk_cnet_layer &ly, bool last, int n, int p0,
                                         int nown, int tile, const float *bias_s, const float (&acc)[NT][4],
                                         __half *act_out) {
  const int lane = threadIdx.x % 32;
  const int row_out = cn_row(ly.M);
#pragma unroll
  for (int j = 0; j < NT; j++) {
    const int c0 = j * 8 + (lane % 4) * 2;
    if (c0 >= row_out - 8) break; /* past the row's channels (round16(M)) */
    float bias[2];
    bool keep[2];
#pragma unroll
    for (int e = 0; e < 2; e++) {
      keep[e] = c0 + e < ly.M;
      bias[e] = bias_s[c0 + e]; /* zero past M */
    }
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
      const int r = tile * 16 + lane / 4 + 8 * hr;
      if (r >= nown) continue;
      float v[2];
#pragma unroll
      for (int e = 0; e < 2; e++) {
        float x = acc[j][2 * hr + e] + bias[e];
        if (ly.relu) x = nnk_relu_nan(x);
        v[e] = keep[e] ? x : 0.0f; /* padding channels stay zero for the next layer */
      }
      if (!last) {
        *reinterpret_cast<__half2 *>(act_out + (size_t)r * row_out + c0) = __floats2half2_rn(v[0], v[1]);
      } else {
        __half *y = s.y + (size_t)n * ly.M * s.P + p0 + r;
        if (keep[0]) y[(size_t)c0 * s.P] = __float2half(v[0]);
        if (keep[1]) y[(size_t)(c0 + 1) * s.P] = __float2half(v[1]);
      }
    }
  }
}

/* Layer l's implicit GEMM and epilogue: MI m16 tiles per warp (one kernel
 * per MI) and NT n8 tiles of output channels, 4, or 2 for a layer of at
 * most 16 output channels (nnk_cnet_layer::nt; the packed weights hold at
 * least 32 columns, zero past M, so a tile past the layer's never changes
 * a result): no branch between the loop body's loads and MMAs.
 *
 * Work split: with at least 8 m16 tiles in the CTA, warp w takes tiles w,
 * w + 8, ... over every tap (ks = 1); with fewer, the taps are split
 * among ks = 8 / tiles warps per tile (MI = 1), whose partial sums meet in
 * shared memory (red) before the epilogue. A tile slot past the CTA's
 * tiles reads the zero row (its results are dropped).
 *
 * tap_off[t]: tap t's window offset in bytes; mask[r]: the taps of row r
 * inside the volume (cn_masks); the others read the zero row instead. */
template <int MI, int NT>
__device__ __forceinline__ void cn_layer(const nnk_cnet &s, const nnk_cnet_layer &ly, bool last, int n, int p0,
                                         int nown, uint32_t win, uint32_t wts, uint32_t zero_row,
                                         const int *tap_off, const uint32_t *mask, const float *bias_s, float *red,
                                         __half *act_out, long long *sub) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row_in = cn_row(ly.C);
  const int c16 = (ly.C + 15) / 16;
  const int mtiles = (nown + 15) / 16;
  const int taps = ly.k[0] * ly.k[1] * ly.k[2];
  const int ks = MI == 1 && mtiles > 0 && mtiles < CN_WARPS ? CN_WARPS / mtiles : 1;
  const int tile0 = ks > 1 ? warp % mtiles : warp, group = ks > 1 ? warp / mtiles : 0;
  const bool active = group < ks; /* warps past ks x tiles: nothing to do */
  const int t_begin = group * taps / ks, t_end = (group + 1) * taps / ks;
  /* This lane's A row in each of its tiles: the window address of its
   * position (k half included) and which taps stay inside the volume. */
  const uint32_t a_half = (lane / 16) * 16;
  uint32_t abase[MI], vmask[MI];
#pragma unroll
  for (int i = 0; i < MI; i++) cn_a_lane(s, win, row_in, mask, nown, tile0 + CN_WARPS * i, active, abase[i], vmask[i]);
  if (sub) sub[0] = clock64();
  const uint32_t zbase = zero_row + a_half;
  float acc[MI][NT][4];
  nnk_acc_zero(acc);
  /* B: lane -> n8 tile 2 j2 + lane / 16, k half (lane / 8) % 2, row lane % 8;
   * one (chunk, tap) block of the packed weights is 2 mst 8 halves. */
  const uint32_t b_lane =
      wts + (uint32_t)(((((lane / 8) % 2) * ly.mst + (lane / 16) * 8 + lane % 8) * 8) * 2);
  const uint32_t b_blk = (uint32_t)(2 * ly.mst * 8 * 2);
  /* The products, software-pipelined: step kk = (tap t, 16-channel chunk
   * ch), t = kk / c16; the fragments of step kk + 1 are loaded before step
   * kk's MMAs are issued, so that the shared-memory latency of the loads
   * overlaps the tensor work instead of standing between every two steps
   * (measured: a step cost ~185 cycles with load -> MMA in each step). */
  if (active) {
    const int kk_begin = t_begin * c16, kk_end = t_end * c16;
    uint32_t a_cur[MI][4], b_cur[NT][2], a_nxt[MI][4], b_nxt[NT][2];
    auto load = [&](int kk, uint32_t(&a)[MI][4], uint32_t(&b)[NT][2]) {
      const int t = c16 == 2 ? kk >> 1 : kk, ch = kk - t * c16; /* c16 is 1 or 2 (at most 32 channels) */
      const uint32_t wt = b_lane + (uint32_t)(ch * taps + t) * b_blk;
#pragma unroll
      for (int j2 = 0; j2 < NT / 2; j2++) {
        uint32_t r[4];
        nnk_ldmatrix_x4(r, wt + j2 * 256);
        b[2 * j2][0] = r[0];
        b[2 * j2][1] = r[1];
        b[2 * j2 + 1][0] = r[2];
        b[2 * j2 + 1][1] = r[3];
      }
      const uint32_t off = (uint32_t)tap_off[t], chb = (uint32_t)ch * 32;
#pragma unroll
      for (int i = 0; i < MI; i++) nnk_ldmatrix_x4(a[i], (((vmask[i] >> t) & 1u) ? abase[i] + off : zbase) + chb);
    };
    load(kk_begin, a_cur, b_cur); /* t_begin < t_end for an active warp */
#pragma unroll 2
    for (int kk = kk_begin; kk < kk_end; kk++) {
      load(min(kk + 1, kk_end - 1), a_nxt, b_nxt); /* the last step reloads its own: no branch */
#pragma unroll
      for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < NT; j++) nnk_mma16816(acc[i][j], a_cur[i], b_cur[j][0], b_cur[j][1]);
#pragma unroll
      for (int i = 0; i < MI; i++)
#pragma unroll
        for (int e = 0; e < 4; e++) a_cur[i][e] = a_nxt[i][e];
#pragma unroll
      for (int j = 0; j < NT; j++) b_cur[j][0] = b_nxt[j][0], b_cur[j][1] = b_nxt[j][1];
    }
  }
  if (sub) sub[1] = clock64();
  if (ks > 1) { /* the partial sums of a tile's ks warps, in fragment order */
    float4 *mine = reinterpret_cast<float4 *>(red) + (size_t)(warp * 32 + lane) * NT;
    if (active)
#pragma unroll
      for (int j = 0; j < NT; j++) mine[j] = make_float4(acc[0][j][0], acc[0][j][1], acc[0][j][2], acc[0][j][3]);
    __syncthreads();
    if (group == 0) {
      for (int g = 1; g < ks; g++) {
        const float4 *o = reinterpret_cast<const float4 *>(red) + (size_t)((warp + g * mtiles) * 32 + lane) * NT;
#pragma unroll
        for (int j = 0; j < NT; j++) {
          const float4 v = o[j];
          acc[0][j][0] += v.x, acc[0][j][1] += v.y, acc[0][j][2] += v.z, acc[0][j][3] += v.w;
        }
      }
    }
    if (group != 0) return;
  }
  if (sub) sub[2] = clock64();
#pragma unroll
  for (int i = 0; i < MI; i++) {
    if (tile0 + CN_WARPS * i >= mtiles) break;
    cn_store<NT>(s, ly, last, n, p0, nown, tile0 + CN_WARPS * i, bias_s, acc[i], act_out);
  }
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* The products of one warpgroup's first NB blocks (of MB) over steps
 * [kk_begin, kk_end) (step kk = ch taps + t, chunk-major: the packed
 * weights' block order, block kk of B 2 mst 16 bytes after block kk - 1).
 *
 * Batches of G steps: one wgmma.fence, then G x NB wgmmas back to back (a
 * chain into the same accumulators needs no fence between them) and one
 * commit. Measured on an H200: a fence and commit per step left the tensor
 * pipe waiting on each step's wgmma latency (~170 cycles a step with one
 * m64n32 wgmma, against ~16 of tensor work). A batch's A fragments (each
 * warp its tile's, ldmatrix as cn_layer loads them, masked rows from the
 * zero row) are loaded while the batch before runs: two register sets, a
 * set reloaded only after wgmma.wait_group shows the wgmmas that read it
 * complete. Steps past kk_end (the last batch's rest) read the zero row for
 * A and for B the blocks after: finite weights or the CN_TAIL_BLOCKS zero
 * blocks after the layer's: they add 0. A step's B descriptor is the
 * batch's plus g blocks, computed before the fence: no instruction but a
 * wgmma may write a wgmma's inputs inside a batch, and the loop keeps its
 * plain shape (a for (;;) with breaks was rotated into one that broke
 * that), else ptxas serializes every wgmma (C7513). */
template <int NB, int MB, int NT>
__device__ __forceinline__ void cn_wg_run(float (&acc)[MB][NT][4], const uint32_t (&abase)[MB],
                                          const uint32_t (&vmask)[MB], uint32_t zbase, uint64_t desc, int mst,
                                          const int *tap_off, int taps, int kk_begin, int kk_end) {
  /* two sets of G x NB A fragments in registers: more (G = 4 at NB = 2, G = 2
   * at NB >= 3) ran out of registers (spills, or wgmmas serialized: C7512) */
  constexpr int G = NB == 1 ? 4 : NB == 2 ? 2 : 1;
  static_assert(G - 1 <= CN_TAIL_BLOCKS, "a batch reads at most CN_TAIL_BLOCKS blocks past the end");
  if (kk_begin >= kk_end) return;
  const uint32_t bstep = (uint32_t)(2 * mst); /* a block, in the descriptor's 16-byte units */
  const uint64_t db0 = desc + (uint64_t)kk_begin * bstep;
  int tn = kk_begin % taps, cn = kk_begin / taps; /* the tap and chunk of the next step load reads */
  auto load = [&](int kk, uint32_t(&a)[G][NB][4]) {
#pragma unroll
    for (int g = 0; g < G; g++) {
      const bool in = kk + g < kk_end;
      const uint32_t off = (uint32_t)tap_off[tn], chb = (uint32_t)cn * 32;
#pragma unroll
      for (int i = 0; i < NB; i++)
        nnk_ldmatrix_x4(a[g][i], (in && ((vmask[i] >> tn) & 1u) ? abase[i] + off : zbase) + (in ? chb : 0u));
      if (++tn == taps) tn = 0, cn++; /* past the end: any tap, the zero row */
    }
  };
  auto issue = [&](int kk, const uint32_t(&a)[G][NB][4]) {
    uint64_t db[G];
#pragma unroll
    for (int g = 0; g < G; g++) {
      db[g] = db0 + (uint64_t)((uint32_t)(kk - kk_begin + g) * bstep);
      asm volatile("" : "+l"(db[g])); /* computed here, before the fence, not between the wgmmas */
    }
    nnk_wg_fence(); /* the batch's ldmatrix results and the accumulators before the wgmmas read them */
#pragma unroll
    for (int g = 0; g < G; g++)
#pragma unroll
      for (int i = 0; i < NB; i++) {
        if constexpr (NT == 4)
          nnk_wgmma_rs_n32(acc[i], a[g][i], db[g]);
        else
          nnk_wgmma_rs_n16(acc[i], a[g][i], db[g]);
      }
    nnk_wg_commit();
  };
  uint32_t ax[G][NB][4], ay[G][NB][4];
  load(kk_begin, ax);
  for (int kk = kk_begin; kk < kk_end; kk += 2 * G) {
    issue(kk, ax);
    if (kk + G < kk_end) {
      nnk_wg_wait<1>(); /* the batch before, which read ay, is complete */
      load(kk + G, ay);
      issue(kk + G, ay);
    }
    if (kk + 2 * G < kk_end) {
      nnk_wg_wait<1>(); /* the batch that read ax is complete */
      load(kk + 2 * G, ax);
    }
  }
  nnk_wg_wait<0>();
#pragma unroll
  for (int i = 0; i < NB; i++)
#pragma unroll
    for (int j = 0; j < NT; j++) nnk_wg_pin(acc[i][j]);
}

/* Layer l's implicit GEMM on warpgroup MMAs (s.wg; sm_90a), then the same
 * epilogue as cn_layer. The CTA's rows are s.nb m64 blocks (4 m16 tiles;
 * every CTA computes as many, a short last CTA's extra rows read the zero
 * row and are dropped), shared by the two warpgroups: warpgroup g takes
 * blocks g, g + 2, ... below 2 floor(nb / 2) over every step, and with nb
 * odd both take the last block over half the steps each (warpgroup g half
 * g), its partial sums meeting in shared memory (red): per warpgroup MB =
 * ceil(nb / 2) accumulator blocks, the shared one last; first the half
 * with all MB, then the other half with the MB - 1 whole blocks. The B
 * operand (the step's block of the packed weights: core matrices of 8
 * output channels x 16 bytes, k halves mst x 16 bytes apart, n8 groups
 * 128) is read from shared memory once per warpgroup, where cn_layer's
 * 8 warps each load it (half of that kernel's shared-memory reads). */
template <int MB, int NT>
__device__ __forceinline__ void cn_layer_wg(const nnk_cnet &s, const nnk_cnet_layer &ly, bool last, int n, int p0,
                                            int nown, uint32_t win, uint32_t wts, uint32_t zero_row,
                                            const int *tap_off, const uint32_t *mask, const float *bias_s,
                                            float *red, __half *act_out, long long *sub) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  /* the warpgroup, through a shuffle so that the compiler knows it is
   * warp-uniform: a wgmma under a branch it cannot prove uniform is
   * serialized (ptxas C7520) */
  const int wg = __shfl_sync(0xffffffffu, warp / 4, 0), wl = warp % 4;
  const int row_in = cn_row(ly.C);
  const int mtiles = (nown + 15) / 16;
  const int taps = ly.k[0] * ly.k[1] * ly.k[2], c16 = (ly.C + 15) / 16, K = c16 * taps;
  const bool shared = s.nb & 1; /* the last block split between the warpgroups */
  const uint32_t a_half = (lane / 16) * 16;
  uint32_t abase[MB], vmask[MB];
#pragma unroll
  for (int i = 0; i < MB; i++)
    cn_a_lane(s, win, row_in, mask, nown, (shared && i == MB - 1 ? s.nb - 1 : wg + 2 * i) * 4 + wl, true, abase[i],
              vmask[i]);
  if (sub) sub[0] = clock64();
  const uint32_t zbase = zero_row + a_half;
  float acc[MB][NT][4];
  nnk_acc_zero(acc);
  const uint64_t desc = nnk_wg_desc(wts, (uint32_t)ly.mst * 16, 128);
  if (!shared) {
    cn_wg_run<MB, MB, NT>(acc, abase, vmask, zbase, desc, ly.mst, tap_off, taps, 0, K);
  } else {
    const int h0 = wg ? K / 2 : 0, h1 = wg ? K : K / 2; /* this warpgroup's half of the shared block */
    cn_wg_run<MB, MB, NT>(acc, abase, vmask, zbase, desc, ly.mst, tap_off, taps, h0, h1);
    if constexpr (MB > 1) {
      const int o0 = wg ? 0 : K / 2, o1 = wg ? K / 2 : K; /* the other half, whole blocks only */
      cn_wg_run<MB - 1, MB, NT>(acc, abase, vmask, zbase, desc, ly.mst, tap_off, taps, o0, o1);
    }
  }
  if (sub) sub[1] = clock64();
  if (shared) { /* warpgroup 1's partial sums of the shared block, in fragment order */
    float4 *o = reinterpret_cast<float4 *>(red) + (size_t)(wl * 32 + lane) * NT;
    if (wg == 1)
#pragma unroll
      for (int j = 0; j < NT; j++)
        o[j] = make_float4(acc[MB - 1][j][0], acc[MB - 1][j][1], acc[MB - 1][j][2], acc[MB - 1][j][3]);
    __syncthreads();
    if (wg == 0)
#pragma unroll
      for (int j = 0; j < NT; j++) {
        const float4 v = o[j];
        acc[MB - 1][j][0] += v.x, acc[MB - 1][j][1] += v.y, acc[MB - 1][j][2] += v.z, acc[MB - 1][j][3] += v.w;
      }
  }
  if (sub) sub[2] = clock64();
#pragma unroll
  for (int i = 0; i < MB; i++) {
    const bool sh = shared && i == MB - 1;
    if (sh && wg != 0) continue; /* warpgroup 0 stores the shared block */
    const int tile = (sh ? s.nb - 1 : wg + 2 * i) * 4 + wl;
    if (tile >= mtiles) continue;
    cn_store<NT>(s, ly, last, n, p0, nown, tile, bias_s, acc[i], act_out);
  }
}
#endif
#endif

/* MI: m16 tiles per warp (cn_layer), or with WG m64 blocks per warpgroup
 * (cn_layer_wg, sm_90a code only: the host sets s.wg only where it is). */
template <int MI, bool WG>
__global__ void __launch_bounds__(CN_THREADS, 1) k_cnet(const __grid_constant__ nnk_cnet s) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(16) unsigned char sm[];
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = (int)(blockIdx.x % s.cl); /* the cluster's block rank (1D clusters), or the grid-mode rank */
  const int n = blockIdx.x / s.cl;
  const int p0 = rank * s.R;
  const int nown = max(0, min(s.R, s.P - p0));
  const int base = p0 - s.halo; /* the position of window row 0 */
  const int tid = threadIdx.x;
  /* buffer b % 2 of each pair, without an array in local memory */
  auto act = [&](int b) { return reinterpret_cast<__half *>(sm + ((b & 1) ? s.off_act[1] : s.off_act[0])); };
  auto wbuf = [&](int b) { return sm + ((b & 1) ? s.off_w[1] : s.off_w[0]); };
  __half *win = reinterpret_cast<__half *>(sm + s.off_win);
  const __half *zero_row = reinterpret_cast<const __half *>(sm + s.off_zero);
  float *red = reinterpret_cast<float *>(sm + s.off_red);

  /* CUDAQ_NN_CNET_PROF: cycle stamps of CTA 0 (the stack's slot layout) */
  long long *prof = s.prof && blockIdx.x == 0 && tid == 0 ? s.prof : nullptr;
  if (prof) prof[0] = clock64();
  long long *start = prof ? prof + NNK_STACK_PROF_SLOTS : nullptr; /* the first layer's start-up stamps */
  /* The zero row (read after the first layer's __syncthreads). The
   * activation buffers need no clearing: the epilogue writes every channel
   * up to round16(M) of every owned row, zeros past M, and nothing reads
   * past them. */
  if (tid < 8) reinterpret_cast<uint4 *>(sm + s.off_zero)[tid] = make_uint4(0, 0, 0, 0); /* 128 bytes: a row's k half and chunk offsets stay inside */
  uint32_t *mask = reinterpret_cast<uint32_t *>(sm + s.off_mask);

  unsigned epoch = 0;                        /* grid mode: this run's flag value (read after the PDL wait) */
  __shared__ int tap_off[27];                /* window offset of each tap, bytes */
  __shared__ __align__(8) unsigned long long wbar[2]; /* the weight buffers' mbarriers */
  auto wb_bar = [&](int b) { return nnk_smem_u32(&wbar[b & 1]); };
  /* push: the two windows (layer l reads window l % 2) and their mbarriers */
  __shared__ __align__(8) unsigned long long xbar[2];
  auto xb = [&](int b) { return nnk_smem_u32(&xbar[b & 1]); };
  __half *win2 = reinterpret_cast<__half *>(sm + s.off_win2);
  auto window = [&](int l) { return s.push && (l & 1) ? win2 : win; };
  if (tid == 0) { /* before this thread's first copy names them; the other threads wait on them after a __syncthreads */
    nnk_mbar_init(wb_bar(0), 1);
    nnk_mbar_init(wb_bar(1), 1);
    if (s.push) {
      nnk_mbar_init(xb(0), 1);
      nnk_mbar_init(xb(1), 1);
      nnk_mbar_arrive_expect_tx(xb(1), cn_push_bytes(s, 1, nown, base)); /* layer 1's window */
    }
    nnk_mbar_init_fence();
  }
  /* push: release of the initialised mbarriers to the cluster (other end:
   * the wait before this CTA's first push, after layer 0, which every
   * other CTA's first push into this one follows too) */
  if (s.push) nnk_cluster_arrive_relaxed();
  __shared__ float bias_s[CN_MAX_CH];        /* the layer's bias, zero past M */
  for (int l = 0; l < s.L; l++) {
    const nnk_cnet_layer &ly = s.layer[l];
    const int row_in = cn_row(ly.C), c16 = (ly.C + 15) / 16;
    if (l > 0 && (ly.k[0] != s.layer[l - 1].k[0] || ly.k[1] != s.layer[l - 1].k[1] || ly.k[2] != s.layer[l - 1].k[2]))
      cn_masks(s, ly.k, p0, nown, mask); /* the last reads of the old masks ended before layer l - 1's final __syncthreads */
    /* loaded first, stored to shared memory after the window's loads are
     * issued: its latency overlaps theirs (a global load in the epilogue
     * would wait once per output tile) */
    const float bias_v = tid < CN_MAX_CH && ly.b && tid < ly.M ? __ldg(ly.b + tid) : 0.0f;
    if (tid < 27) {
      const int k1 = ly.k[1], k2 = ly.k[2];
      const int a = tid / (k1 * k2), b = (tid / k2) % k1, c = tid % k2;
      const int off = (a - (ly.k[0] - 1) / 2) * s.H * s.W + (b - (k1 - 1) / 2) * s.W + (c - (k2 - 1) / 2);
      tap_off[tid] = off * row_in * 2; /* read after the __syncthreads below */
    }
    if (start && l == 0) start[0] = clock64();
    /* 1. The window. Each thread issues CN_BATCH loads before it stores
     * any, so that their latencies (global memory, or another SM's shared
     * memory) overlap. */
    if (l == 0) {
      /* The input, NCDHW in global memory, transposed into the window.
       * Everything that reads only constants comes first: layer 0's
       * weights, its bias, the masks, the cleared window (channels past C
       * must be zero: their weights are, but NaN * 0 is not), and with a
       * folded copy (s.fold.x) the copy's constant channels (s.x) and the
       * first batch of indices into its run-time buffer. With PDL this
       * start-up overlaps the kernel before, which wrote the input (s.x,
       * or s.fold.x): nnk_pdl_wait (griddepcontrol.wait) returns once that
       * grid has completed and its stores are visible, and only then is
       * the input read. (Without PDL the wait is a no-op and the kernel
       * starts after the one before, as it did when the first input loads
       * were issued ahead of this start-up to overlap their latency with
       * it.) */
      if (start) start[1] = clock64();
      cn_load_weights(s, 0, wbuf(0), wb_bar(0));
      if (start) start[2] = clock64();
      if (tid < CN_MAX_CH) bias_s[tid] = bias_v;
      cn_masks(s, ly.k, p0, nown, mask); /* read after this layer's __syncthreads */
      if (start) start[3] = clock64();
      uint4 *w4 = reinterpret_cast<uint4 *>(win);
      for (int i = tid; i < s.win_rows * row_in / 8; i += CN_THREADS) w4[i] = make_uint4(0, 0, 0, 0);
      __syncthreads(); /* cleared before any thread stores a value */
      /* Folded copy: the constant channels only (the run-time ones stay
       * cleared until the stores after the wait, by other threads: no
       * barrier orders the two, so they must not touch the same halves) */
      int32_t fe[CN_BATCH];
      int fat[CN_BATCH];
      uint32_t dyn = 0; /* the run-time channels, a bit each (C <= CN_MAX_CH = 32) */
      for (int k = 0; s.fold.x && k < s.fold.cd; k++) dyn |= 1u << s.fold.ch[k];
      if (s.fold.x) {
        cn_window_x(s, ly.C, n, base, row_in, win, dyn);
        cn_fold_indices(s, 0, base, row_in, fe, fat);
      }
      nnk_pdl_wait();
      /* Grid mode: only this CTA writes its layer-0 flag, last in the run
       * before (complete: the PDL wait orders this after it). */
      if (s.gm && s.L > 1) epoch = __ldcg(cn_flag(s, n, 0, rank)) + 1u;
      if (start) start[4] = clock64();
      if (!s.fold.x) {
        cn_window_x(s, ly.C, n, base, row_in, win, 0u);
      } else {
        const int total = s.fold.cd * s.win_rows;
        for (int i0 = 0;;) {
          float v[CN_BATCH];
#pragma unroll
          for (int u = 0; u < CN_BATCH; u++) v[u] = fe[u] >= 0 ? ldf(s.fold.x, s.fold.x_dt, fe[u]) : 0.0f;
#pragma unroll
          for (int u = 0; u < CN_BATCH; u++)
            if (fe[u] >= 0) win[fat[u]] = __float2half(v[u]); /* as the copy stores it (move_at: Cast, or FP16 as is) */
          if ((i0 += CN_THREADS * CN_BATCH) >= total) break;
          cn_fold_indices(s, i0, base, row_in, fe, fat);
        }
      }
      cn_load_weights(s, 1, wbuf(1), wb_bar(1)); /* layer l + 1's, as every later layer loads l + 2's */
    } else if (s.push) {
      /* Acquire (other end: the complete_tx of the neighbours' bulk copies
       * after their layer l - 1, below): the window's rows inside the
       * volume (this CTA's own: its own epilogue, before the last
       * __syncthreads). Window l % 2's uses are layers l, l + 2, ...:
       * phase (l - 1) / 2 of its mbarrier. */
      nnk_mbar_wait(xb(l), (uint32_t)((l - 1) >> 1) & 1u);
      /* the next layer's window: its last phase completed at layer l - 1's start */
      if (tid == 0 && l + 1 < s.L) nnk_mbar_arrive_expect_tx(xb(l + 1), cn_push_bytes(s, l + 1, nown, base));
      if (tid < CN_MAX_CH) bias_s[tid] = bias_v; /* the last reads of layer l - 1's ended before its final __syncthreads */
    } else {
      if (!s.gm) {
        /* Acquire (other end: the release arrival after layer l - 1's
         * epilogue, below): every CTA's layer l - 1 activations are
         * visible, and every CTA has finished layer l - 1's gather from
         * the buffer this layer writes. */
        nnk_cluster_wait();
      } else {
        /* Grid mode. Acquire (other end: the release store after layer
         * l - 1's epilogue, below) by one thread per CTA whose rows the
         * window holds, then the CTA barrier: their layer l - 1 rows are
         * visible to every thread here. They have also finished layer
         * l - 1's gather, which read the buffer this layer writes (the
         * CTAs whose windows hold this CTA's rows are the same set). */
        const cn_span v = cn_in_volume(s, base); /* not empty: every grid-mode CTA owns a row */
        for (int o = v.lo / s.R + tid; o <= (v.hi - 1) / s.R; o += CN_THREADS)
          cn_wait_flag(cn_flag(s, n, l - 1, o), epoch);
        __syncthreads();
      }
      if (tid < CN_MAX_CH) bias_s[tid] = bias_v; /* the last reads of layer l - 1's ended before its final __syncthreads */
      const __half *src = act(l - 1);
      const __half *gsrc = s.gm ? s.gact[(l - 1) & 1] + (size_t)n * s.P * row_in : nullptr;
      const int sh = c16 == 1 ? 1 : 2; /* log2 of the 16-byte pieces of a row */
      const int total = s.win_rows << sh;
      for (int i0 = 0; i0 < total; i0 += CN_THREADS * CN_BATCH) {
        uint4 v[CN_BATCH];
        int at[CN_BATCH];
#pragma unroll
        for (int u = 0; u < CN_BATCH; u++) {
          const int i = i0 + u * CN_THREADS + tid;
          const int j = i >> sh, piece = i & ((1 << sh) - 1), q = base + j;
          const bool ok = i < total && q >= 0 && q < s.P;
          at[u] = ok ? j * row_in + piece * 8 : -1;
          if (ok && s.gm) { /* from L2: the rows were written in this kernel (not through L1's copy) */
            v[u] = __ldcg(reinterpret_cast<const uint4 *>(gsrc + (size_t)q * row_in + piece * 8));
          } else if (ok) {
            const int owner = (int)__umulhi((unsigned)q, s.r_magic); /* q / R */
            const __half *r = cluster.map_shared_rank(src, owner);
            v[u] = *reinterpret_cast<const uint4 *>(r + (size_t)(q - owner * s.R) * row_in + piece * 8);
          }
        }
#pragma unroll
        for (int u = 0; u < CN_BATCH; u++)
          if (at[u] >= 0) *reinterpret_cast<uint4 *>(win + at[u]) = v[u];
      }
    }
    if (prof) prof[1 + 4 * l] = clock64();
    const bool last = l == s.L - 1;
    /* The kernel after this one (the predecoder tail) may be scheduled from
     * here on (PDL: it waits for this grid's completion before it reads
     * anything), so its launch overlaps the last layer, and its blocks do
     * not hold SMs through the whole network. */
    if (last) {
      nnk_pdl_launch_dependents();
      /* Release of this CTA's reads (other end: the wait before exit):
       * nobody reads shared memory after this point, so every CTA may
       * leave once all have arrived. (Grid mode: nothing is read from
       * another CTA's shared memory.) */
      if (!s.gm) asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
    }
    cn_wait_weights(l, wb_bar(l)); /* layer l's weights */
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if (WG) nnk_fence_proxy_async(); /* ... to the async proxy too: wgmma reads B through it */
#endif
    __syncthreads();        /* window, weights and tap table visible to every warp */
    if (prof) prof[2 + 4 * l] = clock64();
    const uint32_t wts = nnk_smem_u32(wbuf(l)), w32 = nnk_smem_u32(window(l)), z32 = nnk_smem_u32(zero_row);
    __half *out = s.gm     ? s.gact[l & 1] + ((size_t)n * s.P + p0) * cn_row(ly.M)
                  : s.push ? window(l + 1) + (size_t)s.halo * cn_row(ly.M) /* own rows of the next window */
                           : act(l);
    /* past the stack's slots for L <= 4 layers: 4 stamps inside each layer */
    long long *sub = prof && s.L <= 4 ? prof + 1 + 4 * s.L + 4 * l : nullptr;
    if constexpr (WG) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
      if (ly.nt == 2)
        cn_layer_wg<MI, 2>(s, ly, last, n, p0, nown, w32, wts, z32, tap_off, mask, bias_s, red, out, sub);
      else
        cn_layer_wg<MI, 4>(s, ly, last, n, p0, nown, w32, wts, z32, tap_off, mask, bias_s, red, out, sub);
#else
      __trap(); /* never launched: nnk_cnet_plan sets wg only in the sm_90a build */
#endif
    } else if (ly.nt == 2) {
      cn_layer<MI, 2>(s, ly, last, n, p0, nown, w32, wts, z32, tap_off, mask, bias_s, red, out, sub);
    } else {
      cn_layer<MI, 4>(s, ly, last, n, p0, nown, w32, wts, z32, tap_off, mask, bias_s, red, out, sub);
    }
    if (prof) prof[3 + 4 * l] = clock64();
    /* push: this thread's generic-proxy accesses of the windows (the
     * products' reads, the epilogue's writes) ordered before the bulk
     * copies (async proxy) that read or overwrite them after the barrier
     * below */
    if (s.push) nnk_fence_proxy_async();
    if (!last && !s.gm && !s.push) {
      /* Release (other end: the acquire wait before layer l + 1's gather):
       * this CTA's layer-l activations, its own shared memory. Its layer-l
       * gather reads from other CTAs completed before: their values were
       * consumed by the products the epilogue just stored. */
      nnk_fence_release_smem_cluster();
      nnk_cluster_arrive_relaxed();
    }
    __syncthreads();                       /* window, tap table and weight buffer l % 2 free */
    /* Grid mode. Release (other end: cn_wait_flag's acquire before layer
     * l + 1's gather in every CTA whose window holds these rows): every
     * thread's layer-l rows, stored before the barrier above (the pattern
     * of a CTA-wide release: barrier, then one thread's release store). */
    if (s.gm && !last && tid == 0) cn_st_release(cn_flag(s, n, l, rank), epoch);
    if (s.push && !last) {
      /* Acquire (other end: every CTA's arrival after its mbarrier init,
       * at the start): the destinations' mbarriers are initialised. */
      if (l == 0) nnk_cluster_wait();
      /* Push: this CTA's layer-l rows from its next window into the next
       * window of each CTA q whose window holds them (thread q issues q's
       * copy), counted on q's mbarrier. q has finished reading that
       * window (its layer l - 1): this CTA's layer-l products needed q's
       * layer l - 1 rows, which q pushed after that layer. */
      const int q = tid, qb = q * s.R - s.halo; /* q's window row 0 */
      const cn_span v = cn_in_volume(s, qb);
      const int lo = max(p0, v.lo), hi = min(p0 + nown, v.hi);
      if (q < s.cl && q != rank && lo < hi) {
        const uint32_t rb = (uint32_t)cn_row(ly.M) * 2, nw = nnk_smem_u32(window(l + 1));
        nnk_bulk_s2s(nnk_mapa(nw + (uint32_t)(lo - qb) * rb, q), nw + (uint32_t)(s.halo + lo - p0) * rb,
                     (uint32_t)(hi - lo) * rb, nnk_mapa(xb(l + 1), q));
      }
    }
    cn_load_weights(s, l + 2, wbuf(l), wb_bar(l)); /* layer l + 2's weights, one layer ahead */
    if (prof) prof[4 + 4 * l] = clock64();
  }
  /* Acquire (other end: the release arrival after the last gather): no CTA
   * still reads this one's shared memory. */
  if (!s.gm) nnk_cluster_wait();
  if (prof) prof[NNK_STACK_PROF_SLOTS - 1] = clock64();
#endif
}

using cnet_fn = void (*)(nnk_cnet);
/* One kernel per MI (m16 tiles per warp), so that a launch's code is one
 * layer body that every layer runs (small enough to stay in the
 * instruction cache) */
cnet_fn cnet_kernel(int mi, int wg) {
  static const cnet_fn k[2][CN_MAX_MI] = {{k_cnet<1, false>, k_cnet<2, false>, k_cnet<3, false>, k_cnet<4, false>},
                                          {k_cnet<1, true>, k_cnet<2, true>, k_cnet<3, true>, k_cnet<4, true>}};
  return k[wg ? 1 : 0][(mi < 1 ? 1 : mi > CN_MAX_MI ? CN_MAX_MI : mi) - 1];
}

}  // namespace

namespace {
/* The launch of s: one cluster of s.cl CTAs per batch item (grid mode: a
 * cooperative grid of s.cl CTAs per item, every CTA resident, which the
 * flag waits need), with PDL where the engine's kernels use it (at[2]
 * holds the attributes cfg points to). */
cudaLaunchConfig_t cnet_config(const nnk_cnet &s, size_t smem, cudaStream_t st, cudaLaunchAttribute *at, bool pdl) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)(s.cl * s.N));
  cfg.blockDim = dim3(CN_THREADS);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = st;
  if (s.gm) {
    at[0].id = cudaLaunchAttributeCooperative;
    at[0].val.cooperative = 1;
  } else {
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = (unsigned)s.cl;
    at[0].val.clusterDim.y = at[0].val.clusterDim.z = 1;
  }
  unsigned na = 1;
  if (pdl && nnk_pdl_enabled()) { /* the start-up overlaps the kernel before (k_cnet's nnk_pdl_wait) */
    at[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[1].val.programmaticStreamSerializationAllowed = 1;
    na = 2;
  }
  cfg.attrs = at;
  cfg.numAttrs = na;
  return cfg;
}
}  // namespace

cudaError_t nnk_cnet_setup(const nnk_cnet &s, size_t smem, int *clusters) {
  *clusters = 0;
  const cnet_fn k = cnet_kernel(s.mi, s.wg);
  cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)CN_MAX_SMEM);
  if (e == cudaSuccess && !s.gm && s.cl > 8)
    e = cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  if (e != cudaSuccess) return e;
  if (s.gm) { /* the whole grid resident at once, or not at all */
    int dev = 0, sms = 0, per_sm = 0;
    if ((e = cudaGetDevice(&dev)) != cudaSuccess ||
        (e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess ||
        (e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, CN_THREADS, smem)) != cudaSuccess)
      return e;
    *clusters = (long long)per_sm * sms >= (long long)s.cl * s.N ? 1 : 0;
    return cudaSuccess;
  }
  cudaLaunchAttribute at[2];
  const cudaLaunchConfig_t cfg = cnet_config(s, smem, 0, at, false); /* occupancy: the cluster alone */
  return cudaOccupancyMaxActiveClusters(clusters, k, &cfg);
}

cudaError_t nnk_launch_cnet(const nnk_cnet &s, size_t smem, cudaStream_t st) {
  cudaLaunchAttribute at[2];
  const cudaLaunchConfig_t cfg = cnet_config(s, smem, st, at, true);
  cudaError_t e = cudaLaunchKernelEx(&cfg, cnet_kernel(s.mi, s.wg), s);
  return e != cudaSuccess ? e : cudaGetLastError();
}
