/* The cluster kernel's constants and row layout, shared by its device
 * code and launch (gpu_cnet.cu) and its host-side plan (gpu_cnet_plan.cu). */
#ifndef CUDAQ_NN_GPU_CNET_CUH
#define CUDAQ_NN_GPU_CNET_CUH

#include <cstddef>

namespace {

constexpr int CN_THREADS = 256;
constexpr int CN_WARPS = CN_THREADS / 32;
constexpr int CN_MAX_CH = 32; /* input and output channels of a layer */
constexpr int CN_MAX_MI = 4;  /* m16 tiles per warp */
constexpr int CN_BATCH = 8;   /* loads in flight per thread in a window gather */
constexpr size_t CN_MAX_SMEM = 227 * 1024 - 512; /* the tap table and bias are static shared memory */
/* The zero blocks (a step's B: 2 x mst output channels x 8 halves) after
 * each weight buffer that cn_layer_wg's last batch reads past the end: its
 * batches are at most CN_TAIL_BLOCKS + 1 steps */
constexpr int CN_TAIL_BLOCKS = 3;
__host__ __device__ constexpr int cn_tail_bytes(int mst) { return CN_TAIL_BLOCKS * 2 * mst * 16; }

/* A window / activation row in halves: the channels rounded up to 16, plus
 * 8 so that the 8 rows one ldmatrix reads start in distinct bank groups. */
__host__ __device__ __forceinline__ int cn_row(int c) { return (c + 15) / 16 * 16 + 8; }

}  // namespace

#endif
