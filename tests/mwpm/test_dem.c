/* DEM parser and matching-graph tests: good input, bad input (line numbers
 * and messages), and a deterministic mutation fuzzer. */
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

static cudaq_dem_t *parse_ok(const char *text) {
  cudaq_dem_t *dem = NULL;
  cudaq_mwpm_error_t err;
  cudaq_mwpm_status_t st = cudaq_dem_parse(text, strlen(text), &dem, &err);
  if (st)
    fprintf(stderr, "unexpected failure, line %zu: %s\n", err.line, err.message);
  assert_int_equal(st, CUDAQ_MWPM_OK);
  assert_non_null(dem);
  return dem;
}

static void expect_error(const char *text, cudaq_mwpm_status_t want, size_t line,
                         const char *needle) {
  cudaq_dem_t *dem = (cudaq_dem_t *)0x1;
  cudaq_mwpm_error_t err;
  cudaq_mwpm_status_t st = cudaq_dem_parse(text, strlen(text), &dem, &err);
  if (st != want || err.line != line || !strstr(err.message, needle))
    fprintf(stderr, "input:\n%s\ngot status %d line %zu message '%s'\n", text, st, err.line,
            err.message);
  assert_int_equal(st, want);
  assert_null(dem);
  assert_int_equal(err.line, line);
  assert_non_null(strstr(err.message, needle));
}

static void test_basic(void **state) {
  (void)state;
  cudaq_dem_t *dem = parse_ok("# a comment\n"
                              "error(0.1) D0 D1\n"
                              "error(0.2) D1 L0   # trailing comment\n"
                              "ERROR[some tag](0.125) D0 ^ D1 D2 L1\n"
                              "detector(1, 2.5, -3) D0\n"
                              "detector D2\n"
                              "logical_observable L3\n"
                              "\n");
  assert_int_equal(dem->num_detectors, 3);
  assert_int_equal(dem->num_observables, 4);
  assert_int_equal(dem->num_errors, 3);
  assert_int_equal(dem->num_edges, 4);
  assert_int_equal(dem->edges[0].u, 0);
  assert_int_equal(dem->edges[0].v, 1);
  assert_int_equal(dem->edges[1].u, 1);
  assert_int_equal(dem->edges[1].v, -1);
  assert_int_equal(dem->edges[1].obs_mask, 1);
  assert_int_equal(dem->edges[2].u, 0);
  assert_int_equal(dem->edges[2].v, -1);
  assert_int_equal(dem->edges[3].u, 1);
  assert_int_equal(dem->edges[3].v, 2);
  assert_int_equal(dem->edges[3].obs_mask, 2);
  assert_true(dem->edges[3].p == 0.125);
  assert_int_equal(dem->edges[3].line, 4);
  assert_int_equal(dem->coord_start[1] - dem->coord_start[0], 3);
  assert_true(dem->coords[dem->coord_start[0] + 1] == 2.5);
  assert_int_equal(dem->coord_start[2], dem->coord_start[1]);
  cudaq_dem_destroy(dem);
}

static void test_repeat_shift(void **state) {
  (void)state;
  cudaq_dem_t *dem = parse_ok("detector(0, 0, 0) D0\n"
                              "repeat 3 {\n"
                              "  error(0.01) D0 D1\n"
                              "  repeat 2 {\n"
                              "    error(0.02) D1\n"
                              "  }\n"
                              "  shift_detectors(0, 0, 1) 1\n"
                              "  detector(1, 0, 0) D0\n"
                              "}\n"
                              "error(0.03) D0\n");
  /* Three outer iterations: 1 + 2 edges each, plus the last. */
  assert_int_equal(dem->num_edges, 10);
  assert_int_equal(dem->edges[3].u, 1);
  assert_int_equal(dem->edges[3].v, 2);
  assert_int_equal(dem->edges[9].u, 3);
  assert_int_equal(dem->num_detectors, 4);
  /* Detector 3 was declared in the third iteration at t = 3. */
  const double *c = dem->coords + dem->coord_start[3];
  assert_int_equal(dem->coord_start[4] - dem->coord_start[3], 3);
  assert_true(c[0] == 1.0 && c[1] == 0.0 && c[2] == 3.0);
  cudaq_dem_destroy(dem);
}

static void test_empty_and_cancel(void **state) {
  (void)state;
  cudaq_dem_t *dem = parse_ok("");
  assert_int_equal(dem->num_detectors, 0);
  assert_int_equal(dem->num_edges, 0);
  cudaq_dem_destroy(dem);
  dem = parse_ok("error(0.1) D0 D0 D1 L0\nerror(0.1) L1\n");
  assert_int_equal(dem->num_edges, 1);
  assert_int_equal(dem->edges[0].u, 1);
  assert_int_equal(dem->edges[0].v, -1);
  assert_int_equal(dem->num_undetectable, 1);
  cudaq_dem_destroy(dem);
  /* Cancellation decides graph-likeness: four listed, two left. */
  dem = parse_ok("error(0.1) D0 D1 D2 D3 D2 D3 L0 ^ D4 D5 D6 D5 D6\n");
  assert_int_equal(dem->num_edges, 2);
  assert_int_equal(dem->edges[0].u + dem->edges[0].v, 1);
  assert_int_equal(dem->edges[0].obs_mask, 1);
  assert_int_equal(dem->edges[1].u, 4);
  assert_int_equal(dem->edges[1].v, -1);
  cudaq_dem_destroy(dem);
}

static void test_bad_input(void **state) {
  (void)state;
  expect_error("error(0.1) D0\nbogus(0.1) D0\n", CUDAQ_MWPM_ERR_PARSE, 2, "unknown instruction");
  expect_error("error(1.5) D0\n", CUDAQ_MWPM_ERR_PARSE, 1, "probability");
  expect_error("error(0.1, 0.2) D0\n", CUDAQ_MWPM_ERR_PARSE, 1, "exactly one");
  expect_error("error D0\n", CUDAQ_MWPM_ERR_PARSE, 1, "exactly one");
  expect_error("error(abc) D0\n", CUDAQ_MWPM_ERR_PARSE, 1, "bad number");
  expect_error("error(0.1 D0\n", CUDAQ_MWPM_ERR_PARSE, 1, "argument list");
  expect_error("\n\nerror(0.1) D0 X3\n", CUDAQ_MWPM_ERR_PARSE, 3, "bad target");
  expect_error("error(0.1) D0 ^\n", CUDAQ_MWPM_ERR_PARSE, 1, "'^'");
  expect_error("error(0.1) ^ D0\n", CUDAQ_MWPM_ERR_PARSE, 1, "'^'");
  expect_error("error(0.1) D0 ^ ^ D1\n", CUDAQ_MWPM_ERR_PARSE, 1, "'^'");
  expect_error("error(0.1) D1 D2 D3\n", CUDAQ_MWPM_ERR_NOT_GRAPHLIKE, 1, "not graph-like");
  expect_error("error(0.1) D1 D2 D3 D4 D4\n", CUDAQ_MWPM_ERR_NOT_GRAPHLIKE, 1, "has 3 detectors");
  {
    char big[512] = "error(0.1)";
    for (int k = 0; k < 40; k++)
      snprintf(big + strlen(big), sizeof big - strlen(big), " D%d", k);
    strcat(big, "\n");
    expect_error(big, CUDAQ_MWPM_ERR_NOT_GRAPHLIKE, 1, "more than 32 detectors");
  }
  expect_error("repeat 2 {\n error(0.1) D1 D2 ^ D3 D4 D5\n}\n", CUDAQ_MWPM_ERR_NOT_GRAPHLIKE, 2,
               "3 detectors");
  expect_error("repeat 2 {\nerror(0.1) D0\n", CUDAQ_MWPM_ERR_PARSE, 1, "never closed");
  expect_error("error(0.1) D0\n}\n", CUDAQ_MWPM_ERR_PARSE, 2, "without an open");
  expect_error("repeat {\n}\n", CUDAQ_MWPM_ERR_PARSE, 1, "integer count");
  expect_error("repeat 3\nerror(0.1) D0\n", CUDAQ_MWPM_ERR_PARSE, 1, "'{'");
  expect_error("shift_detectors D1\n", CUDAQ_MWPM_ERR_PARSE, 1, "integer target");
  expect_error("detector(1) L0\n", CUDAQ_MWPM_ERR_PARSE, 1, "D#");
  expect_error("logical_observable D0\n", CUDAQ_MWPM_ERR_PARSE, 1, "L#");
  expect_error("error(0.1) D0 L64\n", CUDAQ_MWPM_ERR_TOO_LARGE, 1, "64 observables");
  expect_error("error(0.1) D99999999999\n", CUDAQ_MWPM_ERR_TOO_LARGE, 1, "detector index");
  expect_error("error(0.1) D99999999999999999999999\n", CUDAQ_MWPM_ERR_PARSE, 1, "too large");
  expect_error("repeat 100000 {\nrepeat 100000 {\nerror(0.1) D0\n}\n}\n", CUDAQ_MWPM_ERR_TOO_LARGE,
               3, "too large");
  expect_error("error[unterminated(0.1) D0\n", CUDAQ_MWPM_ERR_PARSE, 1, "tag");
  expect_error("error(0.1)D0\n", CUDAQ_MWPM_ERR_PARSE, 1, "space");
  const char nul[] = "error(0.1) D0\0\n";
  cudaq_dem_t *dem = NULL;
  cudaq_mwpm_error_t err;
  assert_int_equal(cudaq_dem_parse(nul, sizeof nul - 1, &dem, &err), CUDAQ_MWPM_ERR_PARSE);
  assert_int_equal(cudaq_dem_parse(NULL, 3, &dem, &err), CUDAQ_MWPM_ERR_INVALID_ARG);
  assert_int_equal(cudaq_dem_parse("x", 1, NULL, &err), CUDAQ_MWPM_ERR_INVALID_ARG);
  assert_int_equal(cudaq_dem_parse_file("/nonexistent/x.dem", &dem, &err), CUDAQ_MWPM_ERR_IO);
}

static void test_graph_merge(void **state) {
  (void)state;
  cudaq_dem_t *dem = parse_ok("error(0.1) D0 D1 L0\n"
                              "error(0.2) D1 D0 L1\n"
                              "error(0.3) D2\n"
                              "error(0) D2 D3\n"
                              "detector(4, 5) D3\n");
  cudaq_mwpm_graph_t *g = NULL;
  assert_int_equal(cudaq_mwpm_graph_from_dem(dem, NULL, &g, NULL), CUDAQ_MWPM_OK);
  assert_int_equal(cudaq_mwpm_graph_num_nodes(g), 4);
  assert_int_equal(cudaq_mwpm_graph_num_edges(g), 2);
  cudaq_mwpm_edge_t e;
  assert_int_equal(cudaq_mwpm_graph_edge(g, 0, &e), CUDAQ_MWPM_OK);
  double p = 0.1 * 0.8 + 0.2 * 0.9;
  assert_true(fabs(e.weight - log((1 - p) / p)) < 1e-12);
  assert_int_equal(e.obs_mask, 1); /* first edge's observables kept */
  assert_int_equal(cudaq_mwpm_graph_edge(g, 1, &e), CUDAQ_MWPM_OK);
  assert_int_equal(e.v, CUDAQ_MWPM_BOUNDARY);
  const double *c;
  size_t nc;
  assert_int_equal(cudaq_mwpm_graph_coords(g, 3, &c, &nc), CUDAQ_MWPM_OK);
  assert_int_equal(nc, 2);
  assert_true(c[0] == 4 && c[1] == 5);
  cudaq_mwpm_graph_destroy(g);

  cudaq_mwpm_graph_options_t o;
  cudaq_mwpm_graph_options_init(&o);
  o.merge = CUDAQ_MWPM_MERGE_SMALLEST_WEIGHT;
  assert_int_equal(cudaq_mwpm_graph_from_dem(dem, &o, &g, NULL), CUDAQ_MWPM_OK);
  assert_int_equal(cudaq_mwpm_graph_edge(g, 0, &e), CUDAQ_MWPM_OK);
  assert_true(fabs(e.weight - log(0.8 / 0.2)) < 1e-12);
  assert_int_equal(e.obs_mask, 2);
  cudaq_mwpm_graph_destroy(g);
  o.merge = (cudaq_mwpm_merge_t)7;
  assert_int_equal(cudaq_mwpm_graph_from_dem(dem, &o, &g, NULL), CUDAQ_MWPM_ERR_INVALID_ARG);
  cudaq_dem_destroy(dem);
}

/* Mutation fuzzing: random byte edits of valid models must parse or fail
 * with a status and a message, never crash (run under ASan in the
 * sanitizer build). */
static void test_fuzz(void **state) {
  (void)state;
  static const char *seeds[] = {
      "error(0.1) D0 D1 ^ D2 L0\ndetector(1,2,3) D0\nshift_detectors(0,0,1) 2\n",
      "repeat 3 {\n error[t](0.01) D0 D1\n shift_detectors(1) 1\n}\nlogical_observable L0\n",
      "detector[x](0.5, -1e3) D7\nerror(0.25) D7 L63\n# comment\n}\n",
  };
  static const char alphabet[] = "DL^(){}[]#,.0123456789 \n\terrorpeatshift_detectorsx-e+";
  uint64_t rng = 88172645463325252ull;
  char buf[512];
  for (int iter = 0; iter < 20000; iter++) {
    const char *s = seeds[iter % 3];
    size_t n = strlen(s);
    memcpy(buf, s, n);
    int edits = 1 + (int)(iter % 8);
    for (int k = 0; k < edits; k++) {
      rng ^= rng << 13;
      rng ^= rng >> 7;
      rng ^= rng << 17;
      size_t pos = n ? (size_t)(rng % n) : 0;
      int op = (int)((rng >> 20) % 3);
      char ch = (rng >> 40) % 5 == 0 ? (char)(rng >> 32) : alphabet[(rng >> 32) % (sizeof alphabet - 1)];
      if (op == 0 && n)
        buf[pos] = ch;
      else if (op == 1 && n + 1 < sizeof buf) {
        memmove(buf + pos + 1, buf + pos, n - pos);
        buf[pos] = ch;
        n++;
      } else if (n) {
        memmove(buf + pos, buf + pos + 1, n - pos - 1);
        n--;
      }
    }
    cudaq_dem_t *dem = NULL;
    cudaq_mwpm_error_t err;
    cudaq_mwpm_status_t st = cudaq_dem_parse(buf, n, &dem, &err);
    if (st == CUDAQ_MWPM_OK) {
      assert_non_null(dem);
      cudaq_mwpm_graph_t *g = NULL;
      if (cudaq_mwpm_graph_from_dem(dem, NULL, &g, NULL) == CUDAQ_MWPM_OK)
        cudaq_mwpm_graph_destroy(g);
      cudaq_dem_destroy(dem);
    } else {
      assert_null(dem);
      assert_true(st < 0);
      assert_true(err.message[0] != 0);
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_basic),        cmocka_unit_test(test_repeat_shift),
      cmocka_unit_test(test_empty_and_cancel), cmocka_unit_test(test_bad_input),
      cmocka_unit_test(test_graph_merge),  cmocka_unit_test(test_fuzz),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
