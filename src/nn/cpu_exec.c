/* CPU reference executor: straightforward loops over the shapes fixed at
 * load, except convolutions, which run as im2col + SGEMM where OpenBLAS is
 * built in (cpu_conv.c). It also evaluates constant subgraphs for the
 * loader (with the direct loops). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn_internal.h"

struct cudaq_nn_cpu {
  const cudaq_nn_model_t *model;
  size_t n_values, n_nodes; /* the model's, kept: destroy does not read the model */
  void **bufs;         /* per value: constant data or an owned buffer */
  uint8_t *owned;      /* per value: 1 when bufs[i] is ours to free */
  uint8_t **move_in;   /* per node: move map (copy-class nodes) */
  int64_t **move_idx;
  float *conv_scratch; /* im2col tile for the SGEMM convolution (cpu_conv.c); NULL: direct loops */
};

/* ------------------------------------------------------------------------ */
/* Index helpers                                                             */

static void strides_of(const nn_value_t *v, int64_t *s) {
  int64_t acc = 1;
  for (int d = v->rank - 1; d >= 0; d--) {
    s[d] = acc;
    acc *= v->dims[d];
  }
}

void nn__bcast_strides(const nn_value_t *v, const nn_value_t *out, int64_t *strides) {
  int64_t own[CUDAQ_NN_MAX_RANK];
  strides_of(v, own);
  for (int d = 0; d < out->rank; d++) {
    int vd = d - (out->rank - v->rank);
    strides[d] = (vd < 0 || v->dims[vd] == 1) ? 0 : own[vd];
  }
}

/* Advances a multi-index over dims (last dimension fastest). */
static void next_index(int64_t *idx, const int64_t *dims, int rank) {
  for (int d = rank - 1; d >= 0; d--) {
    if (++idx[d] < dims[d]) return;
    idx[d] = 0;
  }
}

void nn__move_map(const cudaq_nn_model_t *m, const nn_node_t *node, uint8_t *src_in,
                  int64_t *src_idx) {
  const nn_value_t *out = &m->values[node->out[0]];
  const nn_value_t *x = &m->values[node->in[0]];
  int64_t idx[CUDAQ_NN_MAX_RANK] = {0}, xs[CUDAQ_NN_MAX_RANK];
  strides_of(x, xs);
  switch (node->op) {
    case NN_OP_TRANSPOSE:
      for (size_t i = 0; i < out->n; i++, next_index(idx, out->dims, out->rank)) {
        int64_t s = 0;
        for (int d = 0; d < out->rank; d++) s += idx[d] * xs[node->perm[d]];
        src_in[i] = 0;
        src_idx[i] = s;
      }
      break;
    case NN_OP_SLICE:
      for (size_t i = 0; i < out->n; i++, next_index(idx, out->dims, out->rank)) {
        int64_t s = 0;
        for (int d = 0; d < out->rank; d++) s += (node->start[d] + idx[d] * node->step[d]) * xs[d];
        src_in[i] = 0;
        src_idx[i] = s;
      }
      break;
    case NN_OP_GATHER: {
      const nn_value_t *ix = &m->values[node->in[1]];
      int a = node->axis, ir = ix->rank;
      int64_t is[CUDAQ_NN_MAX_RANK];
      strides_of(ix, is);
      for (size_t i = 0; i < out->n; i++, next_index(idx, out->dims, out->rank)) {
        int64_t s = 0, k = 0;
        for (int d = 0; d < a; d++) s += idx[d] * xs[d];
        for (int d = 0; d < ir; d++) k += idx[a + d] * is[d];
        int64_t g = ix->dtype == CUDAQ_NN_INT64 ? ((const int64_t *)ix->data)[k]
                                                : ((const int32_t *)ix->data)[k];
        if (g < 0) g += x->dims[a];
        s += g * xs[a];
        for (int d = a + 1; d < x->rank; d++) s += idx[d - 1 + ir] * xs[d];
        src_in[i] = 0;
        src_idx[i] = s;
      }
      break;
    }
    case NN_OP_CONCAT: {
      int a = node->axis;
      for (size_t i = 0; i < out->n; i++, next_index(idx, out->dims, out->rank)) {
        int64_t pos = idx[a];
        int k = 0;
        while (pos >= m->values[node->in[k]].dims[a]) pos -= m->values[node->in[k++]].dims[a];
        const nn_value_t *y = &m->values[node->in[k]];
        int64_t ys[CUDAQ_NN_MAX_RANK], s = 0;
        strides_of(y, ys);
        for (int d = 0; d < out->rank; d++) s += (d == a ? pos : idx[d]) * ys[d];
        src_in[i] = (uint8_t)k;
        src_idx[i] = s;
      }
      break;
    }
    default: /* Reshape, Squeeze, Unsqueeze, Identity: same element order */
      for (size_t i = 0; i < out->n; i++) {
        src_in[i] = 0;
        src_idx[i] = (int64_t)i;
      }
  }
}

/* ------------------------------------------------------------------------ */
/* Node kernels                                                              */

static void st_i(void *p, cudaq_nn_dtype_t t, int64_t i, int64_t v) {
  switch (t) {
    case CUDAQ_NN_INT32: ((int32_t *)p)[i] = (int32_t)v; break;
    case CUDAQ_NN_INT64: ((int64_t *)p)[i] = v; break;
    case CUDAQ_NN_FLOAT: ((float *)p)[i] = (float)v; break;
    case CUDAQ_NN_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    default: ((uint8_t *)p)[i] = (uint8_t)v;
  }
}

static float gelu(float x, int tanh_approx) {
  if (tanh_approx) return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
  return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f));
}

static void exec_elementwise(const cudaq_nn_model_t *m, const nn_node_t *node, void **bufs) {
  const nn_value_t *out = &m->values[node->out[0]];
  int64_t st[3][CUDAQ_NN_MAX_RANK] = {{0}};
  cudaq_nn_dtype_t t[3] = {CUDAQ_NN_FLOAT, CUDAQ_NN_FLOAT, CUDAQ_NN_FLOAT};
  const void *in[3] = {NULL, NULL, NULL};
  for (int k = 0; k < node->n_in && k < 3; k++) {
    nn__bcast_strides(&m->values[node->in[k]], out, st[k]);
    t[k] = m->values[node->in[k]].dtype;
    in[k] = bufs[node->in[k]];
  }
  void *o = bufs[node->out[0]];
  int64_t idx[CUDAQ_NN_MAX_RANK] = {0}, off[3] = {0, 0, 0};
  for (size_t i = 0; i < out->n; i++) {
    off[0] = off[1] = off[2] = 0;
    for (int d = 0; d < out->rank; d++)
      for (int k = 0; k < 3; k++) off[k] += idx[d] * st[k][d];
    next_index(idx, out->dims, out->rank);
    int is_f = t[0] == CUDAQ_NN_FLOAT;
    switch (node->op) {
      case NN_OP_RELU:
        if (is_f) { /* NaN stays NaN, as in onnxruntime and PyTorch */
          float v = nn__ld_f(in[0], t[0], off[0]);
          ((float *)o)[i] = v > 0.0f ? v : (v != v ? v : 0.0f);
        }
        else { int64_t v = nn__ld_i(in[0], t[0], off[0]); st_i(o, out->dtype, (int64_t)i, v > 0 ? v : 0); }
        break;
      case NN_OP_GELU: ((float *)o)[i] = gelu(nn__ld_f(in[0], t[0], off[0]), node->gelu_tanh); break;
      case NN_OP_SIGMOID: ((float *)o)[i] = 1.0f / (1.0f + expf(-nn__ld_f(in[0], t[0], off[0]))); break;
      case NN_OP_ERF: ((float *)o)[i] = erff(nn__ld_f(in[0], t[0], off[0])); break;
      case NN_OP_CAST:
        if (out->dtype == CUDAQ_NN_FLOAT) ((float *)o)[i] = nn__ld_f(in[0], t[0], off[0]);
        else if (is_f && out->dtype == CUDAQ_NN_BOOL) ((uint8_t *)o)[i] = nn__ld_f(in[0], t[0], off[0]) != 0.0f;
        else st_i(o, out->dtype, (int64_t)i, nn__ld_i(in[0], t[0], off[0]));
        break;
      case NN_OP_ADD: case NN_OP_SUB: case NN_OP_MUL: case NN_OP_DIV:
        if (is_f) {
          float a = nn__ld_f(in[0], t[0], off[0]), b = nn__ld_f(in[1], t[1], off[1]), r;
          r = node->op == NN_OP_ADD ? a + b : node->op == NN_OP_SUB ? a - b : node->op == NN_OP_MUL ? a * b : a / b;
          ((float *)o)[i] = r;
        } else {
          int64_t a = nn__ld_i(in[0], t[0], off[0]), b = nn__ld_i(in[1], t[1], off[1]), r;
          /* Wrap like the narrow type would; integer division by zero gives 0
           * (undefined in ONNX; never a trap here). */
          r = node->op == NN_OP_ADD ? (int64_t)((uint64_t)a + (uint64_t)b)
            : node->op == NN_OP_SUB ? (int64_t)((uint64_t)a - (uint64_t)b)
            : node->op == NN_OP_MUL ? (int64_t)((uint64_t)a * (uint64_t)b)
            : (b == 0 || (b == -1 && a == INT64_MIN)) ? 0 : a / b;
          st_i(o, out->dtype, (int64_t)i, r);
        }
        break;
      case NN_OP_GREATER: case NN_OP_LESS: case NN_OP_EQUAL: {
        int r;
        if (is_f) {
          float a = nn__ld_f(in[0], t[0], off[0]), b = nn__ld_f(in[1], t[1], off[1]);
          r = node->op == NN_OP_GREATER ? a > b : node->op == NN_OP_LESS ? a < b : a == b;
        } else {
          int64_t a = nn__ld_i(in[0], t[0], off[0]), b = nn__ld_i(in[1], t[1], off[1]);
          r = node->op == NN_OP_GREATER ? a > b : node->op == NN_OP_LESS ? a < b : a == b;
        }
        ((uint8_t *)o)[i] = (uint8_t)r;
        break;
      }
      case NN_OP_WHERE: {
        int c = ((const uint8_t *)in[0])[off[0]] != 0;
        size_t es = cudaq_nn_dtype_size(out->dtype);
        memcpy((char *)o + i * es, (const char *)(c ? in[1] : in[2]) + (c ? off[1] : off[2]) * (int64_t)es, es);
        break;
      }
      default: break;
    }
  }
}

/* Direct convolution on (N, C, D, H, W) with the 1D/2D cases as D = H = 1. */
static void exec_conv(const cudaq_nn_model_t *m, const nn_node_t *node, void **bufs) {
  const nn_conv_attr_t *c = &node->conv;
  const float *X = bufs[node->in[0]], *W = bufs[node->in[1]];
  const float *B = node->n_in > 2 && node->in[2] >= 0 ? bufs[node->in[2]] : NULL;
  float *Y = bufs[node->out[0]];
  nn_conv_geom_t g;
  nn__conv_geom(m, node, &g);
  const int64_t N = g.N, C = g.C, M = g.M, ksz = g.ksz, isz = g.isz, osz = g.osz;
  const int64_t *in3 = g.in3, *out3 = g.out3;
  for (int64_t n = 0; n < N; n++)
    for (int64_t mo = 0; mo < M; mo++) {
      float *yo = Y + (n * M + mo) * osz;
      for (int64_t p = 0; p < osz; p++) yo[p] = B ? B[mo] : 0.0f;
      for (int64_t ci = 0; ci < C; ci++) {
        const float *xi = X + (n * C + ci) * isz;
        const float *wk = W + (mo * C + ci) * ksz;
        for (int64_t kd = 0; kd < c->k[0]; kd++)
          for (int64_t kh = 0; kh < c->k[1]; kh++)
            for (int64_t kw = 0; kw < c->k[2]; kw++) {
              float wv = wk[(kd * c->k[1] + kh) * c->k[2] + kw];
              for (int64_t od = 0; od < out3[0]; od++) {
                int64_t id = od * c->stride[0] - c->pad0[0] + kd * c->dil[0];
                if (id < 0 || id >= in3[0]) continue;
                for (int64_t oh = 0; oh < out3[1]; oh++) {
                  int64_t ih = oh * c->stride[1] - c->pad0[1] + kh * c->dil[1];
                  if (ih < 0 || ih >= in3[1]) continue;
                  float *yrow = yo + (od * out3[1] + oh) * out3[2];
                  const float *xrow = xi + (id * in3[1] + ih) * in3[2];
                  for (int64_t ow = 0; ow < out3[2]; ow++) {
                    int64_t iw = ow * c->stride[2] - c->pad0[2] + kw * c->dil[2];
                    if (iw >= 0 && iw < in3[2]) yrow[ow] += wv * xrow[iw];
                  }
                }
              }
            }
      }
    }
}

static void exec_matmul(const cudaq_nn_model_t *m, const nn_node_t *node, void **bufs) {
  const nn_value_t *a = &m->values[node->in[0]], *b = &m->values[node->in[1]];
  const nn_value_t *y = &m->values[node->out[0]];
  const float *A = bufs[node->in[0]], *B = bufs[node->in[1]];
  float *Y = bufs[node->out[0]];
  int64_t K = a->dims[a->rank - 1];
  int64_t M = a->rank >= 2 ? a->dims[a->rank - 2] : 1;
  int64_t N = b->rank >= 2 ? b->dims[b->rank - 1] : 1;
  int br = y->rank - (a->rank >= 2) - (b->rank >= 2); /* batch rank */
  int64_t bdims[CUDAQ_NN_MAX_RANK], sa[CUDAQ_NN_MAX_RANK], sb[CUDAQ_NN_MAX_RANK];
  size_t nb = 1;
  for (int d = 0; d < br; d++) {
    bdims[d] = y->dims[d];
    nb *= (size_t)bdims[d];
  }
  /* batch strides in elements of whole matrices */
  int bra = a->rank - 2 > 0 ? a->rank - 2 : 0, brb = b->rank - 2 > 0 ? b->rank - 2 : 0;
  int64_t acc = M * K;
  for (int d = br - 1; d >= 0; d--) {
    int ad = d - (br - bra);
    sa[d] = (ad < 0 || a->dims[ad] == 1) ? 0 : acc;
    if (ad >= 0) acc *= a->dims[ad];
  }
  acc = K * N;
  for (int d = br - 1; d >= 0; d--) {
    int bd = d - (br - brb);
    sb[d] = (bd < 0 || b->dims[bd] == 1) ? 0 : acc;
    if (bd >= 0) acc *= b->dims[bd];
  }
  int64_t idx[CUDAQ_NN_MAX_RANK] = {0};
  for (size_t bi = 0; bi < nb; bi++, next_index(idx, bdims, br)) {
    int64_t oa = 0, ob = 0;
    for (int d = 0; d < br; d++) {
      oa += idx[d] * sa[d];
      ob += idx[d] * sb[d];
    }
    float *yo = Y + (int64_t)bi * M * N;
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        float s = 0.0f;
        for (int64_t k = 0; k < K; k++) s += A[oa + i * K + k] * B[ob + k * N + j];
        yo[i * N + j] = s;
      }
  }
}

static void exec_gemm(const cudaq_nn_model_t *m, const nn_node_t *node, void **bufs) {
  const nn_value_t *a = &m->values[node->in[0]], *y = &m->values[node->out[0]];
  const float *A = bufs[node->in[0]], *B = bufs[node->in[1]];
  const float *C = node->n_in > 2 && node->in[2] >= 0 ? bufs[node->in[2]] : NULL;
  float *Y = bufs[node->out[0]];
  int64_t M = y->dims[0], N = y->dims[1];
  int64_t K = node->trans_a ? a->dims[0] : a->dims[1];
  int64_t cs[2] = {0, 0};
  if (C) nn__bcast_strides(&m->values[node->in[2]], y, cs);
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      float s = 0.0f;
      for (int64_t k = 0; k < K; k++) {
        float av = node->trans_a ? A[k * M + i] : A[i * K + k];
        float bv = node->trans_b ? B[j * K + k] : B[k * N + j];
        s += av * bv;
      }
      float r = node->alpha * s;
      if (C) r += node->beta * C[i * cs[0] + j * cs[1]];
      Y[i * N + j] = r;
    }
}

static void exec_move(const cudaq_nn_model_t *m, const nn_node_t *node, void **bufs,
                      const uint8_t *src_in, const int64_t *src_idx) {
  const nn_value_t *out = &m->values[node->out[0]];
  size_t es = cudaq_nn_dtype_size(out->dtype);
  char *o = bufs[node->out[0]];
  for (size_t i = 0; i < out->n; i++)
    memcpy(o + i * es, (const char *)bufs[node->in[src_in[i]]] + src_idx[i] * (int64_t)es, es);
}

void nn__cpu_exec_node(const cudaq_nn_model_t *m, const nn_node_t *node, void **bufs,
                       const uint8_t *move_src_in, const int64_t *move_src_idx, float *conv_scratch) {
  if (node->op == NN_OP_CONSTANT) return;
  if (nn__is_move_op(node->op)) exec_move(m, node, bufs, move_src_in, move_src_idx);
  else if (node->op == NN_OP_CONV) {
    if (!nn__conv_gemm(m, node, bufs, conv_scratch)) exec_conv(m, node, bufs);
  }
  else if (node->op == NN_OP_MATMUL) exec_matmul(m, node, bufs);
  else if (node->op == NN_OP_GEMM) exec_gemm(m, node, bufs);
  else exec_elementwise(m, node, bufs);
}

/* ------------------------------------------------------------------------ */
/* Executor                                                                  */

void cudaq_nn_cpu_destroy(cudaq_nn_cpu_t *cpu) {
  if (!cpu) return;
  /* The model may already be gone (a garbage collector frees in any order):
   * only the counts kept at create are used. */
  if (cpu->bufs && cpu->owned)
    for (size_t i = 0; i < cpu->n_values; i++)
      if (cpu->owned[i]) free(cpu->bufs[i]);
  if (cpu->move_in)
    for (size_t i = 0; i < cpu->n_nodes; i++) {
      free(cpu->move_in[i]);
      free(cpu->move_idx[i]);
    }
  free(cpu->bufs);
  free(cpu->owned);
  free(cpu->move_in);
  free(cpu->move_idx);
  free(cpu->conv_scratch);
  free(cpu);
}

cudaq_nn_status_t cudaq_nn_cpu_create(const cudaq_nn_model_t *m, cudaq_nn_cpu_t **out) {
  if (!m || !out) return CUDAQ_NN_ERR_INVALID_ARG;
  *out = NULL;
  cudaq_nn_cpu_t *cpu = calloc(1, sizeof *cpu);
  if (!cpu) return CUDAQ_NN_ERR_NO_MEMORY;
  cpu->model = m;
  cpu->n_values = m->n_values;
  cpu->n_nodes = m->n_nodes;
  cpu->bufs = calloc(m->n_values + 1, sizeof *cpu->bufs);
  cpu->owned = calloc(m->n_values + 1, 1);
  cpu->move_in = calloc(m->n_nodes + 1, sizeof *cpu->move_in);
  cpu->move_idx = calloc(m->n_nodes + 1, sizeof *cpu->move_idx);
  if (!cpu->bufs || !cpu->owned || !cpu->move_in || !cpu->move_idx) goto oom;
  for (size_t i = 0; i < m->n_values; i++) {
    const nn_value_t *v = &m->values[i];
    if (v->data) {
      cpu->bufs[i] = v->data;
    } else {
      cpu->bufs[i] = calloc(v->n ? v->n : 1, cudaq_nn_dtype_size(v->dtype));
      cpu->owned[i] = 1;
      if (!cpu->bufs[i]) goto oom;
    }
  }
  size_t scratch = 0;
  for (size_t i = 0; i < m->n_nodes; i++) {
    const nn_node_t *node = &m->nodes[i];
    if (!node->folded && node->op == NN_OP_CONV) {
      size_t s = nn__conv_scratch_floats(m, node);
      if (s > scratch) scratch = s;
    }
  }
  if (scratch && !(cpu->conv_scratch = malloc(scratch * sizeof(float)))) goto oom;
  if (scratch) nn__blas_init(); /* OpenBLAS's kernels chosen before the first SGEMM (cpu_conv.c) */
  for (size_t i = 0; i < m->n_nodes; i++) {
    const nn_node_t *node = &m->nodes[i];
    if (node->folded || !nn__is_move_op(node->op)) continue;
    size_t n = m->values[node->out[0]].n;
    cpu->move_in[i] = malloc(n ? n : 1);
    cpu->move_idx[i] = malloc((n ? n : 1) * sizeof(int64_t));
    if (!cpu->move_in[i] || !cpu->move_idx[i]) goto oom;
    nn__move_map(m, node, cpu->move_in[i], cpu->move_idx[i]);
  }
  *out = cpu;
  return CUDAQ_NN_OK;
oom:
  cudaq_nn_cpu_destroy(cpu);
  return CUDAQ_NN_ERR_NO_MEMORY;
}

cudaq_nn_status_t cudaq_nn_cpu_run(cudaq_nn_cpu_t *cpu, const void *const *inputs,
                                   const size_t *input_sizes, void *const *outputs,
                                   const size_t *output_sizes, cudaq_nn_error_t *err) {
  if (!cpu || !inputs || !input_sizes || !outputs || !output_sizes) {
    nn__set_error(err, "NULL argument");
    return CUDAQ_NN_ERR_INVALID_ARG;
  }
  const cudaq_nn_model_t *m = cpu->model;
  for (size_t i = 0; i < m->n_inputs; i++) {
    const nn_value_t *v = &m->values[m->inputs[i]];
    size_t bytes = v->n * cudaq_nn_dtype_size(v->dtype);
    if (!inputs[i] || input_sizes[i] != bytes) {
      nn__set_error(err, "input %zu ('%.100s'): %zu bytes given, %zu expected", i, v->name,
                    inputs[i] ? input_sizes[i] : 0, bytes);
      return CUDAQ_NN_ERR_INVALID_ARG;
    }
  }
  for (size_t i = 0; i < m->n_outputs; i++) {
    const nn_value_t *v = &m->values[m->outputs[i]];
    size_t bytes = v->n * cudaq_nn_dtype_size(v->dtype);
    if (!outputs[i] || output_sizes[i] != bytes) {
      nn__set_error(err, "output %zu ('%.100s'): %zu bytes given, %zu expected", i, v->name,
                    outputs[i] ? output_sizes[i] : 0, bytes);
      return CUDAQ_NN_ERR_INVALID_ARG;
    }
  }
  for (size_t i = 0; i < m->n_inputs; i++) memcpy(cpu->bufs[m->inputs[i]], inputs[i], input_sizes[i]);
  for (size_t i = 0; i < m->n_nodes; i++) {
    const nn_node_t *node = &m->nodes[i];
    if (!node->folded) nn__cpu_exec_node(m, node, cpu->bufs, cpu->move_in[i], cpu->move_idx[i],
                                          cpu->conv_scratch);
  }
  for (size_t i = 0; i < m->n_outputs; i++) memcpy(outputs[i], cpu->bufs[m->outputs[i]], output_sizes[i]);
  return CUDAQ_NN_OK;
}
