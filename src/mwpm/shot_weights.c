/*
 * Per-shot weights (graphs built with per_shot_weights): a decoder keeps its
 * own copy of the weights, which one shot may change.
 *
 * - cudaq_mwpm_decode_weighted: the caller lists edges and their weights;
 *   all are written before the shot (O(edges listed) per shot).
 * - cudaq_mwpm_decode_mapped: a map set once (edge -> index into a value
 *   array) and per shot only the values. A node's adjacency weights are read
 *   from the values the first time the matcher looks at the node in that
 *   shot (decoder_internal.h, weights_at), so a shot costs the nodes its
 *   regions reach: for a predecoder's residual, a few events among
 *   thousands of detectors, that is a small part of the graph. Both ends of
 *   an edge read the same value, so the two copies agree.
 *
 * Both clamp and discretise a weight the same way (weight_int), so the two
 * give identical matchings for the same weights.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "decoder_internal.h"

/* Largest integer a per-shot weight is discretised to: 2^28, far inside the
 * flooder's int32 adjacency weights and int64 times, and 16x the 2^24 of
 * the graph's largest weight, so per-shot weights up to 16x the graph's
 * largest are kept as given and larger ones are clamped to that (an edge
 * that unlikely is not used while any shorter path exists). */
#define PER_SHOT_MAX_INT (1 << 28)

static double weight_cap(const cudaq_mwpm_graph_t *g) {
  return (double)(PER_SHOT_MAX_INT / 2) / g->scale;
}

/* The graph's discretisation of a weight wf in [0, cap]: llround for wf >= 0,
 * without the call. */
static inline int32_t weight_int(double wf, double scale) { return 2 * (int32_t)(wf * scale + 0.5); }

/* ------------------------------------------------------- listed weights */

/* The per-shot weights into the decoder's copy (clamped at wcap, scaled as
 * the graph's), each edge stamped with this call's epoch and listed dirty
 * once (after the nd already there). Returns the new dirty count. Its own
 * function so that the restrict pointers' scope ends here: the caller then
 * restores edges through the decoder's fields. (Locals, not the decoder's
 * fields, keep the compiler from reloading every pointer after each store.) */
static size_t set_weights(cudaq_mwpm__adj_t *restrict adj, double *restrict adj_wf,
                          uint32_t *restrict stamp, uint32_t *restrict dirty, uint8_t *restrict mark,
                          const uint32_t *restrict eadj, uint32_t epoch, double wcap, double scale,
                          const uint32_t *edges, const double *weights, size_t num_weights, size_t nd) {
  for (size_t i = 0; i < num_weights; i++) {
    uint32_t f = edges[i];
    double wf = weights[i] < wcap ? weights[i] : wcap;
    int32_t w = weight_int(wf, scale);
    uint32_t k0 = eadj[2 * f], k1 = eadj[2 * f + 1];
    adj[k0].w = w; /* every edge has its first end */
    adj_wf[k0] = wf;
    if (k1 != UINT32_MAX) {
      adj[k1].w = w;
      adj_wf[k1] = wf;
    }
    stamp[f] = epoch;
    if (!(mark[f] & 2)) {
      mark[f] |= 2;
      dirty[nd++] = f;
    }
  }
  return nd;
}

cudaq_mwpm_status_t cudaq_mwpm_decode_weighted(cudaq_mwpm_decoder_t *d, const uint32_t *events,
                                               size_t num_events, const uint32_t *edges,
                                               const double *weights, size_t num_weights,
                                               cudaq_mwpm_result_t *res) {
  cudaq_mwpm__corr_t *c = d ? cudaq_mwpm__decoder_corr(d) : NULL;
  const cudaq_mwpm_graph_t *g = d ? cudaq_mwpm__decoder_graph(d) : NULL;
  if (!c || !g->per_shot || !res || (!events && num_events) ||
      ((!edges || !weights) && num_weights))
    return CUDAQ_MWPM_ERR_INVALID_ARG;
  /* Every entry checked before any weight changes. */
  for (size_t i = 0; i < num_weights; i++) {
    if (edges[i] >= g->num_edges)
      return CUDAQ_MWPM_ERR_OUT_OF_RANGE;
    if (!(weights[i] >= 0.0) || !isfinite(weights[i]) ||
        (g->num_neg_edges && g->edges[edges[i]].weight < 0.0))
      return CUDAQ_MWPM_ERR_INVALID_ARG; /* negative, NaN, infinite; or an edge folded into every shot */
  }
  /* A mapped shot's nodes first get the graph's weights back (this shot
   * reads every node's weights from the copy). */
  cudaq_mwpm__mapped_restore(c, g);
  /* This call's edges get its stamp; then of the edges changed before
   * (dirty), only those it does not set get their graph weights back (a
   * shot that sets every edge, as a predecoder's does, restores nothing). */
  if (++c->epoch == 0) { /* wrapped: no stale stamp may equal the new epoch */
    memset(c->stamp, 0, g->num_edges * sizeof *c->stamp);
    c->epoch = 1;
  }
  size_t nold = c->ndirty;
  c->ndirty = set_weights(c->adj, c->adj_wf, c->stamp, c->dirty, c->edge_mark, g->edge_adj, c->epoch,
                          weight_cap(g), g->scale, edges, weights, num_weights, c->ndirty);
  size_t keep = 0;
  for (size_t i = 0; i < c->ndirty; i++) {
    uint32_t f = c->dirty[i];
    if (i >= nold || c->stamp[f] == c->epoch)
      c->dirty[keep++] = f;
    else
      cudaq_mwpm__restore_edge(c, g, f);
  }
  c->ndirty = keep;
  c->armed = 1; /* cudaq_mwpm_decode keeps these weights */
  cudaq_mwpm_status_t st = cudaq_mwpm_decode(d, events, num_events, res);
  c->armed = 0;
  return st;
}

/* ------------------------------------------------------- mapped weights */

void cudaq_mwpm__mapped_free(cudaq_mwpm__corr_t *c) {
  free(c->adj_slot);
  free(c->node_stamp);
  free(c->node_list);
  free(c->node_in);
  c->adj_slot = c->node_stamp = c->node_list = NULL;
  c->node_in = NULL;
  c->num_values = 0;
  c->nnode_list = 0;
  c->values = NULL;
}

void cudaq_mwpm__mapped_restore(cudaq_mwpm__corr_t *c, const cudaq_mwpm_graph_t *g) {
  for (size_t i = 0; i < c->nnode_list; i++) {
    uint32_t x = c->node_list[i];
    uint32_t k0 = g->adj_start[x], k1 = g->adj_start[x + 1];
    memcpy(c->adj + k0, g->adj + k0, (k1 - k0) * sizeof *c->adj);
    memcpy(c->adj_wf + k0, g->adj_wf + k0, (k1 - k0) * sizeof *c->adj_wf);
    c->node_in[x] = 0;
  }
  c->nnode_list = 0;
  c->values = NULL;
}

void cudaq_mwpm__mapped_read(cudaq_mwpm__corr_t *c, const cudaq_mwpm_graph_t *g, int32_t x) {
  c->node_stamp[x] = c->node_epoch;
  if (!c->node_in[x]) {
    c->node_in[x] = 1;
    c->node_list[c->nnode_list++] = (uint32_t)x;
  }
  const float *v = c->values;
  double wcap = c->wcap, scale = g->scale;
  for (uint32_t k = g->adj_start[x], e = g->adj_start[x + 1]; k < e; k++) {
    uint32_t s = c->adj_slot[k];
    if (s == UINT32_MAX) { /* not in the map: the graph's weight */
      c->adj[k].w = g->adj[k].w;
      c->adj_wf[k] = g->adj_wf[k];
      continue;
    }
    double wf = fabs((double)v[s]);
    if (!(wf <= DBL_MAX)) { /* NaN or infinite: the shot is refused after its decode */
      c->bad_value = 1;
      wf = wcap;
    }
    wf = wf < wcap ? wf : wcap;
    c->adj[k].w = weight_int(wf, scale);
    c->adj_wf[k] = wf;
  }
}

cudaq_mwpm_status_t cudaq_mwpm_decoder_set_weight_map(cudaq_mwpm_decoder_t *d, const uint32_t *edges,
                                                      const uint32_t *slots, size_t num,
                                                      size_t num_values) {
  cudaq_mwpm__corr_t *c = d ? cudaq_mwpm__decoder_corr(d) : NULL;
  const cudaq_mwpm_graph_t *g = d ? cudaq_mwpm__decoder_graph(d) : NULL;
  if (!c || !g->per_shot || ((!edges || !slots) && num) || num_values > UINT32_MAX)
    return CUDAQ_MWPM_ERR_INVALID_ARG;
  size_t nadj = g->adj_start[g->num_nodes], n = g->num_nodes;
  uint32_t *adj_slot = malloc((nadj ? nadj : 1) * sizeof *adj_slot);
  uint32_t *stamp = calloc(n ? n : 1, sizeof *stamp), *list = malloc((n ? n : 1) * sizeof *list);
  uint8_t *in = calloc(n ? n : 1, 1);
  if (!adj_slot || !stamp || !list || !in) {
    free(adj_slot);
    free(stamp);
    free(list);
    free(in);
    return CUDAQ_MWPM_ERR_NO_MEMORY;
  }
  for (size_t k = 0; k < nadj; k++)
    adj_slot[k] = UINT32_MAX;
  cudaq_mwpm_status_t st = CUDAQ_MWPM_OK;
  for (size_t i = 0; i < num && !st; i++) {
    uint32_t f = edges[i];
    if (f >= g->num_edges || slots[i] >= num_values) {
      st = CUDAQ_MWPM_ERR_OUT_OF_RANGE;
    } else if (g->edges[f].weight < 0.0 || adj_slot[g->edge_adj[2 * f]] != UINT32_MAX) {
      st = CUDAQ_MWPM_ERR_INVALID_ARG; /* an edge folded into every shot, or listed twice */
    } else {
      for (int s = 0; s < 2; s++)
        if (g->edge_adj[2 * f + s] != UINT32_MAX)
          adj_slot[g->edge_adj[2 * f + s]] = slots[i];
    }
  }
  if (st) {
    free(adj_slot);
    free(stamp);
    free(list);
    free(in);
    return st;
  }
  /* The old map's nodes back to the graph's weights, then the new map. */
  cudaq_mwpm__mapped_restore(c, g);
  cudaq_mwpm__mapped_free(c);
  c->adj_slot = adj_slot;
  c->node_stamp = stamp;
  c->node_list = list;
  c->node_in = in;
  c->node_epoch = 0;
  c->num_values = num ? num_values : 0;
  c->wcap = weight_cap(g);
  return CUDAQ_MWPM_OK;
}

cudaq_mwpm_status_t cudaq_mwpm_decode_mapped(cudaq_mwpm_decoder_t *d, const uint32_t *events,
                                             size_t num_events, const float *values,
                                             cudaq_mwpm_result_t *res) {
  cudaq_mwpm__corr_t *c = d ? cudaq_mwpm__decoder_corr(d) : NULL;
  if (!c || !c->num_values || !values || !res || (!events && num_events))
    return CUDAQ_MWPM_ERR_INVALID_ARG;
  const cudaq_mwpm_graph_t *g = cudaq_mwpm__decoder_graph(d);
  /* Listed weights of an earlier shot back to the graph's (a node not in
   * the map reads the copy). */
  cudaq_mwpm__restore_dirty(c, g);
  /* A new epoch: every node's weights are stale until read from values. */
  if (++c->node_epoch == 0) { /* wrapped: no stale stamp may equal the new epoch */
    memset(c->node_stamp, 0, g->num_nodes * sizeof *c->node_stamp);
    c->node_epoch = 1;
  }
  c->values = values;
  c->bad_value = 0;
  c->armed = 1; /* cudaq_mwpm_decode keeps the mapped shot (and sees values) */
  cudaq_mwpm_status_t st = cudaq_mwpm_decode(d, events, num_events, res);
  c->armed = 0;
  if (!st && c->bad_value)
    st = CUDAQ_MWPM_ERR_INVALID_ARG;
  return st;
}
