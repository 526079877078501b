/* ONNX loader: protobuf-c parse (code generated at build time from the
 * onnx.proto of libonnx-dev), tensors, graph inputs and outputs, operator
 * and attribute checks and constant folding; the shape inference of each
 * operator is in onnx_infer.c. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn_internal.h"
#include "onnx_loader.h"

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

int nn__dtype_ok(int t) {
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
/* Loader state (loader_t: onnx_loader.h)                                    */

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

cudaq_nn_status_t nn__set_shape(loader_t *L, nn_value_t *v, int rank, const int64_t *dims) {
  if (rank > CUDAQ_NN_MAX_RANK) {
    nn__set_error(L->err, "%s: tensor '%s' has rank %d (at most %d supported)", L->where,
                  v->name, rank, CUDAQ_NN_MAX_RANK);
    return CUDAQ_NN_ERR_UNSUPPORTED;
  }
  size_t n = 1;
  for (int i = 0; i < rank; i++) {
    if (dims[i] < 0) {
      nn__set_error(L->err, "%s: tensor '%.100s' has dimension %d = %lld (negative)", L->where,
                    v->name, i, (long long)dims[i]);
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

cudaq_nn_status_t nn__read_tensor(loader_t *L, const Onnx__TensorProto *t, nn_value_t *v) {
  if ((t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) ||
      t->n_external_data > 0) {
    nn__set_error(L->err, "%s: tensor '%s' uses external data (weights must be embedded)",
                  L->where, v->name);
    return CUDAQ_NN_ERR_UNSUPPORTED;
  }
  if (!t->has_data_type || !nn__dtype_ok(t->data_type)) {
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
  cudaq_nn_status_t st = nn__set_shape(L, v, (int)t->n_dims, t->dims);
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

/* "5,3,?,1" into buf: dims of a shape, -1 (symbolic or unknown) as '?'. */
static const char *fmt_dims(char *buf, size_t size, int rank, const int64_t *dims) {
  buf[0] = '\0';
  for (int d = 0; d < rank; d++) {
    size_t used = strlen(buf);
    if (dims[d] < 0) snprintf(buf + used, size - used, "%s?", d ? "," : "");
    else snprintf(buf + used, size - used, "%s%lld", d ? "," : "", (long long)dims[d]);
  }
  return buf;
}

/* Declared type of graph input/output vi (what: "graph input" or "graph
 * output"), as written: element type (0 when not given), rank (-1 without
 * a shape) and dims, -1 for a symbolic or unknown dimension. Refuses a
 * non-tensor, a rank above CUDAQ_NN_MAX_RANK and a negative dimension. */
static cudaq_nn_status_t read_declared(loader_t *L, const Onnx__ValueInfoProto *vi, const char *what,
                                       int *dtype, int *rank, int64_t *dims) {
  const char *name = vi->name ? vi->name : "";
  if (!vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ||
      !vi->type->tensor_type) {
    nn__set_error(L->err, "%s '%.100s' is not a tensor", what, name);
    return CUDAQ_NN_ERR_UNSUPPORTED;
  }
  const Onnx__TypeProto__Tensor *tt = vi->type->tensor_type;
  *dtype = tt->has_elem_type ? tt->elem_type : 0;
  *rank = -1;
  if (!tt->shape) return CUDAQ_NN_OK;
  if (tt->shape->n_dim > CUDAQ_NN_MAX_RANK) {
    nn__set_error(L->err, "%s '%.100s' has rank %zu (at most %d supported)", what, name,
                  tt->shape->n_dim, CUDAQ_NN_MAX_RANK);
    return CUDAQ_NN_ERR_UNSUPPORTED;
  }
  *rank = (int)tt->shape->n_dim;
  for (int i = 0; i < *rank; i++) {
    const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
    dims[i] = -1;
    if (d->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) continue;
    if (d->dim_value < 0) {
      nn__set_error(L->err, "%s '%.100s' declares dimension %d as %lld (negative)", what, name, i,
                    (long long)d->dim_value);
      return CUDAQ_NN_ERR_SHAPE;
    }
    dims[i] = d->dim_value;
  }
  return CUDAQ_NN_OK;
}

/* Declared type of a graph input/output the graph computes or the caller
 * binds: a supported element type and a static shape, with a symbolic
 * leading (batch) dimension pinned to 1. */
static cudaq_nn_status_t declared_type(loader_t *L, const Onnx__ValueInfoProto *vi, const char *what,
                                       int *dtype, int *rank, int64_t *dims) {
  const char *name = vi->name ? vi->name : "";
  cudaq_nn_status_t st = read_declared(L, vi, what, dtype, rank, dims);
  if (st) return st;
  if (!nn__dtype_ok(*dtype)) {
    nn__set_error(L->err, "%s '%.100s' has element type %d (%s), not supported", what, name,
                  *dtype, dtype_name(*dtype));
    return CUDAQ_NN_ERR_UNSUPPORTED;
  }
  if (*rank < 0) {
    nn__set_error(L->err, "%s '%.100s' has no shape (static shapes required)", what, name);
    return CUDAQ_NN_ERR_UNSUPPORTED;
  }
  for (int i = 0; i < *rank; i++) {
    if (dims[i] >= 0) continue;
    if (i == 0) {
      dims[i] = 1; /* dynamic batch pinned to 1 */
      continue;
    }
    nn__set_error(L->err,
                  "%s '%.100s' has a symbolic dimension %d (only the batch, dimension 0, may be "
                  "dynamic)",
                  what, name, i);
    return CUDAQ_NN_ERR_UNSUPPORTED;
  }
  return CUDAQ_NN_OK;
}

/* A graph input that names an initializer (an overridable default, which
 * we keep constant): its declared element type and shape must be the
 * initializer's, as onnxruntime requires; symbolic dimensions match any
 * size, and an element type or shape left out matches too. */
static cudaq_nn_status_t check_initializer_input(loader_t *L, const Onnx__ValueInfoProto *vi,
                                                 const nn_value_t *val) {
  int dtype, rank;
  int64_t dims[CUDAQ_NN_MAX_RANK];
  cudaq_nn_status_t st = read_declared(L, vi, "graph input", &dtype, &rank, dims);
  if (st) return st;
  int same = dtype == 0 || dtype == (int)val->dtype;
  if (rank >= 0) {
    same &= rank == val->rank;
    for (int d = 0; same && d < rank; d++) same = dims[d] < 0 || dims[d] == val->dims[d];
  }
  if (same) return CUDAQ_NN_OK;
  char t[32], a[128] = "(no shape)", b[128];
  if (!dtype) snprintf(t, sizeof t, "(no element type)");
  else if (cudaq_nn_dtype_size((cudaq_nn_dtype_t)dtype)) snprintf(t, sizeof t, "%s", dtype_name(dtype));
  else snprintf(t, sizeof t, "element type %d", dtype);
  if (rank >= 0) snprintf(a, sizeof a, "[%s]", fmt_dims(b, sizeof b, rank, dims));
  nn__set_error(L->err, "graph input '%.60s' is declared %s %s but its initializer is %s [%s]",
                val->name, t, a, dtype_name(val->dtype), fmt_dims(b, sizeof b, val->rank, val->dims));
  return CUDAQ_NN_ERR_SHAPE;
}

/* ------------------------------------------------------------------------ */
/* Nodes                                                                     */

static cudaq_nn_status_t fold_node(loader_t *L, nn_node_t *node) {
  cudaq_nn_model_t *m = L->m;
  for (int k = 0; k < node->n_in; k++)
    if (node->in[k] >= 0 && !m->values[node->in[k]].data) return CUDAQ_NN_OK;
  node->folded = 1;
  if (node->op == NN_OP_CONSTANT) return CUDAQ_NN_OK;
  nn_value_t *out = &m->values[node->out[0]];
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
  if (op == NN_OP_CONCAT && n_in > NN_MAX_NODE_INPUTS) {
    nn__set_error(L->err, "%s: %zu inputs (Concat of at most %d supported)", L->where, n_in,
                  NN_MAX_NODE_INPUTS);
    return CUDAQ_NN_ERR_UNSUPPORTED;
  }
  if (n_in > NN_MAX_NODE_INPUTS || !nn__input_count_ok((nn_op_t)op, (int)n_in) || pn->n_output != 1) {
    nn__set_error(L->err, "%s: %zu inputs and %zu outputs not supported", L->where, n_in,
                  pn->n_output);
    return CUDAQ_NN_ERR_UNSUPPORTED;
  }
  nn_node_t *node = &m->nodes[m->n_nodes];
  memset(node, 0, sizeof *node);
  node->op = (nn_op_t)op;
  node->op_type = strdup(op_type);
  node->name = strdup(pn->name && *pn->name ? pn->name : "");
  node->in = malloc((n_in ? n_in : 1) * sizeof *node->in);
  if (!node->op_type || !node->name || !node->in) {
    free(node->op_type);
    free(node->name);
    free(node->in);
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
  if ((st = nn__infer_node(L, pn, node))) {
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
    if ((st = nn__read_tensor(L, g->initializer[i], &m->values[v]))) return st;
  }
  if (!(m->inputs = calloc(g->n_input + 1, sizeof *m->inputs))) return CUDAQ_NN_ERR_NO_MEMORY;
  for (size_t i = 0; i < g->n_input; i++) {
    const char *name = g->input[i]->name ? g->input[i]->name : "";
    int dtype, rank;
    int64_t dims[CUDAQ_NN_MAX_RANK];
    int init = find_value(L, name);
    if (init >= 0 && m->values[init].data) { /* an initializer */
      if ((st = check_initializer_input(L, g->input[i], &m->values[init]))) return st;
      continue;
    }
    snprintf(L->where, sizeof L->where, "graph input '%.100s'", name);
    if ((st = declared_type(L, g->input[i], "graph input", &dtype, &rank, dims))) return st;
    int v = add_value(L, name, &st);
    if (v < 0) return st;
    m->values[v].dtype = (cudaq_nn_dtype_t)dtype;
    if ((st = nn__set_shape(L, &m->values[v], rank, dims))) return st;
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
    if ((st = declared_type(L, g->output[i], "graph output", &dtype, &rank, dims))) return st;
    const nn_value_t *val = &m->values[v];
    int same = dtype == (int)val->dtype && rank == val->rank;
    for (int d = 0; same && d < rank; d++) same = dims[d] == val->dims[d];
    if (!same) {
      char a[128], b[128];
      nn__set_error(L->err, "graph output '%.60s' is declared %s [%s] but computes %s [%s]", name,
                    dtype_name(dtype), fmt_dims(a, sizeof a, rank, dims), dtype_name(val->dtype),
                    fmt_dims(b, sizeof b, val->rank, val->dims));
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
    free(m->nodes[i].in);
  }
  free(m->values);
  free(m->nodes);
  free(m->inputs);
  free(m->outputs);
  for (size_t i = 0; i < 2 * m->n_meta; i++) free(m->meta[i]);
  free(m->meta);
  free(m);
}

/* The model's metadata_props, copied (keys without a value get ""). */
static cudaq_nn_status_t copy_metadata(cudaq_nn_model_t *m, const Onnx__ModelProto *mp) {
  if (!mp->n_metadata_props) return CUDAQ_NN_OK;
  if (!(m->meta = calloc(2 * mp->n_metadata_props, sizeof *m->meta))) return CUDAQ_NN_ERR_NO_MEMORY;
  for (size_t i = 0; i < mp->n_metadata_props; i++) {
    const Onnx__StringStringEntryProto *e = mp->metadata_props[i];
    m->n_meta++;
    if (!(m->meta[2 * i] = strdup(e->key ? e->key : "")) ||
        !(m->meta[2 * i + 1] = strdup(e->value ? e->value : "")))
      return CUDAQ_NN_ERR_NO_MEMORY;
  }
  return CUDAQ_NN_OK;
}

cudaq_nn_status_t cudaq_nn_model_load(const void *data, size_t len, cudaq_nn_model_t **out,
                                      cudaq_nn_error_t *err) {
  if (err) err->message[0] = '\0';
  if (!data || !out) {
    nn__set_error(err, "NULL argument");
    return CUDAQ_NN_ERR_INVALID_ARG;
  }
  *out = NULL;
  /* protobuf-c recurses once per nesting level without a limit: bound the
   * nesting (and check the framing) first, so a file never crashes us. */
  cudaq_nn_status_t pre = nn__onnx_prescan(data, len, err);
  if (pre != CUDAQ_NN_OK) return pre;
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
  if ((st = copy_metadata(L.m, mp))) goto done;
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

cudaq_nn_status_t cudaq_nn_model_keep_outputs(cudaq_nn_model_t *m, size_t num) {
  if (!m || num < 1 || num > m->n_outputs) return CUDAQ_NN_ERR_INVALID_ARG;
  if (num == m->n_outputs) return CUDAQ_NN_OK;
  unsigned char *need = calloc(m->n_values ? m->n_values : 1, 1);
  if (!need) return CUDAQ_NN_ERR_NO_MEMORY;
  for (size_t i = 0; i < num; i++) need[m->outputs[i]] = 1;
  /* Nodes are in topological order (checked at load): one backward sweep. */
  for (size_t i = m->n_nodes; i-- > 0;) {
    const nn_node_t *nd = &m->nodes[i];
    if (!need[nd->out[0]]) continue;
    for (int j = 0; j < nd->n_in; j++)
      if (nd->in[j] >= 0) need[nd->in[j]] = 1;
  }
  size_t k = 0;
  for (size_t i = 0; i < m->n_nodes; i++) {
    nn_node_t *nd = &m->nodes[i];
    if (need[nd->out[0]]) {
      m->nodes[k++] = *nd;
      continue;
    }
    free(nd->name);
    free(nd->op_type);
    free(nd->in);
  }
  free(need);
  m->n_nodes = k;
  m->n_outputs = num;
  m->hash = (m->hash ^ (uint64_t)num) * 0x100000001b3ull; /* FNV-1a step: another key per output count */
  return CUDAQ_NN_OK;
}

size_t cudaq_nn_model_num_inputs(const cudaq_nn_model_t *m) { return m ? m->n_inputs : 0; }
size_t cudaq_nn_model_num_outputs(const cudaq_nn_model_t *m) { return m ? m->n_outputs : 0; }
uint64_t cudaq_nn_model_hash(const cudaq_nn_model_t *m) { return m ? m->hash : 0; }

const char *cudaq_nn_model_metadata(const cudaq_nn_model_t *m, const char *key) {
  if (!m || !key) return NULL;
  const char *found = NULL; /* ONNX does not forbid repeated keys: the last one wins */
  for (size_t i = 0; i < m->n_meta; i++)
    if (!strcmp(m->meta[2 * i], key)) found = m->meta[2 * i + 1];
  return found;
}

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
