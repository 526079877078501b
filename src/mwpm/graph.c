/*
 * Matching graph: detectors plus one boundary node, parallel edges merged,
 * weights discretised to even integers for the decoder.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mwpm_internal.h"

typedef struct raw_edge {
  int32_t u, v;   /* u < v, or v == -1 for the boundary */
  double w;
  uint64_t obs;
  size_t order;   /* first appearance, to keep the caller's edge order */
} raw_edge_t;

static int cmp_key(const void *a, const void *b) {
  const raw_edge_t *x = a, *y = b;
  if (x->u != y->u)
    return x->u < y->u ? -1 : 1;
  if (x->v != y->v)
    return x->v < y->v ? -1 : 1;
  return x->order < y->order ? -1 : (x->order > y->order);
}

static int cmp_order(const void *a, const void *b) {
  const raw_edge_t *x = a, *y = b;
  return x->order < y->order ? -1 : (x->order > y->order);
}

/* p of an error whose weight is w = ln((1-p)/p). */
static double prob_of_weight(double w) { return 1.0 / (1.0 + exp(w)); }

static double merge_independent(double w1, double w2) {
  double p1 = prob_of_weight(w1), p2 = prob_of_weight(w2);
  double p = p1 * (1.0 - p2) + p2 * (1.0 - p1);
  double q = (1.0 - p1) * (1.0 - p2) + p1 * p2;
  if (p <= 0.0)
    return w1 < w2 ? w1 : w2; /* both far too unlikely to matter: keep the smaller */
  return log(q / p);
}

cudaq_mwpm_status_t cudaq_mwpm_graph_options_init(cudaq_mwpm_graph_options_t *opts) {
  if (!opts)
    return CUDAQ_MWPM_ERR_INVALID_ARG;
  opts->merge = CUDAQ_MWPM_MERGE_INDEPENDENT;
  opts->enable_correlations = 0;
  opts->per_shot_weights = 0;
  return CUDAQ_MWPM_OK;
}

void cudaq_mwpm_graph_destroy(cudaq_mwpm_graph_t *g) {
  if (!g)
    return;
  free(g->adj_start);
  free(g->adj);
  free(g->adj_wf);
  free(g->adj_obs);
  free(g->adj_edge);
  free(g->edges);
  free(g->neg_edges);
  free(g->edge_adj);
  free(g->coords);
  free(g->coord_start);
  cudaq_mwpm__corr_free_graph(g);
  free(g);
}

/* Merges, then builds the CSR arrays. Takes ownership of raw. */
static cudaq_mwpm_status_t build(uint32_t n, uint32_t nobs, raw_edge_t *raw, size_t m,
                                 cudaq_mwpm_merge_t merge, cudaq_mwpm_graph_t **out) {
  cudaq_mwpm_graph_t *g = calloc(1, sizeof *g);
  if (!g) {
    free(raw);
    return CUDAQ_MWPM_ERR_NO_MEMORY;
  }
  g->num_nodes = n;
  g->num_observables = nobs;
  if (m)
    qsort(raw, m, sizeof *raw, cmp_key);
  size_t k = 0;
  for (size_t i = 0; i < m; i++) {
    if (k && raw[k - 1].u == raw[i].u && raw[k - 1].v == raw[i].v) {
      raw_edge_t *e = &raw[k - 1];
      if (merge == CUDAQ_MWPM_MERGE_INDEPENDENT) {
        e->w = merge_independent(e->w, raw[i].w);
      } else if (raw[i].w < e->w) {
        e->w = raw[i].w;
        e->obs = raw[i].obs;
      }
      continue;
    }
    raw[k++] = raw[i];
  }
  if (k)
    qsort(raw, k, sizeof *raw, cmp_order);
  g->num_edges = k;
  g->edges = malloc((k ? k : 1) * sizeof *g->edges);
  g->adj_start = calloc((size_t)n + 2, sizeof *g->adj_start);
  size_t nadj = 0;
  for (size_t i = 0; i < k; i++)
    nadj += raw[i].v >= 0 ? 2 : 1;
  size_t a = nadj ? nadj : 1;
  g->adj = malloc(a * sizeof *g->adj);
  g->adj_wf = malloc(a * sizeof *g->adj_wf);
  g->adj_obs = malloc(a * sizeof *g->adj_obs);
  g->adj_edge = malloc(a * sizeof *g->adj_edge);
  g->neg_edges = malloc((k ? k : 1) * sizeof *g->neg_edges);
  if (!g->edges || !g->adj_start || !g->adj || !g->adj_wf || !g->adj_obs ||
      !g->adj_edge || !g->neg_edges) {
    free(raw);
    cudaq_mwpm_graph_destroy(g);
    return CUDAQ_MWPM_ERR_NO_MEMORY;
  }
  double maxw = 0.0;
  for (size_t i = 0; i < k; i++)
    if (fabs(raw[i].w) > maxw)
      maxw = fabs(raw[i].w);
  /* About 2^24 integer levels up to the largest weight. */
  g->scale = maxw > 0.0 ? 8388608.0 / maxw : 1.0;
  for (size_t i = 0; i < k; i++) {
    g->edges[i].u = raw[i].u;
    g->edges[i].v = raw[i].v;
    g->edges[i].weight = raw[i].w;
    g->edges[i].obs_mask = raw[i].obs;
    g->adj_start[raw[i].u + 1]++;
    if (raw[i].v >= 0)
      g->adj_start[raw[i].v + 1]++;
    if (raw[i].w < 0) {
      g->neg_edges[g->num_neg_edges++] = (uint32_t)i;
      g->neg_weight += raw[i].w;
      g->neg_obs ^= raw[i].obs;
    }
  }
  for (uint32_t i = 0; i < n; i++)
    g->adj_start[i + 1] += g->adj_start[i];
  uint32_t *fill = malloc(((size_t)n + 1) * sizeof *fill);
  if (!fill) {
    free(raw);
    cudaq_mwpm_graph_destroy(g);
    return CUDAQ_MWPM_ERR_NO_MEMORY;
  }
  memcpy(fill, g->adj_start, ((size_t)n + 1) * sizeof *fill);
  for (size_t i = 0; i < k; i++) {
    double aw = fabs(raw[i].w);
    int32_t iw = 2 * (int32_t)llround(aw * g->scale);
    for (int side = 0; side < 2; side++) {
      int32_t from = side ? raw[i].v : raw[i].u;
      int32_t to = side ? raw[i].u : raw[i].v;
      if (from < 0)
        continue;
      uint32_t at = fill[from]++;
      g->adj[at].to = to;
      g->adj[at].w = iw;
      g->adj_wf[at] = aw;
      g->adj_obs[at] = raw[i].obs;
      g->adj_edge[at] = (uint32_t)i;
    }
  }
  free(fill);
  free(raw);
  /* Edge i's adjacency positions (the second UINT32_MAX for a boundary
   * edge): where a per-decoder weight change (correlated.c) writes. */
  g->edge_adj = malloc((2 * k + 1) * sizeof *g->edge_adj);
  if (!g->edge_adj) {
    cudaq_mwpm_graph_destroy(g);
    return CUDAQ_MWPM_ERR_NO_MEMORY;
  }
  for (size_t i = 0; i < 2 * k; i++)
    g->edge_adj[i] = UINT32_MAX;
  for (uint32_t q = 0; q < g->adj_start[n]; q++) {
    uint32_t e = g->adj_edge[q];
    g->edge_adj[2 * e + (g->edge_adj[2 * e] != UINT32_MAX)] = q;
  }
  *out = g;
  return CUDAQ_MWPM_OK;
}

cudaq_mwpm_status_t cudaq_mwpm_graph_from_edges(uint32_t num_nodes, uint32_t num_observables,
                                                const cudaq_mwpm_edge_t *edges, size_t num_edges,
                                                const cudaq_mwpm_graph_options_t *opts,
                                                cudaq_mwpm_graph_t **out) {
  if (!out || (!edges && num_edges) || num_observables > 64)
    return CUDAQ_MWPM_ERR_INVALID_ARG;
  *out = NULL;
  cudaq_mwpm_merge_t merge = opts ? opts->merge : CUDAQ_MWPM_MERGE_INDEPENDENT;
  if (merge != CUDAQ_MWPM_MERGE_INDEPENDENT && merge != CUDAQ_MWPM_MERGE_SMALLEST_WEIGHT)
    return CUDAQ_MWPM_ERR_INVALID_ARG;
  if (opts && opts->enable_correlations)
    return CUDAQ_MWPM_ERR_INVALID_ARG; /* no decomposition to read */
  if (num_nodes > CUDAQ_DEM_MAX_DETECTORS)
    return CUDAQ_MWPM_ERR_TOO_LARGE;
  raw_edge_t *raw = malloc((num_edges ? num_edges : 1) * sizeof *raw);
  if (!raw)
    return CUDAQ_MWPM_ERR_NO_MEMORY;
  for (size_t i = 0; i < num_edges; i++) {
    int32_t u = edges[i].u, v = edges[i].v;
    if (u < 0 || (uint32_t)u >= num_nodes || v < -1 || (v >= 0 && (uint32_t)v >= num_nodes) ||
        u == v || !isfinite(edges[i].weight)) {
      free(raw);
      return CUDAQ_MWPM_ERR_INVALID_ARG;
    }
    if (v >= 0 && v < u) {
      int32_t t = u;
      u = v;
      v = t;
    }
    raw[i].u = u;
    raw[i].v = v;
    raw[i].w = edges[i].weight;
    raw[i].obs = edges[i].obs_mask;
    raw[i].order = i;
  }
  cudaq_mwpm_status_t r = build(num_nodes, num_observables, raw, num_edges, merge, out);
  if (!r)
    (*out)->per_shot = opts && opts->per_shot_weights;
  return r;
}

cudaq_mwpm_status_t cudaq_mwpm_graph_from_dem(const cudaq_dem_t *dem,
                                              const cudaq_mwpm_graph_options_t *opts,
                                              cudaq_mwpm_graph_t **out, cudaq_mwpm_error_t *err) {
  if (!dem || !out)
    return CUDAQ_MWPM_ERR_INVALID_ARG;
  *out = NULL;
  cudaq_mwpm_merge_t merge = opts ? opts->merge : CUDAQ_MWPM_MERGE_INDEPENDENT;
  if (merge != CUDAQ_MWPM_MERGE_INDEPENDENT && merge != CUDAQ_MWPM_MERGE_SMALLEST_WEIGHT)
    return CUDAQ_MWPM_ERR_INVALID_ARG;
  size_t m = dem->num_edges;
  raw_edge_t *raw = malloc((m ? m : 1) * sizeof *raw);
  if (!raw)
    return CUDAQ_MWPM_ERR_NO_MEMORY;
  size_t k = 0;
  for (size_t i = 0; i < m; i++) {
    const cudaq_dem_edge_t *e = &dem->edges[i];
    if (e->p <= 0.0)
      continue;
    if (e->p >= 1.0) {
      cudaq_mwpm__set_error(err, e->line, "error probability 1 gives an infinite negative weight");
      free(raw);
      return CUDAQ_MWPM_ERR_INVALID_ARG;
    }
    int32_t u = e->u, v = e->v;
    if (v >= 0 && v < u) {
      int32_t t = u;
      u = v;
      v = t;
    }
    raw[k].u = u;
    raw[k].v = v;
    raw[k].w = log((1.0 - e->p) / e->p);
    raw[k].obs = e->obs_mask;
    raw[k].order = k;
    k++;
  }
  cudaq_mwpm_status_t r = build(dem->num_detectors, dem->num_observables, raw, k, merge, out);
  if (r)
    return r;
  cudaq_mwpm_graph_t *g = *out;
  g->per_shot = opts && opts->per_shot_weights;
  size_t nc = dem->coord_start ? dem->coord_start[dem->num_detectors] : 0;
  g->coord_start = malloc(((size_t)dem->num_detectors + 1) * sizeof *g->coord_start);
  g->coords = malloc((nc ? nc : 1) * sizeof *g->coords);
  if (!g->coord_start || !g->coords) {
    cudaq_mwpm_graph_destroy(g);
    *out = NULL;
    return CUDAQ_MWPM_ERR_NO_MEMORY;
  }
  if (dem->coord_start) {
    memcpy(g->coord_start, dem->coord_start, ((size_t)dem->num_detectors + 1) * sizeof(uint32_t));
    if (nc)
      memcpy(g->coords, dem->coords, nc * sizeof(double));
  } else {
    memset(g->coord_start, 0, ((size_t)dem->num_detectors + 1) * sizeof(uint32_t));
  }
  if (opts && opts->enable_correlations) {
    r = cudaq_mwpm__corr_build(g, dem, err);
    if (r) {
      cudaq_mwpm_graph_destroy(g);
      *out = NULL;
      return r;
    }
  }
  return CUDAQ_MWPM_OK;
}

uint32_t cudaq_mwpm_graph_num_nodes(const cudaq_mwpm_graph_t *g) { return g ? g->num_nodes : 0; }

uint32_t cudaq_mwpm_graph_num_observables(const cudaq_mwpm_graph_t *g) {
  return g ? g->num_observables : 0;
}

size_t cudaq_mwpm_graph_num_edges(const cudaq_mwpm_graph_t *g) { return g ? g->num_edges : 0; }

int cudaq_mwpm_graph_has_correlations(const cudaq_mwpm_graph_t *g) { return g ? g->has_corr : 0; }

size_t cudaq_mwpm_graph_num_correlation_rules(const cudaq_mwpm_graph_t *g) {
  return g ? g->num_corr_rules : 0;
}

cudaq_mwpm_status_t cudaq_mwpm_graph_edge(const cudaq_mwpm_graph_t *g, size_t i,
                                          cudaq_mwpm_edge_t *out) {
  if (!g || !out || i >= g->num_edges)
    return CUDAQ_MWPM_ERR_INVALID_ARG;
  *out = g->edges[i];
  return CUDAQ_MWPM_OK;
}

cudaq_mwpm_status_t cudaq_mwpm_graph_coords(const cudaq_mwpm_graph_t *g, uint32_t d,
                                            const double **coords, size_t *n) {
  if (!g || !coords || !n || d >= g->num_nodes)
    return CUDAQ_MWPM_ERR_INVALID_ARG;
  if (!g->coord_start) {
    *coords = NULL;
    *n = 0;
    return CUDAQ_MWPM_OK;
  }
  *coords = g->coords + g->coord_start[d];
  *n = g->coord_start[d + 1] - g->coord_start[d];
  return CUDAQ_MWPM_OK;
}
