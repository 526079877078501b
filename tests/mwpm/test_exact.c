/* Exactness of the decoder against brute force on small random graphs:
 * all-pairs shortest paths plus a dynamic program over all pairings of the
 * detection events (the minimum-weight edge set whose boundary is the event
 * set is a minimum-weight pairing by shortest paths). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cudaq/qec/mwpm.h"
#include "mwpm_internal.h"

#define MAXN 64
#define MAXK 14

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}
static double urand(void) { return (double)(rnd() >> 11) * (1.0 / 9007199254740992.0); }

typedef struct ref {
  int n;
  double dist[MAXN + 1][MAXN + 1]; /* node MAXN-indexed slot n is the boundary */
  uint64_t obs[MAXN + 1][MAXN + 1];
} ref_t;

/* Floyd-Warshall on |w| with the boundary as node n. */
static void ref_build(ref_t *r, int n, const cudaq_mwpm_edge_t *edges, size_t m) {
  r->n = n;
  for (int i = 0; i <= n; i++)
    for (int j = 0; j <= n; j++) {
      r->dist[i][j] = i == j ? 0 : INFINITY;
      r->obs[i][j] = 0;
    }
  for (size_t k = 0; k < m; k++) {
    int u = edges[k].u, v = edges[k].v < 0 ? n : edges[k].v;
    double w = fabs(edges[k].weight);
    if (w < r->dist[u][v]) {
      r->dist[u][v] = r->dist[v][u] = w;
      r->obs[u][v] = r->obs[v][u] = edges[k].obs_mask;
    }
  }
  for (int k = 0; k <= n; k++)
    for (int i = 0; i <= n; i++)
      for (int j = 0; j <= n; j++)
        if (r->dist[i][k] + r->dist[k][j] < r->dist[i][j]) {
          r->dist[i][j] = r->dist[i][k] + r->dist[k][j];
          r->obs[i][j] = r->obs[i][k] ^ r->obs[k][j];
        }
}

/* Minimum pairing cost of the events (each may go to the boundary). */
static double ref_solve(const ref_t *r, const int *ev, int k, uint64_t *obs) {
  static double f[1 << MAXK];
  static uint64_t fo[1 << MAXK];
  int full = (1 << k) - 1;
  f[0] = 0;
  fo[0] = 0;
  for (int s = 1; s <= full; s++) {
    int i = __builtin_ctz((unsigned)s);
    int rest = s & ~(1 << i);
    double best = f[rest] + r->dist[ev[i]][r->n];
    uint64_t bo = fo[rest] ^ r->obs[ev[i]][r->n];
    for (int j = i + 1; j < k; j++) {
      if (!(rest >> j & 1))
        continue;
      double c = f[rest & ~(1 << j)] + r->dist[ev[i]][ev[j]];
      if (c < best) {
        best = c;
        bo = fo[rest & ~(1 << j)] ^ r->obs[ev[i]][ev[j]];
      }
    }
    f[s] = best;
    fo[s] = bo;
  }
  *obs = fo[full];
  return f[full];
}

static int random_graph(cudaq_mwpm_edge_t *edges, int n, double pe, double pb, int allow_neg,
                        int int_weights) {
  int m = 0;
  for (int u = 0; u < n; u++) {
    for (int v = u + 1; v < n; v++)
      if (urand() < pe) {
        edges[m].u = u;
        edges[m].v = v;
        edges[m].weight = int_weights ? (double)(1 + rnd() % 4) : 0.05 + 10 * urand();
        edges[m].obs_mask = rnd() & 0xff;
        m++;
      }
    if (urand() < pb) {
      edges[m].u = u;
      edges[m].v = -1;
      edges[m].weight = int_weights ? (double)(1 + rnd() % 4) : 0.05 + 10 * urand();
      edges[m].obs_mask = rnd() & 0xff;
      m++;
    }
  }
  if (allow_neg)
    for (int i = 0; i < m; i++)
      if (urand() < 0.1)
        edges[i].weight = -edges[i].weight;
  return m;
}

/* Compares decoder and brute force on many random graphs and shots. */
static void run_random(int trials, int nmin, int nmax, double pe, double pb, int allow_neg,
                       int int_weights) {
  cudaq_mwpm_edge_t edges[MAXN * MAXN];
  ref_t ref;
  long checked = 0, nosol = 0;
  for (int t = 0; t < trials; t++) {
    int n = nmin + (int)(rnd() % (unsigned)(nmax - nmin + 1));
    int m = random_graph(edges, n, pe, pb, allow_neg, int_weights);
    cudaq_mwpm_graph_t *g = NULL;
    assert_int_equal(cudaq_mwpm_graph_from_edges((uint32_t)n, 8, edges, (size_t)m, NULL, &g),
                     CUDAQ_MWPM_OK);
    /* The graph merged nothing (no parallel edges); use its edges. */
    cudaq_mwpm_decoder_t *dec = NULL;
    assert_int_equal(cudaq_mwpm_decoder_create(g, &dec), CUDAQ_MWPM_OK);
    ref_build(&ref, n, edges, (size_t)m);
    double negw = 0;
    uint64_t nego = 0;
    int negflip[MAXN] = {0};
    for (int i = 0; i < m; i++)
      if (edges[i].weight < 0) {
        negw += edges[i].weight;
        nego ^= edges[i].obs_mask;
        negflip[edges[i].u] ^= 1;
        if (edges[i].v >= 0)
          negflip[edges[i].v] ^= 1;
      }
    for (int shot = 0; shot < 30; shot++) {
      uint32_t ev[MAXN];
      memset(ev, 0, sizeof ev);
      int k = 0, refev[MAXN], nref = 0;
      int on[MAXN] = {0};
      double pev = n > 16 ? 10.0 / n : 0.4;
      for (int i = 0; i < n; i++)
        if (urand() < pev) {
          ev[k++] = (uint32_t)i;
          on[i] = 1;
        }
      for (int i = 0; i < n; i++)
        if (on[i] ^ negflip[i])
          refev[nref++] = i;
      uint64_t robs;
      double rw = nref <= MAXK ? ref_solve(&ref, refev, nref, &robs) : NAN;
      if (isnan(rw))
        continue;
      cudaq_mwpm_result_t res;
      cudaq_mwpm_status_t st = cudaq_mwpm_decode(dec, ev, (size_t)k, &res);
      if (isinf(rw)) {
        assert_int_equal(st, CUDAQ_MWPM_ERR_NO_SOLUTION);
        nosol++;
        continue;
      }
      if (st != CUDAQ_MWPM_OK || fabs(res.weight - (rw + negw)) > 1e-5 * (1 + fabs(rw))) {
        fprintf(stderr, "trial %d shot %d: n=%d m=%d status %d weight %.9f, brute force %.9f\n",
                t, shot, n, m, st, res.weight, rw + negw);
        for (int i = 0; i < m; i++)
          fprintf(stderr, "  edge %d-%d w=%g obs=%llx\n", edges[i].u, edges[i].v,
                  edges[i].weight, (unsigned long long)edges[i].obs_mask);
        for (int i = 0; i < k; i++)
          fprintf(stderr, "  event %u\n", ev[i]);
        fail();
      }
      if (!int_weights)
        assert_int_equal(res.obs_mask, robs ^ nego); /* unique optimum almost surely */
      /* Pairs: each at shortest-path distance, covering every event once. */
      const cudaq_mwpm_pair_t *pairs;
      size_t np;
      assert_int_equal(cudaq_mwpm_decoder_pairs(dec, &pairs, &np), CUDAQ_MWPM_OK);
      double sum = 0;
      int seen[MAXN] = {0};
      for (size_t i = 0; i < np; i++) {
        int a = pairs[i].a, b = pairs[i].b < 0 ? n : pairs[i].b;
        sum += ref.dist[a][b];
        seen[a]++;
        if (b < n)
          seen[b]++;
      }
      for (int i = 0; i < nref; i++)
        assert_int_equal(seen[refev[i]], 1);
      assert_true(fabs(sum - rw) < 1e-5 * (1 + rw));
      /* Edges on request: their weights add up to the total. */
      uint32_t eidx[MAXN * MAXN * 2];
      size_t ne;
      assert_int_equal(cudaq_mwpm_decoder_edges(dec, eidx, MAXN * MAXN * 2, &ne), CUDAQ_MWPM_OK);
      double ew = 0;
      uint64_t eo = 0;
      for (size_t i = 0; i < ne; i++) {
        cudaq_mwpm_edge_t e;
        assert_int_equal(cudaq_mwpm_graph_edge(g, eidx[i], &e), CUDAQ_MWPM_OK);
        ew += e.weight;
        eo ^= e.obs_mask;
      }
      if (negw == 0) {
        assert_true(fabs(ew - res.weight) < 1e-5 * (1 + fabs(rw)));
        if (!int_weights)
          assert_int_equal(eo, res.obs_mask);
      }
      checked++;
    }
    assert_int_equal(cudaq_mwpm__parity_violations(dec), 0);
    cudaq_mwpm_decoder_destroy(dec);
    cudaq_mwpm_graph_destroy(g);
  }
  printf("checked %ld shots (%ld without solution)\n", checked, nosol);
}

static void test_random_sparse(void **state) {
  (void)state;
  run_random(3000, 2, 16, 0.25, 0.3, 0, 0);
}

static void test_random_dense(void **state) {
  (void)state;
  run_random(1500, 2, 12, 0.7, 0.5, 0, 0);
}

static void test_random_no_boundary(void **state) {
  (void)state;
  run_random(1500, 2, 12, 0.4, 0.0, 0, 0);
}

static void test_random_ties(void **state) {
  (void)state;
  run_random(3000, 2, 16, 0.35, 0.3, 0, 1);
}

/* Larger sparse graphs (average degree about 3-4), where blossoms nest. */
static void test_random_larger(void **state) {
  (void)state;
  run_random(300, 30, MAXN, 0.07, 0.1, 0, 0);
  run_random(300, 30, MAXN, 0.07, 0.1, 0, 1);
}

static void test_random_negative(void **state) {
  (void)state;
  run_random(1000, 2, 12, 0.4, 0.3, 1, 0);
}

/* Shared by the per-shot weight tests: a random graph built with
 * per_shot_weights (n nodes, m edges, read back in the graph's own order,
 * the largest weight in *maxw); ... */
static cudaq_mwpm_graph_t *per_shot_graph(cudaq_mwpm_edge_t *edges, int *n, int *m, double *maxw, int int_weights) {
  cudaq_mwpm_graph_options_t o;
  cudaq_mwpm_graph_options_init(&o);
  o.per_shot_weights = 1;
  *n = 2 + (int)(rnd() % 30);
  *m = random_graph(edges, *n, *n > 12 ? 0.15 : 0.4, 0.3, 0, int_weights);
  cudaq_mwpm_graph_t *g = NULL;
  assert_int_equal(cudaq_mwpm_graph_from_edges((uint32_t)*n, 8, edges, (size_t)*m, &o, &g), CUDAQ_MWPM_OK);
  assert_int_equal((int)cudaq_mwpm_graph_num_edges(g), *m);
  *maxw = 0;
  for (int i = 0; i < *m; i++) {
    assert_int_equal(cudaq_mwpm_graph_edge(g, (size_t)i, &edges[i]), CUDAQ_MWPM_OK);
    *maxw = fmax(*maxw, edges[i].weight);
  }
  return g;
}

/* ... a random weight for one shot: zero, small, large, beyond the clamp; ... */
static double shot_weight(double maxw) {
  double u = urand();
  return u < 0.1 ? 0.0 : u < 0.8 ? 20 * urand() : 40 * maxw * (1 + urand());
}

/* ... a random shot's events (as ints for the reference too); ... */
static int shot_events(int n, uint32_t *ev, int *refev) {
  int k = 0;
  for (int i = 0; i < n && k < MAXK; i++)
    if (urand() < (n > 16 ? 8.0 / n : 0.4)) {
      refev[k] = (int)i;
      ev[k++] = (uint32_t)i;
    }
  return k;
}

/* ... and a decode's outcome against brute force on ref: no solution where
 * it has none, else its weight (and, with check_obs, its observables).
 * Returns 1 when a solution was compared. */
static int check_shot(const ref_t *ref, const int *refev, int k, cudaq_mwpm_status_t st,
                      const cudaq_mwpm_result_t *res, int check_obs) {
  uint64_t robs;
  double rw = ref_solve(ref, refev, k, &robs);
  if (isinf(rw)) {
    assert_int_equal(st, CUDAQ_MWPM_ERR_NO_SOLUTION);
    return 0;
  }
  assert_int_equal(st, CUDAQ_MWPM_OK);
  assert_true(fabs(res->weight - rw) < 1e-5 * (1 + rw));
  if (check_obs)
    assert_int_equal(res->obs_mask, robs);
  return 1;
}

/* Per-shot weights (cudaq_mwpm_decode_weighted): on random graphs, each shot
 * replaces the weights of a random subset of edges (zero, small, large,
 * beyond the clamp) and is checked against brute force on the graph with
 * those weights; a plain decode after every other one must see the graph's
 * own weights again (brute force on the original graph), and the others are
 * followed by the next weighted shot directly. */
static void test_weighted_random(void **state) {
  (void)state;
  cudaq_mwpm_edge_t edges[MAXN * MAXN], shot_edges[MAXN * MAXN];
  ref_t ref, ref_shot;
  long checked = 0;
  for (int t = 0; t < 800; t++) {
    int n, m;
    double maxw;
    cudaq_mwpm_graph_t *g = per_shot_graph(edges, &n, &m, &maxw, 0);
    cudaq_mwpm_decoder_t *dec = NULL;
    assert_int_equal(cudaq_mwpm_decoder_create(g, &dec), CUDAQ_MWPM_OK);
    ref_build(&ref, n, edges, (size_t)m);
    for (int shot = 0; shot < 20; shot++) {
      uint32_t which[MAXN * MAXN];
      double w[MAXN * MAXN];
      size_t nw = 0;
      memcpy(shot_edges, edges, (size_t)m * sizeof *edges);
      for (int i = 0; i < m; i++) {
        if (urand() < 0.5)
          continue;
        double wi = shot_weight(maxw);
        which[nw] = (uint32_t)i;
        w[nw++] = wi;
        /* past 16x the graph's largest weight the decoder clamps */
        shot_edges[i].weight = wi < 16 * maxw ? wi : 16 * maxw;
      }
      ref_build(&ref_shot, n, shot_edges, (size_t)m);
      uint32_t ev[MAXN];
      int refev[MAXN], k = shot_events(n, ev, refev);
      cudaq_mwpm_result_t res;
      checked += check_shot(&ref_shot, refev, k, cudaq_mwpm_decode_weighted(dec, ev, (size_t)k, which, w, nw, &res),
                            &res, 0);
      /* Every other shot: the next weighted decode follows at once (its
       * edges not listed get the graph's weights back there); else the next
       * plain decode has the graph's weights back. */
      if (shot % 2)
        continue;
      check_shot(&ref, refev, k, cudaq_mwpm_decode(dec, ev, (size_t)k, &res), &res, 1);
    }
    assert_int_equal(cudaq_mwpm__parity_violations(dec), 0);
    cudaq_mwpm_decoder_destroy(dec);
    cudaq_mwpm_graph_destroy(g);
  }
  printf("checked %ld weighted shots\n", checked);
}

/* Per-shot weights refused: a graph without the option, bad indices and
 * weights (reported before any weight changes), an edge of negative graph
 * weight; and edge lookup. */
static void test_weighted_errors(void **state) {
  (void)state;
  /* 0 -1- 1 -1- 2, boundary edges 0 (5) and 2 (5), a negative edge 1-B. */
  cudaq_mwpm_edge_t e[5] = {{0, 1, 1.0, 0}, {1, 2, 1.0, 0}, {0, -1, 5.0, 1}, {2, -1, 5.0, 2},
                            {1, -1, -2.0, 4}};
  cudaq_mwpm_graph_options_t o;
  cudaq_mwpm_graph_options_init(&o);
  assert_int_equal(o.per_shot_weights, 0);
  cudaq_mwpm_graph_t *plain = NULL, *g = NULL;
  assert_int_equal(cudaq_mwpm_graph_from_edges(3, 3, e, 5, &o, &plain), CUDAQ_MWPM_OK);
  o.per_shot_weights = 1;
  assert_int_equal(cudaq_mwpm_graph_from_edges(3, 3, e, 5, &o, &g), CUDAQ_MWPM_OK);
  cudaq_mwpm_decoder_t *dp = NULL, *d = NULL;
  assert_int_equal(cudaq_mwpm_decoder_create(plain, &dp), CUDAQ_MWPM_OK);
  assert_int_equal(cudaq_mwpm_decoder_create(g, &d), CUDAQ_MWPM_OK);
  size_t e01, e12, e1b, x;
  assert_int_equal(cudaq_mwpm_graph_find_edge(g, 1, 0, &e01), CUDAQ_MWPM_OK);
  assert_int_equal(cudaq_mwpm_graph_find_edge(g, 2, 1, &e12), CUDAQ_MWPM_OK);
  assert_int_equal(cudaq_mwpm_graph_find_edge(g, CUDAQ_MWPM_BOUNDARY, 1, &e1b), CUDAQ_MWPM_OK);
  cudaq_mwpm_edge_t got;
  assert_int_equal(cudaq_mwpm_graph_edge(g, e01, &got), CUDAQ_MWPM_OK);
  assert_true(got.u == 0 && got.v == 1);
  assert_int_equal(cudaq_mwpm_graph_find_edge(g, 0, 2, &x), CUDAQ_MWPM_ERR_OUT_OF_RANGE);
  assert_int_equal(cudaq_mwpm_graph_find_edge(g, 0, 3, &x), CUDAQ_MWPM_ERR_INVALID_ARG);
  assert_int_equal(cudaq_mwpm_graph_find_edge(g, 1, 1, &x), CUDAQ_MWPM_ERR_INVALID_ARG);
  assert_int_equal(cudaq_mwpm_graph_find_edge(g, -1, -1, &x), CUDAQ_MWPM_ERR_INVALID_ARG);
  assert_int_equal(cudaq_mwpm_graph_find_edge(NULL, 0, 1, &x), CUDAQ_MWPM_ERR_INVALID_ARG);
  /* Events 0 and 2: the graph's own answer first. */
  uint32_t ev[2] = {0, 2};
  cudaq_mwpm_result_t want, r;
  assert_int_equal(cudaq_mwpm_decode(d, ev, 2, &want), CUDAQ_MWPM_OK);
  uint32_t idx[2] = {(uint32_t)e01, (uint32_t)e12};
  double w[2] = {1.0, 1.0};
  assert_int_equal(cudaq_mwpm_decode_weighted(dp, ev, 2, idx, w, 2, &r), CUDAQ_MWPM_ERR_INVALID_ARG);
  assert_int_equal(cudaq_mwpm_decode_weighted(d, ev, 2, NULL, w, 2, &r), CUDAQ_MWPM_ERR_INVALID_ARG);
  assert_int_equal(cudaq_mwpm_decode_weighted(d, ev, 2, idx, NULL, 2, &r), CUDAQ_MWPM_ERR_INVALID_ARG);
  assert_int_equal(cudaq_mwpm_decode_weighted(d, ev, 2, idx, w, 2, NULL), CUDAQ_MWPM_ERR_INVALID_ARG);
  assert_int_equal(cudaq_mwpm_decode_weighted(NULL, ev, 2, idx, w, 2, &r), CUDAQ_MWPM_ERR_INVALID_ARG);
  /* own weights for per-shot use do not make a graph correlated */
  assert_int_equal(cudaq_mwpm_decode_correlated(d, ev, 2, &r), CUDAQ_MWPM_ERR_INVALID_ARG);
  uint8_t dense[3] = {1, 0, 1};
  assert_int_equal(cudaq_mwpm_decode_dense_correlated(d, dense, &r), CUDAQ_MWPM_ERR_INVALID_ARG);
  double bad[4] = {-1.0, NAN, INFINITY, 0.0};
  for (int i = 0; i < 3; i++) {
    double wb[2] = {0.0, bad[i]}; /* the first entry valid: nothing may change before the check */
    assert_int_equal(cudaq_mwpm_decode_weighted(d, ev, 2, idx, wb, 2, &r), CUDAQ_MWPM_ERR_INVALID_ARG);
  }
  uint32_t oob[2] = {(uint32_t)e01, 5};
  double wz[2] = {0.0, 0.0};
  assert_int_equal(cudaq_mwpm_decode_weighted(d, ev, 2, oob, wz, 2, &r), CUDAQ_MWPM_ERR_OUT_OF_RANGE);
  uint32_t neg[1] = {(uint32_t)e1b};
  assert_int_equal(cudaq_mwpm_decode_weighted(d, ev, 2, neg, wz, 1, &r), CUDAQ_MWPM_ERR_INVALID_ARG);
  /* After the refusals the decoder still has the graph's weights. */
  assert_int_equal(cudaq_mwpm_decode(d, ev, 2, &r), CUDAQ_MWPM_OK);
  assert_int_equal(r.obs_mask, want.obs_mask);
  assert_true(fabs(r.weight - want.weight) < 1e-9);
  /* No weights given: the plain decode. */
  assert_int_equal(cudaq_mwpm_decode_weighted(d, ev, 2, NULL, NULL, 0, &r), CUDAQ_MWPM_OK);
  assert_int_equal(r.obs_mask, want.obs_mask);
  /* Make 0-1 and 1-2 expensive (9 each): the events are 0, 2 and 1 (the
   * negative edge 1-B is folded in: taken, weight -2, observable 4), and all
   * three go to the boundary: 0-B 5 + 2-B 5 + 1-B 2, which takes the folded
   * edge back: weight 10, observables 1 ^ 2 (the graph's own weights pair
   * 0 with 2 through 1 and send 1 to the boundary: 2 + 2 - 2, no observable). */
  assert_true(fabs(want.weight - 2.0) < 1e-6);
  assert_int_equal(want.obs_mask, 0u);
  double w9[2] = {9.0, 9.0};
  assert_int_equal(cudaq_mwpm_decode_weighted(d, ev, 2, idx, w9, 2, &r), CUDAQ_MWPM_OK);
  assert_int_equal(r.obs_mask, 1u ^ 2u);
  assert_true(fabs(r.weight - 10.0) < 1e-6);
  /* An edge listed twice takes its last weight. */
  uint32_t twice[3] = {(uint32_t)e01, (uint32_t)e12, (uint32_t)e01};
  double wt[3] = {9.0, 9.0, 0.5};
  assert_int_equal(cudaq_mwpm_decode_weighted(d, ev, 2, twice, wt, 3, &r), CUDAQ_MWPM_OK);
  assert_int_equal(r.obs_mask, 2u ^ 4u); /* 0-1 at 0.5, 2-B: 0.5 + 5 - 2 */
  assert_true(fabs(r.weight - 3.5) < 1e-6);
  cudaq_mwpm_decoder_destroy(dp);
  cudaq_mwpm_decoder_destroy(d);
  cudaq_mwpm_graph_destroy(plain);
  cudaq_mwpm_graph_destroy(g);
}

/* Mapped per-shot weights (cudaq_mwpm_decode_mapped): on random graphs a map
 * of a random half of the edges onto shuffled slots (and unused slots), then
 * shots with random signed values (zero, small, large, beyond the clamp).
 * Each is checked against brute force on |value| weights and against
 * cudaq_mwpm_decode_weighted with the same weights (the same matching: the
 * same prediction, weight and correction edges, bit for bit); plain decodes
 * (list and dense) in between must see the graph's weights again. */
static void test_mapped_random(void **state) {
  (void)state;
  cudaq_mwpm_edge_t edges[MAXN * MAXN], shot_edges[MAXN * MAXN];
  ref_t ref, ref_shot;
  long checked = 0;
  for (int t = 0; t < 800; t++) {
    int n, m;
    double maxw;
    cudaq_mwpm_graph_t *g = per_shot_graph(edges, &n, &m, &maxw, t % 4 == 3);
    if (!m) { /* no edge to map */
      cudaq_mwpm_graph_destroy(g);
      continue;
    }
    cudaq_mwpm_decoder_t *dec = NULL, *eager = NULL;
    assert_int_equal(cudaq_mwpm_decoder_create(g, &dec), CUDAQ_MWPM_OK);
    assert_int_equal(cudaq_mwpm_decoder_create(g, &eager), CUDAQ_MWPM_OK);
    ref_build(&ref, n, edges, (size_t)m);
    /* The map: edges in a random order, each to a distinct slot. */
    uint32_t map_e[MAXN * MAXN], map_s[MAXN * MAXN], perm[MAXN * MAXN + 3];
    size_t nmap = 0, nvalues = 0;
    for (int i = 0; i < m; i++)
      if (urand() < 0.5)
        map_e[nmap++] = (uint32_t)i;
    if (!nmap)
      map_e[nmap++] = (uint32_t)(rnd() % (uint64_t)m); /* an empty map is no map (test_mapped_errors) */
    nvalues = nmap + rnd() % 4;
    for (size_t i = 0; i < nvalues; i++)
      perm[i] = (uint32_t)i;
    for (size_t i = nvalues; i > 1; i--) {
      size_t j = rnd() % i;
      uint32_t x = perm[i - 1];
      perm[i - 1] = perm[j];
      perm[j] = x;
    }
    for (size_t i = nmap; i > 1; i--) {
      size_t j = rnd() % i;
      uint32_t x = map_e[i - 1];
      map_e[i - 1] = map_e[j];
      map_e[j] = x;
    }
    for (size_t i = 0; i < nmap; i++)
      map_s[i] = perm[i];
    assert_int_equal(cudaq_mwpm_decoder_set_weight_map(dec, map_e, map_s, nmap, nvalues), CUDAQ_MWPM_OK);
    for (int shot = 0; shot < 20; shot++) {
      float values[MAXN * MAXN + 3];
      for (size_t i = 0; i < nvalues; i++) {
        double wi = shot_weight(maxw);
        values[i] = (float)(rnd() & 1 ? -wi : wi);
      }
      uint32_t which[MAXN * MAXN];
      double w[MAXN * MAXN];
      memcpy(shot_edges, edges, (size_t)m * sizeof *edges);
      for (size_t i = 0; i < nmap; i++) {
        which[i] = map_e[i];
        w[i] = fabs((double)values[map_s[i]]);
        /* past 16x the graph's largest weight the decoder clamps */
        shot_edges[map_e[i]].weight = w[i] < 16 * maxw ? w[i] : 16 * maxw;
      }
      ref_build(&ref_shot, n, shot_edges, (size_t)m);
      uint32_t ev[MAXN];
      int refev[MAXN], k = shot_events(n, ev, refev);
      cudaq_mwpm_result_t res, want;
      cudaq_mwpm_status_t st = cudaq_mwpm_decode_mapped(dec, ev, (size_t)k, values, &res);
      cudaq_mwpm_status_t st2 = cudaq_mwpm_decode_weighted(eager, ev, (size_t)k, which, w, nmap, &want);
      assert_int_equal(st, st2);
      if (check_shot(&ref_shot, refev, k, st, &res, 0)) {
        assert_true(res.weight == want.weight);
        assert_int_equal(res.obs_mask, want.obs_mask);
        assert_int_equal(res.num_pairs, want.num_pairs);
        /* The correction's paths on the same weights (read lazily too). */
        uint32_t pe[4 * MAXN * MAXN], pw[4 * MAXN * MAXN];
        size_t npe = 0, npw = 0;
        assert_int_equal(cudaq_mwpm_decoder_edges(dec, pe, 4 * MAXN * MAXN, &npe), CUDAQ_MWPM_OK);
        assert_int_equal(cudaq_mwpm_decoder_edges(eager, pw, 4 * MAXN * MAXN, &npw), CUDAQ_MWPM_OK);
        assert_int_equal(npe, npw);
        assert_memory_equal(pe, pw, npe * sizeof *pe);
        checked++;
      }
      if (shot % 2)
        continue; /* the next mapped shot follows at once */
      if (shot % 4) {
        st = cudaq_mwpm_decode(dec, ev, (size_t)k, &res);
      } else {
        uint8_t dense[MAXN] = {0};
        for (int i = 0; i < k; i++)
          dense[ev[i]] ^= 1;
        st = cudaq_mwpm_decode_dense(dec, dense, &res);
      }
      check_shot(&ref, refev, k, st, &res, t % 4 != 3); /* integer weights tie: then only the weight is unique */
    }
    assert_int_equal(cudaq_mwpm__parity_violations(dec), 0);
    cudaq_mwpm_decoder_destroy(dec);
    cudaq_mwpm_decoder_destroy(eager);
    cudaq_mwpm_graph_destroy(g);
  }
  printf("checked %ld mapped shots\n", checked);
}

/* The map and mapped decodes refused; a NaN or infinite value refuses the
 * shot where the matching reaches its edge; listed and mapped weights on
 * one decoder in turns. */
static void test_mapped_errors(void **state) {
  (void)state;
  /* 0 -1- 1 -1- 2, boundary edges 0 (5) and 2 (5), a negative edge 1-B, and
   * a far pair 3 -1- 4 with boundary edges 3 (1) and 4 (1). */
  cudaq_mwpm_edge_t e[8] = {{0, 1, 1.0, 0},  {1, 2, 1.0, 0}, {0, -1, 5.0, 1}, {2, -1, 5.0, 2},
                            {1, -1, -2.0, 4}, {3, 4, 1.0, 8}, {3, -1, 1.0, 16}, {4, -1, 1.0, 32}};
  cudaq_mwpm_graph_options_t o;
  cudaq_mwpm_graph_options_init(&o);
  cudaq_mwpm_graph_t *plain = NULL, *g = NULL;
  assert_int_equal(cudaq_mwpm_graph_from_edges(5, 6, e, 8, &o, &plain), CUDAQ_MWPM_OK);
  o.per_shot_weights = 1;
  assert_int_equal(cudaq_mwpm_graph_from_edges(5, 6, e, 8, &o, &g), CUDAQ_MWPM_OK);
  cudaq_mwpm_decoder_t *dp = NULL, *d = NULL;
  assert_int_equal(cudaq_mwpm_decoder_create(plain, &dp), CUDAQ_MWPM_OK);
  assert_int_equal(cudaq_mwpm_decoder_create(g, &d), CUDAQ_MWPM_OK);
  size_t e01, e12, e1b, e34;
  assert_int_equal(cudaq_mwpm_graph_find_edge(g, 0, 1, &e01), CUDAQ_MWPM_OK);
  assert_int_equal(cudaq_mwpm_graph_find_edge(g, 1, 2, &e12), CUDAQ_MWPM_OK);
  assert_int_equal(cudaq_mwpm_graph_find_edge(g, 1, CUDAQ_MWPM_BOUNDARY, &e1b), CUDAQ_MWPM_OK);
  assert_int_equal(cudaq_mwpm_graph_find_edge(g, 3, 4, &e34), CUDAQ_MWPM_OK);
  uint32_t ev[2] = {0, 2};
  float v[3] = {9.0f, -9.0f, 0.0f};
  cudaq_mwpm_result_t want, r;
  assert_int_equal(cudaq_mwpm_decode(d, ev, 2, &want), CUDAQ_MWPM_OK);
  /* No map yet; a graph without per_shot_weights; bad maps. */
  assert_int_equal(cudaq_mwpm_decode_mapped(d, ev, 2, v, &r), CUDAQ_MWPM_ERR_INVALID_ARG);
  uint32_t me[3] = {(uint32_t)e01, (uint32_t)e12, (uint32_t)e34}, ms[3] = {0, 1, 2};
  assert_int_equal(cudaq_mwpm_decoder_set_weight_map(dp, me, ms, 3, 3), CUDAQ_MWPM_ERR_INVALID_ARG);
  assert_int_equal(cudaq_mwpm_decoder_set_weight_map(NULL, me, ms, 3, 3), CUDAQ_MWPM_ERR_INVALID_ARG);
  assert_int_equal(cudaq_mwpm_decoder_set_weight_map(d, NULL, ms, 3, 3), CUDAQ_MWPM_ERR_INVALID_ARG);
  assert_int_equal(cudaq_mwpm_decoder_set_weight_map(d, me, ms, 3, 2), CUDAQ_MWPM_ERR_OUT_OF_RANGE);
  uint32_t oob[2] = {(uint32_t)e01, 8}, dup[2] = {(uint32_t)e12, (uint32_t)e12}, neg[1] = {(uint32_t)e1b};
  assert_int_equal(cudaq_mwpm_decoder_set_weight_map(d, oob, ms, 2, 3), CUDAQ_MWPM_ERR_OUT_OF_RANGE);
  assert_int_equal(cudaq_mwpm_decoder_set_weight_map(d, dup, ms, 2, 3), CUDAQ_MWPM_ERR_INVALID_ARG);
  assert_int_equal(cudaq_mwpm_decoder_set_weight_map(d, neg, ms, 1, 3), CUDAQ_MWPM_ERR_INVALID_ARG);
  assert_int_equal(cudaq_mwpm_decode_mapped(d, ev, 2, v, &r), CUDAQ_MWPM_ERR_INVALID_ARG);
  assert_int_equal(cudaq_mwpm_decoder_set_weight_map(d, me, ms, 3, 3), CUDAQ_MWPM_OK);
  assert_int_equal(cudaq_mwpm_decode_mapped(d, ev, 2, NULL, &r), CUDAQ_MWPM_ERR_INVALID_ARG);
  assert_int_equal(cudaq_mwpm_decode_mapped(d, ev, 2, v, NULL), CUDAQ_MWPM_ERR_INVALID_ARG);
  assert_int_equal(cudaq_mwpm_decode_mapped(d, NULL, 2, v, &r), CUDAQ_MWPM_ERR_INVALID_ARG);
  /* 0-1 and 1-2 weigh 9 (the sign ignored): as test_weighted_errors, all
   * three events (1 from the folded edge) go to the boundary. */
  assert_int_equal(cudaq_mwpm_decode_mapped(d, ev, 2, v, &r), CUDAQ_MWPM_OK);
  assert_int_equal(r.obs_mask, 1u ^ 2u);
  assert_true(fabs(r.weight - 10.0) < 1e-6);
  /* A NaN or infinity on an edge the matching reaches refuses the shot; on
   * 3-4, which it does not reach, it is never read. */
  float bad[2] = {NAN, INFINITY};
  for (int i = 0; i < 2; i++) {
    float vb[3] = {9.0f, bad[i], 0.0f};
    assert_int_equal(cudaq_mwpm_decode_mapped(d, ev, 2, vb, &r), CUDAQ_MWPM_ERR_INVALID_ARG);
    float vf[3] = {9.0f, 9.0f, bad[i]};
    assert_int_equal(cudaq_mwpm_decode_mapped(d, ev, 2, vf, &r), CUDAQ_MWPM_OK);
    assert_int_equal(r.obs_mask, 1u ^ 2u);
    uint32_t ev34[2] = {3, 4};
    assert_int_equal(cudaq_mwpm_decode_mapped(d, ev34, 2, vf, &r), CUDAQ_MWPM_ERR_INVALID_ARG);
  }
  /* Listed weights, then mapped, then plain, in turns on one decoder. */
  uint32_t idx[1] = {(uint32_t)e01};
  double w05[1] = {0.5};
  assert_int_equal(cudaq_mwpm_decode_weighted(d, ev, 2, idx, w05, 1, &r), CUDAQ_MWPM_OK);
  assert_true(fabs(r.weight - 1.5) < 1e-6); /* 0-1 at 0.5, 1-2 at 1 */
  assert_int_equal(cudaq_mwpm_decode_mapped(d, ev, 2, v, &r), CUDAQ_MWPM_OK);
  assert_true(fabs(r.weight - 10.0) < 1e-6);
  assert_int_equal(cudaq_mwpm_decode_weighted(d, ev, 2, idx, w05, 1, &r), CUDAQ_MWPM_OK);
  assert_true(fabs(r.weight - 1.5) < 1e-6); /* 1-2 back to the graph's 1, not the mapped 9 */
  assert_int_equal(cudaq_mwpm_decode_mapped(d, ev, 2, v, &r), CUDAQ_MWPM_OK);
  assert_int_equal(cudaq_mwpm_decode(d, ev, 2, &r), CUDAQ_MWPM_OK);
  assert_int_equal(r.obs_mask, want.obs_mask);
  assert_true(fabs(r.weight - want.weight) < 1e-9);
  /* A new map replaces the old; num 0 removes it. */
  assert_int_equal(cudaq_mwpm_decoder_set_weight_map(d, me + 1, ms, 1, 1), CUDAQ_MWPM_OK);
  float v1[1] = {0.25f};
  assert_int_equal(cudaq_mwpm_decode_mapped(d, ev, 2, v1, &r), CUDAQ_MWPM_OK);
  assert_true(fabs(r.weight - 1.25) < 1e-6); /* 0-1 the graph's 1, 1-2 0.25 */
  assert_int_equal(cudaq_mwpm_decoder_set_weight_map(d, NULL, NULL, 0, 0), CUDAQ_MWPM_OK);
  assert_int_equal(cudaq_mwpm_decode_mapped(d, ev, 2, v1, &r), CUDAQ_MWPM_ERR_INVALID_ARG);
  assert_int_equal(cudaq_mwpm_decode(d, ev, 2, &r), CUDAQ_MWPM_OK);
  assert_true(fabs(r.weight - want.weight) < 1e-9);
  cudaq_mwpm_decoder_destroy(dp);
  cudaq_mwpm_decoder_destroy(d);
  cudaq_mwpm_graph_destroy(plain);
  cudaq_mwpm_graph_destroy(g);
}

static void test_api_errors(void **state) {
  (void)state;
  cudaq_mwpm_edge_t e[2] = {{0, 1, 1.0, 1}, {1, -1, 2.0, 0}};
  cudaq_mwpm_graph_t *g = NULL;
  assert_int_equal(cudaq_mwpm_graph_from_edges(2, 1, e, 2, NULL, NULL), CUDAQ_MWPM_ERR_INVALID_ARG);
  cudaq_mwpm_edge_t bad = {0, 0, 1.0, 0};
  assert_int_equal(cudaq_mwpm_graph_from_edges(2, 1, &bad, 1, NULL, &g), CUDAQ_MWPM_ERR_INVALID_ARG);
  bad.v = 5;
  assert_int_equal(cudaq_mwpm_graph_from_edges(2, 1, &bad, 1, NULL, &g), CUDAQ_MWPM_ERR_INVALID_ARG);
  bad.v = 1;
  bad.weight = NAN;
  assert_int_equal(cudaq_mwpm_graph_from_edges(2, 1, &bad, 1, NULL, &g), CUDAQ_MWPM_ERR_INVALID_ARG);
  assert_int_equal(cudaq_mwpm_graph_from_edges(2, 1, e, 2, NULL, &g), CUDAQ_MWPM_OK);
  cudaq_mwpm_decoder_t *d = NULL;
  assert_int_equal(cudaq_mwpm_decoder_create(NULL, &d), CUDAQ_MWPM_ERR_INVALID_ARG);
  assert_int_equal(cudaq_mwpm_decoder_create(g, &d), CUDAQ_MWPM_OK);
  cudaq_mwpm_result_t r;
  uint32_t ev[3] = {0, 1, 2};
  assert_int_equal(cudaq_mwpm_decode(d, ev, 3, &r), CUDAQ_MWPM_ERR_OUT_OF_RANGE);
  assert_int_equal(cudaq_mwpm_decode(d, NULL, 1, &r), CUDAQ_MWPM_ERR_INVALID_ARG);
  assert_int_equal(cudaq_mwpm_decode(d, ev, 0, &r), CUDAQ_MWPM_OK);
  assert_int_equal(r.num_pairs, 0);
  assert_int_equal(cudaq_mwpm_decode(d, ev, 2, &r), CUDAQ_MWPM_OK);
  assert_int_equal(r.obs_mask, 1);
  assert_true(r.weight == 1.0);
  uint32_t twice[2] = {1, 1};
  assert_int_equal(cudaq_mwpm_decode(d, twice, 2, &r), CUDAQ_MWPM_OK);
  assert_int_equal(r.num_pairs, 0);
  uint8_t dense[2] = {0, 1};
  assert_int_equal(cudaq_mwpm_decode_dense(d, dense, &r), CUDAQ_MWPM_OK);
  assert_true(r.weight == 2.0);
  size_t ne;
  assert_int_equal(cudaq_mwpm_decoder_edges(d, NULL, 0, &ne), CUDAQ_MWPM_ERR_TOO_LARGE);
  assert_int_equal(ne, 1);
  cudaq_mwpm_decoder_destroy(d);
  cudaq_mwpm_graph_destroy(g);
  /* No boundary, odd number of events. */
  assert_int_equal(cudaq_mwpm_graph_from_edges(2, 1, e, 1, NULL, &g), CUDAQ_MWPM_OK);
  assert_int_equal(cudaq_mwpm_decoder_create(g, &d), CUDAQ_MWPM_OK);
  assert_int_equal(cudaq_mwpm_decode(d, ev, 1, &r), CUDAQ_MWPM_ERR_NO_SOLUTION);
  assert_int_equal(cudaq_mwpm_decode(d, ev, 2, &r), CUDAQ_MWPM_OK); /* state was cleaned */
  cudaq_mwpm_decoder_destroy(d);
  cudaq_mwpm_graph_destroy(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_api_errors),       cmocka_unit_test(test_random_sparse),
      cmocka_unit_test(test_random_dense),     cmocka_unit_test(test_random_no_boundary),
      cmocka_unit_test(test_random_ties),      cmocka_unit_test(test_random_negative),
      cmocka_unit_test(test_random_larger),    cmocka_unit_test(test_weighted_random),
      cmocka_unit_test(test_weighted_errors),  cmocka_unit_test(test_mapped_random),
      cmocka_unit_test(test_mapped_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
