/* qec-realtime's CPU worker (src/realtime_app/qrt_worker.c) on a 4-detector
 * repetition-code DEM: payload validation (length, values) for INT32 and
 * bit-packed payloads (the wire format's CUDAQ_TYPE_BIT_PACKED), the decode
 * with and without the local predecoder, the GPU modes' decode of a residual
 * from mapped memory (qrt_gpu_result_t), and the response fields. */
#include <math.h>
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
  assert_int_equal(qrt_worker_create(g, QRT_PD_NONE, NULL, 1, QRT_PAYLOAD_INT32,
                                     CUDAQ_PREDECODER_WEIGHTS_OFF, &w, msg, sizeof msg), 0);
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
  assert_int_equal(qrt_worker_create(g, QRT_PD_NONE, NULL, 1, QRT_PAYLOAD_INT32,
                                     CUDAQ_PREDECODER_WEIGHTS_OFF, &plain, msg, sizeof msg), 0);
  assert_int_equal(qrt_worker_create(g, QRT_PD_LOCAL, NULL, 1, QRT_PAYLOAD_INT32,
                                     CUDAQ_PREDECODER_WEIGHTS_OFF, &local, msg, sizeof msg), 0);
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
  assert_int_not_equal(qrt_worker_create(g, QRT_PD_ONNX, "/nonexistent/model.onnx", 1,
                                         QRT_PAYLOAD_INT32,
                                     CUDAQ_PREDECODER_WEIGHTS_OFF, &w, msg,
                                         sizeof msg), 0);
  assert_null(w);
  assert_true(strlen(msg) > 0);
  cudaq_mwpm_graph_destroy(g);
}

/* Bit-packed payloads: ceil(4 / 8) = 1 byte, LSB first, padding bits 0. */
static void test_bits(void **state) {
  (void)state;
  cudaq_mwpm_graph_t *g = make_graph();
  qrt_worker_t *w = NULL;
  char msg[200];
  assert_int_equal(qrt_payload_len(QRT_PAYLOAD_BITS, 4), 1);
  assert_int_equal(qrt_payload_len(QRT_PAYLOAD_BITS, 9), 2);
  assert_int_equal(qrt_payload_len(QRT_PAYLOAD_INT32, 9), 36);
  assert_int_equal(qrt_worker_create(g, QRT_PD_NONE, NULL, 1, QRT_PAYLOAD_BITS,
                                     CUDAQ_PREDECODER_WEIGHTS_OFF, &w, msg, sizeof msg),
                   0);
  qrt_response_t r;
  uint8_t p[2] = {0x01, 0};
  assert_int_equal(qrt_worker_decode(w, p, 2, &r), QRT_ERR_LENGTH);
  assert_int_equal(qrt_worker_decode(w, p, 0, &r), QRT_ERR_LENGTH);
  assert_int_equal(qrt_worker_decode(w, p, 1, &r), QRT_OK); /* D0: left boundary, L0 */
  assert_true(r.prediction == 1);
  assert_int_equal(r.events_in, 1);
  p[0] = 0x06; /* D1 D2 */
  assert_int_equal(qrt_worker_decode(w, p, 1, &r), QRT_OK);
  assert_true(r.prediction == 0);
  assert_int_equal(r.events_in, 2);
  assert_int_equal(r.corrections, 1);
  p[0] = 0x10; /* bit 4: beyond the 4 detectors */
  assert_int_equal(qrt_worker_decode(w, p, 1, &r), QRT_ERR_VALUE);
  p[0] = 0x81;
  assert_int_equal(qrt_worker_decode(w, p, 1, &r), QRT_ERR_VALUE);
  qrt_worker_destroy(w);
  cudaq_mwpm_graph_destroy(g);
}

/* The GPU modes' CPU half: the request is validated, the residual comes
 * from the GPU result, prediction = frame XOR MWPM(residual). */
static void test_decode_gpu(void **state) {
  (void)state;
  cudaq_mwpm_graph_t *g = make_graph();
  qrt_worker_t *w = NULL;
  char msg[200];
  assert_int_equal(qrt_worker_create(g, QRT_PD_NONE, NULL, 1, QRT_PAYLOAD_INT32,
                                     CUDAQ_PREDECODER_WEIGHTS_OFF, &w, msg, sizeof msg),
                   0);
  union {
    qrt_gpu_result_t h;
    uint32_t words[sizeof(qrt_gpu_result_t) / 4 + 4];
  } res;
  memset(&res, 0, sizeof res);
  uint32_t *ev = (uint32_t *)(&res.h + 1);
  const size_t req = 4 * sizeof(int32_t); /* the request's length: the payload itself is not read */
  qrt_response_t r;
  /* The GPU counted 3 events, removed D1 D2 and flipped nothing: D0 alone is
   * left (L0). */
  res.h.events_in = 3;
  res.h.count = 1;
  ev[0] = 0;
  assert_int_equal(qrt_worker_decode_gpu(w, req, &res.h, &r), QRT_OK);
  assert_true(r.prediction == 1);
  assert_int_equal(r.events_in, 3);
  assert_int_equal(r.events_residual, 1);
  assert_int_equal(r.predecoder_ns, 0);
  assert_int_equal(r.gpu_ns, 0); /* no stamps */
  /* The GPU's stamps become the response's split of dispatch + GPU; a
   * stamp out of order reads 0, not a wrapped difference. */
  res.h.t_start_ns = 1000;
  res.h.t_publish_ns = 5000;
  res.h.t_ready_ns = 6500;
  assert_int_equal(qrt_worker_decode_gpu(w, req, &res.h, &r), QRT_OK);
  assert_int_equal(r.gpu_ns, 5500);
  assert_int_equal(r.gpu_publish_ns, 1500);
  res.h.t_ready_ns = 900;
  assert_int_equal(qrt_worker_decode_gpu(w, req, &res.h, &r), QRT_OK);
  assert_int_equal(r.gpu_ns, 0);
  assert_int_equal(r.gpu_publish_ns, 0);
  /* The same residual with a frame of L0: the flips cancel. */
  res.h.frame = 1;
  assert_int_equal(qrt_worker_decode_gpu(w, req, &res.h, &r), QRT_OK);
  assert_true(r.prediction == 0);
  /* Nothing left: the prediction is the frame. */
  res.h.count = 0;
  assert_int_equal(qrt_worker_decode_gpu(w, req, &res.h, &r), QRT_OK);
  assert_true(r.prediction == 1);
  assert_int_equal(r.corrections, 0);
  /* A bad request: the wrong length (the ingest kernel read nothing), or a
   * value the ingest kernel found not 0/1, before anything else the GPU
   * says (its bad output comes from that input). */
  assert_int_equal(qrt_worker_decode_gpu(w, 12, &res.h, &r), QRT_ERR_LENGTH);
  assert_int_equal(qrt_worker_decode_gpu(w, 20, &res.h, &r), QRT_ERR_LENGTH);
  res.h.status = QRT_GPU_BAD_INPUT;
  assert_int_equal(qrt_worker_decode_gpu(w, req, &res.h, &r), QRT_ERR_VALUE);
  res.h.status = QRT_GPU_BAD_INPUT | QRT_GPU_BAD_OUTPUT;
  assert_int_equal(qrt_worker_decode_gpu(w, req, &res.h, &r), QRT_ERR_VALUE);
  assert_int_equal(qrt_worker_decode_gpu(w, 12, &res.h, &r), QRT_ERR_LENGTH); /* the length first */
  res.h.status = 0;
  /* GPU results that cannot be trusted: a bad status, a count or an index
   * out of range. */
  res.h.status = QRT_GPU_BAD_OUTPUT;
  assert_int_equal(qrt_worker_decode_gpu(w, req, &res.h, &r), QRT_ERR_PREDECODER);
  res.h.status = 0;
  res.h.count = 5;
  assert_int_equal(qrt_worker_decode_gpu(w, req, &res.h, &r), QRT_ERR_PREDECODER);
  res.h.count = 1;
  ev[0] = 4;
  assert_int_equal(qrt_worker_decode_gpu(w, req, &res.h, &r), QRT_ERR_PREDECODER);
  qrt_worker_destroy(w);
  cudaq_mwpm_graph_destroy(g);
}

/* The GPU modes' CPU half, weighted (qrt_worker_set_edge_map): MWPM reads
 * the edge logits the GPU stage left after the residual list
 * (QRT_GPU_LOGITS), |logit| as each edge's weight for that request. The
 * chain's edges: B-D0 (L0), D0-D1, D1-D2, D2-D3, D3-B. */
static void test_decode_gpu_weighted(void **state) {
  (void)state;
  cudaq_dem_t *dem = NULL;
  assert_int_equal(cudaq_dem_parse(dem_text, strlen(dem_text), &dem, NULL), CUDAQ_MWPM_OK);
  cudaq_mwpm_graph_options_t go;
  cudaq_mwpm_graph_options_init(&go);
  go.per_shot_weights = 1;
  cudaq_mwpm_graph_t *g = NULL, *plain = make_graph();
  assert_int_equal(cudaq_mwpm_graph_from_dem(dem, &go, &g, NULL), CUDAQ_MWPM_OK);
  cudaq_dem_destroy(dem);
  /* The map: logit i is the edge with ends[2i], ends[2i + 1], listed in graph order. */
  const int32_t ends[10] = {0, -1, 0, 1, 1, 2, 2, 3, 3, -1};
  uint32_t graph_edge[5], slot[5];
  uint64_t obs[5] = {0};
  for (uint32_t i = 0; i < 5; i++) {
    size_t e;
    assert_int_equal(cudaq_mwpm_graph_find_edge(g, ends[2 * i], ends[2 * i + 1], &e), CUDAQ_MWPM_OK);
    graph_edge[i] = (uint32_t)e;
    slot[i] = i;
  }
  for (uint32_t i = 0; i < 5; i++) /* graph order, as cudaq_predecoder_edge_map_create gives it */
    for (uint32_t j = i + 1; j < 5; j++)
      if (graph_edge[j] < graph_edge[i]) {
        uint32_t t = graph_edge[i], u = slot[i];
        graph_edge[i] = graph_edge[j], slot[i] = slot[j];
        graph_edge[j] = t, slot[j] = u;
      }
  cudaq_predecoder_edge_map_t map = {5, 2, 0.0f, graph_edge, slot, ends, obs, NULL};
  qrt_worker_t *w = NULL, *wp = NULL;
  char msg[200];
  assert_int_equal(qrt_worker_create(g, QRT_PD_NONE, NULL, 1, QRT_PAYLOAD_INT32, CUDAQ_PREDECODER_WEIGHTS_OFF,
                                     &w, msg, sizeof msg), 0);
  assert_false(qrt_worker_weighted(w));
  assert_int_equal(qrt_worker_set_edge_map(w, &map, msg, sizeof msg), 0);
  assert_true(qrt_worker_weighted(w));
  /* A worker on a graph without per-shot weights cannot take the map. */
  assert_int_equal(qrt_worker_create(plain, QRT_PD_NONE, NULL, 1, QRT_PAYLOAD_INT32,
                                     CUDAQ_PREDECODER_WEIGHTS_OFF, &wp, msg, sizeof msg), 0);
  assert_int_not_equal(qrt_worker_set_edge_map(wp, &map, msg, sizeof msg), 0);
  assert_non_null(strstr(msg, "per-shot weights"));
  union {
    qrt_gpu_result_t h;
    uint32_t words[sizeof(qrt_gpu_result_t) / 4 + 4 + 5];
  } res;
  memset(&res, 0, sizeof res);
  uint32_t *ev = (uint32_t *)(&res.h + 1);
  float *lg = (float *)QRT_GPU_LOGITS(&res.h, 4);
  assert_true((const uint32_t *)lg == ev + 4); /* 4 detectors: no padding */
  const size_t req = 4 * sizeof(int32_t);
  qrt_response_t r;
  /* Residual D0 alone. The DEM's weights send it left (L0); logits making
   * the left boundary edge expensive (|-9|) and the path right cheap (0.5
   * each) send it right: no observable. The sign is the GPU's business
   * (it folded the positive ones already): -0.5 and 0.5 weigh alike. */
  res.h.count = 1;
  ev[0] = 0;
  const float right[5] = {-9.0f, 0.5f, -0.5f, 0.5f, -0.5f};
  memcpy(lg, right, sizeof right);
  assert_int_equal(qrt_worker_decode_gpu(w, req, &res.h, &r), QRT_OK);
  assert_true(r.prediction == 0);
  const float left[5] = {-0.5f, -9.0f, -9.0f, -9.0f, -9.0f};
  memcpy(lg, left, sizeof left);
  assert_int_equal(qrt_worker_decode_gpu(w, req, &res.h, &r), QRT_OK);
  assert_true(r.prediction == 1);
  /* The frame still applies; a NaN logit on an edge the matching reaches
   * refuses the request. */
  res.h.frame = 1;
  assert_int_equal(qrt_worker_decode_gpu(w, req, &res.h, &r), QRT_OK);
  assert_true(r.prediction == 0);
  lg[0] = NAN;
  assert_int_equal(qrt_worker_decode_gpu(w, req, &res.h, &r), QRT_ERR_PREDECODER);
  qrt_worker_destroy(w);
  qrt_worker_destroy(wp);
  cudaq_mwpm_graph_destroy(g);
  cudaq_mwpm_graph_destroy(plain);
}

/* An odd detector count: the last INT32 value is checked and listed on its
 * own (the rest two at a time). */
static void test_validation_odd(void **state) {
  (void)state;
  static const char odd_dem[] = "error(0.1) D0 D1 L0\nerror(0.1) D1 D2\nerror(0.1) D2\n";
  cudaq_dem_t *dem = NULL;
  assert_int_equal(cudaq_dem_parse(odd_dem, strlen(odd_dem), &dem, NULL), CUDAQ_MWPM_OK);
  cudaq_mwpm_graph_t *g = NULL;
  assert_int_equal(cudaq_mwpm_graph_from_dem(dem, NULL, &g, NULL), CUDAQ_MWPM_OK);
  cudaq_dem_destroy(dem);
  qrt_worker_t *w = NULL;
  char msg[200];
  assert_int_equal(qrt_worker_create(g, QRT_PD_NONE, NULL, 1, QRT_PAYLOAD_INT32,
                                     CUDAQ_PREDECODER_WEIGHTS_OFF, &w, msg, sizeof msg), 0);
  qrt_response_t r;
  const int32_t cases[][3] = {{1, 1, 0}, {0, 0, 1}, {1, 0, 1}, {0, 0, 0}};
  const uint32_t counts[] = {2, 1, 2, 0};
  for (int k = 0; k < 4; k++) {
    assert_int_equal(qrt_worker_decode(w, cases[k], sizeof cases[k], &r), QRT_OK);
    assert_int_equal(r.events_in, counts[k]);
  }
  /* {1, 0, 1}: D0 and D2 fire; MWPM (listed events) pairs them through D1: L0. */
  assert_int_equal(qrt_worker_decode(w, cases[2], sizeof cases[2], &r), QRT_OK);
  assert_true(r.prediction == 1);
  const int32_t bad[][3] = {{0, 0, 2}, {0, 2, 0}, {256, 0, 0}, {0, 0, -1}, {1, 1, 3}};
  for (int k = 0; k < 5; k++)
    assert_int_equal(qrt_worker_decode(w, bad[k], sizeof bad[k], &r), QRT_ERR_VALUE);
  qrt_worker_destroy(w);
  cudaq_mwpm_graph_destroy(g);
}

/* The request rules of qrt_worker.h (host and device functions). */
static void test_rules(void **state) {
  (void)state;
  assert_int_equal(qrt_int32_bad_bits(0), 0);
  assert_int_equal(qrt_int32_bad_bits(1), 0);
  assert_true(qrt_int32_bad_bits(2) != 0);
  assert_true(qrt_int32_bad_bits(-1) != 0);
  assert_true(qrt_int32_pair_bad_bits(0x0000000100000001ull) == 0);
  assert_true(qrt_int32_pair_bad_bits(0x0000000200000000ull) != 0);
  assert_true(qrt_int32_pair_bad_bits(0x0000000000000003ull) != 0);
  assert_true(qrt_int32_pair_bad_bits(0x8000000000000000ull) != 0);
  assert_int_equal(qrt_bits_padding(0xFF, 8), 0);  /* no padding bits */
  assert_int_equal(qrt_bits_padding(0xFF, 16), 0);
  assert_int_equal(qrt_bits_padding(0x07, 3), 0);  /* 3 detectors: bits 3-7 are padding */
  assert_true(qrt_bits_padding(0x08, 3) != 0);
  assert_true(qrt_bits_padding(0x80, 9) != 0);
  assert_int_equal(qrt_payload_len(QRT_PAYLOAD_BITS, 0), 0);
  assert_int_equal(qrt_payload_len(QRT_PAYLOAD_INT32, 2184), 8736);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rules),
      cmocka_unit_test(test_validation),
      cmocka_unit_test(test_validation_odd),
      cmocka_unit_test(test_decode),
      cmocka_unit_test(test_bad_model),
      cmocka_unit_test(test_bits),
      cmocka_unit_test(test_decode_gpu),       cmocka_unit_test(test_decode_gpu_weighted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
