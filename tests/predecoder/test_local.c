/* The rule-based local predecoder on small hand-built matching graphs: which
 * pairs it removes, which events it keeps (boundary, crowded, unlikely
 * edges), the frame, argument checks, order independence and state reset
 * between shots, and a randomized comparison with a direct restatement of
 * the rule. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cudaq/qec/dem.h"
#include "cudaq/qec/mwpm.h"
#include "cudaq/qec/predecoder.h"

/* Weight of an error of probability p. */
static double wt(double p) { return log((1.0 - p) / p); }

/* A chain 0 - 1 - ... - (n-1), both ends also joined to the boundary; edge
 * i-(i+1) has weight w[i] and flips observable bit (i % 3). */
static cudaq_mwpm_graph_t *chain(uint32_t n, const double *w) {
  cudaq_mwpm_edge_t e[64];
  size_t m = 0;
  e[m++] = (cudaq_mwpm_edge_t){0, CUDAQ_MWPM_BOUNDARY, 2.0, 0};
  e[m++] = (cudaq_mwpm_edge_t){(int32_t)n - 1, CUDAQ_MWPM_BOUNDARY, 2.0, 0};
  for (uint32_t i = 0; i + 1 < n; i++)
    e[m++] = (cudaq_mwpm_edge_t){(int32_t)i, (int32_t)i + 1, w ? w[i] : 2.0, 1ull << (i % 3)};
  cudaq_mwpm_graph_t *g = NULL;
  assert_int_equal(cudaq_mwpm_graph_from_edges(n, 3, e, m, NULL, &g), CUDAQ_MWPM_OK);
  return g;
}

static cudaq_predecoder_t *local_of(const cudaq_mwpm_graph_t *g, double factor) {
  cudaq_local_predecoder_options_t o;
  assert_int_equal(cudaq_local_predecoder_options_init(&o), CUDAQ_PREDECODER_OK);
  o.weight_factor = factor;
  cudaq_predecoder_t *p = NULL;
  cudaq_predecoder_error_t err;
  assert_int_equal(cudaq_predecoder_create_local(g, &o, &p, &err), CUDAQ_PREDECODER_OK);
  return p;
}

/* Runs one shot; returns the residual count, residual sorted into res. */
static size_t run(cudaq_predecoder_t *p, const uint32_t *ev, size_t n, uint32_t *res,
                  uint64_t *frame) {
  size_t nr = 99;
  cudaq_predecoder_error_t err;
  assert_int_equal(cudaq_predecoder_run(p, ev, n, res, &nr, frame, &err), CUDAQ_PREDECODER_OK);
  for (size_t i = 1; i < nr; i++)  /* insertion sort, for comparisons */
    for (size_t j = i; j > 0 && res[j - 1] > res[j]; j--) {
      uint32_t t = res[j];
      res[j] = res[j - 1];
      res[j - 1] = t;
    }
  return nr;
}

static void test_isolated_pair_removed(void **state) {
  (void)state;
  cudaq_mwpm_graph_t *g = chain(5, NULL);
  cudaq_predecoder_t *p = local_of(g, 1.0);
  uint32_t ev[] = {2, 1}, res[8];
  uint64_t frame = 99;
  assert_int_equal(run(p, ev, 2, res, &frame), 0);
  assert_int_equal(frame, 1ull << 1);  /* edge 1-2 flips bit 1 */
  cudaq_predecoder_destroy(p);
  cudaq_mwpm_graph_destroy(g);
}

static void test_crowded_kept(void **state) {
  (void)state;
  cudaq_mwpm_graph_t *g = chain(6, NULL);
  cudaq_predecoder_t *p = local_of(g, 1.0);
  /* 2 has two neighbouring events: 1 and 3 both see only 2, but 2 does not
   * choose either, so nothing is removed. */
  uint32_t ev[] = {1, 2, 3}, res[8];
  uint64_t frame = 99;
  assert_int_equal(run(p, ev, 3, res, &frame), 3);
  assert_int_equal(res[0], 1);
  assert_int_equal(res[1], 2);
  assert_int_equal(res[2], 3);
  assert_int_equal(frame, 0);
  /* Four in a row: the inner two have two neighbouring events each. */
  uint32_t ev4[] = {1, 2, 3, 4};
  assert_int_equal(run(p, ev4, 4, res, &frame), 4);
  assert_int_equal(frame, 0);
  cudaq_predecoder_destroy(p);
  cudaq_mwpm_graph_destroy(g);
}

static void test_boundary_event_kept(void **state) {
  (void)state;
  cudaq_mwpm_graph_t *g = chain(5, NULL);
  cudaq_predecoder_t *p = local_of(g, 5.0);
  /* An event with no neighbouring event, next to the boundary: kept. */
  uint32_t ev[] = {0}, res[8];
  uint64_t frame = 99;
  assert_int_equal(run(p, ev, 1, res, &frame), 1);
  assert_int_equal(res[0], 0);
  assert_int_equal(frame, 0);
  /* Two events two edges apart: neither has a neighbouring event. */
  uint32_t ev2[] = {1, 3};
  assert_int_equal(run(p, ev2, 2, res, &frame), 2);
  assert_int_equal(frame, 0);
  cudaq_predecoder_destroy(p);
  cudaq_mwpm_graph_destroy(g);
}

static void test_unlikely_edge_kept(void **state) {
  (void)state;
  /* Edge 1-2 is ten times less likely than the others. */
  double w[] = {wt(0.01), wt(0.001), wt(0.01), wt(0.01)};
  cudaq_mwpm_graph_t *g = chain(5, w);
  cudaq_predecoder_t *p = local_of(g, 1.3);
  assert_true(fabs(cudaq_predecoder_local_threshold(p) - 1.3 * wt(0.01)) < 1e-12);
  uint32_t ev[] = {1, 2}, res[8];
  uint64_t frame = 99;
  assert_int_equal(run(p, ev, 2, res, &frame), 2);
  assert_int_equal(frame, 0);
  uint32_t ev2[] = {2, 3}; /* likely edge 2-3: removed, bit 2 */
  assert_int_equal(run(p, ev2, 2, res, &frame), 0);
  assert_int_equal(frame, 1ull << 2);
  cudaq_predecoder_destroy(p);
  /* A factor large enough takes the unlikely edge too. */
  p = local_of(g, 2.0);
  assert_int_equal(run(p, ev, 2, res, &frame), 0);
  assert_int_equal(frame, 1ull << 1);
  cudaq_predecoder_destroy(p);
  cudaq_mwpm_graph_destroy(g);
}

static void test_two_pairs_frame_xor(void **state) {
  (void)state;
  cudaq_mwpm_graph_t *g = chain(9, NULL);
  cudaq_predecoder_t *p = local_of(g, 1.0);
  /* Pairs 0-1 (bit 0) and 3-4 (bit 0): their frame bits cancel. With 6, 7
   * and 8 as well, 7 has two neighbouring events, so 6, 7 and 8 stay. */
  uint32_t ev[] = {0, 1, 3, 4}, res[16];
  uint64_t frame = 99;
  assert_int_equal(run(p, ev, 4, res, &frame), 0);
  assert_int_equal(frame, 0);
  uint32_t ev2[] = {0, 1, 3, 4, 6, 7, 8};
  assert_int_equal(run(p, ev2, 7, res, &frame), 3);
  assert_int_equal(res[0], 6);
  assert_int_equal(res[2], 8);
  assert_int_equal(frame, 0);
  uint32_t ev3[] = {4, 5, 1, 2}; /* 4-5 bit 1, 1-2 bit 1 */
  assert_int_equal(run(p, ev3, 4, res, &frame), 0);
  assert_int_equal(frame, 0);
  uint32_t ev4[] = {5, 4, 1, 0}; /* 4-5 bit 1, 0-1 bit 0 */
  assert_int_equal(run(p, ev4, 4, res, &frame), 0);
  assert_int_equal(frame, 3);
  cudaq_predecoder_destroy(p);
  cudaq_mwpm_graph_destroy(g);
}

static void test_duplicates_cancel_and_order(void **state) {
  (void)state;
  cudaq_mwpm_graph_t *g = chain(6, NULL);
  cudaq_predecoder_t *p = local_of(g, 1.0);
  uint32_t res[16];
  uint64_t f1, f2;
  /* 1 listed twice cancels: the shot is {2, 3}, an isolated pair. */
  uint32_t ev[] = {1, 2, 1, 3};
  assert_int_equal(run(p, ev, 4, res, &f1), 0);
  assert_int_equal(f1, 1ull << 2);
  /* Listed three times: present once. {1, 2, 3} is crowded. */
  uint32_t ev3[] = {1, 1, 2, 1, 3};
  assert_int_equal(run(p, ev3, 5, res, &f1), 3);
  assert_int_equal(res[0], 1);
  /* Any order gives the same result. */
  uint32_t a[] = {0, 1, 4, 5}, b[] = {5, 1, 4, 0};
  uint32_t ra[16], rb[16];
  size_t na = run(p, a, 4, ra, &f1), nb = run(p, b, 4, rb, &f2);
  assert_int_equal(na, nb);
  assert_int_equal(f1, f2);
  assert_memory_equal(ra, rb, na * sizeof *ra);
  cudaq_predecoder_destroy(p);
  cudaq_mwpm_graph_destroy(g);
}

static void test_state_reset_between_shots(void **state) {
  (void)state;
  cudaq_mwpm_graph_t *g = chain(8, NULL);
  cudaq_predecoder_t *p = local_of(g, 1.0);
  uint32_t a[] = {2, 3}, b[] = {1, 2, 3};
  uint32_t res[16];
  uint64_t f;
  for (int i = 0; i < 3; i++) {
    assert_int_equal(run(p, a, 2, res, &f), 0);
    assert_int_equal(f, 1ull << 2);
    assert_int_equal(run(p, b, 3, res, &f), 3);
    assert_int_equal(f, 0);
    assert_int_equal(run(p, a, 0, res, &f), 0); /* an empty shot */
    assert_int_equal(f, 0);
    assert_int_equal(run(p, NULL, 0, res, &f), 0);
  }
  cudaq_predecoder_destroy(p);
  cudaq_mwpm_graph_destroy(g);
}

static void test_from_dem(void **state) {
  (void)state;
  /* Observables come from the DEM; a boundary edge is never a pair. */
  const char *text = "error(0.01) D0 D1 L1\n"
                     "error(0.01) D1 D2\n"
                     "error(0.01) D2 D3 L0\n"
                     "error(0.01) D0\n"
                     "error(0.01) D3 L0 L1\n";
  cudaq_dem_t *dem = NULL;
  cudaq_mwpm_error_t merr;
  assert_int_equal(cudaq_dem_parse(text, strlen(text), &dem, &merr), CUDAQ_MWPM_OK);
  cudaq_mwpm_graph_t *g = NULL;
  assert_int_equal(cudaq_mwpm_graph_from_dem(dem, NULL, &g, &merr), CUDAQ_MWPM_OK);
  cudaq_dem_destroy(dem);
  cudaq_predecoder_t *p = local_of(g, 1.3);
  assert_int_equal(cudaq_predecoder_num_detectors(p), 4);
  assert_int_equal(cudaq_predecoder_num_observables(p), 2);
  uint32_t ev[] = {0, 1}, ev2[] = {3, 2}, ev3[] = {3}, res[8];
  uint64_t f;
  assert_int_equal(run(p, ev, 2, res, &f), 0);
  assert_int_equal(f, 2);
  assert_int_equal(run(p, ev2, 2, res, &f), 0);
  assert_int_equal(f, 1);
  assert_int_equal(run(p, ev3, 1, res, &f), 1);
  assert_int_equal(f, 0);
  cudaq_predecoder_destroy(p);
  cudaq_mwpm_graph_destroy(g);
}

static void test_bad_arguments(void **state) {
  (void)state;
  cudaq_mwpm_graph_t *g = chain(4, NULL);
  cudaq_predecoder_t *p = NULL;
  cudaq_predecoder_error_t err;
  cudaq_local_predecoder_options_t o;
  assert_int_equal(cudaq_local_predecoder_options_init(NULL), CUDAQ_PREDECODER_ERR_INVALID_ARG);
  cudaq_local_predecoder_options_init(&o);
  assert_true(o.weight_factor == CUDAQ_LOCAL_PREDECODER_DEFAULT_WEIGHT_FACTOR);
  assert_int_equal(cudaq_predecoder_create_local(NULL, &o, &p, &err), CUDAQ_PREDECODER_ERR_INVALID_ARG);
  assert_non_null(strstr(err.message, "graph"));
  assert_int_equal(cudaq_predecoder_create_local(g, &o, NULL, NULL), CUDAQ_PREDECODER_ERR_INVALID_ARG);
  double bad[] = {0.0, -1.0, NAN, INFINITY};
  for (size_t i = 0; i < 4; i++) {
    o.weight_factor = bad[i];
    assert_int_equal(cudaq_predecoder_create_local(g, &o, &p, &err), CUDAQ_PREDECODER_ERR_INVALID_ARG);
    assert_null(p);
    assert_non_null(strstr(err.message, "weight factor"));
  }
  p = local_of(g, 1.0);
  uint32_t ev[] = {1, 4}, res[8];
  size_t nr;
  uint64_t f;
  assert_int_equal(cudaq_predecoder_run(p, ev, 2, res, &nr, &f, &err), CUDAQ_PREDECODER_ERR_OUT_OF_RANGE);
  assert_non_null(strstr(err.message, "detector 4 out of range"));
  /* The shot that failed left no state behind. */
  uint32_t ok[] = {1, 2};
  assert_int_equal(run(p, ok, 2, res, &f), 0);
  assert_int_equal(cudaq_predecoder_run(NULL, ev, 1, res, &nr, &f, &err), CUDAQ_PREDECODER_ERR_INVALID_ARG);
  assert_int_equal(cudaq_predecoder_run(p, NULL, 1, res, &nr, &f, &err), CUDAQ_PREDECODER_ERR_INVALID_ARG);
  assert_non_null(strstr(err.message, "events"));
  assert_int_equal(cudaq_predecoder_run(p, ev, 1, NULL, &nr, &f, &err), CUDAQ_PREDECODER_ERR_INVALID_ARG);
  assert_int_equal(cudaq_predecoder_run(p, ev, 1, res, NULL, &f, &err), CUDAQ_PREDECODER_ERR_INVALID_ARG);
  assert_int_equal(cudaq_predecoder_run(p, ev, 1, res, &nr, NULL, &err), CUDAQ_PREDECODER_ERR_INVALID_ARG);
  assert_true(isnan(cudaq_predecoder_local_threshold(NULL)));
  assert_int_equal(cudaq_predecoder_num_detectors(NULL), 0);
  cudaq_predecoder_destroy(p);
  cudaq_predecoder_destroy(NULL);
  cudaq_mwpm_graph_destroy(g);
}

/* The rule restated directly, O(n^2) per shot, for random graphs. */
static void test_random_against_restatement(void **state) {
  (void)state;
  srand(20261124);
  for (int trial = 0; trial < 300; trial++) {
    uint32_t n = 3 + (uint32_t)(rand() % 20);
    cudaq_mwpm_edge_t e[200];
    size_t m = 0;
    double wmat[24][24];
    uint64_t omat[24][24];
    for (uint32_t i = 0; i < n; i++)
      for (uint32_t j = 0; j < n; j++)
        wmat[i][j] = -1.0;
    for (uint32_t i = 0; i < n; i++) {
      if (rand() % 3 == 0)
        e[m++] = (cudaq_mwpm_edge_t){(int32_t)i, CUDAQ_MWPM_BOUNDARY, 0.5 + rand() % 8, 0};
      for (uint32_t j = i + 1; j < n; j++)
        if (rand() % 4 == 0 && m < 200) {
          double w = 1.0 + rand() % 4;
          uint64_t o = (uint64_t)(rand() % 4);
          e[m++] = (cudaq_mwpm_edge_t){(int32_t)i, (int32_t)j, w, o};
          wmat[i][j] = wmat[j][i] = w;
          omat[i][j] = omat[j][i] = o;
        }
    }
    cudaq_mwpm_graph_t *g = NULL;
    assert_int_equal(cudaq_mwpm_graph_from_edges(n, 2, e, m, NULL, &g), CUDAQ_MWPM_OK);
    double factor = 1.0 + (rand() % 3) * 0.5;
    cudaq_predecoder_t *p = local_of(g, factor);
    double wmin = 0.0;
    for (size_t i = 0; i < m; i++)
      if (e[i].v >= 0 && (wmin == 0.0 || e[i].weight < wmin))
        wmin = e[i].weight;
    double thr = factor * wmin;
    for (int shot = 0; shot < 20; shot++) {
      int ev_set[24] = {0};
      uint32_t ev[24], res[24];
      size_t ne = 0;
      for (uint32_t i = 0; i < n; i++)
        if (rand() % 3 == 0) {
          ev_set[i] = 1;
          ev[ne++] = i;
        }
      for (size_t i = ne; i > 1; i--) { /* shuffle */
        size_t j = (size_t)rand() % i;
        uint32_t t = ev[i - 1];
        ev[i - 1] = ev[j];
        ev[j] = t;
      }
      int single[24];
      for (uint32_t u = 0; u < n; u++) {
        single[u] = -1;
        int cnt = 0;
        for (uint32_t v = 0; v < n; v++)
          if (ev_set[u] && ev_set[v] && wmat[u][v] >= 0) {
            cnt++;
            single[u] = (int)v;
          }
        if (cnt != 1 || wmat[u][single[u]] > thr)
          single[u] = -1;
      }
      uint64_t want_f = 0;
      uint32_t want[24];
      size_t nw = 0;
      for (uint32_t u = 0; u < n; u++) {
        if (!ev_set[u])
          continue;
        int v = single[u];
        if (v >= 0 && single[v] == (int)u) {
          if ((int)u < v)
            want_f ^= omat[u][v];
          continue;
        }
        want[nw++] = u;
      }
      uint64_t f;
      size_t nr = run(p, ev, ne, res, &f);
      assert_int_equal(nr, nw);
      assert_memory_equal(res, want, nw * sizeof *res);
      assert_int_equal(f, want_f);
    }
    cudaq_predecoder_destroy(p);
    cudaq_mwpm_graph_destroy(g);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_isolated_pair_removed),
      cmocka_unit_test(test_crowded_kept),
      cmocka_unit_test(test_boundary_event_kept),
      cmocka_unit_test(test_unlikely_edge_kept),
      cmocka_unit_test(test_two_pairs_frame_xor),
      cmocka_unit_test(test_duplicates_cancel_and_order),
      cmocka_unit_test(test_state_reset_between_shots),
      cmocka_unit_test(test_from_dem),
      cmocka_unit_test(test_bad_arguments),
      cmocka_unit_test(test_random_against_restatement),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
