/* ONNX loader: protobuf-c parse (code generated at build time from the
 * onnx.proto of libonnx-dev), operator and attribute checks, static shape
 * inference and constant folding. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn_internal.h"
#include "onnx.pb-c.h"

#define NN_MAX_ELEMENTS ((size_t)1 << 26) /* per tensor; the d=31 predecoder needs 2^22 */

void nn__set_error(cudaq_nn_error_t *err, const char *fmt, ...) {
  if (!err) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->message, sizeof err->message, fmt, ap);
  va_end(ap);
}

const char *cudaq_nn_status_str(cudaq_nn_status_t s) {
  switch (s) {
    case CUDAQ_NN_OK: return "ok";
    case CUDAQ_NN_ERR_INVALID_ARG: return "invalid argument";
    case CUDAQ_NN_ERR_IO: return "i/o error";
    case CUDAQ_NN_ERR_PARSE: return "not a valid ONNX model";
    case CUDAQ_NN_ERR_UNSUPPORTED: return "unsupported";
    case CUDAQ_NN_ERR_SHAPE: return "shape mismatch";
    case CUDAQ_NN_ERR_MODEL: return "malformed model";
    case CUDAQ_NN_ERR_NO_MEMORY: return "out of memory";
    case CUDAQ_NN_ERR_CUDA: return "CUDA error";
    case CUDAQ_NN_ERR_NO_DEVICE: return "no CUDA device";
  }
  return "unknown status";
}

size_t cudaq_nn_dtype_size(cudaq_nn_dtype_t t) {
  switch (t) {
    case CUDAQ_NN_FLOAT: return 4;
    case CUDAQ_NN_UINT8: return 1;
    case CUDAQ_NN_INT32: return 4;
    case CUDAQ_NN_INT64: return 8;
    case CUDAQ_NN_BOOL: return 1;
    case CUDAQ_NN_FLOAT16: return 2;
  }
  return 0;
}

const char *cudaq_nn_dtype_name(cudaq_nn_dtype_t t) {
  switch (t) {
    case CUDAQ_NN_FLOAT: return "float";
    case CUDAQ_NN_UINT8: return "uint8";
    case CUDAQ_NN_INT32: return "int32";
    case CUDAQ_NN_INT64: return "int64";
    case CUDAQ_NN_BOOL: return "bool";
    case CUDAQ_NN_FLOAT16: return "float16";
  }
  return "unsupported type";
}

static const char *dtype_name(int t) { return cudaq_nn_dtype_name((cudaq_nn_dtype_t)t); }

/* Element types a model may use (float16 only on the GPU, as a precision). */
static int dtype_ok(int t) {
  return t == CUDAQ_NN_FLOAT || t == CUDAQ_NN_UINT8 || t == CUDAQ_NN_INT32 ||
         t == CUDAQ_NN_INT64 || t == CUDAQ_NN_BOOL;
}

static const char *const k_op_names[NN_OP_COUNT] = {
    [NN_OP_CONV] = "Conv", [NN_OP_RELU] = "Relu", [NN_OP_GELU] = "Gelu",
    [NN_OP_SIGMOID] = "Sigmoid", [NN_OP_ERF] = "Erf", [NN_OP_ADD] = "Add",
    [NN_OP_SUB] = "Sub", [NN_OP_MUL] = "Mul", [NN_OP_DIV] = "Div",
    [NN_OP_MATMUL] = "MatMul", [NN_OP_GEMM] = "Gemm", [NN_OP_RESHAPE] = "Reshape",
    [NN_OP_TRANSPOSE] = "Transpose", [NN_OP_SQUEEZE] = "Squeeze",
    [NN_OP_UNSQUEEZE] = "Unsqueeze", [NN_OP_CONCAT] = "Concat", [NN_OP_SLICE] = "Slice",
    [NN_OP_GATHER] = "Gather", [NN_OP_CAST] = "Cast", [NN_OP_GREATER] = "Greater",
    [NN_OP_LESS] = "Less", [NN_OP_EQUAL] = "Equal", [NN_OP_WHERE] = "Where",
    [NN_OP_IDENTITY] = "Identity", [NN_OP_CONSTANT] = "Constant"};

/* Attributes each operator accepts (NULL-terminated); others are refused. */
static const char *const k_attrs_conv[] = {"auto_pad", "dilations", "group", "kernel_shape",
                                           "pads", "strides", NULL};
static const char *const k_attrs_gemm[] = {"alpha", "beta", "transA", "transB", NULL};
static const char *const k_attrs_gelu[] = {"approximate", NULL};
static const char *const k_attrs_reshape[] = {"allowzero", NULL};
static const char *const k_attrs_perm[] = {"perm", NULL};
static const char *const k_attrs_axis[] = {"axis", NULL};
static const char *const k_attrs_cast[] = {"to", "saturate", NULL};
static const char *const k_attrs_const[] = {"value", "value_float", "value_floats",
                                            "value_int", "value_ints", NULL};
static const char *const k_attrs_none[] = {NULL};

static const char *const *op_attrs(nn_op_t op) {
  switch (op) {
    case NN_OP_CONV: return k_attrs_conv;
    case NN_OP_GEMM: return k_attrs_gemm;
    case NN_OP_GELU: return k_attrs_gelu;
    case NN_OP_RESHAPE: return k_attrs_reshape;
    case NN_OP_TRANSPOSE: return k_attrs_perm;
    case NN_OP_CONCAT:
    case NN_OP_GATHER: return k_attrs_axis;
    case NN_OP_CAST: return k_attrs_cast;
    case NN_OP_CONSTANT: return k_attrs_const;
    default: return k_attrs_none;
  }
}

const char *nn__op_name(nn_op_t op) { return op < NN_OP_COUNT ? k_op_names[op] : "?"; }

int nn__is_move_op(nn_op_t op) {
  return op == NN_OP_RESHAPE || op == NN_OP_TRANSPOSE || op == NN_OP_SQUEEZE ||
         op == NN_OP_UNSQUEEZE || op == NN_OP_CONCAT || op == NN_OP_SLICE ||
         op == NN_OP_GATHER || op == NN_OP_IDENTITY;
}

int nn__is_elementwise_op(nn_op_t op) {
  return op == NN_OP_RELU || op == NN_OP_GELU || op == NN_OP_SIGMOID || op == NN_OP_ERF ||
         op == NN_OP_ADD || op == NN_OP_SUB || op == NN_OP_MUL || op == NN_OP_DIV ||
         op == NN_OP_GREATER || op == NN_OP_LESS || op == NN_OP_EQUAL || op == NN_OP_WHERE ||
         op == NN_OP_CAST;
}

/* ------------------------------------------------------------------------ */
/* Loader state                                                              */

typedef struct loader {
  cudaq_nn_model_t *m;
  size_t cap_values;
  int *table;        /* open-addressing hash of value names -> index, -1 empty */
  size_t table_cap;  /* power of two */
  cudaq_nn_error_t *err;
  char where[160];   /* "node 'x' (Conv)" for messages */
} loader_t;

static uint64_t fnv1a(const void *p, size_t n) {
  const uint8_t *b = p;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

static int find_value(const loader_t *L, const char *name) {
  if (L->table_cap == 0) return -1;
  size_t mask = L->table_cap - 1;
  for (size_t i = fnv1a(name, strlen(name)) & mask;; i = (i + 1) & mask) {
    int v = L->table[i];
    if (v < 0) return -1;
    if (strcmp(L->m->values[v].name, name) == 0) return v;
  }
}

static cudaq_nn_status_t table_insert(loader_t *L, int v) {
  if ((L->m->n_values + 1) * 2 > L->table_cap) {
    size_t cap = L->table_cap ? L->table_cap * 2 : 64;
    int *t = malloc(cap * sizeof *t);
    if (!t) return CUDAQ_NN_ERR_NO_MEMORY;
    for (size_t i = 0; i < cap; i++) t[i] = -1;
    free(L->table);
    L->table = t;
    L->table_cap = cap;
    for (int i = 0; i < v; i++) { /* rehash all earlier values */
      size_t j = fnv1a(L->m->values[i].name, strlen(L->m->values[i].name)) & (cap - 1);
      while (t[j] >= 0) j = (j + 1) & (cap - 1);
      t[j] = i;
    }
  }
  size_t mask = L->table_cap - 1;
  size_t j = fnv1a(L->m->values[v].name, strlen(L->m->values[v].name)) & mask;
  while (L->table[j] >= 0) j = (j + 1) & mask;
  L->table[j] = v;
  return CUDAQ_NN_OK;
}

/* Adds a new, not yet known value named name; -1 with err set on failure. */
static int add_value(loader_t *L, const char *name, cudaq_nn_status_t *st) {
  if (!name || !*name) {
    nn__set_error(L->err, "%s: a tensor has an empty name", L->where);
    *st = CUDAQ_NN_ERR_MODEL;
    return -1;
  }
  if (find_value(L, name) >= 0) {
    nn__set_error(L->err, "%s: tensor '%s' is defined twice", L->where, name);
    *st = CUDAQ_NN_ERR_MODEL;
    return -1;
  }
  cudaq_nn_model_t *m = L->m;
  if (m->n_values == L->cap_values) {
    size_t cap = L->cap_values ? L->cap_values * 2 : 32;
    nn_value_t *nv = realloc(m->values, cap * sizeof *nv);
    if (!nv) { *st = CUDAQ_NN_ERR_NO_MEMORY; return -1; }
    m->values = nv;
    L->cap_values = cap;
  }
  nn_value_t *v = &m->values[m->n_values];
  memset(v, 0, sizeof *v);
  v->name = strdup(name);
  if (!v->name) { *st = CUDAQ_NN_ERR_NO_MEMORY; return -1; }
  int idx = (int)m->n_values++;
  if ((*st = table_insert(L, idx)) != CUDAQ_NN_OK) return -1;
  return idx;
}

/* Sets rank/dims/n of v; refuses too many elements. */
static cudaq_nn_status_t set_shape(loader_t *L, nn_value_t *v, int rank, const int64_t *dims) {
  if (rank > CUDAQ_NN_MAX_RANK) {
    nn__set_error(L->err, "%s: tensor '%s' has rank %d (at most %d supported)", L->where,
                  v->name, rank, CUDAQ_NN_MAX_RANK);
    return CUDAQ_NN_ERR_UNSUPPORTED;
  }
  size_t n = 1;
  for (int i = 0; i < rank; i++) {
    if (dims[i] < 0) {
      nn__set_error(L->err, "%s: tensor '%s' has a negative dimension", L->where, v->name);
      return CUDAQ_NN_ERR_SHAPE;
    }
    if (dims[i] > 0 && n > NN_MAX_ELEMENTS / (size_t)dims[i]) {
      nn__set_error(L->err, "%s: tensor '%s' is too large (more than %zu elements)", L->where,
                    v->name, NN_MAX_ELEMENTS);
      return CUDAQ_NN_ERR_UNSUPPORTED;
    }
    n *= (size_t)dims[i];
    v->dims[i] = dims[i];
  }
  v->rank = rank;
  v->n = n;
  v->known = 1;
  return CUDAQ_NN_OK;
}

static int64_t const_i64(const nn_value_t *v, size_t i) {
  if (v->dtype == CUDAQ_NN_INT64) return ((const int64_t *)v->data)[i];
  return ((const int32_t *)v->data)[i];
}

/* Reads a TensorProto (initializer or Constant value) into value v. */
static cudaq_nn_status_t read_tensor(loader_t *L, const Onnx__TensorProto *t, nn_value_t *v) {
  if ((t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) ||
      t->n_external_data > 0) {
    nn__set_error(L->err, "%s: tensor '%s' uses external data (weights must be embedded)",
                  L->where, v->name);
    return CUDAQ_NN_ERR_UNSUPPORTED;
  }
  if (!t->has_data_type || !dtype_ok(t->data_type)) {
    nn__set_error(L->err, "%s: tensor '%s' has element type %d (%s), not supported", L->where,
                  v->name, t->has_data_type ? t->data_type : 0,
                  dtype_name(t->has_data_type ? t->data_type : 0));
    return CUDAQ_NN_ERR_UNSUPPORTED;
  }
  v->dtype = (cudaq_nn_dtype_t)t->data_type;
  if (t->n_dims > CUDAQ_NN_MAX_RANK) {
    nn__set_error(L->err, "%s: tensor '%s' has rank %zu (at most %d supported)", L->where,
                  v->name, t->n_dims, CUDAQ_NN_MAX_RANK);
    return CUDAQ_NN_ERR_UNSUPPORTED;
  }
  cudaq_nn_status_t st = set_shape(L, v, (int)t->n_dims, t->dims);
  if (st) return st;
  size_t es = cudaq_nn_dtype_size(v->dtype);
  v->data = calloc(v->n ? v->n : 1, es);
  if (!v->data) return CUDAQ_NN_ERR_NO_MEMORY;
  size_t have = 0;
  if (t->has_raw_data) {
    if (t->raw_data.len != v->n * es) goto bad_size;
    if (v->n) memcpy(v->data, t->raw_data.data, v->n * es);
    return CUDAQ_NN_OK;
  }
  switch (v->dtype) {
    case CUDAQ_NN_FLOAT:
      have = t->n_float_data;
      if (have != v->n) goto bad_size;
      if (v->n) memcpy(v->data, t->float_data, v->n * 4);
      break;
    case CUDAQ_NN_INT64:
      have = t->n_int64_data;
      if (have != v->n) goto bad_size;
      if (v->n) memcpy(v->data, t->int64_data, v->n * 8);
      break;
    default: /* int32, uint8, bool are stored in int32_data */
      have = t->n_int32_data;
      if (have != v->n) goto bad_size;
      for (size_t i = 0; i < v->n; i++) {
        if (v->dtype == CUDAQ_NN_INT32) ((int32_t *)v->data)[i] = t->int32_data[i];
        else ((uint8_t *)v->data)[i] = (uint8_t)t->int32_data[i];
      }
  }
  return CUDAQ_NN_OK;
bad_size:
  nn__set_error(L->err, "%s: tensor '%s' holds the wrong amount of data for its %zu elements",
                L->where, v->name, v->n);
  return CUDAQ_NN_ERR_MODEL;
}

/* Declared type of a graph input/output: element type and shape, with a
 * symbolic leading (batch) dimension pinned to 1. */
static cudaq_nn_status_t declared_type(loader_t *L, const Onnx__ValueInfoProto *vi, int *dtype,
                                       int *rank, int64_t *dims) {
  const char *name = vi->name ? vi->name : "";
  if (!vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ||
      !vi->type->tensor_type) {
    nn__set_error(L->err, "graph input/output '%s' is not a tensor", name);
    return CUDAQ_NN_ERR_UNSUPPORTED;
  }
  const Onnx__TypeProto__Tensor *tt = vi->type->tensor_type;
  *dtype = tt->has_elem_type ? tt->elem_type : 0;
  if (!dtype_ok(*dtype)) {
    nn__set_error(L->err, "graph input/output '%s' has element type %d (%s), not supported",
                  name, *dtype, dtype_name(*dtype));
    return CUDAQ_NN_ERR_UNSUPPORTED;
  }
  if (!tt->shape) {
    nn__set_error(L->err, "graph input/output '%s' has no shape (static shapes required)", name);
    return CUDAQ_NN_ERR_UNSUPPORTED;
  }
  if (tt->shape->n_dim > CUDAQ_NN_MAX_RANK) {
    nn__set_error(L->err, "graph input/output '%s' has rank %zu (at most %d supported)", name,
                  tt->shape->n_dim, CUDAQ_NN_MAX_RANK);
    return CUDAQ_NN_ERR_UNSUPPORTED;
  }
  *rank = (int)tt->shape->n_dim;
  for (int i = 0; i < *rank; i++) {
    const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
    if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && d->dim_value >= 0) {
      dims[i] = d->dim_value;
    } else if (i == 0) {
      dims[i] = 1; /* dynamic batch pinned to 1 */
    } else {
      nn__set_error(L->err,
                    "graph input/output '%s' has a symbolic dimension %d (only the batch, "
                    "dimension 0, may be dynamic)",
                    name, i);
      return CUDAQ_NN_ERR_UNSUPPORTED;
    }
  }
  return CUDAQ_NN_OK;
}

/* ------------------------------------------------------------------------ */
/* Attributes                                                                */

static const Onnx__AttributeProto *attr(const Onnx__NodeProto *n, const char *name) {
  for (size_t i = 0; i < n->n_attribute; i++)
    if (n->attribute[i]->name && strcmp(n->attribute[i]->name, name) == 0) return n->attribute[i];
  return NULL;
}

static int64_t attr_int(const Onnx__NodeProto *n, const char *name, int64_t def) {
  const Onnx__AttributeProto *a = attr(n, name);
  return a && a->has_i ? a->i : def;
}

static float attr_float(const Onnx__NodeProto *n, const char *name, float def) {
  const Onnx__AttributeProto *a = attr(n, name);
  return a && a->has_f ? a->f : def;
}

/* Copies an INTS attribute into out (at most max); returns its length or -1
 * when absent, -2 when longer than max. */
static int attr_ints(const Onnx__NodeProto *n, const char *name, int64_t *out, int max) {
  const Onnx__AttributeProto *a = attr(n, name);
  if (!a) return -1;
  if (a->n_ints > (size_t)max) return -2;
  for (size_t i = 0; i < a->n_ints; i++) out[i] = a->ints[i];
  return (int)a->n_ints;
}

static int attr_str_is(const Onnx__NodeProto *n, const char *name, const char *val) {
  const Onnx__AttributeProto *a = attr(n, name);
  if (!a || !a->has_s) return 0;
  return a->s.len == strlen(val) && memcmp(a->s.data, val, a->s.len) == 0;
}

/* ------------------------------------------------------------------------ */
/* Shape inference                                                           */

#define IN(k) (&m->values[node->in[k]])
#define OUT(k) (&m->values[node->out[k]])

static cudaq_nn_status_t need_dtype(loader_t *L, const nn_value_t *v, unsigned mask) {
  if (mask & (1u << v->dtype)) return CUDAQ_NN_OK;
  nn__set_error(L->err, "%s: input '%s' has element type %s, not supported by this operator",
                L->where, v->name, dtype_name(v->dtype));
  return CUDAQ_NN_ERR_UNSUPPORTED;
}
#define M_F (1u << CUDAQ_NN_FLOAT)
#define M_NUM ((1u << CUDAQ_NN_FLOAT) | (1u << CUDAQ_NN_INT32) | (1u << CUDAQ_NN_INT64) | (1u << CUDAQ_NN_UINT8))
#define M_IDX ((1u << CUDAQ_NN_INT32) | (1u << CUDAQ_NN_INT64))
#define M_ALL (M_NUM | (1u << CUDAQ_NN_BOOL))

static cudaq_nn_status_t need_const(loader_t *L, const nn_value_t *v, const char *what) {
  if (v->data) return CUDAQ_NN_OK;
  nn__set_error(L->err, "%s: the %s input '%s' must be a constant", L->where, what, v->name);
  return CUDAQ_NN_ERR_UNSUPPORTED;
}

static cudaq_nn_status_t broadcast(loader_t *L, const nn_node_t *node, cudaq_nn_model_t *m,
                                   int first, int count, int *rank, int64_t *dims) {
  *rank = 0;
  for (int k = first; k < first + count; k++) if (IN(k)->rank > *rank) *rank = IN(k)->rank;
  for (int d = 0; d < *rank; d++) dims[d] = 1;
  for (int k = first; k < first + count; k++) {
    const nn_value_t *v = IN(k);
    for (int d = 0; d < v->rank; d++) {
      int od = *rank - v->rank + d;
      int64_t a = dims[od], b = v->dims[d];
      if (a == b || b == 1) continue;
      if (a == 1) { dims[od] = b; continue; }
      nn__set_error(L->err, "%s: shapes of '%s' and the other inputs do not broadcast (dimension %d: %lld vs %lld)",
                    L->where, v->name, od, (long long)a, (long long)b);
      return CUDAQ_NN_ERR_SHAPE;
    }
  }
  return CUDAQ_NN_OK;
}

static cudaq_nn_status_t infer_conv(loader_t *L, const Onnx__NodeProto *pn, nn_node_t *node,
                                    cudaq_nn_model_t *m, int *rank, int64_t *dims) {
  cudaq_nn_status_t st;
  if (node->n_in < 2) {
    nn__set_error(L->err, "%s: needs inputs X and W", L->where);
    return CUDAQ_NN_ERR_MODEL;
  }
  const nn_value_t *x = IN(0), *w = IN(1);
  if ((st = need_dtype(L, x, M_F)) || (st = need_dtype(L, w, M_F))) return st;
  if (attr_int(pn, "group", 1) != 1) {
    nn__set_error(L->err, "%s: attribute 'group' = %lld not supported (groups 1 only)", L->where,
                  (long long)attr_int(pn, "group", 1));
    return CUDAQ_NN_ERR_UNSUPPORTED;
  }
  int nsp = x->rank - 2;
  if (nsp < 1 || nsp > 3) {
    nn__set_error(L->err, "%s: input rank %d (1D, 2D or 3D convolutions only)", L->where, x->rank);
    return CUDAQ_NN_ERR_UNSUPPORTED;
  }
  if (w->rank != x->rank || w->dims[1] != x->dims[1]) {
    nn__set_error(L->err, "%s: weight '%s' does not match the input channels (%lld)", L->where,
                  w->name, (long long)x->dims[1]);
    return CUDAQ_NN_ERR_SHAPE;
  }
  if (node->n_in > 2 && node->in[2] >= 0) {
    const nn_value_t *b = IN(2);
    if ((st = need_dtype(L, b, M_F))) return st;
    if (b->rank != 1 || b->dims[0] != w->dims[0]) {
      nn__set_error(L->err, "%s: bias '%s' must have %lld elements", L->where, b->name,
                    (long long)w->dims[0]);
      return CUDAQ_NN_ERR_SHAPE;
    }
  }
  int64_t ks[3], strides[3], dil[3], pads[6];
  int nk = attr_ints(pn, "kernel_shape", ks, 3), ns = attr_ints(pn, "strides", strides, 3);
  int nd = attr_ints(pn, "dilations", dil, 3), np = attr_ints(pn, "pads", pads, 6);
  if ((nk >= 0 && nk != nsp) || (ns >= 0 && ns != nsp) || (nd >= 0 && nd != nsp) ||
      (np >= 0 && np != 2 * nsp) || nk == -2 || ns == -2 || nd == -2 || np == -2) {
    nn__set_error(L->err, "%s: kernel_shape/strides/dilations/pads do not match %d spatial dims",
                  L->where, nsp);
    return CUDAQ_NN_ERR_SHAPE;
  }
  int same_upper = attr_str_is(pn, "auto_pad", "SAME_UPPER");
  int same_lower = attr_str_is(pn, "auto_pad", "SAME_LOWER");
  int valid = attr_str_is(pn, "auto_pad", "VALID");
  if (attr(pn, "auto_pad") && !same_upper && !same_lower && !valid && !attr_str_is(pn, "auto_pad", "NOTSET")) {
    nn__set_error(L->err, "%s: attribute 'auto_pad' has an unknown value", L->where);
    return CUDAQ_NN_ERR_UNSUPPORTED;
  }
  nn_conv_attr_t *c = &node->conv;
  c->nsp = nsp;
  dims[0] = x->dims[0];
  dims[1] = w->dims[0];
  *rank = x->rank;
  for (int i = 0; i < 3; i++) {
    c->k[i] = 1; c->stride[i] = 1; c->dil[i] = 1; c->pad0[i] = 0; c->pad1[i] = 0;
  }
  for (int s = 0; s < nsp; s++) {
    int i = 3 - nsp + s;
    int64_t in = x->dims[2 + s];
    c->k[i] = w->dims[2 + s];
    if (nk >= 0 && ks[s] != c->k[i]) {
      nn__set_error(L->err, "%s: kernel_shape does not match the weight shape", L->where);
      return CUDAQ_NN_ERR_SHAPE;
    }
    c->stride[i] = ns >= 0 ? strides[s] : 1;
    c->dil[i] = nd >= 0 ? dil[s] : 1;
    if (c->stride[i] < 1 || c->dil[i] < 1 || c->stride[i] > 1024 || c->dil[i] > 1024) {
      nn__set_error(L->err, "%s: strides and dilations must be in 1..1024", L->where);
      return CUDAQ_NN_ERR_UNSUPPORTED;
    }
    int64_t ext = (c->k[i] - 1) * c->dil[i] + 1;
    if (same_upper || same_lower) {
      int64_t o = (in + c->stride[i] - 1) / c->stride[i];
      int64_t total = (o - 1) * c->stride[i] + ext - in;
      if (total < 0) total = 0;
      c->pad0[i] = same_upper ? total / 2 : total - total / 2;
      c->pad1[i] = total - c->pad0[i];
    } else if (!valid && np >= 0) {
      c->pad0[i] = pads[s];
      c->pad1[i] = pads[nsp + s];
    }
    if (c->pad0[i] < 0 || c->pad1[i] < 0 || c->pad0[i] > 1024 || c->pad1[i] > 1024) {
      nn__set_error(L->err, "%s: pads must be in 0..1024", L->where);
      return CUDAQ_NN_ERR_UNSUPPORTED;
    }
    int64_t span = in + c->pad0[i] + c->pad1[i] - ext;
    if (span < 0) {
      nn__set_error(L->err, "%s: the kernel is larger than the padded input", L->where);
      return CUDAQ_NN_ERR_SHAPE;
    }
    dims[2 + s] = span / c->stride[i] + 1;
  }
  return CUDAQ_NN_OK;
}

static cudaq_nn_status_t infer_matmul(loader_t *L, nn_node_t *node, cudaq_nn_model_t *m,
                                      int *rank, int64_t *dims) {
  const nn_value_t *a = IN(0), *b = IN(1);
  cudaq_nn_status_t st;
  if ((st = need_dtype(L, a, M_F)) || (st = need_dtype(L, b, M_F))) return st;
  if (a->rank < 1 || b->rank < 1) {
    nn__set_error(L->err, "%s: MatMul of a scalar", L->where);
    return CUDAQ_NN_ERR_SHAPE;
  }
  int64_t K = a->dims[a->rank - 1];
  int64_t Kb = b->rank == 1 ? b->dims[0] : b->dims[b->rank - 2];
  if (K != Kb) {
    nn__set_error(L->err, "%s: inner dimensions differ (%lld vs %lld)", L->where, (long long)K,
                  (long long)Kb);
    return CUDAQ_NN_ERR_SHAPE;
  }
  int ba = a->rank > 2 ? a->rank - 2 : 0, bb = b->rank > 2 ? b->rank - 2 : 0;
  int br = ba > bb ? ba : bb;
  for (int d = 0; d < br; d++) {
    int64_t x = d - (br - ba) >= 0 ? a->dims[d - (br - ba)] : 1;
    int64_t y = d - (br - bb) >= 0 ? b->dims[d - (br - bb)] : 1;
    if (x != y && x != 1 && y != 1) {
      nn__set_error(L->err, "%s: batch dimensions do not broadcast", L->where);
      return CUDAQ_NN_ERR_SHAPE;
    }
    dims[d] = x == 1 ? y : x;
  }
  *rank = br;
  if (a->rank >= 2) dims[(*rank)++] = a->dims[a->rank - 2];
  if (b->rank >= 2) dims[(*rank)++] = b->dims[b->rank - 1];
  return CUDAQ_NN_OK;
}

static cudaq_nn_status_t infer_gemm(loader_t *L, const Onnx__NodeProto *pn, nn_node_t *node,
                                    cudaq_nn_model_t *m, int *rank, int64_t *dims) {
  const nn_value_t *a = IN(0), *b = IN(1);
  cudaq_nn_status_t st;
  if ((st = need_dtype(L, a, M_F)) || (st = need_dtype(L, b, M_F))) return st;
  node->alpha = attr_float(pn, "alpha", 1.0f);
  node->beta = attr_float(pn, "beta", 1.0f);
  node->trans_a = attr_int(pn, "transA", 0) != 0;
  node->trans_b = attr_int(pn, "transB", 0) != 0;
  if (a->rank != 2 || b->rank != 2) {
    nn__set_error(L->err, "%s: Gemm needs 2-D A and B", L->where);
    return CUDAQ_NN_ERR_SHAPE;
  }
  int64_t M = node->trans_a ? a->dims[1] : a->dims[0], K = node->trans_a ? a->dims[0] : a->dims[1];
  int64_t Kb = node->trans_b ? b->dims[1] : b->dims[0], N = node->trans_b ? b->dims[0] : b->dims[1];
  if (K != Kb) {
    nn__set_error(L->err, "%s: inner dimensions differ (%lld vs %lld)", L->where, (long long)K,
                  (long long)Kb);
    return CUDAQ_NN_ERR_SHAPE;
  }
  *rank = 2;
  dims[0] = M;
  dims[1] = N;
  if (node->n_in > 2 && node->in[2] >= 0) {
    const nn_value_t *c = IN(2);
    if ((st = need_dtype(L, c, M_F))) return st;
    for (int d = 0; d < c->rank; d++) {
      int od = 2 - c->rank + d;
      if (c->rank > 2 || (c->dims[d] != 1 && c->dims[d] != dims[od])) {
        nn__set_error(L->err, "%s: C does not broadcast to (%lld, %lld)", L->where, (long long)M,
                      (long long)N);
        return CUDAQ_NN_ERR_SHAPE;
      }
    }
  }
  return CUDAQ_NN_OK;
}

static cudaq_nn_status_t infer_reshape(loader_t *L, const Onnx__NodeProto *pn, nn_node_t *node,
                                       cudaq_nn_model_t *m, int *rank, int64_t *dims) {
  const nn_value_t *x = IN(0), *s = IN(1);
  cudaq_nn_status_t st;
  if ((st = need_const(L, s, "shape")) || (st = need_dtype(L, s, M_IDX))) return st;
  if (s->rank != 1 || s->n > CUDAQ_NN_MAX_RANK) {
    nn__set_error(L->err, "%s: shape must be 1-D with at most %d entries", L->where, CUDAQ_NN_MAX_RANK);
    return CUDAQ_NN_ERR_UNSUPPORTED;
  }
  int allowzero = attr_int(pn, "allowzero", 0) != 0;
  int infer = -1;
  size_t known = 1;
  *rank = (int)s->n;
  for (int i = 0; i < *rank; i++) {
    int64_t d = const_i64(s, (size_t)i);
    if (d == 0 && !allowzero) {
      if (i >= x->rank) goto bad;
      d = x->dims[i];
    }
    if (d == -1) {
      if (infer >= 0) goto bad;
      infer = i;
      d = 1;
    } else if (d < 0) {
      goto bad;
    }
    dims[i] = d;
    if (d > 0 && known > NN_MAX_ELEMENTS / (size_t)d) goto bad;
    known *= (size_t)d;
  }
  if (infer >= 0) {
    if (known == 0 || x->n % known) goto bad;
    dims[infer] = (int64_t)(x->n / known);
    known = x->n;
  }
  if (known != x->n) goto bad;
  return CUDAQ_NN_OK;
bad:
  nn__set_error(L->err, "%s: cannot reshape '%s' (%zu elements) to the given shape", L->where,
                x->name, x->n);
  return CUDAQ_NN_ERR_SHAPE;
}

/* Reads a constant axes list and normalizes it against rank r. */
static cudaq_nn_status_t read_axes(loader_t *L, const nn_value_t *a, int r, int *axes, int *n) {
  cudaq_nn_status_t st;
  if ((st = need_const(L, a, "axes")) || (st = need_dtype(L, a, M_IDX))) return st;
  if (a->rank > 1 || a->n > CUDAQ_NN_MAX_RANK) {
    nn__set_error(L->err, "%s: bad axes", L->where);
    return CUDAQ_NN_ERR_SHAPE;
  }
  *n = (int)a->n;
  for (int i = 0; i < *n; i++) {
    int64_t x = const_i64(a, (size_t)i);
    if (x < -r || x >= r) {
      nn__set_error(L->err, "%s: axis %lld out of range for rank %d", L->where, (long long)x, r);
      return CUDAQ_NN_ERR_SHAPE;
    }
    axes[i] = (int)(x < 0 ? x + r : x);
    for (int j = 0; j < i; j++)
      if (axes[j] == axes[i]) {
        nn__set_error(L->err, "%s: repeated axis", L->where);
        return CUDAQ_NN_ERR_SHAPE;
      }
  }
  return CUDAQ_NN_OK;
}

static cudaq_nn_status_t infer_slice(loader_t *L, nn_node_t *node, cudaq_nn_model_t *m, int *rank,
                                     int64_t *dims) {
  const nn_value_t *x = IN(0);
  cudaq_nn_status_t st;
  if (node->n_in < 3) {
    nn__set_error(L->err, "%s: needs starts and ends", L->where);
    return CUDAQ_NN_ERR_MODEL;
  }
  const nn_value_t *sv = IN(1), *ev = IN(2);
  if ((st = need_const(L, sv, "starts")) || (st = need_const(L, ev, "ends")) ||
      (st = need_dtype(L, sv, M_IDX)) || (st = need_dtype(L, ev, M_IDX)))
    return st;
  int r = x->rank, axes[CUDAQ_NN_MAX_RANK], na = (int)sv->n;
  if (sv->rank != 1 || ev->rank != 1 || sv->n != ev->n || sv->n > (size_t)r) {
    nn__set_error(L->err, "%s: starts and ends must be 1-D of equal length <= rank", L->where);
    return CUDAQ_NN_ERR_SHAPE;
  }
  if (node->n_in > 3 && node->in[3] >= 0) {
    int n2;
    if ((st = read_axes(L, IN(3), r, axes, &n2))) return st;
    if (n2 != na) {
      nn__set_error(L->err, "%s: axes length differs from starts", L->where);
      return CUDAQ_NN_ERR_SHAPE;
    }
  } else {
    for (int i = 0; i < na; i++) axes[i] = i;
  }
  const nn_value_t *stp = node->n_in > 4 && node->in[4] >= 0 ? IN(4) : NULL;
  if (stp && ((st = need_const(L, stp, "steps")) || (st = need_dtype(L, stp, M_IDX)))) return st;
  if (stp && (stp->rank != 1 || stp->n != sv->n)) {
    nn__set_error(L->err, "%s: steps length differs from starts", L->where);
    return CUDAQ_NN_ERR_SHAPE;
  }
  *rank = r;
  for (int d = 0; d < r; d++) {
    node->start[d] = 0;
    node->step[d] = 1;
    dims[d] = x->dims[d];
  }
  for (int i = 0; i < na; i++) {
    int d = axes[i];
    int64_t n = x->dims[d], s = const_i64(sv, (size_t)i), e = const_i64(ev, (size_t)i);
    int64_t step = stp ? const_i64(stp, (size_t)i) : 1;
    if (step == 0) {
      nn__set_error(L->err, "%s: step 0", L->where);
      return CUDAQ_NN_ERR_SHAPE;
    }
    /* Steps beyond the dimension select at most one element either way;
     * clamping them keeps the arithmetic below free of overflow. */
    if (step > n + 1) step = n + 1;
    if (step < -(n + 1)) step = -(n + 1);
    if (s < 0) s += n;
    if (e < 0) e += n;
    int64_t len;
    if (step > 0) {
      s = s < 0 ? 0 : (s > n ? n : s);
      e = e < 0 ? 0 : (e > n ? n : e);
      len = e > s ? (e - s + step - 1) / step : 0;
    } else {
      s = s < 0 ? -1 : (s > n - 1 ? n - 1 : s);
      e = e < -1 ? -1 : (e > n - 1 ? n - 1 : e);
      len = s > e ? (s - e + (-step) - 1) / (-step) : 0;
    }
    node->start[d] = s;
    node->step[d] = step;
    dims[d] = len;
  }
  return CUDAQ_NN_OK;
}

static cudaq_nn_status_t infer_gather(loader_t *L, const Onnx__NodeProto *pn, nn_node_t *node,
                                      cudaq_nn_model_t *m, int *rank, int64_t *dims) {
  const nn_value_t *x = IN(0), *ix = IN(1);
  cudaq_nn_status_t st;
  if ((st = need_const(L, ix, "indices")) || (st = need_dtype(L, ix, M_IDX))) return st;
  int64_t axis = attr_int(pn, "axis", 0);
  if (axis < -x->rank || axis >= x->rank) {
    nn__set_error(L->err, "%s: axis %lld out of range", L->where, (long long)axis);
    return CUDAQ_NN_ERR_SHAPE;
  }
  node->axis = (int)(axis < 0 ? axis + x->rank : axis);
  int64_t n = x->dims[node->axis];
  for (size_t i = 0; i < ix->n; i++) {
    int64_t v = const_i64(ix, i);
    if (v < -n || v >= n) {
      nn__set_error(L->err, "%s: index %lld out of range [-%lld, %lld)", L->where, (long long)v,
                    (long long)n, (long long)n);
      return CUDAQ_NN_ERR_SHAPE;
    }
  }
  *rank = x->rank - 1 + ix->rank;
  if (*rank > CUDAQ_NN_MAX_RANK) {
    nn__set_error(L->err, "%s: output rank too large", L->where);
    return CUDAQ_NN_ERR_UNSUPPORTED;
  }
  int o = 0;
  for (int d = 0; d < node->axis; d++) dims[o++] = x->dims[d];
  for (int d = 0; d < ix->rank; d++) dims[o++] = ix->dims[d];
  for (int d = node->axis + 1; d < x->rank; d++) dims[o++] = x->dims[d];
  return CUDAQ_NN_OK;
}

static cudaq_nn_status_t infer_constant(loader_t *L, const Onnx__NodeProto *pn, nn_node_t *node,
                                        cudaq_nn_model_t *m) {
  nn_value_t *v = OUT(0);
  const Onnx__AttributeProto *a;
  if (pn->n_attribute != 1) {
    nn__set_error(L->err, "%s: Constant needs exactly one value attribute", L->where);
    return CUDAQ_NN_ERR_MODEL;
  }
  if ((a = attr(pn, "value")) && a->t) return read_tensor(L, a->t, v);
  int64_t one = 1;
  if ((a = attr(pn, "value_float")) && a->has_f) {
    v->dtype = CUDAQ_NN_FLOAT;
    set_shape(L, v, 0, &one);
    if (!(v->data = malloc(4))) return CUDAQ_NN_ERR_NO_MEMORY;
    *(float *)v->data = a->f;
    return CUDAQ_NN_OK;
  }
  if ((a = attr(pn, "value_int")) && a->has_i) {
    v->dtype = CUDAQ_NN_INT64;
    set_shape(L, v, 0, &one);
    if (!(v->data = malloc(8))) return CUDAQ_NN_ERR_NO_MEMORY;
    *(int64_t *)v->data = a->i;
    return CUDAQ_NN_OK;
  }
  if ((a = attr(pn, "value_floats")) || (a = attr(pn, "value_ints"))) {
    int is_f = strcmp(a->name, "value_floats") == 0;
    int64_t n = (int64_t)(is_f ? a->n_floats : a->n_ints);
    v->dtype = is_f ? CUDAQ_NN_FLOAT : CUDAQ_NN_INT64;
    cudaq_nn_status_t st = set_shape(L, v, 1, &n);
    if (st) return st;
    if (!(v->data = calloc(v->n ? v->n : 1, is_f ? 4 : 8))) return CUDAQ_NN_ERR_NO_MEMORY;
    if (v->n) memcpy(v->data, is_f ? (void *)a->floats : (void *)a->ints, v->n * (is_f ? 4 : 8));
    return CUDAQ_NN_OK;
  }
  nn__set_error(L->err, "%s: Constant without a supported value attribute", L->where);
  return CUDAQ_NN_ERR_UNSUPPORTED;
}

static int input_count_ok(nn_op_t op, int n) {
  switch (op) {
    case NN_OP_CONV: return n >= 2 && n <= 3;
    case NN_OP_GEMM: return n >= 2 && n <= 3;
    case NN_OP_SLICE: return n >= 3 && n <= 5;
    case NN_OP_SQUEEZE: return n >= 1 && n <= 2;
    case NN_OP_CONSTANT: return n == 0;
    case NN_OP_CONCAT: return n >= 1 && n <= NN_MAX_IO;
    case NN_OP_WHERE: return n == 3;
    case NN_OP_RELU: case NN_OP_GELU: case NN_OP_SIGMOID: case NN_OP_ERF:
    case NN_OP_TRANSPOSE: case NN_OP_CAST: case NN_OP_IDENTITY: return n == 1;
    default: return n == 2;
  }
}

/* Infers the single output of a node (dtype and shape). */
static cudaq_nn_status_t infer_node(loader_t *L, const Onnx__NodeProto *pn, nn_node_t *node) {
  cudaq_nn_model_t *m = L->m;
  nn_value_t *out = OUT(0);
  int rank = 0;
  int64_t dims[CUDAQ_NN_MAX_RANK] = {0};
  cudaq_nn_status_t st = CUDAQ_NN_OK;
  for (int k = 0; k < node->n_in; k++) {
    if (node->in[k] < 0 && !((node->op == NN_OP_CONV || node->op == NN_OP_GEMM) && k == 2) &&
        !(node->op == NN_OP_SLICE && k >= 3) && !(node->op == NN_OP_SQUEEZE && k == 1)) {
      nn__set_error(L->err, "%s: required input %d is empty", L->where, k);
      return CUDAQ_NN_ERR_MODEL;
    }
  }
  cudaq_nn_dtype_t dt = node->n_in > 0 ? IN(0)->dtype : CUDAQ_NN_FLOAT;
  switch (node->op) {
    case NN_OP_CONV:
      st = infer_conv(L, pn, node, m, &rank, dims);
      break;
    case NN_OP_RELU:
      if ((st = need_dtype(L, IN(0), M_F | (1u << CUDAQ_NN_INT32) | (1u << CUDAQ_NN_INT64)))) break;
      goto same;
    case NN_OP_GELU:
      node->gelu_tanh = attr_str_is(pn, "approximate", "tanh");
      if (attr(pn, "approximate") && !node->gelu_tanh && !attr_str_is(pn, "approximate", "none")) {
        nn__set_error(L->err, "%s: attribute 'approximate' has an unknown value", L->where);
        return CUDAQ_NN_ERR_UNSUPPORTED;
      }
      /* fall through */
    case NN_OP_SIGMOID:
    case NN_OP_ERF:
      if ((st = need_dtype(L, IN(0), M_F))) break;
      /* fall through */
    case NN_OP_IDENTITY:
    same:
      rank = IN(0)->rank;
      memcpy(dims, IN(0)->dims, sizeof dims);
      break;
    case NN_OP_ADD: case NN_OP_SUB: case NN_OP_MUL: case NN_OP_DIV:
    case NN_OP_GREATER: case NN_OP_LESS: case NN_OP_EQUAL: {
      unsigned mask = node->op == NN_OP_EQUAL ? M_ALL : M_NUM;
      if ((st = need_dtype(L, IN(0), mask)) || (st = need_dtype(L, IN(1), mask))) break;
      if (IN(0)->dtype != IN(1)->dtype) {
        nn__set_error(L->err, "%s: inputs have different element types (%s, %s)", L->where,
                      dtype_name(IN(0)->dtype), dtype_name(IN(1)->dtype));
        return CUDAQ_NN_ERR_MODEL;
      }
      if (node->op >= NN_OP_GREATER) dt = CUDAQ_NN_BOOL;
      st = broadcast(L, node, m, 0, 2, &rank, dims);
      break;
    }
    case NN_OP_WHERE:
      if ((st = need_dtype(L, IN(0), 1u << CUDAQ_NN_BOOL))) break;
      if (IN(1)->dtype != IN(2)->dtype) {
        nn__set_error(L->err, "%s: X and Y have different element types", L->where);
        return CUDAQ_NN_ERR_MODEL;
      }
      dt = IN(1)->dtype;
      st = broadcast(L, node, m, 0, 3, &rank, dims);
      break;
    case NN_OP_MATMUL:
      st = infer_matmul(L, node, m, &rank, dims);
      break;
    case NN_OP_GEMM:
      st = infer_gemm(L, pn, node, m, &rank, dims);
      break;
    case NN_OP_RESHAPE:
      st = infer_reshape(L, pn, node, m, &rank, dims);
      break;
    case NN_OP_TRANSPOSE: {
      const nn_value_t *x = IN(0);
      int64_t perm[CUDAQ_NN_MAX_RANK];
      int np = attr_ints(pn, "perm", perm, CUDAQ_NN_MAX_RANK);
      if (np == -1) {
        np = x->rank;
        for (int i = 0; i < np; i++) perm[i] = x->rank - 1 - i;
      }
      if (np != x->rank) {
        nn__set_error(L->err, "%s: perm has %d entries for rank %d", L->where, np, x->rank);
        return CUDAQ_NN_ERR_SHAPE;
      }
      int seen[CUDAQ_NN_MAX_RANK] = {0};
      for (int i = 0; i < np; i++) {
        if (perm[i] < 0 || perm[i] >= np || seen[perm[i]]++) {
          nn__set_error(L->err, "%s: perm is not a permutation", L->where);
          return CUDAQ_NN_ERR_SHAPE;
        }
        node->perm[i] = (int)perm[i];
        dims[i] = x->dims[perm[i]];
      }
      rank = np;
      break;
    }
    case NN_OP_SQUEEZE: {
      const nn_value_t *x = IN(0);
      int axes[CUDAQ_NN_MAX_RANK], na = 0, drop[CUDAQ_NN_MAX_RANK] = {0};
      if (node->n_in > 1 && node->in[1] >= 0) {
        if ((st = read_axes(L, IN(1), x->rank, axes, &na))) break;
        for (int i = 0; i < na; i++) {
          if (x->dims[axes[i]] != 1) {
            nn__set_error(L->err, "%s: cannot squeeze axis %d of size %lld", L->where, axes[i],
                          (long long)x->dims[axes[i]]);
            return CUDAQ_NN_ERR_SHAPE;
          }
          drop[axes[i]] = 1;
        }
      } else {
        for (int d = 0; d < x->rank; d++) drop[d] = x->dims[d] == 1;
      }
      for (int d = 0; d < x->rank; d++) if (!drop[d]) dims[rank++] = x->dims[d];
      break;
    }
    case NN_OP_UNSQUEEZE: {
      const nn_value_t *x = IN(0);
      int axes[CUDAQ_NN_MAX_RANK], na = 0, ins[2 * CUDAQ_NN_MAX_RANK] = {0};
      if (IN(1)->n + (size_t)x->rank > CUDAQ_NN_MAX_RANK) {
        nn__set_error(L->err, "%s: output rank too large", L->where);
        return CUDAQ_NN_ERR_UNSUPPORTED;
      }
      rank = x->rank + (int)IN(1)->n;
      if ((st = read_axes(L, IN(1), rank, axes, &na))) break;
      for (int i = 0; i < na; i++) ins[axes[i]] = 1;
      for (int d = 0, k = 0; d < rank; d++) dims[d] = ins[d] ? 1 : x->dims[k++];
      break;
    }
    case NN_OP_CONCAT: {
      const nn_value_t *x = IN(0);
      int64_t axis = attr_int(pn, "axis", INT64_MIN);
      if (axis == INT64_MIN || axis < -x->rank || axis >= x->rank) {
        nn__set_error(L->err, "%s: missing or bad axis", L->where);
        return CUDAQ_NN_ERR_SHAPE;
      }
      node->axis = (int)(axis < 0 ? axis + x->rank : axis);
      rank = x->rank;
      memcpy(dims, x->dims, sizeof dims);
      for (int k = 1; k < node->n_in; k++) {
        const nn_value_t *y = IN(k);
        int ok = y->rank == x->rank && y->dtype == x->dtype;
        for (int d = 0; ok && d < rank; d++) ok = d == node->axis || y->dims[d] == x->dims[d];
        if (!ok) {
          nn__set_error(L->err, "%s: input '%s' does not match the others", L->where, y->name);
          return CUDAQ_NN_ERR_SHAPE;
        }
        dims[node->axis] += y->dims[node->axis];
      }
      break;
    }
    case NN_OP_SLICE:
      st = infer_slice(L, node, m, &rank, dims);
      break;
    case NN_OP_GATHER:
      st = infer_gather(L, pn, node, m, &rank, dims);
      break;
    case NN_OP_CAST: {
      int64_t to = attr_int(pn, "to", -1);
      if (!dtype_ok((int)to) || to != (int)to) {
        nn__set_error(L->err, "%s: cast to element type %lld (%s) not supported", L->where,
                      (long long)to, dtype_name((int)to));
        return CUDAQ_NN_ERR_UNSUPPORTED;
      }
      node->cast_to = dt = (cudaq_nn_dtype_t)to;
      goto same;
    }
    case NN_OP_CONSTANT:
      return infer_constant(L, pn, node, m);
    case NN_OP_COUNT:
      break;
  }
  if (st) return st;
  out->dtype = dt;
  return set_shape(L, out, rank, dims);
}

/* ------------------------------------------------------------------------ */
/* Nodes                                                                     */

static cudaq_nn_status_t fold_node(loader_t *L, nn_node_t *node) {
  cudaq_nn_model_t *m = L->m;
  for (int k = 0; k < node->n_in; k++)
    if (node->in[k] >= 0 && !m->values[node->in[k]].data) return CUDAQ_NN_OK;
  node->folded = 1;
  if (node->op == NN_OP_CONSTANT) return CUDAQ_NN_OK;
  nn_value_t *out = OUT(0);
  out->data = calloc(out->n ? out->n : 1, cudaq_nn_dtype_size(out->dtype));
  void **bufs = calloc(m->n_values, sizeof *bufs);
  uint8_t *src_in = NULL;
  int64_t *src_idx = NULL;
  if (nn__is_move_op(node->op)) {
    src_in = malloc(out->n ? out->n : 1);
    src_idx = malloc((out->n ? out->n : 1) * sizeof *src_idx);
  }
  cudaq_nn_status_t st = CUDAQ_NN_OK;
  if (!out->data || !bufs || (nn__is_move_op(node->op) && (!src_in || !src_idx))) {
    st = CUDAQ_NN_ERR_NO_MEMORY;
  } else {
    for (size_t i = 0; i < m->n_values; i++) bufs[i] = m->values[i].data;
    if (src_in) nn__move_map(m, node, src_in, src_idx);
    nn__cpu_exec_node(m, node, bufs, src_in, src_idx, NULL);
  }
  free(bufs);
  free(src_in);
  free(src_idx);
  return st;
}

static cudaq_nn_status_t add_node(loader_t *L, const Onnx__NodeProto *pn, size_t index) {
  cudaq_nn_model_t *m = L->m;
  const char *op_type = pn->op_type ? pn->op_type : "";
  if (pn->name && *pn->name) snprintf(L->where, sizeof L->where, "node '%.100s' (%.40s)", pn->name, op_type);
  else snprintf(L->where, sizeof L->where, "node #%zu (%.40s)", index, op_type);
  if (pn->domain && *pn->domain && strcmp(pn->domain, "ai.onnx") != 0) {
    nn__set_error(L->err, "%s: operator domain '%.60s' not supported", L->where, pn->domain);
    return CUDAQ_NN_ERR_UNSUPPORTED;
  }
  int op = -1;
  for (int i = 0; i < NN_OP_COUNT; i++)
    if (strcmp(op_type, k_op_names[i]) == 0) op = i;
  if (op < 0) {
    nn__set_error(L->err, "%s: operator '%.40s' not supported", L->where, op_type);
    return CUDAQ_NN_ERR_UNSUPPORTED;
  }
  const char *const *allowed = op_attrs((nn_op_t)op);
  for (size_t a = 0; a < pn->n_attribute; a++) {
    const char *an = pn->attribute[a]->name ? pn->attribute[a]->name : "";
    int ok = 0;
    for (int j = 0; allowed[j]; j++) ok |= strcmp(an, allowed[j]) == 0;
    if (!ok) {
      nn__set_error(L->err, "%s: attribute '%.60s' not supported", L->where, an);
      return CUDAQ_NN_ERR_UNSUPPORTED;
    }
  }
  /* Trailing empty inputs are dropped (ONNX's way to omit optional ones). */
  size_t n_in = pn->n_input;
  while (n_in > 0 && (!pn->input[n_in - 1] || !*pn->input[n_in - 1])) n_in--;
  if (!input_count_ok((nn_op_t)op, (int)n_in) || pn->n_output != 1) {
    nn__set_error(L->err, "%s: %zu inputs and %zu outputs not supported", L->where, n_in,
                  pn->n_output);
    return CUDAQ_NN_ERR_UNSUPPORTED;
  }
  nn_node_t *node = &m->nodes[m->n_nodes];
  memset(node, 0, sizeof *node);
  node->op = (nn_op_t)op;
  node->op_type = strdup(op_type);
  node->name = strdup(pn->name && *pn->name ? pn->name : "");
  if (!node->op_type || !node->name) {
    free(node->op_type);
    free(node->name);
    return CUDAQ_NN_ERR_NO_MEMORY;
  }
  m->n_nodes++;
  node->n_in = (int)n_in;
  node->n_out = 1;
  for (size_t k = 0; k < n_in; k++) {
    if (!pn->input[k] || !*pn->input[k]) {
      node->in[k] = -1;
      continue;
    }
    node->in[k] = find_value(L, pn->input[k]);
    if (node->in[k] < 0 || !m->values[node->in[k]].known) {
      nn__set_error(L->err, "%s: input '%.80s' is not produced by an earlier node, an initializer "
                    "or a graph input", L->where, pn->input[k]);
      return CUDAQ_NN_ERR_MODEL;
    }
  }
  cudaq_nn_status_t st;
  node->out[0] = add_value(L, pn->output[0], &st);
  if (node->out[0] < 0) return st;
  if ((st = infer_node(L, pn, node))) {
    m->values[node->out[0]].known = 0;
    return st;
  }
  m->values[node->out[0]].known = 1;
  return fold_node(L, node);
}

/* ------------------------------------------------------------------------ */
/* Model                                                                     */

static cudaq_nn_status_t check_opset(loader_t *L, const Onnx__ModelProto *mp) {
  int64_t v = -1;
  for (size_t i = 0; i < mp->n_opset_import; i++) {
    const Onnx__OperatorSetIdProto *o = mp->opset_import[i];
    if (!o->domain || !*o->domain || strcmp(o->domain, "ai.onnx") == 0) v = o->has_version ? o->version : 0;
  }
  if (v < 13 || v > 20) {
    if (v < 0) nn__set_error(L->err, "model imports no ONNX opset");
    else nn__set_error(L->err, "model uses opset %lld (opsets 13 to 20 supported)", (long long)v);
    return CUDAQ_NN_ERR_UNSUPPORTED;
  }
  L->m->opset = v;
  return CUDAQ_NN_OK;
}

static cudaq_nn_status_t load_graph(loader_t *L, const Onnx__GraphProto *g) {
  cudaq_nn_model_t *m = L->m;
  cudaq_nn_status_t st;
  if (g->n_sparse_initializer) {
    nn__set_error(L->err, "sparse initializers not supported");
    return CUDAQ_NN_ERR_UNSUPPORTED;
  }
  for (size_t i = 0; i < g->n_initializer; i++) {
    snprintf(L->where, sizeof L->where, "initializer #%zu", i);
    int v = add_value(L, g->initializer[i]->name, &st);
    if (v < 0) return st;
    if ((st = read_tensor(L, g->initializer[i], &m->values[v]))) return st;
  }
  if (!(m->inputs = calloc(g->n_input + 1, sizeof *m->inputs))) return CUDAQ_NN_ERR_NO_MEMORY;
  for (size_t i = 0; i < g->n_input; i++) {
    const char *name = g->input[i]->name ? g->input[i]->name : "";
    int dtype, rank;
    int64_t dims[CUDAQ_NN_MAX_RANK];
    if (find_value(L, name) >= 0 && m->values[find_value(L, name)].data) continue; /* initializer */
    snprintf(L->where, sizeof L->where, "graph input '%.100s'", name);
    if ((st = declared_type(L, g->input[i], &dtype, &rank, dims))) return st;
    int v = add_value(L, name, &st);
    if (v < 0) return st;
    m->values[v].dtype = (cudaq_nn_dtype_t)dtype;
    if ((st = set_shape(L, &m->values[v], rank, dims))) return st;
    m->inputs[m->n_inputs++] = v;
  }
  if (m->n_inputs == 0) {
    nn__set_error(L->err, "graph has no inputs");
    return CUDAQ_NN_ERR_MODEL;
  }
  if (!(m->nodes = calloc(g->n_node + 1, sizeof *m->nodes))) return CUDAQ_NN_ERR_NO_MEMORY;
  for (size_t i = 0; i < g->n_node; i++)
    if ((st = add_node(L, g->node[i], i))) return st;
  if (g->n_output == 0) {
    nn__set_error(L->err, "graph has no outputs");
    return CUDAQ_NN_ERR_MODEL;
  }
  if (!(m->outputs = calloc(g->n_output, sizeof *m->outputs))) return CUDAQ_NN_ERR_NO_MEMORY;
  for (size_t i = 0; i < g->n_output; i++) {
    const char *name = g->output[i]->name ? g->output[i]->name : "";
    int dtype, rank;
    int64_t dims[CUDAQ_NN_MAX_RANK];
    int v = find_value(L, name);
    if (v < 0 || !m->values[v].known) {
      nn__set_error(L->err, "graph output '%.100s' is not produced by any node", name);
      return CUDAQ_NN_ERR_MODEL;
    }
    if ((st = declared_type(L, g->output[i], &dtype, &rank, dims))) return st;
    const nn_value_t *val = &m->values[v];
    int same = dtype == (int)val->dtype && rank == val->rank;
    for (int d = 0; same && d < rank; d++) same = dims[d] == val->dims[d];
    if (!same) {
      char a[128] = "", b[128] = "";
      for (int d = 0; d < rank; d++) snprintf(a + strlen(a), sizeof a - strlen(a), "%s%lld", d ? "," : "", (long long)dims[d]);
      for (int d = 0; d < val->rank; d++) snprintf(b + strlen(b), sizeof b - strlen(b), "%s%lld", d ? "," : "", (long long)val->dims[d]);
      nn__set_error(L->err, "graph output '%.60s' is declared %s [%s] but computes %s [%s]", name,
                    dtype_name(dtype), a, dtype_name(val->dtype), b);
      return CUDAQ_NN_ERR_SHAPE;
    }
    m->outputs[m->n_outputs++] = v;
  }
  return CUDAQ_NN_OK;
}

void cudaq_nn_model_destroy(cudaq_nn_model_t *m) {
  if (!m) return;
  for (size_t i = 0; i < m->n_values; i++) {
    free(m->values[i].name);
    free(m->values[i].data);
  }
  for (size_t i = 0; i < m->n_nodes; i++) {
    free(m->nodes[i].name);
    free(m->nodes[i].op_type);
  }
  free(m->values);
  free(m->nodes);
  free(m->inputs);
  free(m->outputs);
  free(m);
}

cudaq_nn_status_t cudaq_nn_model_load(const void *data, size_t len, cudaq_nn_model_t **out,
                                      cudaq_nn_error_t *err) {
  if (err) err->message[0] = '\0';
  if (!data || !out) {
    nn__set_error(err, "NULL argument");
    return CUDAQ_NN_ERR_INVALID_ARG;
  }
  *out = NULL;
  Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, len, data);
  if (!mp) {
    nn__set_error(err, "not a valid ONNX model: the protobuf does not parse (bad or truncated file, %zu bytes)", len);
    return CUDAQ_NN_ERR_PARSE;
  }
  loader_t L = {.err = err};
  cudaq_nn_status_t st = CUDAQ_NN_OK;
  if (!mp->graph) {
    nn__set_error(err, "not a valid ONNX model: no graph");
    st = CUDAQ_NN_ERR_PARSE;
    goto done;
  }
  if (!(L.m = calloc(1, sizeof *L.m))) {
    st = CUDAQ_NN_ERR_NO_MEMORY;
    goto done;
  }
  if ((st = check_opset(&L, mp))) goto done;
  if ((st = load_graph(&L, mp->graph))) goto done;
  L.m->hash = fnv1a(data, len);
done:
  if (st == CUDAQ_NN_ERR_NO_MEMORY) nn__set_error(err, "out of memory while loading the model");
  onnx__model_proto__free_unpacked(mp, NULL);
  free(L.table);
  if (st) cudaq_nn_model_destroy(L.m);
  else *out = L.m;
  return st;
}

cudaq_nn_status_t cudaq_nn_model_load_file(const char *path, cudaq_nn_model_t **out,
                                           cudaq_nn_error_t *err) {
  if (err) err->message[0] = '\0';
  if (!path || !out) {
    nn__set_error(err, "NULL argument");
    return CUDAQ_NN_ERR_INVALID_ARG;
  }
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) {
    nn__set_error(err, "cannot open '%.200s'", path);
    return CUDAQ_NN_ERR_IO;
  }
  size_t cap = 1 << 16, len = 0;
  uint8_t *buf = malloc(cap);
  while (buf) {
    len += fread(buf + len, 1, cap - len, f);
    if (len < cap) break;
    uint8_t *nb = cap < ((size_t)1 << 31) ? realloc(buf, cap * 2) : NULL;
    if (!nb) { free(buf); buf = NULL; break; }
    buf = nb;
    cap *= 2;
  }
  int bad = ferror(f);
  fclose(f);
  if (!buf || bad) {
    free(buf);
    nn__set_error(err, bad ? "cannot read '%.200s'" : "'%.200s' is too large", path);
    return bad ? CUDAQ_NN_ERR_IO : CUDAQ_NN_ERR_NO_MEMORY;
  }
  cudaq_nn_status_t st = cudaq_nn_model_load(buf, len, out, err);
  free(buf);
  return st;
}

size_t cudaq_nn_model_num_inputs(const cudaq_nn_model_t *m) { return m ? m->n_inputs : 0; }
size_t cudaq_nn_model_num_outputs(const cudaq_nn_model_t *m) { return m ? m->n_outputs : 0; }
uint64_t cudaq_nn_model_hash(const cudaq_nn_model_t *m) { return m ? m->hash : 0; }

static void fill_binding(const cudaq_nn_model_t *m, int v, int is_input, cudaq_nn_binding_t *b) {
  const nn_value_t *val = &m->values[v];
  memset(b, 0, sizeof *b);
  b->name = val->name;
  b->dtype = val->dtype;
  b->rank = val->rank;
  memcpy(b->shape, val->dims, sizeof b->shape);
  b->num_elements = val->n;
  b->size_bytes = val->n * cudaq_nn_dtype_size(val->dtype);
  b->is_input = is_input;
}

cudaq_nn_status_t cudaq_nn_model_input(const cudaq_nn_model_t *m, size_t i, cudaq_nn_binding_t *b) {
  if (!m || !b || i >= m->n_inputs) return CUDAQ_NN_ERR_INVALID_ARG;
  fill_binding(m, m->inputs[i], 1, b);
  return CUDAQ_NN_OK;
}

cudaq_nn_status_t cudaq_nn_model_output(const cudaq_nn_model_t *m, size_t i, cudaq_nn_binding_t *b) {
  if (!m || !b || i >= m->n_outputs) return CUDAQ_NN_ERR_INVALID_ARG;
  fill_binding(m, m->outputs[i], 0, b);
  return CUDAQ_NN_OK;
}
