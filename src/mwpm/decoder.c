/*
 * Exact minimum-weight perfect matching by sparse blossom.
 *
 * Written for this project from the description of the algorithm in Higgott
 * and Gidney, "Sparse Blossom" (arXiv:2303.15933); Debian has no C library
 * for minimum-weight perfect matching, hence this implementation.
 *
 * Picture: every detection event starts a region that grows on the detector
 * graph at unit speed. A region's radius is its dual variable (an Edmonds
 * dual; blossoms are regions too). Nodes are owned by the innermost region
 * that reached them first. Collisions between regions (or with the
 * boundary) drive Edmonds' primal-dual algorithm on the implicit graph of
 * detection events: alternating trees grow (outer regions grow, inner
 * regions shrink), odd cycles become blossoms, augmenting paths match
 * regions, blossoms of radius zero shatter. Only the nodes near detection
 * events are ever touched, so the work follows the number of events.
 *
 * Exactness: integer weights, all even, so every event happens at an
 * integer time (all vertices of a non-frozen region have a total dual of the
 * parity of the current time; see the note at edge_collision_time).
 *
 * Per-shot memory: every array is sized at decoder creation from the graph
 * (regions, alternating-tree nodes, scratch); only the event heap can grow,
 * doubling, during the first shots.
 */
#include <stdlib.h>
#include <string.h>


#include "decoder_internal.h"

/* ------------------------------------------------------------ results */

static void record(cudaq_mwpm_decoder_t *d, cedge_t e) {
  d->obs ^= e.obs;
  d->weight += e.wf;
  d->pairs[d->npairs].a = e.a;
  d->pairs[d->npairs].b = e.b;
  d->pair_edges[d->npairs++] = e;
}

/* Region r is matched to the outside through source node s inside it:
 * match the rest of its inside. Iterative, with an explicit stack. */
static void resolve(cudaq_mwpm_decoder_t *d, int32_t r0, int32_t s0) {
  int32_t *sr = d->scratch_a, *ss = d->scratch_b;
  int32_t n = 0;
  sr[n] = r0;
  ss[n++] = s0;
  while (n) {
    n--;
    int32_t r = sr[n], s = ss[n];
    if (d->regions[r].child == NONE)
      continue;
    int32_t c = child_holding(d, r, s);
    sr[n] = c;
    ss[n++] = s;
    for (int32_t x = d->regions[c].next; x != c;) {
      int32_t y = d->regions[x].next;
      cedge_t e = d->regions[x].to_next;
      record(d, e);
      sr[n] = x;
      ss[n++] = e.a;
      sr[n] = y;
      ss[n++] = e.b;
      x = d->regions[y].next;
    }
  }
}

void cudaq_mwpm__collect(cudaq_mwpm_decoder_t *d) {
  uint32_t s = ++d->stamp;
  for (size_t i = 0; i < d->nevents; i++) {
    int32_t r = d->ns[d->events[i]].top;
    region_t *R = &d->regions[r];
    if (R->stamp == s)
      continue;
    R->stamp = s;
    cedge_t e = R->match_edge;
    /* Blossoms are resolved into their children's pairs. */
    record(d, e);
    if (R->child != NONE)
      resolve(d, r, e.a);
    if (R->match != BOUNDARY_REGION) {
      region_t *M = &d->regions[R->match];
      M->stamp = s;
      if (M->child != NONE)
        resolve(d, R->match, e.b);
    }
  }
}

/* ------------------------------------------------------------ decode */

static void reset(cudaq_mwpm_decoder_t *d) {
  for (size_t i = 0; i < d->ntouched; i++) {
    int32_t x = d->touched[i];
    node_t *nx = &d->nodes[x];
    d->nodes[x].region = NONE;
    d->ns[x] = (nstate_t){0, NONE, 0, 0};
    nx->source = nx->shell_next = NONE;
    nx->touched = 0;
    nx->is_event = 0;
    d->ev[x].desired = NEVER;
    d->ev[x].queued = NEVER;
  }
  d->ntouched = 0;
  d->nregions = 0;
  d->nfree_regions = 0;
  d->nalts = 0;
  d->nfree_alts = 0;
  cudaq_mwpm__heap_clear(d);
  d->now = 0;
}

/* Folds edges of negative weight into the shot: they are always taken, so
 * their endpoints flip and the matching runs on |w|. */
static void add_event(cudaq_mwpm_decoder_t *d, uint32_t x) {
  d->mark[x] ^= 1;
}

static cudaq_mwpm_status_t finish_events(cudaq_mwpm_decoder_t *d, const uint32_t *ev, size_t n,
                                         cudaq_mwpm_result_t *res) {
  const cudaq_mwpm_graph_t *g = d->g;
  for (size_t i = 0; i < g->num_neg_edges; i++) {
    const cudaq_mwpm_edge_t *e = &g->edges[g->neg_edges[i]];
    add_event(d, (uint32_t)e->u);
    if (e->v >= 0)
      add_event(d, (uint32_t)e->v);
  }
  d->nevents = 0;
  for (size_t i = 0; i < n; i++) {
    if (d->mark[ev[i]]) {
      d->mark[ev[i]] = 0;
      d->events[d->nevents++] = ev[i];
    }
  }
  for (size_t i = 0; i < g->num_neg_edges; i++) {
    const cudaq_mwpm_edge_t *e = &g->edges[g->neg_edges[i]];
    int32_t vs[2] = {e->u, e->v};
    for (int j = 0; j < 2; j++)
      if (vs[j] >= 0 && d->mark[vs[j]]) {
        d->mark[vs[j]] = 0;
        d->events[d->nevents++] = (uint32_t)vs[j];
      }
  }
  cudaq_mwpm_status_t st = cudaq_mwpm__run(d);
  reset(d);
  if (st) {
    d->npairs = 0;
    return st;
  }
  res->obs_mask = d->obs ^ g->neg_obs;
  res->weight = d->weight + g->neg_weight;
  res->num_pairs = d->npairs;
  return CUDAQ_MWPM_OK;
}

cudaq_mwpm_status_t cudaq_mwpm_decode(cudaq_mwpm_decoder_t *d, const uint32_t *events,
                                      size_t num_events, cudaq_mwpm_result_t *res) {
  if (!d || !res || (!events && num_events))
    return CUDAQ_MWPM_ERR_INVALID_ARG;
  if (d->corr)
    cudaq_mwpm__corr_before_decode(d->corr, d->g);
  /* Toggle marks: an event listed twice cancels. On an event out of range,
   * the marks set so far are undone. */
  for (size_t i = 0; i < num_events; i++) {
    if (events[i] >= d->n) {
      while (i--)
        d->mark[events[i]] ^= 1;
      return CUDAQ_MWPM_ERR_OUT_OF_RANGE;
    }
    d->mark[events[i]] ^= 1;
  }
  return finish_events(d, events, num_events, res);
}

cudaq_mwpm_status_t cudaq_mwpm_decode_dense(cudaq_mwpm_decoder_t *d, const uint8_t *dets,
                                            cudaq_mwpm_result_t *res) {
  if (!d || !res || !dets)
    return CUDAQ_MWPM_ERR_INVALID_ARG;
  if (d->corr)
    cudaq_mwpm__corr_before_decode(d->corr, d->g);
  /* Reuse the tail of the events array as the input list. */
  size_t n = 0;
  uint32_t *list = d->events + d->n;
  for (uint32_t i = 0; i < d->n; i++)
    if (dets[i]) {
      list[n++] = i;
      d->mark[i] ^= 1;
    }
  return finish_events(d, list, n, res);
}

cudaq_mwpm_status_t cudaq_mwpm_decoder_pairs(const cudaq_mwpm_decoder_t *d,
                                             const cudaq_mwpm_pair_t **pairs, size_t *num_pairs) {
  if (!d || !pairs || !num_pairs)
    return CUDAQ_MWPM_ERR_INVALID_ARG;
  *pairs = d->pairs;
  *num_pairs = d->npairs;
  return CUDAQ_MWPM_OK;
}

/* ------------------------------------------------------------ create */

void cudaq_mwpm_decoder_destroy(cudaq_mwpm_decoder_t *d) {
  if (!d)
    return;
  free(d->nodes);
  if (d->ns)
    free(d->ns - 1);
  free(d->regions);
  free(d->free_regions);
  free(d->alts);
  free(d->free_alts);
  free(d->ev);
  free(d->pool);
  free(d->touched);
  free(d->scratch_a);
  free(d->scratch_b);
  free(d->scratch_c);
  free(d->scratch_e);
  free(d->pairs);
  free(d->pair_edges);
  free(d->events);
  free(d->mark);
  free(d->dj_dist);
  free(d->dj_prev_adj);
  free(d->dj_list);
  cudaq_mwpm__corr_destroy(d->corr);
  free(d);
}

cudaq_mwpm_status_t cudaq_mwpm_decoder_create(const cudaq_mwpm_graph_t *g,
                                              cudaq_mwpm_decoder_t **out) {
  if (!g || !out)
    return CUDAQ_MWPM_ERR_INVALID_ARG;
  *out = NULL;
  cudaq_mwpm_decoder_t *d = calloc(1, sizeof *d);
  if (!d)
    return CUDAQ_MWPM_ERR_NO_MEMORY;
  d->g = g;
  d->adj = g->adj;
  d->adj_wf = g->adj_wf;
  d->n = g->num_nodes;
  size_t n = d->n ? d->n : 1;
  /* Events <= n, blossoms < events: 2n regions; the scratch lists hold at
   * most every region (or node, for the area stack). */
  d->max_regions = (int32_t)(2 * n + 2);
  size_t mr = (size_t)d->max_regions;
  size_t ms = mr > n ? mr : n;
  d->nodes = calloc(n, sizeof *d->nodes);
  d->ns = malloc((n + 1) * sizeof *d->ns);
  if (d->ns)
    d->ns++; /* ns[-1]: the boundary */
  d->regions = calloc(mr, sizeof *d->regions);
  d->free_regions = calloc(mr, sizeof *d->free_regions);
  d->alts = calloc(mr, sizeof *d->alts);
  d->free_alts = calloc(mr, sizeof *d->free_alts);
  d->ev = malloc((n + mr) * sizeof *d->ev);
  d->pool_cap = 2 * (n + mr);
  d->pool = malloc(d->pool_cap * sizeof *d->pool);
  d->touched = malloc(n * sizeof *d->touched);
  d->scratch_a = malloc(ms * 2 * sizeof *d->scratch_a);
  d->scratch_b = malloc(ms * 2 * sizeof *d->scratch_b);
  d->scratch_c = malloc(ms * 2 * sizeof *d->scratch_c);
  d->scratch_e = malloc(ms * sizeof *d->scratch_e);
  d->pairs = malloc(n * sizeof *d->pairs);
  d->pair_edges = malloc(n * sizeof *d->pair_edges);
  d->events = malloc(2 * n * sizeof *d->events);
  d->mark = calloc(n, 1);
  d->dj_dist = malloc(n * sizeof *d->dj_dist);
  d->dj_prev_adj = malloc(n * sizeof *d->dj_prev_adj);
  d->dj_list = malloc(n * sizeof *d->dj_list);
  if (!d->nodes || !d->ns || !d->regions || !d->free_regions || !d->alts || !d->free_alts ||
      !d->ev || !d->pool || !d->touched || !d->scratch_a ||
      !d->scratch_b || !d->scratch_c || !d->scratch_e || !d->pairs || !d->pair_edges ||
      !d->events || !d->mark || !d->dj_dist || !d->dj_prev_adj || !d->dj_list) {
    cudaq_mwpm_decoder_destroy(d);
    return CUDAQ_MWPM_ERR_NO_MEMORY;
  }
  if (g->has_corr || g->per_shot) {
    if (!(d->corr = cudaq_mwpm__corr_create(g))) {
      cudaq_mwpm_decoder_destroy(d);
      return CUDAQ_MWPM_ERR_NO_MEMORY;
    }
    d->adj = d->corr->adj;
    d->adj_wf = d->corr->adj_wf;
  }
  for (size_t i = 0; i < d->n; i++) {
    node_t *x = &d->nodes[i];
    x->source = x->shell_next = NONE;
    d->nodes[i].region = NONE;
  }
  for (int64_t i = -1; i < (int64_t)n; i++)
    d->ns[i] = (nstate_t){0, NONE, 0, 0};
  for (int i = 0; i < 64; i++)
    d->bucket[i] = NONE; /* then kept NONE while empty (heap_clear) */
  cudaq_mwpm__heap_clear(d);
  for (size_t i = 0; i < n + mr; i++) {
    d->ev[i].desired = NEVER;
    d->ev[i].queued = NEVER;
  }
  *out = d;
  return CUDAQ_MWPM_OK;
}

/* ------------------------------------------------------------ edges */

/* Dijkstra from a to b (or to the boundary when b < 0) on integer weights;
 * appends the path's edge indices. Uses the decoder's event heap, which is
 * idle outside decode. */
static cudaq_mwpm_status_t path_edges(cudaq_mwpm_decoder_t *d, int32_t a, int32_t b,
                                      uint32_t *out, size_t cap, size_t *n) {
  const cudaq_mwpm_graph_t *g = d->g;
  size_t nlist = 0;
  cudaq_mwpm__heap_clear(d);
  d->dj_dist[a] = 0;
  d->dj_prev_adj[a] = -1;
  d->mark[a] = 2;
  d->dj_list[nlist++] = a;
  cudaq_mwpm__heap_push(d, 0, a);
  int64_t best_boundary = NEVER;
  int32_t best_boundary_adj = -1, found = -1;
  while (d->heap_len) {
    heap_item_t it = cudaq_mwpm__heap_pop(d);
    int32_t x = it.id;
    if (it.t != d->dj_dist[x])
      continue;
    if (b < 0 && it.t >= best_boundary)
      break;
    if (x == b) {
      found = x;
      break;
    }
    weights_at(d, x);
    for (uint32_t k = g->adj_start[x]; k < g->adj_start[x + 1]; k++) {
      int32_t y = d->adj[k].to;
      int64_t nd = it.t + d->adj[k].w;
      if (y < 0) {
        if (b < 0 && nd < best_boundary) {
          best_boundary = nd;
          best_boundary_adj = (int32_t)k;
        }
        continue;
      }
      if (!d->mark[y]) {
        d->mark[y] = 2;
        d->dj_list[nlist++] = y;
        d->dj_dist[y] = NEVER;
      }
      if (nd < d->dj_dist[y]) {
        d->dj_dist[y] = nd;
        d->dj_prev_adj[y] = (int32_t)k;
        cudaq_mwpm__heap_push(d, nd, y);
      }
    }
  }
  int32_t k = b < 0 ? best_boundary_adj : -1;
  int32_t x = b < 0 ? -1 : found;
  cudaq_mwpm_status_t st = CUDAQ_MWPM_OK;
  if ((b < 0 && k < 0) || (b >= 0 && found < 0)) {
    st = CUDAQ_MWPM_ERR_NO_SOLUTION;
  } else {
    if (b < 0) {
      if (*n < cap)
        out[*n] = g->adj_edge[k];
      (*n)++;
      /* adj k belongs to the node it leaves from: find it. */
      uint32_t lo = 0, hi = g->num_nodes;
      while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if (g->adj_start[mid] <= (uint32_t)k)
          lo = mid;
        else
          hi = mid;
      }
      x = (int32_t)lo;
    }
    while (x != a) {
      int32_t pk = d->dj_prev_adj[x];
      if (*n < cap)
        out[*n] = g->adj_edge[pk];
      (*n)++;
      const cudaq_mwpm_edge_t *e = &g->edges[g->adj_edge[pk]];
      x = e->u == x ? e->v : e->u;
    }
  }
  for (size_t i = 0; i < nlist; i++)
    d->mark[d->dj_list[i]] = 0;
  cudaq_mwpm__heap_clear(d);
  return st;
}

cudaq_mwpm_status_t cudaq_mwpm_decoder_edges(cudaq_mwpm_decoder_t *d, uint32_t *edges,
                                             size_t cap, size_t *num_edges) {
  if (!d || !num_edges || (!edges && cap))
    return CUDAQ_MWPM_ERR_INVALID_ARG;
  size_t n = 0;
  const cudaq_mwpm_graph_t *g = d->g;
  for (size_t i = 0; i < d->npairs; i++) {
    cudaq_mwpm_status_t st =
        path_edges(d, d->pairs[i].a, d->pairs[i].b, edges, cap, &n);
    if (st)
      return st;
  }
  for (size_t i = 0; i < g->num_neg_edges; i++) {
    if (n < cap)
      edges[n] = g->neg_edges[i];
    n++;
  }
  *num_edges = n;
  return n > cap ? CUDAQ_MWPM_ERR_TOO_LARGE : CUDAQ_MWPM_OK;
}

cudaq_mwpm__corr_t *cudaq_mwpm__decoder_corr(cudaq_mwpm_decoder_t *d) { return d->corr; }

const cudaq_mwpm_graph_t *cudaq_mwpm__decoder_graph(const cudaq_mwpm_decoder_t *d) { return d->g; }

cudaq_mwpm_status_t cudaq_mwpm__decoder_path(cudaq_mwpm_decoder_t *d, int32_t a, int32_t b,
                                             uint32_t *out, size_t cap, size_t *n) {
  return path_edges(d, a, b, out, cap, n);
}

uint64_t cudaq_mwpm__parity_violations(const cudaq_mwpm_decoder_t *d) {
  return d ? d->parity_violations : 0;
}

const cudaq_mwpm_graph_t *cudaq_mwpm_decoder_graph(const cudaq_mwpm_decoder_t *d) {
  return d ? d->g : NULL;
}

