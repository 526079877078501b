/* Internal representation of a loaded ONNX model, shared by the loader, the
 * CPU executor and the GPU engine. Everything here is fixed at load: shapes,
 * attributes and constant tensors (initializers and folded subgraphs). */
#ifndef CUDAQ_NN_INTERNAL_H
#define CUDAQ_NN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "cudaq/nn/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Element i of a host tensor of type t (FLOAT, INT32, INT64, BOOL, UINT8),
 * read as an integer or as a float as the CPU executor's Cast does
 * (truncation like C for floats, defined for every float: NaN -> 0,
 * saturating). Shared by the executor and the GPU engine's constant folds. */
static inline int64_t nn__ld_i(const void *p, cudaq_nn_dtype_t t, int64_t i) {
  switch (t) {
    case CUDAQ_NN_INT32: return ((const int32_t *)p)[i];
    case CUDAQ_NN_INT64: return ((const int64_t *)p)[i];
    case CUDAQ_NN_FLOAT: {
      float f = ((const float *)p)[i];
      if (!(f == f)) return 0;
      if (f >= 9.2233715e18f) return INT64_MAX;
      if (f <= -9.2233715e18f) return INT64_MIN;
      return (int64_t)f;
    }
    default: return ((const uint8_t *)p)[i];
  }
}
static inline float nn__ld_f(const void *p, cudaq_nn_dtype_t t, int64_t i) {
  return t == CUDAQ_NN_FLOAT ? ((const float *)p)[i] : (float)nn__ld_i(p, t, i);
}

/* Inputs of one node. Only Concat takes more than 5; the move map of a
 * copy-class node names each element's source input in a uint8_t. */
#define NN_MAX_NODE_INPUTS 256

typedef enum nn_op {
  NN_OP_CONV, NN_OP_RELU, NN_OP_GELU, NN_OP_SIGMOID, NN_OP_ERF,
  NN_OP_ADD, NN_OP_SUB, NN_OP_MUL, NN_OP_DIV,
  NN_OP_MATMUL, NN_OP_GEMM,
  NN_OP_RESHAPE, NN_OP_TRANSPOSE, NN_OP_SQUEEZE, NN_OP_UNSQUEEZE, NN_OP_CONCAT,
  NN_OP_SLICE, NN_OP_GATHER, NN_OP_CAST,
  NN_OP_GREATER, NN_OP_LESS, NN_OP_EQUAL, NN_OP_WHERE,
  NN_OP_IDENTITY, NN_OP_CONSTANT,
  NN_OP_COUNT
} nn_op_t;

/* A tensor of the graph. data is set for constants (owned by the model). */
typedef struct nn_value {
  char *name;
  cudaq_nn_dtype_t dtype;
  int rank;
  int64_t dims[CUDAQ_NN_MAX_RANK];
  size_t n;         /* number of elements */
  int known;        /* produced (shape known) yet during loading */
  void *data;       /* constant data, or NULL */
} nn_value_t;

typedef struct nn_conv_attr {
  int nsp;               /* spatial dims: 1, 2 or 3 */
  int64_t k[3], stride[3], dil[3], pad0[3], pad1[3]; /* padded to 3D, leading 1s */
} nn_conv_attr_t;

typedef struct nn_node {
  nn_op_t op;
  char *name;            /* "node 'x' (Conv)" or "node #3 (Conv)" in errors */
  char *op_type;
  int n_in, n_out;       /* n_out is always 1 */
  int *in;               /* n_in value indices (owned); -1 for an absent optional input */
  int out[1];
  int folded;            /* all inputs constant: evaluated at load */
  /* attributes */
  nn_conv_attr_t conv;
  float alpha, beta;     /* Gemm */
  int trans_a, trans_b;  /* Gemm */
  int gelu_tanh;         /* Gelu approximate="tanh" */
  int axis;              /* Concat, Gather (normalized) */
  int perm[CUDAQ_NN_MAX_RANK];                 /* Transpose */
  int64_t start[CUDAQ_NN_MAX_RANK], step[CUDAQ_NN_MAX_RANK]; /* Slice, per dim */
  cudaq_nn_dtype_t cast_to;
} nn_node_t;

struct cudaq_nn_model {
  nn_value_t *values;
  size_t n_values;
  nn_node_t *nodes;
  size_t n_nodes;
  int *inputs;           /* value indices of the graph inputs */
  size_t n_inputs;
  int *outputs;
  size_t n_outputs;
  uint64_t hash;
  int64_t opset;
  char **meta;           /* metadata_props: key, value, key, value, ... */
  size_t n_meta;         /* number of pairs */
};

/* Copy-class operators (the output is a selection of input elements). */
int nn__is_move_op(nn_op_t op);
/* Elementwise operators with numpy broadcasting over their inputs. */
int nn__is_elementwise_op(nn_op_t op);

/* For a copy-class node: for each output element i, src_in[i] is the node
 * input it comes from and src_idx[i] its element index there. */
void nn__move_map(const cudaq_nn_model_t *m, const nn_node_t *node, uint8_t *src_in,
                  int64_t *src_idx);

/* Element strides of value v broadcast to the shape of value out (0 on
 * broadcast dimensions), aligned to out's rank. */
void nn__bcast_strides(const nn_value_t *v, const nn_value_t *out, int64_t *strides);

/* Runs one node on the CPU over host buffers (bufs[value index]). Used by
 * the executor and by constant folding at load. move_src_in/move_src_idx
 * are the node's move map for copy-class nodes (else NULL). */
void nn__cpu_exec_node(const cudaq_nn_model_t *m, const nn_node_t *node, void **bufs,
                       const uint8_t *move_src_in, const int64_t *move_src_idx, float *conv_scratch);
/* cpu_conv.c: a Conv node's sizes, with 1D/2D as 3D of depth/height 1. */
typedef struct nn_conv_geom {
  int64_t N, C, M, ksz, isz, osz; /* batch, in/out channels, taps, in/out positions */
  int64_t in3[3], out3[3];
} nn_conv_geom_t;
void nn__conv_geom(const cudaq_nn_model_t *m, const nn_node_t *node, nn_conv_geom_t *g);
/* cpu_conv.c: im2col scratch (floats) a Conv node needs, 0 without OpenBLAS;
 * runs the node through SGEMM and returns 1, or returns 0 (no OpenBLAS or no
 * scratch) for the caller's direct loops. */
size_t nn__conv_scratch_floats(const cudaq_nn_model_t *m, const nn_node_t *node);
/* Chooses OpenBLAS's kernels once, before the first SGEMM (cpu_conv.c). */
void nn__blas_init(void);
int nn__conv_gemm(const cudaq_nn_model_t *m, const nn_node_t *node, void **bufs, float *scratch);

/* onnx_wire.c: checks the framing of a serialized ModelProto and bounds
 * its message nesting before protobuf-c unpacks it (which recurses without
 * a limit). CUDAQ_NN_ERR_PARSE for bad framing, CUDAQ_NN_ERR_UNSUPPORTED for
 * nesting too deep, each with a message. */
cudaq_nn_status_t nn__onnx_prescan(const void *data, size_t len, cudaq_nn_error_t *err);

void nn__set_error(cudaq_nn_error_t *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

const char *nn__op_name(nn_op_t op);

#ifdef __cplusplus
}
#endif

#endif
