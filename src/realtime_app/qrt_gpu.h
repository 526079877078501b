/*
 * qrt_gpu.h - the GPU stage of qec-realtime (hybrid and passthrough modes):
 * a cudaq_gpu_stage_factory_t for the pipeline (host-dispatcher-worker-pool.md
 * section 5, hybrid-predecoder-mwpm-pipeline.md). Private to src/realtime_app.
 *
 * Per pipeline worker, one CUDA graph of three parts, launched by the
 * dispatcher after it wrote the slot's device address into the worker's
 * mailbox:
 *   ingest   launched on arrival: reads the mailbox, then the request
 *            payload straight from the mapped ring slot (INT32 events, or
 *            bit-packed ones unpacked here), into the predecoder's INT32
 *            input buffer, checking and counting the values; pre-launched
 *            (gpu_prelaunch) with self_gate, it is the kernel that waits at
 *            the worker's gate (waits_at_gate) and reads the gate's copy of
 *            the request, with no gate kernel in front of it;
 *   infer    the NN engine's inference graph as a child graph (hybrid only:
 *            residual events and logical frame, the model contract of
 *            models/README.md);
 *   publish  one block: the residual (passthrough: the raw events) compacted
 *            into a list of detector indices in the worker's mapped output
 *            (qrt_gpu_result_t), the frame packed into 64 bits, the outputs
 *            checked to be 0/1; weighted (a model with edge logits,
 *            weights not OFF): the edges between 0 and the model's
 *            threshold folded into that residual and frame (the residual of
 *            threshold 0), the logits checked finite and copied after the
 *            list (QRT_GPU_LOGITS) for the worker's MWPM to read as
 *            weights; then the system-scope release store of the
 *            worker's ready flag, which the pipeline's CPU worker acquires.
 * Both kernels stamp the GPU's global timer into the output header
 * (qrt_gpu_result_t: first kernel's start, publish start, ready), which the
 * report uses to split "dispatch + GPU" into the graph's kernels and the
 * rest.
 * The CPU stage (qrt_worker_decode_gpu) checks the request's length, takes the
 * ingest kernel's verdict on its values, and runs MWPM
 * on that list. Nothing is allocated, locked or called on the host per
 * request: the graph reads the slot address from the mailbox.
 *
 * Built without CUDA, qrt_gpu_stage_create says so and fails.
 */
#ifndef QRT_GPU_H
#define QRT_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "cudaq/realtime/pipeline.h"
#include "qrt_worker.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { QRT_GPU_HYBRID = 0, QRT_GPU_PASSTHROUGH = 1 } qrt_gpu_kind_t;

typedef struct {
  qrt_gpu_kind_t kind;
  const char *model;  /* ONNX predecoder (hybrid) */
  int fp16;           /* hybrid: FP16 engine (else FP32) */
  const char *plan_dir; /* engine plan cache directory, or NULL (select at every start) */
  int concurrent;       /* hybrid: engines planned for this many inferences at once
                           (cudaq_nn_gpu_options_t::concurrent; 0 or 1: latency alone) */
  uint32_t num_detectors, num_observables;
  const cudaq_mwpm_graph_t *graph; /* the DEM's: the model's detector layout is checked against it
                                     (NULL: not checked, --skip_layout_check) */
  const cudaq_mwpm_graph_t *match_graph; /* the graph the workers match on (hybrid, weighted: the
                                            model's edge map is read onto it) */
  cudaq_predecoder_weights_t weights; /* hybrid: weighted matching (AUTO, ON, OFF) as
                                         cudaq_onnx_predecoder_options_t's */
  qrt_payload_t payload;
  int self_gate; /* with the pipeline's gpu_prelaunch: the ingest kernel waits at the gate itself
                    (waits_at_gate; the gate copies the request); 0: behind the gate kernel */
  uint32_t function_id;
  qrt_worker_t *const *cpu_workers; /* [worker id]: the CPU half, user_context of the CPU stage */
} qrt_gpu_config_t;

typedef struct qrt_gpu_stage qrt_gpu_stage_t;

/* Loads and checks the model (hybrid). Returns 0, or non-zero with a
 * sentence in msg. The config's strings must outlive the stage. */
int qrt_gpu_stage_create(const qrt_gpu_config_t *cfg, qrt_gpu_stage_t **out, char *msg,
                         size_t msg_len);

/* The pipeline's GPU stage factory; user is a qrt_gpu_stage_t. Builds
 * worker_id's engine (hybrid), buffers and graph. Returns 0, or non-zero
 * after writing the reason to stderr. */
int qrt_gpu_factory(void *user, int worker_id, cudaq_gpu_worker_resources_t *r);

/* Device memory the stage allocated, in bytes: every worker's engine
 * (cudaq_nn_gpu_device_bytes) or event buffer; 0 before any worker. Not
 * counted: the CUDA context, cuDNN's handles, the instantiated graphs. (A
 * cudaMemGetInfo difference, used before, read 0 on small stages: the
 * driver hands memory out in large chunks.) */
size_t qrt_gpu_stage_device_bytes(const qrt_gpu_stage_t *st);

/* Name of the GPU (empty without one). */
const char *qrt_gpu_stage_device_name(const qrt_gpu_stage_t *st);

/* The first engine's convolution choices (cudaq_nn_gpu_describe), or "". */
const char *qrt_gpu_stage_describe(const qrt_gpu_stage_t *st);

/* Frees every worker's graph, engine and buffers, and the model. Call after
 * the pipeline has stopped. NULL is ignored. */
void qrt_gpu_stage_destroy(qrt_gpu_stage_t *st);

#ifdef __cplusplus
}
#endif
#endif
