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
 * Pre-launch (cudaq_dispatch_graph_set_prelaunch): while no request waits,
 * the dispatcher launches the pre-launch entry's handler graph ahead, to
 * wait at a gate in device memory; its request then only opens the gate.
 * One graph executable runs one launch at a time, so back to back (the next
 * request comes as soon as the previous answer is seen) one executable
 * cannot be ready again in time: its next launch can start only once the
 * previous execution has ended. Instances added with
 * cudaq_dispatch_graph_add_prelaunch_instance (the same graph instantiated
 * again over its own I/O context) take turns: while one serves a request
 * the next is launched to wait, so back to back a request still finds a
 * graph waiting. Each instance has its own staging copy and I/O context.
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
  uint8_t *stage; /* device memory, STAGE_BYTES per pre-launch instance: the staged request the graph
                   * reads (instance k at k * STAGE_BYTES; other functions use instance 0's; NULL: A/B,
                   * never stage) */
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
  uint32_t waiting;       /* pre-launched graphs waiting at their gates now (mirror of `n_armed`) */
  /* Pre-launch instances beyond the table entry's own (instance 0: its
   * graph_exec over the dispatcher's I/O context), from
   * cudaq_dispatch_graph_add_prelaunch_instance. */
  uint32_t n_extra;
  cudaGraphExec_t extra_exec[CUDAQ_GRAPH_PRELAUNCH_MAX_INSTANCES - 1];
  cudaq_graph_io_context *extra_io[CUDAQ_GRAPH_PRELAUNCH_MAX_INSTANCES - 1];
};

/* One pre-launch instance: a graph executable, the I/O context its kernels
 * read, and its staging copy. */
struct prelaunch_instance {
  cudaGraphExec_t exec;
  cudaq_graph_io_context *io;
  uint8_t *stage;
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
 * dispatch_loop.cuh (parse_request): RX cleared first, the response published last. */
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

/* An idle dispatcher arms a pre-launch instance while another one waits
 * only after this long without a request (see the idle path). */
constexpr uint64_t PRELAUNCH_IDLE_ARM_NS = 10000;

/* How long a request waits for its I/O context to be freed (G3) and for its
 * graph's previous execution to end before it is answered with
 * CUDAQ_RPC_ERR_LAUNCH_FAILED: a clock, not a count of tries, so that a
 * slowed device (compute-sanitizer) does not shorten it. */
constexpr uint64_t GRAPH_WAIT_NS = 1000000000ull;

/* Lane 0: a pre-launched graph (over `io`) still waits at its gate
 * (shutdown, or the dispatcher's own relaunch, which cannot start while a
 * child runs): it runs once on an empty request whose slots and TX flag are
 * scratch memory, and is counted. */
__device__ void cancel_prelaunch(const graph_params &p, graph_state *gs, cudaq_graph_io_context *io, uint32_t ticket) {
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
  uint32_t slot = gs->next_slot, launched = 0, iter = 0;
  bool draining = false;
  /* Pre-launch (cudaq_dispatch_graph_set_prelaunch): the entry whose graph
   * is launched ahead of its request and its instances (every lane builds
   * the same list). Lane 0's state: instances are launched (armed) and
   * serve in turn, so the ones waiting at their gates now are the n_armed
   * from serve_inst on (cyclically), each with its ticket; a request goes
   * to serve_inst (the longest waiting: its launch has long completed). */
  const cudaq_function_entry_t *pre =
      gs->prelaunch_fid ? cudaq__find_entry(p.table, p.table_count, gs->prelaunch_fid) : nullptr;
  if (!prelaunchable(pre)) pre = nullptr;
  prelaunch_instance pool[CUDAQ_GRAPH_PRELAUNCH_MAX_INSTANCES];
  uint32_t npool = 0;
  if (pre) {
    pool[0] = {pre->handler.graph_exec, p.io, p.stage};
    npool = 1;
    for (uint32_t k = 0; k < gs->n_extra && k + 1 < CUDAQ_GRAPH_PRELAUNCH_MAX_INSTANCES; ++k, ++npool)
      pool[npool] = {gs->extra_exec[k], gs->extra_io[k], p.stage ? p.stage + (size_t)npool * STAGE_BYTES : nullptr};
  }
  uint32_t serve_inst = 0, n_armed = 0;
  uint32_t armed_ticket[CUDAQ_GRAPH_PRELAUNCH_MAX_INSTANCES] = {};
  uint64_t last_request_ns = 0; /* lane 0: when the last request was served (globaltimer) */
  auto inst_after = [&](uint32_t k, uint32_t n) { return (k + n) % (npool ? npool : 1u); };
  /* Lane 0: launches the next instance in turn to wait at its gate, if it
   * is free (G3: its last request is done) and the launch budget allows.
   * One try: a launch refused because that executable's previous execution
   * is still finishing is tried again later (no back-off: the retry that
   * succeeds first is what lets a paced request find its graph waiting, as
   * measured). A device-side launch call takes the dispatcher ~2 us (H200),
   * and its graph runs ~4 us later. */
  auto try_arm = [&]() {
    if (n_armed >= npool || launched + 1u >= CUDAQ_GRAPH_DISPATCH_RELAUNCH_EVERY) return;
    const uint32_t k = inst_after(serve_inst, n_armed);
    if (cuda::atomic_ref<uint32_t, cuda::thread_scope_device>(pool[k].io->busy).load(cuda::memory_order_acquire) != 0)
      return; /* G3 */
    const uint32_t t = issue_ticket(pool[k].io, gs);
    __threadfence(); /* the ticket before the child starts */
    if (cudaGraphLaunch(pool[k].exec, cudaStreamGraphFireAndForget) == cudaSuccess) {
      armed_ticket[k] = t;
      ++n_armed;
      ++launched;
      gs->waiting = n_armed;
    }
  };
  /* Lane 0, before a relaunch or exit: every waiting instance cancelled. */
  auto cancel_armed = [&]() {
    for (; n_armed; --n_armed, serve_inst = inst_after(serve_inst, 1))
      cancel_prelaunch(p, gs, pool[serve_inst].io, armed_ticket[serve_inst]);
    gs->waiting = 0;
  };
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
      } else if (l0 && npool && (n_armed == 0 || cudaq__globaltimer_ns() - last_request_ns >= PRELAUNCH_IDLE_ARM_NS)) {
        /* Nothing to serve: arm the next instance when none waits, or after
         * a quiet spell. Not sooner while one waits: the instance that has
         * just answered becomes free as its answer goes out, which is when a
         * producer sending back to back sends the next request, and a launch
         * call then would hold that request up; the request path arms the
         * next instance instead, right after it has served one. */
        try_arm();
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
       * dispatch_loop.cuh's hand_back. (Measured on an H100: storing it
       * before the request's read was issued was no faster here and
       * 0.15-0.35 us slower in the device-call kernel; the device-call
       * kernels now store the marker and R3 after issuing the read, while
       * it is in flight: gpu-dispatch-h200-2026-11-29.md.) */
      if (l0)
        cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(p.tx_flags[slot])
            .store(CUDAQ_TX_FLAG_IN_FLIGHT, cuda::memory_order_relaxed);
      int32_t status = cudaq__entry_status(cudaq__arg_rule_of(e), e->dispatch_mode, e->handler.graph_exec != nullptr,
                                           CUDAQ_DISPATCH_GRAPH_LAUNCH, arg_len,
                                           p.rx_stride - CUDAQ_RPC_HEADER_SIZE);
      /* The graph of the pre-launch entry (another id may share it) is
       * served by one of its instances: the one waiting at its gate, else
       * the next in turn, launched on arrival. Every other graph uses the
       * dispatcher's I/O context and staging copy (instance 0's). */
      const bool pre_graph = npool && e->handler.graph_exec == pool[0].exec;
      uint32_t use = l0 && pre_graph ? serve_inst : 0u;
      use = __shfl_sync(0xFFFFFFFFu, use, 0);
      cudaq_graph_io_context *io = pre_graph ? pool[use].io : p.io;
      uint8_t *stage = pre_graph ? pool[use].stage : p.stage;
      cuda::atomic_ref<uint32_t, cuda::thread_scope_device> busy(io->busy);
      if (status == 0 && l0) {
        /* G3 waits until the previous request on this context called
         * cudaq_graph_io_complete (G2); acquire makes its context and
         * staging reads done. Bounded (GRAPH_WAIT_NS): a graph that never
         * completes costs its later requests a LAUNCH_FAILED answer, not a
         * hung dispatcher. */
        const uint64_t t0 = cudaq__globaltimer_ns();
        while (busy.load(cuda::memory_order_acquire) != 0) {
          if (cudaq__globaltimer_ns() - t0 > GRAPH_WAIT_NS) {
            status = CUDAQ_RPC_ERR_LAUNCH_FAILED;
            break;
          }
          __nanosleep(100);
        }
      }
      status = __shfl_sync(0xFFFFFFFFu, status, 0);
      __syncwarp(); /* lane 0's G3 acquire happens before every lane's staging stores below */
      /* The request fits the staging copy: the graph reads it from device
       * memory. Every lane stores its words; the fences and the warp
       * barrier make them visible to lane 0 before it launches the graph
       * (which sees what its launching thread saw). */
      const uint32_t req_words = (CUDAQ_RPC_HEADER_SIZE + arg_len + 3u) / 4u;
      const bool staged = status == 0 && stage && req_words <= read_words;
      if (staged) {
        uint32_t *dst = reinterpret_cast<uint32_t *>(stage);
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
          io->rx_slot = staged ? stage : p.rx_data + (size_t)slot * p.rx_stride;
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
           * dispatch_loop.cuh, parse_request); the in-flight marker keeps the producer off
           * the slot meanwhile (the graph may read the slot itself when the
           * request was too large to stage). R3, pairs with A3. */
          cudaq__store_release_sys(&p.rx_flags[slot], 0);
          cuda::atomic_ref<uint32_t, cuda::thread_scope_device> gate(io->gate);
          if (pre_graph && n_armed) {
            /* G5 opens the gate of the graph launched ahead: the context
             * (and the staged request) before it. Pairs with G4 in
             * cudaq_graph_io_wait. No launch on this request's path. */
            gate.store(armed_ticket[use], cuda::memory_order_release);
            serve_inst = inst_after(use, 1);
            --n_armed;
            gs->gate_hits++;
            gs->waiting = n_armed;
          } else {
            if (pre_graph) { /* launched on arrival: its gate opens before its launch (G5 as above) */
              gate.store(issue_ticket(io, gs), cuda::memory_order_release);
              serve_inst = inst_after(use, 1);
            }
            const cudaGraphExec_t exec = pre_graph ? pool[use].exec : e->handler.graph_exec;
            __threadfence(); /* the context is complete before the child starts (a gate hit needs no
                              * fence here: G5's release orders the context before the gate) */
            /* The previous launch of this graph may still be finishing after
             * it freed the context (a graph runs one launch at a time): retry
             * for a bounded time (GRAPH_WAIT_NS), then report the failure. */
            cudaError_t err = cudaErrorUnknown;
            for (const uint64_t t0 = cudaq__globaltimer_ns(); cudaq__globaltimer_ns() - t0 <= GRAPH_WAIT_NS;) {
              err = cudaGraphLaunch(exec, cudaStreamGraphFireAndForget);
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
        last_request_ns = cudaq__globaltimer_ns();
        /* Served by an instance: arm the next one in turn now, while the
         * answer to this request is still being made. */
        if (pre_graph && status == 0) try_arm();
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
        cancel_armed();
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
    cancel_armed();
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
  cudaq_graph_io_context *io; /* the dispatcher's I/O context (the caller's) */
  /* host copies of the instances added (cudaq_dispatch_graph_add_prelaunch_instance) */
  uint32_t n_extra;
  cudaGraphExec_t extra_exec[CUDAQ_GRAPH_PRELAUNCH_MAX_INSTANCES - 1];
  cudaq_graph_io_context *extra_io[CUDAQ_GRAPH_PRELAUNCH_MAX_INSTANCES - 1];
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
  if (e == cudaSuccess) e = cudaMalloc(&ctx->stage, (size_t)STAGE_BYTES * CUDAQ_GRAPH_PRELAUNCH_MAX_INSTANCES);
  const size_t scratch_bytes = 64 + ((rx_stride_sz + 63) & ~size_t(63)) + tx_stride_sz;
  if (e == cudaSuccess) e = cudaMalloc(&ctx->scratch, scratch_bytes);
  if (e == cudaSuccess) e = cudaMemsetAsync(ctx->scratch, 0, scratch_bytes, stream);
  ctx->table = function_table;
  ctx->table_count = (uint32_t)func_count;
  ctx->io = static_cast<cudaq_graph_io_context *>(graph_io_ctx);
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

extern "C" cudaError_t cudaq_dispatch_graph_add_prelaunch_instance(cudaq_dispatch_graph_context *context,
                                                                   cudaGraphExec_t graph_exec,
                                                                   cudaq_graph_io_context *io) {
  if (!context || !graph_exec || !io || io == context->io ||
      context->n_extra + 1 >= CUDAQ_GRAPH_PRELAUNCH_MAX_INSTANCES)
    return cudaErrorInvalidValue;
  for (uint32_t k = 0; k < context->n_extra; ++k)
    if (context->extra_exec[k] == graph_exec || context->extra_io[k] == io) return cudaErrorInvalidValue;
  /* An instance must not be any entry's own executable: that one may be
   * launched on arrival while the instance runs (one launch at a time). */
  cudaq_function_entry_t *h =
      static_cast<cudaq_function_entry_t *>(malloc(sizeof(cudaq_function_entry_t) * context->table_count));
  if (!h) return cudaErrorMemoryAllocation;
  cudaError_t e = cudaq__copy_private_stream(h, context->table, sizeof(cudaq_function_entry_t) * context->table_count);
  bool clash = false;
  for (uint32_t k = 0; e == cudaSuccess && k < context->table_count; ++k)
    clash = clash || (h[k].dispatch_mode == CUDAQ_DISPATCH_GRAPH_LAUNCH && h[k].handler.graph_exec == graph_exec);
  free(h);
  if (e != cudaSuccess) return e;
  if (clash) return cudaErrorInvalidValue;
  const cudaq_graph_io_context zero = {}; /* free (busy 0), gate 0: no ticket is 0 */
  e = cudaq__copy_private_stream(io, &zero, sizeof zero);
  if (e != cudaSuccess) return e;
  const uint32_t k = context->n_extra;
  graph_state *d = context->state;
  e = cudaq__copy_private_stream(&d->extra_exec[k], &graph_exec, sizeof graph_exec);
  if (e == cudaSuccess) e = cudaq__copy_private_stream(&d->extra_io[k], &io, sizeof io);
  const uint32_t n = k + 1;
  if (e == cudaSuccess) e = cudaq__copy_private_stream(&d->n_extra, &n, sizeof n);
  if (e != cudaSuccess) return e;
  context->extra_exec[k] = graph_exec;
  context->extra_io[k] = io;
  context->n_extra = n;
  return cudaSuccess;
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
