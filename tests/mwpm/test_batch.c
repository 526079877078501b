/* cudaq_mwpm_decode_batch: on stim surface-code samples made by
 * tools/mwpm_reference.py (the mwpm_ref fixture), 1..4 threads, dense and
 * bit-packed shots and predictions, plain and correlated matching give the
 * same predictions and the same weights (bit for bit) as a one-decoder loop
 * over cudaq_mwpm_decode_dense / _correlated; errors name the first failing
 * shot; bad arguments are refused.
 *
 * Usage: test_batch DATA_DIR (the directory holding manifest.txt). */
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

static const char *data_dir;

typedef struct data {
  cudaq_mwpm_graph_t *g;
  uint8_t *packed, *dense;
  size_t n;
  uint32_t nd, no;
} data_t;

static void load(const char *name, int correlations, data_t *d) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.dem", data_dir, name);
  cudaq_dem_t *dem;
  cudaq_mwpm_error_t err;
  assert_int_equal(cudaq_dem_parse_file(path, &dem, &err), CUDAQ_MWPM_OK);
  cudaq_mwpm_graph_options_t opts;
  cudaq_mwpm_graph_options_init(&opts);
  opts.enable_correlations = correlations;
  assert_int_equal(cudaq_mwpm_graph_from_dem(dem, &opts, &d->g, &err), CUDAQ_MWPM_OK);
  cudaq_dem_destroy(dem);
  d->nd = cudaq_mwpm_graph_num_nodes(d->g);
  d->no = cudaq_mwpm_graph_num_observables(d->g);
  snprintf(path, sizeof path, "%s/%s.b8", data_dir, name);
  FILE *f = fopen(path, "rb");
  if (!f)
    fprintf(stderr, "cannot open %s\n", path);
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  size_t row = (d->nd + 7) / 8;
  assert_true(len > 0 && (size_t)len % row == 0);
  d->n = (size_t)len / row;
  d->packed = malloc((size_t)len);
  assert_int_equal(fread(d->packed, 1, (size_t)len, f), (size_t)len);
  fclose(f);
  d->dense = calloc(d->n, d->nd);
  for (size_t s = 0; s < d->n; s++)
    for (uint32_t k = 0; k < d->nd; k++)
      d->dense[s * d->nd + k] = (uint8_t)((d->packed[s * row + k / 8] >> (k % 8)) & 1);
}

static void unload(data_t *d) {
  cudaq_mwpm_graph_destroy(d->g);
  free(d->packed);
  free(d->dense);
}

static void check(const char *name, int correlated) {
  data_t d;
  load(name, correlated, &d);
  /* Reference: one decoder, shot by shot. */
  uint64_t *ref_obs = malloc(d.n * sizeof *ref_obs);
  double *ref_w = malloc(d.n * sizeof *ref_w);
  cudaq_mwpm_decoder_t *decs[4];
  for (int t = 0; t < 4; t++)
    assert_int_equal(cudaq_mwpm_decoder_create(d.g, &decs[t]), CUDAQ_MWPM_OK);
  for (size_t s = 0; s < d.n; s++) {
    cudaq_mwpm_result_t res;
    cudaq_mwpm_status_t st = correlated
                                 ? cudaq_mwpm_decode_dense_correlated(decs[0], d.dense + s * d.nd, &res)
                                 : cudaq_mwpm_decode_dense(decs[0], d.dense + s * d.nd, &res);
    assert_int_equal(st, CUDAQ_MWPM_OK);
    ref_obs[s] = res.obs_mask;
    ref_w[s] = res.weight;
  }
  size_t pb = (d.no + 7) / 8;
  uint8_t *preds = malloc(d.n * (d.no > pb ? d.no : pb));
  double *w = malloc(d.n * sizeof *w);
  /* Correlated matching is slow (two passes): fewer combinations. */
  for (unsigned layout = 0; layout < 4; layout += correlated ? 3 : 1)
    for (size_t t = 1; t <= 4; t += correlated ? 2 : 1) {
      unsigned flags = layout | (correlated ? CUDAQ_MWPM_BATCH_CORRELATED : 0u);
      const uint8_t *shots = (layout & CUDAQ_MWPM_BATCH_PACKED_SHOTS) ? d.packed : d.dense;
      memset(w, 0xff, d.n * sizeof *w);
      size_t bad = 12345;
      assert_int_equal(cudaq_mwpm_decode_batch(decs, t, shots, d.n, flags, preds, w, &bad),
                       CUDAQ_MWPM_OK);
      assert_int_equal(bad, 12345); /* untouched on success */
      size_t mism = 0;
      for (size_t s = 0; s < d.n; s++) {
        uint64_t o = 0;
        if (layout & CUDAQ_MWPM_BATCH_PACKED_PREDICTIONS)
          for (size_t b = 0; b < pb; b++)
            o |= (uint64_t)preds[s * pb + b] << (8 * b);
        else
          for (uint32_t k = 0; k < d.no; k++)
            o |= (uint64_t)(preds[s * d.no + k] & 1) << k;
        if (o != ref_obs[s] || memcmp(&w[s], &ref_w[s], sizeof w[s]))
          mism++;
      }
      if (mism)
        fprintf(stderr, "%s corr=%d layout=%u threads=%zu: %zu of %zu shots differ\n", name,
                correlated, layout, t, mism, d.n);
      assert_int_equal(mism, 0);
      /* weights NULL is allowed */
      if (t == 2)
        assert_int_equal(cudaq_mwpm_decode_batch(decs, t, shots, d.n, flags, preds, NULL, NULL),
                       CUDAQ_MWPM_OK);
    }
  for (int t = 0; t < 4; t++)
    cudaq_mwpm_decoder_destroy(decs[t]);
  free(preds);
  free(w);
  free(ref_obs);
  free(ref_w);
  unload(&d);
}

static void test_agree_plain(void **state) {
  (void)state;
  check("x_d5_p0.005", 0);
  check("z_d7_p0.01", 0);
}

static void test_agree_correlated(void **state) {
  (void)state;
  check("x_d5_p0.01", 1);
}

/* Nodes 0-1 form a component without boundary: a shot with one event there
 * has no solution. Node 2 has a boundary edge. */
static void test_first_failing_shot(void **state) {
  (void)state;
  cudaq_mwpm_edge_t e[] = {{0, 1, 1.0, 1}, {2, CUDAQ_MWPM_BOUNDARY, 2.0, 2}};
  cudaq_mwpm_graph_t *g;
  assert_int_equal(cudaq_mwpm_graph_from_edges(3, 2, e, 2, NULL, &g), CUDAQ_MWPM_OK);
  cudaq_mwpm_decoder_t *decs[3];
  for (int t = 0; t < 3; t++)
    assert_int_equal(cudaq_mwpm_decoder_create(g, &decs[t]), CUDAQ_MWPM_OK);
  enum { N = 1000 };
  static uint8_t shots[N * 3], preds[N * 2];
  static double w[N];
  for (size_t s = 0; s < N; s++) {
    shots[s * 3 + 2] = (uint8_t)(s & 1);
    shots[s * 3 + 0] = shots[s * 3 + 1] = (uint8_t)(s % 3 == 0);
  }
  shots[777 * 3 + 0] = 0; /* odd on the 0-1 component */
  shots[901 * 3 + 1] = 1;
  shots[130 * 3 + 0] = 1; /* 130 % 3 == 1: node 0 alone, the first failing shot */
  for (size_t t = 1; t <= 3; t++) {
    size_t bad = 0;
    assert_int_equal(cudaq_mwpm_decode_batch(decs, t, shots, N, 0, preds, w, &bad),
                     CUDAQ_MWPM_ERR_NO_SOLUTION);
    assert_int_equal(bad, 130);
    for (size_t s = 0; s < 130; s++) {
      assert_int_equal(preds[s * 2 + 0], s % 3 == 0); /* the 0-1 edge flips observable 0 */
      assert_int_equal(preds[s * 2 + 1], s & 1);
      assert_true(w[s] == (s % 3 == 0 ? 1.0 : 0.0) + ((s & 1) ? 2.0 : 0.0));
    }
  }
  /* Bad arguments. */
  size_t bad = 0;
  assert_int_equal(cudaq_mwpm_decode_batch(NULL, 1, shots, N, 0, preds, w, &bad),
                   CUDAQ_MWPM_ERR_INVALID_ARG);
  assert_int_equal(cudaq_mwpm_decode_batch(decs, 0, shots, N, 0, preds, w, &bad),
                   CUDAQ_MWPM_ERR_INVALID_ARG);
  assert_int_equal(cudaq_mwpm_decode_batch(decs, CUDAQ_MWPM_BATCH_MAX_THREADS + 1, shots, N, 0,
                                           preds, w, &bad),
                   CUDAQ_MWPM_ERR_INVALID_ARG);
  assert_int_equal(cudaq_mwpm_decode_batch(decs, 1, NULL, N, 0, preds, w, &bad),
                   CUDAQ_MWPM_ERR_INVALID_ARG);
  assert_int_equal(cudaq_mwpm_decode_batch(decs, 1, shots, N, 0, NULL, w, &bad),
                   CUDAQ_MWPM_ERR_INVALID_ARG);
  assert_int_equal(cudaq_mwpm_decode_batch(decs, 1, shots, N, 64, preds, w, &bad),
                   CUDAQ_MWPM_ERR_INVALID_ARG);
  assert_int_equal(cudaq_mwpm_decode_batch(decs, 1, shots, N, CUDAQ_MWPM_BATCH_CORRELATED, preds,
                                           w, &bad),
                   CUDAQ_MWPM_ERR_INVALID_ARG); /* no correlations in this graph */
  cudaq_mwpm_graph_t *g2;
  assert_int_equal(cudaq_mwpm_graph_from_edges(3, 2, e, 2, NULL, &g2), CUDAQ_MWPM_OK);
  cudaq_mwpm_decoder_t *other;
  assert_int_equal(cudaq_mwpm_decoder_create(g2, &other), CUDAQ_MWPM_OK);
  cudaq_mwpm_decoder_t *mixed[2] = {decs[0], other};
  assert_int_equal(cudaq_mwpm_decode_batch(mixed, 2, shots, N, 0, preds, w, &bad),
                   CUDAQ_MWPM_ERR_INVALID_ARG);
  assert_int_equal(cudaq_mwpm_decode_batch(decs, 2, NULL, 0, 0, NULL, NULL, NULL), CUDAQ_MWPM_OK);
  assert_ptr_equal(cudaq_mwpm_decoder_graph(decs[0]), g);
  assert_null(cudaq_mwpm_decoder_graph(NULL));
  cudaq_mwpm_decoder_destroy(other);
  cudaq_mwpm_graph_destroy(g2);
  for (int t = 0; t < 3; t++)
    cudaq_mwpm_decoder_destroy(decs[t]);
  cudaq_mwpm_graph_destroy(g);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DATA_DIR\n", argv[0]);
    return 2;
  }
  data_dir = argv[1];
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_agree_plain),
      cmocka_unit_test(test_agree_correlated),
      cmocka_unit_test(test_first_failing_shot),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
