/* GPU engine internals shared by gpu_engine.cu (buffers, steps, graph) and
 * gpu_tune.cu (algorithm selection and the plan file). */
#ifndef CUDAQ_NN_GPU_ENGINE_INTERNAL_H
#define CUDAQ_NN_GPU_ENGINE_INTERNAL_H

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudaq/nn/gpu_engine.h"
#include "gpu_kernels.cuh"
#include "nn_internal.h"

/* IMPL_TC: algo = tile configuration. IMPL_CUDNN_FUSED: cuDNN's
 * convolution with bias and activation in one call
 * (cudnnConvolutionBiasActivationForward), no separate epilogue kernel. */
enum { IMPL_OWN = 0, IMPL_CUDNN = 1, IMPL_TC = 2, IMPL_CUDNN_FUSED = 3, IMPL_CL = 4, IMPL_STACK = 5 };
static inline int is_cudnn(int impl) { return impl == IMPL_CUDNN || impl == IMPL_CUDNN_FUSED; }
/* The forced choices that run the channels-last kernel wherever it applies
 * (STACK adds the stack kernel on top of CL). */
static inline int forced_cl(cudaq_nn_conv_impl_t want) {
  return want == CUDAQ_NN_CONV_CL || want == CUDAQ_NN_CONV_STACK;
}
/* ST_TAIL: a threshold chain and the products reading it (nng_plan_tails). */
enum { ST_ELEMENTWISE, ST_MOVE, ST_CONV, ST_GEMM, ST_CONVERT, ST_FUSED, ST_TAIL };
#define NNG_MAP_HOST_BUFS 16

struct conv_state {
  int node;
  nnk_conv p;
  int own_ok, cudnn_ok, tc_ok;
  __half *tc_w;  /* weights packed for the tensor-core kernel (tc_ok) */
  float *b32;    /* FP32 bias for the tensor-core kernels, or NULL */
  /* Channels-last kernel (IMPL_CL): cl_ok[l] when it runs with input layout
   * l (1 = NDHWC) and cl_w[l] holds the weights packed for it. */
  int cl_ok[2];
  __half *cl_w[2];
  int out_value;      /* the value the step writes: the fused ReLU's output, else the conv's */
  int lay_in, lay_out; /* NDHWC possible on the input / output edge (plan_layouts) */
  int in_cl, out_cl;   /* the layouts in use (IMPL_CL only; subsets of lay_in / lay_out) */
  int chain;           /* convolutions joined by NDHWC-possible edges share a chain id */
  int producer;        /* lay_in: the convolution whose output is this one's input */
  int cl_algo_plain, cl_algo_chain; /* fastest IMPL_CL algos: NCDHW in and out / chain layouts */
  nnk_conv_fuse cf;                 /* IMPL_CL after tuning: input copy map, epilogue (gpu_fuse.cu) */
  float t_cl, t_cl_chain;           /* their times, < 0 when not measured */
  int stack;      /* the stack (gpu_stack.cu) this convolution belongs to, or -1 */
  int folded_into; /* nng_fold_first_layers: 1 + the convolution whose window computes this one, or 0 */
  __half *st_w;   /* weights packed for the stack kernel, or NULL where a layer cannot run in one */
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
  float t_plain;              /* the fastest NCDHW choice (impl_plain, algo_plain, ws_plain) */
  int impl_plain, algo_plain;
  size_t ws_plain;
};

/* A chain of convolutions that may run as one persistent kernel (IMPL_STACK
 * on every member; the first member's step launches it, the others' none). */
struct stack_state {
  int L;
  int conv[NNK_STACK_MAX_LAYERS]; /* member convolutions, in order */
  nnk_stack s;
  size_t smem;
  float t_stack, t_members; /* µs per run of the stack / of its members' own choices; < 0 when not measured */
  int use;
  /* The same chain as one cluster (gpu_cnet.cu) where it fits (cn_ok); kind
   * is what runs when use is set: STACK_GRID or STACK_CLUSTER (the members'
   * algo). t_stack is the grid kernel's time, t_cnet the cluster's. */
  nnk_cnet cn;
  size_t cn_smem;
  int cn_ok, kind;
  int cn_clusters; /* copies of the cluster kernel the device runs at once (cudaOccupancyMaxActiveClusters) */
  float t_cnet;
  /* The same kernel in grid mode (nnk_cnet::gm: a cooperative grid of
   * ceil(P / R) CTAs, activations through global memory, a flag per CTA
   * and layer; kind STACK_CGRID): cg_rs[0 .. n_cg_rs) are the rows per CTA
   * that fit on this device, cg_r the one timed fastest (t_cg; cg holds its
   * plan), gact / flags its buffers (sized for the smallest R). */
  nnk_cnet cg;
  size_t cg_smem;
  int cg_rs[8], n_cg_rs, cg_r;
  float t_cg;
  __half *cg_act[2];
  unsigned *cg_flags;
  long long *cg_prof; /* CUDAQ_NN_CNET_PROF */
  /* The copy in front of the stack, read inside the cluster kernel or its
   * grid mode (nng_fold_first_layers; the plan's fold), or n 0: its step is
   * gone from the engine's steps, the device program runs it from here. */
  nnk_move fold_mv;
};
enum { STACK_GRID = 0, STACK_CLUSTER = 1, STACK_CGRID = 2 };
/* Plans st->cg with R rows per CTA (one of st->cg_rs); 0 when it does not fit. */
int nng_cgrid_plan(const cudaq_nn_gpu *g, stack_state *st, int R);
/* The CUDAQ_NN_CNET_GRID switch: -1 unset, 0 (no grid-mode plans), 1 (grid mode wherever a cluster would be forced or chosen). */
int nng_cgrid_env(void);
/* The CUDAQ_NN_CNET_FOLD switch: -1 unset, 0 (no copy folded into the cluster kernel), 1. */
int nng_cnet_fold_env(void);
/* The CUDAQ_NN_FIRST_FOLD switch (nng_tune_first_folds): -1 unset (measured), 0 (no algorithm changed
 * for a fold), 1 (the fastest algorithm that folds, whatever the two layers' time). */
int nng_first_fold_env(void);
/* The CUDAQ_NN_CNET switch (gpu_engine.cu): -1 unset, 0 "0" (no cluster
 * nets), 1 "1" (the cluster net wherever it launches, in a used stack). */
int nng_cnet_env(void);

struct step {
  int kind;
  int node; /* the model node (for ST_FUSED: the chain's last) */
  nnk_elementwise ew;
  nnk_fused fz;
  int chain[NNK_FUSE_MAX_OPS]; /* ST_FUSED: the model nodes merged into it */
  int n_chain;
  nnk_move mv;
  nnk_gemm gm;
  nnk_gemm gm2; /* ST_GEMM, paired: a second product, independent of gm, in the same launch */
  int paired;
  nnk_tail tl; /* ST_TAIL */
  int epi_node; /* ST_GEMM: the last model node of gm's epilogue chain, or -1 */
  /* ST_GEMM with a map: the map's buffers (host copy; a_nbufs_h = -1 when
   * there are more than fit) */
  const void *a_bufs_h[NNG_MAP_HOST_BUFS];
  int a_nbufs_h;
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
  stack_state *stacks;
  int n_stacks;
  step *steps;
  int n_steps, cap_steps;
  void **allocs;
  size_t *alloc_sizes; /* allocs[i]'s bytes (nng_dfree) */
  int n_allocs, cap_allocs;
  size_t alloc_bytes; /* what nng_dalloc gave out (cudaq_nn_gpu_device_bytes, with ws_bytes) */
  void *ws;
  size_t ws_bytes;
  cudnnHandle_t cudnn;
  cudaStream_t stream;
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  cudaq_nn_plan_state_t plan_state;
  char key[512]; /* plan header: model, GPU, versions, precision, mode */
  /* cudaq_nn_gpu_device_program (gpu_devprog_build.cu): the host copy of
   * the program once built (NULL before), and what the call returned (the
   * device copy: devprog_info.program). */
  cudaq_nn_device_program_t *devprog_host;
  cudaq_nn_device_program_info_t devprog_info;
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


static inline size_t nng_dsize(int dt) { return cudaq_nn_dtype_size((cudaq_nn_dtype_t)dt); }
/* Reshape-like nodes: their output is their input's buffer, same element order. */
static inline int nng_is_alias_op(nn_op_t op) {
  return op == NN_OP_RESHAPE || op == NN_OP_IDENTITY || op == NN_OP_SQUEEZE || op == NN_OP_UNSQUEEZE;
}

/* A zeroed device buffer owned by the engine (freed at destroy). */
cudaq_nn_status_t nng_dalloc(cudaq_nn_gpu *g, size_t bytes, void **out, cudaq_nn_error_t *err);
/* Frees such a buffer before destroy (NULL, or one nng_dalloc did not give: nothing). */
void nng_dfree(cudaq_nn_gpu *g, void *p);
/* The CUDAQ_NN_TUNE_LOG line of a timed candidate (gpu_tune.cu). */
void nng_tune_log(const cudaq_nn_gpu *g, const conv_state *c, const char *impl, int algo, float us);
/* Enqueues one convolution on g->stream with the given implementation,
 * algorithm, cuDNN workspace and (IMPL_CL) layouts (gpu_engine.cu). */
cudaq_nn_status_t nng_enqueue_conv(cudaq_nn_gpu *g, const conv_state *c, int impl, int algo, size_t ws, int in_cl,
                                   int out_cl, cudaq_nn_error_t *err);
/* The CUDAQ_NN_STACK switch (gpu_engine.cu): -1 unset, 0 "0" (no stacks),
 * 1 "1" (stacks forced in AUTO where they launch). */
int nng_stack_env(void);
/* Whether this engine considers stacks at all: FP16, AUTO or forced STACK,
 * and not ruled out by CUDAQ_NN_STACK=0 (gpu_engine.cu). */
int nng_stacks_on(const cudaq_nn_gpu *g);
/* Copies of st's cluster kernel that run side by side for g's options:
 * min(options.concurrent, cn_clusters). tune_stacks divides the cluster's
 * time by it (when above 1) to compare with kernels that fill the GPU. */
int nng_cnet_side(const cudaq_nn_gpu *g, const stack_state *st);
/* Finds the chains that may run as one kernel and prepares them (after
 * plan_layouts; gpu_engine.cu). */
cudaq_nn_status_t nng_plan_stacks(cudaq_nn_gpu *g, cudaq_nn_error_t *err);
/* The device program's line for cudaq_nn_gpu_describe (and its last call's
 * profile with CUDAQ_NN_DEVPROG_PROF=1); bytes written (gpu_devprog_build.cu). */
size_t nng_describe_devprog(const cudaq_nn_gpu *g, char *buf, size_t len);
/* Graph passes (gpu_fuse.cu); off with CUDAQ_NN_NO_FUSE set (A/B measurements). */
int nng_fuse_off(void);
/* producer[v]: the node writing value v, or -1. */
void nng_producers(const cudaq_nn_model_t *m, int *producer);
/* The node writing value v, past reshape-like aliases; -1 for an input or constant. */
int nng_source_node(const cudaq_nn_model_t *m, const int *producer, int v);
/* absorbed[node] = 1 for nodes that get no step of their own: copy nodes
 * whose every reader is a copy node or reads them as a matrix product's A
 * (which compose their map), and Casts whose every reader is a copy node
 * (which converts as it copies). */
void nng_plan_copy_absorb(const cudaq_nn_model_t *m, const int *producer, unsigned char *absorbed);
/* The composed map of copy node ni: element i comes from bufs[src[i]][idx[i]]
 * of type dts[src[i]] (*n_bufs <= 255 buffers). */
cudaq_nn_status_t nng_copy_map(const cudaq_nn_gpu *g, const int *producer, const unsigned char *absorbed, int ni,
                               uint8_t *src, int64_t *idx, const void **bufs, int *dts, int *n_bufs);
/* Whether every reader of value v is one of the n model nodes in chain,
 * and v is no graph output (aliases: readers through reshape-like nodes
 * count as their readers; gpu_fuse.cu). */
int nng_read_by_chain(const cudaq_nn_model_t *m, int v, const int *chain, int n, int aliases);
/* After tuning: a copy (ST_MOVE) read only by a 3 x 3 x 3 "same"
 * convolution read only by a wgmma brick or flat tile convolution; the copy's channels
 * that come from constants (a predecoder's site masks) and the first
 * convolution's bias are folded into a per-cell term at create, and the
 * first layer is computed where the second stages its input window
 * (nnk_first): the copy's and the first convolution's steps go (gpu_first.cu).
 * Off with CUDAQ_NN_NO_FIRST=1 (A/B) or CUDAQ_NN_NO_FUSE.
 * Also: a copy read only by the first member of a stack that runs as the
 * cluster kernel or in its grid mode (batch 1, FP16) is read inside that
 * kernel (nnk_cnet::fold): the copy's step goes; the stack keeps it
 * (stack_state::fold_mv) for the device program. Off with
 * CUDAQ_NN_CNET_FOLD=0 (A/B) or CUDAQ_NN_NO_FUSE. */
cudaq_nn_status_t nng_fold_first_layers(cudaq_nn_gpu *g, cudaq_nn_error_t *err);
/* While tuning, after the chain decision: where such a fold is possible but
 * the second convolution's chosen algorithm cannot fold, the algorithms
 * that can are timed with the first layer folded in, as graphs of their
 * own against the two layers as chosen (latency, launch to completion),
 * and the fastest replaces the choice where it wins (gpu_first.cu). The
 * stacks' decision still counts both layers' own times. */
cudaq_nn_status_t nng_tune_first_folds(cudaq_nn_gpu *g, cudaq_nn_error_t *err);
/* Merges chains of elementwise steps into ST_FUSED steps, and a chain that
 * reads a matrix product's result only into that product's epilogue. */
void nng_fuse_elementwise(cudaq_nn_gpu *g);
/* A predecoder's tail: a threshold chain step (Greater -> Cast -> Mul by a
 * constant) read only through the index maps of the one or two matrix
 * products right after it, with constant B and no epilogue or the parity
 * epilogue (Cast to INT32, optional Add, r - (r / c) * c), all operands
 * small integers: the chain and the products become one ST_TAIL step
 * (nnk_tail, gpu_tail.cu). Off with CUDAQ_NN_NO_TAIL=1 (A/B). */
void nng_plan_tails(cudaq_nn_gpu *g, const unsigned char *absorbed);
/* Opt-in (CUDAQ_NN_GEMM_CHAINS=1; measured slower): a flat elementwise
 * chain whose output is read only through matrix products' A maps (copies
 * absorbed into them) is evaluated inside those products' loads; its step
 * goes (absorbed: nng_plan_copy_absorb's). */
void nng_fuse_gemm_chains(cudaq_nn_gpu *g, const unsigned char *absorbed);
/* Whether matrix-product pass `pass` is off: "pairs" (nng_pair_gemms) when
 * CUDAQ_NN_NO_GEMM_FUSE is set or every fusion is off; "chains"
 * (nng_fuse_gemm_chains) also unless CUDAQ_NN_GEMM_CHAINS=1. */
int nng_gemm_fuse_off(const char *pass);
/* After the convolutions' implementations are chosen: a channels-last
 * convolution with NCDHW input reads a copy that only it reads through the
 * copy's map, and one with NCDHW output runs the chain reading only its
 * result as its epilogue; those steps go. Opt-in: CUDAQ_NN_CONV_FUSE=1. */
void nng_fuse_after_tuning(cudaq_nn_gpu *g);
/* Last pass: consecutive matrix-product steps where the second reads
 * nothing the first writes run as one launch (nnk_gemm_pair). */
void nng_pair_gemms(cudaq_nn_gpu *g);
/* The engine's key for the plan file (gpu_tune.cu). */
cudaq_nn_status_t nng_make_key(cudaq_nn_gpu *g, int device, cudaq_nn_error_t *err);
/* Reads the plan or times the candidates of every convolution (and writes
 * the plan); sizes the cuDNN workspace to the chosen algorithms (gpu_tune.cu). */
cudaq_nn_status_t nng_select_algorithms(cudaq_nn_gpu *g, cudaq_nn_error_t *err);

#endif
