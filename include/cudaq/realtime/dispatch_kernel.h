/*
 * cudaq/realtime/dispatch_kernel.h - the GPU dispatch path: persistent
 * dispatch kernels, their launch helpers, graph-launch dispatch and the
 * device-side handler convention.
 *
 * Spec: realtime-host-api.txt ("Kernel Launch Helper Functions", "Occupancy
 * Query and Eager Module Loading", "CUDA Graph Dispatch Mode", "Unified
 * Dispatch Mode"). Needs the CUDA toolkit; link the static library
 * cudaq_realtime_dispatch with relocatable device code (-rdc=true, CMake
 * CUDA_SEPARABLE_COMPILATION) so the dispatch kernel can call __device__
 * handlers defined in your own .cu files.
 *
 * Device-call handlers use the same convention as host handlers:
 *   __device__ int handler(const void *args, void *result, uint32_t arg_len,
 *                          uint32_t max_result_len, uint32_t *result_len);
 * The regular kernel calls a handler from every thread of one block, the
 * cooperative kernel from every thread of the grid (so a handler may use
 * __syncthreads(), and in the cooperative kernel this_grid().sync()); the
 * status and *result_len of thread 0 (of block 0) are used. args points to
 * a copy of the payload in shared memory when it fits (else to the RX slot),
 * result to the TX slot's result area. The kernel writes the response
 * header and publishes the TX flag.
 */
#ifndef CUDAQ_REALTIME_DISPATCH_KERNEL_H
#define CUDAQ_REALTIME_DISPATCH_KERNEL_H

#include <cuda_runtime.h>

#include "cudaq/realtime/cudaq_realtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef int (*cudaq_device_rpc_fn_t)(const void *args, void *result, uint32_t arg_len,
                                     uint32_t max_result_len, uint32_t *result_len);

/* ---- persistent dispatch kernels (3-kernel / ring-buffer path) ---------- */

/* Launch the persistent dispatch kernel on `stream` (non-blocking streams
 * recommended). Stop it with cudaq_dispatch_set_shutdown_flag (never with a
 * copy queued on `stream`, which would wait for the kernel). With num_blocks > 1 the regular kernel gives block b the
 * slots b, b + num_blocks, ...; each request is handled by one block. The
 * ring's slot stride must be a multiple of 4. Launch errors are reported
 * through cudaGetLastError(), as for any kernel launch. */
void cudaq_launch_dispatch_kernel_regular(
    volatile uint64_t *rx_flags, volatile uint64_t *tx_flags, uint8_t *rx_data, uint8_t *tx_data,
    size_t rx_stride_sz, size_t tx_stride_sz, cudaq_function_entry_t *function_table,
    size_t func_count, volatile int *shutdown_flag, uint64_t *stats, size_t num_slots,
    uint32_t num_blocks, uint32_t threads_per_block, cudaStream_t stream);

/* The same with a cooperative launch: the whole grid handles each request
 * and handlers may synchronise the grid. num_blocks must not exceed the
 * number of co-resident blocks (see the occupancy query). */
void cudaq_launch_dispatch_kernel_cooperative(
    volatile uint64_t *rx_flags, volatile uint64_t *tx_flags, uint8_t *rx_data, uint8_t *tx_data,
    size_t rx_stride_sz, size_t tx_stride_sz, cudaq_function_entry_t *function_table,
    size_t func_count, volatile int *shutdown_flag, uint64_t *stats, size_t num_slots,
    uint32_t num_blocks, uint32_t threads_per_block, cudaStream_t stream);

/* Cooperative launch options (extension). */
typedef struct cudaq_dispatch_coop_options {
  /* Dynamic shared memory lent to handlers, per block, after the staging
   * area; a handler finds it at cudaq_dispatch_handler_smem() (16-byte
   * aligned). At most 227 KiB; what fits beside the staging area depends
   * on the device (query with cudaq_dispatch_kernel_cooperative_query_occupancy_ex). */
  size_t handler_smem_bytes;
  /* Nonzero: no block stages the payload; every block's args point to the
   * request in the RX slot. For handlers that read each payload byte once
   * across the grid (each block staging all of it would read the payload
   * gridDim.x times, across PCIe when the ring is in host memory). */
  int args_in_slot;
} cudaq_dispatch_coop_options_t;

/* cudaq_launch_dispatch_kernel_cooperative with options (NULL: none). */
void cudaq_launch_dispatch_kernel_cooperative_ex(
    volatile uint64_t *rx_flags, volatile uint64_t *tx_flags, uint8_t *rx_data, uint8_t *tx_data,
    size_t rx_stride_sz, size_t tx_stride_sz, cudaq_function_entry_t *function_table,
    size_t func_count, volatile int *shutdown_flag, uint64_t *stats, size_t num_slots,
    uint32_t num_blocks, uint32_t threads_per_block, const cudaq_dispatch_coop_options_t *options,
    cudaStream_t stream);

/* Max active blocks per SM of the cooperative kernel for a block size, a
 * slot stride (the staging area) and handler shared memory (extension). */
cudaError_t cudaq_dispatch_kernel_cooperative_query_occupancy_ex(int *out_blocks, uint32_t threads_per_block,
                                                                size_t rx_stride_sz, size_t handler_smem_bytes);

#ifdef __CUDACC__
/* The handler shared memory of the calling block (cooperative launch with
 * cudaq_dispatch_coop_options_t.handler_smem_bytes; device code linked
 * with relocatable device code). */
__device__ void *cudaq_dispatch_handler_smem(void);
#endif

/* Max active blocks per SM of each kernel for a block size, assuming the
 * largest staging area a launch uses (32 KiB of shared memory), so a grid
 * sized from it always fits; also forces the module to load eagerly (call
 * before start, spec). *out_blocks is 0 on error. */
cudaError_t cudaq_dispatch_kernel_query_occupancy(int *out_blocks, uint32_t threads_per_block);
cudaError_t cudaq_dispatch_kernel_cooperative_query_occupancy(int *out_blocks,
                                                              uint32_t threads_per_block);

/* Counters of the dispatch kernel whose stats buffer is `stats` (the same
 * pointer passed to the launch helper): processed, drops and protocol
 * errors, as cudaq_dispatcher_counters_t (extension). The kernel keeps them
 * in device memory owned by this library; stats[0] stays the spec's
 * processed count. A launch by cudaq_dispatcher_start starts every counter
 * from 0 at the dispatcher's first start (it zeroes stats[0] too) and
 * continues them at a restart, whatever stats[0] holds (a first run that
 * only dropped requests keeps its drop counts). A launch helper called
 * directly starts them from 0 when stats[0] == 0 and continues them when it
 * holds the nonzero count of an earlier launch. The device-call kernels
 * add answers to the count in batches (every 64 per polling block, at a
 * block's first poll that finds no request, and on exit), so while requests
 * flow stats[0] and `processed` may lag by up to 63 per polling block; both
 * are exact once every block has idled (stats[0] after 32 idle polls) or the
 * kernel has exited. Returns cudaErrorInvalidValue for an unknown stats. */
cudaError_t cudaq_dispatch_kernel_get_counters(const uint64_t *stats,
                                               cudaq_dispatcher_counters_t *out);

/* ---- graph-launch dispatch (CUDAQ_DISPATCH_GRAPH_LAUNCH, sm_90+) --------- */

/* Tells a launched handler graph which request it serves. The dispatch
 * kernel fills it before each launch; the graph reads its input from
 * rx_slot + CUDAQ_RPC_HEADER_SIZE (arg_len bytes), writes its result to
 * tx_slot + CUDAQ_RPC_HEADER_SIZE (at most max_result_len bytes), and ends
 * with cudaq_graph_io_complete(). Lives in device memory (cudaMalloc). */
typedef struct cudaq_graph_io_context {
  const uint8_t *rx_slot;      /* the request (header + payload), device view: the RX slot, or a copy
                                * of it in device memory that the dispatcher made (read-only) */
  uint8_t *tx_slot;            /* response slot, device view */
  volatile uint64_t *tx_flag;  /* TX flag to publish, device view */
  uint64_t tx_flag_value;      /* value to publish (the TX slot's address) */
  uint64_t ptp_timestamp;      /* echoed */
  uint32_t request_id;         /* echoed */
  uint32_t function_id;
  uint32_t arg_len;
  uint32_t max_result_len;
  uint32_t slot;               /* CUDAQ_GRAPH_IO_CANCELLED: a cancelled pre-launch (cudaq_graph_io_wait) */
  uint32_t busy; /* 1 from launch until cudaq_graph_io_complete (one request at a time) */
  /* Pre-launch gate (cudaq_dispatch_graph_set_prelaunch, cudaq_graph_io_wait):
   * the launch waits until gate == gate_ticket. Written by the dispatcher. */
  uint32_t gate_ticket;
  uint32_t gate;
} cudaq_graph_io_context;

#define CUDAQ_GRAPH_IO_CANCELLED 0xFFFFFFFFu

typedef struct cudaq_dispatch_graph_context cudaq_dispatch_graph_context;

/* Builds a graph holding the graph-launch dispatch kernel, instantiates it
 * for device launch and uploads it. function_table entries must be
 * CUDAQ_DISPATCH_GRAPH_LAUNCH with graph_exec instantiated with
 * cudaGraphInstantiateFlagDeviceLaunch and uploaded. The kernel relaunches
 * itself (tail launch) every CUDAQ_GRAPH_DISPATCH_RELAUNCH_EVERY child
 * launches, so it runs for as long as requests come. */
cudaError_t cudaq_create_dispatch_graph_regular(
    volatile uint64_t *rx_flags, volatile uint64_t *tx_flags, uint8_t *rx_data, uint8_t *tx_data,
    size_t rx_stride_sz, size_t tx_stride_sz, cudaq_function_entry_t *function_table,
    size_t func_count, void *graph_io_ctx, volatile int *shutdown_flag, uint64_t *stats,
    size_t num_slots, uint32_t num_blocks, uint32_t threads_per_block, cudaStream_t stream,
    cudaq_dispatch_graph_context **out_context);

/* Launches the dispatch graph (from the host) into `stream`. It runs until
 * its shutdown flag is raised: raise it with
 * cudaq_dispatch_set_shutdown_flag(shutdown_flag, 1), then synchronise
 * `stream`. Never queue the flag's write on `stream` itself: it would wait
 * for the graph, which waits for the flag. */
cudaError_t cudaq_launch_dispatch_graph(cudaq_dispatch_graph_context *context, cudaStream_t stream);

/* Destroys the context; call after the dispatch graph has exited. */
cudaError_t cudaq_destroy_dispatch_graph(cudaq_dispatch_graph_context *context);

/* Number of device-side launch failures the graph dispatcher saw (each was
 * answered with CUDAQ_RPC_ERR_LAUNCH_FAILED) and relaunches it made
 * (extension, for tests and benchmarks). */
cudaError_t cudaq_dispatch_graph_get_info(cudaq_dispatch_graph_context *context,
                                          uint64_t *out_launch_failures, uint64_t *out_relaunches);

/* Pre-launch (extension): the dispatcher launches the handler graph of
 * `function_id` before its request arrives, while it waits for requests;
 * when the request comes it fills the I/O context and opens a gate in device
 * memory instead of launching, so the device-side launch latency (~5-6 us)
 * is off the request's path whenever requests are more than a launch apart.
 * Requests that find no pre-launched graph (back to back) are launched on
 * arrival as before. The entry must be CUDAQ_DISPATCH_GRAPH_LAUNCH, and its
 * graph's first kernel must call cudaq_graph_io_wait() before it reads the
 * context. At shutdown a waiting launch is cancelled: it runs once on an
 * empty request whose response goes to scratch memory (so is one waiting
 * when the dispatcher relaunches itself, every
 * CUDAQ_GRAPH_DISPATCH_RELAUNCH_EVERY launches). Call before the
 * dispatch graph is launched; function_id 0 turns pre-launch off. Returns
 * cudaErrorInvalidValue when no GRAPH_LAUNCH entry has the id. */
cudaError_t cudaq_dispatch_graph_set_prelaunch(cudaq_dispatch_graph_context *context, uint32_t function_id);

/* Requests served by a pre-launched graph, pre-launches cancelled (at
 * shutdown or at the dispatcher's own relaunch), and how many pre-launched
 * graphs wait at their gates now (0 or 1; up to the number of instances
 * with cudaq_dispatch_graph_add_prelaunch_instance; out_waiting may be NULL). Extension, for
 * tests and benchmarks; a snapshot read while the dispatcher runs. */
cudaError_t cudaq_dispatch_graph_get_prelaunch_info(cudaq_dispatch_graph_context *context,
                                                    uint64_t *out_gate_hits, uint64_t *out_cancelled,
                                                    int *out_waiting);

/* More instances of the pre-launch entry's handler graph (extension): the
 * same graph instantiated again (cudaGraphInstantiateFlagDeviceLaunch,
 * uploaded) with its kernels reading `io`, an I/O context of its own in
 * device memory (zeroed here). One executable runs one launch at a time, so
 * with the entry's graph alone a request that comes right after the
 * previous answer (back to back) finds no graph waiting, or one launched
 * too recently to be running yet: the next launch can start only once the
 * previous execution has ended. With instances, the dispatcher launches
 * every idle one to wait (each ~5 us before it runs) and serves requests
 * by the instances in turn, the longest waiting first, so back to back a
 * request finds a graph that has long been waiting. The instance's graph,
 * like the entry's, calls cudaq_graph_io_wait() first and ends with
 * cudaq_graph_io_complete(), on its own `io`; instances run at the same
 * time, so each needs its own working buffers too. A waiting instance
 * shares the GPU with the one computing: keep its gated first kernel to one
 * small block (a 9-block one waiting beside a d = 13 predecoder slowed the
 * inference by ~18 us on an H200). Instances pay off when the handler is
 * short beside the ~5 us launch; beside a 50 us inference they gain nothing
 * back to back. At most CUDAQ_GRAPH_PRELAUNCH_MAX_INSTANCES - 1 instances
 * besides the entry's graph. Call before the dispatch graph is launched;
 * the instances serve only while pre-launch is on
 * (cudaq_dispatch_graph_set_prelaunch). Returns cudaErrorInvalidValue for a
 * NULL argument, the dispatcher's own I/O context, an executable or context
 * already added, an executable that is a table entry's, or one instance
 * too many. */
#define CUDAQ_GRAPH_PRELAUNCH_MAX_INSTANCES 4u
cudaError_t cudaq_dispatch_graph_add_prelaunch_instance(cudaq_dispatch_graph_context *context,
                                                        cudaGraphExec_t graph_exec, cudaq_graph_io_context *io);

#define CUDAQ_GRAPH_DISPATCH_RELAUNCH_EVERY 100u

#ifdef __cplusplus
} /* extern "C" */
#endif

/* ---- device-side helpers ------------------------------------------------- */
#if defined(__CUDACC__)
#include <cuda/atomic>

/* The gate of a pre-launched handler graph (cudaq_dispatch_graph_set_prelaunch):
 * every root kernel of that function's graph calls it, from every thread of
 * every block (it contains __syncthreads), before it reads the context; it
 * waits until the dispatcher opens the gate for this launch. Returns 1 for
 * a request, 0 for a launch cancelled at shutdown or at the dispatcher's
 * relaunch (arg_len 0, slot CUDAQ_GRAPH_IO_CANCELLED, rx/tx pointing at
 * scratch): skip the work, and still end with cudaq_graph_io_complete() as
 * for any request. A launch on arrival passes at once (its gate is opened
 * before its launch). Only the pre-launched function's graph may call it:
 * another graph, launched while a pre-launched one waits, would wait too. */
static __device__ inline int cudaq_graph_io_wait(cudaq_graph_io_context *ctx) {
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
    /* gate_ticket was written before this launch (a launch sees what its
     * launching thread wrote) and changes only at the next launch. G4 pairs
     * with G5 in the graph dispatch kernel: the gate's value makes the
     * context's fields for this request visible. One thread per block
     * polls. */
    const uint32_t ticket = *(volatile uint32_t *)&ctx->gate_ticket;
    cuda::atomic_ref<uint32_t, cuda::thread_scope_device> gate(ctx->gate);
    while (gate.load(cuda::memory_order_acquire) != ticket) {
    }
  }
  __syncthreads(); /* the polling thread's G4 happens before every thread's reads of the context */
  return *(volatile uint32_t *)&ctx->slot != CUDAQ_GRAPH_IO_CANCELLED;
}

/* Ends a graph-launched request: writes the response header (magic,
 * status, result_len clamped to max_result_len, request_id and
 * ptp_timestamp echoed) into the TX slot, publishes the TX flag with
 * system-scope release, and frees the I/O context for the next request.
 * Call from exactly one thread, after every result byte is written (e.g.
 * the last kernel of the graph, thread 0, after __syncthreads()). */
static __device__ inline void cudaq_graph_io_complete(cudaq_graph_io_context *ctx, int32_t status,
                                                      uint32_t result_len) {
  cudaq_rpc_response_t r;
  r.magic = CUDAQ_RPC_MAGIC_RESPONSE;
  r.status = result_len > ctx->max_result_len ? (int32_t)CUDAQ_RPC_ERR_RESULT_TOO_LARGE : status;
  r.result_len = result_len > ctx->max_result_len ? 0u : result_len;
  r.request_id = ctx->request_id;
  r.ptp_timestamp = ctx->ptp_timestamp;
  uint32_t *dst = reinterpret_cast<uint32_t *>(ctx->tx_slot);
  const uint32_t *src = reinterpret_cast<const uint32_t *>(&r);
  for (int i = 0; i < 6; ++i) dst[i] = src[i];
  /* G1 publishes the result and the header; pairs with A2 in the consumer
   * (cudaq_host_ringbuffer_poll_tx_flag). */
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system> flag(
      *const_cast<uint64_t *>(ctx->tx_flag));
  flag.store(ctx->tx_flag_value, cuda::memory_order_release);
  /* G2 hands the context back; pairs with G3 in the graph dispatch kernel,
   * which waits for busy == 0 before filling the context again. */
  cuda::atomic_ref<uint32_t, cuda::thread_scope_device> busy(ctx->busy);
  busy.store(0u, cuda::memory_order_release);
}
#endif

#endif /* CUDAQ_REALTIME_DISPATCH_KERNEL_H */
