/* PTX helpers of the engine's tensor-core kernels (gpu_tc.cu, gpu_conv_cl.cu,
 * gpu_conv_wg.cu, gpu_stack.cu): shared-memory addresses, cp.async, ldmatrix,
 * the m16n8k16 FP16 MMA with FP32 accumulation, and (sm_90a) warpgroup
 * MMAs, mbarriers and bulk copies. One home for the asm. */
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

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
/* The cluster barrier in two halves: this thread's arrival without memory
 * order (a release arrival, barrier.cluster.arrive's default, is a
 * GPU-scope MEMBAR on sm_90; pair it with nnk_fence_release_smem_cluster
 * where only this CTA's shared-memory writes need publishing), and the wait
 * for every thread of the cluster (acquire). */
__device__ __forceinline__ void nnk_cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void nnk_cluster_wait() { asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory"); }
/* Release at cluster scope of this thread's earlier writes to its own
 * CTA's shared memory only (the other half of a release pattern whose
 * relaxed arrival follows): no GPU-scope MEMBAR. */
__device__ __forceinline__ void nnk_fence_release_smem_cluster() {
#if __CUDACC_VER_MAJOR__ > 12 || (__CUDACC_VER_MAJOR__ == 12 && __CUDACC_VER_MINOR__ >= 8)
  asm volatile("fence.release.sync_restrict::shared::cta.cluster;\n" ::: "memory");
#else /* .sync_restrict needs PTX ISA 8.6 (CUDA 12.8): the unrestricted fence, a GPU-scope MEMBAR */
  asm volatile("fence.acq_rel.cluster;\n" ::: "memory");
#endif
}
/* Makes this thread's generic-proxy accesses of shared memory (st.shared,
 * cp.async) visible to the async proxy that wgmma and bulk copies use; a
 * barrier after it publishes them to the other threads. (This and the
 * mbarrier and bulk-copy helpers below are sm_90 code, not only sm_90a.) */
__device__ __forceinline__ void nnk_fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
/* mbarrier (shared memory, 8 bytes) and bulk copies (cp.async.bulk, the
 * TMA engine: one instruction moves a contiguous range; its bytes count
 * against the barrier's expected transaction count). */
__device__ __forceinline__ void nnk_mbar_init(uint32_t bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
/* Makes initialised mbarriers visible to the async proxy (and, after a barrier, to the other threads). */
__device__ __forceinline__ void nnk_mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
/* This thread's arrival, announcing bytes of bulk copies that complete the phase. */
__device__ __forceinline__ void nnk_mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
/* Global -> this CTA's shared memory, bytes % 16 == 0, both 16-byte aligned; completes on bar. */
__device__ __forceinline__ void nnk_bulk_g2s(uint32_t dst, const void *src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}
/* The shared::cluster address of the variable at this CTA's shared-memory
 * address addr in cluster CTA rank (same layout in every CTA). */
__device__ __forceinline__ uint32_t nnk_mapa(uint32_t addr, int rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}
/* This CTA's shared memory (src) -> another cluster CTA's (dst, a
 * shared::cluster address), bytes % 16 == 0, both 16-byte aligned;
 * completes on bar, the destination CTA's mbarrier (shared::cluster). */
__device__ __forceinline__ void nnk_bulk_s2s(uint32_t dst, uint32_t src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
               "r"(src), "r"(bytes), "r"(bar)
               : "memory");
}
/* Ends bar's life as an mbarrier, before its bytes are used for anything else. */
__device__ __forceinline__ void nnk_mbar_inval(uint32_t bar) {
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
/* Waits until the phase of parity `parity` of bar has completed (acquire:
 * the bulk copies that completed it are visible to this thread). */
__device__ __forceinline__ void nnk_mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred p;\nNNK_MBAR_WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      "@!p bra NNK_MBAR_WAIT_%=;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
#endif

/* Warpgroup MMA (wgmma, sm_90a only: compiled where __CUDA_ARCH_FEAT_SM90_ALL
 * is defined). D (64 x N, FP32, the m16n8 accumulator layout per warp: warp
 * w of the group holds rows 16 w .. 16 w + 15, element 4 j + e of n8 block
 * j) += A (64 x 16) B (16 x N), both FP16 in shared memory, K-major, no
 * swizzle, described by nnk_wg_desc. */
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* A shared-memory matrix descriptor, no swizzle: core matrices of 8 rows x
 * 16 bytes (rows 16 bytes apart); lbo = bytes between core matrices
 * adjacent in K, sbo = bytes between core matrices adjacent in M (or N). */
__device__ __forceinline__ uint64_t nnk_wg_desc(uint32_t saddr, uint32_t lbo, uint32_t sbo) {
  return (uint64_t)((saddr >> 4) & 0x3fff) | (uint64_t)((lbo >> 4) & 0x3fff) << 16 |
         (uint64_t)((sbo >> 4) & 0x3fff) << 32;
}
/* Orders this thread's earlier register and shared-memory accesses before the warpgroup's next wgmma. */
__device__ __forceinline__ void nnk_wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void nnk_wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
/* At most N of the warpgroup's committed wgmma groups still pending. */
template <int N>
__device__ __forceinline__ void nnk_wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
/* Keeps the compiler from moving accumulator registers while a wgmma may still write them. */
template <int R>
__device__ __forceinline__ void nnk_wg_pin(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; i++) asm volatile("" : "+f"(d[i])::"memory");
}
__device__ __forceinline__ void nnk_wgmma_n16(float (&d)[8], uint64_t da, uint64_t db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "l"(da), "l"(db), "r"(1));
}
__device__ __forceinline__ void nnk_wgmma_n64(float (&d)[32], uint64_t da, uint64_t db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(da), "l"(db), "r"(1));
}
__device__ __forceinline__ void nnk_wgmma_n128(float (&d)[64], uint64_t da, uint64_t db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(da), "l"(db), "r"(1));
}
/* Register-A warpgroup MMAs (the cluster kernel, gpu_cnet.cu): D (64 x N,
 * FP32, d[j][e] the m16n8 accumulator layout of n8 block j, as
 * nnk_mma16816's c) += A (64 x 16, FP16: each warp of the group holds rows
 * 16 w .. 16 w + 15 as the m16n8k16 A fragment, a) B (16 x N, FP16 in
 * shared memory, K-major, no swizzle, descriptor db). a must stay
 * unchanged until a wgmma wait shows the MMA complete. */
__device__ __forceinline__ void nnk_wgmma_rs_n32(float (&d)[4][4], const uint32_t (&a)[4], uint64_t db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
      "%13, %14, %15}, {%16, %17, %18, %19}, %20, p, 1, 1, 0;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
        "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]),
        "+f"(d[3][2]), "+f"(d[3][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}
__device__ __forceinline__ void nnk_wgmma_rs_n16(float (&d)[2][4], const uint32_t (&a)[4], uint64_t db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, "
      "%12, p, 1, 1, 0;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
        "+f"(d[1][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}
#endif

#endif
