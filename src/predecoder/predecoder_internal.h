/* Internal declarations of the predecoder library (not installed). */
#ifndef CUDAQ_PREDECODER_INTERNAL_H
#define CUDAQ_PREDECODER_INTERNAL_H

#include "cudaq/qec/predecoder.h"

typedef enum pd__kind { PD__LOCAL = 1, PD__ONNX = 2 } pd__kind_t;

/* The common head of every predecoder; each kind embeds it first. */
struct cudaq_predecoder {
  pd__kind_t kind;
  uint32_t num_detectors;
  uint32_t num_observables;
  cudaq_predecoder_status_t (*run)(cudaq_predecoder_t *p, const uint32_t *events, size_t n,
                                   uint32_t *residual, size_t *num_residual, uint64_t *frame,
                                   cudaq_predecoder_error_t *err);
  void (*destroy)(cudaq_predecoder_t *p);
  /* Weighted mode (weights.c): the map of match graph edges onto the model's
   * edge logits, and the logits of the last run; NULL otherwise. */
  const cudaq_predecoder_edge_map_t *w_map;
  const float *w_values;
  const cudaq_mwpm_graph_t *w_graph; /* the match graph the map is for */
};

/* A JSON list of numbers "[a, b, ...]" (at most CUDAQ_DEM_MAX_COORDS) into
 * v: the position after ']', or NULL (layout.c; C locale). */
const char *cudaq_predecoder__parse_tuple(const char *s, double *v, size_t *n);
const char *cudaq_predecoder__skip_ws(const char *s);

/* Weighted matching from an ONNX model's edge logits (weights.c). */
typedef struct pd__weights pd__weights_t;
/* The one check of a weights mode (AUTO, OFF, ON), named in err. */
cudaq_predecoder_status_t cudaq_predecoder__weights_mode_check(cudaq_predecoder_weights_t mode,
                                                               cudaq_predecoder_error_t *err);
/* *out NULL (OK) where the model has no `edge_logits` output and mode is
 * not ON. mode: checked by the caller. */
cudaq_predecoder_status_t cudaq_predecoder__weights_create(const cudaq_nn_model_t *model,
                                                           const cudaq_mwpm_graph_t *graph,
                                                           cudaq_predecoder_weights_t mode,
                                                           uint32_t num_detectors,
                                                           pd__weights_t **out,
                                                           cudaq_predecoder_error_t *err);
void cudaq_predecoder__weights_destroy(pd__weights_t *w);
/* The map (graph edge graph_edge[j] weighs |logit[slot[j]]|, the output
 * index of the logits, the fold's ends and observables): stable while w lives. */
const cudaq_predecoder_edge_map_t *cudaq_predecoder__weights_map(const pd__weights_t *w);
/* From the model's residual (0/1, num_detectors) and frame, the residual of
 * threshold 0 as a list and its frame; every logit checked finite. Hot path. */
cudaq_predecoder_status_t cudaq_predecoder__weights_apply(pd__weights_t *w, const float *logits,
                                                          const int32_t *model_residual,
                                                          uint32_t num_detectors, uint32_t *residual,
                                                          size_t *num_residual, uint64_t *frame,
                                                          cudaq_predecoder_error_t *err);

/* Writes a message into err (NULL ignored). */
void cudaq_predecoder__set_error(cudaq_predecoder_error_t *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The local predecoder's threshold (local.c). */
double cudaq_predecoder__local_threshold(const cudaq_predecoder_t *p);

#endif
