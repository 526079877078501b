/* qec-realtime's CPU worker (src/realtime_app/qrt_worker.c) on a 4-detector
 * repetition-code DEM: payload validation (length, values), the decode with
 * and without the local predecoder, and the response fields. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "qrt_worker.h"

/* A chain B - D0 - D1 - D2 - D3 - B; L0 flips on the left boundary edge. */
static const char dem_text[] = "error(0.01) D0 L0\n"
                               "error(0.01) D0 D1\n"
                               "error(0.01) D1 D2\n"
                               "error(0.01) D2 D3\n"
                               "error(0.01) D3\n";

static cudaq_mwpm_graph_t *make_graph(void) {
  cudaq_dem_t *dem = NULL;
  assert_int_equal(cudaq_dem_parse(dem_text, strlen(dem_text), &dem, NULL), CUDAQ_MWPM_OK);
  cudaq_mwpm_graph_t *g = NULL;
  assert_int_equal(cudaq_mwpm_graph_from_dem(dem, NULL, &g, NULL), CUDAQ_MWPM_OK);
  cudaq_dem_destroy(dem);
  return g;
}

static void test_validation(void **state) {
  (void)state;
  cudaq_mwpm_graph_t *g = make_graph();
  qrt_worker_t *w = NULL;
  char msg[200];
  assert_int_equal(qrt_worker_create(g, QRT_PD_NONE, NULL, &w, msg, sizeof msg), 0);
  int32_t ev[5] = {0, 0, 0, 0, 0};
  qrt_response_t r;
  assert_int_equal(qrt_worker_decode(w, ev, 12, &r), QRT_ERR_LENGTH);
  assert_int_equal(r.status, QRT_ERR_LENGTH);
  assert_int_equal(qrt_worker_decode(w, ev, 20, &r), QRT_ERR_LENGTH);
  assert_int_equal(qrt_worker_decode(w, ev, 0, &r), QRT_ERR_LENGTH);
  ev[3] = 2;
  assert_int_equal(qrt_worker_decode(w, ev, 16, &r), QRT_ERR_VALUE);
  ev[3] = -1;
  assert_int_equal(qrt_worker_decode(w, ev, 16, &r), QRT_ERR_VALUE);
  ev[3] = 0;
  assert_int_equal(qrt_worker_decode(w, ev, 16, &r), QRT_OK); /* no events */
  assert_int_equal(r.events_in, 0);
  assert_int_equal(r.corrections, 0);
  assert_true(r.prediction == 0);
  qrt_worker_destroy(w);
  cudaq_mwpm_graph_destroy(g);
}

static void test_decode(void **state) {
  (void)state;
  cudaq_mwpm_graph_t *g = make_graph();
  qrt_worker_t *plain = NULL, *local = NULL;
  char msg[200];
  assert_int_equal(qrt_worker_create(g, QRT_PD_NONE, NULL, &plain, msg, sizeof msg), 0);
  assert_int_equal(qrt_worker_create(g, QRT_PD_LOCAL, NULL, &local, msg, sizeof msg), 0);
  qrt_response_t r;
  /* D0 alone: matched to the left boundary, flips L0. */
  int32_t a[4] = {1, 0, 0, 0};
  assert_int_equal(qrt_worker_decode(plain, a, sizeof a, &r), QRT_OK);
  assert_true(r.prediction == 1);
  assert_int_equal(r.events_in, 1);
  assert_int_equal(r.events_residual, 1);
  assert_int_equal(r.corrections, 1);
  /* D1 D2: one inner edge, no flip; the local predecoder removes the pair. */
  int32_t b[4] = {0, 1, 1, 0};
  assert_int_equal(qrt_worker_decode(plain, b, sizeof b, &r), QRT_OK);
  assert_true(r.prediction == 0);
  assert_int_equal(r.events_residual, 2);
  assert_int_equal(qrt_worker_decode(local, b, sizeof b, &r), QRT_OK);
  assert_true(r.prediction == 0);
  assert_int_equal(r.events_in, 2);
  assert_int_equal(r.events_residual, 0);
  assert_int_equal(r.corrections, 0);
  /* D0 D1 through the local predecoder: removed, no flip (the inner edge). */
  int32_t c[4] = {1, 1, 0, 0};
  assert_int_equal(qrt_worker_decode(local, c, sizeof c, &r), QRT_OK);
  assert_true(r.prediction == 0);
  assert_int_equal(r.events_residual, 0);
  qrt_worker_destroy(plain);
  qrt_worker_destroy(local);
  cudaq_mwpm_graph_destroy(g);
}

static void test_bad_model(void **state) {
  (void)state;
  cudaq_mwpm_graph_t *g = make_graph();
  qrt_worker_t *w = NULL;
  char msg[200] = "";
  assert_int_not_equal(qrt_worker_create(g, QRT_PD_ONNX, "/nonexistent/model.onnx", &w, msg,
                                         sizeof msg), 0);
  assert_null(w);
  assert_true(strlen(msg) > 0);
  cudaq_mwpm_graph_destroy(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_validation),
      cmocka_unit_test(test_decode),
      cmocka_unit_test(test_bad_model),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
