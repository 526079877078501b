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
};

/* Writes a message into err (NULL ignored). */
void cudaq_predecoder__set_error(cudaq_predecoder_error_t *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The local predecoder's threshold (local.c). */
double cudaq_predecoder__local_threshold(const cudaq_predecoder_t *p);

#endif
