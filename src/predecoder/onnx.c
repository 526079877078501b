/*
 * ONNX predecoder: a model following the contract of models/README.md, run
 * on the NN engine's CPU executor or GPU engine.
 */
#include <stdlib.h>
#include <string.h>

#include "cudaq/nn/gpu_engine.h"
#include "predecoder_internal.h"

#define INPUT_NAME "detectors"
#define RESIDUAL_NAME "residual_detectors"
#define FRAME_NAME "logical_frame"

typedef struct onnx_pd {
  struct cudaq_predecoder base;
  cudaq_nn_model_t *model;
  cudaq_nn_cpu_t *cpu;   /* one of cpu, gpu */
  cudaq_nn_gpu_t *gpu;
  int32_t *input;        /* [1, N] */
  size_t input_size;
  size_t num_outputs;
  void **outputs;        /* output 0 residual, 1 frame, then any others */
  size_t *output_sizes;
  pd__weights_t *wt;     /* weighted mode (weights.c), or NULL */
} onnx_pd_t;

static void shape_str(const cudaq_nn_binding_t *b, char *buf, size_t len) {
  size_t at = (size_t)snprintf(buf, len, "[");
  for (int i = 0; i < b->rank && at < len; i++)
    at += (size_t)snprintf(buf + at, len - at, "%s%lld", i ? ", " : "", (long long)b->shape[i]);
  if (at < len)
    snprintf(buf + at, len - at, "]");
}

/* One binding against the contract: name, INT32, shape [1, n]. what is
 * "input 0" or "output 1"; count names what n counts (singular). */
static cudaq_predecoder_status_t check_binding(const cudaq_nn_binding_t *b, const char *what,
                                               const char *name, uint32_t n, const char *count,
                                               cudaq_predecoder_error_t *err) {
  if (!b->name || strcmp(b->name, name)) {
    cudaq_predecoder__set_error(err, "model %s is named '%s', the contract names it '%s'", what,
                                b->name ? b->name : "", name);
    return CUDAQ_PREDECODER_ERR_MODEL;
  }
  if (b->dtype != CUDAQ_NN_INT32) {
    cudaq_predecoder__set_error(err, "model %s '%s' has element type %s, the contract needs int32",
                                what, name, cudaq_nn_dtype_name(b->dtype));
    return CUDAQ_PREDECODER_ERR_MODEL;
  }
  if (b->rank != 2 || b->shape[0] != 1 || b->shape[1] != (int64_t)n) {
    char s[128];
    shape_str(b, s, sizeof s);
    cudaq_predecoder__set_error(err, "model %s '%s' has shape %s, the DEM needs [1, %u] (it has %u %s%s)",
                                what, name, s, n, n, count, n == 1 ? "" : "s");
    return CUDAQ_PREDECODER_ERR_MODEL;
  }
  return CUDAQ_PREDECODER_OK;
}

cudaq_predecoder_status_t cudaq_predecoder_check_model(const cudaq_nn_model_t *model,
                                                       uint32_t num_detectors,
                                                       uint32_t num_observables,
                                                       cudaq_predecoder_error_t *err) {
  if (!model) {
    cudaq_predecoder__set_error(err, "model is NULL");
    return CUDAQ_PREDECODER_ERR_INVALID_ARG;
  }
  size_t ni = cudaq_nn_model_num_inputs(model), no = cudaq_nn_model_num_outputs(model);
  if (ni != 1) {
    cudaq_predecoder__set_error(err, "model has %zu inputs, the contract needs exactly 1 ('%s')", ni,
                                INPUT_NAME);
    return CUDAQ_PREDECODER_ERR_MODEL;
  }
  if (no < 2) {
    cudaq_predecoder__set_error(err, "model has %zu output%s, the contract needs 2 ('%s', '%s'): "
                                "'%s' is missing", no, no == 1 ? "" : "s", RESIDUAL_NAME,
                                FRAME_NAME, no == 1 ? FRAME_NAME : RESIDUAL_NAME);
    return CUDAQ_PREDECODER_ERR_MODEL;
  }
  cudaq_nn_binding_t b;
  cudaq_predecoder_status_t st;
  cudaq_nn_model_input(model, 0, &b);
  if ((st = check_binding(&b, "input 0", INPUT_NAME, num_detectors, "detector", err)))
    return st;
  cudaq_nn_model_output(model, 0, &b);
  if ((st = check_binding(&b, "output 0", RESIDUAL_NAME, num_detectors, "detector", err)))
    return st;
  cudaq_nn_model_output(model, 1, &b);
  return check_binding(&b, "output 1", FRAME_NAME, num_observables, "observable", err);
}

static void onnx_destroy(cudaq_predecoder_t *p) {
  onnx_pd_t *o = (onnx_pd_t *)p;
  cudaq_nn_cpu_destroy(o->cpu);
  cudaq_nn_gpu_destroy(o->gpu);
  cudaq_nn_model_destroy(o->model);
  cudaq_predecoder__weights_destroy(o->wt);
  if (o->outputs)
    for (size_t i = 0; i < o->num_outputs; i++)
      free(o->outputs[i]);
  free(o->outputs);
  free(o->output_sizes);
  free(o->input);
  free(o);
}

/* Reads a 0/1 INT32 output; names the first other value. */
static cudaq_predecoder_status_t check_bits(const int32_t *v, size_t n, const char *name,
                                            cudaq_predecoder_error_t *err) {
  for (size_t i = 0; i < n; i++)
    if (v[i] != 0 && v[i] != 1) {
      cudaq_predecoder__set_error(err, "model output '%s'[%zu] is %d, not 0 or 1", name, i,
                                  (int)v[i]);
      return CUDAQ_PREDECODER_ERR_OUTPUT;
    }
  return CUDAQ_PREDECODER_OK;
}

static cudaq_predecoder_status_t onnx_run(cudaq_predecoder_t *p, const uint32_t *events, size_t n,
                                          uint32_t *residual, size_t *num_residual,
                                          uint64_t *frame, cudaq_predecoder_error_t *err) {
  onnx_pd_t *o = (onnx_pd_t *)p;
  uint32_t nd = p->num_detectors, nobs = p->num_observables;
  for (size_t i = 0; i < n; i++)
    if (events[i] >= nd) {
      cudaq_predecoder__set_error(err, "event %zu: detector %u out of range (%u detectors)", i,
                                  events[i], nd);
      return CUDAQ_PREDECODER_ERR_OUT_OF_RANGE;
    }
  memset(o->input, 0, o->input_size);
  for (size_t i = 0; i < n; i++)
    o->input[events[i]] ^= 1;
  const void *in[1] = {o->input};
  cudaq_nn_error_t nerr;
  cudaq_nn_status_t nst;
  if (o->gpu)
    nst = cudaq_nn_gpu_run(o->gpu, in, &o->input_size, o->outputs, o->output_sizes, &nerr);
  else
    nst = cudaq_nn_cpu_run(o->cpu, in, &o->input_size, o->outputs, o->output_sizes, &nerr);
  if (nst != CUDAQ_NN_OK) {
    cudaq_predecoder__set_error(err, "inference failed: %s: %s", cudaq_nn_status_str(nst),
                                nerr.message);
    return CUDAQ_PREDECODER_ERR_NN;
  }
  const int32_t *res = o->outputs[0], *fr = o->outputs[1];
  cudaq_predecoder_status_t st;
  if ((st = check_bits(res, nd, RESIDUAL_NAME, err)) || (st = check_bits(fr, nobs, FRAME_NAME, err)))
    return st;
  uint64_t f = 0;
  for (uint32_t k = 0; k < nobs; k++)
    f |= (uint64_t)fr[k] << k;
  if (o->wt) {
    *frame = f;
    return cudaq_predecoder__weights_apply(o->wt, o->base.w_values, res, nd, residual,
                                           num_residual, frame, err);
  }
  size_t r = 0;
  for (uint32_t i = 0; i < nd; i++)
    if (res[i])
      residual[r++] = i;
  *num_residual = r;
  *frame = f;
  return CUDAQ_PREDECODER_OK;
}

cudaq_predecoder_status_t cudaq_onnx_predecoder_options_init(cudaq_onnx_predecoder_options_t *opts) {
  if (!opts)
    return CUDAQ_PREDECODER_ERR_INVALID_ARG;
  memset(opts, 0, sizeof *opts);
  opts->device = CUDAQ_PREDECODER_CPU;
  opts->precision = CUDAQ_PREDECODER_FP32;
  return CUDAQ_PREDECODER_OK;
}

static cudaq_predecoder_status_t check_options(const cudaq_onnx_predecoder_options_t *opts,
                                               cudaq_predecoder_error_t *err) {
  if (opts->device != CUDAQ_PREDECODER_CPU && opts->device != CUDAQ_PREDECODER_GPU) {
    cudaq_predecoder__set_error(err, "device %d is neither CPU nor GPU", (int)opts->device);
    return CUDAQ_PREDECODER_ERR_INVALID_ARG;
  }
  if (opts->precision != CUDAQ_PREDECODER_FP32 && opts->precision != CUDAQ_PREDECODER_FP16) {
    cudaq_predecoder__set_error(err, "precision %d is neither FP32 nor FP16", (int)opts->precision);
    return CUDAQ_PREDECODER_ERR_INVALID_ARG;
  }
  cudaq_predecoder_status_t st = cudaq_predecoder__weights_mode_check(opts->weights, err);
  if (st)
    return st;
  if (opts->device == CUDAQ_PREDECODER_CPU && opts->precision == CUDAQ_PREDECODER_FP16) {
    cudaq_predecoder__set_error(err, "FP16 runs on the GPU only (the CPU executor is FP32)");
    return CUDAQ_PREDECODER_ERR_INVALID_ARG;
  }
  return CUDAQ_PREDECODER_OK;
}

static cudaq_predecoder_status_t make_engine(onnx_pd_t *o, const cudaq_onnx_predecoder_options_t *opts,
                                             cudaq_predecoder_error_t *err) {
  cudaq_nn_error_t nerr;
  nerr.message[0] = '\0';
  if (opts->device == CUDAQ_PREDECODER_CPU) {
    cudaq_nn_status_t nst = cudaq_nn_cpu_create(o->model, &o->cpu);
    if (nst == CUDAQ_NN_OK)
      return CUDAQ_PREDECODER_OK;
    cudaq_predecoder__set_error(err, "CPU executor: %s", cudaq_nn_status_str(nst));
    return nst == CUDAQ_NN_ERR_NO_MEMORY ? CUDAQ_PREDECODER_ERR_NO_MEMORY : CUDAQ_PREDECODER_ERR_NN;
  }
  cudaq_nn_gpu_options_t g;
  cudaq_nn_gpu_options_init(&g);
  g.precision = opts->precision == CUDAQ_PREDECODER_FP16 ? CUDAQ_NN_FP16 : CUDAQ_NN_FP32;
  g.device = opts->gpu_ordinal;
  g.plan_path = opts->plan_path;
  cudaq_nn_status_t nst = cudaq_nn_gpu_create(o->model, &g, &o->gpu, &nerr);
  if (nst == CUDAQ_NN_OK)
    return CUDAQ_PREDECODER_OK;
  cudaq_predecoder__set_error(err, "GPU engine: %s", nerr.message[0] ? nerr.message :
                                                     cudaq_nn_status_str(nst));
  if (nst == CUDAQ_NN_ERR_NO_DEVICE)
    return CUDAQ_PREDECODER_ERR_NO_DEVICE;
  return nst == CUDAQ_NN_ERR_NO_MEMORY ? CUDAQ_PREDECODER_ERR_NO_MEMORY : CUDAQ_PREDECODER_ERR_NN;
}

static cudaq_predecoder_status_t alloc_buffers(onnx_pd_t *o) {
  cudaq_nn_binding_t b;
  cudaq_nn_model_input(o->model, 0, &b);
  o->input_size = b.size_bytes;
  o->input = calloc(1, b.size_bytes ? b.size_bytes : 1);
  o->num_outputs = cudaq_nn_model_num_outputs(o->model);
  o->outputs = calloc(o->num_outputs, sizeof *o->outputs);
  o->output_sizes = calloc(o->num_outputs, sizeof *o->output_sizes);
  if (!o->input || !o->outputs || !o->output_sizes)
    return CUDAQ_PREDECODER_ERR_NO_MEMORY;
  for (size_t i = 0; i < o->num_outputs; i++) {
    cudaq_nn_model_output(o->model, i, &b);
    o->output_sizes[i] = b.size_bytes;
    o->outputs[i] = calloc(1, b.size_bytes ? b.size_bytes : 1);
    if (!o->outputs[i])
      return CUDAQ_PREDECODER_ERR_NO_MEMORY;
  }
  return CUDAQ_PREDECODER_OK;
}

cudaq_predecoder_status_t cudaq_predecoder_create_onnx(const char *path, uint32_t num_detectors,
                                                       uint32_t num_observables,
                                                       const cudaq_onnx_predecoder_options_t *opts,
                                                       cudaq_predecoder_t **out,
                                                       cudaq_predecoder_error_t *err) {
  if (!path || !out) {
    cudaq_predecoder__set_error(err, "ONNX predecoder: %s is NULL", path ? "out" : "path");
    return CUDAQ_PREDECODER_ERR_INVALID_ARG;
  }
  *out = NULL;
  if (num_observables > 64) {
    cudaq_predecoder__set_error(err, "%u observables: at most 64 are supported", num_observables);
    return CUDAQ_PREDECODER_ERR_INVALID_ARG;
  }
  cudaq_onnx_predecoder_options_t dflt;
  cudaq_onnx_predecoder_options_init(&dflt);
  if (!opts)
    opts = &dflt;
  cudaq_predecoder_status_t st = check_options(opts, err);
  if (st)
    return st;
  onnx_pd_t *o = calloc(1, sizeof *o);
  if (!o) {
    cudaq_predecoder__set_error(err, "out of memory");
    return CUDAQ_PREDECODER_ERR_NO_MEMORY;
  }
  o->base.kind = PD__ONNX;
  o->base.num_detectors = num_detectors;
  o->base.num_observables = num_observables;
  o->base.run = onnx_run;
  o->base.destroy = onnx_destroy;
  cudaq_nn_error_t nerr;
  nerr.message[0] = '\0';
  cudaq_nn_status_t nst = cudaq_nn_model_load_file(path, &o->model, &nerr);
  if (nst != CUDAQ_NN_OK) {
    const char *kind = cudaq_nn_status_str(nst); /* named once: some messages begin with it */
    if (!strncmp(nerr.message, kind, strlen(kind)))
      cudaq_predecoder__set_error(err, "cannot load: %s", nerr.message);
    else
      cudaq_predecoder__set_error(err, "cannot load: %s: %s", kind, nerr.message);
    st = nst == CUDAQ_NN_ERR_NO_MEMORY ? CUDAQ_PREDECODER_ERR_NO_MEMORY : CUDAQ_PREDECODER_ERR_NN;
  }
  if (!st)
    st = cudaq_predecoder_check_model(o->model, num_detectors, num_observables, err);
  if (!st && opts->graph)
    st = cudaq_predecoder_check_layout(o->model, opts->graph, NULL, err);
  if (!st && !(st = cudaq_predecoder__weights_create(o->model, opts->match_graph, opts->weights,
                                                    num_detectors, &o->wt, err)) &&
      o->wt) {
    o->base.w_map = cudaq_predecoder__weights_map(o->wt);
    o->base.w_graph = opts->match_graph;
  }
  /* Unweighted: outputs past the frame (edge logits) are neither computed nor copied. */
  if (!st && !o->wt && cudaq_nn_model_keep_outputs(o->model, 2)) {
    cudaq_predecoder__set_error(err, "out of memory");
    st = CUDAQ_PREDECODER_ERR_NO_MEMORY;
  }
  if (!st && (st = alloc_buffers(o)))
    cudaq_predecoder__set_error(err, "out of memory");
  if (!st && o->wt)
    o->base.w_values = o->outputs[o->base.w_map->logits_output]; /* each run writes its logits here */
  if (!st)
    st = make_engine(o, opts, err);
  if (st) {
    onnx_destroy(&o->base);
    return st;
  }
  *out = &o->base;
  return CUDAQ_PREDECODER_OK;
}
