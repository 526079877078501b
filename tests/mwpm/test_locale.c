/* Numbers are read in the C locale whatever LC_NUMERIC the host application
 * set (cudaq_dem_strtod, the DEM parser): under a comma-decimal locale,
 * plain strtod reads "0.125" as 0. Usage: test_locale LOCALE (a locale whose
 * decimal point is ','; test_locale.sh makes one with localedef). Exit 77
 * ("skipped") where it cannot be set. */
#define _POSIX_C_SOURCE 200809L
#include <locale.h>
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

static void test_strtod(void **state) {
  (void)state;
  char *end;
  assert_true(strtod("0.125", &end) != 0.125); /* the locale bites plain strtod */
  assert_true(cudaq_dem_strtod("0.125", &end) == 0.125);
  assert_int_equal(*end, '\0');
  assert_true(cudaq_dem_strtod("-1.5e-3,", &end) == -1.5e-3);
  assert_int_equal(*end, ',');
}

static void test_dem(void **state) {
  (void)state;
  const char *text = "error(0.125) D0 L0\nerror(0.25) D0 D1\ndetector(1.5, 2.25, 0) D0\n"
                     "detector(3.5, 2.25, 0) D1\n";
  cudaq_dem_t *dem = NULL;
  cudaq_mwpm_error_t err;
  assert_int_equal(cudaq_dem_parse(text, strlen(text), &dem, &err), CUDAQ_MWPM_OK);
  cudaq_mwpm_graph_t *g = NULL;
  assert_int_equal(cudaq_mwpm_graph_from_dem(dem, NULL, &g, &err), CUDAQ_MWPM_OK);
  const double *c;
  size_t n;
  assert_int_equal(cudaq_mwpm_graph_coords(g, 0, &c, &n), CUDAQ_MWPM_OK);
  assert_int_equal(n, 3);
  assert_true(c[0] == 1.5 && c[1] == 2.25);
  /* the boundary edge of D0 weighs ln((1 - 0.125) / 0.125) */
  int found = 0;
  for (size_t i = 0; i < cudaq_mwpm_graph_num_edges(g); i++) {
    cudaq_mwpm_edge_t e;
    assert_int_equal(cudaq_mwpm_graph_edge(g, i, &e), CUDAQ_MWPM_OK);
    if (e.v == CUDAQ_MWPM_BOUNDARY || e.u == CUDAQ_MWPM_BOUNDARY) {
      assert_float_equal(e.weight, 1.9459101090932196, 1e-12);
      found = 1;
    }
  }
  assert_true(found);
  cudaq_mwpm_graph_destroy(g);
  cudaq_dem_destroy(dem);
}

int main(int argc, char **argv) {
  if (argc != 2 || !setlocale(LC_NUMERIC, argv[1]) || localeconv()->decimal_point[0] != ',') {
    printf("skipped: no comma-decimal locale '%s' to run under\n", argc == 2 ? argv[1] : "");
    return 77;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_strtod),
      cmocka_unit_test(test_dem),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
