/*
 * Batch entry points for the Python package (python/cudaq_realtime), loaded
 * with ctypes from libcudaq_realtime_py.so. The library also exports every
 * public cudaq_* function of the MWPM decoder, the predecoders and the NN CPU
 * executor (linked whole from their static libraries), which the package
 * calls directly for everything that is not a loop over shots.
 *
 * Why loops in C: a ctypes call costs about a microsecond, as much as
 * decoding a small shot, so a batch of shots is one call. ctypes releases the
 * GIL for the duration of every foreign call, so two Python threads decode
 * in parallel (each with its own decoder state).
 *
 * Not on the realtime path: these functions allocate their scratch per call.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cudaq/qec/mwpm.h"
#include "cudaq/qec/predecoder.h"

/* Which layer a failure came from (cudaq_py_hybrid_decode_batch). */
enum { CUDAQ_PY_LAYER_NONE = 0, CUDAQ_PY_LAYER_PREDECODER = 1, CUDAQ_PY_LAYER_MWPM = 2 };

/* Exported (the package's ABI check): bump when a signature below changes. */
int cudaq_py_abi_version(void);
int cudaq_py_abi_version(void) { return 4; } /* 4: cudaq_py_struct_size; 3: cudaq_mwpm_decode_batch used */

/* The size of the C structures the package mirrors with ctypes (its import
 * compares them, so a field added on one side only is caught there): 0
 * cudaq_mwpm_graph_options_t, 1 cudaq_mwpm_result_t, 2 cudaq_mwpm_edge_t, 3
 * cudaq_onnx_predecoder_options_t, 4 cudaq_local_predecoder_options_t, 5
 * cudaq_nn_binding_t; 0 for another value. */
size_t cudaq_py_struct_size(int which);
size_t cudaq_py_struct_size(int which) {
  switch (which) {
    case 0: return sizeof(cudaq_mwpm_graph_options_t);
    case 1: return sizeof(cudaq_mwpm_result_t);
    case 2: return sizeof(cudaq_mwpm_edge_t);
    case 3: return sizeof(cudaq_onnx_predecoder_options_t);
    case 4: return sizeof(cudaq_local_predecoder_options_t);
    case 5: return sizeof(cudaq_nn_binding_t);
  }
  return 0;
}

/* Rows of shots and predictions: cudaq_mwpm_shot_events and
 * cudaq_mwpm_write_prediction (mwpm.h), shared with cudaq_mwpm_decode_batch. */
static size_t row_bytes(uint32_t n, int packed) { return packed ? (n + 7u) / 8u : n; }

int cudaq_py_mwpm_decode_batch(cudaq_mwpm_decoder_t *dec, uint32_t num_dets, uint32_t num_obs,
                               const uint8_t *shots, size_t num_shots, int packed_in,
                               uint8_t *preds, int packed_out, double *weights,
                               int correlated, size_t *bad_shot);

/* Decodes num_shots rows of `shots` with MWPM (correlated: two-pass
 * correlated matching, cudaq_mwpm_decode_correlated); writes rows of `preds`
 * (dense num_obs bytes or packed) and, when weights is not NULL, each shot's
 * matching weight. Returns a cudaq_mwpm_status_t; on a failure *bad_shot is
 * the shot that failed. */
int cudaq_py_mwpm_decode_batch(cudaq_mwpm_decoder_t *dec, uint32_t num_dets, uint32_t num_obs,
                               const uint8_t *shots, size_t num_shots, int packed_in,
                               uint8_t *preds, int packed_out, double *weights,
                               int correlated, size_t *bad_shot) {
  const size_t in_bytes = row_bytes(num_dets, packed_in), out_bytes = row_bytes(num_obs, packed_out);
  if (!dec || (!shots && num_shots && in_bytes) || (!preds && num_shots && out_bytes) || !bad_shot ||
      num_obs > 64)
    return CUDAQ_MWPM_ERR_INVALID_ARG;
  uint32_t *events = malloc(((size_t)num_dets + 1) * sizeof *events);
  if (!events)
    return CUDAQ_MWPM_ERR_NO_MEMORY;
  int st = CUDAQ_MWPM_OK;
  for (size_t s = 0; s < num_shots; s++) {
    size_t n = cudaq_mwpm_shot_events(shots + s * in_bytes, num_dets, packed_in, events);
    cudaq_mwpm_result_t res;
    st = correlated ? cudaq_mwpm_decode_correlated(dec, events, n, &res)
                    : cudaq_mwpm_decode(dec, events, n, &res);
    if (st != CUDAQ_MWPM_OK) {
      *bad_shot = s;
      break;
    }
    cudaq_mwpm_write_prediction(preds + s * out_bytes, res.obs_mask, num_obs, packed_out);
    if (weights)
      weights[s] = res.weight;
  }
  free(events);
  return st;
}

int cudaq_py_hybrid_decode_batch(cudaq_predecoder_t *pre, cudaq_mwpm_decoder_t *dec,
                                 uint32_t num_dets, uint32_t num_obs, const uint8_t *shots,
                                 size_t num_shots, int packed_in, uint8_t *preds, int packed_out,
                                 double *weights, uint32_t *residual_counts, size_t *bad_shot,
                                 int *layer, cudaq_predecoder_error_t *perr);

/* The same through a predecoder first: MWPM decodes the residual events
 * (with the predecoder's per-shot weights where it is weighted: the map must
 * be set on dec), the prediction is the predecoder's frame XOR MWPM's
 * observables, the weight is MWPM's on the residual. residual_counts (may be NULL) receives each shot's
 * residual event count. Returns 0, or a status of the layer *layer names
 * (CUDAQ_PY_LAYER_PREDECODER: a cudaq_predecoder_status_t with perr's
 * message; CUDAQ_PY_LAYER_MWPM: a cudaq_mwpm_status_t). */
int cudaq_py_hybrid_decode_batch(cudaq_predecoder_t *pre, cudaq_mwpm_decoder_t *dec,
                                 uint32_t num_dets, uint32_t num_obs, const uint8_t *shots,
                                 size_t num_shots, int packed_in, uint8_t *preds, int packed_out,
                                 double *weights, uint32_t *residual_counts, size_t *bad_shot,
                                 int *layer, cudaq_predecoder_error_t *perr) {
  if (!layer)
    return CUDAQ_MWPM_ERR_INVALID_ARG;
  *layer = CUDAQ_PY_LAYER_MWPM;
  const size_t in_bytes = row_bytes(num_dets, packed_in), out_bytes = row_bytes(num_obs, packed_out);
  if (!pre || !dec || (!shots && num_shots && in_bytes) || (!preds && num_shots && out_bytes) ||
      !bad_shot || num_obs > 64)
    return CUDAQ_MWPM_ERR_INVALID_ARG;
  uint32_t *events = malloc(2 * ((size_t)num_dets + 1) * sizeof *events);
  if (!events)
    return CUDAQ_MWPM_ERR_NO_MEMORY;
  uint32_t *residual = events + num_dets + 1;
  int st = 0;
  *layer = CUDAQ_PY_LAYER_NONE;
  /* weighted matching: MWPM reads the shot's edge logits through the map set on dec
   * (HybridDecoder, cudaq_predecoder_set_weight_map) */
  const uint32_t *we, *ws;
  size_t nw;
  const float *logits = NULL;
  if (cudaq_predecoder_weighted(pre))
    (void)cudaq_predecoder_edge_weights(pre, &we, &ws, &nw, &logits);
  for (size_t s = 0; s < num_shots; s++) {
    size_t n = cudaq_mwpm_shot_events(shots + s * in_bytes, num_dets, packed_in, events);
    size_t nr = 0;
    uint64_t frame = 0;
    st = cudaq_predecoder_run(pre, events, n, residual, &nr, &frame, perr);
    if (st != CUDAQ_PREDECODER_OK) {
      *layer = CUDAQ_PY_LAYER_PREDECODER;
      *bad_shot = s;
      break;
    }
    cudaq_mwpm_result_t res;
    st = logits ? cudaq_mwpm_decode_mapped(dec, residual, nr, logits, &res)
                : cudaq_mwpm_decode(dec, residual, nr, &res);
    if (st != CUDAQ_MWPM_OK) {
      *layer = CUDAQ_PY_LAYER_MWPM;
      *bad_shot = s;
      break;
    }
    cudaq_mwpm_write_prediction(preds + s * out_bytes, frame ^ res.obs_mask, num_obs, packed_out);
    if (weights)
      weights[s] = res.weight;
    if (residual_counts)
      residual_counts[s] = (uint32_t)nr;
  }
  free(events);
  return st;
}
