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

#include "mwpm_internal.h"

#define NEVER INT64_MAX
#define NONE (-1)
#define BOUNDARY_REGION (-2)

typedef struct cedge {  /* a path between two detection events (b = -1: boundary) */
  int32_t a, b;
  uint64_t obs;
  double wf;
} cedge_t;

/* Per node, outside node_t because the inner loops read them: top (4
 * bytes, so that the whole array stays in the first-level cache) is the
 * top-level region owning the node, or NONE; the node's local radius (how
 * far its region reaches past it) is radius(top) + lrb, where lrb = (sum of
 * the frozen radii of the blossoms between its region and top) - (radius of
 * its region on arrival). */
typedef struct node {
  int32_t region;     /* innermost owning region, or NONE */
  int32_t source;     /* detection event this node was reached from */
  int32_t shell_next; /* next older node in region's shell (stack) */
  double distf;       /* length of the tracked path from source */
  uint64_t obs;       /* observables along the tracked path from source */
  uint8_t touched;
  uint8_t is_event;
} node_t;

typedef struct region {
  int64_t y0;         /* radius(t) = y0 + slope * t */
  int32_t slope;      /* +1 growing, 0 frozen, -1 shrinking */
  int32_t parent;     /* blossom containing this region, or NONE */
  int32_t alt;        /* alternating-tree node, or NONE */
  int32_t shell;      /* newest node of the shell, or NONE */
  int32_t child;      /* blossom: one child of the cycle, or NONE */
  int32_t next;       /* as a child: next child around the cycle */
  int32_t source;     /* trivial region: its detection event; blossom: NONE */
  int32_t match;      /* matched region, BOUNDARY_REGION, or NONE */
  uint32_t stamp;
  cedge_t to_next;    /* as a child: edge to next */
  cedge_t match_edge; /* from this region to match */
} region_t;

typedef struct altnode {
  int32_t inner, outer;   /* root: inner = NONE */
  int32_t parent;         /* NONE for a root */
  int32_t first_child, next_sib, prev_sib;
  uint32_t stamp;
  cedge_t inner_to_outer; /* inner -> outer */
  cedge_t parent_edge;    /* inner -> parent's outer */
} altnode_t;

typedef struct heap_item {
  int64_t t;
  int32_t id;
  int32_t next;
} heap_item_t;

typedef struct mev {       /* an event for the matcher */
  int kind;
  int32_t r1, r2;
  cedge_t e;
} mev_t;

enum { EV_NONE, EV_HIT_REGION, EV_HIT_BOUNDARY, EV_SHATTER, EV_IMPLODE };

struct cudaq_mwpm_decoder {
  const cudaq_mwpm_graph_t *g;
  const cudaq_mwpm__adj_t *adj; /* the graph's weights, or corr's copy */
  const double *adj_wf;
  cudaq_mwpm__corr_t *corr;     /* correlated matching state, or NULL */
  uint32_t n;
  node_t *nodes;
  int32_t *top;
  int64_t *lrb;
  region_t *regions;
  int32_t nregions, *free_regions, nfree_regions;
  altnode_t *alts;
  int32_t nalts, *free_alts, nfree_alts;
  int64_t *ev_desired, *ev_queued; /* per id: nodes, then regions */
  heap_item_t *pool;      /* radix heap entries */
  size_t pool_cap, pool_used;
  int32_t pool_free;
  int32_t bucket[64];
  uint64_t bucket_mask;
  int64_t heap_last;
  size_t heap_len;
  int64_t now;
  uint32_t stamp;
  int32_t *touched;
  size_t ntouched;
  int32_t *scratch_a, *scratch_b, *scratch_c; /* region/alt lists, max_regions each */
  cedge_t *scratch_e;
  int32_t max_regions;
  cudaq_mwpm_pair_t *pairs;
  cedge_t *pair_edges;
  size_t npairs;
  uint64_t obs;
  double weight;
  uint32_t *events;       /* deduplicated event list of the current shot */
  size_t nevents;
  uint8_t *mark;          /* per node, for deduplication */
  uint64_t parity_violations;
  int oom;                /* the heap could not grow */
  /* Dijkstra scratch for cudaq_mwpm_decoder_edges. */
  int64_t *dj_dist;
  int32_t *dj_prev_adj;
  int32_t *dj_list;
};

/* ------------------------------------------------------------ utilities */

static inline cedge_t rev(cedge_t e) {
  int32_t t = e.a;
  e.a = e.b;
  e.b = t;
  return e;
}

static inline int64_t radius(const region_t *r, int64_t t) { return r->y0 + r->slope * t; }

static inline int64_t local_radius(const cudaq_mwpm_decoder_t *d, int32_t x) {
  return radius(&d->regions[d->top[x]], d->now) + d->lrb[x];
}

/* ------------------------------------------------------------ event heap */

/* A radix heap: keys never go below the last key popped (event times only
 * move forward), so an entry sits in the bucket of the highest bit in which
 * its key differs from that last key; popping redistributes one bucket into
 * lower ones. Entries live in one pool, linked by index, reused through a
 * free list: the pool grows (doubling) only during warm-up. */
static void heap_clear(cudaq_mwpm_decoder_t *d) {
  for (int i = 0; i < 64; i++)
    d->bucket[i] = NONE;
  d->bucket_mask = 0;
  d->heap_last = 0;
  d->heap_len = 0;
  d->pool_used = 0;
  d->pool_free = NONE;
}

static inline int bucket_of(int64_t t, int64_t last) {
  uint64_t x = (uint64_t)(t ^ last);
  return x ? 64 - __builtin_clzll(x) : 0;
}

static int heap_push(cudaq_mwpm_decoder_t *d, int64_t t, int32_t id) {
  int32_t e;
  if (d->pool_free != NONE) {
    e = d->pool_free;
    d->pool_free = d->pool[e].next;
  } else {
    if (d->pool_used == d->pool_cap) {
      size_t ncap = d->pool_cap * 2;
      heap_item_t *p = realloc(d->pool, ncap * sizeof *p);
      if (!p)
        return -1;
      d->pool = p;
      d->pool_cap = ncap;
    }
    e = (int32_t)d->pool_used++;
  }
  int b = bucket_of(t, d->heap_last);
  heap_item_t *it = &d->pool[e];
  it->t = t;
  it->id = id;
  it->next = d->bucket[b];
  d->bucket[b] = e;
  d->bucket_mask |= 1ull << b;
  d->heap_len++;
  return 0;
}

static heap_item_t heap_pop(cudaq_mwpm_decoder_t *d) {
  if (d->bucket[0] == NONE) {
    int b = __builtin_ctzll(d->bucket_mask);
    int32_t e = d->bucket[b];
    int64_t m = d->pool[e].t;
    for (int32_t f = d->pool[e].next; f != NONE; f = d->pool[f].next)
      if (d->pool[f].t < m)
        m = d->pool[f].t;
    d->heap_last = m;
    d->bucket[b] = NONE;
    d->bucket_mask &= ~(1ull << b);
    while (e != NONE) {
      int32_t nx = d->pool[e].next;
      int nb = bucket_of(d->pool[e].t, m);
      d->pool[e].next = d->bucket[nb];
      d->bucket[nb] = e;
      d->bucket_mask |= 1ull << nb;
      e = nx;
    }
  }
  int32_t e = d->bucket[0];
  heap_item_t out = d->pool[e];
  d->bucket[0] = out.next;
  if (out.next == NONE)
    d->bucket_mask &= ~1ull;
  d->pool[e].next = d->pool_free;
  d->pool_free = e;
  d->heap_len--;
  return out;
}

/* Asks for entity id to be looked at at time t (NEVER: not at all). At most
 * one live heap entry per entity: a later desired time keeps the earlier
 * entry, which re-queues itself when it comes out. */
static inline void q_set(cudaq_mwpm_decoder_t *d, int32_t id, int64_t t) {
  d->ev_desired[id] = t;
  if (t != NEVER && d->ev_queued[id] > t) {
    if (heap_push(d, t, id))
      d->oom = 1;
    d->ev_queued[id] = t;
  }
}

/* ------------------------------------------------------------ flooder */

static void touch(cudaq_mwpm_decoder_t *d, int32_t x) {
  if (!d->nodes[x].touched) {
    d->nodes[x].touched = 1;
    d->touched[d->ntouched++] = x;
  }
}

/* Time at which a growing/frozen region at node x next interacts along one
 * edge. Parity note: with even weights, every vertex of a growing or
 * shrinking region has a total dual of the parity of `now`, so a gap between
 * two growing regions is even. */
static inline int64_t edge_time(cudaq_mwpm_decoder_t *d, int32_t top_x, int32_t slope_x,
                                int64_t lrx, int32_t to, int64_t w) {
  if (to < 0 || d->top[to] < 0) {
    if (slope_x > 0) {
      int64_t gap = w - lrx;
      return d->now + (gap > 0 ? gap : 0);
    }
    return NEVER;
  }
  int32_t top_y = d->top[to];
  if (top_y == top_x)
    return NEVER;
  const region_t *ry = &d->regions[top_y];
  int32_t rate = slope_x + ry->slope;
  if (rate <= 0)
    return NEVER;
  int64_t gap = w - lrx - (radius(ry, d->now) + d->lrb[to]);
  if (gap <= 0)
    return d->now;
  if (rate == 2) {
    if (gap & 1)
      d->parity_violations++;
    return d->now + gap / 2;
  }
  return d->now + gap;
}

static int64_t node_next_time(cudaq_mwpm_decoder_t *d, int32_t x) {
  int32_t top = d->top[x];
  if (top < 0)
    return NEVER;
  int32_t slope = d->regions[top].slope;
  if (slope < 0)
    return NEVER;
  const cudaq_mwpm_graph_t *g = d->g;
  int64_t lrx = local_radius(d, x);
  int64_t best = NEVER;
  for (uint32_t k = g->adj_start[x], e = g->adj_start[x + 1]; k < e; k++) {
    int64_t t = edge_time(d, top, slope, lrx, d->adj[k].to, d->adj[k].w);
    if (t < best)
      best = t;
  }
  return best;
}

static inline void requeue_node(cudaq_mwpm_decoder_t *d, int32_t x) {
  q_set(d, x, node_next_time(d, x));
}

/* Region `r` (top, growing) takes unowned node y through node x's edge k. */
static void claim(cudaq_mwpm_decoder_t *d, int32_t x, uint32_t k, int32_t y) {
  const cudaq_mwpm_graph_t *g = d->g;
  node_t *nx = &d->nodes[x], *ny = &d->nodes[y];
  int32_t r = d->top[x];
  region_t *R = &d->regions[r];
  touch(d, y);
  d->nodes[y].region = r;
  d->top[y] = r;
  d->lrb[y] = -radius(R, d->now);
  ny->source = nx->source;
  ny->distf = nx->distf + d->adj_wf[k];
  ny->obs = nx->obs ^ g->adj_obs[k];
  ny->shell_next = R->shell;
  R->shell = y;
}

/* Processes node x at time now. Returns 1 with *ev set when a collision is
 * due (x is then looked at again at the same time). */
static int process_node(cudaq_mwpm_decoder_t *d, int32_t x, mev_t *ev) {
  const cudaq_mwpm_graph_t *g = d->g;
  int32_t top = d->top[x];
  if (top < 0)
    return 0;
  int32_t slope = d->regions[top].slope;
  if (slope < 0)
    return 0;
  int64_t lrx = local_radius(d, x);
  int64_t best = NEVER;
  for (uint32_t k = g->adj_start[x], e = g->adj_start[x + 1]; k < e; k++) {
    int32_t to = d->adj[k].to;
    int64_t t = edge_time(d, top, slope, lrx, to, d->adj[k].w);
    if (t > d->now) {
      if (t < best)
        best = t;
      continue;
    }
    if (t == NEVER)
      continue;
    if (to >= 0 && d->top[to] < 0) {
      claim(d, x, k, to);
      requeue_node(d, to);
      continue;
    }
    /* A collision: build the path between the two detection events. */
    const node_t *nx = &d->nodes[x];
    ev->e.a = nx->source;
    ev->e.obs = nx->obs ^ g->adj_obs[k];
    ev->e.wf = nx->distf + d->adj_wf[k];
    ev->r1 = top;
    if (to < 0) {
      ev->kind = EV_HIT_BOUNDARY;
      ev->e.b = NONE;
      ev->r2 = BOUNDARY_REGION;
    } else {
      const node_t *ny = &d->nodes[to];
      ev->kind = EV_HIT_REGION;
      ev->e.b = ny->source;
      ev->e.obs ^= ny->obs;
      ev->e.wf += ny->distf;
      ev->r2 = d->top[to];
    }
    q_set(d, x, d->now);
    return 1;
  }
  q_set(d, x, best);
  return 0;
}

static inline int32_t rid(const cudaq_mwpm_decoder_t *d, int32_t r) { return (int32_t)d->n + r; }

/* Schedules the next shrink step of a shrinking top region. */
static void schedule_shrink(cudaq_mwpm_decoder_t *d, int32_t r) {
  region_t *R = &d->regions[r];
  int64_t y = radius(R, d->now);
  int64_t t;
  if (R->shell != NONE && R->shell != R->source)
    t = d->now + (y + d->lrb[R->shell]);
  else
    t = d->now + y;
  if (t < d->now)
    t = d->now;
  q_set(d, rid(d, r), t);
}

/* A shrinking region gives up its newest node, or reports that it reached
 * radius zero. */
static int process_region(cudaq_mwpm_decoder_t *d, int32_t r, mev_t *ev) {
  region_t *R = &d->regions[r];
  if (R->parent != NONE || R->slope >= 0)
    return 0;
  if (R->shell != NONE && R->shell != R->source) {
    int32_t v = R->shell;
    node_t *nv = &d->nodes[v];
    R->shell = nv->shell_next;
    d->nodes[v].region = NONE;
    d->top[v] = NONE;
    nv->shell_next = NONE;
    const cudaq_mwpm_graph_t *g = d->g;
    for (uint32_t k = g->adj_start[v], e = g->adj_start[v + 1]; k < e; k++) {
      int32_t to = d->adj[k].to;
      if (to >= 0 && d->top[to] >= 0)
        requeue_node(d, to);
    }
    schedule_shrink(d, r);
    return 0;
  }
  ev->kind = R->source == NONE ? EV_SHATTER : EV_IMPLODE;
  ev->r1 = r;
  return 1;
}

/* ------------------------------------------------------------ regions */

static int32_t new_region(cudaq_mwpm_decoder_t *d) {
  int32_t r = d->nfree_regions ? d->free_regions[--d->nfree_regions] : d->nregions++;
  region_t *R = &d->regions[r];
  /* Every field is set here or before it is read (edges: when matched or
   * linked into a cycle). */
  R->y0 = 0;
  R->slope = 0;
  R->stamp = 0;
  R->parent = R->alt = R->shell = R->child = R->next = R->source = R->match = NONE;
  d->ev_desired[rid(d, r)] = NEVER;
  d->ev_queued[rid(d, r)] = NEVER;
  return r;
}

static int32_t new_alt(cudaq_mwpm_decoder_t *d) {
  int32_t a = d->nfree_alts ? d->free_alts[--d->nfree_alts] : d->nalts++;
  altnode_t *A = &d->alts[a];
  memset(A, 0, sizeof *A);
  A->inner = A->outer = A->parent = A->first_child = A->next_sib = A->prev_sib = NONE;
  return a;
}

static void free_alt(cudaq_mwpm_decoder_t *d, int32_t a) { d->free_alts[d->nfree_alts++] = a; }

static void set_slope(cudaq_mwpm_decoder_t *d, int32_t r, int32_t slope) {
  region_t *R = &d->regions[r];
  int64_t y = radius(R, d->now);
  R->slope = slope;
  R->y0 = y - (int64_t)slope * d->now;
}

/* Applies f to every node in the total area of region r (its own shell and
 * those of all its descendants). */
#define FOR_AREA_BEGIN(d, r0, xvar)                                                      \
  {                                                                                      \
    int32_t *stk_ = (d)->scratch_c;                                                      \
    int32_t nstk_ = 0;                                                                   \
    stk_[nstk_++] = (r0);                                                                \
    while (nstk_) {                                                                      \
      int32_t rr_ = stk_[--nstk_];                                                       \
      region_t *RR_ = &(d)->regions[rr_];                                                \
      if (RR_->child != NONE) {                                                          \
        int32_t c_ = RR_->child;                                                         \
        do {                                                                             \
          stk_[nstk_++] = c_;                                                            \
          c_ = (d)->regions[c_].next;                                                    \
        } while (c_ != RR_->child);                                                      \
      }                                                                                  \
      for (int32_t xvar = RR_->shell; xvar != NONE; xvar = (d)->nodes[xvar].shell_next) {
#define FOR_AREA_END \
  }                  \
  }                  \
  }

/* After a region's growth or top-level status changed: re-plan its nodes
 * and, when it shrinks, its shrink step. Nodes need no re-planning when the
 * region shrinks (they cannot collide) or when it stopped growing
 * (`was_growing`): every pending collision time near it can then only move
 * later, and the events already queued are re-examined when they fire. */
static void replan_region(cudaq_mwpm_decoder_t *d, int32_t r, int was_growing) {
  const region_t *R = &d->regions[r];
  if (R->slope < 0 && R->parent == NONE) {
    schedule_shrink(d, r);
    return;
  }
  d->ev_desired[rid(d, r)] = NEVER;
  if (R->slope == 0 && was_growing)
    return;
  FOR_AREA_BEGIN(d, r, x)
  requeue_node(d, x);
  FOR_AREA_END
}

/* The child of blossom b (a direct child) whose area holds source node s. */
static int32_t child_holding(const cudaq_mwpm_decoder_t *d, int32_t b, int32_t s) {
  int32_t r = d->nodes[s].region;
  while (d->regions[r].parent != b)
    r = d->regions[r].parent;
  return r;
}

/* ------------------------------------------------------------ alt trees */

static void alt_add_child(cudaq_mwpm_decoder_t *d, int32_t p, int32_t c) {
  altnode_t *P = &d->alts[p], *C = &d->alts[c];
  C->parent = p;
  C->prev_sib = NONE;
  C->next_sib = P->first_child;
  if (P->first_child != NONE)
    d->alts[P->first_child].prev_sib = c;
  P->first_child = c;
}

static void alt_unlink(cudaq_mwpm_decoder_t *d, int32_t c) {
  altnode_t *C = &d->alts[c];
  if (C->parent == NONE)
    return;
  if (C->prev_sib != NONE)
    d->alts[C->prev_sib].next_sib = C->next_sib;
  else
    d->alts[C->parent].first_child = C->next_sib;
  if (C->next_sib != NONE)
    d->alts[C->next_sib].prev_sib = C->prev_sib;
  C->parent = C->prev_sib = C->next_sib = NONE;
}

static void match_regions(cudaq_mwpm_decoder_t *d, int32_t a, int32_t b, cedge_t e) {
  d->regions[a].match = b;
  d->regions[a].match_edge = e;
  if (b >= 0) {
    d->regions[b].match = a;
    d->regions[b].match_edge = rev(e);
  }
}

static int32_t alt_root(const cudaq_mwpm_decoder_t *d, int32_t a) {
  while (d->alts[a].parent != NONE)
    a = d->alts[a].parent;
  return a;
}

/* Outer region r of a tree is matched to `partner` (a region, or
 * BOUNDARY_REGION) through e; the tree dissolves into matched pairs along
 * the augmenting path and the inner-outer pairs elsewhere. */
static void augment_tree(cudaq_mwpm_decoder_t *d, int32_t r, int32_t partner, cedge_t e) {
  int32_t start = d->regions[r].alt;
  if (d->alts[start].parent == NONE && d->alts[start].first_child == NONE) {
    /* A lone root (the common case at low noise). */
    match_regions(d, r, partner, e);
    d->regions[r].alt = NONE;
    set_slope(d, r, 0);
    replan_region(d, r, 1);
    free_alt(d, start);
    return;
  }
  int32_t root = alt_root(d, start);
  /* Every inner-outer pair of the tree. */
  int32_t *list = d->scratch_a, nlist = 0;
  int32_t *stk = d->scratch_b, nstk = 0;
  stk[nstk++] = root;
  while (nstk) {
    int32_t a = stk[--nstk];
    list[nlist++] = a;
    for (int32_t c = d->alts[a].first_child; c != NONE; c = d->alts[c].next_sib)
      stk[nstk++] = c;
    altnode_t *A = &d->alts[a];
    if (A->inner != NONE)
      match_regions(d, A->inner, A->outer, A->inner_to_outer);
  }
  /* The augmenting path from r to the root. */
  match_regions(d, r, partner, e);
  for (int32_t a = start; d->alts[a].parent != NONE; a = d->alts[a].parent) {
    altnode_t *A = &d->alts[a];
    match_regions(d, A->inner, d->alts[A->parent].outer, A->parent_edge);
  }
  for (int32_t i = 0; i < nlist; i++) {
    altnode_t *A = &d->alts[list[i]];
    int32_t regs[2] = {A->inner, A->outer};
    for (int j = 0; j < 2; j++) {
      if (regs[j] == NONE)
        continue;
      d->regions[regs[j]].alt = NONE;
      set_slope(d, regs[j], 0);
    }
  }
  for (int32_t i = 0; i < nlist; i++) {
    altnode_t *A = &d->alts[list[i]];
    if (A->inner != NONE)
      replan_region(d, A->inner, 0);
    replan_region(d, A->outer, 1);
    free_alt(d, list[i]);
  }
}

/* Outer regions r1 and r2 of the same tree touch through e (r1 -> r2):
 * the odd cycle through their common ancestor becomes a blossom. */
static void form_blossom(cudaq_mwpm_decoder_t *d, int32_t r1, int32_t r2, cedge_t e) {
  int32_t a1 = d->regions[r1].alt, a2 = d->regions[r2].alt;
  uint32_t s = ++d->stamp;
  for (int32_t a = a1; a != NONE; a = d->alts[a].parent)
    d->alts[a].stamp = s;
  int32_t lca = a2;
  while (d->alts[lca].stamp != s)
    lca = d->alts[lca].parent;
  /* path1: a1 up to (excluding) lca; path2: a2 up to (excluding) lca. */
  int32_t *p1 = d->scratch_a, n1 = 0;
  for (int32_t a = a1; a != lca; a = d->alts[a].parent)
    p1[n1++] = a;
  int32_t *p2 = d->scratch_b, n2 = 0;
  for (int32_t a = a2; a != lca; a = d->alts[a].parent)
    p2[n2++] = a;
  /* Cycle regions and edges to the next one, starting at lca's outer. */
  int32_t *cyc = d->scratch_c;
  cedge_t *ce = d->scratch_e;
  int32_t k = 0;
  cyc[k] = d->alts[lca].outer;
  for (int32_t i = n1 - 1; i >= 0; i--) {
    altnode_t *A = &d->alts[p1[i]];
    ce[k++] = rev(A->parent_edge);
    cyc[k] = A->inner;
    ce[k++] = A->inner_to_outer;
    cyc[k] = A->outer;
  }
  ce[k++] = e;
  for (int32_t i = 0; i < n2; i++) {
    altnode_t *A = &d->alts[p2[i]];
    cyc[k] = A->outer;
    ce[k++] = rev(A->inner_to_outer);
    cyc[k] = A->inner;
    ce[k++] = A->parent_edge;
  }
  /* cyc[0..k-1] are the k regions; ce[i] goes from cyc[i] to cyc[(i+1)%k]. */
  int32_t b = new_region(d);
  region_t *B = &d->regions[b];
  B->slope = 1;
  B->y0 = -d->now;
  B->alt = lca;
  for (int32_t i = 0; i < k; i++) {
    int32_t c = cyc[i];
    region_t *C = &d->regions[c];
    int64_t y = radius(C, d->now);
    C->y0 = y;
    C->slope = 0;
    C->parent = b;
    C->alt = NONE;
    C->next = cyc[(i + 1) % k];
    C->to_next = ce[i];
    d->ev_desired[rid(d, c)] = NEVER;
  }
  B->child = cyc[0];
  /* Off-path subtrees move to lca; path nodes are freed. */
  for (int pass = 0; pass < 2; pass++) {
    int32_t *p = pass ? p2 : p1, np = pass ? n2 : n1;
    for (int32_t i = 0; i < np; i++)
      alt_unlink(d, p[i]);
    for (int32_t i = 0; i < np; i++) {
      altnode_t *A = &d->alts[p[i]];
      while (A->first_child != NONE) {
        int32_t c = A->first_child;
        alt_unlink(d, c);
        alt_add_child(d, lca, c);
      }
      free_alt(d, p[i]);
    }
  }
  d->alts[lca].outer = b;
  /* Nodes: new top, wrapped radius grows by the child's (now frozen) radius. */
  int32_t c = d->regions[b].child;
  do {
    int64_t y = d->regions[c].y0;
    FOR_AREA_BEGIN(d, c, x)
    d->top[x] = b;
    d->lrb[x] += y;
    FOR_AREA_END
    c = d->regions[c].next;
  } while (c != d->regions[b].child);
  replan_region(d, b, 0);
}

/* Region r (not in a tree, matched to another region) is hit by outer
 * region o through e (o -> r): r joins o's tree as inner, its partner as
 * outer. */
static void add_pair_to_tree(cudaq_mwpm_decoder_t *d, int32_t o, int32_t r, cedge_t e) {
  int32_t m = d->regions[r].match;
  int32_t a = new_alt(d);
  altnode_t *A = &d->alts[a];
  A->inner = r;
  A->outer = m;
  A->inner_to_outer = d->regions[r].match_edge;
  A->parent_edge = rev(e);
  alt_add_child(d, d->regions[o].alt, a);
  d->regions[r].alt = a;
  d->regions[m].alt = a;
  d->regions[r].match = NONE;
  d->regions[m].match = NONE;
  set_slope(d, r, -1);
  set_slope(d, m, 1);
  replan_region(d, r, 0);
  replan_region(d, m, 0);
}

static void handle_hit_region(cudaq_mwpm_decoder_t *d, int32_t r1, int32_t r2, cedge_t e) {
  if (d->regions[r1].alt == NONE) {
    int32_t t = r1;
    r1 = r2;
    r2 = t;
    e = rev(e);
  }
  if (d->regions[r1].alt == NONE)
    return; /* stale: neither is in a tree */
  if (d->regions[r2].alt != NONE) {
    if (alt_root(d, d->regions[r1].alt) == alt_root(d, d->regions[r2].alt)) {
      form_blossom(d, r1, r2, e);
    } else {
      augment_tree(d, r1, r2, e);
      augment_tree(d, r2, r1, rev(e));
    }
    return;
  }
  if (d->regions[r2].match == BOUNDARY_REGION) {
    augment_tree(d, r1, r2, e);
    return;
  }
  add_pair_to_tree(d, r1, r2, e);
}

/* Inner blossom b reached radius zero: it shatters; the even path of its
 * cycle between the parent and child connections stays in the tree, the
 * rest is matched in pairs. */
static void shatter(cudaq_mwpm_decoder_t *d, int32_t b) {
  region_t *B = &d->regions[b];
  int32_t n = B->alt;
  altnode_t *N = &d->alts[n];
  cedge_t pe = N->parent_edge, oe = N->inner_to_outer;
  int32_t cp = child_holding(d, b, pe.a), co = child_holding(d, b, oe.a);
  int32_t *cyc = d->scratch_a;
  cedge_t *ce = d->scratch_e;
  int32_t k = 0, ip = 0, io = 0;
  int32_t c = B->child;
  do {
    if (c == cp)
      ip = k;
    if (c == co)
      io = k;
    ce[k] = d->regions[c].to_next;
    cyc[k++] = c;
    c = d->regions[c].next;
  } while (c != B->child);
  /* Release the children. */
  for (int32_t i = 0; i < k; i++) {
    region_t *C = &d->regions[cyc[i]];
    C->parent = NONE;
    C->next = NONE;
    int64_t y = C->y0;
    int32_t ci = cyc[i];
    FOR_AREA_BEGIN(d, ci, x)
    d->top[x] = ci;
    d->lrb[x] -= y;
    FOR_AREA_END
  }
  int32_t fwd = ((io - ip) % k + k) % k;
  int32_t dir = (fwd % 2 == 0) ? 1 : -1;
  int32_t len = dir > 0 ? fwd : k - fwd; /* even */
  /* Edge from cyc[i] to its neighbour in direction dir. */
#define STEP_EDGE(i) (dir > 0 ? ce[(i)] : rev(ce[((i) - 1 + k) % k]))
#define IDX(i) ((((i) % k) + k) % k)
  int32_t parent_alt = N->parent;
  alt_unlink(d, n);
  int32_t prev_alt = parent_alt;
  cedge_t prev_edge = pe;
  for (int32_t j = 0; j < len; j += 2) {
    int32_t i0 = IDX(ip + dir * j), i1 = IDX(ip + dir * (j + 1));
    int32_t a = new_alt(d);
    altnode_t *A = &d->alts[a];
    A->inner = cyc[i0];
    A->outer = cyc[i1];
    A->inner_to_outer = STEP_EDGE(i0);
    A->parent_edge = prev_edge;
    alt_add_child(d, prev_alt, a);
    d->regions[cyc[i0]].alt = a;
    d->regions[cyc[i1]].alt = a;
    set_slope(d, cyc[i0], -1);
    set_slope(d, cyc[i1], 1);
    prev_alt = a;
    /* next inner (at j + 2) connects back to cyc[i1]. */
    prev_edge = rev(STEP_EDGE(i1));
  }
  /* n now holds the child that connects to the old outer partner. */
  N = &d->alts[n];
  N->inner = co;
  N->parent_edge = prev_edge;
  alt_add_child(d, prev_alt, n);
  d->regions[co].alt = n;
  set_slope(d, co, -1);
  /* The other arc, after io, is matched in pairs. */
  for (int32_t j = 1; j < k - len; j += 2) {
    int32_t i0 = IDX(io + dir * j), i1 = IDX(io + dir * (j + 1));
    match_regions(d, cyc[i0], cyc[i1], STEP_EDGE(i0));
    d->regions[cyc[i0]].alt = NONE;
    d->regions[cyc[i1]].alt = NONE;
  }
#undef STEP_EDGE
#undef IDX
  d->ev_desired[rid(d, b)] = NEVER;
  d->free_regions[d->nfree_regions++] = b;
  for (int32_t i = 0; i < k; i++)
    replan_region(d, cyc[i], 0);
}

/* A trivial inner region reached radius zero: its tree parent and child
 * (both outer) now touch through its detection event. */
static void implode(cudaq_mwpm_decoder_t *d, int32_t r) {
  altnode_t *N = &d->alts[d->regions[r].alt];
  int32_t p = d->alts[N->parent].outer, c = N->outer;
  cedge_t e;
  e.a = N->inner_to_outer.b;
  e.b = N->parent_edge.b;
  e.obs = N->inner_to_outer.obs ^ N->parent_edge.obs;
  e.wf = N->inner_to_outer.wf + N->parent_edge.wf;
  form_blossom(d, c, p, e);
}

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

static void collect(cudaq_mwpm_decoder_t *d) {
  uint32_t s = ++d->stamp;
  for (size_t i = 0; i < d->nevents; i++) {
    int32_t r = d->top[d->events[i]];
    region_t *R = &d->regions[r];
    if (R->stamp == s)
      continue;
    R->stamp = s;
    cedge_t e = R->match_edge;
    if (R->match == BOUNDARY_REGION) {
      record(d, e);
      resolve(d, r, e.a);
    } else {
      d->regions[R->match].stamp = s;
      record(d, e);
      resolve(d, r, e.a);
      resolve(d, R->match, e.b);
    }
  }
}

/* ------------------------------------------------------------ decode */

static void reset(cudaq_mwpm_decoder_t *d) {
  for (size_t i = 0; i < d->ntouched; i++) {
    int32_t x = d->touched[i];
    node_t *nx = &d->nodes[x];
    d->nodes[x].region = d->top[x] = NONE;
    nx->source = nx->shell_next = NONE;
    nx->touched = 0;
    nx->is_event = 0;
    d->ev_desired[x] = NEVER;
    d->ev_queued[x] = NEVER;
  }
  d->ntouched = 0;
  d->nregions = 0;
  d->nfree_regions = 0;
  d->nalts = 0;
  d->nfree_alts = 0;
  heap_clear(d);
  d->now = 0;
}

static cudaq_mwpm_status_t run(cudaq_mwpm_decoder_t *d) {
  d->obs = 0;
  d->weight = 0;
  d->npairs = 0;
  d->oom = 0;
  /* One trivial region and one tree per event. */
  for (size_t i = 0; i < d->nevents; i++) {
    int32_t s = (int32_t)d->events[i];
    int32_t r = new_region(d);
    region_t *R = &d->regions[r];
    R->slope = 1;
    R->source = s;
    R->shell = s;
    int32_t a = new_alt(d);
    d->alts[a].outer = r;
    R->alt = a;
    node_t *ns = &d->nodes[s];
    touch(d, s);
    d->nodes[s].region = d->top[s] = r;
    d->lrb[s] = 0;
    ns->source = s;
    ns->shell_next = NONE;
    ns->distf = 0;
    ns->obs = 0;
  }
  for (size_t i = 0; i < d->nevents; i++)
    requeue_node(d, (int32_t)d->events[i]);
  mev_t ev;
  while (d->heap_len) {
    heap_item_t it = heap_pop(d);
    int32_t id = it.id;
    if (d->ev_queued[id] != it.t)
      continue; /* superseded entry */
    d->ev_queued[id] = NEVER;
    int64_t want = d->ev_desired[id];
    if (want != it.t) {
      if (want != NEVER && want > it.t) {
        if (heap_push(d, want, id))
          d->oom = 1;
        d->ev_queued[id] = want;
      }
      continue;
    }
    d->ev_desired[id] = NEVER;
    d->now = it.t;
    int got = id < (int32_t)d->n ? process_node(d, id, &ev)
                                  : process_region(d, id - (int32_t)d->n, &ev);
    if (!got)
      continue;
    switch (ev.kind) {
    case EV_HIT_REGION:
      handle_hit_region(d, ev.r1, ev.r2, ev.e);
      break;
    case EV_HIT_BOUNDARY:
      if (d->regions[ev.r1].alt != NONE)
        augment_tree(d, ev.r1, BOUNDARY_REGION, ev.e);
      break;
    case EV_SHATTER:
      shatter(d, ev.r1);
      break;
    case EV_IMPLODE:
      implode(d, ev.r1);
      break;
    }
    if (d->oom)
      break;
  }
  if (d->oom)
    return CUDAQ_MWPM_ERR_NO_MEMORY;
  for (size_t i = 0; i < d->nevents; i++) {
    const region_t *R = &d->regions[d->top[d->events[i]]];
    if (R->match == NONE)
      return CUDAQ_MWPM_ERR_NO_SOLUTION;
  }
  collect(d);
  return CUDAQ_MWPM_OK;
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
  cudaq_mwpm_status_t st = run(d);
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
  for (size_t i = 0; i < num_events; i++)
    if (events[i] >= d->n)
      return CUDAQ_MWPM_ERR_OUT_OF_RANGE;
  /* Toggle marks: an event listed twice cancels. */
  for (size_t i = 0; i < num_events; i++)
    d->mark[events[i]] ^= 1;
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
  free(d->top);
  free(d->lrb);
  free(d->regions);
  free(d->free_regions);
  free(d->alts);
  free(d->free_alts);
  free(d->ev_desired);
  free(d->ev_queued);
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
  d->top = calloc(n, sizeof *d->top);
  d->lrb = calloc(n, sizeof *d->lrb);
  d->regions = calloc(mr, sizeof *d->regions);
  d->free_regions = calloc(mr, sizeof *d->free_regions);
  d->alts = calloc(mr, sizeof *d->alts);
  d->free_alts = calloc(mr, sizeof *d->free_alts);
  d->ev_desired = malloc((n + mr) * sizeof *d->ev_desired);
  d->ev_queued = malloc((n + mr) * sizeof *d->ev_queued);
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
  if (!d->nodes || !d->top || !d->lrb || !d->regions || !d->free_regions || !d->alts || !d->free_alts ||
      !d->ev_desired || !d->ev_queued || !d->pool || !d->touched || !d->scratch_a ||
      !d->scratch_b || !d->scratch_c || !d->scratch_e || !d->pairs || !d->pair_edges ||
      !d->events || !d->mark || !d->dj_dist || !d->dj_prev_adj || !d->dj_list) {
    cudaq_mwpm_decoder_destroy(d);
    return CUDAQ_MWPM_ERR_NO_MEMORY;
  }
  if (g->has_corr) {
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
    d->nodes[i].region = d->top[i] = NONE;
  }
  heap_clear(d);
  for (size_t i = 0; i < n + mr; i++) {
    d->ev_desired[i] = NEVER;
    d->ev_queued[i] = NEVER;
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
  heap_clear(d);
  d->dj_dist[a] = 0;
  d->dj_prev_adj[a] = -1;
  d->mark[a] = 2;
  d->dj_list[nlist++] = a;
  heap_push(d, 0, a);
  int64_t best_boundary = NEVER;
  int32_t best_boundary_adj = -1, found = -1;
  while (d->heap_len) {
    heap_item_t it = heap_pop(d);
    int32_t x = it.id;
    if (it.t != d->dj_dist[x])
      continue;
    if (b < 0 && it.t >= best_boundary)
      break;
    if (x == b) {
      found = x;
      break;
    }
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
        heap_push(d, nd, y);
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
  heap_clear(d);
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
