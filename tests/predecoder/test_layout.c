/* The detector layout a model records (metadata `detector_coordinates`,
 * models/README.md) against a DEM's coordinates: cudaq_nn_model_metadata,
 * cudaq_predecoder_check_layout and cudaq_onnx_predecoder_options_t.graph,
 * on the generated models of the predecoder test data (gen_test_models.py)
 * and its d = 5 DEM. Usage: test_layout DATA_DIR */
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
static cudaq_mwpm_graph_t *g_graph; /* the data's DEM, with coordinates */

static cudaq_nn_model_t *load(const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", g_dir, name);
  cudaq_nn_model_t *m = NULL;
  cudaq_nn_error_t err;
  assert_int_equal(cudaq_nn_model_load_file(path, &m, &err), CUDAQ_NN_OK);
  return m;
}

static int setup(void **state) {
  (void)state;
  char path[1024];
  snprintf(path, sizeof path, "%s/circuit.dem", g_dir);
  cudaq_dem_t *dem = NULL;
  if (cudaq_dem_parse_file(path, &dem, NULL) != CUDAQ_MWPM_OK)
    return -1;
  int rc = cudaq_mwpm_graph_from_dem(dem, NULL, &g_graph, NULL) == CUDAQ_MWPM_OK ? 0 : -1;
  cudaq_dem_destroy(dem);
  return rc;
}

static int teardown(void **state) {
  (void)state;
  cudaq_mwpm_graph_destroy(g_graph);
  return 0;
}

/* cudaq_nn_model_metadata: present, absent, NULL arguments. */
static void test_metadata(void **state) {
  (void)state;
  cudaq_nn_model_t *m = load("layout_shifted.onnx");
  assert_string_equal(cudaq_nn_model_metadata(m, "circuit"), "{\"task\": \"test\"}");
  assert_non_null(cudaq_nn_model_metadata(m, "detector_coordinates"));
  assert_null(cudaq_nn_model_metadata(m, "absent"));
  assert_null(cudaq_nn_model_metadata(m, NULL));
  assert_null(cudaq_nn_model_metadata(NULL, "circuit"));
  cudaq_nn_model_destroy(m);
  m = load("identity.onnx");
  assert_null(cudaq_nn_model_metadata(m, "detector_coordinates"));
  cudaq_nn_model_destroy(m);
}

/* The same layout shifted in space and time is accepted after a full
 * comparison; a model without a layout is accepted without one; a DEM
 * without coordinates is refused for a model that records its layout (it
 * cannot be checked). */
static void test_accepted(void **state) {
  (void)state;
  cudaq_predecoder_error_t err;
  int checked = -1;
  cudaq_nn_model_t *m = load("layout_shifted.onnx");
  assert_int_equal(cudaq_predecoder_check_layout(m, g_graph, &checked, &err), CUDAQ_PREDECODER_OK);
  assert_int_equal(checked, 1);
  assert_int_equal(cudaq_predecoder_check_layout(m, g_graph, NULL, &err), CUDAQ_PREDECODER_OK);
  /* the same number of detectors, no coordinates */
  uint32_t n = cudaq_mwpm_graph_num_nodes(g_graph);
  cudaq_mwpm_edge_t *e = malloc((n - 1) * sizeof *e);
  assert_non_null(e);
  for (uint32_t i = 0; i + 1 < n; i++)
    e[i] = (cudaq_mwpm_edge_t){(int32_t)i, (int32_t)i + 1, 1.0, 0};
  cudaq_mwpm_graph_t *bare = NULL;
  assert_int_equal(cudaq_mwpm_graph_from_edges(n, 1, e, n - 1, NULL, &bare), CUDAQ_MWPM_OK);
  checked = -1;
  assert_int_equal(cudaq_predecoder_check_layout(m, bare, &checked, &err), CUDAQ_PREDECODER_ERR_MODEL);
  assert_int_equal(checked, 0);
  assert_non_null(strstr(err.message, "the DEM has no detector coordinates"));
  assert_non_null(strstr(err.message, "check_layout=False)")); /* the whole sentence fits */
  cudaq_nn_model_destroy(m);
  m = load("identity.onnx"); /* no layout recorded: nothing to compare, on either DEM */
  checked = -1;
  assert_int_equal(cudaq_predecoder_check_layout(m, g_graph, &checked, &err), CUDAQ_PREDECODER_OK);
  assert_int_equal(checked, 0);
  checked = -1;
  assert_int_equal(cudaq_predecoder_check_layout(m, bare, &checked, &err), CUDAQ_PREDECODER_OK);
  assert_int_equal(checked, 0);
  cudaq_mwpm_graph_destroy(bare);
  free(e);
  cudaq_nn_model_destroy(m);
}

/* Another layout, another detector count, malformed metadata: refused with
 * a message; NULL arguments. */
static void test_refused(void **state) {
  (void)state;
  static const struct { const char *file, *phrase; } cases[] = {
      {"bad_layout.onnx", "the DEM's detector layout is not the model's (test): detector "},
      {"bad_layout_count.onnx", "has 119 detectors, the DEM 120"},
      {"bad_layout_json.onnx", "is not a list of coordinate lists"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cudaq_nn_model_t *m = load(cases[i].file);
    cudaq_predecoder_error_t err;
    int checked = -1;
    assert_int_equal(cudaq_predecoder_check_layout(m, g_graph, &checked, &err),
                     CUDAQ_PREDECODER_ERR_MODEL);
    assert_int_equal(checked, 0);
    assert_non_null(strstr(err.message, cases[i].phrase));
    cudaq_nn_model_destroy(m);
  }
  cudaq_nn_model_t *m = load("identity.onnx");
  assert_int_equal(cudaq_predecoder_check_layout(NULL, g_graph, NULL, NULL), CUDAQ_PREDECODER_ERR_INVALID_ARG);
  assert_int_equal(cudaq_predecoder_check_layout(m, NULL, NULL, NULL), CUDAQ_PREDECODER_ERR_INVALID_ARG);
  cudaq_nn_model_destroy(m);
}

/* A DEM with coordinates on some detectors only (its first `detector(...)`
 * line dropped) is refused where the model records a layout. */
static void test_partial_coordinates(void **state) {
  (void)state;
  char path[1024];
  snprintf(path, sizeof path, "%s/circuit.dem", g_dir);
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = malloc((size_t)len + 1);
  assert_non_null(text);
  assert_int_equal(fread(text, 1, (size_t)len, f), (size_t)len);
  fclose(f);
  text[len] = '\0';
  char *line = strstr(text, "detector(");
  assert_non_null(line);
  char *next = strchr(line, '\n');
  assert_non_null(next);
  memmove(line, next + 1, strlen(next + 1) + 1);
  cudaq_dem_t *dem = NULL;
  assert_int_equal(cudaq_dem_parse(text, strlen(text), &dem, NULL), CUDAQ_MWPM_OK);
  cudaq_mwpm_graph_t *g = NULL;
  assert_int_equal(cudaq_mwpm_graph_from_dem(dem, NULL, &g, NULL), CUDAQ_MWPM_OK);
  cudaq_nn_model_t *m = load("layout_shifted.onnx");
  cudaq_predecoder_error_t err;
  int checked = -1;
  assert_int_equal(cudaq_predecoder_check_layout(m, g, &checked, &err), CUDAQ_PREDECODER_ERR_MODEL);
  assert_int_equal(checked, 0);
  assert_non_null(strstr(err.message, "gives coordinates to 119 of its 120 detectors"));
  cudaq_nn_model_destroy(m);
  m = load("identity.onnx"); /* no recorded layout: nothing to check */
  assert_int_equal(cudaq_predecoder_check_layout(m, g, &checked, &err), CUDAQ_PREDECODER_OK);
  cudaq_nn_model_destroy(m);
  cudaq_mwpm_graph_destroy(g);
  cudaq_dem_destroy(dem);
  free(text);
}

/* cudaq_predecoder_create_onnx checks the layout where opts->graph is set,
 * and only there. */
static void test_create(void **state) {
  (void)state;
  char path[1024];
  snprintf(path, sizeof path, "%s/bad_layout.onnx", g_dir);
  uint32_t n = cudaq_mwpm_graph_num_nodes(g_graph), no = cudaq_mwpm_graph_num_observables(g_graph);
  cudaq_onnx_predecoder_options_t opts;
  assert_int_equal(cudaq_onnx_predecoder_options_init(&opts), CUDAQ_PREDECODER_OK);
  assert_null(opts.graph);
  cudaq_predecoder_t *p = NULL;
  cudaq_predecoder_error_t err;
  assert_int_equal(cudaq_predecoder_create_onnx(path, n, no, &opts, &p, &err), CUDAQ_PREDECODER_OK);
  cudaq_predecoder_destroy(p);
  p = NULL;
  opts.graph = g_graph;
  assert_int_equal(cudaq_predecoder_create_onnx(path, n, no, &opts, &p, &err), CUDAQ_PREDECODER_ERR_MODEL);
  assert_null(p);
  assert_non_null(strstr(err.message, "detector layout"));
  snprintf(path, sizeof path, "%s/layout_shifted.onnx", g_dir);
  assert_int_equal(cudaq_predecoder_create_onnx(path, n, no, &opts, &p, &err), CUDAQ_PREDECODER_OK);
  cudaq_predecoder_destroy(p);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DATA_DIR\n", argv[0]);
    return 2;
  }
  g_dir = argv[1];
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_metadata),
      cmocka_unit_test(test_accepted),
      cmocka_unit_test(test_refused),
      cmocka_unit_test(test_partial_coordinates),
      cmocka_unit_test(test_create),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
