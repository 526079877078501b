/* Correlated matching (cudaq_mwpm_decode_correlated) on small hand-made DEMs
 * where the correlation changes the answer; every expectation below was also
 * checked against PyMatching 2.4 with enable_correlations=True (same
 * predictions and weights). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cudaq/qec/dem.h"
#include "cudaq/qec/mwpm.h"

static double w_of(double p) { return log((1.0 - p) / p); }

typedef struct fixture {
  cudaq_mwpm_graph_t *g;
  cudaq_mwpm_decoder_t *d;
} fixture_t;

static fixture_t make(const char *text, int correlations) {
  cudaq_dem_t *dem = NULL;
  cudaq_mwpm_error_t err;
  assert_int_equal(cudaq_dem_parse(text, strlen(text), &dem, &err), CUDAQ_MWPM_OK);
  cudaq_mwpm_graph_options_t o;
  cudaq_mwpm_graph_options_init(&o);
  o.enable_correlations = correlations;
  fixture_t f = {NULL, NULL};
  assert_int_equal(cudaq_mwpm_graph_from_dem(dem, &o, &f.g, &err), CUDAQ_MWPM_OK);
  cudaq_dem_destroy(dem);
  assert_int_equal(cudaq_mwpm_graph_has_correlations(f.g), !!correlations);
  assert_int_equal(cudaq_mwpm_decoder_create(f.g, &f.d), CUDAQ_MWPM_OK);
  return f;
}

static void drop(fixture_t *f) {
  cudaq_mwpm_decoder_destroy(f->d);
  cudaq_mwpm_graph_destroy(f->g);
}

static cudaq_mwpm_result_t dec(fixture_t *f, const uint32_t *ev, size_t n, int correlated) {
  cudaq_mwpm_result_t r;
  cudaq_mwpm_status_t st = correlated ? cudaq_mwpm_decode_correlated(f->d, ev, n, &r)
                                      : cudaq_mwpm_decode(f->d, ev, n, &r);
  assert_int_equal(st, CUDAQ_MWPM_OK);
  return r;
}

/* A Y-like error fires D0-D1 and D2-D3 together (p = 0.1). D2 and D3 also
 * reach the boundary (p = 0.3 each; L0 on D2's). Plain matching of {D2, D3}
 * takes the two boundary edges (2 x 0.847 < 2.197): L0 flips. Correlated:
 * the first pass must use D0-D1, so D2-D3 becomes likely (q = 0.5, weight 0):
 * the second pass takes it, L0 does not flip. */
static const char *Y_DEM = "error(0.1) D0 D1 ^ D2 D3\n"
                           "error(0.3) D2 L0\n"
                           "error(0.3) D3\n";

static void test_correlation_changes_answer(void **state) {
  (void)state;
  fixture_t f = make(Y_DEM, 1);
  assert_int_equal(cudaq_mwpm_graph_num_correlation_rules(f.g), 2);
  uint32_t all[] = {0, 1, 2, 3};
  cudaq_mwpm_result_t plain = dec(&f, all, 4, 0);
  assert_int_equal(plain.obs_mask, 1);
  assert_true(fabs(plain.weight - (w_of(0.1) + 2 * w_of(0.3))) < 1e-5);
  cudaq_mwpm_result_t corr = dec(&f, all, 4, 1);
  assert_int_equal(corr.obs_mask, 0);
  assert_true(fabs(corr.weight - w_of(0.1)) < 1e-5); /* D2-D3 now weighs 0 */
  /* The lowered weights are the decoder's: the edges of the last decode use them. */
  uint32_t edges[8];
  size_t ne = 0;
  assert_int_equal(cudaq_mwpm_decoder_edges(f.d, edges, 8, &ne), CUDAQ_MWPM_OK);
  assert_int_equal(ne, 2);
  /* A plain decode afterwards sees the graph's weights again. */
  cudaq_mwpm_result_t again = dec(&f, all, 4, 0);
  assert_int_equal(again.obs_mask, 1);
  assert_true(fabs(again.weight - plain.weight) < 1e-9);
  /* Without D0-D1 in the first pass nothing changes. */
  uint32_t two[] = {2, 3};
  cudaq_mwpm_result_t a = dec(&f, two, 2, 0), b = dec(&f, two, 2, 1);
  assert_int_equal(a.obs_mask, 1);
  assert_int_equal(b.obs_mask, 1);
  assert_true(fabs(a.weight - b.weight) < 1e-9);
  /* Repeated correlated decodes give the same answer (state restored). */
  for (int i = 0; i < 3; i++) {
    cudaq_mwpm_result_t c = dec(&f, all, 4, 1);
    assert_int_equal(c.obs_mask, 0);
  }
  /* The dense variant agrees. */
  uint8_t dense[4] = {1, 1, 1, 1};
  cudaq_mwpm_result_t dd;
  assert_int_equal(cudaq_mwpm_decode_dense_correlated(f.d, dense, &dd), CUDAQ_MWPM_OK);
  assert_int_equal(dd.obs_mask, 0);
  assert_true(fabs(dd.weight - corr.weight) < 1e-9);
  drop(&f);
}

/* The same edges as independent errors: no rules, correlated = plain. */
static void test_independent_errors_have_no_rules(void **state) {
  (void)state;
  fixture_t f = make("error(0.1) D0 D1\nerror(0.1) D2 D3\nerror(0.3) D2 L0\nerror(0.3) D3\n", 1);
  assert_int_equal(cudaq_mwpm_graph_num_correlation_rules(f.g), 0);
  uint32_t all[] = {0, 1, 2, 3};
  cudaq_mwpm_result_t corr = dec(&f, all, 4, 1);
  assert_int_equal(corr.obs_mask, 1);
  drop(&f);
}

/* The conditional probability: D0-D1 has P = 0.01 (with D2-D3) xor 0.09
 * (alone), so given D0-D1, D2-D3 happened with q = 0.01 / P(D0-D1). D2-D3's
 * own p = 0.01 xor 0.001 (weight 4.50) is lowered to ln((1-q)/q) = 2.177,
 * under the boundary pair (2 x 1.735): the answer changes, and the weight is
 * the lowered one. */
/* The rest of that DEM, after its correlated error (also used below). */
#define COND_REST "error(0.09) D0 D1\nerror(0.15) D2 L0\nerror(0.15) D3\nerror(0.001) D2 D3\n"
static void test_conditional_weight(void **state) {
  (void)state;
  fixture_t f = make("error(0.01) D0 D1 ^ D2 D3\n" COND_REST, 1);
  double p01 = 0.01 * 0.91 + 0.09 * 0.99, q = 0.01 / p01;
  uint32_t all[] = {0, 1, 2, 3};
  cudaq_mwpm_result_t plain = dec(&f, all, 4, 0);
  assert_int_equal(plain.obs_mask, 1);
  cudaq_mwpm_result_t corr = dec(&f, all, 4, 1);
  assert_int_equal(corr.obs_mask, 0);
  assert_true(fabs(corr.weight - (w_of(p01) + w_of(q))) < 1e-5);
  drop(&f);
}

/* A component repeated in one error ("A ^ B ^ A"): the edge's marginal, by
 * which B's conditional probability is divided, takes that error's p once per
 * component and twice more per pair of equal components, as PyMatching 2.4's
 * (its joint table's diagonal): P(D0-D1) = 0.01 x 4 xor 0.09, P(D0-D1 and
 * D2-D3) = 0.01 xor 0.01. PyMatching's weight for all four events: 3.769354
 * (with the marginal of the components alone it would be 3.6035). */
static void test_repeated_component_marginal(void **state) {
  (void)state;
  fixture_t f = make("error(0.01) D0 D1 ^ D2 D3 ^ D0 D1\n" COND_REST, 1);
#define XOR(a, b) ((a) * (1.0 - (b)) + (b) * (1.0 - (a)))
  const double edge = XOR(XOR(0.01, 0.01), 0.09);                      /* the merged edge's p */
  const double marg = XOR(XOR(XOR(XOR(0.01, 0.01), 0.01), 0.01), 0.09); /* its joint-table diagonal */
  const double q = XOR(0.01, 0.01) / marg;
#undef XOR
  uint32_t all[] = {0, 1, 2, 3};
  assert_int_equal(dec(&f, all, 4, 0).obs_mask, 1);
  cudaq_mwpm_result_t corr = dec(&f, all, 4, 1);
  assert_int_equal(corr.obs_mask, 0);
  assert_true(fabs(corr.weight - (w_of(edge) + w_of(q))) < 1e-5);
  assert_true(fabs(corr.weight - 3.769354) < 1e-5);
  drop(&f);
}

/* Boundary components: "error(p) D0 ^ D2 L0" correlates D0's and D2's
 * boundary edges. Events {D0, D2}: plain matching sends D2 to the boundary
 * through D3 (2 x 0.847 < 2.944), correlated through its own boundary edge
 * (lowered to 0), which flips L0. */
static void test_boundary_components(void **state) {
  (void)state;
  fixture_t f = make("error(0.05) D0 ^ D2 L0\nerror(0.3) D2 D3\nerror(0.3) D3\n", 1);
  uint32_t ev[] = {0, 2};
  assert_int_equal(dec(&f, ev, 2, 0).obs_mask, 0);
  cudaq_mwpm_result_t corr = dec(&f, ev, 2, 1);
  assert_int_equal(corr.obs_mask, 1);
  assert_true(fabs(corr.weight - w_of(0.05)) < 1e-5);
  drop(&f);
}

/* Components are grouped by error as executed: in a repeat block each
 * repetition is its own error (2 rules per error, not 2 x 2 x 3). */
static void test_repeat_groups_by_error(void **state) {
  (void)state;
  fixture_t f = make("repeat 2 {\n"
                     "  error(0.1) D0 D1 ^ D2 D3\n"
                     "  error(0.3) D2 L0\n"
                     "  error(0.3) D3\n"
                     "  shift_detectors 4\n"
                     "}\n",
                     1);
  assert_int_equal(cudaq_mwpm_graph_num_correlation_rules(f.g), 4);
  /* Block 0 correlated (D0-D1 used), block 1 not (D4, D5 quiet). */
  uint32_t ev[] = {0, 1, 2, 3, 6, 7};
  assert_int_equal(dec(&f, ev, 6, 0).obs_mask, 0); /* L0 flipped twice */
  assert_int_equal(dec(&f, ev, 6, 1).obs_mask, 1);
  drop(&f);
}

static void test_refusals(void **state) {
  (void)state;
  /* No correlations at creation: the correlated decode is refused. */
  fixture_t f = make(Y_DEM, 0);
  uint32_t all[] = {0, 1, 2, 3};
  cudaq_mwpm_result_t r;
  assert_int_equal(cudaq_mwpm_decode_correlated(f.d, all, 4, &r), CUDAQ_MWPM_ERR_INVALID_ARG);
  uint8_t dense[4] = {1, 1, 1, 1};
  assert_int_equal(cudaq_mwpm_decode_dense_correlated(f.d, dense, &r),
                   CUDAQ_MWPM_ERR_INVALID_ARG);
  assert_int_equal(cudaq_mwpm_graph_num_correlation_rules(f.g), 0);
  drop(&f);
  assert_int_equal(cudaq_mwpm_decode_correlated(NULL, all, 4, &r), CUDAQ_MWPM_ERR_INVALID_ARG);
  /* Errors of probability > 0.5, as PyMatching, are refused with the line. */
  const char *text = "error(0.1) D0 D1\nerror(0.6) D1 D2\n";
  cudaq_dem_t *dem = NULL;
  cudaq_mwpm_error_t err;
  assert_int_equal(cudaq_dem_parse(text, strlen(text), &dem, &err), CUDAQ_MWPM_OK);
  cudaq_mwpm_graph_options_t o;
  cudaq_mwpm_graph_options_init(&o);
  assert_int_equal(o.enable_correlations, 0);
  o.enable_correlations = 1;
  cudaq_mwpm_graph_t *g = (cudaq_mwpm_graph_t *)0x1;
  memset(&err, 0, sizeof err);
  assert_int_equal(cudaq_mwpm_graph_from_dem(dem, &o, &g, &err), CUDAQ_MWPM_ERR_INVALID_ARG);
  assert_null(g);
  assert_int_equal(err.line, 2);
  assert_non_null(strstr(err.message, "0.5"));
  cudaq_dem_destroy(dem);
  /* Explicit edges carry no decomposition. */
  cudaq_mwpm_edge_t e = {0, 1, 1.0, 0};
  assert_int_equal(cudaq_mwpm_graph_from_edges(2, 0, &e, 1, &o, &g), CUDAQ_MWPM_ERR_INVALID_ARG);
  /* Out-of-range events pass through the first decode's checks. */
  f = make(Y_DEM, 1);
  uint32_t bad[] = {9};
  assert_int_equal(cudaq_mwpm_decode_correlated(f.d, bad, 1, &r), CUDAQ_MWPM_ERR_OUT_OF_RANGE);
  drop(&f);
}

/* A long chain with a correlated twin: decoding many random shots
 * correlated and plain, interleaved, never disturbs the plain answers. */
static void test_plain_unchanged_by_interleaving(void **state) {
  (void)state;
  char text[8192];
  size_t at = 0;
  for (int i = 0; i < 20; i++)
    at += (size_t)snprintf(text + at, sizeof text - at, "error(0.05) D%d D%d ^ D%d D%d\n", i,
                           i + 1, 30 + i, 31 + i);
  at += (size_t)snprintf(text + at, sizeof text - at,
                         "error(0.02) D0 L0\nerror(0.02) D21\nerror(0.02) D30\nerror(0.02) D51\n");
  for (int i = 0; i < 21; i++)
    at += (size_t)snprintf(text + at, sizeof text - at, "error(0.01) D%d D%d\n", i, 30 + i);
  fixture_t fc = make(text, 1), fp = make(text, 0);
  srand(7);
  for (int shot = 0; shot < 2000; shot++) {
    uint32_t ev[52];
    size_t n = 0;
    for (uint32_t k = 0; k < 52; k++)
      if ((k <= 21 || k >= 30) && rand() % 12 == 0)
        ev[n++] = k;
    cudaq_mwpm_result_t a = dec(&fc, ev, n, 0), b = dec(&fp, ev, n, 0);
    assert_int_equal(a.obs_mask, b.obs_mask);
    assert_true(fabs(a.weight - b.weight) < 1e-9);
    cudaq_mwpm_result_t c = dec(&fc, ev, n, 1);
    assert_true(c.weight <= a.weight + 1e-9); /* lowered weights only */
  }
  drop(&fc);
  drop(&fp);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_correlation_changes_answer),
      cmocka_unit_test(test_independent_errors_have_no_rules),
      cmocka_unit_test(test_conditional_weight),
      cmocka_unit_test(test_boundary_components),
      cmocka_unit_test(test_repeated_component_marginal),
      cmocka_unit_test(test_repeat_groups_by_error),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_plain_unchanged_by_interleaving),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
