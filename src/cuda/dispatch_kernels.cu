/*
 * dispatch_kernels.cu - persistent dispatch kernels (regular, cooperative)
 * and their launch layer.
 *
 * Critical path of one request (mapped pinned ring, GPU polling host memory
 * across PCIe): the warp polling the RX flag sees it set (one PCIe read),
 * the block reads header and payload in one parallel step (one more PCIe
 * read, every load issued at once), the handler runs out of shared memory,
 * results and the response header go out as posted writes, and one
 * system-scope release store publishes the TX flag. Control words (the
 * function table, counters) live in device memory; the shutdown flag is
 * read only every SHUTDOWN_POLL_INTERVAL loop iterations, so a flag in host
 * memory costs the request path nothing.
 *
 * Memory ordering: the GPU never does read-modify-write on host memory
 * (hostNativeAtomicSupported is 0 on the measured machine): flags are only
 * loaded (acquire) and stored (release) with system scope. The loop itself
 * and its helpers: dispatch_loop.cuh.
 */
#include <cooperative_groups.h>
#include <cuda/atomic>

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudaq/realtime/dispatch_kernel.h"
#include "dispatch_internal.cuh"
#include "dispatch_loop.cuh"

namespace {

__global__ void dispatch_kernel_regular(dispatch_params p) { dispatch_loop<false>(p); }
__global__ void dispatch_kernel_cooperative(dispatch_params p) { dispatch_loop<true>(p); }

/* ---- counters registry ------------------------------------------------- */

/* Counters live in device memory owned by the launch layer, found by the
 * stats pointer the caller passes (the published launch signature has no
 * other place for them). Not on any hot path. */
struct counters_node {
  counters_node *next;
  const uint64_t *stats;
  cudaq__device_state *dev;
  /* Set by prepare_counters_for_dispatcher (cudaq_dispatcher_start): the
   * next launch keeps the counters as prepared instead of deciding from
   * stats[0]. Guarded by registry_lock. */
  bool prepared;
  /* The ring's cudaq_rx_completion_t for that launch (same guard). */
  uint32_t completion;
};
pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
counters_node *registry;

/* The node of `stats`, created (counters zeroed) when create is true and
 * there is none. NULL on failure. Call with registry_lock held. */
counters_node *node_for(const uint64_t *stats, bool create) {
  for (counters_node *n = registry; n; n = n->next)
    if (n->stats == stats) return n;
  if (!create) return nullptr;
  counters_node *n = static_cast<counters_node *>(calloc(1, sizeof *n));
  if (n && cudaMalloc(&n->dev, sizeof(cudaq__device_state)) == cudaSuccess &&
      cudaq__memset_private_stream(n->dev, 0, sizeof(cudaq__device_state)) == cudaSuccess) {
    n->stats = stats;
    n->next = registry;
    registry = n;
    return n;
  }
  if (n && n->dev) cudaFree(n->dev);
  free(n);
  return nullptr;
}

/* Zeroes the device state from byte `from` on (0: every counter;
 * offsetof(exited_blocks): only the per-launch fields). */
bool reset_state(cudaq__device_state *dev, size_t from) {
  return cudaq__memset_private_stream(reinterpret_cast<uint8_t *>(dev) + from, 0,
                                      sizeof(cudaq__device_state) - from) == cudaSuccess;
}

} // namespace

cudaq__device_state *cudaq__state_for(const uint64_t *stats, bool create) {
  pthread_mutex_lock(&registry_lock);
  counters_node *n = node_for(stats, create);
  pthread_mutex_unlock(&registry_lock);
  return n ? n->dev : nullptr;
}

/* Called by cudaq_dispatcher_start (through the hook registered below)
 * right before it calls the launch function, so that counters follow the
 * dispatcher, not the contents of stats[0]: fresh (the dispatcher's first
 * start) zeroes every counter, else they continue, even when the earlier
 * runs only dropped requests and stats[0] still reads 0. Returns 0, or -1
 * when the device state cannot be made. */
static int prepare_counters_for_dispatcher(const uint64_t *stats, int fresh, uint32_t completion) {
  pthread_mutex_lock(&registry_lock);
  counters_node *n = node_for(stats, true);
  bool ok = n && (!fresh || reset_state(n->dev, 0));
  if (ok) {
    n->prepared = true;
    n->completion = completion;
  }
  pthread_mutex_unlock(&registry_lock);
  return ok ? 0 : -1;
}

cudaq__device_state *cudaq__state_for_launch(const uint64_t *stats, uint32_t *completion) {
  pthread_mutex_lock(&registry_lock);
  counters_node *n = node_for(stats, true);
  const bool prepared = n && n->prepared;
  if (completion) *completion = prepared ? n->completion : (uint32_t)CUDAQ_RX_COMPLETION_FLAG;
  if (n) n->prepared = false; /* one launch per preparation */
  pthread_mutex_unlock(&registry_lock);
  if (!n) return nullptr;
  size_t from = offsetof(cudaq__device_state, exited_blocks); /* per-launch fields: always */
  if (!prepared) {
    /* A launch helper called directly: fresh counters for a zeroed stats
     * buffer, else they continue. */
    uint64_t processed = 0;
    if (cudaq__copy_private_stream(&processed, stats, sizeof processed) != cudaSuccess) return nullptr;
    if (processed == 0) from = 0;
  }
  return reset_state(n->dev, from) ? n->dev : nullptr;
}

namespace {

template <bool Coop>
void launch(volatile uint64_t *rx_flags, volatile uint64_t *tx_flags, uint8_t *rx_data,
            uint8_t *tx_data, size_t rx_stride_sz, size_t tx_stride_sz,
            cudaq_function_entry_t *function_table, size_t func_count, volatile int *shutdown_flag,
            uint64_t *stats, size_t num_slots, uint32_t num_blocks, uint32_t threads_per_block,
            const cudaq_dispatch_coop_options_t *opt, cudaStream_t stream) {
  dispatch_params p;
  if (!cudaq__dispatch_prepare(Coop, rx_flags, tx_flags, rx_data, tx_data, rx_stride_sz, tx_stride_sz, function_table,
                               func_count, shutdown_flag, stats, num_slots, num_blocks, threads_per_block, opt, &p))
    return;
  static_assert(MAX_LAUNCH_SMEM <= 48 * 1024, "staging beyond 48 KiB needs cudaFuncSetAttribute");
  if (Coop) cudaq__coop_launch(dispatch_kernel_cooperative, p, num_blocks, threads_per_block, stream);
  else cudaq__regular_launch(dispatch_kernel_regular, p, num_blocks, threads_per_block, stream);
}

} // namespace

bool cudaq__dispatch_prepare(bool coop, volatile uint64_t *rx_flags, volatile uint64_t *tx_flags, uint8_t *rx_data,
                             uint8_t *tx_data, size_t rx_stride_sz, size_t tx_stride_sz,
                             cudaq_function_entry_t *function_table, size_t func_count, volatile int *shutdown_flag,
                             uint64_t *stats, size_t num_slots, uint32_t num_blocks, uint32_t threads_per_block,
                             const cudaq_dispatch_coop_options_t *opt, cudaq__dispatch_params *out) {
  dispatch_params &p = *out;
  p = dispatch_params{};
  p.rx_flags = const_cast<uint64_t *>(rx_flags);
  p.tx_flags = const_cast<uint64_t *>(tx_flags);
  p.rx_data = rx_data;
  p.tx_data = tx_data;
  p.rx_stride = (uint32_t)rx_stride_sz;
  p.tx_stride = (uint32_t)tx_stride_sz;
  p.table = function_table;
  p.table_count = (uint32_t)func_count;
  p.shutdown = const_cast<int *>(shutdown_flag);
  p.stats = stats;
  p.num_slots = (uint32_t)num_slots;
  if (!rx_flags || !tx_flags || !rx_data || !tx_data || !function_table || !shutdown_flag || !stats ||
      num_slots == 0 || num_slots > UINT32_MAX || func_count > UINT32_MAX ||
      rx_stride_sz < CUDAQ_RPC_HEADER_SIZE || tx_stride_sz < CUDAQ_RPC_HEADER_SIZE ||
      rx_stride_sz % 4 || tx_stride_sz % 4 || rx_stride_sz > UINT32_MAX || tx_stride_sz > UINT32_MAX ||
      threads_per_block < 32 || threads_per_block % 32 || num_blocks == 0 ||
      (opt && (!coop || opt->handler_smem_bytes > MAX_HANDLER_SMEM))) {
    cudaq__report_bad_launch();
    return false;
  }
  uint32_t completion = CUDAQ_RX_COMPLETION_FLAG;
  p.state = cudaq__state_for_launch(stats, &completion);
  if (!p.state) {
    cudaq__report_bad_launch();
    return false;
  }
  /* Staging area: the whole request up to MAX_STAGE_BYTES of payload,
   * rounded up to 16 bytes (never read past the slot: staging stops at
   * header + arg_len). The polling warp prefetches up to 512 bytes. */
  p.stage_bytes = cudaq__dispatch_stage_bytes(rx_stride_sz);
  const size_t pre = 32u * PREFETCH_WORDS_PER_LANE * 4u;
  p.prefetch_bytes = (uint32_t)(rx_stride_sz < pre ? rx_stride_sz : pre);
  /* A/B of the batched count (bench_gpu_dispatch): CUDAQ_DISPATCH_COUNT_EVERY=1
   * adds every answer to `processed` at once, as before. */
  p.count_every = COUNT_EVERY;
  if (const char *ce = getenv("CUDAQ_DISPATCH_COUNT_EVERY")) {
    const long v = strtol(ce, nullptr, 10);
    if (v >= 1 && v <= 1 << 20) p.count_every = (uint32_t)v;
  }
  /* The in-flight marker and the RX clear are stored while the request's
   * prefetch is in flight (prefetch_request; measured in
   * bench/results/gpu-dispatch-h200-2026-11-29.md).
   * CUDAQ_DISPATCH_EARLY_CLEAR=0 stores them after it, as before (A/B). */
  p.early_clear = 1;
  if (const char *ec = getenv("CUDAQ_DISPATCH_EARLY_CLEAR"))
    if (*ec) p.early_clear = strtol(ec, nullptr, 10) != 0 ? 1u : 0u;
  /* Header completion: the ring's mode passed by cudaq_dispatcher_start
   * with the counters' preparation (a launch helper called directly serves
   * the spec's flag protocol). */
  if (!cudaq__dispatch_set_completion(&p, completion)) {
    cudaq__report_bad_launch();
    return false;
  }
  p.no_stage = opt && opt->args_in_slot ? 1u : 0u;
  p.handler_smem = opt ? (uint32_t)((opt->handler_smem_bytes + 15) & ~size_t(15)) : 0u;
  return true;
}

bool cudaq__dispatch_set_completion(cudaq__dispatch_params *p, uint32_t completion) {
  p->header_poll = completion == CUDAQ_RX_COMPLETION_HEADER ? 1u : 0u;
  if (!p->header_poll) return true;
  /* cudaq_dispatcher_set_ringbuffer checked the ring; the layout is checked
   * again here, where it is relied on (dispatch_loop.cuh, HEADER_LINE). */
  if (!cudaq_header_completion_layout_ok(p->rx_data, p->tx_data, p->rx_stride)) return false;
  p->early_clear = 1;
  p->prefetch_bytes = HEADER_LINE;
  return true;
}

/* A launch helper returns void (published signature); argument errors are
 * reported the way launch errors are, through cudaGetLastError(), by a
 * launch with an empty grid, which CUDA refuses with
 * cudaErrorInvalidConfiguration without running anything. */
void cudaq__report_bad_launch(void) { dispatch_kernel_regular<<<0, 0>>>(dispatch_params{}); }

cudaError_t cudaq__memset_private_stream(void *dev, int value, size_t bytes) {
  cudaStream_t s;
  cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (e != cudaSuccess) return e;
  e = cudaMemsetAsync(dev, value, bytes, s);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
  return e;
}

cudaError_t cudaq__copy_private_stream(void *dst, const void *src, size_t bytes) {
  cudaStream_t s;
  cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (e != cudaSuccess) return e;
  /* Default: either side may be device memory, mapped host memory (a stats
   * buffer) or plain host memory. */
  e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
  return e;
}

cudaError_t cudaq__read_device_counters(const cudaq__device_state *dev, cudaq_dispatcher_counters_t *out) {
  cudaq__device_state h;
  cudaError_t e = cudaq__copy_private_stream(&h, dev, sizeof h);
  if (e != cudaSuccess) return e;
  out->processed = h.processed;
  out->dropped_bad_magic = h.dropped_bad_magic;
  out->dropped_unknown_function = h.dropped_unknown_function;
  out->err_payload_too_large = h.err_payload_too_large;
  out->err_arg_len_mismatch = h.err_arg_len_mismatch;
  out->err_result_too_large = h.err_result_too_large;
  out->err_unsupported_mode = h.err_unsupported_mode;
  out->handler_errors = h.handler_errors;
  return cudaSuccess;
}

extern "C" void cudaq_launch_dispatch_kernel_regular(
    volatile uint64_t *rx_flags, volatile uint64_t *tx_flags, uint8_t *rx_data, uint8_t *tx_data,
    size_t rx_stride_sz, size_t tx_stride_sz, cudaq_function_entry_t *function_table,
    size_t func_count, volatile int *shutdown_flag, uint64_t *stats, size_t num_slots,
    uint32_t num_blocks, uint32_t threads_per_block, cudaStream_t stream) {
  launch<false>(rx_flags, tx_flags, rx_data, tx_data, rx_stride_sz, tx_stride_sz, function_table,
                func_count, shutdown_flag, stats, num_slots, num_blocks, threads_per_block, nullptr, stream);
}

extern "C" void cudaq_launch_dispatch_kernel_cooperative(
    volatile uint64_t *rx_flags, volatile uint64_t *tx_flags, uint8_t *rx_data, uint8_t *tx_data,
    size_t rx_stride_sz, size_t tx_stride_sz, cudaq_function_entry_t *function_table,
    size_t func_count, volatile int *shutdown_flag, uint64_t *stats, size_t num_slots,
    uint32_t num_blocks, uint32_t threads_per_block, cudaStream_t stream) {
  launch<true>(rx_flags, tx_flags, rx_data, tx_data, rx_stride_sz, tx_stride_sz, function_table,
               func_count, shutdown_flag, stats, num_slots, num_blocks, threads_per_block, nullptr, stream);
}

extern "C" void cudaq_launch_dispatch_kernel_cooperative_ex(
    volatile uint64_t *rx_flags, volatile uint64_t *tx_flags, uint8_t *rx_data, uint8_t *tx_data,
    size_t rx_stride_sz, size_t tx_stride_sz, cudaq_function_entry_t *function_table,
    size_t func_count, volatile int *shutdown_flag, uint64_t *stats, size_t num_slots,
    uint32_t num_blocks, uint32_t threads_per_block, const cudaq_dispatch_coop_options_t *options,
    cudaStream_t stream) {
  launch<true>(rx_flags, tx_flags, rx_data, tx_data, rx_stride_sz, tx_stride_sz, function_table,
               func_count, shutdown_flag, stats, num_slots, num_blocks, threads_per_block, options, stream);
}

extern "C" __device__ void *cudaq_dispatch_handler_smem(void) { return handler_smem_here(); }

extern "C" cudaError_t cudaq_dispatch_kernel_query_occupancy(int *out_blocks, uint32_t threads_per_block) {
  if (!out_blocks) return cudaErrorInvalidValue;
  *out_blocks = 0;
  cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(out_blocks, dispatch_kernel_regular,
                                                                (int)threads_per_block, MAX_LAUNCH_SMEM);
  if (e != cudaSuccess) *out_blocks = 0;
  return e;
}

extern "C" cudaError_t cudaq_dispatch_kernel_cooperative_query_occupancy_ex(int *out_blocks,
                                                                            uint32_t threads_per_block,
                                                                            size_t rx_stride_sz,
                                                                            size_t handler_smem_bytes) {
  return cudaq__coop_occupancy(dispatch_kernel_cooperative, out_blocks, threads_per_block, rx_stride_sz,
                               handler_smem_bytes);
}

extern "C" cudaError_t cudaq_dispatch_kernel_cooperative_query_occupancy(int *out_blocks,
                                                                         uint32_t threads_per_block) {
  if (!out_blocks) return cudaErrorInvalidValue;
  *out_blocks = 0;
  cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(out_blocks, dispatch_kernel_cooperative,
                                                                (int)threads_per_block, MAX_LAUNCH_SMEM);
  if (e != cudaSuccess) *out_blocks = 0;
  return e;
}

/* Lets cudaq_dispatcher_get_counters() and cudaq_dispatcher_start() (in
 * the shared library) reach the counters kept here, prepare a launch and
 * know the launch functions that serve header completion: registered when
 * this library is loaded. */
extern "C" void cudaq__register_dispatch_library(int (*read)(const uint64_t *, cudaq_dispatcher_counters_t *),
                                                 int (*prepare)(const uint64_t *, int, uint32_t),
                                                 cudaq_dispatch_launch_fn_t regular, cudaq_dispatch_launch_fn_t coop);
static int read_counters_for_dispatcher(const uint64_t *stats, cudaq_dispatcher_counters_t *out) {
  return cudaq_dispatch_kernel_get_counters(stats, out) == cudaSuccess ? 0 : -1;
}
__attribute__((constructor)) static void register_counter_reader() {
  cudaq__register_dispatch_library(read_counters_for_dispatcher, prepare_counters_for_dispatcher,
                                   cudaq_launch_dispatch_kernel_regular, cudaq_launch_dispatch_kernel_cooperative);
}

extern "C" void cudaq__dispatch_debug_dump(const uint64_t *stats) {
  cudaq__device_state *dev = cudaq__state_for(stats, false);
  cudaq__device_state h;
  if (!dev) {
    fprintf(stderr, "dispatch debug: no state for stats %p\n", (const void *)stats);
    return;
  }
  cudaError_t e = cudaq__copy_private_stream(&h, dev, sizeof h);
  if (e != cudaSuccess) {
    fprintf(stderr, "dispatch debug: read failed: %s\n", cudaGetErrorString(e));
    return;
  }
  fprintf(stderr,
          "dispatch debug: processed %llu, dropped %llu bad magic / %llu unknown, protocol errors "
          "%llu/%llu/%llu/%llu, handler errors %llu, last broadcast cmd %u slot %u\n",
          (unsigned long long)h.processed, (unsigned long long)h.dropped_bad_magic,
          (unsigned long long)h.dropped_unknown_function, (unsigned long long)h.err_payload_too_large,
          (unsigned long long)h.err_arg_len_mismatch, (unsigned long long)h.err_result_too_large,
          (unsigned long long)h.err_unsupported_mode, (unsigned long long)h.handler_errors, h.bcast.cmd,
          h.bcast.slot);
}

extern "C" cudaError_t cudaq_dispatch_kernel_get_counters(const uint64_t *stats,
                                                          cudaq_dispatcher_counters_t *out) {
  if (!stats || !out) return cudaErrorInvalidValue;
  cudaq__device_state *dev = cudaq__state_for(stats, false);
  if (!dev) return cudaErrorInvalidValue;
  return cudaq__read_device_counters(dev, out);
}
