/* GPU engine: device buffers for every tensor, one step per node (cuDNN, own
 * direct convolution or, in FP16, own tensor-core convolution, the last two
 * with fused bias and ReLU; elementwise, index-map copies,
 * matrix products), algorithm selection with an on-disk plan, and the whole
 * inference captured into one CUDA graph. */
#include "gpu_engine_internal.h"


cudaq_nn_status_t nng_dalloc(cudaq_nn_gpu *g, size_t bytes, void **out, cudaq_nn_error_t *err) {
  if (g->n_allocs == g->cap_allocs) {
    int cap = g->cap_allocs ? g->cap_allocs * 2 : 64;
    void **na = (void **)realloc(g->allocs, (size_t)cap * sizeof *na);
    if (!na) return CUDAQ_NN_ERR_NO_MEMORY;
    g->allocs = na;
    size_t *ns = (size_t *)realloc(g->alloc_sizes, (size_t)cap * sizeof *ns);
    if (!ns) return CUDAQ_NN_ERR_NO_MEMORY;
    g->alloc_sizes = ns;
    g->cap_allocs = cap;
  }
  const size_t n = bytes ? bytes : 16; /* never a zero-byte allocation */
  CK(cudaMalloc(out, n));
  CK(cudaMemset(*out, 0, n));
  g->alloc_sizes[g->n_allocs] = n;
  g->allocs[g->n_allocs++] = *out;
  g->alloc_bytes += n;
  return CUDAQ_NN_OK;
}

void nng_dfree(cudaq_nn_gpu *g, void *p) {
  if (!p) return;
  for (int i = 0; i < g->n_allocs; i++)
    if (g->allocs[i] == p) {
      cudaFree(p);
      g->alloc_bytes -= g->alloc_sizes[i];
      g->allocs[i] = g->allocs[--g->n_allocs];
      g->alloc_sizes[i] = g->alloc_sizes[g->n_allocs];
      return;
    }
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
  s->epi_node = -1;
  return s;
}


/* ------------------------------------------------------------------------ */
/* Buffers                                                                   */


static cudaq_nn_status_t upload_const(cudaq_nn_gpu *g, int v, cudaq_nn_error_t *err) {
  const nn_value_t *val = &g->m->values[v];
  size_t bytes = val->n * nng_dsize(g->sdt[v]);
  TRY(nng_dalloc(g, bytes, &g->dev[v], err));
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

/* Packed FP16 weights uploaded to *out: pack(p, w, host) fills n halves. */
template <typename F>
static cudaq_nn_status_t upload_packed(cudaq_nn_gpu *g, size_t n, F pack, __half **out, cudaq_nn_error_t *err) {
  __half *h = (__half *)malloc(n * sizeof(__half));
  if (!h) return CUDAQ_NN_ERR_NO_MEMORY;
  pack(h);
  cudaq_nn_status_t st = nng_dalloc(g, n * sizeof(__half), (void **)out, err);
  cudaError_t e = st ? cudaSuccess : cudaMemcpy(*out, h, n * sizeof(__half), cudaMemcpyHostToDevice);
  free(h);
  if (st) return st;
  CK(e);
  return CUDAQ_NN_OK;
}

/* The tensor-core kernels' packed weights (gpu_tc.cu: NCDHW; gpu_conv_cl.cu:
 * per input layout) and their FP32 bias, for FP16 engines whose convolution
 * has constant weights and bias and a shape they handle. */
static cudaq_nn_status_t build_tc(cudaq_nn_gpu *g, conv_state *c, const nn_node_t *node, cudaq_nn_error_t *err) {
  const cudaq_nn_model_t *m = g->m;
  const nn_value_t *w = &m->values[node->in[1]];
  const nn_value_t *b = node->n_in > 2 && node->in[2] >= 0 ? &m->values[node->in[2]] : NULL;
  if (!g->half || !w->data || (b && !b->data)) return CUDAQ_NN_OK;
  const float *wf = (const float *)w->data;
  const nnk_conv &p = c->p;
  if (nnk_tc_supported(p)) {
    TRY(upload_packed(g, nnk_tc_weight_elems(p), [&](__half *h) { nnk_tc_pack_weights(p, wf, h); }, &c->tc_w, err));
    c->tc_ok = 1;
  }
  for (int l = 0; l < 2; l++)
    if (nnk_cl_supported(p, l)) {
      TRY(upload_packed(g, nnk_cl_weight_elems(p, l), [&](__half *h) { nnk_cl_pack_weights(p, l, wf, h); },
                        &c->cl_w[l], err));
      c->cl_ok[l] = 1;
    }
  if (nng_stacks_on(g) && nnk_stack_layer_ok(p))
    TRY(upload_packed(g, nnk_stack_weight_elems(p), [&](__half *h) { nnk_stack_pack_weights(p, wf, h); }, &c->st_w,
                      err));
  if (b && (c->tc_ok || c->cl_ok[0] || c->cl_ok[1] || c->st_w)) {
    TRY(nng_dalloc(g, b->n * sizeof(float), (void **)&c->b32, err));
    CK(cudaMemcpy(c->b32, b->data, b->n * sizeof(float), cudaMemcpyHostToDevice));
  }
  return CUDAQ_NN_OK;
}

static cudaq_nn_status_t build_conv(cudaq_nn_gpu *g, int ni, int relu_node, cudaq_nn_error_t *err) {
  const int relu = relu_node >= 0;
  const cudaq_nn_model_t *m = g->m;
  const nn_node_t *node = &m->nodes[ni];
  const nn_value_t *x = &m->values[node->in[0]], *w = &m->values[node->in[1]];
  const nn_value_t *y = &m->values[node->out[0]];
  conv_state *c = &g->convs[g->n_convs++];
  memset(c, 0, sizeof *c);
  c->node = ni;
  c->stack = -1;
  c->out_value = relu ? m->nodes[relu_node].out[0] : node->out[0];
  c->t_own = c->t_cudnn = c->t_tc = c->t_cl = c->t_cl_chain = -1.0f;
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
  p->b_const = m->values[node->in[1]].data != NULL; /* uploaded once at create */
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

/* A copy node's composed index map (gpu_fuse.cu) on the device. */
struct copy_map {
  const void *const *bufs; /* the source buffers (up to 255: a byte indexes them) */
  const void *host_bufs[NNG_MAP_HOST_BUFS]; /* the first of them, on the host */
  int n_bufs;
  const uint8_t *src;
  const int32_t *idx;
  const int8_t *dts; /* the buffers' element types when one differs from out_dt (an absorbed Cast), else NULL */
};

static cudaq_nn_status_t upload_copy_map(cudaq_nn_gpu *g, const int *producer, const unsigned char *absorbed, int ni,
                                         int out_dt, copy_map *cm, cudaq_nn_error_t *err) {
  const nn_value_t *out = &g->m->values[g->m->nodes[ni].out[0]];
  memset(cm, 0, sizeof *cm);
  size_t n = out->n ? out->n : 1;
  uint8_t *src_in = (uint8_t *)malloc(n);
  int64_t *idx64 = (int64_t *)malloc(n * sizeof(int64_t));
  int32_t *idx32 = (int32_t *)malloc(n * sizeof(int32_t));
  const void **ptrs = (const void **)malloc(256 * sizeof(void *));
  int dts[256];
  int8_t dt8[256];
  int n_bufs = 0, convert = 0;
  void *d_in = NULL, *d_idx = NULL, *d_ptrs = NULL, *d_dt = NULL;
  cudaq_nn_status_t st = src_in && idx64 && idx32 && ptrs ? CUDAQ_NN_OK : CUDAQ_NN_ERR_NO_MEMORY;
  if (!st) st = nng_copy_map(g, producer, absorbed, ni, src_in, idx64, ptrs, dts, &n_bufs);
  if (!st) {
    for (size_t k = 0; k < out->n; k++) idx32[k] = (int32_t)idx64[k];
    for (int j = 0; j < n_bufs; j++) {
      dt8[j] = (int8_t)dts[j];
      convert |= dts[j] != out_dt;
    }
    st = nng_dalloc(g, n, &d_in, err);
  }
  if (!st) st = nng_dalloc(g, n * sizeof(int32_t), &d_idx, err);
  if (!st) st = nng_dalloc(g, (size_t)n_bufs * sizeof(void *), &d_ptrs, err);
  if (!st && convert) st = nng_dalloc(g, (size_t)n_bufs, &d_dt, err);
  if (!st) {
    cudaError_t e1 = out->n ? cudaMemcpy(d_in, src_in, out->n, cudaMemcpyHostToDevice) : cudaSuccess;
    cudaError_t e2 = out->n ? cudaMemcpy(d_idx, idx32, out->n * sizeof(int32_t), cudaMemcpyHostToDevice) : cudaSuccess;
    cudaError_t e3 = cudaMemcpy(d_ptrs, ptrs, (size_t)n_bufs * sizeof(void *), cudaMemcpyHostToDevice);
    cudaError_t e4 = convert ? cudaMemcpy(d_dt, dt8, (size_t)n_bufs, cudaMemcpyHostToDevice) : cudaSuccess;
    if (e1 != cudaSuccess || e2 != cudaSuccess || e3 != cudaSuccess || e4 != cudaSuccess) {
      nn__set_error(err, "cudaMemcpy of a copy map failed: %s", cudaGetErrorString(e1 ? e1 : e2 ? e2 : e3 ? e3 : e4));
      st = CUDAQ_NN_ERR_CUDA;
    }
  }
  cm->n_bufs = n_bufs;
  for (int j = 0; j < n_bufs && j < NNG_MAP_HOST_BUFS; j++) cm->host_bufs[j] = ptrs[j];
  free(src_in); free(idx64); free(idx32); free(ptrs);
  cm->bufs = (const void *const *)d_ptrs;
  cm->src = (const uint8_t *)d_in;
  cm->idx = (const int32_t *)d_idx;
  cm->dts = (const int8_t *)d_dt;
  return st;
}

static cudaq_nn_status_t build_steps(cudaq_nn_gpu *g, cudaq_nn_error_t *err) {
  const cudaq_nn_model_t *m = g->m;
  int *consumers = (int *)calloc(m->n_values + 1, sizeof(int));
  int *relu_of_conv = (int *)malloc((m->n_nodes + 1) * sizeof(int));
  int *fused = (int *)calloc(m->n_nodes + 1, sizeof(int));
  int *producer = (int *)malloc((m->n_values + 1) * sizeof(int));
  unsigned char *absorbed = (unsigned char *)calloc(m->n_nodes + 1, 1);
  if (!consumers || !relu_of_conv || !fused || !producer || !absorbed) {
    free(consumers); free(relu_of_conv); free(fused); free(producer); free(absorbed);
    return CUDAQ_NN_ERR_NO_MEMORY;
  }
  for (size_t i = 0; i < m->n_nodes; i++) relu_of_conv[i] = -1;
  find_fused_relu(m, consumers, relu_of_conv);
  nng_producers(m, producer);
  if (!nng_fuse_off()) nng_plan_copy_absorb(m, producer, absorbed);
  for (size_t i = 0; i < m->n_nodes; i++)
    if (relu_of_conv[i] >= 0) fused[relu_of_conv[i]] = 1;
  cudaq_nn_status_t st = CUDAQ_NN_OK;
  /* Buffers: constants uploaded, graph inputs and node outputs allocated,
   * reshape-like nodes and fused ReLUs alias their input. */
  for (size_t v = 0; v < m->n_values && !st; v++)
    if (m->values[v].data) st = upload_const(g, (int)v, err);
  for (size_t i = 0; i < m->n_inputs && !st; i++)
    st = nng_dalloc(g, m->values[m->inputs[i]].n * nng_dsize(g->sdt[m->inputs[i]]), &g->dev[m->inputs[i]], err);
  for (size_t i = 0; i < m->n_nodes && !st; i++) {
    const nn_node_t *node = &m->nodes[i];
    int o = node->out[0];
    if (node->folded) continue;
    if (nng_is_alias_op(node->op) || fused[i]) {
      g->dev[o] = g->dev[node->in[0]];
      continue;
    }
    st = nng_dalloc(g, m->values[o].n * nng_dsize(g->sdt[o]), &g->dev[o], err);
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
    st = nng_dalloc(g, m->values[v].n * nng_dsize(m->values[v].dtype), &g->dev_in[i], err);
    step *s = st ? NULL : add_step(g, ST_CONVERT);
    if (!st && !s) st = CUDAQ_NN_ERR_NO_MEMORY;
    if (s) {
      s->cin = g->dev_in[i]; s->cin_dt = m->values[v].dtype;
      s->cout = g->dev[v]; s->cout_dt = g->sdt[v]; s->n = (int64_t)m->values[v].n;
    }
  }
  for (size_t i = 0; i < m->n_nodes && !st; i++) {
    const nn_node_t *node = &m->nodes[i];
    if (node->folded || fused[i] || nng_is_alias_op(node->op) || absorbed[i]) continue;
    const nn_value_t *out = &m->values[node->out[0]];
    step *s = add_step(g, ST_ELEMENTWISE);
    if (!s) { st = CUDAQ_NN_ERR_NO_MEMORY; break; }
    s->node = (int)i;
    if (node->op == NN_OP_CONV) {
      s->kind = ST_CONV;
      s->conv = g->n_convs;
      st = build_conv(g, (int)i, relu_of_conv[i], err);
    } else if (node->op == NN_OP_MATMUL || node->op == NN_OP_GEMM) {
      s->kind = ST_GEMM;
      fill_gemm(g, node, &s->gm);
      /* A written by an absorbed copy: read through its map (gpu_fuse.cu). */
      const int a = nng_source_node(m, producer, node->in[0]);
      if (a >= 0 && absorbed[a] && m->nodes[a].op != NN_OP_CAST) {
        copy_map cm;
        st = upload_copy_map(g, producer, absorbed, a, g->sdt[node->in[0]], &cm, err);
        s->gm.a_bufs = cm.bufs;
        s->gm.a_src = cm.src;
        s->gm.a_idx = cm.idx;
        s->a_nbufs_h = cm.n_bufs <= NNG_MAP_HOST_BUFS ? cm.n_bufs : -1;
        memcpy(s->a_bufs_h, cm.host_bufs, sizeof cm.host_bufs);
      }
    } else if (nn__is_move_op(node->op)) {
      s->kind = ST_MOVE;
      copy_map cm;
      st = upload_copy_map(g, producer, absorbed, (int)i, g->sdt[node->out[0]], &cm, err);
      s->mv.n = (int64_t)out->n;
      s->mv.elem_size = (int)nng_dsize(g->sdt[node->out[0]]);
      s->mv.in = cm.bufs;
      s->mv.src_in = cm.src;
      s->mv.src_idx = cm.idx;
      s->mv.in_dt = cm.dts;
      s->mv.out_dt = g->sdt[node->out[0]];
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
    st = nng_dalloc(g, m->values[v].n * nng_dsize(m->values[v].dtype), &g->dev_out[i], err);
    step *s = st ? NULL : add_step(g, ST_CONVERT);
    if (!st && !s) st = CUDAQ_NN_ERR_NO_MEMORY;
    if (s) {
      s->cin = g->dev[v]; s->cin_dt = g->sdt[v];
      s->cout = g->dev_out[i]; s->cout_dt = m->values[v].dtype; s->n = (int64_t)m->values[v].n;
    }
  }
  if (!st) nng_fuse_elementwise(g);
  if (!st) nng_plan_tails(g, absorbed);
  if (!st) nng_fuse_gemm_chains(g, absorbed);
  free(consumers); free(relu_of_conv); free(fused); free(producer); free(absorbed);
  return st;
}

static int conv_of_node(const cudaq_nn_gpu *g, size_t node) {
  for (int i = 0; i < g->n_convs; i++)
    if (g->convs[i].node == (int)node) return i;
  return -1;
}

/* NDHWC edges (issue 12). A convolution's output value may stay
 * channels-last when, in an FP16 engine that may choose the channels-last
 * kernel (AUTO or forced CL), the producer can run that kernel with its own
 * input layout and every consumer is a convolution that reads the value as
 * its input X only and can run the kernel with NDHWC input (C % 8 == 0);
 * graph outputs stay NCDHW. Convolutions joined by such edges form a chain,
 * tuned as a whole (gpu_tune.cu): either every edge is NDHWC or none is.
 * Node order is topological, so a producer's lay_in is known before its
 * output edge is considered. */
static void plan_layouts(cudaq_nn_gpu *g) {
  const cudaq_nn_model_t *m = g->m;
  for (int i = 0; i < g->n_convs; i++) {
    g->convs[i].chain = i;
    g->convs[i].producer = -1;
  }
  const cudaq_nn_conv_impl_t want = g->opts.conv_impl;
  if (!g->half || (want != CUDAQ_NN_CONV_AUTO && !forced_cl(want))) return;
  for (int i = 0; i < g->n_convs; i++) {
    conv_state *c = &g->convs[i];
    const int v = c->out_value;
    int ok = c->cl_ok[c->lay_in], n_cons = 0;
    for (size_t k = 0; k < m->n_outputs; k++) ok &= m->outputs[k] != v;
    for (size_t j = 0; j < m->n_nodes && ok; j++) {
      const nn_node_t *nd = &m->nodes[j];
      if (nd->folded) continue;
      int uses = 0;
      for (int k = 0; k < nd->n_in; k++) uses += nd->in[k] == v;
      if (!uses) continue;
      const int cj = conv_of_node(g, j);
      ok = cj > i && uses == 1 && nd->in[0] == v && g->convs[cj].cl_ok[1];
      n_cons++;
    }
    if (!ok || n_cons == 0) continue;
    c->lay_out = 1;
    for (size_t j = 0; j < m->n_nodes; j++) {
      const int cj = conv_of_node(g, j);
      if (cj < 0 || m->nodes[j].folded || m->nodes[j].in[0] != v) continue;
      conv_state *d = &g->convs[cj];
      d->lay_in = 1;
      d->producer = i;
      const int old = d->chain;
      for (int k = 0; k < g->n_convs; k++)
        if (g->convs[k].chain == old) g->convs[k].chain = c->chain;
    }
  }
}

/* ------------------------------------------------------------------------ */
/* Enqueue and tuning                                                        */

cudaq_nn_status_t nng_enqueue_conv(cudaq_nn_gpu *g, const conv_state *c, int impl, int algo, size_t ws, int in_cl,
                                   int out_cl, cudaq_nn_error_t *err) {
  if (impl == IMPL_OWN) {
    CK(nnk_launch_conv(c->p, g->half, g->stream));
    return CUDAQ_NN_OK;
  }
  if (impl == IMPL_TC) {
    CK(nnk_launch_tc(c->p, c->tc_w, c->b32, algo, g->stream));
    return CUDAQ_NN_OK;
  }
  if (impl == IMPL_STACK) { /* the whole stack from its first member; nothing from the others */
    const stack_state *st = &g->stacks[c->stack];
    if (st->conv[0] != (int)(c - g->convs)) return CUDAQ_NN_OK;
    if (algo == STACK_CLUSTER) {
      if (!st->cn_ok) {
        nn__set_error(err, "convolution stack #%d has no cluster plan", c->stack);
        return CUDAQ_NN_ERR_UNSUPPORTED;
      }
      CK(nnk_launch_cnet(st->cn, st->cn_smem, g->stream));
    } else if (algo == STACK_CGRID) {
      if (!st->n_cg_rs) {
        nn__set_error(err, "convolution stack #%d has no grid-mode plan", c->stack);
        return CUDAQ_NN_ERR_UNSUPPORTED;
      }
      CK(nnk_launch_cnet(st->cg, st->cg_smem, g->stream));
    } else {
      CK(nnk_launch_stack(st->s, st->smem, g->stream));
    }
    return CUDAQ_NN_OK;
  }
  if (impl == IMPL_CL) {
    CK(nnk_launch_cl(c->p, in_cl, out_cl, c->cl_w[in_cl], c->b32, algo, g->stream, &c->cf));
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
      case ST_FUSED: if (s->fz.n) CK(nnk_launch_fused(s->fz, g->stream)); break;
      case ST_GEMM: {
        nnk_gemm_pair q;
        q.p[0] = s->gm;
        q.p[1] = s->gm2;
        q.n = s->paired ? 2 : 1;
        q.split = 0; /* set by the launcher */
        CK(nnk_launch_gemm(q, g->half, g->stream));
        break;
      }
      case ST_TAIL: CK(nnk_launch_tail(s->tl, g->half, g->stream)); break;
      case ST_CONVERT: CK(nnk_launch_convert(s->cin, s->cin_dt, s->cout, s->cout_dt, s->n, g->stream)); break;
      case ST_CONV: {
        const conv_state *c = &g->convs[s->conv];
        TRY(nng_enqueue_conv(g, c, c->impl, c->algo, c->ws, c->in_cl, c->out_cl, err));
        break;
      }
    }
  }
  return CUDAQ_NN_OK;
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
  plan_layouts(g);
  TRY(nng_plan_stacks(g, err));
  TRY(nng_make_key(g, g->opts.device, err));
  TRY(nng_select_algorithms(g, err));
  TRY(nng_fold_first_layers(g, err));
  nng_fuse_after_tuning(g);
  nng_pair_gemms(g);
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
      g->opts.conv_impl < CUDAQ_NN_CONV_AUTO || g->opts.conv_impl > CUDAQ_NN_CONV_STACK || g->opts.concurrent < 0) {
    free(g);
    nn__set_error(err, "bad precision, conv_impl or concurrent option");
    return CUDAQ_NN_ERR_INVALID_ARG;
  }
  if (g->opts.concurrent < 1) g->opts.concurrent = 1; /* 0: a zeroed struct, as the default */
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
  free(g->alloc_sizes);
  free(g->steps);
  free(g->convs);
  free(g->stacks);
  free(g->devprog_host);
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
size_t cudaq_nn_gpu_device_bytes(const cudaq_nn_gpu_t *g) { return g ? g->alloc_bytes + g->ws_bytes : 0; }
cudaq_nn_plan_state_t cudaq_nn_gpu_plan_state(const cudaq_nn_gpu_t *g) {
  return g ? g->plan_state : CUDAQ_NN_PLAN_NONE;
}

cudaq_nn_status_t cudaq_nn_gpu_launch(cudaq_nn_gpu_t *g, void *stream) {
  if (!g) return CUDAQ_NN_ERR_INVALID_ARG;
  return cudaGraphLaunch(g->exec, (cudaStream_t)stream) == cudaSuccess ? CUDAQ_NN_OK : CUDAQ_NN_ERR_CUDA;
}

cudaq_nn_status_t cudaq_nn_gpu_enqueue(cudaq_nn_gpu_t *g, void *stream, cudaq_nn_error_t *err) {
  if (!g) {
    nn__set_error(err, "NULL engine");
    return CUDAQ_NN_ERR_INVALID_ARG;
  }
  /* The launchers all take g->stream (and cuDNN its handle's stream): both
   * point at the caller's stream for this one pass, then back. The eager run
   * at create has loaded every kernel and built cuDNN's plans, so nothing
   * here allocates or synchronizes inside a capture. */
  const cudaStream_t own = g->stream;
  g->stream = (cudaStream_t)stream;
  cudaq_nn_status_t st = CUDAQ_NN_OK;
  if (cudnnSetStream(g->cudnn, g->stream) != CUDNN_STATUS_SUCCESS) {
    nn__set_error(err, "cudnnSetStream");
    st = CUDAQ_NN_ERR_CUDA;
  } else {
    st = enqueue_all(g, err);
  }
  g->stream = own;
  if (cudnnSetStream(g->cudnn, own) != CUDNN_STATUS_SUCCESS && st == CUDAQ_NN_OK) {
    nn__set_error(err, "cudnnSetStream (back to the engine's stream)");
    st = CUDAQ_NN_ERR_CUDA;
  }
  return st;
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
    if (!inputs[i] || input_sizes[i] != v->n * nng_dsize(v->dtype)) {
      nn__set_error(err, "input %zu ('%.100s'): %zu bytes given, %zu expected", i, v->name, input_sizes[i],
                    v->n * nng_dsize(v->dtype));
      return CUDAQ_NN_ERR_INVALID_ARG;
    }
  }
  for (size_t i = 0; i < m->n_outputs; i++) {
    const nn_value_t *v = &m->values[m->outputs[i]];
    if (!outputs[i] || output_sizes[i] != v->n * nng_dsize(v->dtype)) {
      nn__set_error(err, "output %zu ('%.100s'): %zu bytes given, %zu expected", i, v->name, output_sizes[i],
                    v->n * nng_dsize(v->dtype));
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

/* The last run's profile of a stack (CUDAQ_NN_STACK_PROF): per layer, its
 * first item's operand loads, MMAs and stores on CTA 0, then the rest of
 * the layer up to the barrier's end; in µs at the device's clock rate.
 * A stack's profile stamps (CUDAQ_NN_STACK_PROF, CUDAQ_NN_CNET_PROF) from the
 * last run; for the cluster kernel the phases are: cluster wait and window
 * gather ("load"), the weights' wait ("mma"), the products and epilogue
 * ("store"), the block barrier ("rest"). */
static size_t describe_stack_profile(const cudaq_nn_gpu *g, const stack_state *st, const long long *prof, char *buf,
                                     size_t len) {
  long long t[NNK_STACK_PROF_SLOTS];
  int khz = 0;
  if (cudaMemcpy(t, prof, sizeof t, cudaMemcpyDeviceToHost) != cudaSuccess ||
      cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, g->opts.device) != cudaSuccess || khz <= 0)
    return 0;
  const double us = 1000.0 / khz;
  size_t used = 0;
  long long prev = t[0];
  for (int l = 0; l < st->L && used < len; l++) {
    const long long *q = t + 1 + 4 * l;
    int w = snprintf(buf + used, len - used, "  layer %d: load %.2f, mma %.2f, store %.2f, rest + barrier %.2f us\n", l,
                     (q[0] - prev) * us, (q[1] - q[0]) * us, (q[2] - q[1]) * us, (q[3] - q[2]) * us);
    if (w < 0) return used;
    used += (size_t)w;
    prev = q[3];
  }
  int w = used < len ? snprintf(buf + used, len - used, "  last phase %.2f us, total %.2f us (CTA 0)\n",
                                (t[NNK_STACK_PROF_SLOTS - 1] - prev) * us, (t[NNK_STACK_PROF_SLOTS - 1] - t[0]) * us)
                     : -1;
  return w < 0 ? used : used + (size_t)w;
}

/* CUDAQ_NN_CNET_PROF: CTA 0's stamps of a cluster-kernel plan (cluster or
 * grid mode). */
static size_t describe_cnet_profile(const cudaq_nn_gpu *g, const stack_state *st, const long long *prof, char *buf,
                                    size_t len) {
  size_t used = 0;
  used += describe_stack_profile(g, st, prof, buf + used, len - used);
  long long t[NNK_CNET_PROF_SLOTS];
  int khz = 0;
  if (st->L <= 4 && cudaMemcpy(t, prof, sizeof t, cudaMemcpyDeviceToHost) == cudaSuccess &&
      cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, g->opts.device) == cudaSuccess && khz > 0) {
    const long long *s0 = t + NNK_STACK_PROF_SLOTS; /* the first layer's start-up */
    const double us = 1000.0 / khz;
    int w = snprintf(buf + used, len - used,
                     "    start: bias and taps %.2f, weights issued %.2f, masks %.2f, window cleared and "
                     "PDL wait %.2f, input loaded and stored %.2f us\n",
                     (s0[0] - t[0]) * us, (s0[2] - s0[0]) * us, (s0[3] - s0[2]) * us, (s0[4] - s0[3]) * us,
                     (t[1] - s0[4]) * us);
    if (w > 0 && (size_t)w < len - used) used += (size_t)w;
    for (int l = 0; l < st->L && used < len; l++) {
      const long long *q = t + 1 + 4 * st->L + 4 * l; /* the cluster kernel's stamps inside a layer */
      w = snprintf(buf + used, len - used, "    layer %d inside: rows %.2f, products %.2f, sums %.2f, epilogue %.2f us\n",
                       l, (q[0] - t[2 + 4 * l]) * us, (q[1] - q[0]) * us, (q[2] - q[1]) * us, (t[3 + 4 * l] - q[2]) * us);
      if (w < 0) break;
      used += (size_t)w;
    }
  }
  return used;
}

cudaq_nn_status_t cudaq_nn_gpu_describe(const cudaq_nn_gpu_t *g, char *buf, size_t len) {
  if (!g || !buf || len == 0) return CUDAQ_NN_ERR_INVALID_ARG;
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < g->n_convs && used < len; i++) {
    const conv_state *c = &g->convs[i];
    const nn_node_t *node = &g->m->nodes[c->node];
    int w = snprintf(buf + used, len - used,
                     "conv #%d '%s' (%dx%dx%d -> %d ch, %dx%dx%d out%s): own %.2f us, cudnn %.2f us, tc %.2f us,"
                     " cl %.2f us, cl chain %.2f us -> %s %d%s%s%s\n",
                     i, node->name, c->p.C, c->p.k[0], c->p.k[1], c->p.M, c->p.out3[0], c->p.out3[1],
                     c->p.out3[2], c->p.relu ? ", +relu" : "", c->t_own, c->t_cudnn, c->t_tc, c->t_cl, c->t_cl_chain,
                     c->impl == IMPL_CUDNN         ? "cudnn algo"
                     : c->impl == IMPL_CUDNN_FUSED ? "cudnn-fused algo"
                     : c->impl == IMPL_TC          ? "tc cfg"
                     : c->impl == IMPL_CL          ? "cl algo"
                     : c->impl == IMPL_STACK       ? "stack"
                                                   : "own",
                     c->algo, c->in_cl ? ", in NDHWC" : "", c->out_cl ? ", out NDHWC" : "",
                     c->folded_into ? ", folded into the next one's window (no launch)"
                     : c->cf.first.b ? ", first layer folded into its window" : "");
    if (w < 0) break;
    used += (size_t)w;
  }
  for (int i = 0; i < g->n_steps && used < len; i++) {
    const step *s = &g->steps[i];
    if (s->kind != ST_TAIL) continue;
    const nnk_tail_prod *p = s->tl.p;
    int w = snprintf(buf + used, len - used,
                     "tail (threshold chain + %d product%s, one kernel): %lldx%lld K %lld%s%s\n", s->tl.n,
                     s->tl.n > 1 ? "s" : "", (long long)p[0].M, (long long)p[0].N, (long long)p[0].K,
                     p[0].epi ? " parity" : "", s->tl.n > 1 ? (p[1].epi ? "; second parity" : "; second stored") : "");
    if (w < 0) break;
    used += (size_t)w;
  }
  for (int i = 0; i < g->n_stacks && used < len; i++) {
    const stack_state *st = &g->stacks[i];
    char cn[200] = "no cluster plan";
    if (st->cn_ok) {
      const int side = nng_cnet_side(g, st);
      int w = snprintf(cn, sizeof cn, "as one cluster of %d (%d cells each, %zu B smem, rows %s%s): %.2f us",
                       st->cn.cl, st->cn.R, st->cn_smem, st->cn.push ? "pushed" : "gathered",
                       st->cn.fold.x ? ", input copy folded in" : "", st->t_cnet);
      if (side > 1 && w > 0 && (size_t)w < sizeof cn) /* the cost tune_stacks compared (concurrent engines) */
        snprintf(cn + w, sizeof cn - (size_t)w, ", %d at once: %.2f us each", side, st->t_cnet / (float)side);
    }
    char cg[200] = "no grid-mode plan";
    if (st->n_cg_rs)
      snprintf(cg, sizeof cg, "in grid mode %d CTAs (%d cells each, %zu B smem, %d row counts timed%s): %.2f us",
               st->cg.cl, st->cg.R, st->cg_smem, st->n_cg_rs, st->cg.fold.x ? ", input copy folded in" : "", st->t_cg);
    const char *used_as = !st->use                      ? "not used"
                          : st->kind == STACK_CLUSTER ? (st->cn.wg ? "used, cluster, wgmma" : "used, cluster, mma.sync")
                          : st->kind == STACK_CGRID   ? (st->cg.wg ? "used, grid mode, wgmma" : "used, grid mode, mma.sync")
                                                      : "used, grid";
    int w = snprintf(buf + used, len - used,
                     "stack #%d (%d layers from conv #%d, grid %d, brick %dx%dx%d, %zu B smem): %.2f us, %s, %s, "
                     "members %.2f us -> %s\n",
                     i, st->L, st->conv[0], st->s.grid, st->s.bk[0], st->s.bk[1], st->s.bk[2], st->smem, st->t_stack,
                     cn, cg, st->t_members, used_as);
    if (w < 0) break;
    used += (size_t)w;
    if (st->s.prof && used < len) used += describe_stack_profile(g, st, st->s.prof, buf + used, len - used);
    if (st->cn.prof && used < len) used += describe_cnet_profile(g, st, st->cn.prof, buf + used, len - used);
    if (st->cg.prof && used < len) used += describe_cnet_profile(g, st, st->cg.prof, buf + used, len - used);
  }
  if (used < len) used += nng_describe_devprog(g, buf + used, len - used);
  return CUDAQ_NN_OK;
}
