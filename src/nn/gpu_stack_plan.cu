/* The GPU engine's convolution stacks (gpu_engine.cu builds the engine,
 * gpu_tune.cu times the choices): which chains of convolutions may run as
 * one persistent kernel, and their launch plans for the stack kernel
 * (gpu_stack.cu) and for the cluster kernel in its two modes (gpu_cnet.cu:
 * one thread-block cluster, or grid mode). Split out of gpu_engine.cu. */
#include "gpu_engine_internal.h"

/* Stacks (gpu_stack.cu): a chain of plan_layouts whose members follow one
 * another (each reads the one before it, the first reads an NCDHW value,
 * the last writes one) and that the stack kernel takes (FP16, constant
 * weights, kernel dims 1 or 3, "same" padding, stride 1, 2 to 8 layers)
 * gets its layer-result buffers and launch plan here; the
 * tuner decides whether it runs (gpu_tune.cu). */
/* A 0/1 switch in the environment: -1 unset (or neither), 0 "0", 1 "1". */
static int env_switch(const char *name) {
  const char *env = getenv(name);
  return !env ? -1 : !strcmp(env, "0") ? 0 : !strcmp(env, "1") ? 1 : -1;
}

int nng_stack_env(void) { return env_switch("CUDAQ_NN_STACK"); }

int nng_stacks_on(const cudaq_nn_gpu *g) {
  const cudaq_nn_conv_impl_t want = g->opts.conv_impl;
  return g->half && nng_stack_env() != 0 && (want == CUDAQ_NN_CONV_AUTO || want == CUDAQ_NN_CONV_STACK);
}

int nng_cnet_env(void) { return env_switch("CUDAQ_NN_CNET"); }

int nng_cgrid_env(void) { return env_switch("CUDAQ_NN_CNET_GRID"); }
int nng_cnet_fold_env(void) { return env_switch("CUDAQ_NN_CNET_FOLD"); }
int nng_first_fold_env(void) { return env_switch("CUDAQ_NN_FIRST_FOLD"); }

int nng_cnet_side(const cudaq_nn_gpu *g, const stack_state *st) {
  return g->opts.concurrent < st->cn_clusters ? g->opts.concurrent : st->cn_clusters;
}

/* The cluster kernel's plan options for this device: 0 where it has none
 * (below compute capability 9.0, or CUDAQ_NN_CNET=0). */
static int cnet_options(int device, int concurrent, int *split, int *wg) {
  int major = 0, minor = 0;
  if (nng_cnet_env() == 0 || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess || major < 9)
    return 0;
  const char *env = getenv("CUDAQ_NN_CNET_SPLIT"); /* 0: four n8 tiles a warp in every layer (comparisons) */
  *split = !env || strcmp(env, "0") != 0;
  /* warpgroup MMAs (sm_90a code: compute capability 9.0 only) where they
   * measured faster: one inference at a time with one m64 block a CTA
   * (nnk_cnet_plan); with concurrent engines (options.concurrent >= 2,
   * qec-realtime's throughput plan) mma.sync, which measured faster there
   * (H200 at 100k requests/s: d = 7 0.25-0.5 us, d = 13 2-2.5 us).
   * CUDAQ_NN_CNET_WG=1 everywhere, =0 nowhere (comparisons). */
  const char *wenv = getenv("CUDAQ_NN_CNET_WG");
  *wg = major != 9 || minor != 0                                ? 0
        : wenv && (!strcmp(wenv, "1") || !strcmp(wenv, "0")) ? wenv[0] - '0'
        : concurrent >= 2                                      ? 0
                                                               : 2;
  return 1;
}

/* The chain's layers, as nng_plan_stacks collected them. */
static void stack_layers(const cudaq_nn_gpu *g, const stack_state *st, const nnk_conv **layers) {
  for (int l = 0; l < st->L; l++) layers[l] = &g->convs[st->conv[l]].p;
}

/* The tensors of st's stack plan, in a cluster-kernel plan k. */
static void cnet_tensors(const stack_state *st, nnk_cnet *k) {
  k->x = st->s.x;
  k->y = st->s.y;
  for (int l = 0; l < st->L; l++) {
    k->layer[l].w = st->s.layer[l].w;
    k->layer[l].b = st->s.layer[l].b;
  }
}

/* The stack's chain as one cluster (gpu_cnet.cu): 16 CTAs where a cluster
 * of 16 can be placed, else 8; cn_ok stays 0 where neither fits, and below
 * compute capability 9.0 (no clusters; the kernel's body is sm_90 code). */
static void plan_cnet(stack_state *st, const nnk_conv *const *layers, int device, int concurrent) {
  st->cn_ok = 0;
  int split = 1, wg = 0;
  if (!cnet_options(device, concurrent, &split, &wg)) return;
  static const int sizes[] = {16, 8};
  /* each layer's rows pushed into the neighbours' next window where two
   * windows fit (nnk_cnet_plan); CUDAQ_NN_CNET_PUSH=0 gathers them instead
   * (comparisons) */
  const char *penv = getenv("CUDAQ_NN_CNET_PUSH");
  const int push = !penv || strcmp(penv, "0") != 0;
  for (int i = 0; i < 2 && !st->cn_ok; i++) {
    if (!nnk_cnet_plan(layers, st->L, sizes[i], split, wg, 0, push, &st->cn, &st->cn_smem)) continue;
    int clusters = 0;
    if (nnk_cnet_setup(st->cn, st->cn_smem, &clusters) != cudaSuccess) {
      (void)cudaGetLastError(); /* a size this device cannot place: try the next */
      continue;
    }
    st->cn_ok = clusters >= 1;
    st->cn_clusters = clusters;
  }
  if (st->cn_ok) cnet_tensors(st, &st->cn);
}

int nng_cgrid_plan(const cudaq_nn_gpu *g, stack_state *st, int R) {
  int split = 1, wg = 0, clusters = 0;
  const nnk_conv *layers[NNK_STACK_MAX_LAYERS];
  stack_layers(g, st, layers);
  const long long P = (long long)layers[0]->in3[0] * layers[0]->in3[1] * layers[0]->in3[2];
  if (R < 1 || P < 1 || !cnet_options(g->opts.device, g->opts.concurrent, &split, &wg) ||
      !nnk_cnet_plan(layers, st->L, (int)((P + R - 1) / R), split, wg, 1, 0, &st->cg, &st->cg_smem))
    return 0;
  if (nnk_cnet_setup(st->cg, st->cg_smem, &clusters) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  if (clusters < 1) return 0;
  cnet_tensors(st, &st->cg);
  st->cg.gact[0] = st->cg_act[0];
  st->cg.gact[1] = st->cg_act[1];
  st->cg.flags = st->cg_flags;
  st->cg.prof = st->cg_prof;
  st->cg_r = R;
  /* The flags count runs of one grid (their index depends on the CTA
   * count): cleared for a new plan, so that every CTA's first epoch is 1.
   * Planning and tuning only, with no run in flight on the engine's stream. */
  if (st->cg_flags) {
    size_t act = 0, flags = 0;
    nnk_cnet_grid_bytes(st->cg, &act, &flags);
    if (cudaMemsetAsync(st->cg_flags, 0, flags, g->stream) != cudaSuccess ||
        cudaStreamSynchronize(g->stream) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
  }
  return 1;
}

/* Grid mode (STACK_CGRID): the rows per CTA that fit on this device
 * (CUDAQ_NN_CNET_GRID_R=R tries only R), and the buffers for the largest
 * grid among them. Candidates: multiples of 16 rows (whole m16 tiles),
 * fewer rows a CTA meaning more CTAs, each with a window of R + 2 halo rows.
 * Only for an engine planned for one inference at a time (or forced,
 * CUDAQ_NN_CNET_GRID=1): concurrent engines' cooperative grids of tens of
 * CTAs take turns on the GPU (H200, qec-realtime d = 13 fast, 12 workers at
 * 100k requests/s: 66k/s answered, p50 411 us, against 100k/s and 71 us
 * with the cluster kernel; nn-cluster-grid-h200-2026-11-29.md). */
static cudaq_nn_status_t plan_cgrid(cudaq_nn_gpu *g, stack_state *st, cudaq_nn_error_t *err) {
  static const int rows[] = {16, 32, 48, 64, 96, 128};
  st->n_cg_rs = 0;
  st->t_cg = -1.0f;
  if (nng_cgrid_env() == 0 || (g->opts.concurrent >= 2 && nng_cgrid_env() != 1)) return CUDAQ_NN_OK;
  const char *env = getenv("CUDAQ_NN_CNET_GRID_R");
  const int only = env ? atoi(env) : 0;
  size_t act = 0, flags = 0; /* the buffers for the first R that fits, the smallest: the most CTAs, the most flags */
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    const int R = only > 0 ? only : rows[i];
    if (nng_cgrid_plan(g, st, R)) {
      if (!st->n_cg_rs) nnk_cnet_grid_bytes(st->cg, &act, &flags);
      st->cg_rs[st->n_cg_rs++] = R;
    }
    if (only > 0) break;
  }
  if (!st->n_cg_rs) return CUDAQ_NN_OK;
  for (int b = 0; b < 2; b++) TRY(nng_dalloc(g, act, (void **)&st->cg_act[b], err));
  TRY(nng_dalloc(g, flags, (void **)&st->cg_flags, err)); /* zeroed: no run yet */
  if (getenv("CUDAQ_NN_CNET_PROF"))
    TRY(nng_dalloc(g, NNK_CNET_PROF_SLOTS * sizeof(long long), (void **)&st->cg_prof, err));
  nng_cgrid_plan(g, st, st->cg_rs[0]); /* again, with the buffers */
  return CUDAQ_NN_OK;
}

cudaq_nn_status_t nng_plan_stacks(cudaq_nn_gpu *g, cudaq_nn_error_t *err) {
  if (!nng_stacks_on(g)) return CUDAQ_NN_OK;
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, g->opts.device));
  g->stacks = (stack_state *)calloc((size_t)g->n_convs + 1, sizeof(stack_state));
  if (!g->stacks) return CUDAQ_NN_ERR_NO_MEMORY;
  for (int h = 0; h < g->n_convs; h++) {
    const conv_state *head = &g->convs[h];
    if (head->lay_in || !head->lay_out) continue;
    stack_state *st = &g->stacks[g->n_stacks];
    memset(st, 0, sizeof *st);
    const nnk_conv *layers[NNK_STACK_MAX_LAYERS];
    int ok = 1, cur = h;
    for (;;) {
      const conv_state *c = &g->convs[cur];
      if (st->L == NNK_STACK_MAX_LAYERS || !c->st_w || (c->p.b && !c->b32)) {
        ok = 0;
        break;
      }
      layers[st->L] = &c->p;
      st->conv[st->L++] = cur;
      if (!c->lay_out) break;
      int next = -1, readers = 0;
      for (int j = 0; j < g->n_convs; j++)
        if (g->convs[j].lay_in && g->convs[j].producer == cur) next = j, readers++;
      if (readers != 1) {
        ok = 0;
        break;
      }
      cur = next;
    }
    size_t acc_floats = 0;
    /* Test hooks: CUDAQ_NN_STACK_BN, CUDAQ_NN_STACK_KS fix the work split. */
    const char *fbn = getenv("CUDAQ_NN_STACK_BN"), *fks = getenv("CUDAQ_NN_STACK_KS");
    if (!ok || !nnk_stack_plan(layers, st->L, sms, fbn ? atoi(fbn) : 0, fks ? atoi(fks) : 0, 0, &st->s, &st->smem,
                               &acc_floats))
      continue;
    int bps = 0;
    CK(nnk_stack_setup(st->smem, &bps));
    if (bps < 1) continue;
    nnk_stack *k = &st->s;
    k->x = (const __half *)g->convs[st->conv[0]].p.x;
    k->y = (__half *)g->convs[st->conv[st->L - 1]].p.y;
    for (int l = 0; l < st->L; l++) {
      const conv_state *c = &g->convs[st->conv[l]];
      k->layer[l].w = c->st_w;
      k->layer[l].b = c->p.b ? c->b32 : NULL;
      const int a = k->layer[l].abuf;
      if (!k->acc[a]) TRY(nng_dalloc(g, acc_floats * sizeof(float), (void **)&k->acc[a], err));
    }
    if (getenv("CUDAQ_NN_STACK_PROF"))
      TRY(nng_dalloc(g, NNK_STACK_PROF_SLOTS * sizeof(long long), (void **)&k->prof, err));
    plan_cnet(st, layers, g->opts.device, g->opts.concurrent);
    if (st->cn_ok && getenv("CUDAQ_NN_CNET_PROF"))
      TRY(nng_dalloc(g, NNK_CNET_PROF_SLOTS * sizeof(long long), (void **)&st->cn.prof, err));
    TRY(plan_cgrid(g, st, err));
    st->t_stack = st->t_members = st->t_cnet = -1.0f;
    for (int l = 0; l < st->L; l++) g->convs[st->conv[l]].stack = g->n_stacks;
    g->n_stacks++;
  }
  return CUDAQ_NN_OK;
}
