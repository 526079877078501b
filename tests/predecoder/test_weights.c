/* Weighted matching from a model's edge logits (models/README.md): the
 * options (weights AUTO / OFF / ON, match_graph), cudaq_predecoder_weighted,
 * cudaq_predecoder_edge_weights and cudaq_predecoder_set_weight_map (MWPM
 * reading the logits through the map), the threshold-0 residual, and
 * cudaq_nn_model_keep_outputs (an unweighted predecoder drops the logits),
 * on the generated weighted.onnx of the predecoder test data
 * (gen_test_models.py: residual = detectors, edge logits -4 + offset + 3 per
 * endpoint with an event, decision threshold 2) and its d = 5 DEM. Usage:
 * test_weights DATA_DIR */
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
#include "cudaq/qec/predecoder.h"

static const char *g_dir;
static cudaq_mwpm_graph_t *g_graph; /* per_shot_weights */
static char g_model[1024];

static int setup(void **state) {
  (void)state;
  char path[1024];
  snprintf(path, sizeof path, "%s/circuit.dem", g_dir);
  snprintf(g_model, sizeof g_model, "%s/weighted.onnx", g_dir);
  cudaq_dem_t *dem = NULL;
  if (cudaq_dem_parse_file(path, &dem, NULL) != CUDAQ_MWPM_OK)
    return -1;
  cudaq_mwpm_graph_options_t o;
  cudaq_mwpm_graph_options_init(&o);
  o.per_shot_weights = 1;
  int rc = cudaq_mwpm_graph_from_dem(dem, &o, &g_graph, NULL) == CUDAQ_MWPM_OK ? 0 : -1;
  cudaq_dem_destroy(dem);
  return rc;
}

static int teardown(void **state) {
  (void)state;
  cudaq_mwpm_graph_destroy(g_graph);
  return 0;
}

static cudaq_predecoder_status_t make(cudaq_predecoder_weights_t mode, const cudaq_mwpm_graph_t *mg,
                                      cudaq_predecoder_t **p, cudaq_predecoder_error_t *err) {
  cudaq_onnx_predecoder_options_t o;
  cudaq_onnx_predecoder_options_init(&o);
  assert_int_equal(o.weights, CUDAQ_PREDECODER_WEIGHTS_AUTO);
  assert_null(o.match_graph);
  o.weights = mode;
  o.match_graph = mg;
  o.graph = g_graph;
  *p = NULL;
  return cudaq_predecoder_create_onnx(g_model, cudaq_mwpm_graph_num_nodes(g_graph),
                                      cudaq_mwpm_graph_num_observables(g_graph), &o, p, err);
}

/* A predecoder of the weighted model (AUTO, the match graph given) and its
 * map and logits (cudaq_predecoder_edge_weights). */
static cudaq_predecoder_t *weighted(const uint32_t **e, const uint32_t **sl, size_t *n, const float **lg) {
  cudaq_predecoder_t *p;
  cudaq_predecoder_error_t err;
  assert_int_equal(make(CUDAQ_PREDECODER_WEIGHTS_AUTO, g_graph, &p, &err), CUDAQ_PREDECODER_OK);
  assert_int_equal(cudaq_predecoder_edge_weights(p, e, sl, n, lg), CUDAQ_PREDECODER_OK);
  return p;
}

/* Weighted only with a match graph (AUTO, ON); OFF and AUTO without one are
 * the model's thresholded residual; ON without one, and a bad mode, refused. */
static void test_modes(void **state) {
  (void)state;
  cudaq_predecoder_t *p;
  cudaq_predecoder_error_t err;
  const uint32_t *e, *sl;
  const float *w;
  size_t n;
  assert_int_equal(make(CUDAQ_PREDECODER_WEIGHTS_AUTO, g_graph, &p, &err), CUDAQ_PREDECODER_OK);
  assert_true(cudaq_predecoder_weighted(p));
  assert_int_equal(cudaq_predecoder_edge_weights(p, &e, &sl, &n, &w), CUDAQ_PREDECODER_OK);
  assert_int_equal(n, cudaq_mwpm_graph_num_edges(g_graph)); /* the model lists every DEM edge */
  for (size_t i = 1; i < n; i++)
    assert_true(e[i - 1] < e[i]); /* in the graph's edge order */
  assert_int_equal(cudaq_predecoder_edge_weights(p, NULL, &sl, &n, &w), CUDAQ_PREDECODER_ERR_INVALID_ARG);
  assert_int_equal(cudaq_predecoder_edge_weights(p, &e, &sl, &n, NULL), CUDAQ_PREDECODER_ERR_INVALID_ARG);
  cudaq_predecoder_destroy(p);
  assert_int_equal(make(CUDAQ_PREDECODER_WEIGHTS_ON, g_graph, &p, &err), CUDAQ_PREDECODER_OK);
  assert_true(cudaq_predecoder_weighted(p));
  cudaq_predecoder_destroy(p);
  const cudaq_predecoder_weights_t unweighted[2] = {CUDAQ_PREDECODER_WEIGHTS_OFF,
                                                    CUDAQ_PREDECODER_WEIGHTS_AUTO};
  for (int i = 0; i < 2; i++) {
    assert_int_equal(make(unweighted[i], i ? NULL : g_graph, &p, &err), CUDAQ_PREDECODER_OK);
    assert_false(cudaq_predecoder_weighted(p));
    assert_int_equal(cudaq_predecoder_edge_weights(p, &e, &sl, &n, &w), CUDAQ_PREDECODER_ERR_INVALID_ARG);
    cudaq_predecoder_destroy(p);
  }
  assert_int_equal(make(CUDAQ_PREDECODER_WEIGHTS_ON, NULL, &p, &err), CUDAQ_PREDECODER_ERR_INVALID_ARG);
  assert_null(p);
  assert_non_null(strstr(err.message, "needs the matching graph"));
  assert_int_equal(make((cudaq_predecoder_weights_t)7, g_graph, &p, &err), CUDAQ_PREDECODER_ERR_INVALID_ARG);
  assert_non_null(strstr(err.message, "weights 7 is none of AUTO, OFF, ON"));
  assert_false(cudaq_predecoder_weighted(NULL));
}

/* One shot with events at both ends of one edge and at one end of another:
 * the first edge's logit is about 2 (3 + 3 - 4 + offset), the second's
 * about -1, the rest about -4. Weights are |logit|; the residual is the
 * events XOR the edges of positive logit (the model's own residual is the
 * events: its threshold is 2, so an edge in (0, 2] is folded in here, one
 * above 2 was the model's own to apply, and it applied none). */
static void test_shot(void **state) {
  (void)state;
  cudaq_predecoder_error_t err;
  const uint32_t *e, *sl;
  const float *lg;
  size_t n;
  cudaq_predecoder_t *p = weighted(&e, &sl, &n, &lg);
  double *w = malloc(n * sizeof *w); /* this shot's weights |logit|, in the map's order */
  size_t k = 0; /* a detector-detector edge */
  cudaq_mwpm_edge_t ge;
  for (; k < n; k++) {
    cudaq_mwpm_graph_edge(g_graph, e[k], &ge);
    if (ge.v >= 0)
      break;
  }
  assert_true(k < n);
  uint32_t ev[2] = {(uint32_t)ge.u, (uint32_t)ge.v}, res[130];
  size_t nres = 0;
  uint64_t frame = 0;
  assert_int_equal(cudaq_predecoder_run(p, ev, 2, res, &nres, &frame, &err), CUDAQ_PREDECODER_OK);
  for (size_t i = 0; i < n; i++)
    w[i] = fabs((double)lg[sl[i]]);
  assert_true(fabs(w[k] - 2.0) <= 0.6 + 1e-6);
  /* every weight is |logit|: near 4 where no endpoint has an event, near 1 with one */
  for (size_t i = 0; i < n; i++) {
    cudaq_mwpm_edge_t x;
    cudaq_mwpm_graph_edge(g_graph, e[i], &x);
    int lit = (x.u == ge.u || x.u == ge.v) + (x.v >= 0 && (x.v == ge.u || x.v == ge.v));
    double want = fabs(-4.0 + 3.0 * lit);
    assert_true(fabs(w[i] - want) <= 0.6 + 1e-6);
  }
  /* The residual: the edge (u, v) applied (logit ~2 > 0) clears both events
   * only when its logit is at most 2 (folded in here); above 2 the model
   * should have applied it and did not (its residual is the events). Either
   * way the two events are gone or both stay; edges with one lit endpoint
   * have logits near -1 and change nothing. */
  assert_true(nres == 0 || nres == 2);
  assert_int_equal(nres == 0, w[k] <= 2.0);
  assert_int_equal(frame, nres == 0 ? ge.obs_mask : 0);
  /* MWPM with the map reads these weights: the same matching as the
   * weights listed (cudaq_mwpm_decode_weighted), on a residual of the two
   * events plus a far one (so that something is matched). */
  cudaq_mwpm_decoder_t *dm = NULL, *dl = NULL;
  assert_int_equal(cudaq_mwpm_decoder_create(g_graph, &dm), CUDAQ_MWPM_OK);
  assert_int_equal(cudaq_mwpm_decoder_create(g_graph, &dl), CUDAQ_MWPM_OK);
  assert_int_equal(cudaq_predecoder_set_weight_map(p, dm), CUDAQ_PREDECODER_OK);
  uint32_t mres[3] = {ev[0], ev[1], cudaq_mwpm_graph_num_nodes(g_graph) - 1};
  cudaq_mwpm_result_t rm, rl;
  assert_int_equal(cudaq_mwpm_decode_mapped(dm, mres, 3, lg, &rm), CUDAQ_MWPM_OK);
  assert_int_equal(cudaq_mwpm_decode_weighted(dl, mres, 3, e, w, n, &rl), CUDAQ_MWPM_OK);
  assert_true(rm.weight == rl.weight);
  assert_int_equal(rm.obs_mask, rl.obs_mask);
  /* The map only on a decoder of the predecoder's match graph. */
  cudaq_mwpm_graph_options_t go;
  cudaq_mwpm_graph_options_init(&go);
  go.per_shot_weights = 1;
  cudaq_mwpm_edge_t one = {0, -1, 1.0, 0};
  cudaq_mwpm_graph_t *other = NULL;
  cudaq_mwpm_decoder_t *dother = NULL;
  assert_int_equal(cudaq_mwpm_graph_from_edges(1, 1, &one, 1, &go, &other), CUDAQ_MWPM_OK);
  assert_int_equal(cudaq_mwpm_decoder_create(other, &dother), CUDAQ_MWPM_OK);
  assert_int_equal(cudaq_predecoder_set_weight_map(p, dother), CUDAQ_PREDECODER_ERR_INVALID_ARG);
  assert_int_equal(cudaq_predecoder_set_weight_map(p, NULL), CUDAQ_PREDECODER_ERR_INVALID_ARG);
  assert_int_equal(cudaq_predecoder_set_weight_map(NULL, dm), CUDAQ_PREDECODER_ERR_INVALID_ARG);
  cudaq_mwpm_decoder_destroy(dother);
  cudaq_mwpm_graph_destroy(other);
  cudaq_mwpm_decoder_destroy(dm);
  cudaq_mwpm_decoder_destroy(dl);
  /* No events: nothing left, every weight near 4. */
  assert_int_equal(cudaq_predecoder_run(p, NULL, 0, res, &nres, &frame, &err), CUDAQ_PREDECODER_OK);
  assert_int_equal(nres, 0);
  assert_int_equal(frame, 0);
  for (size_t i = 0; i < n; i++)
    assert_true(fabs(fabs((double)lg[sl[i]]) - 4.0) <= 0.6 + 1e-6);
  free(w);
  cudaq_predecoder_destroy(p);
}

/* cudaq_nn_model_keep_outputs: bad counts refused, the kept outputs'
 * values unchanged, the hash changed. */
static void test_keep_outputs(void **state) {
  (void)state;
  cudaq_nn_model_t *m = NULL;
  cudaq_nn_error_t nerr;
  assert_int_equal(cudaq_nn_model_load_file(g_model, &m, &nerr), CUDAQ_NN_OK);
  assert_int_equal(cudaq_nn_model_num_outputs(m), 3);
  uint64_t h = cudaq_nn_model_hash(m);
  assert_int_equal(cudaq_nn_model_keep_outputs(m, 0), CUDAQ_NN_ERR_INVALID_ARG);
  assert_int_equal(cudaq_nn_model_keep_outputs(m, 4), CUDAQ_NN_ERR_INVALID_ARG);
  assert_int_equal(cudaq_nn_model_keep_outputs(NULL, 1), CUDAQ_NN_ERR_INVALID_ARG);
  assert_int_equal(cudaq_nn_model_keep_outputs(m, 3), CUDAQ_NN_OK);
  assert_true(cudaq_nn_model_hash(m) == h);
  uint32_t nd = cudaq_mwpm_graph_num_nodes(g_graph);
  int32_t *in = calloc(nd, sizeof *in), *r0 = calloc(nd, sizeof *r0), *r1 = calloc(nd, sizeof *r1);
  int32_t f0[8] = {0}, f1[8] = {0};
  cudaq_nn_binding_t b2;
  assert_int_equal(cudaq_nn_model_output(m, 2, &b2), CUDAQ_NN_OK);
  float *lg = calloc(b2.size_bytes, 1);
  for (uint32_t i = 0; i < nd; i += 7)
    in[i] = 1;
  cudaq_nn_binding_t b1;
  cudaq_nn_model_output(m, 1, &b1);
  size_t isz = nd * sizeof *in, osz[3] = {isz, b1.size_bytes, b2.size_bytes};
  const void *ins[1] = {in};
  void *outs3[3] = {r0, f0, lg}, *outs2[2] = {r1, f1};
  cudaq_nn_cpu_t *cpu = NULL;
  assert_int_equal(cudaq_nn_cpu_create(m, &cpu), CUDAQ_NN_OK);
  assert_int_equal(cudaq_nn_cpu_run(cpu, ins, &isz, outs3, osz, &nerr), CUDAQ_NN_OK);
  cudaq_nn_cpu_destroy(cpu);
  assert_int_equal(cudaq_nn_model_keep_outputs(m, 2), CUDAQ_NN_OK);
  assert_int_equal(cudaq_nn_model_num_outputs(m), 2);
  assert_true(cudaq_nn_model_hash(m) != h);
  assert_int_equal(cudaq_nn_cpu_create(m, &cpu), CUDAQ_NN_OK);
  assert_int_equal(cudaq_nn_cpu_run(cpu, ins, &isz, outs2, osz, &nerr), CUDAQ_NN_OK);
  assert_memory_equal(r0, r1, isz);
  assert_memory_equal(f0, f1, b1.size_bytes);
  assert_memory_equal(r0, in, isz); /* the identity residual */
  cudaq_nn_cpu_destroy(cpu);
  cudaq_nn_model_destroy(m);
  free(in);
  free(r0);
  free(r1);
  free(lg);
}

/* cudaq_predecoder_edge_map_create: the map a weighted predecoder hands
 * MWPM, for runners of the network of their own; AUTO / OFF / ON as the
 * predecoder's options; refusals. */
static void test_edge_map(void **state) {
  (void)state;
  cudaq_nn_model_t *m = NULL, *ident = NULL;
  cudaq_nn_error_t nerr;
  char path[1100];
  snprintf(path, sizeof path, "%s/identity.onnx", g_dir);
  assert_int_equal(cudaq_nn_model_load_file(g_model, &m, &nerr), CUDAQ_NN_OK);
  assert_int_equal(cudaq_nn_model_load_file(path, &ident, &nerr), CUDAQ_NN_OK);
  cudaq_predecoder_error_t err;
  const uint32_t *e, *sl;
  const float *lg;
  size_t n;
  cudaq_predecoder_t *p = weighted(&e, &sl, &n, &lg);
  cudaq_predecoder_edge_map_t map;
  assert_int_equal(cudaq_predecoder_edge_map_create(m, g_graph, CUDAQ_PREDECODER_WEIGHTS_AUTO, &map, &err),
                   CUDAQ_PREDECODER_OK);
  assert_int_equal(map.num_edges, n);
  assert_int_equal(map.logits_output, 2);
  assert_true(map.threshold == 2.0f);
  assert_memory_equal(map.graph_edge, e, n * sizeof *e);
  assert_memory_equal(map.slot, sl, n * sizeof *sl);
  /* per logit: its edge's ends and observables are the graph edge's */
  for (size_t j = 0; j < n; j++) {
    cudaq_mwpm_edge_t ge;
    cudaq_mwpm_graph_edge(g_graph, map.graph_edge[j], &ge);
    uint32_t i = map.slot[j];
    int32_t a = map.ends[2 * i], b = map.ends[2 * i + 1];
    assert_true((a == ge.u && b == ge.v) || (a == ge.v && b == ge.u));
    assert_int_equal(map.obs[i], ge.obs_mask);
  }
  cudaq_predecoder_edge_map_release(&map);
  assert_int_equal(map.num_edges, 0);
  cudaq_predecoder_edge_map_release(&map); /* twice, and NULL: nothing */
  cudaq_predecoder_edge_map_release(NULL);
  /* OFF, and AUTO without edge logits: no map; ON without them: refused. */
  assert_int_equal(cudaq_predecoder_edge_map_create(m, g_graph, CUDAQ_PREDECODER_WEIGHTS_OFF, &map, &err),
                   CUDAQ_PREDECODER_OK);
  assert_int_equal(map.num_edges, 0);
  assert_int_equal(cudaq_predecoder_edge_map_create(ident, g_graph, CUDAQ_PREDECODER_WEIGHTS_AUTO, &map, &err),
                   CUDAQ_PREDECODER_OK);
  assert_int_equal(map.num_edges, 0);
  assert_int_equal(cudaq_predecoder_edge_map_create(ident, g_graph, CUDAQ_PREDECODER_WEIGHTS_ON, &map, &err),
                   CUDAQ_PREDECODER_ERR_MODEL);
  assert_non_null(strstr(err.message, "no output 'edge_logits'"));
  assert_int_equal(cudaq_predecoder_edge_map_create(m, NULL, CUDAQ_PREDECODER_WEIGHTS_ON, &map, &err),
                   CUDAQ_PREDECODER_ERR_INVALID_ARG);
  assert_int_equal(cudaq_predecoder_edge_map_create(m, g_graph, (cudaq_predecoder_weights_t)9, &map, &err),
                   CUDAQ_PREDECODER_ERR_INVALID_ARG);
  assert_int_equal(cudaq_predecoder_edge_map_create(m, g_graph, CUDAQ_PREDECODER_WEIGHTS_ON, NULL, &err),
                   CUDAQ_PREDECODER_ERR_INVALID_ARG);
  cudaq_predecoder_destroy(p);
  cudaq_nn_model_destroy(m);
  cudaq_nn_model_destroy(ident);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DATA_DIR\n", argv[0]);
    return 2;
  }
  g_dir = argv[1];
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_modes),
      cmocka_unit_test(test_shot),
      cmocka_unit_test(test_keep_outputs),
      cmocka_unit_test(test_edge_map),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
