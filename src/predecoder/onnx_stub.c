/* The ONNX predecoder in a build without the NN engine (no protobuf-c or
 * libonnx-dev): every call says so. The local predecoder is unaffected. */
#include <string.h>

#include "predecoder_internal.h"

cudaq_predecoder_status_t cudaq_onnx_predecoder_options_init(cudaq_onnx_predecoder_options_t *opts) {
  if (!opts)
    return CUDAQ_PREDECODER_ERR_INVALID_ARG;
  memset(opts, 0, sizeof *opts);
  return CUDAQ_PREDECODER_OK;
}

cudaq_predecoder_status_t cudaq_predecoder_check_model(const cudaq_nn_model_t *model,
                                                       uint32_t num_detectors,
                                                       uint32_t num_observables,
                                                       cudaq_predecoder_error_t *err) {
  (void)num_detectors;
  (void)num_observables;
  if (!model)
    return CUDAQ_PREDECODER_ERR_INVALID_ARG;
  cudaq_predecoder__set_error(err, "built without the NN engine");
  return CUDAQ_PREDECODER_ERR_UNSUPPORTED;
}

cudaq_predecoder_status_t cudaq_predecoder_check_layout(const cudaq_nn_model_t *model,
                                                        const cudaq_mwpm_graph_t *graph,
                                                        int *checked,
                                                        cudaq_predecoder_error_t *err) {
  if (checked)
    *checked = 0;
  if (!model || !graph)
    return CUDAQ_PREDECODER_ERR_INVALID_ARG;
  cudaq_predecoder__set_error(err, "built without the NN engine");
  return CUDAQ_PREDECODER_ERR_UNSUPPORTED;
}

cudaq_predecoder_status_t cudaq_predecoder_create_onnx(const char *path, uint32_t num_detectors,
                                                       uint32_t num_observables,
                                                       const cudaq_onnx_predecoder_options_t *opts,
                                                       cudaq_predecoder_t **out,
                                                       cudaq_predecoder_error_t *err) {
  (void)num_detectors;
  (void)num_observables;
  (void)opts;
  if (!path || !out)
    return CUDAQ_PREDECODER_ERR_INVALID_ARG;
  *out = NULL;
  cudaq_predecoder__set_error(err, "built without the NN engine (needs libprotobuf-c-dev, "
                                   "protobuf-c-compiler, libonnx-dev)");
  return CUDAQ_PREDECODER_ERR_UNSUPPORTED;
}

cudaq_predecoder_status_t cudaq_predecoder_edge_map_create(const cudaq_nn_model_t *model,
                                                           const cudaq_mwpm_graph_t *match_graph,
                                                           cudaq_predecoder_weights_t mode,
                                                           cudaq_predecoder_edge_map_t *out,
                                                           cudaq_predecoder_error_t *err) {
  (void)mode;
  if (out)
    memset(out, 0, sizeof *out);
  if (!model || !match_graph || !out)
    return CUDAQ_PREDECODER_ERR_INVALID_ARG;
  cudaq_predecoder__set_error(err, "built without the NN engine");
  return CUDAQ_PREDECODER_ERR_UNSUPPORTED;
}

void cudaq_predecoder_edge_map_release(cudaq_predecoder_edge_map_t *map) {
  if (map)
    memset(map, 0, sizeof *map);
}
