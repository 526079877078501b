/* Thin kernels of the NN GPU engine: elementwise with broadcasting, index
 * map copies, direct convolution (+bias, +ReLU), matrix products, precision
 * conversion. Float tensors are stored as float or __half; arithmetic is in
 * float. Element types are the ONNX numbers (cudaq_nn_dtype_t). */
#ifndef CUDAQ_NN_GPU_KERNELS_CUH
#define CUDAQ_NN_GPU_KERNELS_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "cudaq/nn/gpu_engine.h" /* cudaq_nn_pdl_* */
#include "cudaq/nn/nn.h"
#include "gpu_algos.h" /* the channels-last algorithm numbers, NNK_CL_* */

#define NNK_MAX_RANK CUDAQ_NN_MAX_RANK

/* ReLU that keeps NaN, as onnxruntime and PyTorch do (fmaxf(NaN, 0) is 0):
 * every ReLU site, fused ones included (own and tensor-core convolutions),
 * goes through it. */
__device__ __forceinline__ float nnk_relu_nan(float v) { return v > 0.0f ? v : (v != v ? v : 0.0f); }

/* Programmatic dependent launch (PDL, sm_90). Every kernel of the engine is
 * launched through nnk_launch_ex, which lets it start while the kernel
 * before it in the stream (or graph) is still finishing, so that its launch
 * latency overlaps that kernel's tail. Each kernel therefore begins with
 * nnk_pdl_begin() and reads nothing an earlier kernel wrote before it:
 * griddepcontrol.wait returns once the prerequisite grid has completed and
 * its memory operations are visible (transitively: that grid waited for its
 * own). Work on constants (weights, index maps) may come first.
 * launch_dependents lets the next kernel be scheduled as soon as every block
 * of this one has started. CUDAQ_NN_PDL=0 in the environment launches
 * without the attribute (then both instructions are no-ops). */
__device__ __forceinline__ void nnk_pdl_launch_dependents() { cudaq_nn_pdl_launch_dependents(); }
__device__ __forceinline__ void nnk_pdl_wait() { cudaq_nn_pdl_wait(); }
__device__ __forceinline__ void nnk_pdl_begin() {
  nnk_pdl_launch_dependents();
  nnk_pdl_wait();
}
/* 1 when kernels are launched with PDL: a device of compute capability >= 9
 * and CUDAQ_NN_PDL not "0" (decided once per process). */
int nnk_pdl_enabled(void);

/* Launches kernel k (grid, block, dynamic shared memory, stream) with PDL
 * when enabled and, for cluster_z > 1, clusters of 1 x 1 x cluster_z blocks;
 * returns the launch error. */
template <typename... P, typename... A>
cudaError_t nnk_launch_ex(void (*k)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, unsigned cluster_z,
                          A... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute at[2];
  unsigned n = 0;
  if (nnk_pdl_enabled()) {
    at[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[n].val.programmaticStreamSerializationAllowed = 1;
    n++;
  }
  if (cluster_z > 1) {
    at[n].id = cudaLaunchAttributeClusterDimension;
    at[n].val.clusterDim.x = 1;
    at[n].val.clusterDim.y = 1;
    at[n].val.clusterDim.z = cluster_z;
    n++;
  }
  cfg.attrs = n ? at : NULL;
  cfg.numAttrs = n;
  cudaError_t e = cudaLaunchKernelEx(&cfg, k, args...);
  return e != cudaSuccess ? e : cudaGetLastError();
}

/* Elementwise operator over up to three broadcast inputs. */
struct nnk_elementwise {
  int op;                       /* nn_op_t */
  int rank;
  int64_t n;
  int64_t dims[NNK_MAX_RANK];
  int64_t strides[3][NNK_MAX_RANK];
  const void *in[3];
  int in_dt[3];
  void *out;
  int out_dt;
  int gelu_tanh;
  int flat; /* NNK_EW_FLAT set: no index arithmetic; bit k set: input k is contiguous
               (offset i), clear: a scalar (offset 0). Clear: through dims/strides. */
};
#define NNK_EW_FLAT 8

/* A chain of flat elementwise nodes run as one kernel (gpu_fuse.cu builds
 * it): every op has the chain's n elements; op j reads arg[k] >= 0, tensor
 * in[arg] (offset i, or 0 when bit arg of in_scalar is set), or arg < 0,
 * the result of op -arg-1; the last op writes out. */
#define NNK_FUSE_MAX_OPS 16
#define NNK_FUSE_MAX_IN 8
#define NNK_FUSE_SEED (-100) /* arg: the value of the kernel the chain is the epilogue of */
struct nnk_fused_op {
  int op, n_in, arg[3], out_dt, gelu_tanh;
};
struct nnk_fused {
  int64_t n;
  int n_ops, n_in;
  unsigned in_scalar;
  const void *in[NNK_FUSE_MAX_IN];
  int in_dt[NNK_FUSE_MAX_IN];
  nnk_fused_op ops[NNK_FUSE_MAX_OPS];
  void *out;
  int seed_dt; /* as an epilogue: the element type of the seed value */
  int generic; /* A/B only (CUDAQ_NN_EW_GENERIC=1 at build_fused): no short paths (gpu_ew.cuh) */
};

/* out[i] = in[src_in[i]][src_idx[i]] */
struct nnk_move {
  int64_t n;
  int elem_size;
  const void *const *in;        /* device array: the node's input buffers (any number) */
  const uint8_t *src_in;
  const int32_t *src_idx;
  void *out;
  const int8_t *in_dt; /* NULL: a plain copy; else the buffers' element types (a Cast
                          absorbed into the copy), converted to out_dt as Cast does */
  int out_dt;
};

/* Y = act(conv(X, W) + B) over (N, C, D, H, W) with 1D/2D as D = H = 1. */
struct nnk_conv {
  int N, C, M;
  int in3[3], out3[3], k[3], stride[3], dil[3], pad0[3];
  const void *x, *w, *b;
  void *y;
  int relu;
};

/* Batched matrix product: Y[b][i][j] = alpha * sum_k A[..] B[..] + beta * C[..]. */
struct nnk_gemm {
  int64_t M, N, K, nb;
  int br;
  int64_t bdims[NNK_MAX_RANK], sa[NNK_MAX_RANK], sb[NNK_MAX_RANK];
  int64_t sai, sak, sbk, sbj, sc0, sc1;
  float alpha, beta;
  const void *a, *b, *c;
  void *y;
  /* A read through a copy map (an absorbed Gather/Concat: element e of A is
   * a_bufs[a_src[e]][a_idx[e]]) when a_idx is set. */
  const void *const *a_bufs;
  const uint8_t *a_src;
  const int32_t *a_idx;
  /* An elementwise chain run on each result (its seed) instead of storing
   * it in y, when set (device memory). */
  const nnk_fused *epi;
  /* With a map: a flat elementwise chain (device memory) whose output is map
   * buffer a_chain_buf is evaluated at the element's index in place of the
   * load (its own step is gone: the chain's output is never stored). */
  const nnk_fused *a_chain;
  int a_chain_buf;
  /* B is a constant: read before the grid dependency wait (PDL). */
  int b_const;
};

/* One launch of up to two independent matrix products (gpu_fuse.cu pairs
 * consecutive ones that do not read each other's results): blocks
 * [0, split) run p[0], the others p[1]. Index maps, B constants and the
 * epilogue and chain programs are read before the dependency wait. */
struct nnk_gemm_pair {
  nnk_gemm p[2];
  int n;
  unsigned split;
};

/* A predecoder's tail as one small kernel (gpu_tail.cu; gpu_fuse.cu's
 * nng_plan_tails finds it): a threshold chain E = (X > thr) * V, never
 * stored, read through the index maps of one or two matrix products with a
 * constant B, each product's result stored (epi 0) or run through the
 * parity epilogue out = r - (r / c) * c, r = Cast<int32>(result) [+ addend]
 * (epi 1). Every operand is integer-valued and small (checked when it is
 * planned), so the float sums are exact in any order and the results are
 * bit-identical to the generic steps it replaces. */
#define NNK_TAIL_BLOCK 256
struct nnk_tail_prod {
  int64_t M, N, K, sai, sak, sbk, sbj;
  const void *const *bufs; /* A's map: element e is bufs[src[e]][idx[e]], or E's element idx when src[e] == e_src */
  const uint8_t *src;
  const int32_t *idx;
  int e_src;
  const void *b; /* B, a constant of the products' element type */
  void *y;       /* epi 0: the result, in the products' element type */
  int epi;
  const int32_t *addend; /* epi 1: an INT32 tensor of M * N elements, or NULL */
  int32_t c;
  int32_t *out; /* epi 1: the INT32 result */
  int lg;       /* log2 of the lanes per output (<= log2 NNK_TAIL_BLOCK) */
  unsigned blocks;
};
struct nnk_tail {
  const void *x, *thr, *v; /* E's chain: X and V tensors (V scalar when v_scalar), thr a scalar */
  int x_dt, thr_dt, v_dt, v_scalar;
  nnk_tail_prod p[2];
  int n;
};

/* Launchers (src/nn/gpu_kernels.cu); all asynchronous on stream. */
cudaError_t nnk_launch_elementwise(const nnk_elementwise &p, int half, cudaStream_t s);
cudaError_t nnk_launch_move(const nnk_move &p, cudaStream_t s);
cudaError_t nnk_launch_fused(const nnk_fused &p, cudaStream_t s);
cudaError_t nnk_launch_conv(const nnk_conv &p, int half, cudaStream_t s);
cudaError_t nnk_launch_bias_act(void *y, const void *b, int N, int M, int64_t plane, int relu, int half,
                                cudaStream_t s);
cudaError_t nnk_launch_gemm(const nnk_gemm_pair &p, int half, cudaStream_t s);
cudaError_t nnk_launch_tail(const nnk_tail &p, int half, cudaStream_t s); /* gpu_tail.cu */
cudaError_t nnk_launch_convert(const void *in, int in_dt, void *out, int out_dt, int64_t n,
                               cudaStream_t s);
/* Whether the own convolution kernel handles this kernel size. */
int nnk_conv_supported(const nnk_conv &p);

/* The fields the tensor-core kernels' argument structs share, by name
 * (tc_args in gpu_tc.cu, cl_args in gpu_conv_cl.cuh): operands, channels,
 * cell counts, plane and input dims, the kernel's taps, padding, dilation, ReLU. */
template <typename Args>
inline void nnk_conv_args_common(const nnk_conv &p, const __half *w, const float *b, Args *a) {
  a->x = static_cast<const __half *>(p.x);
  a->w = w;
  a->b = b;
  a->y = static_cast<__half *>(p.y);
  a->C = p.C;
  a->M = p.M;
  a->P = p.out3[0] * p.out3[1] * p.out3[2];
  a->Pin = p.in3[0] * p.in3[1] * p.in3[2];
  a->OH = p.out3[1];
  a->OW = p.out3[2];
  a->D = p.in3[0];
  a->H = p.in3[1];
  a->W = p.in3[2];
  a->kh = p.k[1];
  a->kw = p.k[2];
  a->taps = p.k[0] * p.k[1] * p.k[2];
  for (int i = 0; i < 3; i++) {
    a->dil[i] = p.dil[i];
    a->pad0[i] = p.pad0[i];
  }
  a->relu = p.relu;
}

/* Tensor-core implicit-GEMM convolution, FP16 only (src/nn/gpu_tc.cu):
 * stride 1, up to 32 taps, output dims <= input dims. Weights are packed
 * once (host) by nnk_tc_pack_weights into nnk_tc_weight_elems halves
 * ([tap][Cout padded to 64][Cin padded to 16 or 32]); the bias, if any, is
 * FP32. cfg picks the tile shape (0 .. NNK_TC_CONFIGS-1); p.x / p.y are FP16. */
#define NNK_TC_CONFIGS 6
int nnk_tc_supported(const nnk_conv &p);
int nnk_tc_config_ok(const nnk_conv &p, int cfg);
size_t nnk_tc_weight_elems(const nnk_conv &p);
void nnk_tc_pack_weights(const nnk_conv &p, const float *w, __half *out);
cudaError_t nnk_launch_tc(const nnk_conv &p, const __half *w, const float *b, int cfg, cudaStream_t s);

/* Channels-last tensor-core implicit-GEMM convolution, FP16 only
 * (src/nn/gpu_conv_cl.cu): any stride, padding and dilation (kernel dims
 * <= 31). in_cl: X is NDHWC (C % 8 == 0), else NCDHW (taps x C <= 2048);
 * out_cl: Y is written NDHWC, else NCDHW. Weights are packed once per input
 * layout by nnk_cl_pack_weights; the bias, if any, is FP32. algo = tile
 * configuration + NNK_CL_CONFIGS x (split index + NNK_CL_SPLITS x depth
 * index): split K over a cluster of 1, 2, 4, 8 or 16 CTAs (more than 1 on
 * sm_90 and later only), a ring of 4 or 8 k-steps in flight. The other
 * families' numbers follow (gpu_algos.h). */
int nnk_cl_supported(const nnk_conv &p, int in_cl);
int nnk_cl_algo_ok(const nnk_conv &p, int in_cl, int algo);
size_t nnk_cl_weight_elems(const nnk_conv &p, int in_cl);
void nnk_cl_pack_weights(const nnk_conv &p, int in_cl, const float *w, __half *out);
/* What the engine's fusion passes hand the channels-last kernel: its NCDHW
 * input read through a copy map (x_idx set; x_dts set where buffers hold
 * other types, converted as Cast does) and an elementwise chain run on each
 * NCDHW result (epi set, in device memory; the chain's seed is the FP16 result). */
/* A first layer folded into the wgmma brick's input window (b set;
 * nng_fold_first_layers, gpu_first.cu): the convolution's NDHWC input is
 * act(b[cell] + sum over the dynamic channels and the 27 taps of w * x),
 * the first layer (3 x 3 x 3, stride 1, "same" padding 1) computed where
 * the window is staged; its constant input channels (a predecoder's site
 * masks) and its bias are folded into b at engine create. Batch 1. */
#define NNK_FIRST_MAX_CD 2
struct nnk_first {
  const float *b;     /* [cells][ld]: bias + the constant channels' part at each first-layer output cell */
  const float *w;     /* [cd][27][ld]: the dynamic channels' weights (ld = M, a multiple of 8) */
  const int32_t *idx; /* [cd][cells]: the element of x at that channel and cell, or -1 (zero) */
  const void *x;      /* the dynamic channels' source (a graph input, e.g. INT32 detection events) */
  int x_dt, half_x;   /* x's element type; half_x: values rounded to FP16 first, as the copy they replace */
  int cd, ld, relu;   /* dynamic channels (<= NNK_FIRST_MAX_CD), row length of b and w, ReLU after */
};
struct nnk_conv_fuse {
  const void *const *x_bufs;
  const uint8_t *x_src;
  const int32_t *x_idx;
  const int8_t *x_dts;
  const nnk_fused *epi;
  nnk_first first;
};
cudaError_t nnk_launch_cl(const nnk_conv &p, int in_cl, int out_cl, const __half *w, const float *b, int algo,
                          cudaStream_t s, const nnk_conv_fuse *f = NULL);
/* Whether wgmma algo `algo` runs p (NDHWC input) with a first layer of cd
 * dynamic channels folded into its window (shared memory and shape). */
int nnk_cl_first_ok(const nnk_conv &p, int algo, int cd);

/* A chain of convolutions as one persistent cooperative kernel, FP16 only
 * (src/nn/gpu_stack.cu): layer l reads layer l-1's result (layer 0 an
 * NCDHW FP16 tensor), the last layer writes NCDHW FP16; every layer has
 * kernel dims 1 or 3 with "same" padding, stride 1, dilation 1, at most 1024
 * input and output channels, constant
 * weights (packed once by nnk_stack_pack_weights) and an FP32 bias or none,
 * ReLU or none. nnk_stack_plan fills everything but the pointers (w, b per
 * layer; x, y, acc): work split per layer, smem bytes, and the FP32
 * floats each of the (up to 4) layer-result buffers needs. acc buffers are
 * allocated zeroed and owned by one stack, which one stream runs at a time. */
#define NNK_STACK_MAX_LAYERS 8
#define NNK_STACK_PROF_SLOTS (2 + 4 * NNK_STACK_MAX_LAYERS)
struct nnk_stack_layer {
  int C, M, mst;         /* in / out channels, result row stride (M rounded up to 32) */
  int k[3], pad0[3], relu;
  int bn, ks, cs;        /* output channels per item (16, 32), K slices, channels per slice */
  int items, w_bytes, abuf;
  const __half *w;       /* nnk_stack_pack_weights */
  const float *b;        /* M floats, or NULL */
};
struct nnk_stack {
  int L, N, D, H, W;
  int bk[3], nbk[3], n_bricks; /* brick dims (64 cells), bricks per dim, bricks in all */
  int grid, fixed_off;
  const __half *x;
  __half *y;
  float *acc[4];
  long long *prof;       /* NULL, or 2 + 4 NNK_STACK_MAX_LAYERS cycle stamps of CTA 0 (profiling) */
  nnk_stack_layer layer[NNK_STACK_MAX_LAYERS];
};
int nnk_stack_layer_ok(const nnk_conv &p);
size_t nnk_stack_weight_elems(const nnk_conv &p);
void nnk_stack_pack_weights(const nnk_conv &p, const float *w, __half *out);
/* Profile stamps: [0] start, [1 + 4 l + k] layer l's first item with its
 * operands loaded (k = 0), multiplied (1), stored (2), then the barrier
 * after the layer passed (3); [1 + 4 NNK_STACK_MAX_LAYERS] the end. */
/* 1 and *s, *smem, *acc_floats filled when the chain can run on a grid of
 * at most sms CTAs; 0 when it cannot. force_bn (16 or 32) and force_ks
 * (the largest divisor of a layer's 16-channel blocks up to it) fix the
 * work split for tests; 0 leaves it to the cost model. smem_limit bounds
 * *smem (0: the kernel's limit, 227 KiB; the device program plans below it
 * to leave room for its caller's shared memory). */
int nnk_stack_plan(const nnk_conv *const *layers, int L, int sms, int force_bn, int force_ks, size_t smem_limit,
                   nnk_stack *s, size_t *smem, size_t *acc_floats);
/* Sets the kernel's shared-memory limit; *blocks_per_sm at smem bytes. */
cudaError_t nnk_stack_setup(size_t smem, int *blocks_per_sm);
cudaError_t nnk_launch_stack(const nnk_stack &s, size_t smem, cudaStream_t st);

/* A chain of narrow convolutions (every layer at most 32 input and output
 * channels, the stack kernel's shapes, 1 to 8 layers) as one thread-block
 * cluster per batch item, activations in shared memory (gpu_cnet.cu). x
 * NCDHW FP16 in, y NCDHW FP16 out; weights packed by nnk_stack_pack_weights,
 * FP32 bias or none, ReLU or none per layer. nnk_cnet_plan fills everything
 * but x, y and each layer's w, b for a cluster of cl CTAs (at most 16);
 * 0 when the chain does not fit. split 0 keeps every layer on four n8
 * tiles a warp (for comparisons); 1 gives a layer with at most 16 output
 * channels two. wg: the products on warpgroup MMAs where this build has
 * sm_90a code (the caller checks the device is compute capability 9.0):
 * 0 never, 1 always, 2 with one m64 block a CTA (faster there, alone).
 * nnk_cnet_setup: *clusters that can run at once (0: this cluster size
 * cannot be placed).
 *
 * push (cluster mode, at least 2 layers, where two windows fit): each
 * layer's rows go straight into the next window of every CTA whose window
 * holds them, by bulk copies counted on that CTA's mbarrier, in place of
 * the gather and the cluster barrier (gpu_cnet.cu says why and how).
 *
 * gm (grid mode): the same layers on a cooperative grid of cl CTAs per
 * batch item (no cluster, cl up to the device's resident CTAs), the
 * activations exchanged through global memory (gact, two buffers of N x P
 * rows of cn_row(max channels) halves) and, between layers, one flag per
 * (item, layer, CTA) instead of a cluster barrier: a CTA waits only for
 * the CTAs whose rows its window reads. flags (N x (L - 1) x cl words, zeroed
 * once) count the runs: a run's epoch is one more than its CTA's own
 * layer-0 flag. The engine allocates gact and flags; nnk_cnet_setup's
 * *clusters is then 1 when the grid fits on the device at once, else 0.
 *
 * fold (batch 1; nng_fold_first_layers, gpu_first.cu): the copy that
 * builds the first layer's input (a predecoder's events scattered onto the
 * grid beside constant site masks) read inside the kernel instead of run
 * before it. x then holds the copy's constant channels (FP16 NCDHW, zero in
 * the dynamic ones), which the kernel reads before its PDL wait, and after
 * it fold.idx[k][cell] names the element of fold.x that dynamic channel
 * fold.ch[k] holds at that cell (-1: zero), converted to FP16 as the copy's
 * Cast does. */
#define NNK_CNET_MAX_LAYERS 8
#define NNK_CNET_PROF_SLOTS (NNK_STACK_PROF_SLOTS + 5)
struct nnk_cnet_layer {
  int C, M, mst; /* in / out channels, packed-weight column stride */
  int k[3], relu, w_bytes;
  int nt;     /* n8 tiles of output channels per warp: 2 (at most 16 channels) or 4 */
  const __half *w;
  const float *b;
};
struct nnk_cnet {
  int L, N, D, H, W, P;
  int cl, R, mi;       /* cluster size, positions per CTA, m16 tiles per warp (at most; with wg m64 blocks per warpgroup) */
  int wg;              /* products on warpgroup MMAs (sm_90a build, compute capability 9.0) */
  int nb;              /* m64 blocks of R positions (wg) */
  int gm;              /* grid mode: cl CTAs a batch item, global activations and flags (above) */
  int push;            /* cluster mode: each layer's rows pushed into the neighbours' next window (two windows) */
  unsigned r_magic;    /* ceil(2^32 / R): q / R as a multiply-high */
  unsigned wr_magic;   /* ceil(2^32 / win_rows): the layer-0 gather's (channel, row) split */
  int halo, win_rows;  /* window: R + 2 halo positions */
  size_t off_act[2], off_win, off_win2, off_w[2], off_red, off_zero, off_mask; /* shared-memory layout (bytes) */
  const __half *x;
  __half *y;
  __half *gact[2];  /* grid mode: the activation buffers */
  unsigned *flags;  /* grid mode: N x (L - 1) x cl run counters */
  struct {
    const void *x;      /* NULL: no fold; else the dynamic channels' source (a graph input) */
    const int32_t *idx; /* [cd][P] */
    int x_dt, cd;       /* x's element type; dynamic channels (<= NNK_FIRST_MAX_CD) */
    int ch[NNK_FIRST_MAX_CD];
  } fold;
  long long *prof; /* NULL, or NNK_CNET_PROF_SLOTS cycle stamps of CTA 0: the stack kernel's layout, then
                      the first layer's start-up (bias and taps, before the weights, weights issued,
                      masks, window cleared and PDL wait) */
  nnk_cnet_layer layer[NNK_CNET_MAX_LAYERS];
};
int nnk_cnet_plan(const nnk_conv *const *layers, int L, int cl, int split, int wg, int gm, int push, nnk_cnet *s,
                  size_t *smem);
/* Grid mode: bytes of each activation buffer (gact[0], gact[1]) and of the flags. */
void nnk_cnet_grid_bytes(const nnk_cnet &s, size_t *act_bytes, size_t *flag_bytes);
cudaError_t nnk_cnet_setup(const nnk_cnet &s, size_t smem, int *clusters);
cudaError_t nnk_launch_cnet(const nnk_cnet &s, size_t smem, cudaStream_t st);

#endif
