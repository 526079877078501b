/* Thin kernels of the NN GPU engine: elementwise with broadcasting, index
 * map copies, direct convolution (+bias, +ReLU), matrix products, precision
 * conversion. Float tensors are stored as float or __half; arithmetic is in
 * float. Element types are the ONNX numbers (cudaq_nn_dtype_t). */
#ifndef CUDAQ_NN_GPU_KERNELS_CUH
#define CUDAQ_NN_GPU_KERNELS_CUH

#include <cuda_fp16.h>
#include <stddef.h>
#include <stdint.h>

#include "cudaq/nn/nn.h"

#define NNK_MAX_RANK CUDAQ_NN_MAX_RANK

/* ReLU that keeps NaN, as onnxruntime and PyTorch do (fmaxf(NaN, 0) is 0):
 * every ReLU site, fused ones included (own and tensor-core convolutions),
 * goes through it. */
__device__ __forceinline__ float nnk_relu_nan(float v) { return v > 0.0f ? v : (v != v ? v : 0.0f); }

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

/* out[i] = in[src_in[i]][src_idx[i]] */
struct nnk_move {
  int64_t n;
  int elem_size;
  const void *const *in;        /* device array: the node's input buffers (any number) */
  const uint8_t *src_in;
  const int32_t *src_idx;
  void *out;
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
};

/* Launchers (src/nn/gpu_kernels.cu); all asynchronous on stream. */
cudaError_t nnk_launch_elementwise(const nnk_elementwise &p, int half, cudaStream_t s);
cudaError_t nnk_launch_move(const nnk_move &p, cudaStream_t s);
cudaError_t nnk_launch_conv(const nnk_conv &p, int half, cudaStream_t s);
cudaError_t nnk_launch_bias_act(void *y, const void *b, int N, int M, int64_t plane, int relu, int half,
                                cudaStream_t s);
cudaError_t nnk_launch_gemm(const nnk_gemm &p, int half, cudaStream_t s);
cudaError_t nnk_launch_convert(const void *in, int in_dt, void *out, int out_dt, int64_t n,
                               cudaStream_t s);
/* Whether the own convolution kernel handles this kernel size. */
int nnk_conv_supported(const nnk_conv &p);

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

#endif
