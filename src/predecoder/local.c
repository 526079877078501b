/*
 * The rule-based local predecoder.
 *
 * Two detection events u and v are removed together when each is the
 * other's only neighbouring event (neighbours: detectors joined to it by one
 * edge of the matching graph, of any weight) and the edge u-v is likely
 * (weight at most the threshold). The frame is flipped by that edge's
 * observables. The rule reads only the shot's input events, never the
 * result of an earlier removal, so the outcome does not depend on the order
 * of the events and the removed pairs are disjoint. An event whose only
 * likely edge goes to the boundary is kept: MWPM decides it.
 */
#include <math.h>
#include <stdlib.h>

#include "predecoder_internal.h"

#define NO_SLOT UINT32_MAX

/* Bits of mark[]. */
#define M_EVENT 1u     /* odd number of occurrences in the shot */
#define M_LISTED 2u    /* already copied into uniq */
#define M_REMOVED 4u   /* paired and removed */

typedef struct local {
  struct cudaq_predecoder base;
  double threshold;
  /* Detector-detector edges in compressed-sparse-row form. */
  uint32_t *adj_start;  /* num_detectors + 1 */
  uint32_t *adj_to;
  uint64_t *adj_obs;
  uint8_t *adj_likely;
  /* Per-shot scratch, all zero / NO_SLOT between shots. */
  uint8_t *mark;
  uint32_t *pslot;      /* adjacency slot of the single neighbouring event */
  uint32_t *uniq;       /* the shot's events, each once */
} local_t;

static void local_destroy(cudaq_predecoder_t *p) {
  local_t *l = (local_t *)p;
  free(l->adj_start);
  free(l->adj_to);
  free(l->adj_obs);
  free(l->adj_likely);
  free(l->mark);
  free(l->pslot);
  free(l->uniq);
  free(l);
}

/* The single neighbouring event of u, as an adjacency slot, or NO_SLOT when
 * u has none or several. */
static uint32_t single_neighbour(const local_t *l, uint32_t u) {
  uint32_t found = NO_SLOT;
  for (uint32_t a = l->adj_start[u]; a < l->adj_start[u + 1]; a++) {
    if (!(l->mark[l->adj_to[a]] & M_EVENT))
      continue;
    if (found != NO_SLOT)
      return NO_SLOT;
    found = a;
  }
  return found;
}

static cudaq_predecoder_status_t local_run(cudaq_predecoder_t *p, const uint32_t *events, size_t n,
                                           uint32_t *residual, size_t *num_residual,
                                           uint64_t *frame, cudaq_predecoder_error_t *err) {
  local_t *l = (local_t *)p;
  uint32_t nd = p->num_detectors;
  for (size_t i = 0; i < n; i++)
    if (events[i] >= nd) {
      cudaq_predecoder__set_error(err, "event %zu: detector %u out of range (%u detectors)", i,
                                  events[i], nd);
      return CUDAQ_PREDECODER_ERR_OUT_OF_RANGE;
    }
  for (size_t i = 0; i < n; i++)
    l->mark[events[i]] ^= M_EVENT;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t e = events[i];
    if ((l->mark[e] & (M_EVENT | M_LISTED)) == M_EVENT) {
      l->mark[e] |= M_LISTED;
      l->uniq[k++] = e;
    }
  }
  for (size_t i = 0; i < k; i++) {
    uint32_t u = l->uniq[i];
    uint32_t a = single_neighbour(l, u);
    if (a != NO_SLOT && l->adj_likely[a])
      l->pslot[u] = a;
  }
  uint64_t f = 0;
  for (size_t i = 0; i < k; i++) {
    uint32_t u = l->uniq[i], a = l->pslot[u];
    if (a == NO_SLOT)
      continue;
    uint32_t v = l->adj_to[a];
    /* Both ends must choose each other; take each pair once (from u < v). */
    if (u < v && l->pslot[v] != NO_SLOT && l->adj_to[l->pslot[v]] == u) {
      l->mark[u] |= M_REMOVED;
      l->mark[v] |= M_REMOVED;
      f ^= l->adj_obs[a];
    }
  }
  size_t r = 0;
  for (size_t i = 0; i < k; i++) {
    uint32_t u = l->uniq[i];
    if (!(l->mark[u] & M_REMOVED))
      residual[r++] = u;
    l->mark[u] = 0;
    l->pslot[u] = NO_SLOT;
  }
  /* Detectors listed an even number of times: their mark is already 0. */
  *num_residual = r;
  *frame = f;
  return CUDAQ_PREDECODER_OK;
}

cudaq_predecoder_status_t cudaq_local_predecoder_options_init(cudaq_local_predecoder_options_t *opts) {
  if (!opts)
    return CUDAQ_PREDECODER_ERR_INVALID_ARG;
  opts->weight_factor = CUDAQ_LOCAL_PREDECODER_DEFAULT_WEIGHT_FACTOR;
  return CUDAQ_PREDECODER_OK;
}

/* Smallest positive weight of a detector-detector edge (0 when none). */
static double min_positive_weight(const cudaq_mwpm_graph_t *g, size_t m) {
  double w = 0.0;
  for (size_t i = 0; i < m; i++) {
    cudaq_mwpm_edge_t e;
    cudaq_mwpm_graph_edge(g, i, &e);
    if (e.v >= 0 && e.weight > 0.0 && (w == 0.0 || e.weight < w))
      w = e.weight;
  }
  return w;
}

static cudaq_predecoder_status_t build_adjacency(local_t *l, const cudaq_mwpm_graph_t *g,
                                                 size_t m) {
  uint32_t n = l->base.num_detectors;
  size_t na = 0;
  l->adj_start = calloc((size_t)n + 1, sizeof *l->adj_start);
  if (!l->adj_start)
    return CUDAQ_PREDECODER_ERR_NO_MEMORY;
  for (size_t i = 0; i < m; i++) {
    cudaq_mwpm_edge_t e;
    cudaq_mwpm_graph_edge(g, i, &e);
    if (e.v < 0)
      continue;
    l->adj_start[e.u + 1]++;
    l->adj_start[e.v + 1]++;
    na += 2;
  }
  for (uint32_t i = 0; i < n; i++)
    l->adj_start[i + 1] += l->adj_start[i];
  size_t a = na ? na : 1;
  l->adj_to = malloc(a * sizeof *l->adj_to);
  l->adj_obs = malloc(a * sizeof *l->adj_obs);
  l->adj_likely = malloc(a * sizeof *l->adj_likely);
  uint32_t *fill = malloc(((size_t)n + 1) * sizeof *fill);
  if (!l->adj_to || !l->adj_obs || !l->adj_likely || !fill) {
    free(fill);
    return CUDAQ_PREDECODER_ERR_NO_MEMORY;
  }
  for (uint32_t i = 0; i <= n; i++)
    fill[i] = l->adj_start[i];
  for (size_t i = 0; i < m; i++) {
    cudaq_mwpm_edge_t e;
    cudaq_mwpm_graph_edge(g, i, &e);
    if (e.v < 0)
      continue;
    for (int side = 0; side < 2; side++) {
      uint32_t from = (uint32_t)(side ? e.v : e.u), to = (uint32_t)(side ? e.u : e.v);
      uint32_t s = fill[from]++;
      l->adj_to[s] = to;
      l->adj_obs[s] = e.obs_mask;
      l->adj_likely[s] = e.weight <= l->threshold;
    }
  }
  free(fill);
  return CUDAQ_PREDECODER_OK;
}

cudaq_predecoder_status_t cudaq_predecoder_create_local(const cudaq_mwpm_graph_t *graph,
                                                        const cudaq_local_predecoder_options_t *opts,
                                                        cudaq_predecoder_t **out,
                                                        cudaq_predecoder_error_t *err) {
  if (!graph || !out) {
    cudaq_predecoder__set_error(err, "local predecoder: %s is NULL", graph ? "out" : "graph");
    return CUDAQ_PREDECODER_ERR_INVALID_ARG;
  }
  *out = NULL;
  double factor = opts ? opts->weight_factor : CUDAQ_LOCAL_PREDECODER_DEFAULT_WEIGHT_FACTOR;
  if (!isfinite(factor) || factor <= 0.0) {
    cudaq_predecoder__set_error(err, "local predecoder: weight factor %g is not a positive number",
                                factor);
    return CUDAQ_PREDECODER_ERR_INVALID_ARG;
  }
  size_t m = cudaq_mwpm_graph_num_edges(graph);
  if (m > (size_t)(UINT32_MAX / 2 - 1)) {
    cudaq_predecoder__set_error(err, "local predecoder: %zu edges is too many", m);
    return CUDAQ_PREDECODER_ERR_INVALID_ARG;
  }
  local_t *l = calloc(1, sizeof *l);
  if (!l)
    return CUDAQ_PREDECODER_ERR_NO_MEMORY;
  l->base.kind = PD__LOCAL;
  l->base.num_detectors = cudaq_mwpm_graph_num_nodes(graph);
  l->base.num_observables = cudaq_mwpm_graph_num_observables(graph);
  l->base.run = local_run;
  l->base.destroy = local_destroy;
  l->threshold = factor * min_positive_weight(graph, m);
  uint32_t n = l->base.num_detectors;
  size_t cells = n ? n : 1;
  cudaq_predecoder_status_t st = build_adjacency(l, graph, m);
  if (st == CUDAQ_PREDECODER_OK) {
    l->mark = calloc(cells, sizeof *l->mark);
    l->pslot = malloc(cells * sizeof *l->pslot);
    l->uniq = malloc(cells * sizeof *l->uniq);
    if (!l->mark || !l->pslot || !l->uniq)
      st = CUDAQ_PREDECODER_ERR_NO_MEMORY;
  }
  if (st != CUDAQ_PREDECODER_OK) {
    cudaq_predecoder__set_error(err, "local predecoder: out of memory");
    local_destroy(&l->base);
    return st;
  }
  for (size_t i = 0; i < cells; i++)
    l->pslot[i] = NO_SLOT;
  *out = &l->base;
  return CUDAQ_PREDECODER_OK;
}

double cudaq_predecoder__local_threshold(const cudaq_predecoder_t *p) {
  return ((const local_t *)p)->threshold;
}
