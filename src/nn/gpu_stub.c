/* The GPU engine in a build without CUDA: every create reports no device. */
#include <stddef.h>

#include "cudaq/nn/gpu_engine.h"
#include "nn_internal.h"

cudaq_nn_status_t cudaq_nn_gpu_create(const cudaq_nn_model_t *model,
                                      const cudaq_nn_gpu_options_t *opts, cudaq_nn_gpu_t **out,
                                      cudaq_nn_error_t *err) {
  (void)opts;
  if (!model || !out) return CUDAQ_NN_ERR_INVALID_ARG;
  *out = NULL;
  nn__set_error(err, "built without CUDA");
  return CUDAQ_NN_ERR_NO_DEVICE;
}
void cudaq_nn_gpu_destroy(cudaq_nn_gpu_t *gpu) { (void)gpu; }
void *cudaq_nn_gpu_input(const cudaq_nn_gpu_t *gpu, size_t index) { (void)gpu; (void)index; return NULL; }
void *cudaq_nn_gpu_output(const cudaq_nn_gpu_t *gpu, size_t index) { (void)gpu; (void)index; return NULL; }
void *cudaq_nn_gpu_graph_exec(const cudaq_nn_gpu_t *gpu) { (void)gpu; return NULL; }
void *cudaq_nn_gpu_graph(const cudaq_nn_gpu_t *gpu) { (void)gpu; return NULL; }
size_t cudaq_nn_gpu_device_bytes(const cudaq_nn_gpu_t *gpu) { (void)gpu; return 0; }
cudaq_nn_status_t cudaq_nn_gpu_launch(cudaq_nn_gpu_t *gpu, void *stream) {
  (void)gpu; (void)stream;
  return CUDAQ_NN_ERR_INVALID_ARG;
}
int cudaq_nn_pdl_enabled(void) { return 0; }
cudaq_nn_status_t cudaq_nn_gpu_enqueue(cudaq_nn_gpu_t *gpu, void *stream, cudaq_nn_error_t *err) {
  (void)gpu; (void)stream;
  nn__set_error(err, "built without CUDA");
  return CUDAQ_NN_ERR_INVALID_ARG;
}
cudaq_nn_status_t cudaq_nn_gpu_run(cudaq_nn_gpu_t *gpu, const void *const *inputs,
                                   const size_t *input_sizes, void *const *outputs,
                                   const size_t *output_sizes, cudaq_nn_error_t *err) {
  (void)gpu; (void)inputs; (void)input_sizes; (void)outputs; (void)output_sizes;
  nn__set_error(err, "built without CUDA");
  return CUDAQ_NN_ERR_INVALID_ARG;
}
cudaq_nn_plan_state_t cudaq_nn_gpu_plan_state(const cudaq_nn_gpu_t *gpu) { (void)gpu; return CUDAQ_NN_PLAN_NONE; }
cudaq_nn_status_t cudaq_nn_gpu_describe(const cudaq_nn_gpu_t *gpu, char *buf, size_t len) {
  (void)gpu; (void)buf; (void)len;
  return CUDAQ_NN_ERR_INVALID_ARG;
}
cudaq_nn_status_t cudaq_nn_gpu_device_program(cudaq_nn_gpu_t *gpu, size_t smem_limit,
                                              cudaq_nn_device_program_info_t *out, cudaq_nn_error_t *err) {
  (void)gpu; (void)smem_limit; (void)out;
  nn__set_error(err, "built without CUDA");
  return CUDAQ_NN_ERR_NO_DEVICE;
}
