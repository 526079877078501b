/* The device program's interpreter (cudaq_nn_device_program_call,
 * cudaq/nn/device_program.cuh): the engine's plan run by the calling grid,
 * step after step, with a grid barrier between steps in place of a kernel
 * boundary. Built as relocatable device code (library cudaq_nn_device) so
 * that a DEVICE_CALL handler in the caller's code can call it.
 *
 * Every step reuses the device code of the engine's own kernels (one home
 * per operation: gpu_ew.cuh for elementwise, fused, copy and conversion
 * steps, gpu_stack.cuh for the convolutions as one stack, gpu_tail.cuh for
 * the predecoder tail), with the grid-stride loops those kernels use, so
 * the results are those of the engine's graph in STACK mode.
 *
 * Memory ordering: every barrier here is cooperative_groups' grid.sync(),
 * which orders each block's writes before every other block's reads after
 * it (a gpu-scope fence and barrier). The input is read after the caller's
 * acquire of the request (the dispatcher's A1 and its grid barrier); the
 * outputs written to the caller's result area before the caller's own
 * barrier and release of the response. */
#include <cooperative_groups.h>
#include <cuda_fp16.h>
#include <stdio.h>
#include <string.h>

#include "cudaq/nn/device_program.cuh"
#include "cudaq/realtime/dispatch_kernel.h"
#include "dispatch_loop.cuh" /* src/cuda: the dispatch loop, instantiated here with the handler inline */
#include "gpu_devprog.h"
#include "gpu_ew.cuh"
#include "gpu_stack.cuh"
#include "gpu_tail.cuh"

namespace {

/* The GPU's nanosecond clock (profiling stamps only). */
__device__ __forceinline__ void stamp(const cudaq_nn_device_program &p, int at) {
  if (!p.prof || blockIdx.x != 0 || threadIdx.x != 0) return;
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  p.prof[at] = t;
}

__device__ __forceinline__ int64_t g_first() { return (int64_t)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ int64_t g_stride() { return (int64_t)gridDim.x * blockDim.x; }

/* The tail kernel's blocks as virtual blocks over the grid (tail_part's
 * loop covers its product's outputs from any block count). */
template <typename T>
__device__ void run_tail(const nnk_tail &q) {
  const unsigned b0 = q.p[0].blocks, total = b0 + (q.n > 1 ? q.p[1].blocks : 0u);
  for (unsigned vb = blockIdx.x; vb < total; vb += gridDim.x) {
    if (vb >= b0) tail_part<T>(q, q.p[1], vb - b0, q.p[1].blocks);
    else tail_part<T>(q, q.p[0], vb, b0);
  }
}

__device__ void run_step(const cudaq_nn_device_program &p, const nnk_devprog_step &st, unsigned char *smem) {
  const int64_t first = g_first(), stride = g_stride();
  switch (st.kind) {
    case DP_ELEMENTWISE:
      for (int64_t i = first; i < st.ew.n; i += stride) ew_at(st.ew, i);
      break;
    case DP_FUSED:
      for (int64_t i = first; i < st.fz.n; i += stride) fused_at(st.fz, i);
      break;
    case DP_MOVE:
      for (int64_t i = first; i < st.mv.n; i += stride) move_at(st.mv, i);
      break;
    case DP_CONVERT:
      for (int64_t i = first; i < st.n; i += stride) convert_at(st.cin, st.cin_dt, st.cout, st.cout_dt, i);
      break;
    case DP_STACK:
      stack_run(p.stack, smem);
      break;
    case DP_TAIL:
      if (p.half) run_tail<__half>(st.tl);
      else run_tail<float>(st.tl);
      break;
    default:
      break;
  }
}

/* The program's body, compiled into its callers: the extern function below
 * (an ABI call when reached through a function pointer) and the dispatch
 * loop that runs the handler inline (nn_dispatch_kernel). */
__device__ __forceinline__ int program_call(const cudaq_nn_device_program &p, const void *in, uint32_t in_len,
                                            void *out, uint32_t max_out, uint32_t *out_len, void *smem) {
  /* Uniform checks: every thread returns the same status, no barrier passed. */
  if (blockDim.x != NNK_DEVPROG_THREADS || blockDim.y != 1 || blockDim.z != 1) return CUDAQ_NN_DEVICE_ERR_LAUNCH;
  if (in_len != p.in_words * 4u) return CUDAQ_NN_DEVICE_ERR_INPUT_LEN;
  if (max_out < p.out_bytes) return CUDAQ_NN_DEVICE_ERR_RESULT_LEN;
  cooperative_groups::grid_group grid = cooperative_groups::this_grid();
  const int64_t first = g_first(), stride = g_stride();
  stamp(p, 0);

  /* Input 0 into the engine's buffer, every load of a thread issued before
   * its stores (the input may be across PCIe), each value checked. */
  const uint32_t *src = static_cast<const uint32_t *>(in);
  bool bad = false;
  for (int64_t base = first; base < p.in_words; base += 4 * stride) {
    uint32_t v[4];
#pragma unroll
    for (int u = 0; u < 4; u++) v[u] = base + u * stride < p.in_words ? src[base + u * stride] : 0u;
#pragma unroll
    for (int u = 0; u < 4; u++)
      if (base + u * stride < p.in_words) {
        bad |= v[u] > 1u; /* also negative values (unsigned) */
        p.in[base + u * stride] = (int32_t)v[u];
      }
  }
  if (bad) atomicOr(p.bad, 1u); /* only on bad input: no block reduction on the common path */
  grid.sync(); /* the input and the bad flag, grid-wide */
  if (*reinterpret_cast<volatile unsigned *>(p.bad)) {
    grid.sync(); /* every thread has read the flag */
    if (blockIdx.x == 0 && threadIdx.x == 0) *p.bad = 0u;
    grid.sync(); /* the reset before any later call's flag */
    return CUDAQ_NN_DEVICE_ERR_INPUT_VALUE;
  }

  stamp(p, 1);
  unsigned char *sm = static_cast<unsigned char *>(smem);
  for (int k = 0; k < p.n_steps; k++) {
    run_step(p, p.step[k], sm);
    grid.sync(); /* the step's results before the next step's reads */
    stamp(p, 2 + k);
  }

  /* Every output, in order, into the caller's result area. */
  uint32_t *dst = static_cast<uint32_t *>(out);
  uint32_t at = 0;
  for (int o = 0; o < p.n_out; o++) {
    for (int64_t i = first; i < p.out_words[o]; i += stride) dst[at + i] = p.out[o][i];
    at += p.out_words[o];
  }
  *out_len = p.out_bytes;
  stamp(p, 2 + p.n_steps);
  return 0;
}

}  // namespace

extern "C" __device__ int cudaq_nn_device_program_call(const cudaq_nn_device_program_t *program, const void *in,
                                                       uint32_t in_len, void *out, uint32_t max_out,
                                                       uint32_t *out_len, void *smem) {
  return program_call(*program, in, in_len, out, max_out, out_len, smem);
}

/* ---- the DEVICE_CALL handler --------------------------------------------- */

namespace {
/* The program the handler runs (cudaq_nn_device_program_entry); written by
 * the host before the dispatch kernel starts. */
__device__ const cudaq_nn_device_program_t *bound_program;

/* The handler's body, called through the pointer or compiled into the loop
 * (nn_inline); smem is the calling block's handler shared memory. */
__device__ __forceinline__ int run_bound(const void *args, void *result, uint32_t arg_len, uint32_t max_result_len,
                                         uint32_t *result_len, void *smem) {
  const cudaq_nn_device_program_t *p = bound_program;
  if (!p) return CUDAQ_NN_DEVICE_ERR_UNBOUND;
  return program_call(*p, args, arg_len, result, max_result_len, result_len, smem);
}
}  // namespace

extern "C" __device__ int cudaq_nn_device_program_handler(const void *args, void *result, uint32_t arg_len,
                                                          uint32_t max_result_len, uint32_t *result_len) {
  return run_bound(args, result, arg_len, max_result_len, result_len, cudaq_dispatch_handler_smem());
}

namespace {
__device__ cudaq_device_rpc_fn_t handler_address = cudaq_nn_device_program_handler;
}  // namespace

extern "C" cudaq_nn_status_t cudaq_nn_device_program_entry(const cudaq_nn_device_program_info_t *info,
                                                           uint32_t function_id, cudaq_function_entry_t *entry,
                                                           cudaq_nn_error_t *err) {
  if (!info || !info->program || !entry) {
    if (err) snprintf(err->message, sizeof err->message, "NULL argument");
    return CUDAQ_NN_ERR_INVALID_ARG;
  }
  void *fn = nullptr;
  cudaError_t e = cudaMemcpyFromSymbol(&fn, handler_address, sizeof fn);
  if (e == cudaSuccess) e = cudaMemcpyToSymbol(bound_program, &info->program, sizeof info->program);
  if (e != cudaSuccess) {
    if (err) snprintf(err->message, sizeof err->message, "binding the device program failed: %s", cudaGetErrorString(e));
    return CUDAQ_NN_ERR_CUDA;
  }
  memset(entry, 0, sizeof *entry);
  entry->handler.device_fn_ptr = fn;
  entry->function_id = function_id;
  entry->dispatch_mode = CUDAQ_DISPATCH_DEVICE_CALL;
  entry->schema.num_args = 1;
  entry->schema.args[0].type_id = CUDAQ_TYPE_ARRAY_INT32;
  entry->schema.args[0].num_elements = (uint32_t)(info->input_bytes / 4);
  entry->schema.args[0].size_bytes = (uint32_t)info->input_bytes;
  entry->schema.num_results = 1;
  entry->schema.results[0].type_id = CUDAQ_TYPE_ARRAY_INT32;
  entry->schema.results[0].num_elements = (uint32_t)(info->output_bytes / 4);
  entry->schema.results[0].size_bytes = (uint32_t)info->output_bytes;
  return CUDAQ_NN_OK;
}

/* ---- the dispatch loop with the handler compiled in ------------------------ */

namespace {

/* Entries whose handler is cudaq_nn_device_program_handler run the bound
 * program inline; other entries through their pointer. */
struct nn_inline : call_by_pointer {
  static __device__ __forceinline__ bool inline_call(cudaq_device_rpc_fn_t fn) {
    return fn == cudaq_nn_device_program_handler;
  }
  static __device__ __forceinline__ int32_t call(const void *args, void *result, uint32_t len, uint32_t max,
                                                 uint32_t *rl) {
    return run_bound(args, result, len, max, rl, handler_smem_here());
  }
};

__global__ void __launch_bounds__(NNK_DEVPROG_THREADS, 1) nn_dispatch_kernel(cudaq__dispatch_params p) {
  dispatch_loop<true, nn_inline>(p);
}

}  // namespace

extern "C" void cudaq_nn_launch_dispatch_kernel(volatile uint64_t *rx_flags, volatile uint64_t *tx_flags,
                                                uint8_t *rx_data, uint8_t *tx_data, size_t rx_stride_sz,
                                                size_t tx_stride_sz, cudaq_function_entry_t *function_table,
                                                size_t func_count, volatile int *shutdown_flag, uint64_t *stats,
                                                size_t num_slots, uint32_t num_blocks,
                                                const cudaq_dispatch_coop_options_t *options, cudaStream_t stream) {
  cudaq__dispatch_params p;
  if (cudaq__dispatch_prepare(true, rx_flags, tx_flags, rx_data, tx_data, rx_stride_sz, tx_stride_sz, function_table,
                              func_count, shutdown_flag, stats, num_slots, num_blocks, NNK_DEVPROG_THREADS, options, &p))
    cudaq__coop_launch(nn_dispatch_kernel, p, num_blocks, NNK_DEVPROG_THREADS, stream);
}

extern "C" cudaError_t cudaq_nn_dispatch_kernel_query_occupancy(int *out_blocks, size_t rx_stride_sz,
                                                                size_t handler_smem_bytes) {
  return cudaq__coop_occupancy(nn_dispatch_kernel, out_blocks, NNK_DEVPROG_THREADS, rx_stride_sz, handler_smem_bytes);
}
