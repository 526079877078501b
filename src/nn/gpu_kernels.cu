/* Thin kernels of the NN GPU engine (see gpu_kernels.cuh). */
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_ew.cuh"
#include "gpu_kernels.cuh"
#include "nn_internal.h"

namespace {

__global__ void k_fused(nnk_fused p) {
  nnk_pdl_begin();
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < p.n; i += (int64_t)gridDim.x * blockDim.x)
    fused_at(p, i);
}

__global__ void k_elementwise(nnk_elementwise p) {
  nnk_pdl_begin();
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < p.n; i += (int64_t)gridDim.x * blockDim.x)
    ew_at(p, i);
}

__global__ void k_move(nnk_move p) {
  nnk_pdl_begin();
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < p.n; i += (int64_t)gridDim.x * blockDim.x)
    move_at(p, i);
}


/* Direct convolution: a thread computes OCB output channels at one output
 * position; the block's weights for one input channel sit in shared memory,
 * so each input element loaded serves OCB multiply-adds. */
template <typename T, int OCB>
__global__ void k_conv(nnk_conv p) {
  nnk_pdl_begin();
  extern __shared__ float wsh[];
  const int ksz = p.k[0] * p.k[1] * p.k[2];
  const int P = p.out3[0] * p.out3[1] * p.out3[2];
  const int isz = p.in3[0] * p.in3[1] * p.in3[2];
  const int pos = blockIdx.x * blockDim.x + threadIdx.x;
  const int oc0 = blockIdx.y * OCB;
  const int n = blockIdx.z;
  const bool active = pos < P;
  const int ow = active ? pos % p.out3[2] : 0;
  const int oh = active ? (pos / p.out3[2]) % p.out3[1] : 0;
  const int od = active ? pos / (p.out3[2] * p.out3[1]) : 0;
  const int id0 = od * p.stride[0] - p.pad0[0], ih0 = oh * p.stride[1] - p.pad0[1];
  const int iw0 = ow * p.stride[2] - p.pad0[2];
  const T *X = static_cast<const T *>(p.x);
  const T *W = static_cast<const T *>(p.w);
  float acc[OCB];
#pragma unroll
  for (int o = 0; o < OCB; o++) acc[o] = 0.0f;
  for (int ci = 0; ci < p.C; ci++) {
    __syncthreads();
    for (int t = threadIdx.x; t < OCB * ksz; t += blockDim.x) {
      int o = t / ksz, kk = t - o * ksz;
      wsh[t] = oc0 + o < p.M ? tof<T>(W[((int64_t)(oc0 + o) * p.C + ci) * ksz + kk]) : 0.0f;
    }
    __syncthreads();
    if (!active) continue;
    const T *xi = X + ((int64_t)n * p.C + ci) * isz;
    int kk = 0;
    for (int kd = 0; kd < p.k[0]; kd++) {
      const int id = id0 + kd * p.dil[0];
      const bool okd = id >= 0 && id < p.in3[0];
      for (int kh = 0; kh < p.k[1]; kh++) {
        const int ih = ih0 + kh * p.dil[1];
        const bool okh = okd && ih >= 0 && ih < p.in3[1];
        for (int kw = 0; kw < p.k[2]; kw++, kk++) {
          const int iw = iw0 + kw * p.dil[2];
          if (!okh || iw < 0 || iw >= p.in3[2]) continue;
          const float xv = tof<T>(xi[(id * p.in3[1] + ih) * p.in3[2] + iw]);
#pragma unroll
          for (int o = 0; o < OCB; o++) acc[o] += xv * wsh[o * ksz + kk];
        }
      }
    }
  }
  if (!active) return;
  const T *B = static_cast<const T *>(p.b);
  T *Y = static_cast<T *>(p.y);
#pragma unroll
  for (int o = 0; o < OCB; o++) {
    const int oc = oc0 + o;
    if (oc >= p.M) break;
    float v = acc[o] + (B ? tof<T>(B[oc]) : 0.0f);
    if (p.relu) v = nnk_relu_nan(v);
    Y[((int64_t)n * p.M + oc) * P + pos] = fromf<T>(v);
  }
}

/* "Same" 3x3x3 convolution (stride 1, dilation 1, padding 1: the layers of
 * the 3D-CNN predecoders), tiled in shared memory. A block of threads, one
 * output position each, computes OCT output channels. Per chunk of CIT
 * input channels it stages the whole zero-padded input volume (so the 27
 * taps need no bounds checks) and the weights, laid out [c][tap][o] so that
 * one 16-byte shared load serves four output channels. Accumulation in
 * float; T is float or __half. */
constexpr int CONV3_BLOCK = 128;
constexpr size_t CONV3_MAX_SMEM = 48 * 1024;

__host__ __device__ inline int conv3_pvol(const nnk_conv &p) {
  return (p.in3[0] + 2) * (p.in3[1] + 2) * (p.in3[2] + 2);
}

template <typename T, int OCT>
__global__ void k_conv3_same(nnk_conv p, int cit) {
  nnk_pdl_begin();
  extern __shared__ __align__(16) float sm3[];
  const int D = p.in3[0], H = p.in3[1], Wd = p.in3[2];
  const int PH = H + 2, PW = Wd + 2, pvol = conv3_pvol(p);
  const int P = D * H * Wd;
  float *xs = sm3;                                         /* [cit][pvol] */
  float *ws = sm3 + (((size_t)cit * pvol + 3) & ~size_t(3)); /* [cit][27][OCT], 16-byte aligned */
  const int oc0 = blockIdx.y * OCT, n = blockIdx.z;
  const int pos = blockIdx.x * blockDim.x + threadIdx.x;
  const bool active = pos < P;
  const int ow = active ? pos % Wd : 0, oh = active ? (pos / Wd) % H : 0, od = active ? pos / (Wd * H) : 0;
  const int base = (od * PH + oh) * PW + ow; /* tap (kd, kh, kw) is base + (kd * PH + kh) * PW + kw */
  const T *X = static_cast<const T *>(p.x) + (int64_t)n * p.C * P;
  const T *Wt = static_cast<const T *>(p.w);
  float acc[OCT];
#pragma unroll
  for (int o = 0; o < OCT; o++) acc[o] = 0.0f;
  for (int t = threadIdx.x; t < cit * pvol; t += blockDim.x) xs[t] = 0.0f; /* the halo stays 0 */
  for (int ci0 = 0; ci0 < p.C; ci0 += cit) {
    __syncthreads(); /* the previous chunk is consumed */
    for (int t = threadIdx.x; t < cit * P; t += blockDim.x) {
      const int c = t / P, q = t - c * P;
      const int w = q % Wd, h = (q / Wd) % H, d = q / (Wd * H);
      xs[c * pvol + ((d + 1) * PH + h + 1) * PW + w + 1] = ci0 + c < p.C ? tof<T>(X[(int64_t)(ci0 + c) * P + q]) : 0.0f;
    }
    for (int t = threadIdx.x; t < cit * 27 * OCT; t += blockDim.x) {
      const int o = t % OCT, r = t / OCT, kk = r % 27, c = r / 27;
      ws[t] = (oc0 + o < p.M && ci0 + c < p.C) ? tof<T>(Wt[((int64_t)(oc0 + o) * p.C + ci0 + c) * 27 + kk]) : 0.0f;
    }
    __syncthreads(); /* the chunk is staged */
    if (!active) continue;
    for (int c = 0; c < cit; c++) {
      const float *xb = xs + c * pvol + base;
      const float *wc = ws + c * 27 * OCT;
#pragma unroll
      for (int kd = 0; kd < 3; kd++)
#pragma unroll
        for (int kh = 0; kh < 3; kh++)
#pragma unroll
          for (int kw = 0; kw < 3; kw++) {
            const float xv = xb[(kd * PH + kh) * PW + kw];
            const float *wk = wc + ((kd * 3 + kh) * 3 + kw) * OCT;
            if (OCT % 4 == 0) {
#pragma unroll
              for (int o = 0; o < OCT; o += 4) {
                const float4 w4 = *reinterpret_cast<const float4 *>(wk + o);
                acc[o] += xv * w4.x;
                acc[o + 1] += xv * w4.y;
                acc[o + 2] += xv * w4.z;
                acc[o + 3] += xv * w4.w;
              }
            } else {
#pragma unroll
              for (int o = 0; o < OCT; o++) acc[o] += xv * wk[o];
            }
          }
    }
  }
  if (!active) return;
  const T *B = static_cast<const T *>(p.b);
  T *Y = static_cast<T *>(p.y);
#pragma unroll
  for (int o = 0; o < OCT; o++) {
    const int oc = oc0 + o;
    if (oc >= p.M) break;
    float v = acc[o] + (B ? tof<T>(B[oc]) : 0.0f);
    if (p.relu) v = nnk_relu_nan(v);
    Y[((int64_t)n * p.M + oc) * P + pos] = fromf<T>(v);
  }
}

/* Whether k_conv3_same applies: 3D, kernel 3, stride 1, dilation 1,
 * padding 1 on every side (out == in), and a padded volume that fits in
 * shared memory with the weights of the widest OCT. */
bool conv3_same_applies(const nnk_conv &p) {
  for (int i = 0; i < 3; i++)
    if (p.k[i] != 3 || p.stride[i] != 1 || p.dil[i] != 1 || p.pad0[i] != 1 || p.out3[i] != p.in3[i]) return false;
  return (size_t)conv3_pvol(p) * sizeof(float) + 27 * 16 * sizeof(float) + 16 <= CONV3_MAX_SMEM;
}

template <typename T, int OCT>
cudaError_t launch_conv3_t(const nnk_conv &p, cudaStream_t s) {
  const int P = p.in3[0] * p.in3[1] * p.in3[2], pvol = conv3_pvol(p);
  const size_t wbytes = 27 * OCT * sizeof(float);
  int cit = p.C < 8 ? p.C : 8; /* input channels per staged chunk: as many as fit */
  while (cit > 1 && (((size_t)cit * pvol + 3) & ~size_t(3)) * sizeof(float) + cit * wbytes > CONV3_MAX_SMEM) cit--;
  const size_t smem = (((size_t)cit * pvol + 3) & ~size_t(3)) * sizeof(float) + cit * wbytes;
  dim3 grid((P + CONV3_BLOCK - 1) / CONV3_BLOCK, (p.M + OCT - 1) / OCT, p.N);
  return nnk_launch_ex(k_conv3_same<T, OCT>, grid, dim3(CONV3_BLOCK), smem, s, 1, p, cit);
}

/* Output channels per block: the widest that still gives every SM a block. */
template <typename T>
cudaError_t launch_conv3_pick(const nnk_conv &p, cudaStream_t s) {
  const long pb = (long)(p.in3[0] * p.in3[1] * p.in3[2] + CONV3_BLOCK - 1) / CONV3_BLOCK * p.N;
  if (pb * ((p.M + 15) / 16) >= 132) return launch_conv3_t<T, 16>(p, s);
  if (pb * ((p.M + 7) / 8) >= 132) return launch_conv3_t<T, 8>(p, s);
  if (pb * ((p.M + 3) / 4) >= 132 || p.M <= 4) return launch_conv3_t<T, 4>(p, s);
  return launch_conv3_t<T, 1>(p, s);
}

template <typename T>
__global__ void k_bias_act(T *y, const T *b, int M, int64_t plane, int64_t n, int relu) {
  nnk_pdl_begin();
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    float v = tof<T>(y[i]);
    if (b) v += tof<T>(b[(i / plane) % M]);
    if (relu) v = nnk_relu_nan(v);
    y[i] = fromf<T>(v);
  }
}

/* The first GEMM_PRE k-steps of a lane's output: their operand addresses
 * (through the map) and, with a constant B, B's values, fetched before the
 * grid dependency wait, while the kernel before this one still runs. */
constexpr int GEMM_PRE = 4;
template <typename T>
struct gemm_ops {
  int64_t oa, ob, i, j;
  const T *a[GEMM_PRE]; /* NULL: the element comes from the A chain */
  int64_t ai[GEMM_PRE];
  float b[GEMM_PRE];
};

/* Where element e of A lives: a buffer and an index, or (*buf NULL) the A
 * chain's element *idx. Only constants are read (maps, buffer table). */
template <typename T>
__device__ __forceinline__ void gemm_a_where(const nnk_gemm &p, int64_t e, const T **buf, int64_t *idx) {
  if (!p.a_idx) {
    *buf = static_cast<const T *>(p.a);
    *idx = e;
    return;
  }
  const int src = p.a_src[e];
  *buf = p.a_chain && src == p.a_chain_buf ? nullptr : static_cast<const T *>(p.a_bufs[src]);
  *idx = p.a_idx[e];
}

template <typename T>
__device__ __forceinline__ float gemm_a_value(const nnk_fused *chain, const T *buf, int64_t idx) {
  return buf ? tof<T>(buf[idx]) : fused_value_dev(chain, idx);
}

/* Output t of a (batched) matrix product is computed by a group of G lanes
 * (G = gemm_group(K), a power of two <= 32; groups are aligned inside a
 * warp and every lane of the warp takes part, each group with its own t):
 * lane l of the group sums k = l, l + G, ..., then a butterfly reduction
 * inside the group; its lane 0 stores. One thread per output cost one
 * global-latency load per k in sequence (a K = 98 dot product took tens of
 * µs). Phase 1 (gemm_fetch): what depends on constants only. */
__host__ __device__ inline int gemm_group(int64_t K) {
  int g = 1;
  while (g < 32 && g * 4 < K) g *= 2; /* about 4 products per lane */
  return g;
}

template <typename T>
__device__ void gemm_fetch(const nnk_gemm &p, int64_t t, int G, int lane, bool active, gemm_ops<T> *o) {
  if (!active) t = 0; /* idle lanes join the shuffles with a valid index */
  int64_t bi;
  if (p.nb * p.M * p.N <= 0x7fffffff) { /* 32-bit index arithmetic (64-bit division is a long sequence) */
    const uint32_t tt = (uint32_t)t, n = (uint32_t)p.N, m = (uint32_t)p.M, q = tt / n;
    o->j = tt - q * n;
    o->i = q % m;
    bi = q / m;
  } else {
    o->j = t % p.N;
    o->i = (t / p.N) % p.M;
    bi = t / (p.N * p.M);
  }
  int64_t r = bi;
  o->oa = 0;
  o->ob = 0;
  for (int d = p.br - 1; d >= 0; d--) {
    int64_t c = r % p.bdims[d];
    r /= p.bdims[d];
    o->oa += c * p.sa[d];
    o->ob += c * p.sb[d];
  }
  const T *B = static_cast<const T *>(p.b);
#pragma unroll
  for (int q = 0; q < GEMM_PRE; q++) {
    const int64_t k = lane + (int64_t)q * G;
    o->a[q] = nullptr;
    o->ai[q] = 0;
    o->b[q] = 0.0f;
    if (!active || k >= p.K) continue;
    gemm_a_where<T>(p, o->oa + o->i * p.sai + k * p.sak, &o->a[q], &o->ai[q]);
    if (p.b_const) o->b[q] = tof<T>(B[o->ob + k * p.sbk + o->j * p.sbj]);
  }
}

/* Phase 2, after the wait: the products, the reduction, the store or the
 * epilogue (programs epi and chain: p.epi and p.a_chain, staged). */
template <typename T>
__device__ void gemm_finish(const nnk_gemm &p, const nnk_fused *epi, const nnk_fused *chain, int64_t t, int G,
                            int lane, bool active, const gemm_ops<T> &o) {
  const T *B = static_cast<const T *>(p.b), *C = static_cast<const T *>(p.c);
  T *Y = static_cast<T *>(p.y);
  float s = 0.0f;
#pragma unroll
  for (int q = 0; q < GEMM_PRE; q++) {
    const int64_t k = lane + (int64_t)q * G;
    if (!active || k >= p.K) continue;
    const float b = p.b_const ? o.b[q] : tof<T>(B[o.ob + k * p.sbk + o.j * p.sbj]);
    s += gemm_a_value<T>(chain, o.a[q], o.ai[q]) * b;
  }
  for (int64_t k = lane + (int64_t)GEMM_PRE * G; active && k < p.K; k += G) {
    const T *buf;
    int64_t idx;
    gemm_a_where<T>(p, o.oa + o.i * p.sai + k * p.sak, &buf, &idx);
    s += gemm_a_value<T>(chain, buf, idx) * tof<T>(B[o.ob + k * p.sbk + o.j * p.sbj]);
  }
  for (int w = G / 2; w > 0; w >>= 1) s += __shfl_xor_sync(0xffffffffu, s, w);
  if (lane != 0 || !active) return;
  float v = p.alpha * s;
  if (C) v += p.beta * tof<T>(C[o.i * p.sc0 + o.j * p.sc1]);
  if (epi) { /* the chain reads the result as stored in y's type */
    T seed = fromf<T>(v);
    fused_at_dev(epi, t, &seed);
    return;
  }
  Y[t] = fromf<T>(v);
}

/* A program (a chain) copied into shared memory by the block. */
__device__ const nnk_fused *stage_program(const nnk_fused *g, nnk_fused *sh) {
  if (!g) return nullptr;
  const uint32_t *src = reinterpret_cast<const uint32_t *>(g);
  uint32_t *dst = reinterpret_cast<uint32_t *>(sh);
  for (unsigned w = threadIdx.x; w < sizeof(nnk_fused) / 4; w += blockDim.x) dst[w] = src[w];
  return sh;
}

/* One product over blocks [0, nblk) of its part of the grid (block blk):
 * groups of G lanes per output, grid-stride. The loop runs while any group
 * of the warp has work, so that every lane takes part in every shuffle.
 * The first output's constants are fetched before the dependency wait. */
template <typename T>
__device__ void gemm_part(const nnk_gemm &p, unsigned blk, unsigned nblk) {
  __shared__ nnk_fused sh_epi, sh_chain;
  const nnk_fused *epi = stage_program(p.epi, &sh_epi);
  const nnk_fused *chain = stage_program(p.a_chain, &sh_chain);
  const int64_t total = p.nb * p.M * p.N;
  const int G = gemm_group(p.K), lane = threadIdx.x & 31, lg = __ffs(G) - 1; /* G is a power of two */
  const int64_t stride = ((int64_t)nblk * blockDim.x) >> lg;
  const int64_t first = ((int64_t)blk * blockDim.x + threadIdx.x) >> lg;
  const int64_t warp_first = first - (lane >> lg); /* the first group's output of this warp */
  gemm_ops<T> o;
  gemm_fetch<T>(p, first, G, lane & (G - 1), first < total, &o);
  __syncthreads(); /* the staged programs */
  nnk_pdl_wait();
  for (int64_t t = first, w = warp_first; w < total; t += stride, w += stride) {
    if (t != first) gemm_fetch<T>(p, t, G, lane & (G - 1), t < total, &o);
    gemm_finish<T>(p, epi, chain, t, G, lane & (G - 1), t < total, o);
  }
}

template <typename T>
__global__ void k_gemm(nnk_gemm_pair q) {
  nnk_pdl_launch_dependents();
  /* Each product by name (a dynamic index into the parameters would copy
   * them to local memory). */
  if (q.n > 1 && blockIdx.x >= q.split) gemm_part<T>(q.p[1], blockIdx.x - q.split, gridDim.x - q.split);
  else gemm_part<T>(q.p[0], blockIdx.x, q.n > 1 ? q.split : gridDim.x);
}

__global__ void k_convert(const void *in, int in_dt, void *out, int out_dt, int64_t n) {
  nnk_pdl_begin();
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    convert_at(in, in_dt, out, out_dt, i);
}

unsigned grid_for(int64_t n, int block) {
  int64_t g = (n + block - 1) / block;
  if (g < 1) g = 1;
  if (g > 4096) g = 4096;
  return (unsigned)g;
}

template <typename T, int OCB>
cudaError_t launch_conv_t(const nnk_conv &p, cudaStream_t s) {
  const int P = p.out3[0] * p.out3[1] * p.out3[2];
  const int block = P >= 128 ? 128 : (P >= 64 ? 64 : 32);
  dim3 grid((P + block - 1) / block, (p.M + OCB - 1) / OCB, p.N);
  size_t shmem = (size_t)OCB * p.k[0] * p.k[1] * p.k[2] * sizeof(float);
  return nnk_launch_ex(k_conv<T, OCB>, grid, dim3(block), shmem, s, 1, p);
}

template <typename T>
cudaError_t launch_conv_pick(const nnk_conv &p, cudaStream_t s) {
  /* Fewer output channels per thread when the grid would not fill the GPU. */
  const int P = p.out3[0] * p.out3[1] * p.out3[2];
  const long blocks8 = (long)((P + 127) / 128) * ((p.M + 7) / 8) * p.N;
  if (blocks8 >= 264) return launch_conv_t<T, 8>(p, s);
  if (blocks8 * 2 >= 264 || p.M <= 4) return launch_conv_t<T, 4>(p, s);
  return launch_conv_t<T, 2>(p, s);
}

}  // namespace

int nnk_conv_supported(const nnk_conv &p) {
  return p.k[0] * p.k[1] * p.k[2] <= 1024 && p.N <= 65535;
}

cudaError_t nnk_launch_elementwise(const nnk_elementwise &p, int half, cudaStream_t s) {
  (void)half;
  return nnk_launch_ex(k_elementwise, dim3(grid_for(p.n, 256)), dim3(256), 0, s, 1, p);
}

cudaError_t nnk_launch_fused(const nnk_fused &p, cudaStream_t s) {
  return nnk_launch_ex(k_fused, dim3(grid_for(p.n, 256)), dim3(256), 0, s, 1, p);
}

cudaError_t nnk_launch_move(const nnk_move &p, cudaStream_t s) {
  return nnk_launch_ex(k_move, dim3(grid_for(p.n, 256)), dim3(256), 0, s, 1, p);
}

cudaError_t nnk_launch_conv(const nnk_conv &p, int half, cudaStream_t s) {
  if ((int64_t)p.out3[0] * p.out3[1] * p.out3[2] == 0 || p.M == 0 || p.N == 0) return cudaSuccess; /* empty output */
  if (conv3_same_applies(p)) return half ? launch_conv3_pick<__half>(p, s) : launch_conv3_pick<float>(p, s);
  return half ? launch_conv_pick<__half>(p, s) : launch_conv_pick<float>(p, s);
}

cudaError_t nnk_launch_bias_act(void *y, const void *b, int N, int M, int64_t plane, int relu, int half,
                                cudaStream_t s) {
  int64_t n = (int64_t)N * M * plane;
  const dim3 grid(grid_for(n, 256)), block(256);
  if (half)
    return nnk_launch_ex(k_bias_act<__half>, grid, block, 0, s, 1, static_cast<__half *>(y),
                         static_cast<const __half *>(b), M, plane, n, relu);
  return nnk_launch_ex(k_bias_act<float>, grid, block, 0, s, 1, static_cast<float *>(y), static_cast<const float *>(b),
                       M, plane, n, relu);
}

cudaError_t nnk_launch_gemm(const nnk_gemm_pair &q, int half, cudaStream_t s) {
  nnk_gemm_pair p = q;
  unsigned blocks[2] = {0, 0};
  for (int k = 0; k < p.n; k++) /* a group of lanes per output */
    blocks[k] = grid_for(p.p[k].nb * p.p[k].M * p.p[k].N * gemm_group(p.p[k].K), 128);
  p.split = blocks[0];
  const dim3 grid(blocks[0] + blocks[1]), block(128);
  return half ? nnk_launch_ex(k_gemm<__half>, grid, block, 0, s, 1, p) : nnk_launch_ex(k_gemm<float>, grid, block, 0, s, 1, p);
}

cudaError_t nnk_launch_convert(const void *in, int in_dt, void *out, int out_dt, int64_t n, cudaStream_t s) {
  return nnk_launch_ex(k_convert, dim3(grid_for(n, 256)), dim3(256), 0, s, 1, in, in_dt, out, out_dt, n);
}

int cudaq_nn_pdl_enabled(void) { return nnk_pdl_enabled(); }

int nnk_pdl_enabled(void) {
  static int on = -1; /* races between threads are benign: every one computes the same value */
  if (on < 0) {
    const char *e = getenv("CUDAQ_NN_PDL");
    int dev = 0, major = 0;
    on = !(e && !strcmp(e, "0")) && cudaGetDevice(&dev) == cudaSuccess &&
         cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess && major >= 9;
  }
  return on;
}
