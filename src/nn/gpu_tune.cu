/* GPU engine: algorithm selection (every candidate timed as it runs in a
 * CUDA graph) and the on-disk plan that caches it. */
#include <errno.h>
#include <unistd.h>
#include <sys/stat.h>

#include "gpu_engine_internal.h"

#define ENGINE_PLAN_VERSION 17 /* 3: tensor-core candidates, t_tc per conv; 4: fused cuDNN;
                                 5: channels-last kernel, t_cl and layouts per conv;
                                 6: stacks (one line each, members IMPL_STACK);
                                 7: the channels-last brick algorithms;
                                 8: the wgmma brick algorithms;
                                 9: the narrow brick algorithms;
                                 10: the narrow bricks with weights in registers;
                                 11: the wgmma flat tiles;
                                 12: stacks as one cluster (kind, t_cnet per stack);
                                 13: the key names options.concurrent;
                                 14: the cluster kernel with PDL (t_cnet re-timed);
                                 15: its products on wgmma (t_cnet re-timed);
                                 16: the cluster kernel in grid mode (kind 2, t_cg, cg_r);
                                 17: a second convolution's algorithm chosen with the first
                                     layer folded in (nng_tune_first_folds) */

/* The cuDNN workspace shared by all convolutions, reallocated to bytes. */
static cudaq_nn_status_t set_workspace(cudaq_nn_gpu *g, size_t bytes, cudaq_nn_error_t *err) {
  if (bytes == g->ws_bytes) return CUDAQ_NN_OK;
  if (g->ws) cudaFree(g->ws);
  g->ws = NULL;
  g->ws_bytes = 0;
  if (bytes) CK(cudaMalloc(&g->ws, bytes));
  g->ws_bytes = bytes;
  return CUDAQ_NN_OK;
}

/* Mean time (µs) of one convolution as it runs inside the inference graph:
 * iters back-to-back launches are captured into a graph, which is replayed
 * once to warm up and once timed. Timing stream launches instead would
 * measure the host: a cuDNN call costs tens of µs of CPU time, more than the
 * GPU time of a small convolution, and such a measurement picked the own
 * kernel for layers that cuDNN runs 4x faster in the graph. */
static cudaq_nn_status_t time_conv(cudaq_nn_gpu *g, const conv_state *c, int impl, int algo, size_t ws, int in_cl,
                                   int out_cl, float *us, cudaq_nn_error_t *err) {
  int iters = g->opts.tune_iterations > 0 ? g->opts.tune_iterations : 20;
  cudaq_nn_status_t st = nng_enqueue_conv(g, c, impl, algo, ws, in_cl, out_cl, err); /* first call outside capture */
  if (!st && cudaStreamSynchronize(g->stream) != cudaSuccess) {
    nn__set_error(err, "a convolution candidate failed before timing");
    st = CUDAQ_NN_ERR_CUDA;
  }
  if (st) return st;
  cudaGraph_t graph = NULL;
  cudaGraphExec_t exec = NULL;
  cudaEvent_t a = NULL, b = NULL;
  CK(cudaStreamBeginCapture(g->stream, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < iters && !st; i++) st = nng_enqueue_conv(g, c, impl, algo, ws, in_cl, out_cl, err);
  cudaError_t e = cudaStreamEndCapture(g->stream, &graph); /* always ends the capture */
  if (!st && e != cudaSuccess) {
    nn__set_error(err, "capturing a convolution for timing failed: %s", cudaGetErrorString(e));
    st = CUDAQ_NN_ERR_CUDA;
  }
  float ms = 0.0f;
  if (!st && (cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess || cudaEventCreate(&a) != cudaSuccess ||
              cudaEventCreate(&b) != cudaSuccess || cudaGraphLaunch(exec, g->stream) != cudaSuccess ||
              cudaEventRecord(a, g->stream) != cudaSuccess || cudaGraphLaunch(exec, g->stream) != cudaSuccess ||
              cudaEventRecord(b, g->stream) != cudaSuccess || cudaEventSynchronize(b) != cudaSuccess ||
              cudaEventElapsedTime(&ms, a, b) != cudaSuccess)) {
    nn__set_error(err, "timing a convolution failed: %s", cudaGetErrorString(cudaGetLastError()));
    st = CUDAQ_NN_ERR_CUDA;
  }
  if (a) cudaEventDestroy(a);
  if (b) cudaEventDestroy(b);
  if (exec) cudaGraphExecDestroy(exec);
  if (graph) cudaGraphDestroy(graph);
  *us = ms * 1000.0f / (float)iters;
  return st;
}

/* Workspace that cuDNN algorithms may use while tuning (select_algorithms
 * allocates it once for all layers, then shrinks it to what the chosen
 * algorithms need). */
#define TUNE_WS_LIMIT ((size_t)256 << 20)

/* CUDAQ_NN_TUNE_LOG set: every timed candidate on stderr (the plan and
 * cudaq_nn_gpu_describe keep only the best of each kind). */
void nng_tune_log(const cudaq_nn_gpu *g, const conv_state *c, const char *impl, int algo, float us) {
  static int on = -1;
  if (on < 0) on = getenv("CUDAQ_NN_TUNE_LOG") != NULL;
  if (on)
    fprintf(stderr, "tune: conv '%s' %dx%dx%d -> %d ch, %dx%dx%d out, %s: %s %d %.2f us\n", g->m->nodes[c->node].name,
            c->p.C, c->p.k[0], c->p.k[1], c->p.M, c->p.out3[0], c->p.out3[1], c->p.out3[2], g->half ? "fp16" : "fp32",
            impl, algo, us);
}

/* The fastest channels-last algorithm (tile x split) for the layouts
 * in_cl / out_cl: *us and *algo, *us < 0 when none ran. A candidate that
 * fails to launch (a cluster that cannot be scheduled) is skipped and its
 * error consumed. */
static void time_cl(cudaq_nn_gpu *g, const conv_state *c, int in_cl, int out_cl, float *us, int *algo) {
  *us = -1.0f;
  *algo = 0;
  /* Test hook: CUDAQ_NN_CL_ALGO=k[,k2,...] makes the first listed algo
   * that applies the only candidate (where none does, the usual ones
   * compete), so that test_nn_gpu checks every tile, brick and split
   * against the CPU (the bricks take NDHWC input only, which needs a
   * channels-last first layer in front), and a sanitizer run can keep
   * every layer to one algo. */
  int only = -1;
  for (const char *q = getenv("CUDAQ_NN_CL_ALGO"); q && *q && only < 0;) {
    char *end;
    const long k = strtol(q, &end, 10);
    if (end == q) break;
    if (k >= 0 && k < NNK_CL_ALL_ALGOS && nnk_cl_algo_ok(c->p, in_cl, (int)k)) only = (int)k;
    q = *end == ',' ? end + 1 : end;
  }
  for (int k = 0; k < NNK_CL_ALL_ALGOS; k++) {
    if ((only >= 0 && k != only) || !nnk_cl_algo_ok(c->p, in_cl, k)) continue;
    cudaq_nn_error_t e2;
    float t = -1.0f;
    if (time_conv(g, c, IMPL_CL, k, 0, in_cl, out_cl, &t, &e2) != CUDAQ_NN_OK) {
      (void)cudaGetLastError();
      continue;
    }
    nng_tune_log(g, c, in_cl || out_cl ? "cl (chain layouts) algo" : "cl algo", k, t);
    /* A brick algorithm (mma.sync or wgmma, timed after every tile)
     * replaces a tile only when 5% faster: on a tie within the timing noise
     * the tile ran faster inside the whole model's graph (H100, d = 13:
     * 82.8 vs 85.5 us, bench/results/nn-brick-h100-2026-11-25.md). */
    const float bar = k >= NNK_CL_ALGOS && *algo < NNK_CL_ALGOS && *us >= 0.0f ? 0.95f * *us : *us;
    if (*us < 0.0f || t < bar) {
      *us = t;
      *algo = k;
    }
  }
}

/* Times the candidates of one convolution and keeps the fastest. Starts from
 * nothing: a plan that failed to parse part-way may have filled fields. */
static cudaq_nn_status_t tune_conv(cudaq_nn_gpu *g, conv_state *c, cudaq_nn_error_t *err) {
  c->impl = IMPL_OWN;
  c->algo = 0;
  c->ws = 0;
  c->in_cl = c->out_cl = 0;
  c->t_own = c->t_cudnn = c->t_tc = c->t_cl = c->t_cl_chain = c->t_plain = -1.0f;
  cudaq_nn_error_t cand_err; /* why the last cuDNN candidate was skipped */
  cand_err.message[0] = 0;
  const cudaq_nn_conv_impl_t want = g->opts.conv_impl;
  int cudnn_fused = 0; /* the fastest cuDNN candidate is the fused call */
  /* Tensor cores: every tile configuration that fits, the fastest kept.
   * Forced TC runs it wherever it applies; elsewhere the layer is chosen
   * as in AUTO between cuDNN and own. */
  int tc_cfg = -1;
  if (c->tc_ok && (want == CUDAQ_NN_CONV_AUTO || want == CUDAQ_NN_CONV_TC))
    for (int k = 0; k < NNK_TC_CONFIGS; k++) {
      float t = -1.0f;
      if (!nnk_tc_config_ok(c->p, k)) continue;
      TRY(time_conv(g, c, IMPL_TC, k, 0, 0, 0, &t, err));
      nng_tune_log(g, c, "tc cfg", k, t);
      if (c->t_tc < 0.0f || t < c->t_tc) {
        c->t_tc = t;
        tc_cfg = k;
      }
    }
  if (want == CUDAQ_NN_CONV_TC && tc_cfg >= 0) {
    c->impl = IMPL_TC;
    c->algo = tc_cfg;
    return CUDAQ_NN_OK;
  }
  /* Test hook: CUDAQ_NN_TUNE_NO_CUDNN=1 leaves cuDNN's candidates out, so
   * that a compute-sanitizer run (racecheck) instruments the engine's own
   * kernels instead of spending its time in cudnnFind (scripts/gpu-run-onnx.sh).
   * A convolution forced to cuDNN then has no implementation: its engine is
   * refused as unsupported. */
  static int no_cudnn = -1;
  if (no_cudnn < 0) {
    const char *v = getenv("CUDAQ_NN_TUNE_NO_CUDNN");
    no_cudnn = v && v[0] == '1';
  }
  if (c->cudnn_ok && want != CUDAQ_NN_CONV_OWN && !no_cudnn) {
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int found = 0;
    cudnnStatus_t s = cudnnFindConvolutionForwardAlgorithmEx(
        g->cudnn, c->xd, c->p.x, c->wd, c->p.w, c->cd, c->yd, c->p.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
        &found, perf, g->ws, g->ws_bytes);
    if (s != CUDNN_STATUS_SUCCESS) {
      nn__set_error(err, "cudnnFindConvolutionForwardAlgorithmEx failed: %s", cudnnGetErrorString(s));
      return CUDAQ_NN_ERR_CUDA;
    }
    /* cuDNN's own ranking times single calls; every acceptable algorithm
     * it returned is timed again as it runs in the graph, and the fastest
     * there is kept (the graph ranking differs from cuDNN's: on the H100 the
     * chosen algorithm is often not cuDNN's first). */
    for (int i = 0; i < found; i++) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > g->ws_bytes) continue;
      /* FP32 stays in FP32 arithmetic: no TF32 tensor-core math, and no FFT
       * or Winograd transforms (their rounding exceeds 1e-5 relative). */
      if (!g->half && (perf[i].mathType != CUDNN_FMA_MATH || perf[i].algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT ||
                       perf[i].algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
                       perf[i].algo == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD ||
                       perf[i].algo == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED))
        continue;
      /* A candidate can still fail here: some algorithms that cudnnFind
       * ran reject the call, or cannot be captured into a graph. Such a
       * candidate is skipped (its error, which CUDA would report again at
       * the next launch, is consumed). */
      float t = -1.0f;
      if (time_conv(g, c, IMPL_CUDNN, perf[i].algo, perf[i].memory, 0, 0, &t, &cand_err) != CUDAQ_NN_OK) {
        (void)cudaGetLastError();
        continue;
      }
      nng_tune_log(g, c, "cudnn algo", perf[i].algo, t);
      if (c->t_cudnn < 0.0f || t < c->t_cudnn) {
        c->t_cudnn = t;
        c->algo = perf[i].algo;
        c->ws = perf[i].memory;
        cudnn_fused = 0;
      }
      /* The same algorithm with bias and activation fused, where cuDNN
       * accepts the combination (a refusal is consumed as above). */
      float tf = -1.0f;
      if (c->fused_ok &&
          time_conv(g, c, IMPL_CUDNN_FUSED, perf[i].algo, perf[i].memory, 0, 0, &tf, &cand_err) == CUDAQ_NN_OK) {
        nng_tune_log(g, c, "cudnn-fused algo", perf[i].algo, tf);
        if (tf < c->t_cudnn) {
          c->t_cudnn = tf;
          c->algo = perf[i].algo;
          c->ws = perf[i].memory;
          cudnn_fused = 1;
        }
      } else if (c->fused_ok) {
        (void)cudaGetLastError();
      }
    }
  }
  if (c->own_ok && want != CUDAQ_NN_CONV_CUDNN) {
    TRY(time_conv(g, c, IMPL_OWN, 0, 0, 0, 0, &c->t_own, err));
    nng_tune_log(g, c, "own", 0, c->t_own);
  }
  /* The channels-last kernel: NCDHW in and out as a per-layer candidate,
   * and with the chain's layouts for select_algorithms' chain decision. */
  const int cl_on = want == CUDAQ_NN_CONV_AUTO || forced_cl(want);
  if (cl_on && c->cl_ok[0]) time_cl(g, c, 0, 0, &c->t_cl, &c->cl_algo_plain);
  if (cl_on && (c->lay_in || c->lay_out) && c->cl_ok[c->lay_in])
    time_cl(g, c, c->lay_in, c->lay_out, &c->t_cl_chain, &c->cl_algo_chain);
  if (c->t_cudnn < 0.0f && c->t_own < 0.0f && tc_cfg < 0 && c->t_cl < 0.0f && c->t_cl_chain < 0.0f) {
    nn__set_error(err, "node '%s' (Conv): no convolution implementation available for the %s choice%s%s",
                  g->m->nodes[c->node].name, g->opts.conv_impl == CUDAQ_NN_CONV_AUTO ? "automatic" : "forced",
                  cand_err.message[0] ? "; last cuDNN candidate: " : "", cand_err.message);
    return CUDAQ_NN_ERR_UNSUPPORTED;
  }
  if (c->t_own < 0.0f || (c->t_cudnn >= 0.0f && c->t_cudnn < c->t_own))
    c->impl = cudnn_fused ? IMPL_CUDNN_FUSED : IMPL_CUDNN;
  float best = is_cudnn(c->impl) ? c->t_cudnn : c->t_own;
  if (tc_cfg >= 0 && (best < 0.0f || c->t_tc < best)) {
    c->impl = IMPL_TC;
    c->algo = tc_cfg;
    c->ws = 0;
    best = c->t_tc;
  }
  if (c->t_cl >= 0.0f && (forced_cl(want) || best < 0.0f || c->t_cl < best)) {
    c->impl = IMPL_CL;
    c->algo = c->cl_algo_plain;
    c->ws = 0;
    best = c->t_cl;
  }
  /* The per-layer (NCDHW) choice, kept for the chain decision. */
  c->impl_plain = c->impl;
  c->algo_plain = c->algo;
  c->ws_plain = c->ws;
  c->t_plain = best;
  return CUDAQ_NN_OK;
}

/* Chains of NDHWC-joined convolutions (plan_layouts): the chain runs
 * channels-last when every member ran with the chain's layouts and the sum
 * of those times beats the sum of the members' per-layer choices (forced
 * CL: whenever every member ran), else every member keeps its NCDHW choice. */
static void choose_chains(cudaq_nn_gpu *g) {
  for (int r = 0; r < g->n_convs; r++) {
    float sum_chain = 0.0f, sum_plain = 0.0f;
    int members = 0, chain_ok = 1, plain_ok = 1;
    for (int i = 0; i < g->n_convs; i++) {
      const conv_state *c = &g->convs[i];
      if (c->chain != r || !(c->lay_in || c->lay_out)) continue;
      members++;
      chain_ok &= c->t_cl_chain >= 0.0f;
      plain_ok &= c->t_plain >= 0.0f;
      sum_chain += c->t_cl_chain;
      sum_plain += c->t_plain;
    }
    if (members == 0) continue;
    const int use = chain_ok && (!plain_ok || forced_cl(g->opts.conv_impl) || sum_chain < sum_plain);
    for (int i = 0; i < g->n_convs; i++) {
      conv_state *c = &g->convs[i];
      if (c->chain != r || !(c->lay_in || c->lay_out)) continue;
      if (use) {
        c->impl = IMPL_CL;
        c->algo = c->cl_algo_chain;
        c->ws = 0;
        c->in_cl = c->lay_in;
        c->out_cl = c->lay_out;
      } else {
        c->impl = c->impl_plain;
        c->algo = c->algo_plain;
        c->ws = c->ws_plain;
        c->in_cl = c->out_cl = 0;
      }
    }
  }
}

/* A stack's members run it (IMPL_STACK, algo = its kind, NCDHW edges) when use is set. */
static void apply_stack(cudaq_nn_gpu *g, const stack_state *st) {
  if (!st->use) return;
  for (int l = 0; l < st->L; l++) {
    conv_state *c = &g->convs[st->conv[l]];
    c->impl = IMPL_STACK;
    c->algo = st->kind;
    c->ws = 0;
    c->in_cl = c->out_cl = 0;
  }
}

/* Each stack is timed as one kernel, as the grid kernel and (where it
 * fits) as one cluster, against the sum of its members' own choices (after
 * choose_chains); the cheapest runs. Cost is time, except that with
 * options.concurrent = N >= 2 the cluster's time is divided by the copies
 * of it that run at once (min(N, cn_clusters)): the grid kernel and the
 * members' kernels spread over the whole GPU, so N engines' inferences
 * take turns, while N clusters of 16 SMs run side by side. CUDAQ_NN_CONV_STACK or CUDAQ_NN_STACK=1
 * force a stack wherever it launches, CUDAQ_NN_CNET=1 the cluster wherever
 * it launches. A kernel that fails to launch (its error consumed) is not
 * used. */
static void tune_stacks(cudaq_nn_gpu *g) {
  const int force_cn = nng_cnet_env() == 1;
  const int force = g->opts.conv_impl == CUDAQ_NN_CONV_STACK || nng_stack_env() == 1 || force_cn || nng_cgrid_env() == 1;
  for (int i = 0; i < g->n_stacks; i++) {
    stack_state *st = &g->stacks[i];
    float sum = 0.0f;
    int ok = 1;
    for (int l = 0; l < st->L; l++) {
      const conv_state *c = &g->convs[st->conv[l]];
      const float t = c->impl == IMPL_CL && (c->in_cl || c->out_cl) ? c->t_cl_chain : c->t_plain;
      ok &= t >= 0.0f;
      sum += t;
    }
    st->t_members = ok ? sum : -1.0f;
    cudaq_nn_error_t e2;
    st->t_stack = -1.0f;
    if (time_conv(g, &g->convs[st->conv[0]], IMPL_STACK, 0, 0, 0, 0, &st->t_stack, &e2) != CUDAQ_NN_OK) {
      (void)cudaGetLastError();
      st->t_stack = -1.0f;
    }
    nng_tune_log(g, &g->convs[st->conv[0]], "stack of layers", st->L, st->t_stack);
    st->t_cnet = -1.0f;
    if (st->cn_ok &&
        time_conv(g, &g->convs[st->conv[0]], IMPL_STACK, STACK_CLUSTER, 0, 0, 0, &st->t_cnet, &e2) != CUDAQ_NN_OK) {
      (void)cudaGetLastError();
      st->t_cnet = -1.0f;
    }
    if (st->cn_ok) nng_tune_log(g, &g->convs[st->conv[0]], "stack as one cluster of", st->cn.cl, st->t_cnet);
    /* Grid mode: each row count that fits, the fastest kept (st->cg). */
    int best_r = 0;
    st->t_cg = -1.0f;
    for (int r = 0; r < st->n_cg_rs; r++) {
      float t = -1.0f;
      if (!nng_cgrid_plan(g, st, st->cg_rs[r]) ||
          time_conv(g, &g->convs[st->conv[0]], IMPL_STACK, STACK_CGRID, 0, 0, 0, &t, &e2) != CUDAQ_NN_OK) {
        (void)cudaGetLastError();
        continue;
      }
      nng_tune_log(g, &g->convs[st->conv[0]], "stack in grid mode, CTAs", st->cg.cl, t);
      if (st->t_cg < 0.0f || t < st->t_cg) st->t_cg = t, best_r = st->cg_rs[r];
    }
    if (best_r == 0 || !nng_cgrid_plan(g, st, best_r)) st->t_cg = -1.0f;
    const int side = nng_cnet_side(g, st);
    const float c_cnet = side > 1 ? st->t_cnet / (float)side : st->t_cnet; /* cost, as above */
    const int cn = st->t_cnet >= 0.0f && (force_cn || st->t_stack < 0.0f || c_cnet < st->t_stack);
    st->kind = cn ? STACK_CLUSTER : STACK_GRID;
    float t = cn ? c_cnet : st->t_stack;
    /* grid mode takes the whole GPU (its cost is its time, as the grid
     * kernel's); CUDAQ_NN_CNET_GRID=1 forces it */
    const int force_cg = nng_cgrid_env() == 1;
    if (st->t_cg >= 0.0f && (force_cg || t < 0.0f || (!force_cn && st->t_cg < t))) {
      st->kind = STACK_CGRID;
      t = st->t_cg;
    }
    st->use = t >= 0.0f && (force || st->t_members < 0.0f || t < st->t_members);
    apply_stack(g, st);
  }
}

/* ------------------------------------------------------------------------ */
/* Plan file                                                                 */

cudaq_nn_status_t nng_make_key(cudaq_nn_gpu *g, int device, cudaq_nn_error_t *err) {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, device));
  int rt = 0;
  CK(cudaRuntimeGetVersion(&rt));
  char uuid[33];
  for (int i = 0; i < 16; i++) snprintf(uuid + 2 * i, 3, "%02x", (unsigned char)prop.uuid.bytes[i]);
  snprintf(g->key, sizeof g->key,
           "cudaq-nn-plan %d\nmodel %016llx\ngpu %s|sm_%d%d|%s\nversions cudart %d cudnn %zu\n"
           "precision %s conv %d convs %d concurrent %d\n",
           ENGINE_PLAN_VERSION, (unsigned long long)cudaq_nn_model_hash(g->m), prop.name, prop.major,
           prop.minor, uuid, rt, (size_t)cudnnGetVersion(), g->half ? "fp16" : "fp32",
           (int)g->opts.conv_impl, g->n_convs, g->opts.concurrent);
  return CUDAQ_NN_OK;
}

/* Reads the plan; 1 when it matches this engine and was applied. */
static int read_plan(cudaq_nn_gpu *g, const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char buf[8192];
  size_t len = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[len] = '\0';
  size_t klen = strlen(g->key);
  if (len < klen || memcmp(buf, g->key, klen) != 0) return 0;
  const char *p = buf + klen;
  for (int i = 0; i < g->n_convs; i++) {
    conv_state *c = &g->convs[i];
    int node, impl, algo, in_cl, out_cl, used = 0;
    unsigned long long ws;
    float to, tc, tt, tl, tlc;
    if (sscanf(p, "conv %d %d %d %llu %f %f %f %f %f %d %d\n%n", &node, &impl, &algo, &ws, &to, &tc, &tt, &tl, &tlc,
               &in_cl, &out_cl, &used) != 11 ||
        used == 0)
      return 0;
    p += used;
    if (node != c->node || impl < IMPL_OWN || impl > IMPL_STACK || (impl == IMPL_STACK && c->stack < 0)) return 0;
    /* Layouts: NDHWC only on edges plan_layouts allowed, and only with the
     * channels-last kernel; chain consistency is checked below. */
    if ((in_cl != 0 && in_cl != 1) || (out_cl != 0 && out_cl != 1) || (in_cl && !c->lay_in) ||
        (out_cl && !c->lay_out) || ((in_cl || out_cl) && impl != IMPL_CL))
      return 0;
    if (impl == IMPL_CL && (!c->cl_ok[in_cl] || !nnk_cl_algo_ok(c->p, in_cl, algo))) return 0;
    if (impl == IMPL_CUDNN_FUSED && !c->fused_ok) return 0;
    if (impl == IMPL_OWN && !c->own_ok) return 0;
    if (impl == IMPL_TC && (!c->tc_ok || !nnk_tc_config_ok(c->p, algo))) return 0;
    if (is_cudnn(impl)) {
      size_t need = 0;
      if (!c->cudnn_ok || algo < 0 || algo >= CUDNN_CONVOLUTION_FWD_ALGO_COUNT ||
          cudnnGetConvolutionForwardWorkspaceSize(g->cudnn, c->xd, c->wd, c->cd, c->yd,
                                                  (cudnnConvolutionFwdAlgo_t)algo, &need) != CUDNN_STATUS_SUCCESS ||
          need > ws)
        return 0;
    }
    c->impl = impl;
    c->algo = algo;
    c->ws = (size_t)ws;
    c->t_own = to;
    c->t_cudnn = tc;
    c->t_tc = tt;
    c->t_cl = tl;
    c->t_cl_chain = tlc;
    c->in_cl = in_cl;
    c->out_cl = out_cl;
  }
  /* Every NDHWC edge has both ends agreeing. */
  for (int i = 0; i < g->n_convs; i++) {
    const conv_state *c = &g->convs[i];
    if (c->lay_in && c->in_cl != g->convs[c->producer].out_cl) return 0;
  }
  /* Stacks: the same chains, every member running the stack exactly when it is used. */
  for (int i = 0; i < g->n_stacks; i++) {
    stack_state *st = &g->stacks[i];
    int head, use, kind, cg_r, used = 0;
    float ts, tm, tc, tg;
    if (sscanf(p, "stack %d %d %f %f %d %f %f %d\n%n", &head, &use, &ts, &tm, &kind, &tc, &tg, &cg_r, &used) != 8 ||
        used == 0)
      return 0;
    p += used;
    if (head != st->conv[0] || (use != 0 && use != 1) || kind < STACK_GRID || kind > STACK_CGRID ||
        (kind == STACK_CLUSTER && !st->cn_ok))
      return 0;
    /* grid mode: the row count timed fastest, if it still fits here */
    int cg_fits = 0;
    for (int r = 0; r < st->n_cg_rs; r++) cg_fits |= st->cg_rs[r] == cg_r;
    if (cg_r > 0 && (!cg_fits || !nng_cgrid_plan(g, st, cg_r))) return 0;
    if (kind == STACK_CGRID && cg_r <= 0) return 0;
    st->t_cg = tg;
    for (int l = 0; l < st->L; l++) {
      const conv_state *c = &g->convs[st->conv[l]];
      if ((c->impl == IMPL_STACK) != use || (use && c->algo != kind)) return 0;
    }
    st->use = use;
    st->kind = kind;
    st->t_stack = ts;
    st->t_members = tm;
    st->t_cnet = tc;
  }
  return strcmp(p, "end\n") == 0;
}

static cudaq_nn_status_t write_plan(cudaq_nn_gpu *g, const char *path, cudaq_nn_error_t *err) {
  /* A temporary file of this writer's own (engines created at once in one
   * process write the same plan), renamed over the plan when complete. */
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s.XXXXXX", path) >= (int)sizeof tmp) {
    nn__set_error(err, "plan path too long");
    return CUDAQ_NN_ERR_INVALID_ARG;
  }
  int fd = mkstemp(tmp);
  FILE *f = NULL;
  int e = errno;
  if (fd >= 0 && (fchmod(fd, 0644) != 0 || !(f = fdopen(fd, "w")))) {
    e = errno;
    close(fd);
    remove(tmp);
  }
  if (!f) {
    nn__set_error(err, "cannot write the plan '%.200s': %s", tmp, strerror(e));
    return CUDAQ_NN_ERR_IO;
  }
  fputs(g->key, f);
  for (int i = 0; i < g->n_convs; i++) {
    const conv_state *c = &g->convs[i];
    fprintf(f, "conv %d %d %d %llu %.9g %.9g %.9g %.9g %.9g %d %d\n", c->node, c->impl, c->algo,
            (unsigned long long)c->ws, c->t_own, c->t_cudnn, c->t_tc, c->t_cl, c->t_cl_chain, c->in_cl, c->out_cl);
  }
  for (int i = 0; i < g->n_stacks; i++) {
    const stack_state *st = &g->stacks[i];
    fprintf(f, "stack %d %d %.9g %.9g %d %.9g %.9g %d\n", st->conv[0], st->use, st->t_stack, st->t_members, st->kind,
            st->t_cnet, st->t_cg, st->t_cg >= 0.0f ? st->cg_r : 0);
  }
  fputs("end\n", f);
  int bad = ferror(f);
  bad |= fclose(f) != 0;
  if (bad || rename(tmp, path) != 0) {
    remove(tmp);
    nn__set_error(err, "cannot write the plan '%.200s'", path);
    return CUDAQ_NN_ERR_IO;
  }
  return CUDAQ_NN_OK;
}

/* ------------------------------------------------------------------------ */
/* Public API                                                                */

cudaq_nn_status_t nng_select_algorithms(cudaq_nn_gpu *g, cudaq_nn_error_t *err) {
  const char *path = g->opts.plan_path;
  if (path && read_plan(g, path)) {
    g->plan_state = CUDAQ_NN_PLAN_HIT;
  } else {
    int existed = path && access(path, F_OK) == 0;
    if (g->opts.conv_impl != CUDAQ_NN_CONV_OWN) TRY(set_workspace(g, TUNE_WS_LIMIT, err));
    for (int i = 0; i < g->n_convs; i++) TRY(tune_conv(g, &g->convs[i], err));
    choose_chains(g);
    TRY(nng_tune_first_folds(g, err));
    tune_stacks(g);
    if (path) {
      TRY(write_plan(g, path, err));
      g->plan_state = existed ? CUDAQ_NN_PLAN_REBUILT : CUDAQ_NN_PLAN_BUILT;
    } else {
      g->plan_state = CUDAQ_NN_PLAN_NONE;
    }
  }
  /* Exactly what the chosen algorithms need: tuning may have grown the
   * workspace for a candidate that was not kept. */
  size_t ws = 0;
  for (int i = 0; i < g->n_convs; i++)
    if (is_cudnn(g->convs[i].impl) && g->convs[i].ws > ws) ws = g->convs[i].ws;
  return set_workspace(g, ws, err);
}

