/* GPU engine helpers that need no CUDA (built in every configuration). */
#include <stdio.h>
#include <string.h>

#include "cudaq/nn/gpu_engine.h"

cudaq_nn_status_t cudaq_nn_gpu_options_init(cudaq_nn_gpu_options_t *opts) {
  if (!opts) return CUDAQ_NN_ERR_INVALID_ARG;
  memset(opts, 0, sizeof *opts);
  opts->precision = CUDAQ_NN_FP32;
  opts->conv_impl = CUDAQ_NN_CONV_AUTO;
  opts->tune_iterations = 20;
  opts->concurrent = 1;
  return CUDAQ_NN_OK;
}

cudaq_nn_status_t cudaq_nn_plan_path(const char *model_path, cudaq_nn_precision_t precision,
                                     char *out, size_t out_len) {
  if (!model_path || !out || out_len == 0) return CUDAQ_NN_ERR_INVALID_ARG;
  size_t n = strlen(model_path);
  const char *slash = strrchr(model_path, '/');
  const char *dot = strrchr(model_path, '.');
  if (dot && (!slash || dot > slash) && strcmp(dot, ".onnx") == 0) n = (size_t)(dot - model_path);
  int w = snprintf(out, out_len, "%.*s.%s.plan", (int)n, model_path,
                   precision == CUDAQ_NN_FP16 ? "fp16" : "fp32");
  return w > 0 && (size_t)w < out_len ? CUDAQ_NN_OK : CUDAQ_NN_ERR_INVALID_ARG;
}
