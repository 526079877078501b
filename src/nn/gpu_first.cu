/* gpu_first.cu - a first convolution folded into the next one's input
 * window (issue 12; nng_fold_first_layers, gpu_engine_internal.h).
 *
 * Why. The shipped predecoders start with a copy (the events scattered onto
 * the grid beside two constant site-mask channels) and a 3 -> 128
 * convolution: two kernels of 3-4 and 8-10 us on an H100 for a few million
 * multiply-adds (bench/results/nn-tail-kernel-h100-2026-11-25.md). A
 * convolution is linear in its input channels, so the constant channels'
 * part plus the bias is a constant tensor b[cell][m], computed here once;
 * what depends on the request is one channel of mostly zeros. The next
 * convolution (a wgmma brick or flat tile, gpu_conv_wg.cu) stages its input window
 * anyway: it computes act(b + sum w x) there instead of copying the first
 * layer's result, so the copy and the first layer's launch go.
 *
 * Which second layers fold: those whose algorithm is a wgmma brick or flat
 * tile. The tuner picks per layer; where its pick for the second layer
 * cannot fold, nng_tune_first_folds (below) times the algorithms that can,
 * with the fold in place, against the two layers as picked, and switches
 * where the fold wins (the fast predecoders at d = 13: 1.9 us).
 *
 * Also here: the same copy read inside the cluster kernel or its grid mode
 * (try_fold_cnet, nnk_cnet::fold), which take the first layer as it is but
 * need the copy's constant channels apart from its run-time ones. Both
 * folds read the copy's map the same way (read_split_map). */
#include <math.h>

#include "gpu_engine_internal.h"

namespace {

/* The constant whose device buffer is dev, or -1 (a buffer written at run time). */
int const_of(const cudaq_nn_gpu *g, const void *dev) {
  for (size_t v = 0; v < g->m->n_values; v++)
    if (g->m->values[v].data && g->dev[v] == dev) return (int)v;
  return -1;
}

/* The ST_CONV step whose convolution reads buffer x as its input, or -1. */
int conv_step_reading(const cudaq_nn_gpu *g, const void *x, int from) {
  for (int t = from; t < g->n_steps; t++)
    if (g->steps[t].kind == ST_CONV && g->convs[g->steps[t].conv].p.x == x) return t;
  return -1;
}

/* Whether c has the first layer's shape: 3 x 3 x 3, stride 1, dilation 1,
 * padding 1 on every side (output grid = input grid), batch 1, constant
 * FP32 weights and bias. */
int first_shape(const cudaq_nn_model_t *m, const conv_state *c) {
  const nnk_conv &p = c->p;
  const nn_node_t *nd = &m->nodes[c->node];
  if (p.N != 1 || nd->conv.nsp != 3) return 0;
  for (int i = 0; i < 3; i++)
    if (p.k[i] != 3 || p.stride[i] != 1 || p.dil[i] != 1 || nd->conv.pad0[i] != 1 || nd->conv.pad1[i] != 1 ||
        p.in3[i] != p.out3[i])
      return 0;
  /* Finite weights and bias: the fold skips zero inputs, so 0 x Inf (NaN
   * in the unfolded convolution) would be lost. */
  const nn_value_t *w = &m->values[nd->in[1]];
  if (!w->data || w->dtype != CUDAQ_NN_FLOAT) return 0;
  for (size_t i = 0; i < w->n; i++)
    if (!isfinite(((const float *)w->data)[i])) return 0;
  if (nd->n_in > 2 && nd->in[2] >= 0) {
    const nn_value_t *b = &m->values[nd->in[2]];
    if (!b->data || b->dtype != CUDAQ_NN_FLOAT) return 0;
    for (size_t i = 0; i < b->n; i++)
      if (!isfinite(((const float *)b->data)[i])) return 0;
  }
  return 1;
}

/* The map of the copy feeding c1 read apart: per input channel, constant
 * (xc filled, values as the copy writes them) or dynamic (idx into the one
 * run-time buffer, -1 where the copy writes a constant zero). 0 when the
 * map has another form (two run-time buffers, a nonzero constant inside a
 * dynamic channel, an FP16 constant). */
struct split_map {
  int dyn_buf;    /* index in bufs of the run-time buffer */
  int cd;         /* dynamic channels */
  int chan[NNK_FIRST_MAX_CD];
};
int split_copy_map(const cudaq_nn_gpu *g, int C, size_t cells, const uint8_t *src, const int64_t *idx,
                   const void *const *bufs, int n_bufs, int half, double *xc, int32_t *didx, split_map *sm) {
  int cv[256];
  sm->dyn_buf = -1;
  sm->cd = 0;
  for (int k = 0; k < n_bufs; k++) {
    cv[k] = const_of(g, bufs[k]);
    if (cv[k] < 0) {
      if (sm->dyn_buf >= 0) return 0;
      sm->dyn_buf = k;
    }
  }
  if (sm->dyn_buf < 0) return 0;
  for (int c = 0; c < C; c++) {
    int dyn = 0;
    for (size_t e = 0; e < cells && !dyn; e++) dyn = cv[src[(size_t)c * cells + e]] < 0;
    if (dyn && sm->cd == NNK_FIRST_MAX_CD) return 0;
    for (size_t e = 0; e < cells; e++) {
      const size_t i = (size_t)c * cells + e;
      double v = 0.0;
      if (cv[src[i]] >= 0) {
        const nn_value_t *c = &g->m->values[cv[src[i]]];
        if (c->dtype == CUDAQ_NN_FLOAT16) return 0; /* no host reading of its raw halves here */
        const float f = nn__ld_f(c->data, c->dtype, idx[i]); /* as the copy's Cast reads it */
        v = half ? (double)__half2float(__float2half(f)) : (double)f; /* as the FP16 copy would hold it */
      }
      if (dyn) {
        if (cv[src[i]] >= 0 && v != 0.0) return 0;
        if (idx[i] > INT32_MAX) return 0;
        didx[(size_t)sm->cd * cells + e] = cv[src[i]] >= 0 ? -1 : (int32_t)idx[i];
        xc[i] = 0.0;
      } else {
        xc[i] = v;
      }
    }
    if (dyn) sm->chan[sm->cd++] = c;
  }
  return sm->cd > 0;
}

/* b[cell][m] = bias[m] + sum over the constant channels and taps of
 * w[m][c][t] xc[c][cell + t - 1] (zero outside the grid), in double, stored
 * FP32; w of the dynamic channels as [cd][t][m]. Rows of ld = M values. */
int fold(const float *w, const float *bias, int M, int C, const int *in3, const double *xc, const split_map &sm,
         int ld, float *fb, float *fw) {
  const int D = in3[0], H = in3[1], W = in3[2];
  const size_t cells = (size_t)D * H * W;
  int is_dyn[256] = {0};
  for (int k = 0; k < sm.cd; k++) is_dyn[sm.chan[k]] = 1;
  double *acc = (double *)malloc((size_t)M * sizeof(double));
  if (!acc) return 0;
  for (int z = 0; z < D; z++)
    for (int y = 0; y < H; y++)
      for (int x = 0; x < W; x++) {
        for (int mm = 0; mm < M; mm++) acc[mm] = bias ? bias[mm] : 0.0;
        for (int c = 0; c < C; c++) {
          if (is_dyn[c]) continue;
          for (int t = 0; t < 27; t++) {
            const int zz = z + t / 9 - 1, yy = y + (t / 3) % 3 - 1, xx = x + t % 3 - 1;
            if (zz < 0 || zz >= D || yy < 0 || yy >= H || xx < 0 || xx >= W) continue;
            const double v = xc[(size_t)c * cells + ((size_t)zz * H + yy) * W + xx];
            if (v == 0.0) continue;
            for (int mm = 0; mm < M; mm++) acc[mm] += (double)w[((size_t)mm * C + c) * 27 + t] * v;
          }
        }
        float *row = fb + (((size_t)z * H + y) * W + x) * ld;
        for (int mm = 0; mm < M; mm++) row[mm] = (float)acc[mm];
      }
  free(acc);
  for (int k = 0; k < sm.cd; k++)
    for (int t = 0; t < 27; t++)
      for (int mm = 0; mm < M; mm++) fw[((size_t)k * 27 + t) * ld + mm] = w[((size_t)mm * C + sm.chan[k]) * 27 + t];
  return 1;
}

cudaq_nn_status_t upload(cudaq_nn_gpu *g, const void *host, size_t bytes, void **dev, cudaq_nn_error_t *err) {
  TRY(nng_dalloc(g, bytes, dev, err));
  CK(cudaMemcpy(*dev, host, bytes, cudaMemcpyHostToDevice));
  return CUDAQ_NN_OK;
}

/* The map of copy node `node` (C channels of `cells` cells), read and
 * split (split_copy_map): its buffers, their element types, the constant
 * channels' values (xc) and the run-time channels' indices (didx). *ok = 0
 * when the copy's output is not C x cells elements or its map has another
 * form. */
struct split_copy {
  uint8_t *src;
  int64_t *idx;
  const void **bufs;
  double *xc;
  int32_t *didx;
  int dts[256], n_bufs;
  split_map sm;
};
void free_split(split_copy *c) {
  free(c->src); free(c->idx); free(c->bufs); free(c->xc); free(c->didx);
}
cudaq_nn_status_t read_split_map(const cudaq_nn_gpu *g, const int *producer, const unsigned char *absorbed, int node,
                                 int C, size_t cells, int half, split_copy *c, int *ok, cudaq_nn_error_t *err) {
  const size_t n = (size_t)C * cells;
  *ok = 0;
  memset(c, 0, sizeof *c);
  if (g->m->values[g->m->nodes[node].out[0]].n != n) return CUDAQ_NN_OK; /* not C channels of these cells */
  c->src = (uint8_t *)malloc(n);
  c->idx = (int64_t *)malloc(n * sizeof(int64_t));
  c->bufs = (const void **)malloc(256 * sizeof(void *));
  c->xc = (double *)malloc(n * sizeof(double));
  c->didx = (int32_t *)malloc(NNK_FIRST_MAX_CD * cells * sizeof(int32_t));
  if (!c->src || !c->idx || !c->bufs || !c->xc || !c->didx) {
    nn__set_error(err, "out of host memory reading a copy's map");
    return CUDAQ_NN_ERR_NO_MEMORY;
  }
  TRY(nng_copy_map(g, producer, absorbed, node, c->src, c->idx, c->bufs, c->dts, &c->n_bufs));
  *ok = split_copy_map(g, C, cells, c->src, c->idx, c->bufs, c->n_bufs, half, c->xc, c->didx, &c->sm);
  return CUDAQ_NN_OK;
}

/* Whether some channels-last algorithm can run p with a first layer of cd
 * dynamic channels folded into its window (a wgmma brick or flat tile). */
int first_algo_exists(const nnk_conv &p, int cd) {
  for (int k = 0; k < NNK_CL_ALL_ALGOS; k++)
    if (nnk_cl_algo_ok(p, 1, k) && nnk_cl_first_ok(p, k, cd)) return 1;
  return 0;
}

/* The fold of first convolution c1 (fed by copy step mi) into c2's input
 * window, c2 running channels-last algorithm algo (-1: any algorithm that
 * can fold), as *f: every condition checked, the tensors made and uploaded
 * (*ok = 1); *ok = 0, nothing uploaded, when one fails. chosen >= 0 (the
 * tuner): when c2's algorithm `chosen` can fold it already, *ok = 2 and
 * nothing is made (the pick stays; nng_fold_first_layers makes the fold). */
cudaq_nn_status_t make_fold(cudaq_nn_gpu *g, const int *producer, const unsigned char *absorbed, int mi,
                            const conv_state *c1, const conv_state *c2, int algo, int chosen, nnk_first *f,
                            int *ok, cudaq_nn_error_t *err) {
  const cudaq_nn_model_t *m = g->m;
  const step *M = &g->steps[mi];
  *ok = 0;
  const int n1 = c1->node, n2 = c2->node;
  if (!first_shape(m, c1) || c2->impl != IMPL_CL || !c2->in_cl || c2->p.C != c1->p.M || c1->p.M % 8 != 0 ||
      c1->p.C > 256 ||
      memcmp(c2->p.in3, c1->p.out3, sizeof c1->p.in3) != 0 || c2->cf.x_idx)
    return CUDAQ_NN_OK;
  if (!nng_read_by_chain(m, m->nodes[M->node].out[0], &n1, 1, 1) || !nng_read_by_chain(m, c1->out_value, &n2, 1, 1))
    return CUDAQ_NN_OK;
  const size_t cells = (size_t)c1->p.in3[0] * c1->p.in3[1] * c1->p.in3[2];
  const int ld = c1->p.M; /* a multiple of 8: the window's 16-byte copies */
  float *fb = (float *)calloc(cells * ld, sizeof(float));
  float *fw = (float *)calloc((size_t)NNK_FIRST_MAX_CD * 27 * ld, sizeof(float));
  const int half = g->sdt[m->nodes[M->node].out[0]] == CUDAQ_NN_FLOAT16;
  split_copy cp;
  int split_ok = 0;
  cudaq_nn_status_t st = read_split_map(g, producer, absorbed, M->node, c1->p.C, cells, half, &cp, &split_ok, err);
  if (!st && (!fb || !fw)) {
    nn__set_error(err, "out of host memory folding the first convolution");
    st = CUDAQ_NN_ERR_NO_MEMORY;
  }
  const split_map &sm = cp.sm;
  if (!st && split_ok && chosen >= 0 && nnk_cl_first_ok(c2->p, chosen, sm.cd)) {
    *ok = 2; /* folds as chosen: nothing to time, nothing made */
  } else if (!st && split_ok &&
             (algo >= 0 ? nnk_cl_first_ok(c2->p, algo, sm.cd) : first_algo_exists(c2->p, sm.cd))) {
    const nn_node_t *nd = &m->nodes[n1];
    const float *bias = nd->n_in > 2 && nd->in[2] >= 0 ? (const float *)m->values[nd->in[2]].data : NULL;
    void *db = NULL, *dw = NULL, *di = NULL;
    if (!fold((const float *)m->values[nd->in[1]].data, bias, c1->p.M, c1->p.C, c1->p.in3, cp.xc, sm, ld, fb, fw)) {
      nn__set_error(err, "out of host memory folding the first convolution");
      st = CUDAQ_NN_ERR_NO_MEMORY;
    }
    if (!st) st = upload(g, fb, cells * ld * sizeof(float), &db, err);
    if (!st) st = upload(g, fw, (size_t)sm.cd * 27 * ld * sizeof(float), &dw, err);
    if (!st) st = upload(g, cp.didx, (size_t)sm.cd * cells * sizeof(int32_t), &di, err);
    if (!st) {
      memset(f, 0, sizeof *f);
      f->b = (const float *)db;
      f->w = (const float *)dw;
      f->idx = (const int32_t *)di;
      f->x = cp.bufs[sm.dyn_buf];
      f->x_dt = cp.dts[sm.dyn_buf];
      f->half_x = half;
      f->cd = sm.cd;
      f->ld = ld;
      f->relu = c1->p.relu;
      *ok = 1;
    } else { /* what was uploaded before the failure */
      nng_dfree(g, db);
      nng_dfree(g, dw);
      nng_dfree(g, di);
    }
  }
  free_split(&cp);
  free(fb); free(fw);
  return st;
}

/* The copy maps both passes read (nng_producers, nng_plan_copy_absorb),
 * allocated and filled in one place; free_copy_maps frees them. */
struct copy_maps {
  int *producer;
  unsigned char *absorbed;
};
void free_copy_maps(copy_maps *cm) {
  free(cm->producer);
  free(cm->absorbed);
  cm->producer = NULL;
  cm->absorbed = NULL;
}
cudaq_nn_status_t make_copy_maps(const cudaq_nn_model_t *m, copy_maps *cm, const char *what, cudaq_nn_error_t *err) {
  cm->producer = (int *)malloc((m->n_values + 1) * sizeof(int));
  cm->absorbed = (unsigned char *)calloc(m->n_nodes + 1, 1);
  if (!cm->producer || !cm->absorbed) {
    free_copy_maps(cm);
    nn__set_error(err, "out of host memory %s", what);
    return CUDAQ_NN_ERR_NO_MEMORY;
  }
  nng_producers(m, cm->producer);
  nng_plan_copy_absorb(m, cm->producer, cm->absorbed);
  return CUDAQ_NN_OK;
}

/* Its tensors, freed (the fold not taken). */
void drop_fold(cudaq_nn_gpu *g, nnk_first *f) {
  nng_dfree(g, (void *)f->b);
  nng_dfree(g, (void *)f->w);
  nng_dfree(g, (void *)f->idx);
  memset(f, 0, sizeof *f);
}

/* Step i as a copy feeding a first convolution (step *s1) whose result
 * feeds a second (step *s2): 1, else 0. */
int fold_triple(const cudaq_nn_gpu *g, int i, int *s1, int *s2) {
  const step *M = &g->steps[i];
  if (M->kind != ST_MOVE || !M->mv.n) return 0;
  *s1 = conv_step_reading(g, M->mv.out, i + 1);
  if (*s1 < 0) return 0;
  *s2 = conv_step_reading(g, g->convs[g->steps[*s1].conv].p.y, *s1 + 1);
  return *s2 >= 0;
}

/* Whether first-layer folds are on (CUDAQ_NN_NO_FIRST=1 or CUDAQ_NN_NO_FUSE: off; FP16 engines only). */
int first_folds_on(const cudaq_nn_gpu *g) {
  const char *no = getenv("CUDAQ_NN_NO_FIRST");
  return !(no && no[0] == '1') && !nng_fuse_off() && g->half;
}

/* Copy step mi in front of stack st, which runs as the cluster kernel or
 * in its grid mode (plan k): the kernel reads the copy's constant channels
 * from a tensor made here and its dynamic channels through the copy's map
 * (nnk_cnet::fold) when every condition holds (else *done = 0). */
cudaq_nn_status_t try_fold_cnet(cudaq_nn_gpu *g, const int *producer, const unsigned char *absorbed, int mi,
                                stack_state *st, nnk_cnet *k, int *done, cudaq_nn_error_t *err) {
  const cudaq_nn_model_t *m = g->m;
  const step *M = &g->steps[mi];
  const conv_state *c = &g->convs[st->conv[0]];
  const int cn = c->node;
  *done = 0;
  if (k->N != 1 || k->fold.x || !nng_read_by_chain(m, m->nodes[M->node].out[0], &cn, 1, 1)) return CUDAQ_NN_OK;
  const size_t cells = (size_t)k->P, n = (size_t)c->p.C * cells;
  if (g->sdt[m->nodes[M->node].out[0]] != CUDAQ_NN_FLOAT16) return CUDAQ_NN_OK;
  __half *xh = (__half *)malloc(n * sizeof(__half));
  split_copy cp;
  int ok = 0;
  cudaq_nn_status_t st_ = read_split_map(g, producer, absorbed, M->node, c->p.C, cells, 1, &cp, &ok, err);
  if (!st_ && !xh) {
    nn__set_error(err, "out of host memory folding a copy into the cluster kernel");
    st_ = CUDAQ_NN_ERR_NO_MEMORY;
  }
  if (!st_ && ok) {
    /* The run-time channels are converted in the kernel by ldf then
     * __float2half: what the copy's move_at does with a Cast absorbed
     * (ew_apply's Cast to FLOAT16) and, for an FP16 buffer copied as it
     * is, the same halves (NaN payloads aside). */
    for (size_t i = 0; i < n; i++) xh[i] = __float2half((float)cp.xc[i]); /* FP16 values already (half = 1) */
    void *dx = NULL, *di = NULL;
    st_ = upload(g, xh, n * sizeof(__half), &dx, err);
    if (!st_) st_ = upload(g, cp.didx, (size_t)cp.sm.cd * cells * sizeof(int32_t), &di, err);
    if (!st_) {
      k->x = (const __half *)dx;
      k->fold.x = cp.bufs[cp.sm.dyn_buf];
      k->fold.idx = (const int32_t *)di;
      k->fold.x_dt = cp.dts[cp.sm.dyn_buf];
      k->fold.cd = cp.sm.cd;
      for (int j = 0; j < cp.sm.cd; j++) k->fold.ch[j] = cp.sm.chan[j];
      st->fold_mv = M->mv; /* n > 0: move_step_writing takes only copies that move something */
      *done = 1;
    }
  }
  free_split(&cp);
  free(xh);
  return st_;
}

/* The ST_MOVE step writing x, before step `before`, or -1. */
int move_step_writing(const cudaq_nn_gpu *g, const void *x, int before) {
  for (int t = 0; t < before && t < g->n_steps; t++)
    if (g->steps[t].kind == ST_MOVE && g->steps[t].mv.n && g->steps[t].mv.out == x) return t;
  return -1;
}

}  // namespace

cudaq_nn_status_t nng_fold_first_layers(cudaq_nn_gpu *g, cudaq_nn_error_t *err) {
  const int first = first_folds_on(g), cnet = nng_cnet_fold_env() != 0 && !nng_fuse_off() && g->half;
  if (!first && !cnet) return CUDAQ_NN_OK;
  copy_maps cm;
  TRY(make_copy_maps(g->m, &cm, "folding the first convolution", err));
  const int *producer = cm.producer;
  const unsigned char *absorbed = cm.absorbed;
  unsigned char *drop = (unsigned char *)calloc((size_t)g->n_steps + 1, 1);
  if (!drop) {
    free_copy_maps(&cm);
    nn__set_error(err, "out of host memory folding the first convolution");
    return CUDAQ_NN_ERR_NO_MEMORY;
  }
  cudaq_nn_status_t st = CUDAQ_NN_OK;
  for (int i = 0, s1, s2; i < g->n_steps && !st && first; i++) {
    if (drop[i] || !fold_triple(g, i, &s1, &s2) || drop[s1] || drop[s2]) continue;
    conv_state *c1 = &g->convs[g->steps[s1].conv], *c2 = &g->convs[g->steps[s2].conv];
    nnk_first f;
    int ok = 0;
    st = make_fold(g, producer, absorbed, i, c1, c2, c2->algo, -1, &f, &ok, err);
    if (!ok) continue;
    c2->cf.first = f;
    c1->folded_into = 1 + (int)(c2 - g->convs);
    drop[i] = drop[s1] = 1;
  }
  for (int i = 0; i < g->n_stacks && !st && cnet; i++) {
    stack_state *sk = &g->stacks[i];
    if (!sk->use || (sk->kind != STACK_CLUSTER && sk->kind != STACK_CGRID)) continue;
    const conv_state *c0 = &g->convs[sk->conv[0]];
    int s0 = -1; /* the stack's step */
    for (int t = 0; t < g->n_steps && s0 < 0; t++)
      if (g->steps[t].kind == ST_CONV && g->steps[t].conv == sk->conv[0]) s0 = t;
    const int mi = s0 < 0 || drop[s0] ? -1 : move_step_writing(g, c0->p.x, s0);
    if (mi < 0 || drop[mi]) continue;
    int done = 0;
    st = try_fold_cnet(g, producer, absorbed, mi, sk, sk->kind == STACK_CLUSTER ? &sk->cn : &sk->cg, &done, err);
    if (done) drop[mi] = 1;
  }
  int w = 0;
  for (int i = 0; i < g->n_steps; i++)
    if (!drop[i]) g->steps[w++] = g->steps[i];
  g->n_steps = w;
  free_copy_maps(&cm);
  free(drop);
  return st;
}

namespace {

/* One launch of each convolution in cs (as chosen, or with algo k when
 * k >= 0) on g->stream. */
cudaq_nn_status_t enqueue_segment(cudaq_nn_gpu *g, const conv_state *const *cs, int n, int k, cudaq_nn_error_t *err) {
  cudaq_nn_status_t st = CUDAQ_NN_OK;
  for (int i = 0; i < n && !st; i++) {
    const conv_state *c = cs[i];
    st = k >= 0 ? nng_enqueue_conv(g, c, IMPL_CL, k, 0, 1, c->out_cl, err)
                : nng_enqueue_conv(g, c, c->impl, c->algo, c->ws, c->in_cl, c->out_cl, err);
  }
  return st;
}

/* The same captured as a graph into *exec, after one run outside the
 * capture (it loads the kernels: lazy module loading). */
cudaq_nn_status_t capture_segment(cudaq_nn_gpu *g, const conv_state *const *cs, int n, int k, cudaGraphExec_t *exec,
                                  cudaq_nn_error_t *err) {
  cudaGraph_t graph = NULL;
  *exec = NULL;
  TRY(enqueue_segment(g, cs, n, k, err));
  CK(cudaStreamSynchronize(g->stream));
  CK(cudaStreamBeginCapture(g->stream, cudaStreamCaptureModeThreadLocal));
  cudaq_nn_status_t st = enqueue_segment(g, cs, n, k, err);
  const cudaError_t e = cudaStreamEndCapture(g->stream, &graph); /* always ends the capture */
  if (!st && (e != cudaSuccess || cudaGraphInstantiate(exec, graph, 0) != cudaSuccess)) {
    nn__set_error(err, "capturing a segment for timing failed: %s", cudaGetErrorString(cudaGetLastError()));
    st = CUDAQ_NN_ERR_CUDA;
  }
  if (graph) cudaGraphDestroy(graph);
  return st;
}

int cmp_float(const void *a, const void *b) {
  const float x = *(const float *)a, y = *(const float *)b;
  return x < y ? -1 : x > y;
}

/* Median latency (µs) of each of the n graphs over reps replays, the
 * graphs taking turns; each replay alone in the stream, timed by events
 * around it (launch to completion, as in an inference). */
constexpr int FOLD_REPS = 101;
/* The fold is taken when its segment is at least 5% faster: by these
 * medians it was 4.2% faster at d = 9 (fast predecoder, H200) with no gain
 * in the whole inference, 24% at d = 13 with 1.5 us gained there. */
constexpr float FOLD_WIN = 0.95f;
cudaq_nn_status_t segment_latency(cudaq_nn_gpu *g, cudaGraphExec_t *exec, int n, float *us, cudaq_nn_error_t *err) {
  cudaEvent_t a = NULL, b = NULL;
  float *t = (float *)malloc((size_t)n * FOLD_REPS * sizeof(float));
  cudaq_nn_status_t st = t ? CUDAQ_NN_OK : CUDAQ_NN_ERR_NO_MEMORY;
  if (!st && (cudaEventCreate(&a) != cudaSuccess || cudaEventCreate(&b) != cudaSuccess)) st = CUDAQ_NN_ERR_CUDA;
  for (int j = 0; j < n && !st; j++) /* warm-up */
    if (cudaGraphLaunch(exec[j], g->stream) != cudaSuccess || cudaStreamSynchronize(g->stream) != cudaSuccess)
      st = CUDAQ_NN_ERR_CUDA;
  for (int r = 0; r < FOLD_REPS && !st; r++)
    for (int j = 0; j < n && !st; j++) {
      float ms = 0.0f;
      if (cudaEventRecord(a, g->stream) != cudaSuccess || cudaGraphLaunch(exec[j], g->stream) != cudaSuccess ||
          cudaEventRecord(b, g->stream) != cudaSuccess || cudaEventSynchronize(b) != cudaSuccess ||
          cudaEventElapsedTime(&ms, a, b) != cudaSuccess)
        st = CUDAQ_NN_ERR_CUDA;
      t[(size_t)j * FOLD_REPS + r] = ms * 1000.0f;
    }
  if (st == CUDAQ_NN_ERR_CUDA)
    nn__set_error(err, "timing a segment failed: %s", cudaGetErrorString(cudaGetLastError()));
  else if (st)
    nn__set_error(err, "out of host memory timing a segment");
  for (int j = 0; j < n && !st; j++) {
    qsort(t + (size_t)j * FOLD_REPS, FOLD_REPS, sizeof(float), cmp_float);
    us[j] = t[(size_t)j * FOLD_REPS + FOLD_REPS / 2];
  }
  if (a) cudaEventDestroy(a);
  if (b) cudaEventDestroy(b);
  free(t);
  return st;
}

}  // namespace

/* Why latency and not the tuner's per-layer figure: the tuner times a
 * layer as 20 back-to-back launches of itself, where each launch's
 * prologue (its weights, before the PDL wait) hides under the one before.
 * By that figure the fold of the fast predecoders' first layer into a
 * wgmma brick (algo 111) beat the two layers (d = 5: 6.2 against 7.5 us)
 * while whole inferences got 1.5-2 us slower; d = 13 (algo 114) 1.9 us
 * faster (H200, bench/results/nn-fold-tune-h200-2026-11-29.md). The two
 * segments (the first two layers as chosen; the second alone, folded)
 * are therefore each timed as a graph of their own, launch to completion,
 * and the fold taken when its median is lower by a margin (FOLD_WIN). The
 * input copy, which the fold also removes, is in neither segment: the
 * comparison leans towards the layers as chosen. */
cudaq_nn_status_t nng_tune_first_folds(cudaq_nn_gpu *g, cudaq_nn_error_t *err) {
  const int force = nng_first_fold_env();
  if (!first_folds_on(g) || g->opts.conv_impl != CUDAQ_NN_CONV_AUTO || force == 0) return CUDAQ_NN_OK;
  copy_maps cm;
  TRY(make_copy_maps(g->m, &cm, "tuning the first convolution's fold", err));
  const int *producer = cm.producer;
  const unsigned char *absorbed = cm.absorbed;
  cudaq_nn_status_t st = CUDAQ_NN_OK;
  for (int i = 0, s1, s2; i < g->n_steps && !st; i++) {
    if (!fold_triple(g, i, &s1, &s2)) continue;
    conv_state *c1 = &g->convs[g->steps[s1].conv], *c2 = &g->convs[g->steps[s2].conv];
    nnk_first f;
    int ok = 0;
    /* chosen: a second layer whose pick folds already (the accurate family's) is left as it is
     * before any tensor is made */
    st = make_fold(g, producer, absorbed, i, c1, c2, -1, c2->algo, &f, &ok, err);
    if (st || ok != 1) continue;
    /* exec[0]: the two layers as chosen; exec[1 + j]: c2 alone with the
     * fold, foldable algorithm ks[j] (a candidate that cannot launch is
     * skipped, its error consumed). */
    cudaGraphExec_t exec[1 + NNK_CL_ALL_ALGOS] = {NULL};
    int ks[NNK_CL_ALL_ALGOS], n = 0;
    const conv_state *pair[2] = {c1, c2}, *one[1] = {c2};
    /* A segment that cannot be captured or timed leaves the choice as it
     * is (the tuner's rule for a candidate that fails), its error consumed. */
    cudaq_nn_error_t e1;
    int timed = capture_segment(g, pair, 2, -1, &exec[0], &e1) == CUDAQ_NN_OK;
    c2->cf.first = f;
    for (int k = 0; k < NNK_CL_ALL_ALGOS && timed; k++) {
      if (!nnk_cl_algo_ok(c2->p, 1, k) || !nnk_cl_first_ok(c2->p, k, f.cd)) continue;
      cudaq_nn_error_t e2;
      if (capture_segment(g, one, 1, k, &exec[1 + n], &e2) != CUDAQ_NN_OK) {
        (void)cudaGetLastError();
        continue;
      }
      ks[n++] = k;
    }
    memset(&c2->cf.first, 0, sizeof c2->cf.first);
    float us[1 + NNK_CL_ALL_ALGOS];
    timed = timed && n > 0 && segment_latency(g, exec, 1 + n, us, &e1) == CUDAQ_NN_OK;
    if (!timed) (void)cudaGetLastError();
    int best = -1;
    for (int j = 0; j < n && timed; j++) {
      nng_tune_log(g, c2, "cl (first layer folded in, latency against the two layers') algo", ks[j], us[1 + j]);
      if ((force == 1 || us[1 + j] < FOLD_WIN * us[0]) && (best < 0 || us[1 + j] < us[1 + best])) best = j;
    }
    if (timed) nng_tune_log(g, c2, "the two layers as chosen, latency: algo", c2->algo, us[0]);
    for (int j = 0; j < 1 + n; j++)
      if (exec[j]) cudaGraphExecDestroy(exec[j]);
    drop_fold(g, &f);
    if (best >= 0) c2->algo = c2->cl_algo_chain = ks[best];
  }
  free_copy_maps(&cm);
  return st;
}
