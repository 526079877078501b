/*
 * Predecoders for the hybrid decoder: something that removes detection
 * events it is confident about before MWPM decodes the rest.
 *
 * Two kinds share one interface (cudaq_predecoder_run):
 *
 *  - an ONNX model following the model contract of models/README.md: input
 *    0 `detectors` INT32 [1, N], output 0 `residual_detectors` INT32 [1, N],
 *    output 1 `logical_frame` INT32 [1, L] (N detectors and L observables of
 *    the detector error model). It runs on the CPU executor of cudaq/nn/nn.h
 *    or on the GPU engine of cudaq/nn/gpu_engine.h;
 *
 *  - the rule-based local predecoder: on the matching graph, two detection
 *    events that are each other's only neighbouring event (within one edge)
 *    and are joined by a likely edge are removed, and the frame is flipped
 *    by that edge's observables. Events next to the boundary only are kept.
 *
 * The final prediction is frame XOR MWPM(residual).obs_mask.
 *
 * A predecoder is used by one thread at a time (it owns its buffers);
 * cudaq_predecoder_run allocates nothing.
 */
#ifndef CUDAQ_QEC_PREDECODER_H
#define CUDAQ_QEC_PREDECODER_H

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cudaq/nn/nn.h"
#include "cudaq/qec/mwpm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cudaq_predecoder_status {
  CUDAQ_PREDECODER_OK = 0,
  CUDAQ_PREDECODER_ERR_INVALID_ARG = -1,   /* NULL pointer, bad option */
  CUDAQ_PREDECODER_ERR_MODEL = -2,         /* model I/O does not fit the contract or the DEM */
  CUDAQ_PREDECODER_ERR_NN = -3,            /* the NN engine failed (load, create, run) */
  CUDAQ_PREDECODER_ERR_NO_DEVICE = -4,     /* GPU asked for, no CUDA device or no CUDA build */
  CUDAQ_PREDECODER_ERR_OUTPUT = -5,        /* a model output value is not 0 or 1 */
  CUDAQ_PREDECODER_ERR_OUT_OF_RANGE = -6,  /* an event index >= the number of detectors */
  CUDAQ_PREDECODER_ERR_NO_MEMORY = -7,
  CUDAQ_PREDECODER_ERR_UNSUPPORTED = -8    /* built without the NN engine */
} cudaq_predecoder_status_t;

#define CUDAQ_PREDECODER_ERROR_LEN 320

/* What went wrong, in a sentence naming the binding, value or option. */
typedef struct cudaq_predecoder_error {
  char message[CUDAQ_PREDECODER_ERROR_LEN];
} cudaq_predecoder_error_t;

typedef struct cudaq_predecoder cudaq_predecoder_t;

/* Local predecoder options. An edge between two detectors is likely when
 * its weight is at most weight_factor x the smallest weight of a
 * detector-detector edge of the graph (or at most 0). */
typedef struct cudaq_local_predecoder_options {
  double weight_factor;
} cudaq_local_predecoder_options_t;

#define CUDAQ_LOCAL_PREDECODER_DEFAULT_WEIGHT_FACTOR 1.3

/* Defaults: weight_factor = CUDAQ_LOCAL_PREDECODER_DEFAULT_WEIGHT_FACTOR.
 * Returns CUDAQ_PREDECODER_OK or CUDAQ_PREDECODER_ERR_INVALID_ARG (NULL). */
cudaq_predecoder_status_t cudaq_local_predecoder_options_init(cudaq_local_predecoder_options_t *opts);

/* Creates the local predecoder over a matching graph (read at create only:
 * the graph may be destroyed afterwards). opts NULL: defaults. err may be
 * NULL. Returns CUDAQ_PREDECODER_OK; CUDAQ_PREDECODER_ERR_INVALID_ARG
 * (graph or out NULL, weight_factor not finite or <= 0);
 * CUDAQ_PREDECODER_ERR_NO_MEMORY. */
cudaq_predecoder_status_t cudaq_predecoder_create_local(const cudaq_mwpm_graph_t *graph,
                                                        const cudaq_local_predecoder_options_t *opts,
                                                        cudaq_predecoder_t **out,
                                                        cudaq_predecoder_error_t *err);

/* The local predecoder's weight threshold (edges of weight <= it are
 * likely); NaN for a NULL or an ONNX predecoder. */
double cudaq_predecoder_local_threshold(const cudaq_predecoder_t *p);

typedef enum cudaq_predecoder_device {
  CUDAQ_PREDECODER_CPU = 0,  /* the NN CPU executor */
  CUDAQ_PREDECODER_GPU = 1   /* the NN GPU engine */
} cudaq_predecoder_device_t;

typedef enum cudaq_predecoder_precision {
  CUDAQ_PREDECODER_FP32 = 0,
  CUDAQ_PREDECODER_FP16 = 1  /* GPU only */
} cudaq_predecoder_precision_t;

/* Weighted matching (models/README.md, "Weighted matching"): a model with
 * the optional output `edge_logits` (FLOAT [1, E]) and the metadata
 * `edge_endpoints` (its E edges as detector pairs, -1 the boundary) gives,
 * per shot, every matching edge's logit. The predecoder then applies every
 * edge of positive logit (the residual of decision threshold 0) and gives
 * each edge the weight |logit| for MWPM on that residual
 * (cudaq_predecoder_set_weight_map, cudaq_mwpm_decode_mapped). */
typedef enum cudaq_predecoder_weights {
  CUDAQ_PREDECODER_WEIGHTS_AUTO = 0, /* weighted where the model has edge logits and
                                        match_graph is set */
  CUDAQ_PREDECODER_WEIGHTS_OFF = 1,  /* the model's residual and frame as they are */
  CUDAQ_PREDECODER_WEIGHTS_ON = 2    /* weighted; a model without edge logits is refused */
} cudaq_predecoder_weights_t;

/* The weighted fold's rules, one home for the CPU predecoder and for GPU
 * runners of the network (qec-realtime's publish kernel): an edge whose
 * logit lies between 0 and the model's decision threshold (the model's
 * residual applied logit > threshold, the weights are for the residual of
 * threshold 0) is folded into the residual and frame; a NaN or infinite
 * logit is a bad output. */
#ifndef CUDAQ_HD
#if defined(__CUDACC__)
#define CUDAQ_HD __host__ __device__
#else
#define CUDAQ_HD
#endif
#endif
static inline CUDAQ_HD int cudaq_predecoder_logit_folds(float logit, float threshold) {
  return (logit > 0.0f) != (logit > threshold);
}
static inline CUDAQ_HD int cudaq_predecoder_logit_bad(float logit) { return !(fabsf(logit) <= FLT_MAX); }

/* The tools' --predecoder_weights VALUE (qec-decode, qec-realtime): "auto",
 * "on" or "off" (NULL: auto). With correlated matching (correlations
 * non-zero), which reweights the DEM's edges itself, weights are off and
 * "on" is refused. Returns 0 with *out set; -1 (not one of the three); -2
 * ("on" with correlations). */
int cudaq_predecoder_weights_flag(const char *value, int correlations, cudaq_predecoder_weights_t *out);

typedef struct cudaq_onnx_predecoder_options {
  cudaq_predecoder_device_t device;
  cudaq_predecoder_precision_t precision;
  int gpu_ordinal;          /* CUDA device ordinal (GPU) */
  const char *plan_path;    /* GPU engine cache file, or NULL (GPU) */
  const cudaq_mwpm_graph_t *graph; /* the DEM's graph: the model's detector layout is
                                      checked against it (cudaq_predecoder_check_layout);
                                      NULL: not checked (the caller vouches for the model) */
  cudaq_predecoder_weights_t weights; /* weighted matching: AUTO (default), OFF, ON */
  const cudaq_mwpm_graph_t *match_graph; /* the graph MWPM matches the residual on, whose
                                            edge indices the weights name (built with
                                            per_shot_weights). Setting it says the caller
                                            matches with the model's weights
                                            (cudaq_predecoder_set_weight_map): without it
                                            AUTO is OFF and ON is refused */
} cudaq_onnx_predecoder_options_t;

/* Defaults: CPU, FP32, GPU 0, no plan, no graph, weights AUTO. Returns CUDAQ_PREDECODER_OK or
 * CUDAQ_PREDECODER_ERR_INVALID_ARG (NULL). */
cudaq_predecoder_status_t cudaq_onnx_predecoder_options_init(cudaq_onnx_predecoder_options_t *opts);

/* Checks a loaded model against the model contract for a DEM of
 * num_detectors detectors and num_observables observables: exactly one
 * input, named `detectors`, INT32, shape [1, num_detectors]; at least two
 * outputs, output 0 `residual_detectors` INT32 [1, num_detectors], output 1
 * `logical_frame` INT32 [1, num_observables]. err names the first
 * mismatch. Returns CUDAQ_PREDECODER_OK; CUDAQ_PREDECODER_ERR_INVALID_ARG
 * (model NULL); CUDAQ_PREDECODER_ERR_MODEL. */
cudaq_predecoder_status_t cudaq_predecoder_check_model(const cudaq_nn_model_t *model,
                                                       uint32_t num_detectors,
                                                       uint32_t num_observables,
                                                       cudaq_predecoder_error_t *err);

/* Checks the detector layout a model was made for against a DEM's graph.
 * A model may record it as metadata entry `detector_coordinates`: a JSON
 * list with one list of coordinates per detector, in input order (the
 * circuit's detector coordinates; models/README.md). The DEM's detector
 * coordinates must equal them up to one translation (detector 0's offset,
 * applied to every detector): a circuit of the other basis or another
 * layout with the same number of detectors is refused, naming the first
 * detector that differs (coordinates past detector 0's count, where a
 * detector has more, are compared unshifted). Nothing is compared
 * (*checked = 0, OK) where the model records no layout. A DEM without
 * detector coordinates, or with coordinates on some detectors only, is
 * refused when the model records a layout: it cannot be checked (a caller
 * who knows the model fits skips the call, or passes no graph to
 * cudaq_predecoder_create_onnx). *checked = 1 after a full comparison
 * (checked may be NULL). Numbers are read in the C locale. Returns
 * CUDAQ_PREDECODER_OK; CUDAQ_PREDECODER_ERR_INVALID_ARG (model or graph
 * NULL); CUDAQ_PREDECODER_ERR_MODEL (a different layout or detector count,
 * DEM coordinates missing or partial, malformed metadata: a JSON list of
 * lists of numbers); CUDAQ_PREDECODER_ERR_UNSUPPORTED (no NN engine). */
cudaq_predecoder_status_t cudaq_predecoder_check_layout(const cudaq_nn_model_t *model,
                                                        const cudaq_mwpm_graph_t *graph,
                                                        int *checked,
                                                        cudaq_predecoder_error_t *err);

/* Loads an ONNX predecoder (cudaq_nn_model_load_file), checks it as
 * cudaq_predecoder_check_model does (and cudaq_predecoder_check_layout
 * where opts->graph is set), and makes its executor (CPU) or engine
 * (GPU). In weighted mode (opts->weights, above) it also reads the model's
 * edge list and maps each edge to the match graph's edge between the same
 * detectors: a model edge the graph lacks, a malformed list, a list whose
 * length is not the output's or an edge of negative graph weight is
 * CUDAQ_PREDECODER_ERR_MODEL, weights ON without match_graph
 * CUDAQ_PREDECODER_ERR_INVALID_ARG, named in err. opts NULL: defaults. err may be NULL. Returns CUDAQ_PREDECODER_OK;
 * CUDAQ_PREDECODER_ERR_INVALID_ARG (NULL path or out, FP16 on the CPU, bad
 * device or precision); CUDAQ_PREDECODER_ERR_NN (the file cannot be loaded,
 * the engine cannot be built: err carries the NN engine's message);
 * CUDAQ_PREDECODER_ERR_MODEL; CUDAQ_PREDECODER_ERR_NO_DEVICE;
 * CUDAQ_PREDECODER_ERR_NO_MEMORY; CUDAQ_PREDECODER_ERR_UNSUPPORTED (built
 * without the NN engine). */
cudaq_predecoder_status_t cudaq_predecoder_create_onnx(const char *path, uint32_t num_detectors,
                                                       uint32_t num_observables,
                                                       const cudaq_onnx_predecoder_options_t *opts,
                                                       cudaq_predecoder_t **out,
                                                       cudaq_predecoder_error_t *err);

/* Frees a predecoder (NULL is ignored). */
void cudaq_predecoder_destroy(cudaq_predecoder_t *p);

/* Number of detectors / observables (0 for NULL). */
uint32_t cudaq_predecoder_num_detectors(const cudaq_predecoder_t *p);
uint32_t cudaq_predecoder_num_observables(const cudaq_predecoder_t *p);

/* Runs the predecoder on one shot given as the list of detectors with a
 * detection event (a detector listed twice cancels). Writes the residual
 * events (each once, at most num_detectors of them) to residual, their count
 * to *num_residual and the observables its corrections flip to *frame. Hot
 * path: allocates nothing. err may be NULL. Returns CUDAQ_PREDECODER_OK;
 * CUDAQ_PREDECODER_ERR_INVALID_ARG (NULL pointer); CUDAQ_PREDECODER_ERR_OUT_OF_RANGE
 * (an event index >= num_detectors); CUDAQ_PREDECODER_ERR_OUTPUT (a model
 * output element is not 0 or 1: err names the output, element and value);
 * CUDAQ_PREDECODER_ERR_NN (inference failed). */
cudaq_predecoder_status_t cudaq_predecoder_run(cudaq_predecoder_t *p, const uint32_t *events,
                                               size_t num_events, uint32_t *residual,
                                               size_t *num_residual, uint64_t *frame,
                                               cudaq_predecoder_error_t *err);

/* Non-zero when p runs in weighted mode (an ONNX model with edge logits,
 * weights not OFF): its residual is then that of decision threshold 0 and
 * is to be matched with its edge weights (cudaq_predecoder_set_weight_map).
 * 0 for NULL. */
int cudaq_predecoder_weighted(const cudaq_predecoder_t *p);

/* The matching weights of weighted mode, as the map that
 * cudaq_mwpm_decoder_set_weight_map takes and the values that
 * cudaq_mwpm_decode_mapped reads: match graph edge edges[i] weighs
 * |logits[slots[i]]| for the last successful cudaq_predecoder_run (the
 * model's edge logits, each checked finite by the run). *num is the model's
 * edge count, also the number of logits. The pointers stay valid while p
 * lives; the logits change with every run (a failed one too: match only
 * after a successful run). Every ends[] entry of the model's map is a
 * detector of the match graph. Returns CUDAQ_PREDECODER_OK;
 * CUDAQ_PREDECODER_ERR_INVALID_ARG (a NULL pointer, p not weighted). */
cudaq_predecoder_status_t cudaq_predecoder_edge_weights(const cudaq_predecoder_t *p, const uint32_t **edges,
                                                        const uint32_t **slots, size_t *num,
                                                        const float **logits);

/* Sets p's map on dec (a decoder of p's match graph, built with
 * per_shot_weights): setup, allocates. Then per shot, after
 * cudaq_predecoder_run: cudaq_mwpm_decode_mapped(dec, residual, n, logits,
 * &res) with the logits of cudaq_predecoder_edge_weights. Returns
 * CUDAQ_PREDECODER_OK; CUDAQ_PREDECODER_ERR_INVALID_ARG (NULL, p not
 * weighted, dec a decoder of another graph than p's match_graph);
 * CUDAQ_PREDECODER_ERR_NO_MEMORY. */
cudaq_predecoder_status_t cudaq_predecoder_set_weight_map(const cudaq_predecoder_t *p,
                                                          cudaq_mwpm_decoder_t *dec);

/* A weighted model's edges, for a runner of the network other than
 * cudaq_predecoder_run (a GPU pipeline that runs the engine itself): the
 * map for cudaq_mwpm_decoder_set_weight_map (match graph edge graph_edge[j]
 * weighs |logit[slot[j]]|, j in graph edge order), and per logit i its
 * edge's detectors ends[2i], ends[2i + 1] (-1: the boundary) and
 * observables obs[i], to fold the edges with 0 < logit <= threshold (or
 * threshold < logit <= 0) into the model's residual and frame: the residual
 * of threshold 0 that the weights are for (models/README.md, "Weighted
 * matching"). logits_output is the model's output index of the logits. */
typedef struct cudaq_predecoder_edge_map {
  size_t num_edges;
  size_t logits_output;
  float threshold;
  const uint32_t *graph_edge;
  const uint32_t *slot;
  const int32_t *ends;
  const uint64_t *obs;
  void *impl_; /* owns the arrays */
} cudaq_predecoder_edge_map_t;

/* Reads the map of model (its `edge_logits` output and metadata) onto
 * match_graph into *out, as a predecoder with options weights = mode would
 * (AUTO: a model without edge logits gives no map, OFF: never one; no map
 * is num_edges 0); release it with cudaq_predecoder_edge_map_release.
 * Returns CUDAQ_PREDECODER_OK; CUDAQ_PREDECODER_ERR_INVALID_ARG (NULL, a bad
 * mode); CUDAQ_PREDECODER_ERR_MODEL (ON and no edge logits, bad metadata,
 * an edge not in the graph: err says which); CUDAQ_PREDECODER_ERR_NO_MEMORY. */
cudaq_predecoder_status_t cudaq_predecoder_edge_map_create(const cudaq_nn_model_t *model,
                                                           const cudaq_mwpm_graph_t *match_graph,
                                                           cudaq_predecoder_weights_t mode,
                                                           cudaq_predecoder_edge_map_t *out,
                                                           cudaq_predecoder_error_t *err);
void cudaq_predecoder_edge_map_release(cudaq_predecoder_edge_map_t *map);

/* A constant string naming a status. */
const char *cudaq_predecoder_status_str(cudaq_predecoder_status_t status);

/* Wilson score interval for k successes out of n trials at z standard
 * deviations (1.959964 for 95%): the centre (k + z^2/2) / (n + z^2) plus or
 * minus z sqrt(k (n - k) / n + z^2 / 4) / (n + z^2). Returns
 * CUDAQ_PREDECODER_OK; CUDAQ_PREDECODER_ERR_INVALID_ARG (NULL, n = 0,
 * k > n, z not finite or negative). */
cudaq_predecoder_status_t cudaq_wilson_interval(uint64_t k, uint64_t n, double z, double *lo,
                                                double *hi);

#define CUDAQ_WILSON_Z95 1.959963984540054

/* Seconds per shot over a set of timed shots (cudaq_predecoder_report_t). */
typedef struct cudaq_predecoder_shot_times {
  double p50_s, p99_s, max_s;
} cudaq_predecoder_shot_times_t;

/* What qec-decode count_mistakes measures with a predecoder: predecoder +
 * MWPM against MWPM alone on the same shots. */
typedef struct cudaq_predecoder_report {
  const char *predecoder;    /* model path or "local" */
  const char *device;        /* "cpu", "gpu" (NULL: not printed) */
  const char *precision;     /* "fp32", "fp16" (NULL: not printed) */
  uint64_t shots;
  uint64_t mistakes;         /* predecoder + MWPM */
  uint64_t mistakes_mwpm;    /* MWPM alone */
  uint64_t disagreements;    /* shots where the two predictions differ */
  uint64_t events_before;    /* detection events, all shots */
  uint64_t events_after;     /* residual events, all shots */
  double mwpm_raw_s;         /* MWPM time on the raw events of the timed shots */
  double mwpm_residual_s;    /* MWPM time on the residual events of the timed shots */
  double inference_s;        /* predecoder time, all shots */
  uint64_t mwpm_timed_shots; /* the shots mwpm_*_s cover (0: all shots). qec-decode
                                count_mistakes times MWPM after the run, in passes
                                over up to 100,000 kept shots decoded back to back */
  int weighted;              /* MWPM on the residual used the predecoder's per-shot edge
                                weights (weighted matching); printed only where set */
  /* MWPM time of one shot on the raw and on the residual events: median, 99th
   * percentile and slowest of the timed shots (qec-decode: one more pass over
   * the kept shots, each decode timed alone). All 0: not measured. */
  cudaq_predecoder_shot_times_t mwpm_raw_shot, mwpm_residual_shot;
} cudaq_predecoder_report_t;

/* Writes the report as text lines (logical error rates with 95% Wilson
 * intervals, disagreements, events per shot, MWPM and inference time per
 * shot). Returns CUDAQ_PREDECODER_OK; CUDAQ_PREDECODER_ERR_INVALID_ARG
 * (NULL). */
cudaq_predecoder_status_t cudaq_predecoder_report_print(FILE *f, const cudaq_predecoder_report_t *r);

/* Writes the report as one JSON object (keys listed in src/mwpm/README.md).
 * Returns CUDAQ_PREDECODER_OK or CUDAQ_PREDECODER_ERR_INVALID_ARG (NULL). */
cudaq_predecoder_status_t cudaq_predecoder_report_json(FILE *f, const cudaq_predecoder_report_t *r);

#ifdef __cplusplus
}
#endif
#endif
