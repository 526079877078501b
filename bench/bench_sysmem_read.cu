/*
 * bench_sysmem_read.cu - how fast one thread block reads a request out of
 * mapped host memory (the pipeline's ring slots: issue 15's 16 KiB rows).
 *
 * Per iteration the host writes a fresh pattern into one of 64 slots of a
 * mapped pinned buffer, then one kernel of one block copies `bytes` of it
 * into device memory by one method and stamps the GPU's global timer: after
 * the block's start barrier and after the block's barrier that follows the
 * copy. The data is checked against the pattern (a stale or torn read is
 * counted). Methods, interleaved each iteration:
 *   lsu8    8-byte loads, 8 in flight per thread (cudaq__copy_in_flight, as
 *           the pipeline's gate copy and the bench's stage kernel at slot + 24)
 *   lsu16   16-byte loads, 8 in flight per thread (a 16-byte aligned source)
 *   lsu16w  16-byte loads, 1,024 threads (one or two loads each)
 *   bulk    one cp.async.bulk (the TMA engine) into shared memory, counted
 *           on an mbarrier, then the block copies shared -> device memory
 *   bulk4   four cp.async.bulk of a quarter each, issued by four lanes
 * and the other way (the stage's answer into mapped memory, then the
 * system-scope fence that a ready flag's release needs), `bytes` from device
 * memory into one of the slots, timed until the block's fence returns:
 *   st8     8-byte stores (a slot's payload at + 24), 8 loads in flight per thread
 *   st16    16-byte stores
 *   bulkst  one cp.async.bulk shared -> mapped memory, waited for, after the
 *           block staged the bytes in shared memory
 *
 *   bench_sysmem_read [--iters N] [--sizes 2048,16384]
 *
 * Prints p50 / p90 / p99 / max of the in-kernel time (us) per method and
 * size, and the bad reads. Needs an sm_90 GPU for the bulk methods.
 */
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../src/nn/gpu_mma.cuh"
#include "bench_common.h"
#include "bench_cuda_check.h"
#include "cudaq/realtime/pipeline.h"

#define CK(x) BENCH_CUDA_CK(x)

namespace {

constexpr int kSlots = 64;
constexpr size_t kMaxBytes = 32768;
constexpr int kMethods = 8;
const char *kName[kMethods] = {"lsu8", "lsu16", "lsu16w", "bulk", "bulk4", "st8", "st16", "bulkst"};
constexpr int kFirstStore = 5;

__device__ __forceinline__ uint64_t gtime() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/* The copy of `bytes` from src (mapped host memory) to dst (device memory)
 * by method m; t[0], t[1]: the timer before and after. */
__global__ void k_read(int m, const uint8_t *__restrict__ src, uint8_t *__restrict__ dst, uint32_t bytes,
                       uint64_t *t) {
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ __align__(8) uint64_t bar;
  const uint32_t tid = threadIdx.x, nt = blockDim.x;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const uint32_t bar_u = nnk_smem_u32(&bar);
  if (m >= 3 && tid == 0) {
    nnk_mbar_init(bar_u, 1);
    nnk_mbar_init_fence();
  }
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (m == 7) { /* the bytes to send, staged before the timer starts */
    for (uint32_t i = tid; i < bytes / 16; i += nt) ((uint4 *)smem)[i] = ((const uint4 *)dst)[i];
    nnk_fence_proxy_async();
  }
#endif
  __syncthreads();
  uint64_t t0 = 0;
  if (tid == 0) t0 = gtime();
  if (m >= 5) { /* src is the destination here: mapped memory; dst the device source */
    if (m == 5) {
      cudaq__copy_in_flight<uint2, uint32_t>((const uint2 *)dst, (uint2 *)src, tid, bytes / 8, nt);
    } else if (m == 6) {
      cudaq__copy_in_flight<uint4, uint32_t>((const uint4 *)dst, (uint4 *)src, tid, bytes / 16, nt);
    } else {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
      if (tid == 0) { /* every thread fenced its staging stores to the async proxy before the start barrier */
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(src),
                     "r"(nnk_smem_u32(smem)), "r"(bytes)
                     : "memory");
        asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
        asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
      }
#endif
    }
    __syncthreads();
    if (tid == 0) __threadfence_system(); /* what a ready flag's system-scope release waits for */
  } else if (m == 0) {
    cudaq__copy_in_flight<uint2, uint32_t>((const uint2 *)src, (uint2 *)dst, tid, bytes / 8, nt);
  } else if (m == 1 || m == 2) {
    cudaq__copy_in_flight<uint4, uint32_t>((const uint4 *)src, (uint4 *)dst, tid, bytes / 16, nt);
  } else {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const uint32_t s_u = nnk_smem_u32(smem);
    if (m == 3 && tid == 0) {
      nnk_mbar_arrive_expect_tx(bar_u, bytes);
      nnk_bulk_g2s(s_u, src, bytes, bar_u);
    } else if (m == 4 && tid < 32) {
      const uint32_t q = bytes / 4; /* a multiple of 16 for the sizes allowed */
      if (tid == 0) nnk_mbar_arrive_expect_tx(bar_u, bytes);
      __syncwarp();
      if (tid < 4) nnk_bulk_g2s(s_u + tid * q, src + tid * q, q, bar_u);
    }
    nnk_mbar_wait(bar_u, 0);
    for (uint32_t i = tid; i < bytes / 16; i += nt) ((uint4 *)dst)[i] = ((const uint4 *)smem)[i];
#endif
  }
  __syncthreads();
  if (tid == 0) {
    t[0] = t0;
    t[1] = gtime();
  }
}

}  // namespace

int main(int argc, char **argv) {
  int iters = 2000;
  std::vector<uint32_t> sizes = {2048, 16384};
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--iters")) {
      iters = atoi(argv[i + 1]);
    } else if (!strcmp(argv[i], "--sizes")) {
      sizes.clear();
      for (char *s = argv[i + 1]; *s;) {
        char *e;
        unsigned long v = strtoul(s, &e, 10);
        if (e == s || v == 0 || v % 64 || v > kMaxBytes) {
          fprintf(stderr, "bench_sysmem_read: --sizes: multiples of 64 up to %zu\n", kMaxBytes);
          return 2;
        }
        sizes.push_back((uint32_t)v);
        s = *e == ',' ? e + 1 : e;
      }
    } else {
      fprintf(stderr, "usage: bench_sysmem_read [--iters N] [--sizes 2048,16384]\n");
      return 2;
    }
  }
  BENCH_EXIT_IF_NO_GPU();
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const bool bulk_ok = prop.major >= 9;
  const size_t stride = kMaxBytes + 64;
  uint8_t *h = nullptr, *hd = nullptr, *d = nullptr;
  uint64_t *t = nullptr, *td = nullptr;
  CK(cudaHostAlloc(&h, stride * kSlots, cudaHostAllocMapped));
  CK(cudaHostGetDevicePointer((void **)&hd, h, 0));
  CK(cudaHostAlloc(&t, 2 * sizeof(uint64_t), cudaHostAllocMapped));
  CK(cudaHostGetDevicePointer((void **)&td, t, 0));
  CK(cudaMalloc(&d, kMaxBytes));
  std::vector<uint8_t> back(kMaxBytes);
  CK(cudaFuncSetAttribute(k_read, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kMaxBytes));
  printf("device %s; one block reads BYTES of mapped host memory into device memory, or writes them there and\n"
         "fences (st*), in-kernel time in us\n",
         prop.name);
  printf("| bytes | method | threads | p50 | p90 | p99 | max | bad reads |\n|---|---|---|---|---|---|---|---|\n");
  for (uint32_t bytes : sizes) {
    std::vector<uint64_t> ns[kMethods]; /* in-kernel times */
    long bad[kMethods] = {0};
    for (int it = 0; it < iters; ++it) {
      for (int m = 0; m < kMethods; ++m) {
        if ((m == 3 || m == 4 || m == 7) && !bulk_ok) continue;
        const int slot = (it * kMethods + m) % kSlots;
        /* lsu8 reads at +24 (8-byte aligned, as a ring slot's payload), the others at +16 */
        const size_t off = m == 0 || m == 5 ? 24 : 16;
        uint8_t *p = h + (size_t)slot * stride + off;
        const uint8_t pat = (uint8_t)(it * 7 + m * 31 + 1);
        const bool store = m >= kFirstStore, check = it % 50 == 0 || it == iters - 1;
        for (uint32_t i = 0; i < bytes; ++i) back[i] = (uint8_t)(pat + i * 13);
        if (store) /* the device source of the answer, copied off the timed path */
          CK(cudaMemcpy(d, back.data(), bytes, cudaMemcpyHostToDevice));
        else
          memcpy(p, back.data(), bytes);
        const unsigned threads = m == 2 ? 1024 : 256;
        k_read<<<1, threads, (m >= 3 && m <= 4) || m == 7 ? bytes : 0>>>(m, hd + (size_t)slot * stride + off, d,
                                                                          bytes, td);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        ns[m].push_back(t[1] - t[0]);
        if (check) { /* the data check, off the timed path */
          if (!store) CK(cudaMemcpy(back.data(), d, bytes, cudaMemcpyDeviceToHost));
          const uint8_t *got = store ? p : back.data();
          for (uint32_t i = 0; i < bytes; ++i)
            if (got[i] != (uint8_t)(pat + i * 13)) {
              bad[m]++;
              break;
            }
        }
      }
    }
    for (int m = 0; m < kMethods; ++m) {
      if (ns[m].empty()) continue;
      const bench_stats_t st = bench_percentiles(ns[m].data(), ns[m].size());
      printf("| %u | %s | %d | %.2f | %.2f | %.2f | %.2f | %ld |\n", bytes, kName[m], m == 2 ? 1024 : 256, st.p50,
             st.p90, st.p99, st.max, bad[m]);
    }
    fflush(stdout);
  }
  return 0;
}
