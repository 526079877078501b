/* The matcher of the sparse-blossom decoder (Edmonds' primal side):
 * alternating trees of regions, blossoms, augmenting paths, shattering. */
#include "decoder_internal.h"

/* ------------------------------------------------------------ regions */

static void free_alt(cudaq_mwpm_decoder_t *d, int32_t a) { d->free_alts[d->nfree_alts++] = a; }

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
void cudaq_mwpm__augment_tree(cudaq_mwpm_decoder_t *d, int32_t r, int32_t partner, cedge_t e) {
  int32_t start = d->regions[r].alt;
  if (start == ALT_LONE ||
      (d->alts[start].parent == NONE && d->alts[start].first_child == NONE)) {
    /* A lone root (the common case at low noise). */
    match_regions(d, r, partner, e);
    d->regions[r].alt = NONE;
    set_slope(d, r, 0);
    d->ev[rid(d, r)].desired = NEVER; /* replan_region(d, r, 1): nothing else to do */
    if (start != ALT_LONE)
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
      cudaq_mwpm__replan_region(d, A->inner, 0);
    cudaq_mwpm__replan_region(d, A->outer, 1);
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
  int32_t b = cudaq_mwpm__new_region(d);
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
    d->ev[rid(d, c)].desired = NEVER;
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
  /* Nodes: new top, growing; their local radii are unchanged at now. */
  int32_t c = d->regions[b].child;
  do {
    FOR_AREA_BEGIN(d, c, x)
    node_retop(d, x, b, 1);
    FOR_AREA_END
    c = d->regions[c].next;
  } while (c != d->regions[b].child);
  cudaq_mwpm__replan_region(d, b, 0);
}

/* Region r (not in a tree, matched to another region) is hit by outer
 * region o through e (o -> r): r joins o's tree as inner, its partner as
 * outer. */
static void add_pair_to_tree(cudaq_mwpm_decoder_t *d, int32_t o, int32_t r, cedge_t e) {
  int32_t m = d->regions[r].match;
  int32_t a = cudaq_mwpm__new_alt(d);
  altnode_t *A = &d->alts[a];
  A->inner = r;
  A->outer = m;
  A->inner_to_outer = d->regions[r].match_edge;
  A->parent_edge = rev(e);
  if (d->regions[o].alt == ALT_LONE) { /* o's tree grows: make its root node */
    int32_t root = cudaq_mwpm__new_alt(d);
    d->alts[root].outer = o;
    d->regions[o].alt = root;
  }
  alt_add_child(d, d->regions[o].alt, a);
  d->regions[r].alt = a;
  d->regions[m].alt = a;
  d->regions[r].match = NONE;
  d->regions[m].match = NONE;
  set_slope(d, r, -1);
  set_slope(d, m, 1);
  cudaq_mwpm__replan_region(d, r, 0);
  cudaq_mwpm__replan_region(d, m, 0);
}

void cudaq_mwpm__hit_region(cudaq_mwpm_decoder_t *d, int32_t r1, int32_t r2, cedge_t e) {
  if (d->regions[r1].alt == NONE) {
    int32_t t = r1;
    r1 = r2;
    r2 = t;
    e = rev(e);
  }
  if (d->regions[r1].alt == NONE)
    return; /* stale: neither is in a tree */
  if (d->regions[r2].alt != NONE) {
    int32_t a1 = d->regions[r1].alt, a2 = d->regions[r2].alt;
    if (a1 == ALT_LONE && a2 == ALT_LONE) {
      /* Two lone regions meet (most events at low noise): both augment_tree
       * calls below, done once. */
      match_regions(d, r1, r2, e);
      int32_t rr[2] = {r1, r2};
      for (int i = 0; i < 2; i++) {
        d->regions[rr[i]].alt = NONE;
        set_slope(d, rr[i], 0);
        d->ev[rid(d, rr[i])].desired = NEVER;
      }
      return;
    }
    if (a1 != ALT_LONE && a2 != ALT_LONE && alt_root(d, a1) == alt_root(d, a2)) {
      form_blossom(d, r1, r2, e);
    } else {
      cudaq_mwpm__augment_tree(d, r1, r2, e);
      cudaq_mwpm__augment_tree(d, r2, r1, rev(e));
    }
    return;
  }
  if (d->regions[r2].match == BOUNDARY_REGION) {
    cudaq_mwpm__augment_tree(d, r1, r2, e);
    return;
  }
  add_pair_to_tree(d, r1, r2, e);
}

/* Inner blossom b reached radius zero: it shatters; the even path of its
 * cycle between the parent and child connections stays in the tree, the
 * rest is matched in pairs. */
void cudaq_mwpm__shatter(cudaq_mwpm_decoder_t *d, int32_t b) {
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
    int32_t ci = cyc[i];
    FOR_AREA_BEGIN(d, ci, x) /* top-level and frozen until set_slope below */
    node_retop(d, x, ci, 0);
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
    int32_t a = cudaq_mwpm__new_alt(d);
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
  d->ev[rid(d, b)].desired = NEVER;
  d->free_regions[d->nfree_regions++] = b;
  for (int32_t i = 0; i < k; i++)
    cudaq_mwpm__replan_region(d, cyc[i], 0);
}

/* A trivial inner region reached radius zero: its tree parent and child
 * (both outer) now touch through its detection event. */
void cudaq_mwpm__implode(cudaq_mwpm_decoder_t *d, int32_t r) {
  altnode_t *N = &d->alts[d->regions[r].alt];
  int32_t p = d->alts[N->parent].outer, c = N->outer;
  cedge_t e;
  e.a = N->inner_to_outer.b;
  e.b = N->parent_edge.b;
  e.obs = N->inner_to_outer.obs ^ N->parent_edge.obs;
  e.wf = N->inner_to_outer.wf + N->parent_edge.wf;
  form_blossom(d, c, p, e);
}

