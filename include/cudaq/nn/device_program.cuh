/*
 * cudaq/nn/device_program.cuh - an NN engine's inference as a device
 * function (extension, issues 11 and 12): the device side of
 * cudaq_nn_gpu_device_program (gpu_engine.h).
 *
 * Link the static library cudaq_nn_device with relocatable device code
 * (CMake CUDA_SEPARABLE_COMPILATION), as for the dispatch kernels' handlers.
 */
#ifndef CUDAQ_NN_DEVICE_PROGRAM_CUH
#define CUDAQ_NN_DEVICE_PROGRAM_CUH

#include <stdint.h>

#include "cudaq/nn/gpu_engine.h"
#include "cudaq/realtime/cudaq_realtime.h"
#include "cudaq/realtime/dispatch_kernel.h"

/* Statuses of cudaq_nn_device_program_call besides 0 (positive, so that a
 * DEVICE_CALL handler returning them is told apart from the dispatcher's
 * own negative CUDAQ_RPC_ERR_* codes; the dispatcher counts them as
 * handler errors). */
#define CUDAQ_NN_DEVICE_ERR_INPUT_LEN 1   /* in_len is not the program's input_bytes */
#define CUDAQ_NN_DEVICE_ERR_INPUT_VALUE 2 /* an input value other than 0 or 1 (the predecoder contract) */
#define CUDAQ_NN_DEVICE_ERR_RESULT_LEN 3  /* max_out < the program's output_bytes */
#define CUDAQ_NN_DEVICE_ERR_LAUNCH 4      /* blockDim.x is not the program's threads_per_block */
#define CUDAQ_NN_DEVICE_ERR_UNBOUND 5     /* the handler has no program (cudaq_nn_device_program_entry) */

/* Runs the program on one input. Must be called by every thread of a
 * cooperatively launched grid (any number of blocks, threads_per_block
 * threads each, all with the same arguments), e.g. from a DEVICE_CALL
 * handler of cudaq_launch_dispatch_kernel_cooperative_ex; smem is the
 * block's smem_bytes of dynamic shared memory (cudaq_dispatch_handler_smem).
 * in: input_bytes of INT32 events 0/1 (any device-visible memory: read once
 * across the grid); out: every output, concatenated (output_bytes), and
 * *out_len = output_bytes on success. Returns 0 or a
 * CUDAQ_NN_DEVICE_ERR_* status (the same in every thread; nothing written
 * then). Calls from different grids must not overlap. */
extern "C" __device__ int cudaq_nn_device_program_call(const cudaq_nn_device_program_t *program, const void *in,
                                                       uint32_t in_len, void *out, uint32_t max_out,
                                                       uint32_t *out_len, void *smem);

/* The library's DEVICE_CALL handler (the dispatch convention,
 * dispatch_kernel.h): runs the bound program on the request's payload and
 * answers every output, concatenated. Serve it with
 * cudaq_launch_dispatch_kernel_cooperative_ex: threads_per_block threads a
 * block, handler_smem_bytes = smem_bytes, args_in_slot = 1 (each block
 * reads only its share of the payload). */
extern "C" __device__ int cudaq_nn_device_program_handler(const void *args, void *result, uint32_t arg_len,
                                                          uint32_t max_result_len, uint32_t *result_len);

/* Binds a program to that handler (one program per process at a time: a
 * later call rebinds it; do it while no dispatch kernel runs) and fills a
 * function-table entry for it: DEVICE_CALL, function_id, the schema (one
 * INT32 array of input_bytes; one INT32 array of output_bytes). Returns
 * CUDAQ_NN_OK, CUDAQ_NN_ERR_INVALID_ARG or CUDAQ_NN_ERR_CUDA (err says).
 * err may be NULL. */
extern "C" cudaq_nn_status_t cudaq_nn_device_program_entry(const cudaq_nn_device_program_info_t *info,
                                                           uint32_t function_id, cudaq_function_entry_t *entry,
                                                           cudaq_nn_error_t *err);

/* The cooperative dispatch kernel (cudaq_launch_dispatch_kernel_cooperative_ex's
 * loop, same arguments and options) with cudaq_nn_device_program_handler
 * compiled in: entries pointing at it run the bound program inline, not
 * through a function-pointer call (which makes the program an ABI function:
 * spilled registers, slower); any other entry through its pointer as usual.
 * Blocks of 256 threads (the program's threads_per_block). Errors are
 * reported through cudaGetLastError(), as for the library's launch helpers.
 * Counters: cudaq_dispatch_kernel_get_counters(stats, ...). */
extern "C" void cudaq_nn_launch_dispatch_kernel(volatile uint64_t *rx_flags, volatile uint64_t *tx_flags,
                                                uint8_t *rx_data, uint8_t *tx_data, size_t rx_stride_sz,
                                                size_t tx_stride_sz, cudaq_function_entry_t *function_table,
                                                size_t func_count, volatile int *shutdown_flag, uint64_t *stats,
                                                size_t num_slots, uint32_t num_blocks,
                                                const cudaq_dispatch_coop_options_t *options, cudaStream_t stream);

/* Its blocks per SM for a slot stride and handler shared memory. */
extern "C" cudaError_t cudaq_nn_dispatch_kernel_query_occupancy(int *out_blocks, size_t rx_stride_sz,
                                                                size_t handler_smem_bytes);

#endif /* CUDAQ_NN_DEVICE_PROGRAM_CUH */
