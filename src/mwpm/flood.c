/* The flooder of the sparse-blossom decoder: regions grow (or shrink) on
 * the detector graph, claim nodes, and report collisions with each other
 * and with the boundary to the matcher (blossom.c) as timed events. */
#include "decoder_internal.h"

static void touch(cudaq_mwpm_decoder_t *d, int32_t x) {
  if (!d->nodes[x].touched) {
    d->nodes[x].touched = 1;
    d->touched[d->ntouched++] = x;
  }
}

/* Time at which a growing/frozen region (top_x, slope_x) at a node of
 * local radius lrx next interacts along one edge of weight w to node `to`
 * (-1: the boundary). Branch-free: one load of the neighbour's state; an
 * unowned node or the boundary is a region of radius 0 and slope 0 that is
 * never x's own. Parity note: with even weights, every vertex of a growing or
 * shrinking region has a total dual of the parity of `now`, so a gap between
 * two growing regions is even (process_node counts the exceptions when such
 * a collision comes due). */
static inline int64_t edge_time(const cudaq_mwpm_decoder_t *d, int32_t top_x, int32_t slope_x,
                                int64_t lrx, int32_t to, int64_t w) {
  const nstate_t *y = &d->ns[to];
  int32_t rate = slope_x + y->slope;
  int64_t gap = w - lrx - (y->r0 + (int64_t)y->slope * d->now);
  gap = gap > 0 ? gap : 0;
  int64_t t = d->now + (gap >> (rate == 2));
  return (rate <= 0 || y->top == top_x) ? NEVER : t;
}

/* A frozen node need not look for collisions itself when every growing
 * neighbour's own plan already covers them. That holds for a node that has
 * been owned since the start (an event node, never claimed) and whose
 * top-level slope never rose (+1, then 0): a growing neighbour z planned at
 * some time tp, while z kept growing, and x's local radius grew at most as
 * fast as z's plan assumed (rate 2 when x grew at tp, then x stayed frozen).
 * Every other node (claimed: z's plan may have seen it unowned; or its slope
 * rose: -1 -> 0, 0 -> +1, -1 -> +1, shatter) is `watch`ed and scans as
 * before. Most frozen nodes popped are event nodes just matched. */
static inline int frozen_idle(const nstate_t *s) { return s->slope == 0 && !s->watch; }

static int64_t node_next_time(cudaq_mwpm_decoder_t *d, int32_t x) {
  int32_t top = d->ns[x].top, slope = d->ns[x].slope;
  if (top < 0 || slope < 0 || frozen_idle(&d->ns[x]))
    return NEVER;
  const cudaq_mwpm_graph_t *g = d->g;
  weights_at(d, x);
  const cudaq_mwpm__adj_t *adj = d->adj;
  int64_t lrx = local_radius(d, x);
  int64_t best = NEVER;
  for (uint32_t k = g->adj_start[x], e = g->adj_start[x + 1]; k < e; k++) {
    int64_t t = edge_time(d, top, slope, lrx, adj[k].to, adj[k].w);
    best = t < best ? t : best;
  }
  return best;
}

/* node_next_time at time 0 for an event node: every region has radius 0
 * and grows, every other owned node is an event, so an edge comes due at
 * w / 2 towards an event and at w towards an unowned node or the
 * boundary. */
static int64_t first_time(cudaq_mwpm_decoder_t *d, int32_t x) {
  const cudaq_mwpm_graph_t *g = d->g;
  weights_at(d, x);
  const cudaq_mwpm__adj_t *adj = d->adj;
  int64_t best = NEVER;
  for (uint32_t k = g->adj_start[x], e = g->adj_start[x + 1]; k < e; k++) {
    int64_t t = adj[k].w >> (d->ns[adj[k].to].top >= 0);
    best = t < best ? t : best;
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
  int32_t r = d->ns[x].top;
  region_t *R = &d->regions[r];
  touch(d, y);
  d->nodes[y].region = r;
  /* Local radius 0; watched: plans made before the claim saw y unowned. */
  d->ns[y] = (nstate_t){-(int64_t)R->slope * d->now, r, (int16_t)R->slope, 1};
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
  int32_t top = d->ns[x].top, slope = d->ns[x].slope;
  if (top < 0 || slope < 0 || frozen_idle(&d->ns[x]))
    return 0;
  weights_at(d, x); /* claim reads x's weights too */
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
    if (to >= 0 && d->ns[to].top < 0) {
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
      if (slope + d->ns[to].slope == 2 && ((d->adj[k].w - lrx - local_radius(d, to)) & 1))
        d->parity_violations++; /* an odd gap between two growing regions */
      ev->kind = EV_HIT_REGION;
      ev->e.b = ny->source;
      ev->e.obs ^= ny->obs;
      ev->e.wf += ny->distf;
      ev->r2 = d->ns[to].top;
    }
    /* x is looked at again at now, after the event (cudaq_mwpm__run). */
    d->ev[x].desired = d->now;
    return 1;
  }
  q_set(d, x, best);
  return 0;
}


/* Schedules the next shrink step of a shrinking top region. */
static void schedule_shrink(cudaq_mwpm_decoder_t *d, int32_t r) {
  region_t *R = &d->regions[r];
  int64_t y = radius(R, d->now);
  int64_t t;
  if (R->shell != NONE && R->shell != R->source)
    t = d->now + local_radius(d, R->shell);
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
    d->ns[v] = (nstate_t){0, NONE, 0, 0};
    nv->shell_next = NONE;
    const cudaq_mwpm_graph_t *g = d->g;
    for (uint32_t k = g->adj_start[v], e = g->adj_start[v + 1]; k < e; k++) {
      int32_t to = d->adj[k].to;
      if (to >= 0 && d->ns[to].top >= 0)
        requeue_node(d, to);
    }
    schedule_shrink(d, r);
    return 0;
  }
  ev->kind = R->source == NONE ? EV_SHATTER : EV_IMPLODE;
  ev->r1 = r;
  return 1;
}

/* After a region's growth or top-level status changed: re-plan its nodes
 * and, when it shrinks, its shrink step. Nodes need no re-planning when the
 * region shrinks (they cannot collide) or when it stopped growing
 * (`was_growing`): every pending collision time near it can then only move
 * later, and the events already queued are re-examined when they fire. */
void cudaq_mwpm__replan_region(cudaq_mwpm_decoder_t *d, int32_t r, int was_growing) {
  const region_t *R = &d->regions[r];
  if (R->slope < 0 && R->parent == NONE) {
    schedule_shrink(d, r);
    return;
  }
  d->ev[rid(d, r)].desired = NEVER;
  if (R->slope == 0 && was_growing)
    return;
  FOR_AREA_BEGIN(d, r, x)
  requeue_node(d, x);
  FOR_AREA_END
}

/* The child of blossom b (a direct child) whose area holds source node s. */

/* ------------------------------------------------------------ event loop */

/* Decodes d->events: one trivial region and one tree per event, then
 * events in time order until every region is matched. */
cudaq_mwpm_status_t cudaq_mwpm__run(cudaq_mwpm_decoder_t *d) {
  d->obs = 0;
  d->weight = 0;
  d->npairs = 0;
  d->oom = 0;
  /* One trivial region and one tree per event. */
  for (size_t i = 0; i < d->nevents; i++) {
    int32_t s = (int32_t)d->events[i];
    int32_t r = cudaq_mwpm__new_region(d);
    region_t *R = &d->regions[r];
    R->slope = 1;
    R->source = s;
    R->shell = s;
    R->alt = ALT_LONE; /* a tree of its own */
    node_t *ns = &d->nodes[s];
    touch(d, s);
    d->nodes[s].region = r;
    d->ns[s] = (nstate_t){-d->now, r, 1, 0}; /* local radius 0 */
    ns->source = s;
    ns->shell_next = NONE;
    ns->distf = 0;
    ns->obs = 0;
  }
  /* The radix heap starts from the earliest of these times rather than 0,
   * which spares it one redistribution of every entry. */
  int64_t first = NEVER;
  for (size_t i = 0; i < d->nevents; i++) {
    int32_t x = (int32_t)d->events[i];
    d->ev[x].desired = first_time(d, x);
    first = d->ev[x].desired < first ? d->ev[x].desired : first;
  }
  if (first != NEVER)
    d->heap_last = first; /* the heap is empty */
  for (size_t i = 0; i < d->nevents; i++)
    q_set(d, (int32_t)d->events[i], d->ev[d->events[i]].desired);
  mev_t ev;
  while (d->heap_len) {
    heap_item_t it = cudaq_mwpm__heap_pop(d);
    int32_t id = it.id;
    if (d->ev[id].queued != it.t)
      continue; /* superseded entry */
    d->ev[id].queued = NEVER;
    int64_t want = d->ev[id].desired;
    if (want != it.t) {
      if (want != NEVER && want > it.t) {
        if (cudaq_mwpm__heap_push(d, want, id))
          d->oom = 1;
        d->ev[id].queued = want;
      }
      continue;
    }
    d->ev[id].desired = NEVER;
    d->now = it.t;
    int got = id < (int32_t)d->n ? process_node(d, id, &ev)
                                  : process_region(d, id - (int32_t)d->n, &ev);
    if (!got)
      continue;
    int32_t again = id < (int32_t)d->n ? id : NONE; /* node id is due again at now */
    switch (ev.kind) {
    case EV_HIT_REGION:
      cudaq_mwpm__hit_region(d, ev.r1, ev.r2, ev.e);
      break;
    case EV_HIT_BOUNDARY:
      if (d->regions[ev.r1].alt != NONE)
        cudaq_mwpm__augment_tree(d, ev.r1, BOUNDARY_REGION, ev.e);
      break;
    case EV_SHATTER:
      cudaq_mwpm__shatter(d, ev.r1);
      break;
    case EV_IMPLODE:
      cudaq_mwpm__implode(d, ev.r1);
      break;
    }
    /* The node that reported the event is looked at again at now, for its
     * other due edges, unless the event re-planned it, or it has nothing
     * to look for (most often: its region was just matched and froze). */
    if (again != NONE && d->ev[again].desired == d->now) {
      const nstate_t *sa = &d->ns[again];
      if (sa->top < 0 || sa->slope < 0 || frozen_idle(sa))
        d->ev[again].desired = NEVER;
      else
        q_set(d, again, d->now);
    }
    if (d->oom)
      break;
  }
  if (d->oom)
    return CUDAQ_MWPM_ERR_NO_MEMORY;
  for (size_t i = 0; i < d->nevents; i++) {
    const region_t *R = &d->regions[d->ns[d->events[i]].top];
    if (R->match == NONE)
      return CUDAQ_MWPM_ERR_NO_SOLUTION;
  }
  cudaq_mwpm__collect(d);
  return CUDAQ_MWPM_OK;
}

