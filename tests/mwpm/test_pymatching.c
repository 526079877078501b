/* Agreement with PyMatching on stim surface-code samples made by
 * tools/mwpm_reference.py (a ctest fixture): on every shot our matching
 * weighs no more than PyMatching's (up to the rounding of integer weights),
 * the logical error counts agree within statistical error, and on d = 3
 * every shot with at most MAXK events is checked against brute force.
 *
 * Usage: test_pymatching DATA_DIR (the directory holding manifest.txt). */
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
#include "cudaq/qec/samples.h"

#define MAXK 16
#define MAXN 128

static const char *data_dir;

static FILE *open_data(const char *name, const char *suffix) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s%s", data_dir, name, suffix);
  FILE *f = fopen(path, "rb");
  if (!f)
    fprintf(stderr, "cannot open %s\n", path);
  assert_non_null(f);
  return f;
}

/* Brute force on small graphs: Floyd-Warshall + DP over pairings. */
static double dist[MAXN + 1][MAXN + 1];

static void floyd(const cudaq_mwpm_graph_t *g) {
  uint32_t n = cudaq_mwpm_graph_num_nodes(g);
  for (uint32_t i = 0; i <= n; i++)
    for (uint32_t j = 0; j <= n; j++)
      dist[i][j] = i == j ? 0 : INFINITY;
  for (size_t k = 0; k < cudaq_mwpm_graph_num_edges(g); k++) {
    cudaq_mwpm_edge_t e;
    cudaq_mwpm_graph_edge(g, k, &e);
    uint32_t u = (uint32_t)e.u, v = e.v < 0 ? n : (uint32_t)e.v;
    if (e.weight < dist[u][v])
      dist[u][v] = dist[v][u] = e.weight;
  }
  for (uint32_t k = 0; k <= n; k++)
    for (uint32_t i = 0; i <= n; i++)
      for (uint32_t j = 0; j <= n; j++)
        if (dist[i][k] + dist[k][j] < dist[i][j])
          dist[i][j] = dist[i][k] + dist[k][j];
}

static double brute(uint32_t n, const uint32_t *ev, int k) {
  static double f[1 << MAXK];
  f[0] = 0;
  for (int s = 1; s < (1 << k); s++) {
    int i = __builtin_ctz((unsigned)s);
    int rest = s & ~(1 << i);
    double best = f[rest] + dist[ev[i]][n];
    for (int j = i + 1; j < k; j++)
      if (rest >> j & 1) {
        double c = f[rest & ~(1 << j)] + dist[ev[i]][ev[j]];
        if (c < best)
          best = c;
      }
    f[s] = best;
  }
  return f[(1 << k) - 1];
}

static void check_dataset(const char *name, int d, double p, size_t shots) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.dem", data_dir, name);
  cudaq_dem_t *dem = NULL;
  cudaq_mwpm_error_t err;
  assert_int_equal(cudaq_dem_parse_file(path, &dem, &err), CUDAQ_MWPM_OK);
  cudaq_mwpm_graph_t *g = NULL;
  assert_int_equal(cudaq_mwpm_graph_from_dem(dem, NULL, &g, &err), CUDAQ_MWPM_OK);
  uint32_t nd = dem->num_detectors, no = dem->num_observables;
  cudaq_dem_destroy(dem);
  cudaq_mwpm_decoder_t *dec = NULL;
  assert_int_equal(cudaq_mwpm_decoder_create(g, &dec), CUDAQ_MWPM_OK);
  int do_brute = d == 3 && nd <= MAXN;
  if (do_brute)
    floyd(g);
  FILE *fd = open_data(name, ".b8"), *fo = open_data(name, ".obs.01"),
       *fp = open_data(name, ".pm.01"), *fw = open_data(name, ".pmw.txt");
  cudaq_sample_reader_t *rd, *ro, *rp;
  assert_int_equal(cudaq_sample_reader_create(fd, CUDAQ_SAMPLE_B8, nd, 0, &rd), CUDAQ_MWPM_OK);
  assert_int_equal(cudaq_sample_reader_create(fo, CUDAQ_SAMPLE_01, 0, no, &ro), CUDAQ_MWPM_OK);
  assert_int_equal(cudaq_sample_reader_create(fp, CUDAQ_SAMPLE_01, 0, no, &rp), CUDAQ_MWPM_OK);
  uint32_t *events = malloc(nd * sizeof *events);
  assert_non_null(events);
  size_t n = 0, ours_wrong = 0, pm_wrong = 0, disagree = 0, lighter = 0, brute_checked = 0;
  double worst = -INFINITY;
  for (;;) {
    size_t ne = 0, dummy = 0;
    uint64_t obs_none, truth, pm_pred;
    cudaq_mwpm_status_t st = cudaq_sample_reader_next(rd, events, &ne, &obs_none, &err);
    if (st == CUDAQ_MWPM_EOF)
      break;
    assert_int_equal(st, CUDAQ_MWPM_OK);
    assert_int_equal(cudaq_sample_reader_next(ro, NULL, &dummy, &truth, &err), CUDAQ_MWPM_OK);
    assert_int_equal(cudaq_sample_reader_next(rp, NULL, &dummy, &pm_pred, &err), CUDAQ_MWPM_OK);
    double pmw;
    assert_int_equal(fscanf(fw, "%lf", &pmw), 1);
    cudaq_mwpm_result_t res;
    assert_int_equal(cudaq_mwpm_decode(dec, events, ne, &res), CUDAQ_MWPM_OK);
    /* Ours is exact for weights on a 2^24 grid; PyMatching's for a coarser
     * one: allow our rounding error (edges x max weight x 2^-24). */
    double tol = 1e-5 * (1.0 + (double)ne) + 1e-9 * pmw;
    if (res.weight > pmw + tol) {
      fprintf(stderr, "%s shot %zu: our weight %.12g > PyMatching's %.12g\n", name, n,
              res.weight, pmw);
      fail();
    }
    if (res.weight - pmw > worst)
      worst = res.weight - pmw;
    lighter += res.weight < pmw - tol;
    if (do_brute && ne <= MAXK) {
      double bw = brute(nd, events, (int)ne);
      if (fabs(bw - res.weight) > tol) {
        fprintf(stderr, "%s shot %zu: our weight %.12g, brute force %.12g\n", name, n,
                res.weight, bw);
        fail();
      }
      brute_checked++;
    }
    ours_wrong += res.obs_mask != truth;
    pm_wrong += pm_pred != truth;
    disagree += pm_pred != res.obs_mask;
    n++;
  }
  assert_int_equal(n, shots);
  /* Both decoders are minimum-weight: they differ only where several
   * matchings tie (or PyMatching's rounding picks another). The logical
   * error counts must agree within statistical error. */
  double sigma = sqrt((double)(ours_wrong + pm_wrong) + 1.0);
  printf("%-16s d=%-2d p=%-6g shots=%zu  errors ours=%zu pymatching=%zu  predictions differ=%zu"
         "  lighter than PM=%zu  max(ours-PM)=%.2e  brute-force checked=%zu\n",
         name, d, p, n, ours_wrong, pm_wrong, disagree, lighter, worst, brute_checked);
  assert_true(fabs((double)ours_wrong - (double)pm_wrong) <= 3.0 * sigma);
  assert_true(!do_brute || brute_checked > n / 2);
  free(events);
  cudaq_sample_reader_destroy(rd);
  cudaq_sample_reader_destroy(ro);
  cudaq_sample_reader_destroy(rp);
  fclose(fd);
  fclose(fo);
  fclose(fp);
  fclose(fw);
  cudaq_mwpm_decoder_destroy(dec);
  cudaq_mwpm_graph_destroy(g);
}

static void test_agreement(void **state) {
  (void)state;
  char path[1024];
  snprintf(path, sizeof path, "%s/manifest.txt", data_dir);
  FILE *m = fopen(path, "r");
  if (!m)
    fprintf(stderr, "missing %s: the reference data fixture (tools/mwpm_reference.py) did not "
                    "run; create the venv with scripts/venv.sh\n", path);
  assert_non_null(m);
  char name[256];
  int d;
  double p;
  size_t shots, count = 0;
  unsigned nd, no;
  while (fscanf(m, "%255s %d %lf %zu %u %u", name, &d, &p, &shots, &nd, &no) == 6) {
    check_dataset(name, d, p, shots);
    count++;
  }
  fclose(m);
  assert_true(count > 0);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DATA_DIR\n", argv[0]);
    return 2;
  }
  data_dir = argv[1];
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_agreement)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
