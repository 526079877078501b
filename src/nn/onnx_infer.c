/* ONNX loader, shape inference: operator attributes, each operator's
 * element-type and shape rules, and the folding-ready node description
 * (attributes normalized into nn_node_t). Called by onnx_load.c per node. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn_internal.h"
#include "onnx_loader.h"

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
  if ((a = attr(pn, "value")) && a->t) return nn__read_tensor(L, a->t, v);
  int64_t one = 1;
  if ((a = attr(pn, "value_float")) && a->has_f) {
    v->dtype = CUDAQ_NN_FLOAT;
    nn__set_shape(L, v, 0, &one);
    if (!(v->data = malloc(4))) return CUDAQ_NN_ERR_NO_MEMORY;
    *(float *)v->data = a->f;
    return CUDAQ_NN_OK;
  }
  if ((a = attr(pn, "value_int")) && a->has_i) {
    v->dtype = CUDAQ_NN_INT64;
    nn__set_shape(L, v, 0, &one);
    if (!(v->data = malloc(8))) return CUDAQ_NN_ERR_NO_MEMORY;
    *(int64_t *)v->data = a->i;
    return CUDAQ_NN_OK;
  }
  if ((a = attr(pn, "value_floats")) || (a = attr(pn, "value_ints"))) {
    int is_f = strcmp(a->name, "value_floats") == 0;
    int64_t n = (int64_t)(is_f ? a->n_floats : a->n_ints);
    v->dtype = is_f ? CUDAQ_NN_FLOAT : CUDAQ_NN_INT64;
    cudaq_nn_status_t st = nn__set_shape(L, v, 1, &n);
    if (st) return st;
    if (!(v->data = calloc(v->n ? v->n : 1, is_f ? 4 : 8))) return CUDAQ_NN_ERR_NO_MEMORY;
    if (v->n) memcpy(v->data, is_f ? (void *)a->floats : (void *)a->ints, v->n * (is_f ? 4 : 8));
    return CUDAQ_NN_OK;
  }
  nn__set_error(L->err, "%s: Constant without a supported value attribute", L->where);
  return CUDAQ_NN_ERR_UNSUPPORTED;
}

int nn__input_count_ok(nn_op_t op, int n) {
  switch (op) {
    case NN_OP_CONV: return n >= 2 && n <= 3;
    case NN_OP_GEMM: return n >= 2 && n <= 3;
    case NN_OP_SLICE: return n >= 3 && n <= 5;
    case NN_OP_SQUEEZE: return n >= 1 && n <= 2;
    case NN_OP_CONSTANT: return n == 0;
    case NN_OP_CONCAT: return n >= 1 && n <= NN_MAX_NODE_INPUTS;
    case NN_OP_WHERE: return n == 3;
    case NN_OP_RELU: case NN_OP_GELU: case NN_OP_SIGMOID: case NN_OP_ERF:
    case NN_OP_TRANSPOSE: case NN_OP_CAST: case NN_OP_IDENTITY: return n == 1;
    default: return n == 2;
  }
}

/* Infers the single output of a node (dtype and shape). */
cudaq_nn_status_t nn__infer_node(loader_t *L, const Onnx__NodeProto *pn, nn_node_t *node) {
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
      if (!nn__dtype_ok((int)to) || to != (int)to) {
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
  return nn__set_shape(L, out, rank, dims);
}

