/* Builds ONNX protobuf bytes by hand in the NN tests, for models that the
 * onnx Python package would not write (or that need no venv): a growable
 * byte buffer, the protobuf wire encoding, and a few ONNX messages. Field
 * numbers are those of onnx.proto. Allocation failures abort. */
#ifndef CUDAQ_NN_PB_BUILD_H
#define CUDAQ_NN_PB_BUILD_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct pb {
  uint8_t *d;
  size_t n, cap;
} pb_t;

static inline void pb_put(pb_t *b, const void *p, size_t n) {
  if (b->n + n > b->cap) {
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->n + n) cap *= 2;
    uint8_t *d = realloc(b->d, cap);
    if (!d) abort();
    b->d = d;
    b->cap = cap;
  }
  if (n) memcpy(b->d + b->n, p, n);
  b->n += n;
}

static inline void pb_free(pb_t *b) {
  free(b->d);
  memset(b, 0, sizeof *b);
}

static inline void pb_varint(pb_t *b, uint64_t v) {
  uint8_t o[10];
  size_t n = 0;
  do {
    o[n] = (uint8_t)(v & 0x7f);
    v >>= 7;
    if (v) o[n] |= 0x80;
    n++;
  } while (v);
  pb_put(b, o, n);
}

/* Wire types: 0 varint, 1 64-bit, 2 length-delimited, 5 32-bit. */
static inline void pb_tag(pb_t *b, unsigned field, unsigned wire) { pb_varint(b, (uint64_t)field << 3 | wire); }
static inline void pb_int(pb_t *b, unsigned field, int64_t v) {
  pb_tag(b, field, 0);
  pb_varint(b, (uint64_t)v);
}
static inline void pb_bytes(pb_t *b, unsigned field, const void *p, size_t n) {
  pb_tag(b, field, 2);
  pb_varint(b, n);
  pb_put(b, p, n);
}
static inline void pb_str(pb_t *b, unsigned field, const char *s) { pb_bytes(b, field, s, strlen(s)); }
/* Appends message m as field `field` of b, and frees m. */
static inline void pb_msg(pb_t *b, unsigned field, pb_t *m) {
  pb_bytes(b, field, m->d, m->n);
  pb_free(m);
}

/* ------------------------------------------------------------------------ */
/* ONNX messages                                                             */

#define NB_SYMBOLIC INT64_MIN /* a dimension given as dim_param "n" */
#define NB_NO_SHAPE (-1)      /* rank: a tensor type without a shape */

/* TypeProto{tensor_type{elem_type, shape{dim...}}} */
static inline pb_t nb_tensor_type(int elem, int rank, const int64_t *dims) {
  pb_t shape = {0}, tt = {0}, type = {0};
  for (int i = 0; i < rank; i++) {
    pb_t dim = {0};
    if (dims[i] == NB_SYMBOLIC) pb_str(&dim, 2, "n");
    else pb_int(&dim, 1, dims[i]);
    pb_msg(&shape, 1, &dim);
  }
  pb_int(&tt, 1, elem);
  if (rank != NB_NO_SHAPE) pb_msg(&tt, 2, &shape);
  pb_free(&shape);
  pb_msg(&type, 1, &tt);
  return type;
}

/* ValueInfoProto{name, type} */
static inline pb_t nb_value_info(const char *name, int elem, int rank, const int64_t *dims) {
  pb_t vi = {0}, type = nb_tensor_type(elem, rank, dims);
  pb_str(&vi, 1, name);
  pb_msg(&vi, 2, &type);
  return vi;
}

/* TensorProto{dims, data_type, name, raw_data} */
static inline pb_t nb_tensor(const char *name, int elem, int rank, const int64_t *dims, const void *raw,
                             size_t bytes) {
  pb_t t = {0};
  for (int i = 0; i < rank; i++) pb_int(&t, 1, dims[i]);
  pb_int(&t, 2, elem);
  pb_str(&t, 8, name);
  pb_bytes(&t, 9, raw, bytes);
  return t;
}

/* NodeProto{input..., output, name, op_type}; attributes with nb_attr_int. */
static inline pb_t nb_node(const char *op, const char *const *in, int n_in, const char *out) {
  pb_t n = {0};
  for (int i = 0; i < n_in; i++) pb_str(&n, 1, in[i]);
  pb_str(&n, 2, out);
  pb_str(&n, 3, op);
  pb_str(&n, 4, op);
  return n;
}

/* AttributeProto{name, i, type INT} appended to a NodeProto. */
static inline void nb_attr_int(pb_t *node, const char *name, int64_t v) {
  pb_t a = {0};
  pb_str(&a, 1, name);
  pb_int(&a, 3, v);
  pb_int(&a, 20, 2);
  pb_msg(node, 5, &a);
}

/* AttributeProto{name, ints..., type INTS} appended to a NodeProto. */
static inline void nb_attr_ints(pb_t *node, const char *name, const int64_t *v, int n) {
  pb_t a = {0};
  pb_str(&a, 1, name);
  for (int i = 0; i < n; i++) pb_int(&a, 8, v[i]);
  pb_int(&a, 20, 7);
  pb_msg(node, 5, &a);
}

/* ModelProto{ir_version 8, opset_import{"" , opset}, graph}; frees graph. */
static inline pb_t nb_model(pb_t *graph, int opset) {
  pb_t m = {0}, os = {0};
  pb_int(&m, 1, 8);
  pb_str(&os, 1, "");
  pb_int(&os, 2, opset);
  pb_msg(&m, 8, &os);
  pb_msg(&m, 7, graph);
  return m;
}

/* ------------------------------------------------------------------------ */
/* Models shared by test_nn_hardening and test_nn_gpu                        */

/* y = Relu(x), x and y float [n]. */
static inline pb_t nb_relu_model(int64_t n) {
  const char *in[1] = {"x"};
  pb_t g = {0}, node = nb_node("Relu", in, 1, "y");
  pb_t vx = nb_value_info("x", 1 /* float */, 1, &n), vy = nb_value_info("y", 1, 1, &n);
  pb_msg(&g, 1, &node);
  pb_msg(&g, 11, &vx);
  pb_msg(&g, 12, &vy);
  return nb_model(&g, 17);
}

/* y = Relu(Conv(x, w, b)) with kernel 3, padding 1 (output size = input
 * size), nsp spatial dims of size 4, 1 input and 2 output channels:
 * w all 0.1, b as given. x [1,1,4..], y [1,2,4..]. */
static inline pb_t nb_conv_relu_model(int nsp, const float bias[2]) {
  int64_t xd[5] = {1, 1, 4, 4, 4}, wd[5] = {2, 1, 3, 3, 3}, yd[5] = {1, 2, 4, 4, 4}, bd = 2;
  int64_t pads[6] = {1, 1, 1, 1, 1, 1};
  float w[54];
  for (int i = 0; i < 54; i++) w[i] = 0.1f;
  int ksz = nsp == 3 ? 27 : nsp == 2 ? 9 : 3;
  const char *cin[3] = {"x", "w", "b"}, *rin[1] = {"c"};
  pb_t g = {0}, conv = nb_node("Conv", cin, 3, "c"), relu = nb_node("Relu", rin, 1, "y");
  nb_attr_ints(&conv, "pads", pads, 2 * nsp);
  pb_t tw = nb_tensor("w", 1, 2 + nsp, wd, w, 2 * (size_t)ksz * sizeof(float));
  pb_t tb = nb_tensor("b", 1, 1, &bd, bias, 2 * sizeof(float));
  pb_t vx = nb_value_info("x", 1, 2 + nsp, xd), vy = nb_value_info("y", 1, 2 + nsp, yd);
  pb_msg(&g, 1, &conv);
  pb_msg(&g, 1, &relu);
  pb_msg(&g, 5, &tw);
  pb_msg(&g, 5, &tb);
  pb_msg(&g, 11, &vx);
  pb_msg(&g, 12, &vy);
  return nb_model(&g, 17);
}

/* Concat of n float tensors x0..x{n-1} along axis (0..2, written as axis - 3
 * when negative_axis): x_k is [2,3,4] but 1 + k % 3 along the axis; every
 * fourth (nb_concat_is_init) is an initializer, the others graph inputs in
 * order; element j of x_k is nb_concat_value(k, j). */
static inline void nb_concat_dims(int k, int axis, int64_t *d) {
  d[0] = 2;
  d[1] = 3;
  d[2] = 4;
  d[axis] = 1 + k % 3;
}
static inline int nb_concat_is_init(int k) { return k % 4 == 3; }
static inline float nb_concat_value(int k, int64_t j) { return (float)(k * 100 + j); }

static inline pb_t nb_concat_model(int n, int axis, int negative_axis) {
  char(*names)[16] = calloc((size_t)n, sizeof *names);
  const char **in = calloc((size_t)n, sizeof *in);
  if (!names || !in) abort();
  pb_t g = {0};
  int64_t yd[3] = {2, 3, 4};
  yd[axis] = 0;
  for (int k = 0; k < n; k++) {
    int64_t d[3];
    nb_concat_dims(k, axis, d);
    yd[axis] += d[axis];
    snprintf(names[k], sizeof names[k], "x%d", k);
    in[k] = names[k];
    if (nb_concat_is_init(k)) {
      float v[36]; /* at most 3 x 3 x 4 */
      int64_t cnt = d[0] * d[1] * d[2];
      for (int64_t j = 0; j < cnt; j++) v[j] = nb_concat_value(k, j);
      pb_t t = nb_tensor(names[k], 1, 3, d, v, (size_t)cnt * sizeof(float));
      pb_msg(&g, 5, &t);
    } else {
      pb_t vi = nb_value_info(names[k], 1, 3, d);
      pb_msg(&g, 11, &vi);
    }
  }
  pb_t node = nb_node("Concat", in, n, "y");
  nb_attr_int(&node, "axis", negative_axis ? axis - 3 : axis);
  pb_msg(&g, 1, &node);
  pb_t vy = nb_value_info("y", 1, 3, yd);
  pb_msg(&g, 12, &vy);
  free(names);
  free(in);
  return nb_model(&g, 17);
}

/* The expected Concat output, computed block by block: for each index
 * before the axis, each input's whole slab in turn. Returns the count. */
static inline size_t nb_concat_expect(int n, int axis, float *y) {
  size_t o = 0;
  int64_t outer = axis == 0 ? 1 : axis == 1 ? 2 : 6;
  for (int64_t a = 0; a < outer; a++)
    for (int k = 0; k < n; k++) {
      int64_t d[3];
      nb_concat_dims(k, axis, d);
      int64_t slab = axis == 0 ? d[0] * d[1] * d[2] : axis == 1 ? d[1] * d[2] : d[2];
      for (int64_t j = 0; j < slab; j++) y[o++] = nb_concat_value(k, a * slab + j);
    }
  return o;
}

/* Inputs of nb_concat_model in binding order (each malloc'ed; free them). */
static inline size_t nb_concat_inputs(int n, int axis, float **in, size_t *bytes) {
  size_t ni = 0;
  for (int k = 0; k < n; k++) {
    if (nb_concat_is_init(k)) continue;
    int64_t d[3];
    nb_concat_dims(k, axis, d);
    int64_t cnt = d[0] * d[1] * d[2];
    in[ni] = malloc((size_t)cnt * sizeof(float));
    if (!in[ni]) abort();
    for (int64_t j = 0; j < cnt; j++) in[ni][j] = nb_concat_value(k, j);
    bytes[ni++] = (size_t)cnt * sizeof(float);
  }
  return ni;
}

#endif
