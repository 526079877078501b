/* Test helper: our MWPM decoder's matching weight and observables on chosen
 * shots of a b8 file (the residual events written by reference_eval.py), so
 * the reference-agreement test can tell an exact tie between two MWPM
 * decoders (equal weights, different observables) from a real
 * disagreement. Usage: mwpm_weight DEM RESIDUAL.b8 [--model M RAW FORMAT]
 * SHOT... (1-based); prints "SHOT WEIGHT OBS_MASK" per shot. With --model
 * and a model that gives edge logits (weighted matching, models/README.md),
 * each chosen shot of RAW (the raw events, FORMAT 01, b8 or dets) goes
 * through the predecoder (CPU executor) and its residual is matched with
 * that shot's edge weights, as qec-decode does; otherwise RESIDUAL's shot is
 * matched on the DEM's weights. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudaq/qec/dem.h"
#include "cudaq/qec/mwpm.h"
#include "cudaq/qec/predecoder.h"
#include "cudaq/qec/samples.h"

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: mwpm_weight DEM RESIDUAL.b8 [--model M RAW FORMAT] SHOT...\n");
    return 2;
  }
  int next = 3;
  const char *model = NULL, *raw = NULL;
  cudaq_sample_format_t raw_fmt = CUDAQ_SAMPLE_B8;
  if (argc > 6 && !strcmp(argv[3], "--model")) {
    model = argv[4];
    raw = argv[5];
    if (cudaq_sample_format_parse(argv[6], &raw_fmt)) {
      fprintf(stderr, "mwpm_weight: bad format %s\n", argv[6]);
      return 2;
    }
    next = 7;
  }
  cudaq_dem_t *dem = NULL;
  cudaq_mwpm_error_t err;
  if (cudaq_dem_parse_file(argv[1], &dem, &err)) {
    fprintf(stderr, "mwpm_weight: %s: %s\n", argv[1], err.message);
    return 1;
  }
  cudaq_mwpm_graph_options_t go;
  cudaq_mwpm_graph_options_init(&go);
  go.per_shot_weights = model != NULL;
  cudaq_mwpm_graph_t *g = NULL;
  cudaq_mwpm_decoder_t *dec = NULL;
  uint32_t nd = dem->num_detectors, no = dem->num_observables;
  uint32_t *events = malloc(((size_t)nd + 1) * sizeof *events);
  uint32_t *residual = malloc(((size_t)nd + 1) * sizeof *residual);
  FILE *f = fopen(model ? raw : argv[2], "rb");
  cudaq_sample_reader_t *rd = NULL;
  if (!events || !residual || !f || cudaq_mwpm_graph_from_dem(dem, &go, &g, &err) ||
      cudaq_mwpm_decoder_create(g, &dec) ||
      cudaq_sample_reader_create(f, model ? raw_fmt : CUDAQ_SAMPLE_B8, nd, 0, &rd)) {
    fprintf(stderr, "mwpm_weight: cannot set up (%s)\n", f ? "out of memory" : model ? raw : argv[2]);
    return 1;
  }
  cudaq_predecoder_t *pd = NULL;
  if (model) { /* weighted where the model gives weights; else the DEM's weights on RESIDUAL */
    cudaq_onnx_predecoder_options_t oo;
    cudaq_onnx_predecoder_options_init(&oo);
    oo.match_graph = g;
    cudaq_predecoder_error_t perr;
    if (cudaq_predecoder_create_onnx(model, nd, no, &oo, &pd, &perr) || !cudaq_predecoder_weighted(pd) ||
        cudaq_predecoder_set_weight_map(pd, dec)) {
      cudaq_predecoder_destroy(pd);
      pd = NULL;
      cudaq_sample_reader_destroy(rd);
      fclose(f);
      if (!(f = fopen(argv[2], "rb")) || cudaq_sample_reader_create(f, CUDAQ_SAMPLE_B8, nd, 0, &rd)) {
        fprintf(stderr, "mwpm_weight: cannot read %s\n", argv[2]);
        return 1;
      }
    }
  }
  int rc = 0;
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
    cudaq_mwpm_status_t st;
    if (pd) {
      size_t nr = 0;
      uint64_t frame = 0;
      const uint32_t *ew, *sl;
      const float *lg;
      size_t nw;
      cudaq_predecoder_error_t perr;
      if (cudaq_predecoder_run(pd, events, ne, residual, &nr, &frame, &perr) ||
          cudaq_predecoder_edge_weights(pd, &ew, &sl, &nw, &lg)) {
        fprintf(stderr, "mwpm_weight: shot %ld: predecoder: %s\n", shot, perr.message);
        rc = 1;
        break;
      }
      st = cudaq_mwpm_decode_mapped(dec, residual, nr, lg, &res);
    } else {
      st = cudaq_mwpm_decode(dec, events, ne, &res);
    }
    if (st) {
      fprintf(stderr, "mwpm_weight: shot %ld: %s\n", shot, cudaq_mwpm_status_str(st));
      rc = 1;
      break;
    }
    printf("%ld %.17g %llu\n", shot, res.weight, (unsigned long long)res.obs_mask);
  }
  cudaq_predecoder_destroy(pd);
  cudaq_sample_reader_destroy(rd);
  fclose(f);
  cudaq_mwpm_decoder_destroy(dec);
  cudaq_mwpm_graph_destroy(g);
  cudaq_dem_destroy(dem);
  free(events);
  free(residual);
  return rc;
}
