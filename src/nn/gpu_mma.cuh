/* PTX helpers of the engine's tensor-core kernels (gpu_tc.cu, gpu_conv_cl.cu,
 * gpu_stack.cu): shared-memory addresses, cp.async, ldmatrix and the
 * m16n8k16 FP16 MMA with FP32 accumulation. One home for the asm. */
#ifndef CUDAQ_NN_GPU_MMA_CUH
#define CUDAQ_NN_GPU_MMA_CUH

#include <cuda_fp16.h>
#include <stdint.h>

__device__ __forceinline__ uint32_t nnk_smem_u32(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
/* 16-byte global -> shared copy; src_bytes < 16 zero-fills the rest (0: all
 * zeros; src must still be a valid address). */
__device__ __forceinline__ void nnk_cp_async16(uint32_t dst, const void *src, int src_bytes = 16) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void nnk_cp_async16(void *dst, const void *src, int src_bytes = 16) {
  nnk_cp_async16(nnk_smem_u32(dst), src, src_bytes);
}
__device__ __forceinline__ void nnk_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
/* At most N of this thread's committed groups still pending; "memory" keeps
 * the compiler from moving shared-memory reads above it. */
template <int N>
__device__ __forceinline__ void nnk_cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

__device__ __forceinline__ void nnk_ldmatrix_x4(uint32_t r[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void nnk_ldmatrix_x4(uint32_t r[4], const void *p) { nnk_ldmatrix_x4(r, nnk_smem_u32(p)); }

/* c += a b: m16n8k16, row-major A (FP16), column-major B (FP16), FP32 accumulators. */
__device__ __forceinline__ void nnk_mma16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* The B fragments of n8 tiles 2 n2 and 2 n2 + 1 (one k16 slice) from one
 * ldmatrix x4 at the lane's address addr (shared memory). */
template <int NI>
__device__ __forceinline__ void nnk_ldmatrix_b2(uint32_t (&bf)[NI][2], int n2, uint32_t addr) {
  uint32_t r[4];
  nnk_ldmatrix_x4(r, addr);
  bf[2 * n2][0] = r[0];
  bf[2 * n2][1] = r[1];
  bf[2 * n2 + 1][0] = r[2];
  bf[2 * n2 + 1][1] = r[3];
}

/* acc[mi][ni] += A fragment mi x B fragment ni for the warp's MI x NI m16n8 tiles (one k16 slice). */
template <int MI, int NI>
__device__ __forceinline__ void nnk_mma_tiles(float (&acc)[MI][NI][4], const uint32_t (&af)[MI][4],
                                              const uint32_t (&bf)[NI][2]) {
#pragma unroll
  for (int mi = 0; mi < MI; mi++)
#pragma unroll
    for (int ni = 0; ni < NI; ni++) nnk_mma16816(acc[mi][ni], af[mi], bf[ni][0], bf[ni][1]);
}

/* The MMA accumulators of a warp's MI x NI m16n8 tiles, zeroed. */
template <int MI, int NI>
__device__ __forceinline__ void nnk_acc_zero(float (&acc)[MI][NI][4]) {
#pragma unroll
  for (int mi = 0; mi < MI; mi++)
#pragma unroll
    for (int ni = 0; ni < NI; ni++)
#pragma unroll
      for (int e = 0; e < 4; e++) acc[mi][ni][e] = 0.0f;
}

#endif
