/* Test helper: our MWPM decoder's matching weight and observables on chosen
 * shots of a b8 file (the residual events written by reference_eval.py), so
 * the reference-agreement test can tell an exact tie between two MWPM
 * decoders (equal weights, different observables) from a real
 * disagreement. Usage: mwpm_weight DEM RESIDUAL.b8 SHOT... (1-based);
 * prints "SHOT WEIGHT OBS_MASK" per shot. */
#include <stdio.h>
#include <stdlib.h>

#include "cudaq/qec/dem.h"
#include "cudaq/qec/mwpm.h"
#include "cudaq/qec/samples.h"

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: mwpm_weight DEM RESIDUAL.b8 SHOT...\n");
    return 2;
  }
  cudaq_dem_t *dem = NULL;
  cudaq_mwpm_error_t err;
  if (cudaq_dem_parse_file(argv[1], &dem, &err)) {
    fprintf(stderr, "mwpm_weight: %s: %s\n", argv[1], err.message);
    return 1;
  }
  cudaq_mwpm_graph_t *g = NULL;
  cudaq_mwpm_decoder_t *dec = NULL;
  uint32_t nd = dem->num_detectors;
  uint32_t *events = malloc(((size_t)nd + 1) * sizeof *events);
  FILE *f = fopen(argv[2], "rb");
  cudaq_sample_reader_t *rd = NULL;
  if (!events || !f || cudaq_mwpm_graph_from_dem(dem, NULL, &g, &err) ||
      cudaq_mwpm_decoder_create(g, &dec) ||
      cudaq_sample_reader_create(f, CUDAQ_SAMPLE_B8, nd, 0, &rd)) {
    fprintf(stderr, "mwpm_weight: cannot set up (%s)\n", f ? "out of memory" : argv[2]);
    return 1;
  }
  int rc = 0, next = 3;
  for (long shot = 1; next < argc; shot++) {
    size_t ne = 0;
    uint64_t obs = 0;
    if (cudaq_sample_reader_next(rd, events, &ne, &obs, &err)) {
      fprintf(stderr, "mwpm_weight: shot %ld: cannot read\n", shot);
      rc = 1;
      break;
    }
    if (shot != atol(argv[next]))
      continue;
    next++;
    cudaq_mwpm_result_t res;
    cudaq_mwpm_status_t st = cudaq_mwpm_decode(dec, events, ne, &res);
    if (st) {
      fprintf(stderr, "mwpm_weight: shot %ld: %s\n", shot, cudaq_mwpm_status_str(st));
      rc = 1;
      break;
    }
    printf("%ld %.17g %llu\n", shot, res.weight, (unsigned long long)res.obs_mask);
  }
  cudaq_sample_reader_destroy(rd);
  fclose(f);
  cudaq_mwpm_decoder_destroy(dec);
  cudaq_mwpm_graph_destroy(g);
  cudaq_dem_destroy(dem);
  free(events);
  return rc;
}
