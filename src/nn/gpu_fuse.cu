/* GPU engine graph passes (issue 12): fewer kernels for the small
 * integer/gather nodes around a predecoder's convolutions, where each
 * kernel costs a launch in the graph (~2 us) and does almost no work.
 *
 * Copy chains. A copy-class node (Concat, Gather, Slice, Transpose) whose
 * readers, through any reshape-like aliases, are all copy nodes (or a
 * matrix product reading it as A) gets no step ("absorbed"): each reader
 * composes its index map over the producer's sources. Concat(x, 0) ->
 * Gather(idx) becomes one gather from {x, 0}; a Cast read only by copies
 * becomes a conversion inside them.
 *
 * Elementwise chains. Consecutive elementwise steps over the same element
 * count, each input contiguous or a scalar, whose intermediate values are
 * read only inside the chain, run as one kernel (nnk_fused): the
 * intermediates live in registers, stored and re-read in their own element
 * type, so results are bit-identical to the unfused steps.
 *
 * Matrix-product tails (a predecoder's residual and frame). Two
 * consecutive products where the second does not read the first's results
 * share one launch (nng_pair_gemms): the shipped predecoders' tail runs as
 * two kernels instead of three, 3-7 us faster on the H100. Opt-in
 * (CUDAQ_NN_GEMM_CHAINS=1): a flat chain whose value is read only through
 * products' A maps is evaluated inside their loads (nng_fuse_gemm_chains;
 * its value is never stored, the rounding is the store's): one kernel, but
 * measured 3-4 us slower than the chain's own kernel plus the pair
 * (bench/results/nn-tail-h100-2026-11-24.md).
 *
 * The predecoder tail (nng_plan_tails, first of the product passes): where
 * the threshold chain, the products reading it and their epilogues have the
 * exported predecoders' shape (Greater -> Cast -> Mul by a constant; Gather
 * maps; constant B; Cast to INT32 [+ addend] and r - (r / c) * c) and every
 * operand is a small integer, all of it runs as one compiled kernel
 * (gpu_tail.cu): the shipped models 7-8 us faster on the H100
 * (bench/results/nn-tail-kernel-h100-2026-11-25.md). CUDAQ_NN_NO_TAIL=1
 * turns it off; CUDAQ_NN_TAIL_DEBUG=1 says which check turned a candidate
 * down. */
#include <math.h>

#include "gpu_engine_internal.h"

namespace {

int is_copy(const nn_node_t *nd) { return !nd->folded && !nng_is_alias_op(nd->op) && nn__is_move_op(nd->op); }
int is_gemm(const nn_node_t *nd) { return !nd->folded && (nd->op == NN_OP_MATMUL || nd->op == NN_OP_GEMM); }

int is_output(const cudaq_nn_model_t *m, int v) {
  for (size_t k = 0; k < m->n_outputs; k++)
    if (m->outputs[k] == v) return 1;
  return 0;
}

/* Whether v has readers, is no graph output, and every reader (through
 * reshape-like aliases) is a copy node or, with gemm_ok, a matrix product
 * reading v as its A only. With `absorbed` given, a copy must be one
 * absorbed into a map, and its own readers are walked the same way (a
 * product reading it reads through its map: gemm_ok). */
int readers_ok(const cudaq_nn_model_t *m, int v, int gemm_ok, const unsigned char *absorbed) {
  if (is_output(m, v)) return 0;
  int readers = 0;
  for (size_t i = 0; i < m->n_nodes; i++) {
    const nn_node_t *nd = &m->nodes[i];
    if (nd->folded) continue;
    int uses = 0;
    for (int k = 0; k < nd->n_in; k++) uses += nd->in[k] == v;
    if (!uses) continue;
    readers++;
    if (nng_is_alias_op(nd->op)) {
      if (!readers_ok(m, nd->out[0], gemm_ok, absorbed)) return 0;
    } else if (is_copy(nd) && (!absorbed || (absorbed[i] && readers_ok(m, nd->out[0], 1, absorbed)))) {
      continue;
    } else if (!(gemm_ok && is_gemm(nd) && uses == 1 && nd->in[0] == v)) {
      return 0;
    }
  }
  return readers > 0;
}

/* Whether every reader of value v is a copy node or, with gemm_ok, a
 * matrix product reading it as A only (the copy-absorption rule). */
int readers_compose(const cudaq_nn_model_t *m, int v, int gemm_ok) { return readers_ok(m, v, gemm_ok, NULL); }

/* Whether copy node a's composed map converts types (reads an absorbed Cast). */
int converts(const cudaq_nn_model_t *m, const int *producer, const unsigned char *absorbed, int a) {
  const nn_node_t *nd = &m->nodes[a];
  for (int k = 0; k < nd->n_in; k++) {
    const int p = nng_source_node(m, producer, nd->in[k]);
    if (p < 0 || !absorbed[p]) continue;
    if (m->nodes[p].op == NN_OP_CAST || converts(m, producer, absorbed, p)) return 1;
  }
  return 0;
}

/* Buffers that node ni's composed map reads. */
int leaf_count(const cudaq_nn_model_t *m, const int *producer, const unsigned char *absorbed, int ni) {
  const nn_node_t *nd = &m->nodes[ni];
  int n = 0;
  for (int k = 0; k < nd->n_in; k++) {
    const int a = nng_source_node(m, producer, nd->in[k]);
    n += a >= 0 && absorbed[a] && is_copy(&m->nodes[a]) ? leaf_count(m, producer, absorbed, a) : 1;
  }
  return n;
}

}  // namespace

int nng_fuse_off(void) { return getenv("CUDAQ_NN_NO_FUSE") != NULL; }

int nng_source_node(const cudaq_nn_model_t *m, const int *producer, int v) {
  while (v >= 0 && producer[v] >= 0 && nng_is_alias_op(m->nodes[producer[v]].op)) v = m->nodes[producer[v]].in[0];
  return v >= 0 ? producer[v] : -1;
}

void nng_producers(const cudaq_nn_model_t *m, int *producer) {
  for (size_t v = 0; v < m->n_values; v++) producer[v] = -1;
  for (size_t i = 0; i < m->n_nodes; i++)
    if (!m->nodes[i].folded) producer[m->nodes[i].out[0]] = (int)i;
}

void nng_plan_copy_absorb(const cudaq_nn_model_t *m, const int *producer, unsigned char *absorbed) {
  /* Casts read only by copies: the copies convert (in node order, so that a
   * copy's decision below sees the casts it reads). */
  for (size_t i = 0; i < m->n_nodes; i++) {
    const nn_node_t *nd = &m->nodes[i];
    if (!nd->folded && nd->op == NN_OP_CAST && readers_compose(m, nd->out[0], 0)) absorbed[i] = 1;
  }
  for (size_t i = 0; i < m->n_nodes; i++)
    if (is_copy(&m->nodes[i]) && readers_compose(m, m->nodes[i].out[0], !converts(m, producer, absorbed, (int)i)))
      absorbed[i] = 1;
  /* A composed map indexes its buffers with a byte: a reader over 255
   * undoes the absorptions of its direct inputs (rare; counts only shrink). */
  for (size_t r = m->n_nodes; r-- > 0;) {
    const nn_node_t *nd = &m->nodes[r];
    if (!(is_copy(nd) || is_gemm(nd)) || absorbed[r] || leaf_count(m, producer, absorbed, (int)r) <= 255) continue;
    for (int k = 0; k < nd->n_in; k++) {
      const int a = nng_source_node(m, producer, nd->in[k]);
      if (a >= 0) absorbed[a] = 0;
    }
  }
}

cudaq_nn_status_t nng_copy_map(const cudaq_nn_gpu *g, const int *producer, const unsigned char *absorbed, int ni,
                               uint8_t *src, int64_t *idx, const void **bufs, int *dts, int *n_bufs) {
  const cudaq_nn_model_t *m = g->m;
  const nn_node_t *nd = &m->nodes[ni];
  const size_t n = m->values[nd->out[0]].n;
  uint8_t *s0 = (uint8_t *)malloc(n ? n : 1);
  int64_t *i0 = (int64_t *)malloc((n ? n : 1) * sizeof(int64_t));
  uint8_t *cs[NN_MAX_NODE_INPUTS] = {NULL};
  int64_t *ci[NN_MAX_NODE_INPUTS] = {NULL};
  int (*remap)[256] = (int (*)[256])malloc((size_t)(nd->n_in > 0 ? nd->n_in : 1) * sizeof *remap); /* absorbed input k: its buffer j -> ours */
  int direct[NN_MAX_NODE_INPUTS]; /* direct input k: our buffer */
  cudaq_nn_status_t st = s0 && i0 && remap ? CUDAQ_NN_OK : CUDAQ_NN_ERR_NO_MEMORY;
  if (!st) nn__move_map(m, nd, s0, i0);
  *n_bufs = 0;
  auto add_buf = [&](const void *p, int dt) {
    for (int j = 0; j < *n_bufs; j++)
      if (bufs[j] == p && dts[j] == dt) return j;
    bufs[*n_bufs] = p;
    dts[*n_bufs] = dt;
    return (*n_bufs)++;
  };
  for (int k = 0; k < nd->n_in && !st; k++) {
    const int v = nd->in[k];
    const int a = nng_source_node(m, producer, v);
    if (a >= 0 && absorbed[a] && m->nodes[a].op == NN_OP_CAST) { /* read the Cast's input, convert */
      const int u = m->nodes[a].in[0];
      direct[k] = add_buf(g->dev[u], g->sdt[u]);
      continue;
    }
    if (a < 0 || !absorbed[a] || !is_copy(&m->nodes[a])) {
      direct[k] = add_buf(v >= 0 ? g->dev[v] : NULL, v >= 0 ? g->sdt[v] : 0);
      continue;
    }
    const size_t na = m->values[m->nodes[a].out[0]].n;
    const void *cb[256];
    int cd[256], cn = 0;
    cs[k] = (uint8_t *)malloc(na ? na : 1);
    ci[k] = (int64_t *)malloc((na ? na : 1) * sizeof(int64_t));
    if (!cs[k] || !ci[k]) st = CUDAQ_NN_ERR_NO_MEMORY;
    if (!st) st = nng_copy_map(g, producer, absorbed, a, cs[k], ci[k], cb, cd, &cn);
    for (int j = 0; j < cn && !st; j++) remap[k][j] = add_buf(cb[j], cd[j]);
  }
  for (size_t i = 0; i < n && !st; i++) {
    const int k = s0[i];
    if (cs[k]) {
      src[i] = (uint8_t)remap[k][cs[k][i0[i]]];
      idx[i] = ci[k][i0[i]];
    } else {
      src[i] = (uint8_t)direct[k];
      idx[i] = i0[i];
    }
  }
  for (int k = 0; k < nd->n_in; k++) {
    free(cs[k]);
    free(ci[k]);
  }
  free(s0);
  free(i0);
  free(remap);
  return st;
}

namespace {

/* Step i can join a chain: a flat elementwise node. */
int fusable(const step *s) { return s->kind == ST_ELEMENTWISE && (s->ew.flat & NNK_EW_FLAT); }

/* Whether every reader of value v is one of the n model nodes in chain, and
 * v is no graph output. aliases: readers through reshape-like aliases count
 * (an epilogue's seed); else an alias is a reader outside the chain (a
 * fused chain's registers hold values, not their aliases). */
int read_by_chain(const cudaq_nn_model_t *m, int v, const int *chain, int n, int aliases) {
  if (is_output(m, v)) return 0;
  for (size_t i = 0; i < m->n_nodes; i++) {
    const nn_node_t *nd = &m->nodes[i];
    if (nd->folded) continue;
    int uses = 0;
    for (int k = 0; k < nd->n_in; k++) uses |= nd->in[k] == v;
    if (!uses) continue;
    if (aliases && nng_is_alias_op(nd->op)) {
      if (!read_by_chain(m, nd->out[0], chain, n, 1)) return 0;
      continue;
    }
    int in_chain = 0;
    for (int c = 0; c < n; c++) in_chain |= chain[c] == (int)i;
    if (!in_chain) return 0;
  }
  return 1;
}

/* The fused kernel's arguments for steps [a, b]; 0 when they do not fit. */
int build_fused(const cudaq_nn_gpu *g, int a, int b, nnk_fused *f) {
  const cudaq_nn_model_t *m = g->m;
  memset(f, 0, sizeof *f);
  if (b - a + 1 > NNK_FUSE_MAX_OPS) return 0;
  f->n = g->steps[a].ew.n;
  for (int s = a; s <= b; s++) {
    const nnk_elementwise &e = g->steps[s].ew;
    const nn_node_t *nd = &m->nodes[g->steps[s].node];
    nnk_fused_op &o = f->ops[f->n_ops];
    o.op = e.op;
    o.out_dt = e.out_dt;
    o.gelu_tanh = e.gelu_tanh;
    o.n_in = nd->n_in < 3 ? nd->n_in : 3;
    for (int k = 0; k < o.n_in; k++) {
      int reg = -1;
      for (int t = a; t < s; t++)
        if (m->nodes[g->steps[t].node].out[0] == nd->in[k]) reg = t - a;
      if (reg >= 0) {
        o.arg[k] = -reg - 1;
        continue;
      }
      const int scalar = !((e.flat >> k) & 1);
      int j = 0;
      while (j < f->n_in && !(f->in[j] == e.in[k] && f->in_dt[j] == e.in_dt[k] &&
                              (int)((f->in_scalar >> j) & 1) == scalar))
        j++;
      if (j == f->n_in) {
        if (f->n_in == NNK_FUSE_MAX_IN) return 0;
        f->in[j] = e.in[k];
        f->in_dt[j] = e.in_dt[k];
        f->in_scalar |= (unsigned)scalar << j;
        f->n_in++;
      }
      o.arg[k] = j;
    }
    f->n_ops++;
  }
  f->out = g->steps[b].ew.out;
  static int generic = -1; /* A/B of the short paths (gpu_ew.cuh) */
  if (generic < 0) {
    const char *v = getenv("CUDAQ_NN_EW_GENERIC");
    generic = v && v[0] == '1';
  }
  f->generic = generic;
  return 1;
}

/* Whether step s writes buffer b. */
int step_writes(const cudaq_nn_gpu *g, const step *s, const void *b) {
  switch (s->kind) {
    case ST_ELEMENTWISE: return s->ew.out == b;
    case ST_MOVE: return s->mv.out == b;
    case ST_GEMM: return s->gm.y == b || (s->paired && s->gm2.y == b);
    case ST_CONVERT: return s->cout == b;
    case ST_FUSED: return s->fz.out == b;
    case ST_TAIL:
      for (int k = 0; k < s->tl.n; k++)
        if ((s->tl.p[k].epi ? (const void *)s->tl.p[k].out : s->tl.p[k].y) == b) return 1;
      return 0;
    default: return g->convs[s->conv].p.y == b;
  }
}

/* Whether step s can run an epilogue chain on its results, and which value,
 * element count, buffer and type those are: a matrix product, and (convs,
 * after tuning) a convolution run by the channels-last kernel with NCDHW
 * output. */
int takes_epilogue(const cudaq_nn_gpu *g, const step *s, int convs, int *v, int64_t *n, const void **y, int *dt) {
  if (s->kind == ST_GEMM && !s->gm.epi) {
    *v = g->m->nodes[s->node].out[0];
    *n = s->gm.nb * s->gm.M * s->gm.N;
    *y = s->gm.y;
    *dt = g->sdt[*v];
    return 1;
  }
  if (convs && s->kind == ST_CONV) {
    const conv_state *c = &g->convs[s->conv];
    if (c->impl != IMPL_CL || c->out_cl || c->cf.epi) return 0;
    *v = c->out_value;
    *n = (int64_t)c->p.N * c->p.M * c->p.out3[0] * c->p.out3[1] * c->p.out3[2];
    *y = c->p.y;
    *dt = CUDAQ_NN_FLOAT16;
    return 1;
  }
  return 0;
}

/* A chain's program in device memory (kernels read it in place, never
 * copied to their stacks), owned by the engine; NULL when there is no
 * memory for it (the caller keeps the chain's own step). */
const nnk_fused *upload_program(cudaq_nn_gpu *g, const nnk_fused *f) {
  nnk_fused *d = NULL;
  if (nng_dalloc(g, sizeof *f, (void **)&d, NULL) != CUDAQ_NN_OK ||
      cudaMemcpy(d, f, sizeof *f, cudaMemcpyHostToDevice) != cudaSuccess) {
    (void)cudaGetLastError();
    return NULL;
  }
  return d;
}

/* A chain step X (fused, or one flat elementwise node) whose input is the
 * result of an earlier step G that takes an epilogue (takes_epilogue), read
 * by nothing but X's nodes, runs as G's epilogue: G hands each result to
 * the chain (NNK_FUSE_SEED) instead of storing it, and X's step goes. X's
 * other inputs must be written before G (X now runs at G's place). */
void attach_epilogues(cudaq_nn_gpu *g, int convs) {
  const cudaq_nn_model_t *m = g->m;
  int w = 0;
  for (int x = 0; x < g->n_steps; x++) {
    step *X = &g->steps[x];
    nnk_fused f;
    int chain[NNK_FUSE_MAX_OPS], n_chain = 0, ok = 0;
    if (X->kind == ST_FUSED) {
      f = X->fz;
      n_chain = X->n_chain;
      memcpy(chain, X->chain, sizeof chain);
      ok = 1;
    } else if (fusable(X) && build_fused(g, x, x, &f)) {
      chain[0] = X->node;
      n_chain = 1;
      ok = 1;
    }
    int attached = 0;
    for (int gi = w - 1; ok && gi >= 0 && !attached; gi--) {
      step *G = &g->steps[gi];
      int gv, gdt;
      int64_t gn;
      const void *gy;
      if (!takes_epilogue(g, G, convs, &gv, &gn, &gy, &gdt) || gn != f.n) continue;
      int j = 0;
      while (j < f.n_in && !(f.in[j] == gy && f.in_dt[j] == gdt && !((f.in_scalar >> j) & 1))) j++;
      if (j == f.n_in || !read_by_chain(m, gv, chain, n_chain, 1)) continue;
      int early = 1; /* every other input written before G (or never: inputs, constants) */
      for (int k = 0; k < f.n_in && early; k++)
        for (int t = gi; t < w && early; t++) early = k == j || !step_writes(g, &g->steps[t], f.in[k]);
      if (!early) break;
      for (int o = 0; o < f.n_ops; o++)
        for (int k = 0; k < f.ops[o].n_in; k++)
          if (f.ops[o].arg[k] == j) f.ops[o].arg[k] = NNK_FUSE_SEED;
      f.seed_dt = gdt;
      const nnk_fused *d = upload_program(g, &f);
      if (!d) break; /* no memory for it: the chain keeps its own step */
      if (G->kind == ST_GEMM) {
        G->gm.epi = d;
        G->epi_node = X->node;
      } else {
        g->convs[G->conv].cf.epi = d;
      }
      attached = 1;
    }
    if (!attached) g->steps[w++] = *X;
  }
  g->n_steps = w;
}

/* Whether value v is read only through the A maps of matrix products:
 * every reader is a copy absorbed into a map, read in turn only by such
 * copies or by products reading it as A. */
int only_gemm_maps(const cudaq_nn_model_t *m, const unsigned char *absorbed, int v) {
  return readers_ok(m, v, 0, absorbed);
}

/* Whether model node `from` reads, directly or through other nodes, the
 * output of node `target` (seen: n_nodes bytes of scratch, stack: n_nodes ints). */
int reaches(const cudaq_nn_model_t *m, const int *producer, int from, int target, unsigned char *seen, int *stack) {
  memset(seen, 0, m->n_nodes);
  int top = 0;
  stack[top++] = from;
  seen[from] = 1;
  while (top > 0) {
    const int n = stack[--top];
    if (n == target) return 1;
    const nn_node_t *nd = &m->nodes[n];
    for (int k = 0; k < nd->n_in; k++) {
      const int p = nd->in[k] >= 0 ? producer[nd->in[k]] : -1;
      if (p >= 0 && !seen[p]) {
        seen[p] = 1;
        stack[top++] = p;
      }
    }
  }
  return 0;
}

}  // namespace

int nng_read_by_chain(const cudaq_nn_model_t *m, int v, const int *chain, int n, int aliases) {
  return read_by_chain(m, v, chain, n, aliases);
}

int nng_gemm_fuse_off(const char *pass) {
  if (nng_fuse_off() || getenv("CUDAQ_NN_NO_GEMM_FUSE")) return 1;
  if (strcmp(pass, "chains")) return 0;
  const char *on = getenv("CUDAQ_NN_GEMM_CHAINS"); /* opt-in: measured slower */
  return !on || strcmp(on, "1") != 0;
}

void nng_fuse_gemm_chains(cudaq_nn_gpu *g, const unsigned char *absorbed) {
  if (nng_gemm_fuse_off("chains")) return;
  const cudaq_nn_model_t *m = g->m;
  int w = 0;
  for (int x = 0; x < g->n_steps; x++) {
    step *X = &g->steps[x];
    nnk_fused f;
    int ok = 0;
    if (X->kind == ST_FUSED) {
      f = X->fz;
      ok = 1;
    } else if (fusable(X)) {
      ok = build_fused(g, x, x, &f);
    }
    ok = ok && only_gemm_maps(m, absorbed, m->nodes[X->node].out[0]);
    /* The products reading it: each with its map's buffer list known and no
     * chain yet (one per product). */
    int readers = 0;
    for (int t = x + 1; ok && t < g->n_steps; t++) {
      const step *S = &g->steps[t];
      if (S->kind != ST_GEMM || !S->gm.a_idx) continue;
      if (S->a_nbufs_h < 0) ok = 0;
      for (int j = 0; ok && j < S->a_nbufs_h; j++)
        if (S->a_bufs_h[j] == f.out) {
          ok = !S->gm.a_chain;
          readers++;
        }
    }
    const nnk_fused *d = ok && readers > 0 ? upload_program(g, &f) : NULL; /* NULL: X keeps its step */
    if (d) {
      for (int t = x + 1; t < g->n_steps; t++) {
        step *S = &g->steps[t];
        if (S->kind != ST_GEMM || !S->gm.a_idx) continue;
        for (int j = 0; j < S->a_nbufs_h; j++)
          if (S->a_bufs_h[j] == f.out) {
            S->gm.a_chain = d;
            S->gm.a_chain_buf = j;
          }
      }
      continue; /* X's step goes */
    }
    g->steps[w++] = *X;
  }
  g->n_steps = w;
}

namespace {

int float_dt(int dt) { return dt == CUDAQ_NN_FLOAT || dt == CUDAQ_NN_FLOAT16; }

/* The model constant whose device buffer is b, or -1. */
int const_at(const cudaq_nn_gpu *g, const void *b) {
  for (size_t v = 0; v < g->m->n_values; v++)
    if (g->dev[v] == b && g->m->values[v].data) return (int)v;
  return -1;
}

/* Whether constant v (FLOAT or INT32) holds integers of magnitude <= 2048
 * only (exact in FP16); *max: the largest magnitude. */
int small_ints(const cudaq_nn_model_t *m, int v, double *max) {
  const nn_value_t *val = &m->values[v];
  *max = 0.0;
  for (size_t i = 0; i < val->n; i++) {
    double x;
    if (val->dtype == CUDAQ_NN_FLOAT) x = ((const float *)val->data)[i];
    else if (val->dtype == CUDAQ_NN_INT32) x = ((const int32_t *)val->data)[i];
    else return 0;
    if (!(x >= -2048.0 && x <= 2048.0) || x != (double)(long long)x) return 0; /* range first: NaN, inf out */
    if (fabs(x) > *max) *max = fabs(x);
  }
  return 1;
}

/* The INT32 scalar constant at b, or 0 when it is none. */
int int_scalar(const cudaq_nn_gpu *g, const void *b, int32_t *c) {
  const int v = const_at(g, b);
  if (v < 0 || g->m->values[v].dtype != CUDAQ_NN_INT32 || g->m->values[v].n != 1) return 0;
  *c = *(const int32_t *)g->m->values[v].data;
  return 1;
}

/* CUDAQ_NN_TAIL_DEBUG=1: which check turned a candidate tail down (a
 * number per check, in source order), on stderr. */
int tail_no(int check) {
  static int debug = -1;
  if (debug < 0) debug = getenv("CUDAQ_NN_TAIL_DEBUG") != NULL;
  if (debug) fprintf(stderr, "cudaq_nn: tail check %d not met\n", check);
  return 0;
}

/* Step F as E = (X > thr) * V with V a small-integer constant: its operands
 * into q (*vmax: V's largest magnitude); 0 when F is not such a chain. */
int tail_chain(const cudaq_nn_gpu *g, const step *F, int tdt, nnk_tail *q, double *vmax) {
  if (F->kind != ST_FUSED) return 0;
  if (F->fz.n_ops != 3) return tail_no(1);
  const nnk_fused &f = F->fz;
  const nnk_fused_op &gt = f.ops[0], &ca = f.ops[1], &mu = f.ops[2];
  if (gt.op != NN_OP_GREATER || gt.n_in != 2 || gt.arg[0] < 0 || gt.arg[1] < 0) return tail_no(2);
  const int xa = gt.arg[0], ta = gt.arg[1];
  if (((f.in_scalar >> xa) & 1) || !((f.in_scalar >> ta) & 1) || !float_dt(f.in_dt[xa]) || !float_dt(f.in_dt[ta]))
    return tail_no(3);
  if (ca.op != NN_OP_CAST || ca.n_in != 1 || ca.arg[0] != -1 || !float_dt(ca.out_dt)) return tail_no(4);
  if (mu.op != NN_OP_MUL || mu.n_in != 2 || mu.out_dt != tdt) return tail_no(5);
  const int va = mu.arg[0] == -2 ? mu.arg[1] : mu.arg[1] == -2 ? mu.arg[0] : -1;
  if (va < 0 || !float_dt(f.in_dt[va])) return tail_no(6);
  const int vc = const_at(g, f.in[va]);
  if (vc < 0 || !small_ints(g->m, vc, vmax) || const_at(g, f.in[ta]) < 0) return tail_no(7); /* thr: read before the wait */
  q->x = f.in[xa];
  q->x_dt = f.in_dt[xa];
  q->thr = f.in[ta];
  q->thr_dt = f.in_dt[ta];
  q->v = f.in[va];
  q->v_dt = f.in_dt[va];
  q->v_scalar = (f.in_scalar >> va) & 1;
  return 1;
}

/* Epilogue f as Cast<int32>(seed) [+ addend] -> r - (r / c) * c into p. */
int tail_parity(const cudaq_nn_gpu *g, const nnk_fused &f, nnk_tail_prod *p) {
  const nnk_fused_op *o = f.ops;
  if (f.n_ops < 4 || f.n_ops > 5) return tail_no(8);
  for (int k = 0; k < f.n_ops; k++)
    if (o[k].out_dt != CUDAQ_NN_INT32 || o[k].n_in != (k == 0 ? 1 : 2)) return tail_no(9);
  if (o[0].op != NN_OP_CAST || o[0].arg[0] != NNK_FUSE_SEED) return tail_no(10);
  int r = 0, k = 1; /* r: the register holding the value taken mod c */
  p->addend = NULL;
  if (f.n_ops == 5) {
    const int a = o[1].arg[0] == -1 ? o[1].arg[1] : o[1].arg[1] == -1 ? o[1].arg[0] : -1;
    if (o[1].op != NN_OP_ADD || a < 0 || ((f.in_scalar >> a) & 1) || f.in_dt[a] != CUDAQ_NN_INT32) return tail_no(11);
    p->addend = (const int32_t *)f.in[a];
    r = 1;
    k = 2;
  }
  const nnk_fused_op &dv = o[k], &mu = o[k + 1], &sb = o[k + 2];
  int32_t c = 0, c2 = 0;
  const int ma = mu.arg[0] == -(k + 1) ? mu.arg[1] : mu.arg[1] == -(k + 1) ? mu.arg[0] : -1;
  /* The divisor: a one-element constant (a scalar input of the chain, or
   * one read at offset i when the chain has one element). */
  if (dv.op != NN_OP_DIV || dv.arg[0] != -(r + 1) || dv.arg[1] < 0 || !int_scalar(g, f.in[dv.arg[1]], &c) ||
      (!((f.in_scalar >> dv.arg[1]) & 1) && f.n != 1))
    return tail_no(12);
  if (mu.op != NN_OP_MUL || ma < 0 || !int_scalar(g, f.in[ma], &c2) || c2 != c ||
      (!((f.in_scalar >> ma) & 1) && f.n != 1))
    return tail_no(13);
  if (sb.op != NN_OP_SUB || sb.arg[0] != -(r + 1) || sb.arg[1] != -(k + 2)) return tail_no(14);
  p->epi = 1;
  p->c = c;
  p->out = (int32_t *)f.out;
  return 1;
}

/* Product step S reading E (buffer e) through its map, as a tail product
 * into p; 0 when it does not qualify. */
int tail_prod(const cudaq_nn_gpu *g, const step *S, const void *e, int tdt, double vmax, nnk_tail_prod *p) {
  const nnk_gemm &gm = S->gm;
  memset(p, 0, sizeof *p);
  if (S->kind != ST_GEMM || S->paired || !gm.a_idx || gm.a_chain || S->a_nbufs_h < 0 || gm.nb != 1 || gm.c ||
      gm.alpha != 1.0f || !gm.b_const || gm.K < 1)
    return tail_no(15);
  double amax = vmax, bmax = 0.0, m;
  /* The buffers the map reads (its list also names inputs no element comes
   * from, such as a Gather's indices). */
  const size_t na = (size_t)(gm.M * gm.K);
  unsigned char used[NNG_MAP_HOST_BUFS] = {0};
  uint8_t *src = (uint8_t *)malloc(na ? na : 1);
  if (!src || cudaMemcpy(src, gm.a_src, na, cudaMemcpyDeviceToHost) != cudaSuccess) {
    (void)cudaGetLastError();
    free(src);
    return tail_no(16);
  }
  int in_range = 1;
  for (size_t i = 0; i < na; i++) {
    in_range &= src[i] < S->a_nbufs_h;
    if (src[i] < NNG_MAP_HOST_BUFS) used[src[i]] = 1;
  }
  free(src);
  if (!in_range) return tail_no(17);
  p->e_src = -1;
  for (int j = 0; j < S->a_nbufs_h; j++) {
    if (S->a_bufs_h[j] == e) {
      p->e_src = j;
      continue;
    }
    if (!used[j]) continue;
    const int c = const_at(g, S->a_bufs_h[j]);
    if (c < 0 || g->sdt[c] != tdt || !small_ints(g->m, c, &m)) return tail_no(18);
    if (m > amax) amax = m;
  }
  const int bc = const_at(g, gm.b);
  if (p->e_src < 0 || bc < 0 || g->sdt[bc] != tdt || !small_ints(g->m, bc, &bmax)) return tail_no(19);
  if ((double)gm.K * amax * bmax >= 16777216.0) return tail_no(20); /* every partial sum an exact float */
  if (gm.epi) {
    nnk_fused f;
    if (cudaMemcpy(&f, gm.epi, sizeof f, cudaMemcpyDeviceToHost) != cudaSuccess) {
      (void)cudaGetLastError();
      return tail_no(21);
    }
    if (!tail_parity(g, f, p)) return tail_no(22);
  } else {
    p->y = gm.y;
  }
  p->M = gm.M;
  p->N = gm.N;
  p->K = gm.K;
  p->sai = gm.sai;
  p->sak = gm.sak;
  p->sbk = gm.sbk;
  p->sbj = gm.sbj;
  p->bufs = gm.a_bufs;
  p->src = gm.a_src;
  p->idx = gm.a_idx;
  p->b = gm.b;
  /* About four products per lane; past a warp, the whole block per output. */
  p->lg = 0;
  while (p->lg < 5 && (4LL << p->lg) < gm.K) p->lg++;
  if ((4LL << p->lg) < gm.K) p->lg = 8; /* NNK_TAIL_BLOCK = 256 lanes */
  const int64_t per_blk = NNK_TAIL_BLOCK >> p->lg, blocks = (p->M * p->N + per_blk - 1) / per_blk;
  p->blocks = (unsigned)(blocks < 1 ? 1 : blocks > 1024 ? 1024 : blocks);
  return 1;
}

/* Whether step S is a product whose A map names buffer e: 1, 0, or -1 when
 * its map's buffer list is not known on the host. */
int map_reads(const step *S, const void *e) {
  if (S->kind != ST_GEMM || !S->gm.a_idx) return 0;
  if (S->a_nbufs_h < 0) return -1;
  for (int j = 0; j < S->a_nbufs_h; j++)
    if (S->a_bufs_h[j] == e) return 1;
  return 0;
}

/* Whether any step but [a, b] may read buffer e through a product's map. */
int map_read_elsewhere(const cudaq_nn_gpu *g, const void *e, int a, int b) {
  for (int t = 0; t < g->n_steps; t++)
    if ((t < a || t > b) && map_reads(&g->steps[t], e) != 0) return 1;
  return 0;
}

}  // namespace

void nng_plan_tails(cudaq_nn_gpu *g, const unsigned char *absorbed) {
  if (nng_fuse_off() || getenv("CUDAQ_NN_NO_TAIL")) return;
  const cudaq_nn_model_t *m = g->m;
  const int tdt = g->half ? CUDAQ_NN_FLOAT16 : CUDAQ_NN_FLOAT;
  static_assert(NNK_TAIL_BLOCK == 256, "tail_prod's whole-block group is 2^8 lanes");
  int w = 0;
  for (int x = 0; x < g->n_steps; x++) {
    step *F = &g->steps[x];
    nnk_tail q;
    double vmax = 0.0;
    memset(&q, 0, sizeof q);
    int n = 0;
    if (x + 1 < g->n_steps && tail_chain(g, F, tdt, &q, &vmax) &&
        (only_gemm_maps(m, absorbed, m->nodes[F->node].out[0]) || tail_no(23))) {
      const void *e = F->fz.out;
      n = tail_prod(g, &g->steps[x + 1], e, tdt, vmax, &q.p[0]);
      if (n && x + 2 < g->n_steps) {
        const step *S2 = &g->steps[x + 2];
        if (map_reads(S2, e) == 1) {
          /* The second product may not read the first's result (they run side by side). */
          const void *first_out = q.p[0].epi ? (const void *)q.p[0].out : q.p[0].y;
          n = tail_prod(g, S2, e, tdt, vmax, &q.p[1]) && q.p[1].addend != first_out ? 2 : 0;
        }
      }
      if (n && map_read_elsewhere(g, e, x + 1, x + n)) n = tail_no(24);
    }
    if (!n) {
      g->steps[w++] = *F;
      continue;
    }
    q.n = n;
    step merged = g->steps[x + n]; /* the last product's node and chain bookkeeping */
    merged.kind = ST_TAIL;
    merged.tl = q;
    g->steps[w++] = merged;
    x += n;
  }
  g->n_steps = w;
}

void nng_pair_gemms(cudaq_nn_gpu *g) {
  if (nng_gemm_fuse_off("pairs")) return;
  const cudaq_nn_model_t *m = g->m;
  int *producer = (int *)malloc((m->n_values + 1) * sizeof(int));
  int *stack = (int *)malloc((m->n_nodes + 1) * sizeof(int));
  unsigned char *seen = (unsigned char *)malloc(m->n_nodes + 1);
  if (!producer || !stack || !seen) { /* no pairing: each product keeps its own launch */
    free(producer); free(stack); free(seen);
    return;
  }
  nng_producers(m, producer);
  int w = 0;
  for (int i = 0; i < g->n_steps; i++) {
    step *A = &g->steps[i];
    if (i + 1 < g->n_steps && A->kind == ST_GEMM && g->steps[i + 1].kind == ST_GEMM) {
      const step *B = &g->steps[i + 1];
      const int last = B->epi_node >= 0 ? B->epi_node : B->node;
      /* B reads nothing A writes: A writes its node's value or, with an
       * epilogue, a value computed from it, so B must not reach A's node. */
      if (!reaches(m, producer, last, A->node, seen, stack)) {
        step merged = *A;
        merged.gm2 = B->gm;
        merged.paired = 1;
        g->steps[w++] = merged;
        i++;
        continue;
      }
    }
    g->steps[w++] = *A;
  }
  g->n_steps = w;
  free(producer); free(stack); free(seen);
}

void nng_fuse_elementwise(cudaq_nn_gpu *g) {
  if (nng_fuse_off()) return;
  int w = 0;
  for (int i = 0; i < g->n_steps;) {
    int best = i;
    if (fusable(&g->steps[i])) {
      /* The longest valid chain from i: every output but the last read inside it. */
      for (int j = i + 1; j < g->n_steps && fusable(&g->steps[j]) && g->steps[j].ew.n == g->steps[i].ew.n &&
                          j - i < NNK_FUSE_MAX_OPS;
           j++) {
        int chain[NNK_FUSE_MAX_OPS], ok = 1;
        for (int s = i; s <= j; s++) chain[s - i] = g->steps[s].node;
        for (int s = i; s < j && ok; s++) ok = read_by_chain(g->m, g->m->nodes[g->steps[s].node].out[0], chain, j - i + 1, 0);
        nnk_fused f;
        if (ok && build_fused(g, i, j, &f)) best = j;
      }
    }
    if (best > i) {
      step merged = g->steps[best];
      merged.kind = ST_FUSED;
      build_fused(g, i, best, &merged.fz);
      merged.n_chain = best - i + 1;
      for (int s = i; s <= best; s++) merged.chain[s - i] = g->steps[s].node;
      g->steps[w++] = merged;
    } else {
      g->steps[w++] = g->steps[i];
    }
    i = best + 1;
  }
  g->n_steps = w;
  attach_epilogues(g, 0);
}

void nng_fuse_after_tuning(cudaq_nn_gpu *g) {
  /* Opt-in (CUDAQ_NN_CONV_FUSE=1): on the H100 the shipped models ran 8-12 us
   * slower with these two fusions than with the separate copy and chain
   * kernels (the per-element map loads in the first layer's gather and the
   * interpreted chain in the last layer's epilogue cost more than the two
   * launches they save). Tested (fuse_conv_io) so that they stay correct. */
  const char *on = getenv("CUDAQ_NN_CONV_FUSE");
  if (nng_fuse_off() || !on || strcmp(on, "1") != 0) return;
  const cudaq_nn_model_t *m = g->m;
  /* A copy read only by a channels-last convolution with NCDHW input: the
   * convolution gathers through the copy's map, the copy's step goes. */
  int w = 0;
  for (int i = 0; i < g->n_steps; i++) {
    const step *M = &g->steps[i];
    int drop = 0;
    for (int t = i + 1; M->kind == ST_MOVE && M->mv.n && t < g->n_steps && !drop; t++) {
      const step *C = &g->steps[t];
      if (C->kind != ST_CONV) continue;
      conv_state *c = &g->convs[C->conv];
      const int cn = c->node;
      if (c->impl != IMPL_CL || c->in_cl || c->cf.x_idx || c->p.x != M->mv.out ||
          !read_by_chain(m, m->nodes[M->node].out[0], &cn, 1, 1) || m->nodes[cn].in[0] == -1)
        continue;
      int uses = 0;
      for (int k = 0; k < m->nodes[cn].n_in; k++) uses += g->dev[m->nodes[cn].in[k]] == M->mv.out;
      if (uses != 1) continue;
      c->cf.x_bufs = M->mv.in;
      c->cf.x_src = M->mv.src_in;
      c->cf.x_idx = M->mv.src_idx;
      c->cf.x_dts = M->mv.in_dt;
      drop = 1;
    }
    if (!drop) g->steps[w++] = *M;
  }
  g->n_steps = w;
  attach_epilogues(g, 1);
}
