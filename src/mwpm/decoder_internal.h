/* Internal declarations of the sparse-blossom decoder, shared by its files:
 *   decoder.c      the public decode calls, results, create/destroy, paths
 *   flood.c        region growth on the detector graph (the flooder) and the
 *                  event loop
 *   blossom.c      Edmonds' primal side: alternating trees, blossoms, augment
 *   event_queue.c  the radix heap of event times
 * See decoder.c for the picture of the algorithm. */
#ifndef CUDAQ_MWPM_DECODER_INTERNAL_H
#define CUDAQ_MWPM_DECODER_INTERNAL_H

#include <stdint.h>

#include "mwpm_internal.h"

#define NEVER INT64_MAX
#define NONE (-1)
#define BOUNDARY_REGION (-2)
/* region.alt of a tree that is one outer region alone (every event's region
 * at the start): its alternating-tree node is made only when the tree grows
 * (add_pair_to_tree); most are matched before that. */
#define ALT_LONE (-3)

typedef struct cedge {  /* a path between two detection events (b = -1: boundary) */
  int32_t a, b;
  uint64_t obs;
  double wf;
} cedge_t;

/* Per node, the flooder's view, read for every edge it scans (one 16-byte
 * load per neighbour): the top-level region owning the node (NONE:
 * unowned) and the node's local radius (how far its region reaches past it)
 * at time t, r0 + slope * t, where slope is the top region's slope. Every
 * node in a top-level region's area carries that region's slope; when the
 * slope or the top changes at time now, r0 is shifted so that the local
 * radius at now is unchanged (set_slope, form_blossom, shatter). An unowned
 * node is {0, NONE, 0, 0}, like the boundary: the array is allocated with one
 * entry before node 0, ns[-1], the boundary, so that an adjacency entry's
 * `to` (-1: the boundary) indexes it directly. */
typedef struct nstate {
  int64_t r0;
  int32_t top;
  int16_t slope;
  /* 1: while frozen, x must still look for collisions from its own side
   * (see frozen_idle in flood.c); sticky until the end of the shot. */
  uint16_t watch;
} nstate_t;

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
  int32_t alt;        /* alternating-tree node, ALT_LONE, or NONE */
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

/* Per entity (node, or n + region): when it wants to be looked at, and the
 * time of its live heap entry (NEVER: none); side by side, one cache line. */
typedef struct evq {
  int64_t desired;
  int64_t queued;
} evq_t;

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
  cudaq_mwpm__corr_t *corr;     /* correlated matching / per-shot weights state, or NULL */
  uint32_t n;
  node_t *nodes;
  nstate_t *ns;           /* n + 1 entries from ns[-1] (the boundary) */
  region_t *regions;
  int32_t nregions, *free_regions, nfree_regions;
  altnode_t *alts;
  int32_t nalts, *free_alts, nfree_alts;
  evq_t *ev;              /* per id: nodes, then regions */
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

/* Before node x's adjacency weights are read: in a mapped shot
 * (cudaq_mwpm_decode_mapped) they are read from the shot's values the first
 * time. Every read of d->adj[k].w or d->adj_wf[k] for k in x's range comes
 * after this. */
static inline void weights_at(cudaq_mwpm_decoder_t *d, int32_t x) {
  cudaq_mwpm__corr_t *c = d->corr; /* a mapped shot is current while c->values is set */
  if (c && c->values && c->node_stamp[x] != c->node_epoch)
    cudaq_mwpm__mapped_read(c, d->g, x);
}

static inline int64_t local_radius(const cudaq_mwpm_decoder_t *d, int32_t x) {
  return d->ns[x].r0 + (int64_t)d->ns[x].slope * d->now;
}

/* Node x's top region becomes top with slope `slope` at time now, its local
 * radius unchanged. */
static inline void node_retop(cudaq_mwpm_decoder_t *d, int32_t x, int32_t top, int32_t slope) {
  nstate_t *s = &d->ns[x];
  s->r0 += (int64_t)(s->slope - slope) * d->now;
  s->top = top;
  s->watch |= slope > s->slope; /* a rise: neighbours' plans may be late */
  s->slope = (int16_t)slope;
}
static inline int32_t rid(const cudaq_mwpm_decoder_t *d, int32_t r) { return (int32_t)d->n + r; }

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


/* The region's radius at time now becomes its y0 under the new slope; a
 * top-level region's nodes take the new slope. */
static inline void set_slope(cudaq_mwpm_decoder_t *d, int32_t r, int32_t slope) {
  region_t *R = &d->regions[r];
  int64_t y = radius(R, d->now);
  R->slope = slope;
  R->y0 = y - (int64_t)slope * d->now;
  if (R->parent != NONE)
    return;
  if (R->child == NONE) { /* a trivial region: its area is its shell */
    for (int32_t x = R->shell; x != NONE; x = d->nodes[x].shell_next)
      node_retop(d, x, r, slope);
    return;
  }
  FOR_AREA_BEGIN(d, r, x)
  node_retop(d, x, r, slope);
  FOR_AREA_END
}

/* A fresh region (from the free list first). */
static inline int32_t cudaq_mwpm__new_region(cudaq_mwpm_decoder_t *d) {
  int32_t r = d->nfree_regions ? d->free_regions[--d->nfree_regions] : d->nregions++;
  region_t *R = &d->regions[r];
  /* Every field is set here or before it is read (edges: when matched or
   * linked into a cycle). */
  R->y0 = 0;
  R->slope = 0;
  R->stamp = 0;
  R->parent = R->alt = R->shell = R->child = R->next = R->source = R->match = NONE;
  d->ev[rid(d, r)].desired = NEVER;
  d->ev[rid(d, r)].queued = NEVER;
  return r;
}

/* A fresh alternating-tree node. */
static inline int32_t cudaq_mwpm__new_alt(cudaq_mwpm_decoder_t *d) {
  int32_t a = d->nfree_alts ? d->free_alts[--d->nfree_alts] : d->nalts++;
  altnode_t *A = &d->alts[a];
  /* The edges are set when the node gets an inner region. */
  A->inner = A->outer = A->parent = A->first_child = A->next_sib = A->prev_sib = NONE;
  A->stamp = 0;
  return a;
}

/* The child of blossom b (a direct child) whose area holds source node s. */
static inline int32_t child_holding(const cudaq_mwpm_decoder_t *d, int32_t b, int32_t s) {
  int32_t r = d->nodes[s].region;
  while (d->regions[r].parent != b)
    r = d->regions[r].parent;
  return r;
}

/* event_queue.c */
/* A radix heap: keys never go below the last key popped (event times only
 * move forward), so an entry sits in the bucket of the highest bit in which
 * its key differs from that last key; popping from an empty bucket 0 first
 * redistributes the lowest non-empty bucket into lower ones. Entries live in
 * one pool, linked by index, reused through a free list: the pool grows
 * (doubling) only during warm-up. Push and pop are inline; the rare parts
 * are in event_queue.c. */
void cudaq_mwpm__heap_clear(cudaq_mwpm_decoder_t *d);
int cudaq_mwpm__heap_grow(cudaq_mwpm_decoder_t *d);
void cudaq_mwpm__heap_refill(cudaq_mwpm_decoder_t *d);

static inline int heap_bucket_of(int64_t t, int64_t last) {
  uint64_t x = (uint64_t)(t ^ last);
  return x ? 64 - __builtin_clzll(x) : 0;
}

static inline int cudaq_mwpm__heap_push(cudaq_mwpm_decoder_t *d, int64_t t, int32_t id) {
  int32_t e;
  if (d->pool_free != NONE) {
    e = d->pool_free;
    d->pool_free = d->pool[e].next;
  } else {
    if (d->pool_used == d->pool_cap && cudaq_mwpm__heap_grow(d))
      return -1;
    e = (int32_t)d->pool_used++;
  }
  int b = heap_bucket_of(t, d->heap_last);
  heap_item_t *it = &d->pool[e];
  it->t = t;
  it->id = id;
  it->next = d->bucket[b];
  d->bucket[b] = e;
  d->bucket_mask |= 1ull << b;
  d->heap_len++;
  return 0;
}

/* The entry of smallest time (the heap is not empty). */
static inline heap_item_t cudaq_mwpm__heap_pop(cudaq_mwpm_decoder_t *d) {
  if (d->bucket[0] == NONE)
    cudaq_mwpm__heap_refill(d);
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
  d->ev[id].desired = t;
  if (t != NEVER && d->ev[id].queued > t) {
    if (cudaq_mwpm__heap_push(d, t, id))
      d->oom = 1;
    d->ev[id].queued = t;
  }
}

/* flood.c */
cudaq_mwpm_status_t cudaq_mwpm__run(cudaq_mwpm_decoder_t *d);
void cudaq_mwpm__replan_region(cudaq_mwpm_decoder_t *d, int32_t r, int was_growing);

/* decoder.c: the matched pairs of the finished matching into the result. */
void cudaq_mwpm__collect(cudaq_mwpm_decoder_t *d);

/* blossom.c */
void cudaq_mwpm__hit_region(cudaq_mwpm_decoder_t *d, int32_t r1, int32_t r2, cedge_t e);
void cudaq_mwpm__augment_tree(cudaq_mwpm_decoder_t *d, int32_t r, int32_t partner, cedge_t e);
void cudaq_mwpm__shatter(cudaq_mwpm_decoder_t *d, int32_t b);
void cudaq_mwpm__implode(cudaq_mwpm_decoder_t *d, int32_t r);

#endif
