/* Element access and elementwise arithmetic of the NN GPU engine, shared by
 * the thin kernels (gpu_kernels.cu), the epilogues and input gathers of
 * the channels-last convolution (gpu_conv_cl.cu) and the device program
 * (gpu_devprog.cu): one home for the rules by
 * which a value of each element type is read, computed and stored. Float
 * tensors are stored as float or __half; arithmetic is in float, integer
 * arithmetic in 64 bits. Element types are the ONNX numbers. */
#ifndef CUDAQ_NN_GPU_EW_CUH
#define CUDAQ_NN_GPU_EW_CUH

#include "gpu_kernels.cuh"
#include "nn_internal.h"

namespace {

/* A float tensor's element type T (float or __half) to and from float. */
template <typename T> __device__ __forceinline__ float tof(T v);
template <> __device__ __forceinline__ float tof<float>(float v) { return v; }
template <> __device__ __forceinline__ float tof<__half>(__half v) { return __half2float(v); }
template <typename T> __device__ __forceinline__ T fromf(float v);
template <> __device__ __forceinline__ float fromf<float>(float v) { return v; }
template <> __device__ __forceinline__ __half fromf<__half>(float v) { return __float2half(v); }

__device__ __forceinline__ float ldf(const void *p, int dt, int64_t i) {
  switch (dt) {
    case CUDAQ_NN_FLOAT: return static_cast<const float *>(p)[i];
    case CUDAQ_NN_FLOAT16: return __half2float(static_cast<const __half *>(p)[i]);
    case CUDAQ_NN_INT32: return (float)static_cast<const int32_t *>(p)[i];
    case CUDAQ_NN_INT64: return (float)static_cast<const int64_t *>(p)[i];
    default: return (float)static_cast<const uint8_t *>(p)[i];
  }
}

__device__ __forceinline__ long long ldi(const void *p, int dt, int64_t i) {
  switch (dt) {
    case CUDAQ_NN_FLOAT: return (long long)static_cast<const float *>(p)[i];
    case CUDAQ_NN_FLOAT16: return (long long)__half2float(static_cast<const __half *>(p)[i]);
    case CUDAQ_NN_INT32: return static_cast<const int32_t *>(p)[i];
    case CUDAQ_NN_INT64: return static_cast<const int64_t *>(p)[i];
    default: return static_cast<const uint8_t *>(p)[i];
  }
}

__device__ __forceinline__ void stf(void *p, int dt, int64_t i, float v) {
  switch (dt) {
    case CUDAQ_NN_FLOAT: static_cast<float *>(p)[i] = v; break;
    case CUDAQ_NN_FLOAT16: static_cast<__half *>(p)[i] = __float2half(v); break;
    case CUDAQ_NN_INT32: static_cast<int32_t *>(p)[i] = (int32_t)v; break;
    case CUDAQ_NN_INT64: static_cast<int64_t *>(p)[i] = (int64_t)v; break;
    case CUDAQ_NN_BOOL: static_cast<uint8_t *>(p)[i] = v != 0.0f; break;
    default: static_cast<uint8_t *>(p)[i] = (uint8_t)(int)v; break;
  }
}

__device__ __forceinline__ void sti(void *p, int dt, int64_t i, long long v) {
  switch (dt) {
    case CUDAQ_NN_FLOAT: static_cast<float *>(p)[i] = (float)v; break;
    case CUDAQ_NN_FLOAT16: static_cast<__half *>(p)[i] = __float2half((float)v); break;
    case CUDAQ_NN_INT32: static_cast<int32_t *>(p)[i] = (int32_t)v; break;
    case CUDAQ_NN_INT64: static_cast<int64_t *>(p)[i] = (int64_t)v; break;
    case CUDAQ_NN_BOOL: static_cast<uint8_t *>(p)[i] = v != 0; break;
    default: static_cast<uint8_t *>(p)[i] = (uint8_t)v; break;
  }
}

__device__ __forceinline__ bool is_float(int dt) { return dt == CUDAQ_NN_FLOAT || dt == CUDAQ_NN_FLOAT16; }

/* Integer Div as the CPU executor computes it (truncation; 0 for a zero
 * divisor and for the one overflowing quotient). Operands that fit in 32
 * bits (every INT32 tensor) use the 32-bit division: the same quotient,
 * without the 64-bit division's long instruction sequence (a predecoder
 * tail's latency is a chain of such sequences). */
__device__ __forceinline__ long long nnk_idiv(long long a, long long b) {
  if (b == 0 || (b == -1 && a == (-0x7fffffffffffffffLL - 1))) return 0;
  if (b == -1) return -a;
  if (a == (long long)(int)a && b == (long long)(int)b) return (long long)((int)a / (int)b);
  return a / b;
}

/* One elementwise operation: inputs k at in[k][off[k]] (types in_dt[k]),
 * the result stored at out[oi] as out_dt. Shared by the single-node kernel
 * and the fused chains (whose intermediate values are 8-byte registers,
 * stored and re-read in their value's type, so rounding matches the
 * unfused graph exactly). */
__device__ __forceinline__ void ew_apply(int op, int gelu_tanh, const void *const in[3], const int in_dt[3],
                                         const int64_t off[3], void *out, int out_dt, int64_t i) {
  const int t0 = in_dt[0];
  const bool f = is_float(t0);
  switch (op) {
    case NN_OP_RELU:
      if (f) stf(out, out_dt, i, nnk_relu_nan(ldf(in[0], t0, off[0])));
      else { long long v = ldi(in[0], t0, off[0]); sti(out, out_dt, i, v > 0 ? v : 0); }
      break;
    case NN_OP_GELU: {
      float x = ldf(in[0], t0, off[0]);
      float y = gelu_tanh ? 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)))
                          : 0.5f * x * (1.0f + erff(x * 0.7071067811865476f));
      stf(out, out_dt, i, y);
      break;
    }
    case NN_OP_SIGMOID: stf(out, out_dt, i, 1.0f / (1.0f + expf(-ldf(in[0], t0, off[0])))); break;
    case NN_OP_ERF: stf(out, out_dt, i, erff(ldf(in[0], t0, off[0]))); break;
    case NN_OP_CAST:
      if (is_float(out_dt) || (f && out_dt == CUDAQ_NN_BOOL)) stf(out, out_dt, i, ldf(in[0], t0, off[0]));
      else sti(out, out_dt, i, ldi(in[0], t0, off[0]));
      break;
    case NN_OP_ADD: case NN_OP_SUB: case NN_OP_MUL: case NN_OP_DIV:
      if (f) {
        float a = ldf(in[0], t0, off[0]), b = ldf(in[1], in_dt[1], off[1]);
        stf(out, out_dt, i, op == NN_OP_ADD ? a + b : op == NN_OP_SUB ? a - b : op == NN_OP_MUL ? a * b : a / b);
      } else {
        unsigned long long a = (unsigned long long)ldi(in[0], t0, off[0]);
        unsigned long long b = (unsigned long long)ldi(in[1], in_dt[1], off[1]);
        long long sa = (long long)a, sb = (long long)b;
        long long v = op == NN_OP_ADD ? (long long)(a + b) : op == NN_OP_SUB ? (long long)(a - b)
                    : op == NN_OP_MUL ? (long long)(a * b)
                    : nnk_idiv(sa, sb);
        sti(out, out_dt, i, v);
      }
      break;
    case NN_OP_GREATER: case NN_OP_LESS: case NN_OP_EQUAL: {
      bool r2;
      if (f) {
        float a = ldf(in[0], t0, off[0]), b = ldf(in[1], in_dt[1], off[1]);
        r2 = op == NN_OP_GREATER ? a > b : op == NN_OP_LESS ? a < b : a == b;
      } else {
        long long a = ldi(in[0], t0, off[0]), b = ldi(in[1], in_dt[1], off[1]);
        r2 = op == NN_OP_GREATER ? a > b : op == NN_OP_LESS ? a < b : a == b;
      }
      static_cast<uint8_t *>(out)[i] = r2;
      break;
    }
    case NN_OP_WHERE: {
      bool c = static_cast<const uint8_t *>(in[0])[off[0]] != 0;
      int k = c ? 1 : 2;
      if (is_float(out_dt)) stf(out, out_dt, i, ldf(in[k], in_dt[k], off[k]));
      else sti(out, out_dt, i, ldi(in[k], in_dt[k], off[k]));
      break;
    }
    default: break;
  }
}

/* INT32 Div by nnk_idiv's rules in 32 bits: 0 for a zero divisor, -a
 * (wrapping) for -1, else truncation. */
__device__ __forceinline__ int32_t nnk_idiv32(int32_t a, int32_t b) {
  return b == 0 ? 0 : b == -1 ? (int32_t)(0u - (uint32_t)a) : a / b;
}

/* Add, Sub, Mul, Div of two INT32 operands into INT32: the values ew_apply
 * gives (its 64-bit arithmetic truncated to 32 bits is 32-bit wrapping
 * arithmetic; Div by nnk_idiv's rules: 0 for a zero divisor, -a wrapping for
 * -1) in a few instructions. false: not such an op, the caller takes ew_apply. A
 * predecoder's tails (residual and frame mod 2, the counts' Add) are chains
 * of these, and a tail kernel's time is mostly its executed code. */
__device__ __forceinline__ bool ew_int32_fast(int op, const void *const in[3], const int dt[3],
                                              const int64_t off[3], void *out, int out_dt, int64_t i) {
  if (out_dt != CUDAQ_NN_INT32 || dt[0] != CUDAQ_NN_INT32 || dt[1] != CUDAQ_NN_INT32 || op < NN_OP_ADD ||
      op > NN_OP_DIV)
    return false;
  const int32_t a = static_cast<const int32_t *>(in[0])[off[0]], b = static_cast<const int32_t *>(in[1])[off[1]];
  const uint32_t ua = (uint32_t)a, ub = (uint32_t)b;
  int32_t v;
  switch (op) {
    case NN_OP_ADD: v = (int32_t)(ua + ub); break;
    case NN_OP_SUB: v = (int32_t)(ua - ub); break;
    case NN_OP_MUL: v = (int32_t)(ua * ub); break;
    default: v = nnk_idiv32(a, b); break;
  }
  static_cast<int32_t *>(out)[i] = v;
  return true;
}

/* The other common steps of predecoder tails, as ew_apply computes them:
 * Cast to INT32 (from FLOAT16, FLOAT, INT32, UINT8/BOOL), Cast of a BOOL /
 * UINT8 to FLOAT16 or FLOAT, and Add, Sub, Mul, Div, Greater, Less, Equal of
 * two FLOAT16 / FLOAT operands (float arithmetic, rounded as stf stores).
 * false: not such an op. */
__device__ __forceinline__ float ld_float_type(const void *p, int dt, int64_t i) {
  return dt == CUDAQ_NN_FLOAT16 ? __half2float(static_cast<const __half *>(p)[i]) : static_cast<const float *>(p)[i];
}
__device__ __forceinline__ bool ew_common_fast(int op, int n_in, const void *const in[3], const int dt[3],
                                               const int64_t off[3], void *out, int out_dt, int64_t i) {
  const bool out_f = out_dt == CUDAQ_NN_FLOAT || out_dt == CUDAQ_NN_FLOAT16;
  if (op == NN_OP_CAST && n_in == 1) {
    const int t = dt[0];
    const bool small = t == CUDAQ_NN_UINT8 || t == CUDAQ_NN_BOOL;
    if (out_dt == CUDAQ_NN_INT32 && (is_float(t) || t == CUDAQ_NN_INT32 || small)) {
      const void *p = in[0];
      const int64_t k = off[0];
      static_cast<int32_t *>(out)[i] =
          is_float(t) ? (int32_t)(long long)ld_float_type(p, t, k)
          : small     ? (int32_t) static_cast<const uint8_t *>(p)[k]
                      : static_cast<const int32_t *>(p)[k];
      return true;
    }
    if (out_f && small) {
      stf(out, out_dt, i, (float)static_cast<const uint8_t *>(in[0])[off[0]]);
      return true;
    }
    return false;
  }
  if (n_in != 2 || !is_float(dt[0]) || !is_float(dt[1])) return false;
  const float a = ld_float_type(in[0], dt[0], off[0]), b = ld_float_type(in[1], dt[1], off[1]);
  switch (op) {
    case NN_OP_ADD: case NN_OP_SUB: case NN_OP_MUL: case NN_OP_DIV:
      if (!out_f) return false;
      stf(out, out_dt, i, op == NN_OP_ADD ? a + b : op == NN_OP_SUB ? a - b : op == NN_OP_MUL ? a * b : a / b);
      return true;
    case NN_OP_GREATER: case NN_OP_LESS: case NN_OP_EQUAL:
      static_cast<uint8_t *>(out)[i] = op == NN_OP_GREATER ? a > b : op == NN_OP_LESS ? a < b : a == b;
      return true;
    default: return false;
  }
}

/* Element i of a fused chain: op j reads tensors (offset i, or 0 for a
 * scalar) or the registers of earlier ops, and writes register j, the last
 * op the output (element i of p.out, or *value, as the last op's out_dt,
 * when value is set). Kept small: a chain runs once per element in tiny
 * kernels whose time on the H100 is mostly instruction fetch (an unrolled
 * load-all-inputs-first variant measured slower, 2026-11-24). */
__device__ __forceinline__ void fused_at(const nnk_fused &p, int64_t i, const void *seed = NULL,
                                         unsigned long long *value = NULL) {
  unsigned long long reg[NNK_FUSE_MAX_OPS];
  for (int j = 0; j < p.n_ops; j++) {
    const nnk_fused_op &o = p.ops[j];
    const void *in[3] = {NULL, NULL, NULL};
    int dt[3] = {0, 0, 0};
    int64_t off[3] = {0, 0, 0};
    for (int k = 0; k < o.n_in; k++) {
      const int a = o.arg[k];
      if (a == NNK_FUSE_SEED) {
        in[k] = seed;
        dt[k] = p.seed_dt;
      } else if (a >= 0) {
        in[k] = p.in[a];
        dt[k] = p.in_dt[a];
        off[k] = (p.in_scalar >> a) & 1 ? 0 : i;
      } else {
        in[k] = &reg[-a - 1];
        dt[k] = p.ops[-a - 1].out_dt;
      }
    }
    const bool last = j == p.n_ops - 1;
    void *out = !last ? (void *)&reg[j] : value ? (void *)value : p.out;
    const int64_t oi = last && !value ? i : 0;
    if (!p.generic && ((o.n_in == 2 && ew_int32_fast(o.op, in, dt, off, out, o.out_dt, oi)) ||
                       ew_common_fast(o.op, o.n_in, in, dt, off, out, o.out_dt, oi)))
      continue;
    ew_apply(o.op, o.gelu_tanh, in, dt, off, out, o.out_dt, oi);
  }
}

/* An epilogue chain whose program lives in device memory (uploaded by the
 * engine): read in place, never copied to a kernel's stack, and not inlined:
 * every convolution instantiation with an NCDHW output calls it, and one
 * copy keeps their compile time down. */
__device__ __noinline__ void fused_at_dev(const nnk_fused *p, int64_t i, const void *seed) { fused_at(*p, i, seed); }

/* Element i of a chain's output as float, never stored (a matrix product's
 * A read through a chain, gpu_kernels.cu): the value as the last op stores
 * it in its out_dt, read back as a load of that type would. */
__device__ __noinline__ float fused_value_dev(const nnk_fused *p, int64_t i) {
  unsigned long long v = 0;
  fused_at(*p, i, NULL, &v);
  return ldf(&v, p->ops[p->n_ops - 1].out_dt, 0);
}

/* v of type dt as FP16 bits, converted as Cast does (not inlined, as above). */
__device__ __noinline__ unsigned short cast_to_half_bits(const void *p, int dt, int64_t idx) {
  __half h;
  const void *in[3] = {p, NULL, NULL};
  const int dts[3] = {dt, 0, 0};
  const int64_t off[3] = {idx, 0, 0};
  ew_apply(NN_OP_CAST, 0, in, dts, off, &h, CUDAQ_NN_FLOAT16, 0);
  return __half_as_ushort(h);
}

/* Element i of an elementwise node. */
__device__ void ew_at(const nnk_elementwise &p, int64_t i) {
  int64_t off[3] = {0, 0, 0}, r = i;
  if (p.flat & NNK_EW_FLAT) { /* every input is contiguous (offset i) or a scalar (offset 0) */
    for (int k = 0; k < 3; k++) off[k] = (p.flat >> k) & 1 ? i : 0;
  } else {
    for (int d = p.rank - 1; d >= 0; d--) {
      int64_t c = r % p.dims[d];
      r /= p.dims[d];
      off[0] += c * p.strides[0][d];
      off[1] += c * p.strides[1][d];
      off[2] += c * p.strides[2][d];
    }
  }
  ew_apply(p.op, p.gelu_tanh, p.in, p.in_dt, off, p.out, p.out_dt, i);
}

/* Element i of an index-map copy. */
__device__ void move_at(const nnk_move &p, int64_t i) {
  if (p.in_dt) { /* with an absorbed Cast: element by element, as the Cast node converts */
    const int k = p.src_in[i];
    const void *in[3] = {p.in[k], NULL, NULL};
    const int dt[3] = {p.in_dt[k], 0, 0};
    const int64_t off[3] = {p.src_idx[i], 0, 0};
    ew_apply(NN_OP_CAST, 0, in, dt, off, p.out, p.out_dt, i);
    return;
  }
  const char *src = static_cast<const char *>(p.in[p.src_in[i]]) + (int64_t)p.src_idx[i] * p.elem_size;
  char *dst = static_cast<char *>(p.out) + i * p.elem_size;
  switch (p.elem_size) {
    case 1: *dst = *src; break;
    case 2: *reinterpret_cast<uint16_t *>(dst) = *reinterpret_cast<const uint16_t *>(src); break;
    case 4: *reinterpret_cast<uint32_t *>(dst) = *reinterpret_cast<const uint32_t *>(src); break;
    default: *reinterpret_cast<uint64_t *>(dst) = *reinterpret_cast<const uint64_t *>(src); break;
  }
}

/* Element i of a type conversion (an input or output binding). */
__device__ __forceinline__ void convert_at(const void *in, int in_dt, void *out, int out_dt, int64_t i) {
  if (is_float(in_dt)) stf(out, out_dt, i, ldf(in, in_dt, i));
  else sti(out, out_dt, i, ldi(in, in_dt, i));
}

}  // namespace

#endif
