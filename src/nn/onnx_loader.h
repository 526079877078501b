/* Private to the ONNX loader (onnx_load.c, onnx_infer.c): the loader state
 * and the helpers both halves use. */
#ifndef CUDAQ_NN_ONNX_LOADER_H
#define CUDAQ_NN_ONNX_LOADER_H

#include "nn_internal.h"
#include "onnx.pb-c.h"

#define NN_MAX_ELEMENTS ((size_t)1 << 26) /* per tensor; the d=31 predecoder needs 2^22 */

typedef struct loader {
  cudaq_nn_model_t *m;
  size_t cap_values;
  int *table;        /* open-addressing hash of value names -> index, -1 empty */
  size_t table_cap;  /* power of two */
  cudaq_nn_error_t *err;
  char where[160];   /* "node 'x' (Conv)" for messages */
} loader_t;

static inline const char *dtype_name(int t) { return cudaq_nn_dtype_name((cudaq_nn_dtype_t)t); }

/* Element i of a constant int32 or int64 tensor. */
static inline int64_t const_i64(const nn_value_t *v, size_t i) {
  if (v->dtype == CUDAQ_NN_INT64) return ((const int64_t *)v->data)[i];
  return ((const int32_t *)v->data)[i];
}

/* onnx_load.c */
/* Element types a model may use (float16 only on the GPU, as a precision). */
int nn__dtype_ok(int t);
/* Sets rank/dims/n of v; refuses negative dimensions and too many elements. */
cudaq_nn_status_t nn__set_shape(loader_t *L, nn_value_t *v, int rank, const int64_t *dims);
/* Reads a TensorProto (initializer or Constant value) into value v. */
cudaq_nn_status_t nn__read_tensor(loader_t *L, const Onnx__TensorProto *t, nn_value_t *v);

/* onnx_infer.c */
/* Whether op takes n inputs (after trailing empty ones are dropped). */
int nn__input_count_ok(nn_op_t op, int n);
/* Checks a node's attributes and input types, and infers its single
 * output (element type and shape); fills the node's attribute fields. */
cudaq_nn_status_t nn__infer_node(loader_t *L, const Onnx__NodeProto *pn, nn_node_t *node);

#endif
