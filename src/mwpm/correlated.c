/*
 * The decoder's own weights: correlated matching and per-shot weights.
 *
 * Correlated matching: the two-pass reweighting PyMatching 2.4 runs with
 * enable_correlations=True (after Fowler, arXiv:1310.0863). Written for this
 * project from PyMatching's documented behaviour; no code taken from it.
 *
 * A decomposed DEM error "error(p) A ^ B" is one physical error that fires
 * both components A and B (in the surface code, a Y error fires an X-type
 * and a Z-type edge). Plain matching treats A and B as independent edges.
 * Correlated matching keeps, for every ordered pair (e, f) of components of
 * one error, the joint probability P(e and f) (XOR-combined over all errors
 * holding both) and e's marginal P(e) (XOR-combined over all errors holding
 * e: the merged edge's probability; an error that holds e in two components,
 * "A ^ A", adds its p twice more per such pair, as PyMatching's joint table,
 * whose diagonal is that marginal). Decoding then runs twice: the first
 * pass finds a correction; for each edge e in it, each partner f gets weight
 * min(w_f, ln((1-q)/q)) with q = min(0.5, P(e and f) / P(e)), the
 * probability of f given that e happened; the second pass decodes on those
 * weights and is the answer.
 *
 * The shared graph holds the rules (CSR by causal edge); each decoder holds
 * its own copy of the weights, lowered for the second pass and restored from
 * the graph at the start of the next decode. Nothing is allocated per shot.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mwpm_internal.h"

/* -------------------------------------------------------------- building */

typedef struct joint {
  uint32_t e, f;
  double p;
} joint_t;

static int cmp_joint(const void *a, const void *b) {
  const joint_t *x = a, *y = b;
  if (x->e != y->e)
    return x->e < y->e ? -1 : 1;
  return x->f < y->f ? -1 : (x->f > y->f);
}

static double bernoulli_xor(double a, double b) { return a * (1.0 - b) + b * (1.0 - a); }

/* The merged edge between u and v (v < 0: the boundary), or UINT32_MAX. */
static uint32_t find_edge(const cudaq_mwpm_graph_t *g, int32_t u, int32_t v) {
  if (u < 0 && v >= 0) {
    int32_t t = u;
    u = v;
    v = t;
  }
  if (v >= 0 && v < u) {
    int32_t t = u;
    u = v;
    v = t;
  }
  for (uint32_t k = g->adj_start[u]; k < g->adj_start[u + 1]; k++)
    if (g->adj[k].to == (v >= 0 ? v : -1))
      return g->adj_edge[k];
  return UINT32_MAX;
}

void cudaq_mwpm__corr_free_graph(cudaq_mwpm_graph_t *g) {
  free(g->corr_start);
  free(g->corr_rules);
  g->corr_start = NULL;
  g->corr_rules = NULL;
  g->num_corr_rules = 0;
  g->has_corr = 0;
}

cudaq_mwpm_status_t cudaq_mwpm__corr_build(cudaq_mwpm_graph_t *g, const cudaq_dem_t *dem,
                                           cudaq_mwpm_error_t *err) {
  size_t m = g->num_edges, nd = dem->num_edges;
  for (size_t i = 0; i < nd; i++)
    if (dem->edges[i].p > 0.5) {
      cudaq_mwpm__set_error(err, dem->edges[i].line,
                            "error probability %g > 0.5 is not supported with correlations",
                            dem->edges[i].p);
      return CUDAQ_MWPM_ERR_INVALID_ARG;
    }
  uint32_t *eid = malloc((nd ? nd : 1) * sizeof *eid);   /* dem edge -> merged edge */
  double *marg = calloc(m ? m : 1, sizeof *marg);
  g->corr_start = calloc(m + 2, sizeof *g->corr_start);
  size_t njoint = 0, cap_joint = 0;
  joint_t *joint = NULL;
  cudaq_mwpm_status_t st = CUDAQ_MWPM_ERR_NO_MEMORY;
  if (!eid || !marg || !g->corr_start)
    goto done;
  for (size_t i = 0; i < nd; i++) {
    const cudaq_dem_edge_t *de = &dem->edges[i];
    eid[i] = de->p > 0.0 ? find_edge(g, de->u, de->v) : UINT32_MAX;
    if (eid[i] != UINT32_MAX)
      marg[eid[i]] = bernoulli_xor(marg[eid[i]], de->p);
  }
  /* Joint probabilities of the ordered pairs of components of one error. */
  for (size_t i = 0; i < nd;) {
    size_t j = i;
    while (j < nd && dem->edges[j].error == dem->edges[i].error)
      j++;
    for (size_t a = i; a < j; a++)
      for (size_t b = i; b < j; b++) {
        if (a == b || eid[a] == UINT32_MAX || eid[b] == UINT32_MAX)
          continue;
        if (eid[a] == eid[b]) {
          /* Two components of one error on the same edge (A ^ A, or D0 ^ D0 L0):
           * no rule, but PyMatching 2.4 adds the error's p to that edge's
           * marginal twice more per such pair (its joint table's diagonal,
           * which is the marginal it divides by), so the edge's rules use
           * that marginal too. */
          if (a < b)
            marg[eid[a]] = bernoulli_xor(bernoulli_xor(marg[eid[a]], dem->edges[a].p), dem->edges[a].p);
          continue;
        }
        if (cudaq_mwpm__grow((void **)&joint, &cap_joint, njoint + 1, sizeof *joint))
          goto done;
        joint[njoint].e = eid[a];
        joint[njoint].f = eid[b];
        joint[njoint++].p = dem->edges[a].p;
      }
    i = j;
  }
  if (njoint)
    qsort(joint, njoint, sizeof *joint, cmp_joint);
  size_t k = 0;
  for (size_t i = 0; i < njoint; i++) {
    if (k && joint[k - 1].e == joint[i].e && joint[k - 1].f == joint[i].f) {
      joint[k - 1].p = bernoulli_xor(joint[k - 1].p, joint[i].p);
      continue;
    }
    joint[k++] = joint[i];
  }
  njoint = k;
  /* Rules that can lower a weight (the others never apply), CSR by e. */
  g->corr_rules = malloc((njoint ? njoint : 1) * sizeof *g->corr_rules);
  if (!g->corr_rules)
    goto done;
  size_t nr = 0;
  for (size_t i = 0; i < njoint; i++) {
    uint32_t e = joint[i].e, f = joint[i].f;
    if (!(marg[e] > 0.0))
      continue;
    double q = joint[i].p / marg[e];
    if (q > 0.5)
      q = 0.5;
    double wf = log((1.0 - q) / q);
    int32_t w = 2 * (int32_t)llround(wf * g->scale);
    if (!(q > 0.0) || w >= g->adj[g->edge_adj[2 * f]].w)
      continue;
    g->corr_rules[nr].edge = f;
    g->corr_rules[nr].w = w;
    g->corr_rules[nr++].wf = wf;
    g->corr_start[e + 1]++;
  }
  for (size_t e = 0; e < m; e++)
    g->corr_start[e + 1] += g->corr_start[e];
  g->num_corr_rules = nr;
  g->has_corr = 1;
  st = CUDAQ_MWPM_OK;
done:
  free(eid);
  free(marg);
  free(joint);
  if (st)
    cudaq_mwpm__corr_free_graph(g);
  return st;
}

cudaq_mwpm_status_t cudaq_mwpm_graph_find_edge(const cudaq_mwpm_graph_t *g, int32_t u, int32_t v,
                                               size_t *index) {
  if (!g || !index || u < -1 || v < -1 || (u < 0 && v < 0) || u == v ||
      (u >= 0 && (uint32_t)u >= g->num_nodes) || (v >= 0 && (uint32_t)v >= g->num_nodes))
    return CUDAQ_MWPM_ERR_INVALID_ARG;
  uint32_t e = find_edge(g, u, v);
  if (e == UINT32_MAX)
    return CUDAQ_MWPM_ERR_OUT_OF_RANGE;
  *index = e;
  return CUDAQ_MWPM_OK;
}

/* -------------------------------------------------------------- decoder */

void cudaq_mwpm__corr_destroy(cudaq_mwpm__corr_t *c) {
  if (!c)
    return;
  free(c->adj);
  free(c->adj_wf);
  free(c->dirty);
  free(c->pass1);
  free(c->edge_mark);
  free(c->stamp);
  free(c->path);
  free(c->list);
  cudaq_mwpm__mapped_free(c);
  free(c);
}

cudaq_mwpm__corr_t *cudaq_mwpm__corr_create(const cudaq_mwpm_graph_t *g) {
  cudaq_mwpm__corr_t *c = calloc(1, sizeof *c);
  if (!c)
    return NULL;
  size_t nadj = g->adj_start[g->num_nodes], m = g->num_edges, n = g->num_nodes;
  c->adj = malloc((nadj ? nadj : 1) * sizeof *c->adj);
  c->adj_wf = malloc((nadj ? nadj : 1) * sizeof *c->adj_wf);
  c->dirty = malloc((m ? m : 1) * sizeof *c->dirty);
  c->pass1 = malloc((m ? m : 1) * sizeof *c->pass1);
  c->edge_mark = calloc(m ? m : 1, 1);
  c->stamp = calloc(m ? m : 1, sizeof *c->stamp);
  c->path = malloc((n + 1) * sizeof *c->path);
  c->list = malloc((n ? n : 1) * sizeof *c->list);
  if (!c->adj || !c->adj_wf || !c->dirty || !c->pass1 || !c->edge_mark || !c->stamp || !c->path ||
      !c->list) {
    cudaq_mwpm__corr_destroy(c);
    return NULL;
  }
  if (nadj) {
    memcpy(c->adj, g->adj, nadj * sizeof *c->adj);
    memcpy(c->adj_wf, g->adj_wf, nadj * sizeof *c->adj_wf);
  }
  return c;
}

void cudaq_mwpm__restore_edge(cudaq_mwpm__corr_t *c, const cudaq_mwpm_graph_t *g, uint32_t f) {
  for (int s = 0; s < 2; s++) {
    uint32_t k = g->edge_adj[2 * f + s];
    if (k != UINT32_MAX) {
      c->adj[k].w = g->adj[k].w;
      c->adj_wf[k] = g->adj_wf[k];
    }
  }
  c->edge_mark[f] &= (uint8_t)~2u;
}

void cudaq_mwpm__corr_before_decode(cudaq_mwpm__corr_t *c, const cudaq_mwpm_graph_t *g) {
  if (c->armed)
    return;
  cudaq_mwpm__mapped_restore(c, g);
  cudaq_mwpm__restore_dirty(c, g);
}

void cudaq_mwpm__restore_dirty(cudaq_mwpm__corr_t *c, const cudaq_mwpm_graph_t *g) {
  for (size_t i = 0; i < c->ndirty; i++)
    cudaq_mwpm__restore_edge(c, g, c->dirty[i]);
  c->ndirty = 0;
}

/* Lowers the weights of the partners of the first pass's edges. Returns
 * non-zero when some weight changed. */
static int reweight(cudaq_mwpm__corr_t *c, const cudaq_mwpm_graph_t *g) {
  int changed = 0;
  for (size_t i = 0; i < c->npass1; i++) {
    uint32_t e = c->pass1[i];
    c->edge_mark[e] &= (uint8_t)~1u;
    for (uint32_t r = g->corr_start[e]; r < g->corr_start[e + 1]; r++) {
      const cudaq_mwpm__corr_rule_t *rule = &g->corr_rules[r];
      uint32_t f = rule->edge, k0 = g->edge_adj[2 * f], k1 = g->edge_adj[2 * f + 1];
      if (rule->w >= c->adj[k0].w)
        continue;
      c->adj[k0].w = rule->w;
      c->adj_wf[k0] = rule->wf;
      if (k1 != UINT32_MAX) {
        c->adj[k1].w = rule->w;
        c->adj_wf[k1] = rule->wf;
      }
      if (!(c->edge_mark[f] & 2)) {
        c->edge_mark[f] |= 2;
        c->dirty[c->ndirty++] = f;
      }
      changed = 1;
    }
  }
  c->npass1 = 0;
  return changed;
}

cudaq_mwpm_status_t cudaq_mwpm_decode_correlated(cudaq_mwpm_decoder_t *d, const uint32_t *events,
                                                 size_t num_events, cudaq_mwpm_result_t *res) {
  cudaq_mwpm__corr_t *c = d ? cudaq_mwpm__decoder_corr(d) : NULL;
  if (!c || !cudaq_mwpm__decoder_graph(d)->has_corr) /* own weights may be per-shot only */
    return CUDAQ_MWPM_ERR_INVALID_ARG;
  cudaq_mwpm_status_t st = cudaq_mwpm_decode(d, events, num_events, res);
  if (st)
    return st;
  const cudaq_mwpm_graph_t *g = cudaq_mwpm__decoder_graph(d);
  if (!g->num_corr_rules)
    return CUDAQ_MWPM_OK;
  const cudaq_mwpm_pair_t *pairs;
  size_t np;
  cudaq_mwpm_decoder_pairs(d, &pairs, &np);
  c->npass1 = 0;
  for (size_t i = 0; i < np; i++) {
    size_t cnt = 0;
    st = cudaq_mwpm__decoder_path(d, pairs[i].a, pairs[i].b, c->path, (size_t)g->num_nodes + 1,
                                  &cnt);
    if (st) {
      for (size_t j = 0; j < c->npass1; j++)
        c->edge_mark[c->pass1[j]] &= (uint8_t)~1u;
      c->npass1 = 0;
      return st;
    }
    if (cnt > (size_t)g->num_nodes + 1)
      cnt = (size_t)g->num_nodes + 1; /* a shortest path is simple: never */
    for (size_t j = 0; j < cnt; j++) {
      uint32_t e = c->path[j];
      if (!(c->edge_mark[e] & 1)) {
        c->edge_mark[e] |= 1;
        c->pass1[c->npass1++] = e;
      }
    }
  }
  if (!reweight(c, g))
    return CUDAQ_MWPM_OK; /* same weights: the second pass would repeat the first */
  c->armed = 1;
  st = cudaq_mwpm_decode(d, events, num_events, res);
  c->armed = 0;
  return st;
}

cudaq_mwpm_status_t cudaq_mwpm_decode_dense_correlated(cudaq_mwpm_decoder_t *d,
                                                       const uint8_t *dets,
                                                       cudaq_mwpm_result_t *res) {
  cudaq_mwpm__corr_t *c = d ? cudaq_mwpm__decoder_corr(d) : NULL;
  if (!c || !cudaq_mwpm__decoder_graph(d)->has_corr || !dets || !res)
    return CUDAQ_MWPM_ERR_INVALID_ARG;
  const cudaq_mwpm_graph_t *g = cudaq_mwpm__decoder_graph(d);
  size_t n = 0;
  for (uint32_t i = 0; i < g->num_nodes; i++)
    if (dets[i])
      c->list[n++] = i;
  return cudaq_mwpm_decode_correlated(d, c->list, n, res);
}
