/*
 * Neural-network inference for the predecoder: ONNX models loaded in C
 * (protobuf-c over the onnx.proto of Debian's libonnx-dev), static shape
 * inference at load, and a CPU reference executor. The GPU engine over the
 * same model is in cudaq/nn/gpu_engine.h.
 *
 * Supported: opset 13 to 20 of the default ONNX domain, weights embedded in
 * the model (no external data), static shapes; a symbolic first dimension of
 * a graph input or output (the batch) is pinned to 1, any other symbolic
 * dimension is refused. Operators: Conv (1D/2D/3D, group 1), Relu, Gelu,
 * Sigmoid, Erf, Add, Sub, Mul, Div, MatMul, Gemm, Reshape, Transpose,
 * Squeeze, Unsqueeze, Concat (up to 256 inputs), Slice, Gather (constant
 * indices), Cast, Greater, Less, Equal, Where, Identity, Constant. Element
 * types: float, uint8, int32, int64 and bool (float16 is refused in a model;
 * the GPU engine runs float tensors in FP16 on request). Anything else is
 * refused at load with an error naming the node (name, or index when
 * unnamed) and the operator.
 *
 * A loaded model is immutable; cudaq_nn_cpu_run may be called from several
 * threads only with distinct executors (each executor owns its tensors).
 */
#ifndef CUDAQ_NN_NN_H
#define CUDAQ_NN_NN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cudaq_nn_status {
  CUDAQ_NN_OK = 0,
  CUDAQ_NN_ERR_INVALID_ARG = -1,  /* NULL pointer, bad index, wrong buffer size */
  CUDAQ_NN_ERR_IO = -2,           /* the file cannot be read (or written) */
  CUDAQ_NN_ERR_PARSE = -3,        /* not a valid ONNX protobuf (bad or truncated file) */
  CUDAQ_NN_ERR_UNSUPPORTED = -4,  /* operator, attribute, type or opset we do not run */
  CUDAQ_NN_ERR_SHAPE = -5,        /* inconsistent shapes (declared vs inferred, broadcast) */
  CUDAQ_NN_ERR_MODEL = -6,        /* malformed graph: unknown tensor, missing input, cycle */
  CUDAQ_NN_ERR_NO_MEMORY = -7,
  CUDAQ_NN_ERR_CUDA = -8,         /* a CUDA, cuDNN or cuBLAS call failed */
  CUDAQ_NN_ERR_NO_DEVICE = -9     /* no CUDA device (or a build without CUDA) */
} cudaq_nn_status_t;

/* Element types, numbered as ONNX's TensorProto.DataType. */
typedef enum cudaq_nn_dtype {
  CUDAQ_NN_FLOAT = 1,
  CUDAQ_NN_UINT8 = 2,
  CUDAQ_NN_INT32 = 6,
  CUDAQ_NN_INT64 = 7,
  CUDAQ_NN_BOOL = 9,
  CUDAQ_NN_FLOAT16 = 10
} cudaq_nn_dtype_t;

#define CUDAQ_NN_MAX_RANK 8
#define CUDAQ_NN_ERROR_LEN 256

/* A message naming what went wrong (the node and operator, the file, ...). */
typedef struct cudaq_nn_error {
  char message[CUDAQ_NN_ERROR_LEN];
} cudaq_nn_error_t;

/* One graph input or output (the spec's tensor binding). Index 0 of the
 * inputs and of the outputs is the primary one; further outputs are the
 * auxiliary buffers. name points into the model and lives as long as it. */
typedef struct cudaq_nn_binding {
  const char *name;
  cudaq_nn_dtype_t dtype;
  int rank;
  int64_t shape[CUDAQ_NN_MAX_RANK];
  size_t num_elements;
  size_t size_bytes;
  int is_input;
} cudaq_nn_binding_t;

typedef struct cudaq_nn_model cudaq_nn_model_t;
typedef struct cudaq_nn_cpu cudaq_nn_cpu_t;

/* Parses a serialized ModelProto, checks every node, infers every shape
 * and folds constant subgraphs. On success *out is a new model to free with
 * cudaq_nn_model_destroy. err may be NULL. Returns CUDAQ_NN_OK;
 * CUDAQ_NN_ERR_INVALID_ARG (data or out NULL); CUDAQ_NN_ERR_PARSE (not a
 * ModelProto, truncated, bad protobuf framing, no graph);
 * CUDAQ_NN_ERR_UNSUPPORTED (opset, operator, attribute, element type,
 * external data, symbolic dimension, messages nested more than 64 deep);
 * CUDAQ_NN_ERR_SHAPE (shapes that do not agree, a graph input declared with
 * another element type or shape than the initializer it names, a negative
 * dimension); CUDAQ_NN_ERR_MODEL; CUDAQ_NN_ERR_NO_MEMORY. */
cudaq_nn_status_t cudaq_nn_model_load(const void *data, size_t len, cudaq_nn_model_t **out,
                                      cudaq_nn_error_t *err);

/* Reads an .onnx file and loads it as cudaq_nn_model_load does. Also
 * returns CUDAQ_NN_ERR_IO when the file cannot be read. */
cudaq_nn_status_t cudaq_nn_model_load_file(const char *path, cudaq_nn_model_t **out,
                                           cudaq_nn_error_t *err);

/* Frees a model (NULL is ignored). */
void cudaq_nn_model_destroy(cudaq_nn_model_t *model);

/* Number of graph inputs / outputs (0 for a NULL model). */
size_t cudaq_nn_model_num_inputs(const cudaq_nn_model_t *model);
size_t cudaq_nn_model_num_outputs(const cudaq_nn_model_t *model);

/* Describes input or output `index`. Returns CUDAQ_NN_OK or
 * CUDAQ_NN_ERR_INVALID_ARG (NULL, index out of range). */
cudaq_nn_status_t cudaq_nn_model_input(const cudaq_nn_model_t *model, size_t index,
                                       cudaq_nn_binding_t *out);
cudaq_nn_status_t cudaq_nn_model_output(const cudaq_nn_model_t *model, size_t index,
                                        cudaq_nn_binding_t *out);

/* Extension: keeps outputs [0, num) and removes every node that only fed
 * the others, so that executors and engines made afterwards neither compute
 * nor copy them (a predecoder's optional edge logits, where the caller does
 * not match with them). The hash changes with num (the engine cache key:
 * a pruned model has its own plans). Call it before making executors.
 * Returns CUDAQ_NN_OK (num equal to the output count changes nothing);
 * CUDAQ_NN_ERR_INVALID_ARG (NULL, num 0 or above the output count);
 * CUDAQ_NN_ERR_NO_MEMORY. */
cudaq_nn_status_t cudaq_nn_model_keep_outputs(cudaq_nn_model_t *model, size_t num);

/* A 64-bit FNV-1a hash of the serialized model (the engine cache key). */
uint64_t cudaq_nn_model_hash(const cudaq_nn_model_t *model);

/* Extension: the value of the model's metadata_props entry `key` (the last
 * one where a key repeats), valid while the model lives; NULL where the
 * model has no such entry (or model / key is NULL). */
const char *cudaq_nn_model_metadata(const cudaq_nn_model_t *model, const char *key);

/* Bytes per element of a dtype (0 for an unknown one). */
size_t cudaq_nn_dtype_size(cudaq_nn_dtype_t dtype);

/* A constant string naming a dtype ("float", "int32", ...; "unsupported
 * type" for any other value). */
const char *cudaq_nn_dtype_name(cudaq_nn_dtype_t dtype);

/* A constant string naming a status. */
const char *cudaq_nn_status_str(cudaq_nn_status_t status);

/* Creates a CPU executor over a model: every intermediate tensor is
 * allocated here, so that a run allocates nothing. The model must outlive
 * the executor's runs; cudaq_nn_cpu_destroy does not read the model, so the
 * two may be destroyed in either order. Returns CUDAQ_NN_OK,
 * CUDAQ_NN_ERR_INVALID_ARG, CUDAQ_NN_ERR_NO_MEMORY. */
cudaq_nn_status_t cudaq_nn_cpu_create(const cudaq_nn_model_t *model, cudaq_nn_cpu_t **out);
void cudaq_nn_cpu_destroy(cudaq_nn_cpu_t *cpu);

/* Extension: the kernels the CPU executor's convolutions run, as OpenBLAS
 * names them ("SkylakeX", "Haswell", ...; "none" in a build without
 * OpenBLAS). Where OpenBLAS does not know the CPU's model and falls back to
 * its SSE3 "Prescott" kernels on a CPU with AVX2 + FMA or AVX-512, the first
 * call (or the first executor created) reinitialises OpenBLAS, once, with
 * OPENBLAS_CORETYPE set to Haswell or SkylakeX for that moment (then
 * removed from the environment): make the first call, or create the first
 * executor, before the process starts other threads (setenv is not
 * thread-safe; the Python package calls this at import). OPENBLAS_CORETYPE
 * set by the user, or CUDAQ_NN_BLAS_KEEP=1, keeps OpenBLAS's own choice;
 * another wrong choice than Prescott is kept too. */
const char *cudaq_nn_cpu_blas_core(void);

/* Runs the model once. inputs[i] holds input i in its declared type and
 * shape (input_sizes[i] bytes, which must equal the binding's size_bytes);
 * outputs[i] receives output i (output_sizes[i] bytes, likewise). Returns
 * CUDAQ_NN_OK; CUDAQ_NN_ERR_INVALID_ARG (NULL pointer, wrong size: err says
 * which binding). err may be NULL. */
cudaq_nn_status_t cudaq_nn_cpu_run(cudaq_nn_cpu_t *cpu, const void *const *inputs,
                                   const size_t *input_sizes, void *const *outputs,
                                   const size_t *output_sizes, cudaq_nn_error_t *err);

#ifdef __cplusplus
}
#endif

#endif /* CUDAQ_NN_NN_H */
