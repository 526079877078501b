/*
 * qrt_worker.h - one CPU decoding worker of qec-realtime: request
 * validation, predecoder (ONNX on the CPU executor, the local rule, or
 * none), then MWPM on the residual events. Private to src/realtime_app.
 *
 * Everything a worker needs is allocated by qrt_worker_create; the
 * per-request call qrt_worker_decode allocates nothing, takes no lock and
 * makes no system call (the stage timestamps come from CLOCK_MONOTONIC
 * through the vDSO). A worker is used by one thread at a time.
 */
#ifndef QRT_WORKER_H
#define QRT_WORKER_H

#include <stddef.h>
#include <stdint.h>

#include "cudaq/qec/mwpm.h"
#include "cudaq/qec/predecoder.h"

/* Response status (in the response body; the RPC header's status stays 0
 * because the pipeline's CPU stage cannot set it). */
enum {
  QRT_OK = 0,
  QRT_ERR_LENGTH = 1,     /* payload length != num_detectors * 4 */
  QRT_ERR_VALUE = 2,      /* an INT32 event other than 0 or 1 */
  QRT_ERR_PREDECODER = 3, /* the predecoder failed (inference, output not 0/1) */
  QRT_ERR_MWPM = 4        /* MWPM found no solution */
};

/* The response written after the 24-byte RPC response header (32 bytes,
 * little-endian host layout). */
typedef struct {
  int32_t status;           /* QRT_OK or QRT_ERR_* */
  uint32_t corrections;     /* matched pairs of MWPM on the residual events */
  uint64_t prediction;      /* logical prediction: frame XOR MWPM observables */
  uint32_t events_in;       /* detection events of the request */
  uint32_t events_residual; /* events left by the predecoder (= events_in without one) */
  uint32_t predecoder_ns;   /* predecoder stage time (saturated) */
  uint32_t mwpm_ns;         /* MWPM stage time (saturated) */
} qrt_response_t;

typedef enum { QRT_PD_NONE = 0, QRT_PD_LOCAL = 1, QRT_PD_ONNX = 2 } qrt_pd_kind_t;

typedef struct qrt_worker qrt_worker_t;

/* Creates a worker over a shared, immutable matching graph: its own MWPM
 * decoder and, for QRT_PD_LOCAL / QRT_PD_ONNX, its own predecoder (model
 * path for ONNX, on the CPU executor). On failure returns non-zero and
 * writes a sentence into msg (msg_len bytes). */
int qrt_worker_create(const cudaq_mwpm_graph_t *graph, qrt_pd_kind_t kind, const char *model,
                      qrt_worker_t **out, char *msg, size_t msg_len);
void qrt_worker_destroy(qrt_worker_t *w);

/* Decodes one request payload (INT32 per detector) into *out. Hot path.
 * Returns out->status. */
int32_t qrt_worker_decode(qrt_worker_t *w, const void *payload, size_t len, qrt_response_t *out);

#endif
