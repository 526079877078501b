/* GPU engine: device buffers for every tensor, one step per node (cuDNN, own
 * direct convolution or, in FP16, own tensor-core convolution, the last two
 * with fused bias and ReLU; elementwise, index-map copies,
 * matrix products), algorithm selection with an on-disk plan, and the whole
 * inference captured into one CUDA graph. */
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "cudaq/nn/gpu_engine.h"
#include "gpu_kernels.cuh"
#include "nn_internal.h"

#define ENGINE_PLAN_VERSION 4 /* 3: tensor-core candidates, t_tc per conv; 4: fused cuDNN */

/* IMPL_TC: algo = tile configuration. IMPL_CUDNN_FUSED: cuDNN's
 * convolution with bias and activation in one call
 * (cudnnConvolutionBiasActivationForward), no separate epilogue kernel. */
enum { IMPL_OWN = 0, IMPL_CUDNN = 1, IMPL_TC = 2, IMPL_CUDNN_FUSED = 3 };
static int is_cudnn(int impl) { return impl == IMPL_CUDNN || impl == IMPL_CUDNN_FUSED; }
enum { ST_ELEMENTWISE, ST_MOVE, ST_CONV, ST_GEMM, ST_CONVERT };

struct conv_state {
  int node;
  nnk_conv p;
  int own_ok, cudnn_ok, tc_ok;
  __half *tc_w;  /* weights packed for the tensor-core kernel (tc_ok) */
  float *tc_b;   /* its FP32 bias, or NULL */
  cudnnTensorDescriptor_t xd, yd;
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;
  int fused_ok;                   /* bias present: the fused cuDNN call is a candidate */
  cudnnTensorDescriptor_t bd;     /* its bias [1, M, 1, 1, 1] */
  cudnnActivationDescriptor_t ad; /* ReLU (NaN kept) or identity */
  int impl;
  int algo;
  size_t ws;
  float t_own, t_cudnn, t_tc; /* microseconds per launch; < 0 when not measured */
};

struct step {
  int kind;
  nnk_elementwise ew;
  nnk_move mv;
  nnk_gemm gm;
  int conv;
  const void *cin;
  int cin_dt;
  void *cout;
  int cout_dt;
  int64_t n;
};

struct cudaq_nn_gpu {
  const cudaq_nn_model_t *m;
  cudaq_nn_gpu_options_t opts;
  int half;
  void **dev;
  int *sdt;
  unsigned char *alloc_out; /* value's buffer allocated for a node output */
  void **dev_in, **dev_out;
  conv_state *convs;
  int n_convs;
  step *steps;
  int n_steps, cap_steps;
  void **allocs;
  int n_allocs, cap_allocs;
  void *ws;
  size_t ws_bytes;
  cudnnHandle_t cudnn;
  cudaStream_t stream;
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  cudaq_nn_plan_state_t plan_state;
  char key[512]; /* plan header: model, GPU, versions, precision, mode */
};

#define CK(call)                                                                          \
  do {                                                                                    \
    cudaError_t e_ = (call);                                                              \
    if (e_ != cudaSuccess) {                                                              \
      nn__set_error(err, "%s failed: %s", #call, cudaGetErrorString(e_));                 \
      return CUDAQ_NN_ERR_CUDA;                                                           \
    }                                                                                     \
  } while (0)
#define CKDNN(call)                                                                       \
  do {                                                                                    \
    cudnnStatus_t s_ = (call);                                                            \
    if (s_ != CUDNN_STATUS_SUCCESS) {                                                     \
      nn__set_error(err, "%s failed: %s", #call, cudnnGetErrorString(s_));                \
      return CUDAQ_NN_ERR_CUDA;                                                           \
    }                                                                                     \
  } while (0)
#define TRY(expr)                                                                         \
  do {                                                                                    \
    cudaq_nn_status_t t_ = (expr);                                                        \
    if (t_ != CUDAQ_NN_OK) return t_;                                                     \
  } while (0)

static cudaq_nn_status_t dalloc(cudaq_nn_gpu *g, size_t bytes, void **out, cudaq_nn_error_t *err) {
  if (g->n_allocs == g->cap_allocs) {
    int cap = g->cap_allocs ? g->cap_allocs * 2 : 64;
    void **na = (void **)realloc(g->allocs, (size_t)cap * sizeof *na);
    if (!na) return CUDAQ_NN_ERR_NO_MEMORY;
    g->allocs = na;
    g->cap_allocs = cap;
  }
  CK(cudaMalloc(out, bytes ? bytes : 16));
  CK(cudaMemset(*out, 0, bytes ? bytes : 16));
  g->allocs[g->n_allocs++] = *out;
  return CUDAQ_NN_OK;
}

static step *add_step(cudaq_nn_gpu *g, int kind) {
  if (g->n_steps == g->cap_steps) {
    int cap = g->cap_steps ? g->cap_steps * 2 : 32;
    step *ns = (step *)realloc(g->steps, (size_t)cap * sizeof *ns);
    if (!ns) return NULL;
    g->steps = ns;
    g->cap_steps = cap;
  }
  step *s = &g->steps[g->n_steps++];
  memset(s, 0, sizeof *s);
  s->kind = kind;
  return s;
}

static size_t dsize(int dt) { return cudaq_nn_dtype_size((cudaq_nn_dtype_t)dt); }

/* ------------------------------------------------------------------------ */
/* Buffers                                                                   */

static int is_alias_op(nn_op_t op) {
  return op == NN_OP_RESHAPE || op == NN_OP_IDENTITY || op == NN_OP_SQUEEZE || op == NN_OP_UNSQUEEZE;
}

static cudaq_nn_status_t upload_const(cudaq_nn_gpu *g, int v, cudaq_nn_error_t *err) {
  const nn_value_t *val = &g->m->values[v];
  size_t bytes = val->n * dsize(g->sdt[v]);
  TRY(dalloc(g, bytes, &g->dev[v], err));
  if (val->n == 0) return CUDAQ_NN_OK;
  if (g->sdt[v] == CUDAQ_NN_FLOAT16) {
    __half *h = (__half *)malloc(bytes);
    if (!h) return CUDAQ_NN_ERR_NO_MEMORY;
    for (size_t i = 0; i < val->n; i++) h[i] = __float2half(((const float *)val->data)[i]);
    cudaError_t e = cudaMemcpy(g->dev[v], h, bytes, cudaMemcpyHostToDevice);
    free(h);
    CK(e);
  } else {
    CK(cudaMemcpy(g->dev[v], val->data, bytes, cudaMemcpyHostToDevice));
  }
  return CUDAQ_NN_OK;
}

/* Conv nodes whose only consumer is a ReLU run it in their epilogue. */
static void find_fused_relu(const cudaq_nn_model_t *m, int *consumers, int *relu_of_conv) {
  for (size_t i = 0; i < m->n_nodes; i++)
    for (int k = 0; k < m->nodes[i].n_in; k++)
      if (m->nodes[i].in[k] >= 0) consumers[m->nodes[i].in[k]]++;
  for (size_t i = 0; i < m->n_outputs; i++) consumers[m->outputs[i]] += 2; /* never fuse away an output */
  for (size_t i = 0; i < m->n_nodes; i++) {
    const nn_node_t *r = &m->nodes[i];
    if (r->op != NN_OP_RELU || r->folded) continue;
    int c = r->in[0];
    if (consumers[c] != 1) continue;
    for (size_t j = 0; j < i; j++)
      if (m->nodes[j].op == NN_OP_CONV && !m->nodes[j].folded && m->nodes[j].out[0] == c)
        relu_of_conv[j] = (int)i;
  }
}

/* The tensor-core kernel's weights (packed) and FP32 bias, for FP16 engines
 * whose convolution has constant weights and bias and a shape it handles. */
static cudaq_nn_status_t build_tc(cudaq_nn_gpu *g, conv_state *c, const nn_node_t *node, cudaq_nn_error_t *err) {
  const cudaq_nn_model_t *m = g->m;
  const nn_value_t *w = &m->values[node->in[1]];
  const nn_value_t *b = node->n_in > 2 && node->in[2] >= 0 ? &m->values[node->in[2]] : NULL;
  if (!g->half || !w->data || (b && !b->data) || !nnk_tc_supported(c->p)) return CUDAQ_NN_OK;
  size_t n = nnk_tc_weight_elems(c->p);
  __half *h = (__half *)malloc(n * sizeof(__half));
  if (!h) return CUDAQ_NN_ERR_NO_MEMORY;
  nnk_tc_pack_weights(c->p, (const float *)w->data, h);
  cudaq_nn_status_t st = dalloc(g, n * sizeof(__half), (void **)&c->tc_w, err);
  cudaError_t e = st ? cudaSuccess : cudaMemcpy(c->tc_w, h, n * sizeof(__half), cudaMemcpyHostToDevice);
  free(h);
  if (st) return st;
  CK(e);
  if (b) {
    TRY(dalloc(g, b->n * sizeof(float), (void **)&c->tc_b, err));
    CK(cudaMemcpy(c->tc_b, b->data, b->n * sizeof(float), cudaMemcpyHostToDevice));
  }
  c->tc_ok = 1;
  return CUDAQ_NN_OK;
}

static cudaq_nn_status_t build_conv(cudaq_nn_gpu *g, int ni, int relu, cudaq_nn_error_t *err) {
  const cudaq_nn_model_t *m = g->m;
  const nn_node_t *node = &m->nodes[ni];
  const nn_value_t *x = &m->values[node->in[0]], *w = &m->values[node->in[1]];
  const nn_value_t *y = &m->values[node->out[0]];
  conv_state *c = &g->convs[g->n_convs++];
  memset(c, 0, sizeof *c);
  c->node = ni;
  c->t_own = c->t_cudnn = c->t_tc = -1.0f;
  nnk_conv *p = &c->p;
  const nn_conv_attr_t *a = &node->conv;
  p->N = (int)x->dims[0];
  p->C = (int)x->dims[1];
  p->M = (int)w->dims[0];
  for (int i = 0; i < 3; i++) {
    p->in3[i] = 1;
    p->out3[i] = 1;
    p->k[i] = (int)a->k[i];
    p->stride[i] = (int)a->stride[i];
    p->dil[i] = (int)a->dil[i];
    p->pad0[i] = (int)a->pad0[i];
  }
  for (int s = 0; s < a->nsp; s++) {
    p->in3[3 - a->nsp + s] = (int)x->dims[2 + s];
    p->out3[3 - a->nsp + s] = (int)y->dims[2 + s];
  }
  p->x = g->dev[node->in[0]];
  p->w = g->dev[node->in[1]];
  p->b = node->n_in > 2 && node->in[2] >= 0 ? g->dev[node->in[2]] : NULL;
  p->y = g->dev[node->out[0]];
  p->relu = relu;
  c->own_ok = nnk_conv_supported(*p);
  TRY(build_tc(g, c, node, err));
  /* cuDNN: 5-D NCDHW descriptors (1D/2D as depth/height 1); symmetric pads only. */
  int sym = 1;
  for (int i = 0; i < 3; i++) sym &= a->pad0[i] == a->pad1[i];
  c->cudnn_ok = sym && p->N > 0 && p->C > 0 && p->M > 0; /* cuDNN refuses empty tensors */
  if (!sym) return CUDAQ_NN_OK;
  cudnnDataType_t dt = g->half ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
  int xdims[5] = {p->N, p->C, p->in3[0], p->in3[1], p->in3[2]};
  int ydims[5] = {p->N, p->M, p->out3[0], p->out3[1], p->out3[2]};
  int wdims[5] = {p->M, p->C, p->k[0], p->k[1], p->k[2]};
  int xs[5], ys[5];
  xs[4] = ys[4] = 1;
  for (int i = 3; i >= 0; i--) {
    xs[i] = xs[i + 1] * xdims[i + 1];
    ys[i] = ys[i + 1] * ydims[i + 1];
  }
  CKDNN(cudnnCreateTensorDescriptor(&c->xd));
  CKDNN(cudnnCreateTensorDescriptor(&c->yd));
  CKDNN(cudnnCreateFilterDescriptor(&c->wd));
  CKDNN(cudnnCreateConvolutionDescriptor(&c->cd));
  CKDNN(cudnnSetTensorNdDescriptor(c->xd, dt, 5, xdims, xs));
  CKDNN(cudnnSetTensorNdDescriptor(c->yd, dt, 5, ydims, ys));
  CKDNN(cudnnSetFilterNdDescriptor(c->wd, dt, CUDNN_TENSOR_NCHW, 5, wdims));
  CKDNN(cudnnSetConvolutionNdDescriptor(c->cd, 3, p->pad0, p->stride, p->dil, CUDNN_CROSS_CORRELATION,
                                        CUDNN_DATA_FLOAT));
  /* FP32 keeps full FP32 arithmetic (no TF32), so it matches the CPU within
   * 1e-5; FP16 may use tensor cores. */
  CKDNN(cudnnSetConvolutionMathType(c->cd, g->half ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
  int odims[5];
  if (cudnnGetConvolutionNdForwardOutputDim(c->cd, c->xd, c->wd, 5, odims) != CUDNN_STATUS_SUCCESS ||
      memcmp(odims, ydims, sizeof odims) != 0)
    c->cudnn_ok = 0;
  if (c->cudnn_ok && p->b) {
    int bdims[5] = {1, p->M, 1, 1, 1}, bs[5] = {p->M, 1, 1, 1, 1};
    CKDNN(cudnnCreateTensorDescriptor(&c->bd));
    CKDNN(cudnnSetTensorNdDescriptor(c->bd, dt, 5, bdims, bs));
    CKDNN(cudnnCreateActivationDescriptor(&c->ad));
    /* Identity is accepted with the implicit precomputed GEMM algorithm only;
     * the other algorithms refuse the call and stay unfused. */
    CKDNN(cudnnSetActivationDescriptor(c->ad, relu ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY,
                                       CUDNN_PROPAGATE_NAN, 0.0));
    c->fused_ok = 1;
  }
  return CUDAQ_NN_OK;
}

static void fill_gemm(cudaq_nn_gpu *g, const nn_node_t *node, nnk_gemm *p) {
  const cudaq_nn_model_t *m = g->m;
  const nn_value_t *a = &m->values[node->in[0]], *b = &m->values[node->in[1]];
  const nn_value_t *y = &m->values[node->out[0]];
  memset(p, 0, sizeof *p);
  p->a = g->dev[node->in[0]];
  p->b = g->dev[node->in[1]];
  p->y = g->dev[node->out[0]];
  p->nb = 1;
  if (node->op == NN_OP_GEMM) {
    p->M = y->dims[0];
    p->N = y->dims[1];
    p->K = node->trans_a ? a->dims[0] : a->dims[1];
    p->sai = node->trans_a ? 1 : p->K;
    p->sak = node->trans_a ? p->M : 1;
    p->sbk = node->trans_b ? 1 : p->N;
    p->sbj = node->trans_b ? p->K : 1;
    p->alpha = node->alpha;
    p->beta = node->beta;
    if (node->n_in > 2 && node->in[2] >= 0) {
      int64_t cs[CUDAQ_NN_MAX_RANK];
      nn__bcast_strides(&m->values[node->in[2]], y, cs);
      p->c = g->dev[node->in[2]];
      p->sc0 = cs[0];
      p->sc1 = cs[1];
    }
    return;
  }
  p->K = a->dims[a->rank - 1];
  p->M = a->rank >= 2 ? a->dims[a->rank - 2] : 1;
  p->N = b->rank >= 2 ? b->dims[b->rank - 1] : 1;
  p->sai = p->K;
  p->sak = 1;
  p->sbk = p->N;
  p->sbj = 1;
  p->alpha = 1.0f;
  p->br = y->rank - (a->rank >= 2) - (b->rank >= 2);
  int bra = a->rank > 2 ? a->rank - 2 : 0, brb = b->rank > 2 ? b->rank - 2 : 0;
  int64_t acc_a = p->M * p->K, acc_b = p->K * p->N;
  for (int d = p->br - 1; d >= 0; d--) {
    p->bdims[d] = y->dims[d];
    p->nb *= y->dims[d];
    int ad = d - (p->br - bra), bd = d - (p->br - brb);
    p->sa[d] = (ad < 0 || a->dims[ad] == 1) ? 0 : acc_a;
    if (ad >= 0) acc_a *= a->dims[ad];
    p->sb[d] = (bd < 0 || b->dims[bd] == 1) ? 0 : acc_b;
    if (bd >= 0) acc_b *= b->dims[bd];
  }
}

static cudaq_nn_status_t build_steps(cudaq_nn_gpu *g, cudaq_nn_error_t *err) {
  const cudaq_nn_model_t *m = g->m;
  int *consumers = (int *)calloc(m->n_values + 1, sizeof(int));
  int *relu_of_conv = (int *)malloc((m->n_nodes + 1) * sizeof(int));
  int *fused = (int *)calloc(m->n_nodes + 1, sizeof(int));
  if (!consumers || !relu_of_conv || !fused) {
    free(consumers); free(relu_of_conv); free(fused);
    return CUDAQ_NN_ERR_NO_MEMORY;
  }
  for (size_t i = 0; i < m->n_nodes; i++) relu_of_conv[i] = -1;
  find_fused_relu(m, consumers, relu_of_conv);
  for (size_t i = 0; i < m->n_nodes; i++)
    if (relu_of_conv[i] >= 0) fused[relu_of_conv[i]] = 1;
  cudaq_nn_status_t st = CUDAQ_NN_OK;
  /* Buffers: constants uploaded, graph inputs and node outputs allocated,
   * reshape-like nodes and fused ReLUs alias their input. */
  for (size_t v = 0; v < m->n_values && !st; v++)
    if (m->values[v].data) st = upload_const(g, (int)v, err);
  for (size_t i = 0; i < m->n_inputs && !st; i++)
    st = dalloc(g, m->values[m->inputs[i]].n * dsize(g->sdt[m->inputs[i]]), &g->dev[m->inputs[i]], err);
  for (size_t i = 0; i < m->n_nodes && !st; i++) {
    const nn_node_t *node = &m->nodes[i];
    int o = node->out[0];
    if (node->folded) continue;
    if (is_alias_op(node->op) || fused[i]) {
      g->dev[o] = g->dev[node->in[0]];
      continue;
    }
    st = dalloc(g, m->values[o].n * dsize(g->sdt[o]), &g->dev[o], err);
    g->alloc_out[o] = 1;
  }
  /* Input bindings: the value's buffer, or a declared-type buffer converted
   * at the start of the graph (float inputs in FP16 mode). */
  for (size_t i = 0; i < m->n_inputs && !st; i++) {
    int v = m->inputs[i];
    if (g->sdt[v] == (int)m->values[v].dtype) {
      g->dev_in[i] = g->dev[v];
      continue;
    }
    st = dalloc(g, m->values[v].n * dsize(m->values[v].dtype), &g->dev_in[i], err);
    step *s = st ? NULL : add_step(g, ST_CONVERT);
    if (!st && !s) st = CUDAQ_NN_ERR_NO_MEMORY;
    if (s) {
      s->cin = g->dev_in[i]; s->cin_dt = m->values[v].dtype;
      s->cout = g->dev[v]; s->cout_dt = g->sdt[v]; s->n = (int64_t)m->values[v].n;
    }
  }
  for (size_t i = 0; i < m->n_nodes && !st; i++) {
    const nn_node_t *node = &m->nodes[i];
    if (node->folded || fused[i] || is_alias_op(node->op)) continue;
    const nn_value_t *out = &m->values[node->out[0]];
    step *s = add_step(g, ST_ELEMENTWISE);
    if (!s) { st = CUDAQ_NN_ERR_NO_MEMORY; break; }
    if (node->op == NN_OP_CONV) {
      s->kind = ST_CONV;
      s->conv = g->n_convs;
      st = build_conv(g, (int)i, relu_of_conv[i] >= 0, err);
    } else if (node->op == NN_OP_MATMUL || node->op == NN_OP_GEMM) {
      s->kind = ST_GEMM;
      fill_gemm(g, node, &s->gm);
    } else if (nn__is_move_op(node->op)) {
      s->kind = ST_MOVE;
      size_t n = out->n ? out->n : 1;
      uint8_t *src_in = (uint8_t *)malloc(n);
      int64_t *idx64 = (int64_t *)malloc(n * sizeof(int64_t));
      int32_t *idx32 = (int32_t *)malloc(n * sizeof(int32_t));
      /* The input buffers as a device array: Concat takes any number (up to
       * NN_MAX_NODE_INPUTS, the reach of the uint8_t source index). */
      const void **ptrs = (const void **)malloc((size_t)node->n_in * sizeof(void *));
      void *d_in = NULL, *d_idx = NULL, *d_ptrs = NULL;
      if (!src_in || !idx64 || !idx32 || !ptrs) st = CUDAQ_NN_ERR_NO_MEMORY;
      if (!st) {
        nn__move_map(m, node, src_in, idx64);
        for (size_t k = 0; k < out->n; k++) idx32[k] = (int32_t)idx64[k];
        for (int k = 0; k < node->n_in; k++) ptrs[k] = node->in[k] >= 0 ? g->dev[node->in[k]] : NULL;
        st = dalloc(g, n, &d_in, err);
      }
      if (!st) st = dalloc(g, n * sizeof(int32_t), &d_idx, err);
      if (!st) st = dalloc(g, (size_t)node->n_in * sizeof(void *), &d_ptrs, err);
      if (!st) {
        cudaError_t e1 = out->n ? cudaMemcpy(d_in, src_in, out->n, cudaMemcpyHostToDevice) : cudaSuccess;
        cudaError_t e2 = out->n ? cudaMemcpy(d_idx, idx32, out->n * sizeof(int32_t), cudaMemcpyHostToDevice)
                                : cudaSuccess;
        cudaError_t e3 = cudaMemcpy(d_ptrs, ptrs, (size_t)node->n_in * sizeof(void *), cudaMemcpyHostToDevice);
        if (e1 != cudaSuccess || e2 != cudaSuccess || e3 != cudaSuccess) {
          nn__set_error(err, "cudaMemcpy of a copy map failed: %s",
                        cudaGetErrorString(e1 ? e1 : e2 ? e2 : e3));
          st = CUDAQ_NN_ERR_CUDA;
        }
      }
      free(src_in); free(idx64); free(idx32); free(ptrs);
      s->mv.n = (int64_t)out->n;
      s->mv.elem_size = (int)dsize(g->sdt[node->out[0]]);
      s->mv.in = (const void *const *)d_ptrs;
      s->mv.src_in = (const uint8_t *)d_in;
      s->mv.src_idx = (const int32_t *)d_idx;
      s->mv.out = g->dev[node->out[0]];
    } else {
      nnk_elementwise *p = &s->ew;
      p->op = node->op;
      p->rank = out->rank;
      p->n = (int64_t)out->n;
      for (int d = 0; d < out->rank; d++) p->dims[d] = out->dims[d];
      p->flat = NNK_EW_FLAT;
      for (int k = 0; k < node->n_in && k < 3; k++) {
        const nn_value_t *in = &m->values[node->in[k]];
        nn__bcast_strides(in, out, p->strides[k]);
        p->in[k] = g->dev[node->in[k]];
        p->in_dt[k] = g->sdt[node->in[k]];
        /* Same element count as the output: same shape up to 1-dims, offset i. */
        if (in->n == out->n) p->flat |= 1 << k;
        else if (in->n != 1) p->flat = 0;
      }
      p->out = g->dev[node->out[0]];
      p->out_dt = g->sdt[node->out[0]];
      p->gelu_tanh = node->gelu_tanh;
    }
  }
  /* Output bindings: a node's own buffer when the types agree, else a
   * declared-type buffer written at the end of the graph. */
  for (size_t i = 0; i < m->n_outputs && !st; i++) {
    int v = m->outputs[i];
    int shared = 0;
    for (size_t j = 0; j < i; j++) shared |= m->outputs[j] == v;
    if (g->alloc_out[v] && !shared && g->sdt[v] == (int)m->values[v].dtype) {
      g->dev_out[i] = g->dev[v];
      continue;
    }
    st = dalloc(g, m->values[v].n * dsize(m->values[v].dtype), &g->dev_out[i], err);
    step *s = st ? NULL : add_step(g, ST_CONVERT);
    if (!st && !s) st = CUDAQ_NN_ERR_NO_MEMORY;
    if (s) {
      s->cin = g->dev[v]; s->cin_dt = g->sdt[v];
      s->cout = g->dev_out[i]; s->cout_dt = m->values[v].dtype; s->n = (int64_t)m->values[v].n;
    }
  }
  free(consumers); free(relu_of_conv); free(fused);
  return st;
}

/* ------------------------------------------------------------------------ */
/* Enqueue and tuning                                                        */

static cudaq_nn_status_t enqueue_conv(cudaq_nn_gpu *g, const conv_state *c, int impl, int algo,
                                      size_t ws, cudaq_nn_error_t *err) {
  if (impl == IMPL_OWN) {
    CK(nnk_launch_conv(c->p, g->half, g->stream));
    return CUDAQ_NN_OK;
  }
  if (impl == IMPL_TC) {
    CK(nnk_launch_tc(c->p, c->tc_w, c->tc_b, algo, g->stream));
    return CUDAQ_NN_OK;
  }
  const float one = 1.0f, zero = 0.0f;
  if (impl == IMPL_CUDNN_FUSED) { /* y = act(conv(x, w) + 0 * z + b), z = y */
    CKDNN(cudnnConvolutionBiasActivationForward(g->cudnn, &one, c->xd, c->p.x, c->wd, c->p.w, c->cd,
                                                (cudnnConvolutionFwdAlgo_t)algo, g->ws, ws, &zero, c->yd,
                                                c->p.y, c->bd, c->p.b, c->ad, c->yd, c->p.y));
    return CUDAQ_NN_OK;
  }
  CKDNN(cudnnConvolutionForward(g->cudnn, &one, c->xd, c->p.x, c->wd, c->p.w, c->cd,
                                (cudnnConvolutionFwdAlgo_t)algo, g->ws, ws, &zero, c->yd, c->p.y));
  if (c->p.b || c->p.relu)
    CK(nnk_launch_bias_act(c->p.y, c->p.b, c->p.N, c->p.M,
                           (int64_t)c->p.out3[0] * c->p.out3[1] * c->p.out3[2], c->p.relu, g->half,
                           g->stream));
  return CUDAQ_NN_OK;
}

static cudaq_nn_status_t enqueue_all(cudaq_nn_gpu *g, cudaq_nn_error_t *err) {
  for (int i = 0; i < g->n_steps; i++) {
    const step *s = &g->steps[i];
    switch (s->kind) {
      case ST_ELEMENTWISE: CK(nnk_launch_elementwise(s->ew, g->half, g->stream)); break;
      case ST_MOVE: if (s->mv.n) CK(nnk_launch_move(s->mv, g->stream)); break;
      case ST_GEMM: CK(nnk_launch_gemm(s->gm, g->half, g->stream)); break;
      case ST_CONVERT: CK(nnk_launch_convert(s->cin, s->cin_dt, s->cout, s->cout_dt, s->n, g->stream)); break;
      case ST_CONV: {
        const conv_state *c = &g->convs[s->conv];
        TRY(enqueue_conv(g, c, c->impl, c->algo, c->ws, err));
        break;
      }
    }
  }
  return CUDAQ_NN_OK;
}

/* The cuDNN workspace shared by all convolutions, reallocated to bytes. */
static cudaq_nn_status_t set_workspace(cudaq_nn_gpu *g, size_t bytes, cudaq_nn_error_t *err) {
  if (bytes == g->ws_bytes) return CUDAQ_NN_OK;
  if (g->ws) cudaFree(g->ws);
  g->ws = NULL;
  g->ws_bytes = 0;
  if (bytes) CK(cudaMalloc(&g->ws, bytes));
  g->ws_bytes = bytes;
  return CUDAQ_NN_OK;
}

/* Mean time (µs) of one convolution as it runs inside the inference graph:
 * iters back-to-back launches are captured into a graph, which is replayed
 * once to warm up and once timed. Timing stream launches instead would
 * measure the host: a cuDNN call costs tens of µs of CPU time, more than the
 * GPU time of a small convolution, and such a measurement picked the own
 * kernel for layers that cuDNN runs 4x faster in the graph. */
static cudaq_nn_status_t time_conv(cudaq_nn_gpu *g, const conv_state *c, int impl, int algo, size_t ws,
                                   float *us, cudaq_nn_error_t *err) {
  int iters = g->opts.tune_iterations > 0 ? g->opts.tune_iterations : 20;
  cudaq_nn_status_t st = enqueue_conv(g, c, impl, algo, ws, err); /* first call outside capture */
  if (!st && cudaStreamSynchronize(g->stream) != cudaSuccess) {
    nn__set_error(err, "a convolution candidate failed before timing");
    st = CUDAQ_NN_ERR_CUDA;
  }
  if (st) return st;
  cudaGraph_t graph = NULL;
  cudaGraphExec_t exec = NULL;
  cudaEvent_t a = NULL, b = NULL;
  CK(cudaStreamBeginCapture(g->stream, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < iters && !st; i++) st = enqueue_conv(g, c, impl, algo, ws, err);
  cudaError_t e = cudaStreamEndCapture(g->stream, &graph); /* always ends the capture */
  if (!st && e != cudaSuccess) {
    nn__set_error(err, "capturing a convolution for timing failed: %s", cudaGetErrorString(e));
    st = CUDAQ_NN_ERR_CUDA;
  }
  float ms = 0.0f;
  if (!st && (cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess || cudaEventCreate(&a) != cudaSuccess ||
              cudaEventCreate(&b) != cudaSuccess || cudaGraphLaunch(exec, g->stream) != cudaSuccess ||
              cudaEventRecord(a, g->stream) != cudaSuccess || cudaGraphLaunch(exec, g->stream) != cudaSuccess ||
              cudaEventRecord(b, g->stream) != cudaSuccess || cudaEventSynchronize(b) != cudaSuccess ||
              cudaEventElapsedTime(&ms, a, b) != cudaSuccess)) {
    nn__set_error(err, "timing a convolution failed: %s", cudaGetErrorString(cudaGetLastError()));
    st = CUDAQ_NN_ERR_CUDA;
  }
  if (a) cudaEventDestroy(a);
  if (b) cudaEventDestroy(b);
  if (exec) cudaGraphExecDestroy(exec);
  if (graph) cudaGraphDestroy(graph);
  *us = ms * 1000.0f / (float)iters;
  return st;
}

/* Workspace that cuDNN algorithms may use while tuning (select_algorithms
 * allocates it once for all layers, then shrinks it to what the chosen
 * algorithms need). */
#define TUNE_WS_LIMIT ((size_t)256 << 20)

/* CUDAQ_NN_TUNE_LOG set: every timed candidate on stderr (the plan and
 * cudaq_nn_gpu_describe keep only the best of each kind). */
static void tune_log(const cudaq_nn_gpu *g, const conv_state *c, const char *impl, int algo, float us) {
  static int on = -1;
  if (on < 0) on = getenv("CUDAQ_NN_TUNE_LOG") != NULL;
  if (on)
    fprintf(stderr, "tune: conv '%s' %dx%dx%d -> %d ch, %dx%dx%d out, %s: %s %d %.2f us\n", g->m->nodes[c->node].name,
            c->p.C, c->p.k[0], c->p.k[1], c->p.M, c->p.out3[0], c->p.out3[1], c->p.out3[2], g->half ? "fp16" : "fp32",
            impl, algo, us);
}

/* Times the candidates of one convolution and keeps the fastest. Starts from
 * nothing: a plan that failed to parse part-way may have filled fields. */
static cudaq_nn_status_t tune_conv(cudaq_nn_gpu *g, conv_state *c, cudaq_nn_error_t *err) {
  c->impl = IMPL_OWN;
  c->algo = 0;
  c->ws = 0;
  c->t_own = c->t_cudnn = c->t_tc = -1.0f;
  cudaq_nn_error_t cand_err; /* why the last cuDNN candidate was skipped */
  cand_err.message[0] = 0;
  const cudaq_nn_conv_impl_t want = g->opts.conv_impl;
  int cudnn_fused = 0; /* the fastest cuDNN candidate is the fused call */
  /* Tensor cores: every tile configuration that fits, the fastest kept.
   * Forced TC runs it wherever it applies; elsewhere the layer is chosen
   * as in AUTO between cuDNN and own. */
  int tc_cfg = -1;
  if (c->tc_ok && (want == CUDAQ_NN_CONV_AUTO || want == CUDAQ_NN_CONV_TC))
    for (int k = 0; k < NNK_TC_CONFIGS; k++) {
      float t = -1.0f;
      if (!nnk_tc_config_ok(c->p, k)) continue;
      TRY(time_conv(g, c, IMPL_TC, k, 0, &t, err));
      tune_log(g, c, "tc cfg", k, t);
      if (c->t_tc < 0.0f || t < c->t_tc) {
        c->t_tc = t;
        tc_cfg = k;
      }
    }
  if (want == CUDAQ_NN_CONV_TC && tc_cfg >= 0) {
    c->impl = IMPL_TC;
    c->algo = tc_cfg;
    return CUDAQ_NN_OK;
  }
  if (c->cudnn_ok && want != CUDAQ_NN_CONV_OWN) {
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int found = 0;
    cudnnStatus_t s = cudnnFindConvolutionForwardAlgorithmEx(
        g->cudnn, c->xd, c->p.x, c->wd, c->p.w, c->cd, c->yd, c->p.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
        &found, perf, g->ws, g->ws_bytes);
    if (s != CUDNN_STATUS_SUCCESS) {
      nn__set_error(err, "cudnnFindConvolutionForwardAlgorithmEx failed: %s", cudnnGetErrorString(s));
      return CUDAQ_NN_ERR_CUDA;
    }
    /* cuDNN's own ranking times single calls; every acceptable algorithm
     * it returned is timed again as it runs in the graph, and the fastest
     * there is kept (the graph ranking differs from cuDNN's: on the H100 the
     * chosen algorithm is often not cuDNN's first). */
    for (int i = 0; i < found; i++) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > g->ws_bytes) continue;
      /* FP32 stays in FP32 arithmetic: no TF32 tensor-core math, and no FFT
       * or Winograd transforms (their rounding exceeds 1e-5 relative). */
      if (!g->half && (perf[i].mathType != CUDNN_FMA_MATH || perf[i].algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT ||
                       perf[i].algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
                       perf[i].algo == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD ||
                       perf[i].algo == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED))
        continue;
      /* A candidate can still fail here: some algorithms that cudnnFind
       * ran reject the call, or cannot be captured into a graph. Such a
       * candidate is skipped (its error, which CUDA would report again at
       * the next launch, is consumed). */
      float t = -1.0f;
      if (time_conv(g, c, IMPL_CUDNN, perf[i].algo, perf[i].memory, &t, &cand_err) != CUDAQ_NN_OK) {
        (void)cudaGetLastError();
        continue;
      }
      tune_log(g, c, "cudnn algo", perf[i].algo, t);
      if (c->t_cudnn < 0.0f || t < c->t_cudnn) {
        c->t_cudnn = t;
        c->algo = perf[i].algo;
        c->ws = perf[i].memory;
        cudnn_fused = 0;
      }
      /* The same algorithm with bias and activation fused, where cuDNN
       * accepts the combination (a refusal is consumed as above). */
      float tf = -1.0f;
      if (c->fused_ok &&
          time_conv(g, c, IMPL_CUDNN_FUSED, perf[i].algo, perf[i].memory, &tf, &cand_err) == CUDAQ_NN_OK) {
        tune_log(g, c, "cudnn-fused algo", perf[i].algo, tf);
        if (tf < c->t_cudnn) {
          c->t_cudnn = tf;
          c->algo = perf[i].algo;
          c->ws = perf[i].memory;
          cudnn_fused = 1;
        }
      } else if (c->fused_ok) {
        (void)cudaGetLastError();
      }
    }
  }
  if (c->own_ok && want != CUDAQ_NN_CONV_CUDNN) {
    TRY(time_conv(g, c, IMPL_OWN, 0, 0, &c->t_own, err));
    tune_log(g, c, "own", 0, c->t_own);
  }
  if (c->t_cudnn < 0.0f && c->t_own < 0.0f && tc_cfg < 0) {
    nn__set_error(err, "node '%s' (Conv): no convolution implementation available for the %s choice%s%s",
                  g->m->nodes[c->node].name, g->opts.conv_impl == CUDAQ_NN_CONV_AUTO ? "automatic" : "forced",
                  cand_err.message[0] ? "; last cuDNN candidate: " : "", cand_err.message);
    return CUDAQ_NN_ERR_UNSUPPORTED;
  }
  if (c->t_own < 0.0f || (c->t_cudnn >= 0.0f && c->t_cudnn < c->t_own))
    c->impl = cudnn_fused ? IMPL_CUDNN_FUSED : IMPL_CUDNN;
  float best = is_cudnn(c->impl) ? c->t_cudnn : c->t_own;
  if (tc_cfg >= 0 && (best < 0.0f || c->t_tc < best)) {
    c->impl = IMPL_TC;
    c->algo = tc_cfg;
    c->ws = 0;
  }
  return CUDAQ_NN_OK;
}

/* ------------------------------------------------------------------------ */
/* Plan file                                                                 */

static cudaq_nn_status_t make_key(cudaq_nn_gpu *g, int device, cudaq_nn_error_t *err) {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, device));
  int rt = 0;
  CK(cudaRuntimeGetVersion(&rt));
  char uuid[33];
  for (int i = 0; i < 16; i++) snprintf(uuid + 2 * i, 3, "%02x", (unsigned char)prop.uuid.bytes[i]);
  snprintf(g->key, sizeof g->key,
           "cudaq-nn-plan %d\nmodel %016llx\ngpu %s|sm_%d%d|%s\nversions cudart %d cudnn %zu\n"
           "precision %s conv %d convs %d\n",
           ENGINE_PLAN_VERSION, (unsigned long long)cudaq_nn_model_hash(g->m), prop.name, prop.major,
           prop.minor, uuid, rt, (size_t)cudnnGetVersion(), g->half ? "fp16" : "fp32",
           (int)g->opts.conv_impl, g->n_convs);
  return CUDAQ_NN_OK;
}

/* Reads the plan; 1 when it matches this engine and was applied. */
static int read_plan(cudaq_nn_gpu *g, const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char buf[8192];
  size_t len = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[len] = '\0';
  size_t klen = strlen(g->key);
  if (len < klen || memcmp(buf, g->key, klen) != 0) return 0;
  const char *p = buf + klen;
  for (int i = 0; i < g->n_convs; i++) {
    conv_state *c = &g->convs[i];
    int node, impl, algo, used = 0;
    unsigned long long ws;
    float to, tc, tt;
    if (sscanf(p, "conv %d %d %d %llu %f %f %f\n%n", &node, &impl, &algo, &ws, &to, &tc, &tt, &used) != 7 ||
        used == 0)
      return 0;
    p += used;
    if (node != c->node || impl < IMPL_OWN || impl > IMPL_CUDNN_FUSED) return 0;
    if (impl == IMPL_CUDNN_FUSED && !c->fused_ok) return 0;
    if (impl == IMPL_OWN && !c->own_ok) return 0;
    if (impl == IMPL_TC && (!c->tc_ok || !nnk_tc_config_ok(c->p, algo))) return 0;
    if (is_cudnn(impl)) {
      size_t need = 0;
      if (!c->cudnn_ok || algo < 0 || algo >= CUDNN_CONVOLUTION_FWD_ALGO_COUNT ||
          cudnnGetConvolutionForwardWorkspaceSize(g->cudnn, c->xd, c->wd, c->cd, c->yd,
                                                  (cudnnConvolutionFwdAlgo_t)algo, &need) != CUDNN_STATUS_SUCCESS ||
          need > ws)
        return 0;
    }
    c->impl = impl;
    c->algo = algo;
    c->ws = (size_t)ws;
    c->t_own = to;
    c->t_cudnn = tc;
    c->t_tc = tt;
  }
  return strcmp(p, "end\n") == 0;
}

static cudaq_nn_status_t write_plan(cudaq_nn_gpu *g, const char *path, cudaq_nn_error_t *err) {
  /* A temporary file of this writer's own (engines created at once in one
   * process write the same plan), renamed over the plan when complete. */
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s.XXXXXX", path) >= (int)sizeof tmp) {
    nn__set_error(err, "plan path too long");
    return CUDAQ_NN_ERR_INVALID_ARG;
  }
  int fd = mkstemp(tmp);
  FILE *f = NULL;
  int e = errno;
  if (fd >= 0 && (fchmod(fd, 0644) != 0 || !(f = fdopen(fd, "w")))) {
    e = errno;
    close(fd);
    remove(tmp);
  }
  if (!f) {
    nn__set_error(err, "cannot write the plan '%.200s': %s", tmp, strerror(e));
    return CUDAQ_NN_ERR_IO;
  }
  fputs(g->key, f);
  for (int i = 0; i < g->n_convs; i++) {
    const conv_state *c = &g->convs[i];
    fprintf(f, "conv %d %d %d %llu %.9g %.9g %.9g\n", c->node, c->impl, c->algo, (unsigned long long)c->ws,
            c->t_own, c->t_cudnn, c->t_tc);
  }
  fputs("end\n", f);
  int bad = ferror(f);
  bad |= fclose(f) != 0;
  if (bad || rename(tmp, path) != 0) {
    remove(tmp);
    nn__set_error(err, "cannot write the plan '%.200s'", path);
    return CUDAQ_NN_ERR_IO;
  }
  return CUDAQ_NN_OK;
}

/* ------------------------------------------------------------------------ */
/* Public API                                                                */

static cudaq_nn_status_t select_algorithms(cudaq_nn_gpu *g, cudaq_nn_error_t *err) {
  const char *path = g->opts.plan_path;
  if (path && read_plan(g, path)) {
    g->plan_state = CUDAQ_NN_PLAN_HIT;
  } else {
    int existed = path && access(path, F_OK) == 0;
    if (g->opts.conv_impl != CUDAQ_NN_CONV_OWN) TRY(set_workspace(g, TUNE_WS_LIMIT, err));
    for (int i = 0; i < g->n_convs; i++) TRY(tune_conv(g, &g->convs[i], err));
    if (path) {
      TRY(write_plan(g, path, err));
      g->plan_state = existed ? CUDAQ_NN_PLAN_REBUILT : CUDAQ_NN_PLAN_BUILT;
    } else {
      g->plan_state = CUDAQ_NN_PLAN_NONE;
    }
  }
  /* Exactly what the chosen algorithms need: tuning may have grown the
   * workspace for a candidate that was not kept. */
  size_t ws = 0;
  for (int i = 0; i < g->n_convs; i++)
    if (is_cudnn(g->convs[i].impl) && g->convs[i].ws > ws) ws = g->convs[i].ws;
  return set_workspace(g, ws, err);
}

static cudaq_nn_status_t capture(cudaq_nn_gpu *g, cudaq_nn_error_t *err) {
  /* One eager run first: loads every kernel (lazy module loading) and lets
   * cuDNN build its execution plans outside the capture, where it may
   * allocate or synchronize (a plan hit skips the timed runs). */
  TRY(enqueue_all(g, err));
  CK(cudaStreamSynchronize(g->stream));
  CK(cudaStreamBeginCapture(g->stream, cudaStreamCaptureModeThreadLocal));
  cudaq_nn_status_t st = enqueue_all(g, err);
  cudaGraph_t graph = NULL;
  cudaError_t e = cudaStreamEndCapture(g->stream, &graph);
  if (st) {
    if (graph) cudaGraphDestroy(graph);
    return st;
  }
  CK(e);
  g->graph = graph;
  CK(cudaGraphInstantiate(&g->exec, g->graph, 0));
  CK(cudaGraphUpload(g->exec, g->stream));
  CK(cudaStreamSynchronize(g->stream));
  return CUDAQ_NN_OK;
}

static cudaq_nn_status_t create_engine(cudaq_nn_gpu *g, cudaq_nn_error_t *err) {
  const cudaq_nn_model_t *m = g->m;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    nn__set_error(err, "no CUDA device");
    return CUDAQ_NN_ERR_NO_DEVICE;
  }
  if (g->opts.device < 0 || g->opts.device >= count) {
    nn__set_error(err, "device %d out of range (%d devices)", g->opts.device, count);
    return CUDAQ_NN_ERR_INVALID_ARG;
  }
  CK(cudaSetDevice(g->opts.device));
  CK(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking));
  CKDNN(cudnnCreate(&g->cudnn));
  CKDNN(cudnnSetStream(g->cudnn, g->stream));
  size_t nv = m->n_values + 1;
  g->dev = (void **)calloc(nv, sizeof(void *));
  g->sdt = (int *)calloc(nv, sizeof(int));
  g->alloc_out = (unsigned char *)calloc(nv, 1);
  g->dev_in = (void **)calloc(m->n_inputs + 1, sizeof(void *));
  g->dev_out = (void **)calloc(m->n_outputs + 1, sizeof(void *));
  g->convs = (conv_state *)calloc(m->n_nodes + 1, sizeof(conv_state));
  if (!g->dev || !g->sdt || !g->alloc_out || !g->dev_in || !g->dev_out || !g->convs)
    return CUDAQ_NN_ERR_NO_MEMORY;
  for (size_t v = 0; v < m->n_values; v++)
    g->sdt[v] = g->half && m->values[v].dtype == CUDAQ_NN_FLOAT ? CUDAQ_NN_FLOAT16 : m->values[v].dtype;
  TRY(build_steps(g, err));
  TRY(make_key(g, g->opts.device, err));
  TRY(select_algorithms(g, err));
  return capture(g, err);
}

cudaq_nn_status_t cudaq_nn_gpu_create(const cudaq_nn_model_t *model, const cudaq_nn_gpu_options_t *opts,
                                      cudaq_nn_gpu_t **out, cudaq_nn_error_t *err) {
  if (err) err->message[0] = '\0';
  if (!model || !out) {
    nn__set_error(err, "NULL argument");
    return CUDAQ_NN_ERR_INVALID_ARG;
  }
  *out = NULL;
  cudaq_nn_gpu *g = (cudaq_nn_gpu *)calloc(1, sizeof *g);
  if (!g) return CUDAQ_NN_ERR_NO_MEMORY;
  g->m = model;
  if (opts) g->opts = *opts;
  else cudaq_nn_gpu_options_init(&g->opts);
  if ((g->opts.precision != CUDAQ_NN_FP32 && g->opts.precision != CUDAQ_NN_FP16) ||
      g->opts.conv_impl < CUDAQ_NN_CONV_AUTO || g->opts.conv_impl > CUDAQ_NN_CONV_TC) {
    free(g);
    nn__set_error(err, "bad precision or conv_impl option");
    return CUDAQ_NN_ERR_INVALID_ARG;
  }
  g->half = g->opts.precision == CUDAQ_NN_FP16;
  cudaq_nn_status_t st = create_engine(g, err);
  if (st) {
    if (st == CUDAQ_NN_ERR_NO_MEMORY) nn__set_error(err, "out of host memory building the engine");
    cudaq_nn_gpu_destroy(g);
    return st;
  }
  *out = g;
  return CUDAQ_NN_OK;
}

void cudaq_nn_gpu_destroy(cudaq_nn_gpu_t *g) {
  if (!g) return;
  if (g->stream) cudaStreamSynchronize(g->stream);
  if (g->exec) cudaGraphExecDestroy(g->exec);
  if (g->graph) cudaGraphDestroy(g->graph);
  for (int i = 0; g->convs && i < g->n_convs; i++) {
    conv_state *c = &g->convs[i];
    if (c->xd) cudnnDestroyTensorDescriptor(c->xd);
    if (c->yd) cudnnDestroyTensorDescriptor(c->yd);
    if (c->wd) cudnnDestroyFilterDescriptor(c->wd);
    if (c->cd) cudnnDestroyConvolutionDescriptor(c->cd);
    if (c->bd) cudnnDestroyTensorDescriptor(c->bd);
    if (c->ad) cudnnDestroyActivationDescriptor(c->ad);
  }
  for (int i = 0; i < g->n_allocs; i++) cudaFree(g->allocs[i]);
  if (g->ws) cudaFree(g->ws);
  if (g->cudnn) cudnnDestroy(g->cudnn);
  if (g->stream) cudaStreamDestroy(g->stream);
  free(g->allocs);
  free(g->steps);
  free(g->convs);
  free(g->dev);
  free(g->sdt);
  free(g->alloc_out);
  free(g->dev_in);
  free(g->dev_out);
  free(g);
}

void *cudaq_nn_gpu_input(const cudaq_nn_gpu_t *g, size_t i) {
  return g && i < g->m->n_inputs ? g->dev_in[i] : NULL;
}
void *cudaq_nn_gpu_output(const cudaq_nn_gpu_t *g, size_t i) {
  return g && i < g->m->n_outputs ? g->dev_out[i] : NULL;
}
void *cudaq_nn_gpu_graph_exec(const cudaq_nn_gpu_t *g) { return g ? (void *)g->exec : NULL; }
void *cudaq_nn_gpu_graph(const cudaq_nn_gpu_t *g) { return g ? (void *)g->graph : NULL; }
cudaq_nn_plan_state_t cudaq_nn_gpu_plan_state(const cudaq_nn_gpu_t *g) {
  return g ? g->plan_state : CUDAQ_NN_PLAN_NONE;
}

cudaq_nn_status_t cudaq_nn_gpu_launch(cudaq_nn_gpu_t *g, void *stream) {
  if (!g) return CUDAQ_NN_ERR_INVALID_ARG;
  return cudaGraphLaunch(g->exec, (cudaStream_t)stream) == cudaSuccess ? CUDAQ_NN_OK : CUDAQ_NN_ERR_CUDA;
}

cudaq_nn_status_t cudaq_nn_gpu_run(cudaq_nn_gpu_t *g, const void *const *inputs, const size_t *input_sizes,
                                   void *const *outputs, const size_t *output_sizes, cudaq_nn_error_t *err) {
  if (!g || !inputs || !input_sizes || !outputs || !output_sizes) {
    nn__set_error(err, "NULL argument");
    return CUDAQ_NN_ERR_INVALID_ARG;
  }
  const cudaq_nn_model_t *m = g->m;
  for (size_t i = 0; i < m->n_inputs; i++) {
    const nn_value_t *v = &m->values[m->inputs[i]];
    if (!inputs[i] || input_sizes[i] != v->n * dsize(v->dtype)) {
      nn__set_error(err, "input %zu ('%.100s'): %zu bytes given, %zu expected", i, v->name, input_sizes[i],
                    v->n * dsize(v->dtype));
      return CUDAQ_NN_ERR_INVALID_ARG;
    }
  }
  for (size_t i = 0; i < m->n_outputs; i++) {
    const nn_value_t *v = &m->values[m->outputs[i]];
    if (!outputs[i] || output_sizes[i] != v->n * dsize(v->dtype)) {
      nn__set_error(err, "output %zu ('%.100s'): %zu bytes given, %zu expected", i, v->name, output_sizes[i],
                    v->n * dsize(v->dtype));
      return CUDAQ_NN_ERR_INVALID_ARG;
    }
  }
  for (size_t i = 0; i < m->n_inputs; i++)
    CK(cudaMemcpyAsync(g->dev_in[i], inputs[i], input_sizes[i], cudaMemcpyHostToDevice, g->stream));
  CK(cudaGraphLaunch(g->exec, g->stream));
  for (size_t i = 0; i < m->n_outputs; i++)
    CK(cudaMemcpyAsync(outputs[i], g->dev_out[i], output_sizes[i], cudaMemcpyDeviceToHost, g->stream));
  CK(cudaStreamSynchronize(g->stream));
  return CUDAQ_NN_OK;
}

cudaq_nn_status_t cudaq_nn_gpu_describe(const cudaq_nn_gpu_t *g, char *buf, size_t len) {
  if (!g || !buf || len == 0) return CUDAQ_NN_ERR_INVALID_ARG;
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < g->n_convs && used < len; i++) {
    const conv_state *c = &g->convs[i];
    const nn_node_t *node = &g->m->nodes[c->node];
    int w = snprintf(buf + used, len - used,
                     "conv #%d '%s' (%dx%dx%d -> %d ch, %dx%dx%d out%s): own %.2f us, cudnn %.2f us, tc %.2f us"
                     " -> %s %d\n",
                     i, node->name, c->p.C, c->p.k[0], c->p.k[1], c->p.M, c->p.out3[0], c->p.out3[1],
                     c->p.out3[2], c->p.relu ? ", +relu" : "", c->t_own, c->t_cudnn, c->t_tc,
                     c->impl == IMPL_CUDNN         ? "cudnn algo"
                     : c->impl == IMPL_CUDNN_FUSED ? "cudnn-fused algo"
                     : c->impl == IMPL_TC          ? "tc cfg"
                                                   : "own",
                     c->algo);
    if (w < 0) break;
    used += (size_t)w;
  }
  return CUDAQ_NN_OK;
}
