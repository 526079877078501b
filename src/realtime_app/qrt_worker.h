/*
 * qrt_worker.h - one CPU decoding worker of qec-realtime: request
 * validation, predecoder (ONNX on the CPU executor, the local rule, or
 * none), then MWPM on the residual events; or, in the GPU modes, the
 * request's length (the ingest kernel checks its values by the same rules)
 * then MWPM on the residual the GPU stage left in mapped memory
 * (qrt_gpu_result_t). Private to src/realtime_app.
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
#include "cudaq/realtime/rpc_wire_format.h"

#ifdef __cplusplus
extern "C" { /* qrt_gpu.cu gives workers their edge maps */
#endif

/* Response status (in the response body; the RPC header's status stays 0
 * because the pipeline's CPU stage cannot set it). */
enum {
  QRT_OK = 0,
  QRT_ERR_LENGTH = 1,     /* payload length != num_detectors * 4 (bit-packed: ceil(n / 8)) */
  QRT_ERR_VALUE = 2,      /* an INT32 event other than 0 or 1 (bit-packed: a padding bit set) */
  QRT_ERR_PREDECODER = 3, /* the predecoder failed (inference, output not 0/1, weighted: an edge logit NaN or infinite) */
  QRT_ERR_MWPM = 4        /* MWPM found no solution */
};

/* The response written after the 24-byte RPC response header (48 bytes,
 * little-endian host layout). Stage times are saturated at UINT32_MAX ns. */
typedef struct {
  int32_t status;           /* QRT_OK or QRT_ERR_* */
  uint32_t corrections;     /* matched pairs of MWPM on the residual events */
  uint64_t prediction;      /* logical prediction: frame XOR MWPM observables */
  uint32_t events_in;       /* detection events of the request */
  uint32_t events_residual; /* events left by the predecoder (= events_in without one) */
  uint32_t predecoder_ns;   /* predecoder on the CPU (cpu mode; 0 in the GPU modes) */
  uint32_t mwpm_ns;         /* MWPM */
  uint32_t front_ns;        /* the request's ptp_timestamp (send) to the CPU stage's start:
                               dispatch (and, in the GPU modes, copy and inference) */
  uint32_t stage_ns;        /* the CPU stage, start to response written */
  uint32_t gpu_ns;          /* GPU modes: the graph's kernels, first kernel's start to the ready
                               flag (qrt_gpu_result_t's stamps; 0 in cpu mode) */
  uint32_t gpu_publish_ns;  /* GPU modes: of which the publish kernel */
} qrt_response_t;

typedef enum { QRT_PD_NONE = 0, QRT_PD_LOCAL = 1, QRT_PD_ONNX = 2 } qrt_pd_kind_t;

/* The predecoder a --model argument names: NULL or "none" -> QRT_PD_NONE,
 * "local" -> QRT_PD_LOCAL, anything else an ONNX file -> QRT_PD_ONNX. */
qrt_pd_kind_t qrt_pd_kind_of(const char *model);

/* Payload formats of a request (the wire format's INT32 array, or its
 * CUDAQ_TYPE_BIT_PACKED layout: LSB-first, unused high bits zero). */
typedef enum { QRT_PAYLOAD_INT32 = 0, QRT_PAYLOAD_BITS = 1 } qrt_payload_t;

/* The one home of the request rules, for the CPU stage (qrt_worker.c) and
 * the GPU ingest kernel (qrt_gpu.cu) alike:
 * - payload bytes of one request of num_detectors events; */
static inline CUDAQ_HD uint32_t qrt_payload_len(qrt_payload_t fmt, uint32_t num_detectors) {
  return fmt == QRT_PAYLOAD_BITS ? cudaq_bitpacked_size(num_detectors) : 4u * num_detectors;
}
/* - an INT32 event value is 0 or 1: the bits that must be clear, of one
 *   value, and of two values read as one little-endian 64-bit word; */
static inline CUDAQ_HD uint32_t qrt_int32_bad_bits(int32_t v) { return (uint32_t)v & ~1u; }
static inline CUDAQ_HD uint64_t qrt_int32_pair_bad_bits(uint64_t w) {
  return (uint64_t)qrt_int32_bad_bits((int32_t)(uint32_t)w) |
         (uint64_t)qrt_int32_bad_bits((int32_t)(uint32_t)(w >> 32)) << 32;
}
/* - a bit-packed payload's unused high bits of its last byte are zero. */
static inline CUDAQ_HD uint32_t qrt_bits_padding(uint8_t last, uint32_t num_detectors) {
  return num_detectors % 8u ? (uint32_t)last >> (num_detectors % 8u) : 0u;
}

/* What the GPU stage leaves in the worker's mapped output for the CPU stage:
 * this header, then `count` uint32 detector indices in ascending order
 * (QRT_GPU_EVENTS). Written by the graph's last kernel before its
 * system-scope release of the ready flag. */
typedef struct {
  uint32_t status; /* 0, or QRT_GPU_BAD_OUTPUT and / or QRT_GPU_BAD_INPUT */
  uint32_t count;  /* residual detection events (raw events in passthrough) */
  uint32_t events_in; /* the request's detection events, counted by the ingest kernel */
  uint32_t pad_;
  uint64_t frame;  /* observables flipped by the predecoder's corrections (0 in passthrough) */
  /* The GPU's global timer (ns; one clock for every SM, not the host's):
   * the graph's first kernel past its start (and gate), the publish kernel's
   * start, and just before its ready flag. Diagnostics: the report splits
   * "dispatch + GPU" with them. */
  uint64_t t_start_ns, t_publish_ns, t_ready_ns;
} qrt_gpu_result_t;
#ifdef __cplusplus
static_assert(sizeof(qrt_gpu_result_t) % 16 == 0, "QRT_GPU_LOGITS is 16-byte aligned");
#else
_Static_assert(sizeof(qrt_gpu_result_t) % 16 == 0, "QRT_GPU_LOGITS is 16-byte aligned");
#endif
#define QRT_GPU_BAD_OUTPUT 1u /* a model output element was not 0 or 1 */
#define QRT_GPU_BAD_INPUT 2u  /* the ingest kernel found a request value that is not 0 or 1 (or a
                                 padding bit set) in a payload of the right length */
#define QRT_GPU_EVENTS(r) ((const uint32_t *)((const qrt_gpu_result_t *)(r) + 1))
/* Weighted hybrid mode: after the num_detectors entries of the event list
 * (rounded up to 4, so that the logits start 16-byte aligned: the header is
 * 48 bytes), the model's edge logits (FLOAT, the model's order), copied by
 * the same kernel before the same release (the residual is then that of
 * threshold 0: the kernel folds in the edges between 0 and the model's
 * threshold). */
#define QRT_GPU_LOGITS_AT(nd) (((size_t)(nd) + 3u) & ~(size_t)3u)
#define QRT_GPU_LOGITS(r, nd) ((const float *)(QRT_GPU_EVENTS(r) + QRT_GPU_LOGITS_AT(nd)))

typedef struct qrt_worker qrt_worker_t;

/* Creates a worker over a shared, immutable matching graph: its own MWPM
 * decoder (two-pass correlated matching when the graph was built with
 * enable_correlations, plain MWPM otherwise) and, for QRT_PD_LOCAL / QRT_PD_ONNX, its own predecoder (model
 * path for ONNX, on the CPU executor); requests carry payloads of format
 * fmt. check_layout: the ONNX model's recorded detector layout is compared
 * with the graph's (cudaq_predecoder_check_layout); 0 skips it (the user
 * vouches for the model: --skip_layout_check). weights: an ONNX model's
 * weighted matching (cudaq_onnx_predecoder_options_t; AUTO and ON need a
 * graph built with per_shot_weights, OFF the thresholded residual). On
 * failure returns non-zero and writes a sentence into msg (msg_len bytes). */
int qrt_worker_create(const cudaq_mwpm_graph_t *graph, qrt_pd_kind_t kind, const char *model,
                      int check_layout, qrt_payload_t fmt, cudaq_predecoder_weights_t weights,
                      qrt_worker_t **out, char *msg, size_t msg_len);
void qrt_worker_destroy(qrt_worker_t *w);

/* Non-zero when the worker matches with a predecoder's per-shot weights (cpu
 * mode with a weighted model, or a GPU worker given an edge map). */
int qrt_worker_weighted(const qrt_worker_t *w);

/* GPU modes, weighted (setup): the worker's MWPM reads its per-shot weights
 * through map from the logits the GPU stage leaves after the residual in
 * the mapped output (QRT_GPU_LOGITS). Returns 0, or non-zero with a
 * sentence in msg (the worker's graph has no per_shot_weights; no memory). */
int qrt_worker_set_edge_map(qrt_worker_t *w, const cudaq_predecoder_edge_map_t *map, char *msg,
                            size_t msg_len);

/* Decodes one request payload (INT32 per detector) into *out. Hot path.
 * Returns out->status. */
int32_t qrt_worker_decode(qrt_worker_t *w, const void *payload, size_t len, qrt_response_t *out);

/* GPU modes: checks the request's length (len: its arg_len) and takes the
 * ingest kernel's verdict on its values (QRT_GPU_BAD_INPUT -> QRT_ERR_VALUE:
 * the same rules as qrt_worker_decode, applied on the GPU, so the payload
 * is not read here) and its event count, then decodes the GPU stage's
 * residual g (mapped memory, published by the graph's release of the ready
 * flag, acquired by the pipeline's claim) with MWPM: prediction = g->frame
 * XOR MWPM. Hot path. Returns out->status (QRT_ERR_PREDECODER for another
 * GPU status, a count above num_detectors or an index out of range).
 * front_ns and stage_ns are left 0 for the caller (the CPU stage) to fill,
 * as in qrt_worker_decode. */
int32_t qrt_worker_decode_gpu(qrt_worker_t *w, size_t len, const qrt_gpu_result_t *g, qrt_response_t *out);

#ifdef __cplusplus
}
#endif

#endif
