/* The predecoder interface shared by the local and the ONNX predecoders,
 * and the Wilson score interval of the reports. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include <string.h>

#include "predecoder_internal.h"

void cudaq_predecoder__set_error(cudaq_predecoder_error_t *err, const char *fmt, ...) {
  if (!err)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->message, sizeof err->message, fmt, ap);
  va_end(ap);
}

void cudaq_predecoder_destroy(cudaq_predecoder_t *p) {
  if (p)
    p->destroy(p);
}

uint32_t cudaq_predecoder_num_detectors(const cudaq_predecoder_t *p) {
  return p ? p->num_detectors : 0;
}

uint32_t cudaq_predecoder_num_observables(const cudaq_predecoder_t *p) {
  return p ? p->num_observables : 0;
}

double cudaq_predecoder_local_threshold(const cudaq_predecoder_t *p) {
  if (!p || p->kind != PD__LOCAL)
    return NAN;
  return cudaq_predecoder__local_threshold(p);
}

cudaq_predecoder_status_t cudaq_predecoder_run(cudaq_predecoder_t *p, const uint32_t *events,
                                               size_t num_events, uint32_t *residual,
                                               size_t *num_residual, uint64_t *frame,
                                               cudaq_predecoder_error_t *err) {
  if (!p || (!events && num_events) || !residual || !num_residual || !frame) {
    cudaq_predecoder__set_error(err, "predecoder run: %s is NULL",
                                !p ? "predecoder" : (!events && num_events) ? "events"
                                : !residual ? "residual" : !num_residual ? "num_residual"
                                : "frame");
    return CUDAQ_PREDECODER_ERR_INVALID_ARG;
  }
  return p->run(p, events, num_events, residual, num_residual, frame, err);
}

int cudaq_predecoder_weights_flag(const char *value, int correlations, cudaq_predecoder_weights_t *out) {
  cudaq_predecoder_weights_t w;
  if (!value || !strcmp(value, "auto"))
    w = CUDAQ_PREDECODER_WEIGHTS_AUTO;
  else if (!strcmp(value, "on"))
    w = CUDAQ_PREDECODER_WEIGHTS_ON;
  else if (!strcmp(value, "off"))
    w = CUDAQ_PREDECODER_WEIGHTS_OFF;
  else
    return -1;
  if (correlations && w == CUDAQ_PREDECODER_WEIGHTS_ON)
    return -2;
  *out = correlations ? CUDAQ_PREDECODER_WEIGHTS_OFF : w;
  return 0;
}

int cudaq_predecoder_weighted(const cudaq_predecoder_t *p) { return p && p->w_map; }

cudaq_predecoder_status_t cudaq_predecoder_edge_weights(const cudaq_predecoder_t *p, const uint32_t **edges,
                                                        const uint32_t **slots, size_t *num,
                                                        const float **logits) {
  if (!p || !p->w_map || !edges || !slots || !num || !logits)
    return CUDAQ_PREDECODER_ERR_INVALID_ARG;
  *edges = p->w_map->graph_edge;
  *slots = p->w_map->slot;
  *num = p->w_map->num_edges;
  *logits = p->w_values;
  return CUDAQ_PREDECODER_OK;
}

cudaq_predecoder_status_t cudaq_predecoder_set_weight_map(const cudaq_predecoder_t *p,
                                                          cudaq_mwpm_decoder_t *dec) {
  const cudaq_predecoder_edge_map_t *m = p ? p->w_map : NULL;
  if (!m || !dec || cudaq_mwpm_decoder_graph(dec) != p->w_graph)
    return CUDAQ_PREDECODER_ERR_INVALID_ARG;
  switch (cudaq_mwpm_decoder_set_weight_map(dec, m->graph_edge, m->slot, m->num_edges, m->num_edges)) {
    case CUDAQ_MWPM_OK: return CUDAQ_PREDECODER_OK;
    case CUDAQ_MWPM_ERR_NO_MEMORY: return CUDAQ_PREDECODER_ERR_NO_MEMORY;
    default: return CUDAQ_PREDECODER_ERR_INVALID_ARG; /* the graph without per_shot_weights */
  }
}

const char *cudaq_predecoder_status_str(cudaq_predecoder_status_t st) {
  switch (st) {
    case CUDAQ_PREDECODER_OK: return "ok";
    case CUDAQ_PREDECODER_ERR_INVALID_ARG: return "invalid argument";
    case CUDAQ_PREDECODER_ERR_MODEL: return "model does not fit the contract";
    case CUDAQ_PREDECODER_ERR_NN: return "NN engine error";
    case CUDAQ_PREDECODER_ERR_NO_DEVICE: return "no CUDA device";
    case CUDAQ_PREDECODER_ERR_OUTPUT: return "model output not 0 or 1";
    case CUDAQ_PREDECODER_ERR_OUT_OF_RANGE: return "detector index out of range";
    case CUDAQ_PREDECODER_ERR_NO_MEMORY: return "out of memory";
    case CUDAQ_PREDECODER_ERR_UNSUPPORTED: return "built without the NN engine";
  }
  return "unknown status";
}

cudaq_predecoder_status_t cudaq_wilson_interval(uint64_t k, uint64_t n, double z, double *lo,
                                                double *hi) {
  if (!lo || !hi || n == 0 || k > n || !isfinite(z) || z < 0.0)
    return CUDAQ_PREDECODER_ERR_INVALID_ARG;
  double nf = (double)n, kf = (double)k, z2 = z * z;
  double centre = (kf + z2 / 2.0) / (nf + z2);
  double half = z * sqrt(kf * (nf - kf) / nf + z2 / 4.0) / (nf + z2);
  /* At k = 0 (k = n) the lower (upper) end is exactly 0 (1); rounding in
   * centre - half would leave a few ulps. */
  *lo = k == 0 ? 0.0 : fmax(0.0, centre - half);
  *hi = k == n ? 1.0 : fmin(1.0, centre + half);
  return CUDAQ_PREDECODER_OK;
}
