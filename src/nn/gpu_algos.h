/* The channels-last convolution's algorithm numbers (NNK_CL_*), one home
 * for the kernels (gpu_kernels.cuh, gpu_conv_cl.cu, gpu_conv_wg.cu,
 * gpu_conv_narrow.cu), the tuner and the GPU test: plain C, no CUDA. The
 * number is what a plan records and CUDAQ_NN_CL_ALGO pins. */
#ifndef CUDAQ_NN_GPU_ALGOS_H
#define CUDAQ_NN_GPU_ALGOS_H

/* Algos 0 .. NNK_CL_ALGOS-1: the tiles, tile configuration +
 * NNK_CL_CONFIGS x (split index + NNK_CL_SPLITS x depth index). */
#define NNK_CL_CONFIGS 9
#define NNK_CL_SPLITS 5
#define NNK_CL_DEPTHS 2
#define NNK_CL_ALGOS (NNK_CL_CONFIGS * NNK_CL_SPLITS * NNK_CL_DEPTHS)
/* Algos NNK_CL_ALGOS .. NNK_CL_WG_BASE-1: the brick kernel (NDHWC input,
 * 3 x 3 x 3 kernel, stride 1, dilation 1; the input window of a brick of output cells staged
 * once for every tap): brick configuration + NNK_CL_BRICK_CONFIGS x split
 * index (K split over channel blocks in a cluster of 1, 2 or 4 CTAs). */
#define NNK_CL_BRICK_CONFIGS 7
#define NNK_CL_BRICK_SPLITS 3
/* Algos NNK_CL_WG_BASE .. NNK_CL_NARROW_BASE-1: the wgmma brick kernel
 * (src/nn/gpu_conv_wg.cu; sm_90a): the brick kernel's contract, bricks of
 * planes of 8 x 8 output cells, warpgroup MMAs reading both operands from
 * shared memory. Configuration (planes x output channels per CTA) + NNK_CL_WG_CONFIGS x split index. */
#define NNK_CL_WG_CONFIGS 8
#define NNK_CL_WG_SPLITS 3
#define NNK_CL_WG_BASE (NNK_CL_ALGOS + NNK_CL_BRICK_CONFIGS * NNK_CL_BRICK_SPLITS)
/* Algos NNK_CL_NARROW_BASE .. NNK_CL_WGF_BASE-1: the narrow brick kernel
 * (src/nn/gpu_conv_narrow.cu): the brick kernels' shape with at most 16
 * output channels, every input channel in one CTA (K split among its warps,
 * no cluster). Configuration: planes of 2, 4 or 8 x 8 output cells, 8 to 24 warps,
 * the weights staged in shared memory or read into registers. */
#define NNK_CL_NARROW_CONFIGS 10
#define NNK_CL_NARROW_BASE (NNK_CL_WG_BASE + NNK_CL_WG_CONFIGS * NNK_CL_WG_SPLITS)
/* Algos NNK_CL_WGF_BASE .. NNK_CL_ALL_ALGOS-1: the wgmma kernel on flat
 * tiles (src/nn/gpu_conv_wg.cu) for "same" layers (3 x 3 x 3, stride 1,
 * padding 1 on every side): a CTA's output cells are a run of consecutive
 * positions of the grid flattened with one shared padding column, row and
 * plane, so no output plane is rounded up to 8 x 8 cells. Configurations
 * and splits as the wgmma bricks' (planes -> 64-position runs). */
#define NNK_CL_WGF_BASE (NNK_CL_NARROW_BASE + NNK_CL_NARROW_CONFIGS)
#define NNK_CL_ALL_ALGOS (NNK_CL_WGF_BASE + NNK_CL_WG_CONFIGS * NNK_CL_WG_SPLITS)

#endif
