/*
 * graph_dispatch.cu - graph-launch dispatch (CUDAQ_DISPATCH_GRAPH_LAUNCH)
 * from a persistent kernel that runs inside a device-launchable graph.
 *
 * For each request one warp reads the header and up to 2 KiB of the
 * request in one step; lane 0 validates the header, marks the slot in flight,
 * waits until the graph I/O context is free (a graph executable runs one
 * launch at a time), has the warp copy a request that fits into device
 * memory (the handler graph then reads it there, not across PCIe), fills the
 * context, launches the handler graph fire-and-forget and checks the launch
 * result: a failure is answered with CUDAQ_RPC_ERR_LAUNCH_FAILED and
 * counted, never ignored.
 *
 * Running indefinitely: the device runtime allows a parent graph a bounded
 * number of fire-and-forget launches per execution (about 120; the count
 * resets when the parent graph is launched again). The dispatcher therefore
 * relaunches its own graph with a tail launch every
 * CUDAQ_GRAPH_DISPATCH_RELAUNCH_EVERY child launches and exits; the tail
 * launch starts once this execution and its children have finished, and the
 * new kernel resumes from the state kept in device memory.
 */
#include <cuda/atomic>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudaq/realtime/dispatch_kernel.h"
#include "dispatch_internal.cuh"

namespace {

struct graph_params {
  uint64_t *rx_flags;
  uint64_t *tx_flags;
  uint8_t *rx_data;
  uint8_t *tx_data;
  uint32_t rx_stride;
  uint32_t tx_stride;
  const cudaq_function_entry_t *table;
  uint32_t table_count;
  cudaq_graph_io_context *io;
  int *shutdown;
  uint64_t *stats;
  uint32_t num_slots;
  struct graph_state *state;
  uint8_t *stage; /* device memory, STAGE_BYTES: the staged request the graph reads (NULL: A/B, never stage) */
  uint8_t *scratch; /* device memory, zeroed: a cancelled pre-launch's TX flag (offset 0), RX slot (64) and TX slot */
};

/* Survives relaunches (device memory). */
struct graph_state {
  cudaq__device_state *c; /* counters (the registry's, keyed by stats) */
  uint32_t next_slot;
  uint32_t exited;       /* 1 once the kernel left without relaunching */
  uint64_t launch_failures;
  uint64_t relaunches;
  uint64_t relaunch_error;
  uint32_t prelaunch_fid; /* 0: off (cudaq_dispatch_graph_set_prelaunch) */
  uint32_t ticket;        /* the last gate ticket handed out (never 0) */
  uint64_t gate_hits;     /* requests served by a pre-launched graph */
  uint64_t cancelled;     /* pre-launches cancelled (at shutdown, or before the dispatcher's relaunch) */
  uint32_t waiting;       /* 1 while a pre-launched graph waits at its gate (mirror of `armed`) */
};

/* Lane 0, before a launch of the pre-launch entry's graph: the next gate
 * ticket (never 0, the gate's initial value), stored as the one this launch
 * waits for (cudaq_graph_io_wait reads it; a launch sees what its launching
 * thread wrote). */
__device__ uint32_t issue_ticket(cudaq_graph_io_context *io, graph_state *gs) {
  uint32_t t = gs->ticket + 1u;
  if (t == 0u) t = 1u;
  gs->ticket = t;
  io->gate_ticket = t;
  return t;
}

/* The rule for the entry cudaq_dispatch_graph_set_prelaunch names (checked
 * there on the host and again by the kernel): a graph launch with a graph. */
__host__ __device__ inline bool prelaunchable(const cudaq_function_entry_t *e) {
  return e && e->dispatch_mode == CUDAQ_DISPATCH_GRAPH_LAUNCH && e->handler.graph_exec;
}


/* Answers a request the dispatcher itself rejects. Flag order as in
 * dispatch_kernels.cu: RX cleared first, the response published last. */
__device__ void answer(const graph_params &p, uint32_t slot, int32_t status, uint32_t rid, uint64_t ptp) {
  uint8_t *tx = p.tx_data + (size_t)slot * p.tx_stride;
  uint32_t *h = reinterpret_cast<uint32_t *>(tx);
  h[0] = CUDAQ_RPC_MAGIC_RESPONSE;
  h[1] = (uint32_t)status;
  h[2] = 0;
  h[3] = rid;
  h[4] = (uint32_t)ptp;
  h[5] = (uint32_t)(ptp >> 32);
  cudaq__store_release_sys(&p.rx_flags[slot], 0);                         /* R3, pairs with A3 */
  cudaq__store_release_sys(&p.tx_flags[slot], (uint64_t)(uintptr_t)tx); /* R2, pairs with A2 */
}


/* Words of a request each lane reads in the one step that follows the
 * flag: the warp reads the first STAGE_BYTES of the slot (header and
 * payload) with every load issued at once. */
constexpr uint32_t STAGE_WORDS_PER_LANE = 16;
constexpr uint32_t STAGE_BYTES = 32u * STAGE_WORDS_PER_LANE * 4u; /* 2 KiB */

/* Lane 0: a pre-launched graph still waits at its gate (shutdown, or the
 * dispatcher's own relaunch, which cannot start while a child runs): it
 * runs once on an empty request whose slots and TX flag are scratch
 * memory, and is counted. */
__device__ void cancel_prelaunch(const graph_params &p, graph_state *gs, uint32_t ticket) {
  cudaq_graph_io_context *io = p.io;
  cuda::atomic_ref<uint32_t, cuda::thread_scope_device> busy(io->busy);
  /* G3: the context is free (another function's graph may hold it). Not
   * bounded: overwriting the context under a running graph would lose its
   * answer, and neither the shutdown nor the tail launch can complete before
   * that graph has ended anyway. */
  while (busy.load(cuda::memory_order_acquire) != 0) __nanosleep(100);
  uint8_t *rx = p.scratch + 64, *tx = rx + ((p.rx_stride + 63u) & ~63u);
  io->rx_slot = rx;
  io->tx_slot = tx;
  io->tx_flag = reinterpret_cast<uint64_t *>(p.scratch);
  io->tx_flag_value = 0;
  io->ptp_timestamp = 0;
  io->request_id = 0;
  io->function_id = gs->prelaunch_fid;
  io->arg_len = 0;
  io->max_result_len = p.tx_stride - CUDAQ_RPC_HEADER_SIZE;
  io->slot = CUDAQ_GRAPH_IO_CANCELLED;
  busy.store(1u, cuda::memory_order_relaxed);
  gs->cancelled++;
  gs->waiting = 0;
  /* G5 (see the request path): the context above before the gate. */
  cuda::atomic_ref<uint32_t, cuda::thread_scope_device>(io->gate).store(ticket, cuda::memory_order_release);
}

/* One warp. Lane 0 polls and decides; every lane takes part in reading the
 * request, so the header and up to STAGE_BYTES of the request arrive in one
 * PCIe round trip, and a request that fits is copied to device memory
 * (p.stage) for the handler graph to read from there instead of across
 * PCIe after its launch. Decisions reach the other lanes by __shfl_sync. */
__global__ void graph_dispatch_kernel(graph_params p) {
  if (blockIdx.x != 0 || threadIdx.x >= 32) return; /* one warp does it all */
  const uint32_t lane = threadIdx.x;
  const bool l0 = lane == 0;
  graph_state *gs = p.state;
  cudaq__device_state *c = gs->c;
  cuda::atomic_ref<uint32_t, cuda::thread_scope_device> busy(p.io->busy);
  uint32_t slot = gs->next_slot, launched = 0, iter = 0;
  bool draining = false;
  /* Pre-launch (cudaq_dispatch_graph_set_prelaunch), lane 0's state: the
   * entry whose graph is launched ahead of its request, and whether a launch
   * of it waits at the gate now (armed) with which ticket. */
  const cudaq_function_entry_t *pre =
      gs->prelaunch_fid ? cudaq__find_entry(p.table, p.table_count, gs->prelaunch_fid) : nullptr;
  if (!prelaunchable(pre)) pre = nullptr;
  bool armed = false;
  uint32_t armed_ticket = 0;
  cuda::atomic_ref<uint32_t, cuda::thread_scope_device> gate(p.io->gate);
  uint32_t drain_left = 0;
  /* Where a later run resumes after a shutdown: the drain looks at every
   * slot once, but the producer's next slot is the one after the last
   * request served (requests come in ring order). */
  uint32_t resume = slot;
  const uint32_t read_words = (p.rx_stride < STAGE_BYTES ? p.rx_stride : STAGE_BYTES) / 4u;

  for (;;) {
    if (!draining && ++iter % 64 == 0) {
      int stop = l0 ? cuda::atomic_ref<int, cuda::thread_scope_system>(*p.shutdown).load(cuda::memory_order_relaxed) : 0;
      if (__shfl_sync(0xFFFFFFFFu, stop, 0)) {
        draining = true;
        drain_left = p.num_slots;
        resume = slot;
      }
    }
    /* A1 pairs with R1 (producer): the request bytes are visible. */
    int ready = l0 ? cudaq__load_acquire_sys(&p.rx_flags[slot]) != 0 : 0;
    if (!__shfl_sync(0xFFFFFFFFu, ready, 0)) {
      if (draining) {
        if (--drain_left == 0) break;
        slot = slot + 1 == p.num_slots ? 0 : slot + 1;
      } else if (l0 && pre && !armed && launched + 1u < CUDAQ_GRAPH_DISPATCH_RELAUNCH_EVERY &&
                 busy.load(cuda::memory_order_acquire) == 0) { /* G3: the previous request's graph is done */
        /* Nothing to serve: launch the pre-launch entry's graph now, to wait
         * at its gate. One try per idle poll: a launch refused because the
         * previous execution is still finishing is tried again at the next
         * (no back-off: the retry that succeeds first is what lets a paced
         * request find its graph waiting, as measured). */
        const uint32_t t = issue_ticket(p.io, gs);
        __threadfence(); /* the ticket before the child starts */
        if (cudaGraphLaunch(pre->handler.graph_exec, cudaStreamGraphFireAndForget) == cudaSuccess) {
          armed = true;
          armed_ticket = t;
          ++launched;
          gs->waiting = 1;
        }
      }
      launched = __shfl_sync(0xFFFFFFFFu, launched, 0); /* every lane's copy, as after a request */
      continue;
    }
    __syncwarp(); /* lane 0's A1 happens before every lane's reads of the request */
    const uint32_t *src = reinterpret_cast<const uint32_t *>(p.rx_data + (size_t)slot * p.rx_stride);
    uint32_t v[STAGE_WORDS_PER_LANE];
#pragma unroll
    for (uint32_t k = 0; k < STAGE_WORDS_PER_LANE; ++k) {
      const uint32_t w = lane + 32u * k;
      v[k] = w < read_words ? src[w] : 0u;
    }
    /* The header is words 0..5: lanes 0..5's first word. */
    const uint32_t magic = __shfl_sync(0xFFFFFFFFu, v[0], 0), fid = __shfl_sync(0xFFFFFFFFu, v[0], 1);
    const uint32_t arg_len = __shfl_sync(0xFFFFFFFFu, v[0], 2), rid = __shfl_sync(0xFFFFFFFFu, v[0], 3);
    const uint64_t ptp = (uint64_t)__shfl_sync(0xFFFFFFFFu, v[0], 4) | ((uint64_t)__shfl_sync(0xFFFFFFFFu, v[0], 5) << 32);
    const cudaq_function_entry_t *e = cudaq__find_entry(p.table, p.table_count, fid);
    if (magic != CUDAQ_RPC_MAGIC_REQUEST || !e) {
      if (l0) {
        cudaq__store_release_sys(&p.rx_flags[slot], 0); /* R3: consumed without response */
        cudaq__bump(magic != CUDAQ_RPC_MAGIC_REQUEST ? &c->dropped_bad_magic : &c->dropped_unknown_function);
      }
    } else {
      /* In flight from here: the producer leaves the slot alone until the
       * response is published (by us or by the graph). The marker itself
       * publishes nothing: a relaxed store, ordered before the RX clear by
       * R3's release on every path below (here, or in answer()), as in
       * dispatch_kernels.cu's parse_request. (Measured on an H100: storing
       * it before the request's read, to overlap the two, was no faster
       * here and 0.15-0.35 us slower in the device-call kernel.) */
      if (l0)
        cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(p.tx_flags[slot])
            .store(CUDAQ_TX_FLAG_IN_FLIGHT, cuda::memory_order_relaxed);
      int32_t status = cudaq__entry_status(cudaq__arg_rule_of(e), e->dispatch_mode, e->handler.graph_exec != nullptr,
                                           CUDAQ_DISPATCH_GRAPH_LAUNCH, arg_len,
                                           p.rx_stride - CUDAQ_RPC_HEADER_SIZE);
      if (status == 0 && l0) {
        /* G3 waits until the previous request's graph called
         * cudaq_graph_io_complete (G2); acquire makes its context and
         * staging reads done. Bounded (about 1 s): a graph that never
         * completes costs its later requests a LAUNCH_FAILED answer, not a
         * hung dispatcher. */
        uint32_t spins = 0;
        while (busy.load(cuda::memory_order_acquire) != 0 && spins < 10000000u) {
          __nanosleep(100);
          ++spins;
        }
        if (spins == 10000000u) status = CUDAQ_RPC_ERR_LAUNCH_FAILED;
      }
      status = __shfl_sync(0xFFFFFFFFu, status, 0);
      __syncwarp(); /* lane 0's G3 acquire happens before every lane's staging stores below */
      /* The request fits the staging copy: the graph reads it from device
       * memory. Every lane stores its words; the fences and the warp
       * barrier make them visible to lane 0 before it launches the graph
       * (which sees what its launching thread saw). */
      const uint32_t req_words = (CUDAQ_RPC_HEADER_SIZE + arg_len + 3u) / 4u;
      const bool staged = status == 0 && p.stage && req_words <= read_words;
      if (staged) {
        uint32_t *dst = reinterpret_cast<uint32_t *>(p.stage);
#pragma unroll
        for (uint32_t k = 0; k < STAGE_WORDS_PER_LANE; ++k) {
          const uint32_t w = lane + 32u * k;
          if (w < req_words) dst[w] = v[k];
        }
        __threadfence();
      }
      __syncwarp();
      if (l0) {
        if (status == 0) {
          cudaq_graph_io_context *io = p.io;
          io->rx_slot = staged ? p.stage : p.rx_data + (size_t)slot * p.rx_stride;
          io->tx_slot = p.tx_data + (size_t)slot * p.tx_stride;
          io->tx_flag = &p.tx_flags[slot];
          io->tx_flag_value = (uint64_t)(uintptr_t)io->tx_slot;
          io->ptp_timestamp = ptp;
          io->request_id = rid;
          io->function_id = fid;
          io->arg_len = arg_len;
          io->max_result_len = p.tx_stride - CUDAQ_RPC_HEADER_SIZE;
          io->slot = slot;
          busy.store(1u, cuda::memory_order_relaxed);
          /* RX is cleared before the launch so that the graph's TX store (G1)
           * is the last flag store of the request (see the flag-order note in
           * dispatch_kernels.cu); the in-flight marker keeps the producer off
           * the slot meanwhile (the graph may read the slot itself when the
           * request was too large to stage). R3, pairs with A3. */
          cudaq__store_release_sys(&p.rx_flags[slot], 0);
          __threadfence(); /* the context is complete before the child starts */
          /* The graph of the pre-launch entry (another id may share it). */
          const bool pre_graph = pre && e->handler.graph_exec == pre->handler.graph_exec;
          if (pre_graph && armed) {
            /* G5 opens the gate of the graph launched ahead: the context
             * (and the staged request) before it. Pairs with G4 in
             * cudaq_graph_io_wait. No launch on this request's path. */
            gate.store(armed_ticket, cuda::memory_order_release);
            armed = false;
            gs->gate_hits++;
            gs->waiting = 0;
          } else {
            if (pre_graph) { /* launched on arrival: its gate opens before its launch (G5 as above) */
              gate.store(issue_ticket(io, gs), cuda::memory_order_release);
            }
            /* The previous launch of this graph may still be finishing after
             * it freed the context (a graph runs one launch at a time): retry
             * for a bounded time, then report the failure. */
            cudaError_t err = cudaErrorUnknown;
            for (uint32_t tries = 0; tries < 100000; ++tries) {
              err = cudaGraphLaunch(e->handler.graph_exec, cudaStreamGraphFireAndForget);
              if (err == cudaSuccess) break;
              __nanosleep(100);
            }
            if (err != cudaSuccess) {
              busy.store(0u, cuda::memory_order_relaxed);
              gs->launch_failures++;
              status = CUDAQ_RPC_ERR_LAUNCH_FAILED;
            } else {
              ++launched;
            }
          }
        }
        if (status != 0) {
          answer(p, slot, status, rid, ptp); /* clears RX (again, harmless) then publishes TX */
          cudaq__count_status(c, status);
        }
        cudaq__count_processed(c, p.stats, 1);
      }
      launched = __shfl_sync(0xFFFFFFFFu, launched, 0);
    }
    slot = slot + 1 == p.num_slots ? 0 : slot + 1;
    if (draining) resume = slot;
    if (draining && --drain_left == 0) break;
    if (!draining && launched >= CUDAQ_GRAPH_DISPATCH_RELAUNCH_EVERY) {
      int relaunched = 0;
      if (l0) {
        /* The tail launch starts only once every child has finished. */
        if (armed) cancel_prelaunch(p, gs, armed_ticket);
        armed = false;
        gs->next_slot = slot; /* the tail launch resumes here */
        cudaError_t err = cudaGraphLaunch(cudaGetCurrentGraphExec(), cudaStreamGraphTailLaunch);
        if (err == cudaSuccess) {
          gs->relaunches++;
          relaunched = 1;
        } else {
          gs->relaunch_error = (uint64_t)err; /* cannot continue past the limit: stop and say so */
        }
      }
      if (__shfl_sync(0xFFFFFFFFu, relaunched, 0)) return; /* the tail launch continues after this execution */
      break;
    }
  }
  if (l0) {
    if (armed) cancel_prelaunch(p, gs, armed_ticket);
    gs->next_slot = draining ? resume : slot;
    gs->exited = 1;
  }
}

} // namespace

struct cudaq_dispatch_graph_context {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  graph_state *state;
  uint8_t *stage;
  uint8_t *scratch; /* a cancelled pre-launch's TX flag (offset 0), RX and TX slots */
  const cudaq_function_entry_t *table; /* device memory, the caller's */
  uint32_t table_count;
};

extern "C" cudaError_t cudaq_create_dispatch_graph_regular(
    volatile uint64_t *rx_flags, volatile uint64_t *tx_flags, uint8_t *rx_data, uint8_t *tx_data,
    size_t rx_stride_sz, size_t tx_stride_sz, cudaq_function_entry_t *function_table,
    size_t func_count, void *graph_io_ctx, volatile int *shutdown_flag, uint64_t *stats,
    size_t num_slots, uint32_t num_blocks, uint32_t threads_per_block, cudaStream_t stream,
    cudaq_dispatch_graph_context **out_context) {
  if (!rx_flags || !tx_flags || !rx_data || !tx_data || !function_table || !func_count || !graph_io_ctx ||
      !shutdown_flag || !stats || !num_slots || !out_context || rx_stride_sz < CUDAQ_RPC_HEADER_SIZE ||
      tx_stride_sz < CUDAQ_RPC_HEADER_SIZE || rx_stride_sz % 4 || tx_stride_sz % 4 || num_blocks == 0 ||
      threads_per_block == 0 || rx_stride_sz > UINT32_MAX || tx_stride_sz > UINT32_MAX ||
      func_count > UINT32_MAX || num_slots > UINT32_MAX)
    return cudaErrorInvalidValue;
  *out_context = nullptr;
  cudaq_dispatch_graph_context *ctx =
      static_cast<cudaq_dispatch_graph_context *>(calloc(1, sizeof *ctx));
  if (!ctx) return cudaErrorMemoryAllocation;
  cudaError_t e = cudaMalloc(&ctx->state, sizeof(graph_state));
  if (e == cudaSuccess) e = cudaMalloc(&ctx->stage, STAGE_BYTES);
  const size_t scratch_bytes = 64 + ((rx_stride_sz + 63) & ~size_t(63)) + tx_stride_sz;
  if (e == cudaSuccess) e = cudaMalloc(&ctx->scratch, scratch_bytes);
  if (e == cudaSuccess) e = cudaMemsetAsync(ctx->scratch, 0, scratch_bytes, stream);
  ctx->table = function_table;
  ctx->table_count = (uint32_t)func_count;
  if (e == cudaSuccess) e = cudaMemsetAsync(ctx->state, 0, sizeof(graph_state), stream);
  if (e == cudaSuccess) e = cudaMemsetAsync(graph_io_ctx, 0, sizeof(cudaq_graph_io_context), stream);
  graph_params p;
  p.rx_flags = const_cast<uint64_t *>(rx_flags);
  p.tx_flags = const_cast<uint64_t *>(tx_flags);
  p.rx_data = rx_data;
  p.tx_data = tx_data;
  p.rx_stride = (uint32_t)rx_stride_sz;
  p.tx_stride = (uint32_t)tx_stride_sz;
  p.table = function_table;
  p.table_count = (uint32_t)func_count;
  p.io = static_cast<cudaq_graph_io_context *>(graph_io_ctx);
  p.shutdown = const_cast<int *>(shutdown_flag);
  p.stats = stats;
  p.num_slots = (uint32_t)num_slots;
  const char *nostage = getenv("CUDAQ_DISPATCH_NO_STAGE"); /* A/B of the staged copy (bench_gpu_dispatch) */
  p.stage = nostage && nostage[0] == '1' ? nullptr : ctx->stage;
  p.state = ctx->state;
  p.scratch = ctx->scratch;
  cudaq__device_state *counters = cudaq__state_for_launch(stats);
  if (e == cudaSuccess && !counters) e = cudaErrorMemoryAllocation;
  if (e == cudaSuccess)
    e = cudaMemcpyAsync(&ctx->state->c, &counters, sizeof counters, cudaMemcpyHostToDevice, stream);
  if (e == cudaSuccess) e = cudaGraphCreate(&ctx->graph, 0);
  if (e == cudaSuccess) {
    cudaKernelNodeParams kp = {};
    void *args[] = {&p};
    kp.func = (void *)graph_dispatch_kernel;
    kp.gridDim = dim3(1);
    kp.blockDim = dim3(32); /* one warp: lane 0 decides, every lane reads and stages the request */
    kp.kernelParams = args;
    cudaGraphNode_t node;
    e = cudaGraphAddKernelNode(&node, ctx->graph, nullptr, 0, &kp);
  }
  if (e == cudaSuccess)
    e = cudaGraphInstantiateWithFlags(&ctx->exec, ctx->graph, cudaGraphInstantiateFlagDeviceLaunch);
  if (e == cudaSuccess) e = cudaGraphUpload(ctx->exec, stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) {
    cudaq_destroy_dispatch_graph(ctx);
    return e;
  }
  *out_context = ctx;
  return cudaSuccess;
}

extern "C" cudaError_t cudaq_launch_dispatch_graph(cudaq_dispatch_graph_context *context,
                                                   cudaStream_t stream) {
  if (!context || !context->exec) return cudaErrorInvalidValue;
  return cudaGraphLaunch(context->exec, stream);
}

extern "C" cudaError_t cudaq_destroy_dispatch_graph(cudaq_dispatch_graph_context *context) {
  if (!context) return cudaErrorInvalidValue;
  cudaError_t first = cudaSuccess, e;
  if (context->exec && (e = cudaGraphExecDestroy(context->exec)) != cudaSuccess) first = e;
  if (context->graph && (e = cudaGraphDestroy(context->graph)) != cudaSuccess && first == cudaSuccess) first = e;
  if (context->state && (e = cudaFree(context->state)) != cudaSuccess && first == cudaSuccess) first = e;
  if (context->stage && (e = cudaFree(context->stage)) != cudaSuccess && first == cudaSuccess) first = e;
  if (context->scratch && (e = cudaFree(context->scratch)) != cudaSuccess && first == cudaSuccess) first = e;
  free(context);
  return first;
}

extern "C" cudaError_t cudaq_dispatch_graph_get_info(cudaq_dispatch_graph_context *context,
                                                     uint64_t *out_launch_failures,
                                                     uint64_t *out_relaunches) {
  if (!context || !out_launch_failures || !out_relaunches) return cudaErrorInvalidValue;
  graph_state h;
  cudaError_t e = cudaq__copy_private_stream(&h, context->state, sizeof h);
  if (e != cudaSuccess) return e;
  *out_launch_failures = h.launch_failures;
  *out_relaunches = h.relaunches;
  return h.relaunch_error ? (cudaError_t)h.relaunch_error : cudaSuccess;
}

extern "C" cudaError_t cudaq_dispatch_graph_set_prelaunch(cudaq_dispatch_graph_context *context,
                                                          uint32_t function_id) {
  if (!context) return cudaErrorInvalidValue;
  if (function_id != 0) {
    /* The entry the kernel will find (the first with the id) must be
     * prelaunchable. */
    cudaq_function_entry_t *h =
        static_cast<cudaq_function_entry_t *>(malloc(sizeof(cudaq_function_entry_t) * context->table_count));
    if (!h) return cudaErrorMemoryAllocation;
    cudaError_t e = cudaq__copy_private_stream(h, context->table, sizeof(cudaq_function_entry_t) * context->table_count);
    const bool ok = e == cudaSuccess && prelaunchable(cudaq__find_entry(h, context->table_count, function_id));
    free(h);
    if (e != cudaSuccess) return e;
    if (!ok) return cudaErrorInvalidValue;
  }
  return cudaq__copy_private_stream(&context->state->prelaunch_fid, &function_id, sizeof function_id);
}

extern "C" cudaError_t cudaq_dispatch_graph_get_prelaunch_info(cudaq_dispatch_graph_context *context,
                                                               uint64_t *out_gate_hits, uint64_t *out_cancelled,
                                                               int *out_waiting) {
  if (!context || !out_gate_hits || !out_cancelled) return cudaErrorInvalidValue;
  graph_state h;
  cudaError_t e = cudaq__copy_private_stream(&h, context->state, sizeof h);
  if (e != cudaSuccess) return e;
  *out_gate_hits = h.gate_hits;
  *out_cancelled = h.cancelled;
  if (out_waiting) *out_waiting = (int)h.waiting;
  return cudaSuccess;
}

extern "C" void cudaq__graph_debug_dump(cudaq_dispatch_graph_context *context) {
  graph_state h;
  if (!context) return;
  cudaError_t e = cudaq__copy_private_stream(&h, context->state, sizeof h);
  if (e != cudaSuccess) {
    fprintf(stderr, "graph debug: read failed: %s\n", cudaGetErrorString(e));
    return;
  }
  fprintf(stderr,
          "graph debug: next_slot %u exited %u launch_failures %llu relaunches %llu relaunch_error %llu\n",
          h.next_slot, h.exited, (unsigned long long)h.launch_failures, (unsigned long long)h.relaunches,
          (unsigned long long)h.relaunch_error);
}
