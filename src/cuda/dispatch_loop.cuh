/*
 * dispatch_loop.cuh - the persistent dispatch loop of the device-call
 * kernels (regular and cooperative) and its helpers: included by
 * dispatch_kernels.cu, which defines the kernels and their launch layer, and
 * by code that instantiates the loop with a handler compiled in
 * (dispatch_loop<Coop, Inline>: src/nn/gpu_devprog.cu). Internal.
 *
 * Memory ordering: the GPU never does read-modify-write on host memory
 * (hostNativeAtomicSupported is 0 on the measured machine): flags are only
 * loaded (acquire) and stored (release) with system scope. Each
 * acquire/release pair is labelled at both ends (A1/R1 ... in
 * cudaq_realtime.h's ring functions).
 */
#ifndef CUDAQ_DISPATCH_LOOP_CUH
#define CUDAQ_DISPATCH_LOOP_CUH

#include <cooperative_groups.h>
#include <cuda/atomic>

#include <stddef.h>
#include <stdint.h>

#include "cudaq/realtime/dispatch_kernel.h"
#include "dispatch_internal.cuh"

/* One launch's parameters (the kernel's only argument). */
struct cudaq__dispatch_params {
  uint64_t *rx_flags;
  uint64_t *tx_flags;
  uint8_t *rx_data;
  uint8_t *tx_data;
  uint32_t rx_stride;
  uint32_t tx_stride;
  const cudaq_function_entry_t *table;
  uint32_t table_count;
  int *shutdown;
  uint64_t *stats;
  cudaq__device_state *state;
  uint32_t num_slots;
  uint32_t stage_bytes;    /* shared-memory staging area: header + payload, multiple of 16 */
  uint32_t prefetch_bytes; /* bytes of a slot the polling warp reads in one step (<= stage_bytes) */
  uint32_t count_every;    /* answered requests the leader counts before adding them to `processed` */
  uint32_t no_stage;       /* cooperative, cudaq_dispatch_coop_options_t.args_in_slot: args = the RX slot */
  uint32_t handler_smem;   /* dynamic shared memory after the staging area lent to handlers (bytes) */
  uint32_t early_clear;    /* marker and RX clear while the prefetch is in flight (prefetch_request); default 1 */
  uint32_t header_poll;    /* 1: the polling warp also reads the slot's first line (header completion, below) */
};

namespace {

namespace cg = cooperative_groups;

constexpr uint32_t SHUTDOWN_POLL_INTERVAL = 64; /* loop iterations between shutdown checks */
constexpr uint32_t IDLE_SCAN_INTERVAL = 256;    /* idle polls between out-of-order scans */
constexpr uint32_t COUNT_EVERY = 64;            /* default dispatch_params.count_every */
constexpr uint32_t REMIRROR_POLLS = 32;         /* idle polls before stats[0] is written again */
constexpr uint32_t MAX_CACHED_ENTRIES = 16;     /* function-table entries kept in shared memory */
constexpr uint32_t MAX_STAGE_BYTES = 32 * 1024; /* request (header + payload) staged in shared memory up to this */
constexpr uint32_t PREFETCH_WORDS_PER_LANE = 4; /* the polling warp reads 32 x 4 words = 512 bytes at once */
/* The most dynamic shared memory a launch asks for (the staging area of
 * the largest slots); the occupancy queries assume it, so a grid sized
 * from them always fits. */
constexpr size_t MAX_LAUNCH_SMEM = (CUDAQ_RPC_HEADER_SIZE + MAX_STAGE_BYTES + 15) & ~size_t(15);
/* Handler shared memory a cooperative launch may ask for (the device's
 * limit decides whether it fits beside the staging area). */
constexpr size_t MAX_HANDLER_SMEM = 227 * 1024;

enum : uint32_t { CMD_NONE = 0, CMD_CALL = 1, CMD_ANSWER = 2, CMD_DROP = 3, CMD_EXIT = 4 };

using dispatch_params = cudaq__dispatch_params;

/* Offset of the handlers' shared memory in the dynamic shared memory (the
 * staging area's size), set by every thread at kernel start. */
__shared__ uint32_t handler_smem_off;

/* The calling block's handler shared memory, for the kernels of the
 * translation unit that includes this (each has its own handler_smem_off):
 * cudaq_dispatch_handler_smem returns it for the library's kernels. */
__device__ __forceinline__ void *handler_smem_here() {
  extern __shared__ __align__(16) uint8_t stage[];
  return stage + handler_smem_off;
}

/* A function-table entry reduced to what the loop reads. */
struct cached_entry {
  uint32_t function_id;
  uint32_t mode;
  cudaq__arg_rule rule;
  cudaq_device_rpc_fn_t fn;
};

using request_state = cudaq__request_state;

__device__ inline int load_relaxed_sys(int *p) {
  return cuda::atomic_ref<int, cuda::thread_scope_system>(*p).load(cuda::memory_order_relaxed);
}

__device__ inline cached_entry make_entry(const cudaq_function_entry_t &e) {
  cached_entry c;
  c.function_id = e.function_id;
  c.mode = e.dispatch_mode;
  c.rule = cudaq__arg_rule_of(&e);
  c.fn = reinterpret_cast<cudaq_device_rpc_fn_t>(e.handler.device_fn_ptr);
  return c;
}

/* cudaq__find_entry's rule (the first entry with the id) over the whole
 * table: the cache holds entries 0..cached-1 in table order, so searching
 * it first and then the rest of the table finds the same entry. */
__device__ uint32_t find_entry(const cached_entry *cache, uint32_t cached, const dispatch_params &p,
                               uint32_t function_id, cached_entry *out) {
  if (const cached_entry *c = cudaq__find_entry(cache, cached, function_id)) {
    *out = *c;
    return 1;
  }
  /* Tables larger than the cache. */
  if (const cudaq_function_entry_t *e = cudaq__find_entry(p.table + cached, p.table_count - cached, function_id)) {
    *out = make_entry(*e);
    return 1;
  }
  return 0;
}

__device__ void cache_table(const dispatch_params &p, cached_entry *cache, uint32_t *cached) {
  uint32_t n = p.table_count < MAX_CACHED_ENTRIES ? p.table_count : MAX_CACHED_ENTRIES;
  for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) cache[i] = make_entry(p.table[i]);
  if (threadIdx.x == 0) *cached = n;
}

/* Leader: adds the requests answered since the last flush to `processed`
 * and mirrors the total into stats[0] (cudaq__count_processed's rule: the
 * mirror may lag; the last block to leave writes the exact total). The
 * returning atomic costs an L2 round trip, so it is not paid between a
 * response and the next poll: only every count_every answers, at the first
 * poll that finds no request, and on exit. So stats[0] is exact whenever
 * the dispatcher has been idle for one poll (about a microsecond), and lags
 * by fewer than count_every requests while requests arrive back to back.
 * Measured (H100, bench_gpu_dispatch --call-rounds 3): device-call p50
 * 5.37-5.41 us against 5.65-5.93 with the count per request
 * (CUDAQ_DISPATCH_COUNT_EVERY=1). */
__device__ void flush_count(const dispatch_params &p, uint32_t *pending) {
  if (*pending == 0) return;
  cudaq__count_processed(p.state, p.stats, *pending);
  *pending = 0;
}

/* Leader: stores the current total of `processed` into stats[0]. */
__device__ void mirror_total(const dispatch_params &p) {
  const uint64_t n = cuda::atomic_ref<uint64_t, cuda::thread_scope_device>(p.state->processed)
                         .load(cuda::memory_order_relaxed);
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*p.stats).store(n, cuda::memory_order_relaxed);
}

/* A DEVICE_CALL entry's handler called through its function pointer. A
 * policy with a handler compiled in (the NN device program's, the bench's)
 * derives from this and replaces inline_call and call; it inherits mark. */
struct call_by_pointer {
  static __device__ __forceinline__ bool inline_call(cudaq_device_rpc_fn_t) { return false; }
  static __device__ __forceinline__ int32_t call(const void *, void *, uint32_t, uint32_t, uint32_t *) { return 0; }
  /* Profiling hook, called by the leader at points of a request's path (0:
   * found by the poll, 5: its flags given back, 6: parsed, 1: broadcast,
   * 2: staged, before the handler, 3: handler done, 7: response header
   * written, before R2, 4: answered); nothing here
   * (bench_gpu_dispatch --call-profile records them). */
  static __device__ __forceinline__ void mark(uint32_t) {}
};

/* Header completion (p.header_poll: a ring with
 * CUDAQ_RX_COMPLETION_HEADER, cudaq_realtime.h). The producer writes the
 * request's payload and header and the header's magic word last
 * (cudaq_host_ringbuffer_write_rpc_request, R1h), then signals RX as
 * always. The polling warp reads the slot's first line (HEADER_LINE bytes,
 * one load of the warp) and the RX flag together, and takes a request
 * whose magic it sees in the line while RX reads set in the same poll,
 * without a dependent read after the flag (a line with a request's magic
 * but RX not yet set waits for a later poll: a producer may write several
 * requests before it signals any, in any order).
 * What this relies on: lane 0's load of the magic observed R1h, but the
 * other lanes' loads of the line are not ordered after it by the memory
 * model; the line is taken whole because the warp's one 128-byte read of it
 * is served as one snapshot. That is a property of the hardware, measured
 * (bench_gpu_dispatch's header floor rows count lines seen half-written: 0
 * of 325,000 on the H200 hosts of 2026-11-29; every answer of
 * test_gpu_dispatch's header tests is checked byte for byte), not a
 * guarantee of PCIe: a port on other hardware must measure it again. Bytes
 * past the line are read after lane 0's acquire fence (A1h,
 * parse_request).
 * Flags: as soon as the request is taken, lane 0 stores the magic word
 * CUDAQ_RPC_SLOT_CONSUMED and clears RX (relaxed, line_take), and R2
 * publishes the response after them: one system-scope fence a request. No
 * in-flight marker: the slot cannot look free between the RX clear and the
 * answer, because on such a ring cudaq_host_ringbuffer_slot_available also
 * wants the magic word 0, which only the consumer's clear_slot writes,
 * after the answer (or a drop). A producer that reuses the slot as soon as
 * it has read the answer finds RX 0 and the magic word consumed (both
 * before R2; A2 in cudaq_host_ringbuffer_poll_tx_flag). RX is cleared only
 * after the poll saw it set (A1: the producer's signal comes first in RX's
 * coherence order, so a clear never lands before it, and no later signal
 * exists until the answer or the drop frees the slot). A slot whose RX is
 * set without a request's magic in the line (a bad request, or a line read
 * before its magic landed) is read the flag's way (prefetch_request). */
constexpr uint32_t HEADER_LINE = CUDAQ_HEADER_LINE;

/* Slot `slot`'s first word (the magic), as a system-scope word. */
__device__ inline cuda::atomic_ref<uint32_t, cuda::thread_scope_system> slot_magic(const dispatch_params &p,
                                                                                  uint32_t slot) {
  return cuda::atomic_ref<uint32_t, cuda::thread_scope_system>(
      *reinterpret_cast<uint32_t *>(p.rx_data + (size_t)slot * p.rx_stride));
}

/* Lane 0, header completion: takes a request seen in its slot's line with
 * RX set, as soon as it is found (the stores then travel while the request
 * is parsed and served): the magic word becomes CUDAQ_RPC_SLOT_CONSUMED and
 * RX is cleared, relaxed stores ordered before TX by R2 with the answer, or
 * before R3h for a drop (drop_request). The slot stays busy all along: on
 * such a ring cudaq_host_ringbuffer_slot_available wants the magic word 0,
 * which only the consumer's clear_slot (after the answer) or a drop
 * writes. */
__device__ __forceinline__ void line_take(const dispatch_params &p, uint32_t slot) {
  slot_magic(p, slot).store(CUDAQ_RPC_SLOT_CONSUMED, cuda::memory_order_relaxed);
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(p.rx_flags[slot]).store(0, cuda::memory_order_relaxed);
}

/* Warp 0 of the leader block polls. Lane 0 watches the current slot; every
 * IDLE_SCAN_INTERVAL idle polls all lanes look at up to 32 of this block's
 * slots at once (one PCIe round trip) so a request signalled out of ring
 * order is found. Returns the ready slot, or UINT32_MAX when shutdown is
 * seen. Every lane of warp 0 must call it; on return every lane is ordered
 * after the acquire that found the slot (__syncwarp), so any lane may read
 * the request. my_slots: the number of this block's slots. With
 * p.header_poll the warp reads the slot's first line with the flag; *line
 * is then 1 (the request's magic seen with RX set: the line is staged) or
 * 0 (found by RX: prefetch_request reads the request). */
__device__ uint32_t poll_ready_slot(const dispatch_params &p, uint32_t slot, uint32_t first,
                                    uint32_t step, uint32_t my_slots, uint32_t *iter, uint32_t *pending,
                                    uint8_t *stage, uint32_t *line) {
  *line = 0;
  const uint32_t lane = threadIdx.x & 31u;
  uint32_t idle = 0, window = 0;
  for (;;) {
    /* Checked every SHUTDOWN_POLL_INTERVAL calls and idle polls alike, so
     * a dispatcher that is never idle still stops. */
    if (++*iter % SHUTDOWN_POLL_INTERVAL == 0) {
      int stop = lane == 0 ? load_relaxed_sys(p.shutdown) : 0;
      if (__shfl_sync(0xFFFFFFFFu, stop, 0)) return UINT32_MAX;
    }
    uint32_t found = UINT32_MAX;
    if (p.header_poll) {
      /* Header completion: every lane reads one word of the slot's first
       * line (one 128-byte load of the warp; volatile: relaxed, system
       * scope, never from L1), lane 0 the RX flag too (A1, as below), all
       * issued together; the fence before the poll as below. */
      __threadfence_system();
      const volatile uint32_t *ln = reinterpret_cast<const volatile uint32_t *>(p.rx_data + (size_t)slot * p.rx_stride);
      const uint32_t w = ln[lane];
      const uint32_t rx = lane == 0 && cudaq__load_acquire_sys(&p.rx_flags[slot]) != 0;
      /* A1h: lane 0's load of the magic, written last by the producer (R1h
       * in cudaq_host_ringbuffer_write_rpc_request); the line's other words
       * come with it in the warp's one read (see above). Bytes past the line
       * are acquired by parse_request's fence. */
      const uint32_t magic = __shfl_sync(0xFFFFFFFFu, w, 0);
      const uint32_t rx_set = __shfl_sync(0xFFFFFFFFu, rx, 0);
      if (rx_set && magic == CUDAQ_RPC_MAGIC_REQUEST) {
        reinterpret_cast<uint32_t *>(stage)[lane] = w;
        *line = 1u;
        __syncwarp(); /* the staged line and lane 0's A1 before every lane's use */
        return slot;
      }
      if (rx_set) found = slot;
    } else if (lane == 0) {
      /* The fence before each poll makes the poll see a new flag sooner
       * (measured: the floor's round trip drops from 3.2 to 2.3 us on an
       * H100; see bench/results). A1 pairs with R1 in
       * cudaq_host_ringbuffer_signal_slot: a nonzero flag makes the
       * request bytes visible to this thread. */
      __threadfence_system();
      if (cudaq__load_acquire_sys(&p.rx_flags[slot]) != 0) found = slot;
    }
    found = __shfl_sync(0xFFFFFFFFu, found, 0);
    if (found != UINT32_MAX) {
      __syncwarp(); /* lane 0's acquire (A1) happens before every lane's reads of the request */
      return found;
    }
    /* The first poll that finds nothing: the requests answered since the
     * last flush go to `processed` now, off any request's path. */
    if (idle == 0 && lane == 0) flush_count(p, pending);
    /* Several polling blocks flush on their own, and two blocks' mirror
     * stores may land out of order: after REMIRROR_POLLS idle polls each
     * block mirrors the total again, so an idle dispatcher's stats[0] ends
     * exact without a stop. */
    if (idle == REMIRROR_POLLS && lane == 0) mirror_total(p);
    if (++idle % IDLE_SCAN_INTERVAL == 0 && my_slots > 1) {
      /* Out-of-order scan: lane i checks the i-th slot of a window of this
       * block's slots; the lowest set lane wins. */
      uint32_t k = window + lane;
      uint32_t s = first + (k % my_slots) * step;
      /* A1, pairs with R1 in cudaq_host_ringbuffer_signal_slot, done by the
       * lane that checks the slot (not lane 0). */
      bool set = lane < my_slots && cudaq__load_acquire_sys(&p.rx_flags[s]) != 0;
      uint32_t mask = __ballot_sync(0xFFFFFFFFu, set);
      window = (window + 32u) % my_slots;
      if (mask) {
        /* The ballot and shfl move values, not memory order: this barrier
         * (memory ordering among the warp's lanes) makes the winning lane's
         * A1 happen before every lane's reads of the request
         * (prefetch_request), so R1's request bytes are visible to them. */
        __syncwarp();
        return __shfl_sync(0xFFFFFFFFu, s, __ffs(mask) - 1);
      }
    }
  }
}

/* Lane 0 of the polling warp: marks slot `slot` in flight and hands its RX
 * slot back (the flag order is explained at parse_request). */
__device__ inline void hand_back(const dispatch_params &p, uint32_t slot) {
  /* Header completion: the slot's magic word marked consumed too (ordered
   * before the RX clear by R3), so the line is not taken for a request
   * again and the slot stays busy until clear_slot. Same thread and
   * address as the prefetch's load of it, which reads the value before
   * this store. */
  if (p.header_poll) slot_magic(p, slot).store(CUDAQ_RPC_SLOT_CONSUMED, cuda::memory_order_relaxed);
  /* The marker publishes nothing: a relaxed store, ordered before the RX
   * clear by R3's release. */
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(p.tx_flags[slot])
      .store(CUDAQ_TX_FLAG_IN_FLIGHT, cuda::memory_order_relaxed);
  /* R3 hands the RX slot back (after the in-flight marker); pairs with A3
   * in slot_available / cudaq_host_ringbuffer_slot_available. */
  cudaq__store_release_sys(&p.rx_flags[slot], 0);
}

/* Polling warp: reads the first prefetch_bytes of the slot (header and the
 * start of the payload) into the staging area, every load issued at once:
 * one PCIe round trip instead of one for the header and one for the
 * payload. Bytes past arg_len are read too and never used.
 * With p.early_clear, lane 0 marks the slot in flight and hands the RX slot
 * back (hand_back) between issuing its loads and using them: R3's fence
 * then waits while the loads are in flight instead of after them (one
 * system-scope fence off the request's path). The slot is then in flight
 * before its header is checked: drop_request takes the marker back for a
 * request the leader drops. */
__device__ void prefetch_request(const dispatch_params &p, uint32_t slot, uint8_t *stage) {
  const uint32_t *src = reinterpret_cast<const uint32_t *>(p.rx_data + (size_t)slot * p.rx_stride);
  uint32_t *dst = reinterpret_cast<uint32_t *>(stage);
  const uint32_t words = p.prefetch_bytes / 4u, lane = threadIdx.x & 31u;
  uint32_t v[PREFETCH_WORDS_PER_LANE];
#pragma unroll
  for (uint32_t k = 0; k < PREFETCH_WORDS_PER_LANE; ++k) {
    const uint32_t w = lane + 32u * k;
    v[k] = w < words ? src[w] : 0u;
  }
  if (p.early_clear && lane == 0) hand_back(p, slot);
#pragma unroll
  for (uint32_t k = 0; k < PREFETCH_WORDS_PER_LANE; ++k) {
    const uint32_t w = lane + 32u * k;
    if (w < words) dst[w] = v[k];
  }
  __syncwarp(); /* the staged header is visible to lane 0 */
}

/* Parser: the outcome of the last request's lookup and checks, kept in
 * registers. The function table is immutable while a dispatcher runs (the
 * cached entries and the rest alike) and the slot size is fixed for a
 * launch, so a request with the same function_id and arg_len has the same
 * outcome: the lookup and the checks are skipped for it (the usual case,
 * one decoder function at a fixed size). Unknown functions are not
 * remembered. */
struct lookup_memo {
  uint32_t valid = 0, function_id = 0, arg_len = 0;
  int32_t status = 0;
  cudaq_device_rpc_fn_t fn = nullptr;
};

/* Leader (every lane of a one-warp block, each into its own state): checks
 * the staged header of `slot` and fills st; with `effects` (one thread),
 * without p.early_clear, it also hands the RX slot back for every request
 * it keeps (flag order below; with it, prefetch_request did). */
__device__ __forceinline__ void parse_request(const dispatch_params &p, const cached_entry *cache, uint32_t cached,
                                              uint32_t slot, const uint8_t *stage, request_state *st, uint32_t line,
                                              lookup_memo &memo, bool effects) {
  const uint32_t *h = reinterpret_cast<const uint32_t *>(stage);
  const uint32_t w0 = h[0], w1 = h[1], w2 = h[2];
  /* Filled in registers, broadcast by one struct store at the end. */
  request_state r;
  r.slot = slot;
  r.line = line != 0;
  r.arg_len = w2;
  r.request_id = h[3];
  r.ptp = (uint64_t)h[4] | ((uint64_t)h[5] << 32);
  r.fn = nullptr;
  r.status = 0;
  r.drop_kind = 0;
  /* A request seen in the line (poll_ready_slot): its bytes past the line
   * (and, with args in the slot, all of them) are read after this fence,
   * which with this thread's load of the magic that R1h wrote last is the
   * acquire (A1h) that makes them visible; the barrier before the reads
   * orders the other threads after it. */
  if (line && (CUDAQ_RPC_HEADER_SIZE + (uint64_t)w2 > HEADER_LINE || p.no_stage)) __threadfence_system();
  if (w0 != CUDAQ_RPC_MAGIC_REQUEST) {
    r.cmd = CMD_DROP;
    *st = r;
    return;
  }
  if (!(memo.valid && memo.function_id == w1 && memo.arg_len == w2)) {
    cached_entry e;
    if (!find_entry(cache, cached, p, w1, &e)) {
      r.cmd = CMD_DROP;
      r.drop_kind = 1;
      *st = r;
      return;
    }
    memo.valid = 1;
    memo.function_id = w1;
    memo.arg_len = w2;
    memo.status = cudaq__entry_status(e.rule, e.mode, e.fn != nullptr, CUDAQ_DISPATCH_DEVICE_CALL, w2,
                                      p.rx_stride - CUDAQ_RPC_HEADER_SIZE);
    memo.fn = e.fn;
  }
  /* Flag order: TX = in flight -> RX = 0 (here, or in prefetch_request with
   * p.early_clear) -> TX = the response (the last store, in
   * finish_request). Measured on an H100 over PCIe
   * (hostNativeAtomicSupported 0): when the kernel stored the TX flag and
   * then cleared the RX flag, the host never saw the TX store nor the
   * response bytes written before it (requests answered back to back were
   * lost; one at a time they were not). With the response published by the
   * last store, every response arrives. The in-flight marker keeps the
   * producer (which reuses a slot only when both flags are 0) off the slot
   * from here until the response, so the rest of the payload may still be
   * read after RX is cleared. */
  if (!p.early_clear && effects) hand_back(p, slot);
  r.cmd = memo.status ? CMD_ANSWER : CMD_CALL;
  r.status = memo.status;
  if (!memo.status) r.fn = memo.fn;
  *st = r;
}

/* Completes the staged copy of the payload with every thread of the block
 * (4-byte loads issued together); `have` bytes of the slot are staged
 * already. Returns the args pointer for handlers. */
__device__ __forceinline__ const void *stage_payload(const dispatch_params &p, const request_state *st, uint8_t *stage,
                                     uint32_t have) {
  const uint8_t *slot = p.rx_data + (size_t)st->slot * p.rx_stride;
  const uint32_t end = CUDAQ_RPC_HEADER_SIZE + st->arg_len;
  if (end > p.stage_bytes) return slot + CUDAQ_RPC_HEADER_SIZE; /* too large to stage: read in place */
  const uint32_t words = (end + 3u) / 4u;
  const uint32_t *s32 = reinterpret_cast<const uint32_t *>(slot);
  uint32_t *d32 = reinterpret_cast<uint32_t *>(stage);
  for (uint32_t i = have / 4u + threadIdx.x; i < words; i += blockDim.x) d32[i] = s32[i];
  return stage + CUDAQ_RPC_HEADER_SIZE;
}

/* Warp 0 of the polling block: writes the response header, publishes TX,
 * counts. The header's six words go out as one warp store (lanes 0-5)
 * instead of six stores of one thread. status and result_len are lane 0's. */
template <typename Inline>
__device__ __forceinline__ void finish_request(const dispatch_params &p, const request_state *st, int32_t status,
                               uint32_t result_len, uint32_t *pending) {
  const uint32_t lane = threadIdx.x & 31u;
  status = __shfl_sync(0xFFFFFFFFu, status, 0);
  result_len = __shfl_sync(0xFFFFFFFFu, result_len, 0);
  uint8_t *tx = p.tx_data + (size_t)st->slot * p.tx_stride;
  uint32_t *h = reinterpret_cast<uint32_t *>(tx);
  /* Lane k's header word (a select, not an indexed array, which would live
   * in local memory). */
  const uint32_t w = lane == 0   ? CUDAQ_RPC_MAGIC_RESPONSE
                     : lane == 1 ? (uint32_t)status
                     : lane == 2 ? result_len
                     : lane == 3 ? st->request_id
                     : lane == 4 ? (uint32_t)st->ptp
                                 : (uint32_t)(st->ptp >> 32);
  if (lane < 6) h[lane] = w;
  /* Memory ordering among the warp's lanes: lanes 1-5's header words
   * happen before lane 0's R2 below. */
  __syncwarp();
  if (lane == 0) {
    Inline::mark(7);
    /* R2 publishes the response (header by lanes 0-5, result bytes by the
     * block, ordered before this by __syncwarp and the preceding barrier);
     * the last flag store of the request (see parse_request). Pairs with A2
     * in cudaq_host_ringbuffer_poll_tx_flag. */
    cudaq__store_release_sys(&p.tx_flags[st->slot], (uint64_t)(uintptr_t)tx);
    cudaq__count_status(p.state, status);
    if (++*pending >= p.count_every) flush_count(p, pending);
  }
}

__device__ __forceinline__ void drop_request(const dispatch_params &p, const request_state *st) {
  cudaq__bump(st->drop_kind == 0 ? &p.state->dropped_bad_magic : &p.state->dropped_unknown_function);
  if (st->line) {
    /* Taken from its line (line_take: magic consumed, RX cleared; TX 0, no
     * marker): R3h, the magic word back to 0, frees the slot. It orders
     * line_take's stores and the polling warp's reads of the slot (the
     * __syncwarp in poll_ready_slot) before it; pairs with A3h in
     * cudaq_host_ringbuffer_slot_available. */
    slot_magic(p, st->slot).store(0u, cuda::memory_order_release);
    return;
  }
  /* Every other drop zeroes the slot's magic word too, ordered by R3d or R3
   * below: a ring with header completion is free again only with the word
   * 0 (also when a launch helper called directly serves it the flag's
   * way); on a flag ring nobody reads the dropped request's word again. */
  slot_magic(p, st->slot).store(0u, cuda::memory_order_relaxed);
  if (p.early_clear) {
    /* RX was handed back behind the in-flight marker (prefetch_request):
     * take the marker back, so the slot is free again (TX 0, RX 0). The
     * same thread stored the marker, so this store follows it in the
     * flag's coherence order; R3 already ordered the RX clear before it.
     * TX was 0 before the marker for any producer that reuses a slot only
     * once it is free or its answer consumed (a request signalled over an
     * unconsumed answer loses that answer here, as an accepted one always
     * did by its marker).
     * R3d frees the slot: the polling warp's reads of it (ordered before
     * this by the __syncwarp after the prefetch) come before; pairs with A3
     * in cudaq_host_ringbuffer_slot_available. */
    cudaq__store_release_sys(&p.tx_flags[st->slot], 0);
  } else {
    cudaq__store_release_sys(&p.rx_flags[st->slot], 0); /* R3: consumed, no response */
  }
}

/* Leader, once per polling block on exit: the last block to leave writes
 * the exact processed total into stats[0] (see cudaq__count_processed). */
__device__ void leave(const dispatch_params &p, uint32_t polling_blocks, uint32_t *pending) {
  cudaq__device_state *c = p.state;
  flush_count(p, pending);
  __threadfence(); /* this block's counts and stats[0] store come before its exit count */
  const uint32_t gone = atomicAdd(&c->exited_blocks, 1u) + 1u;
  __threadfence(); /* and the other blocks' before the total read below */
  if (gone == polling_blocks) {
    const uint64_t total = atomicAdd(reinterpret_cast<unsigned long long *>(&c->processed), 0ull);
    cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*p.stats).store(total, cuda::memory_order_relaxed);
  }
}

/* One persistent loop. Regular: each block serves slots blockIdx.x +
 * k * gridDim.x and its own threads run the handler; the request is
 * broadcast in shared memory. Cooperative: block 0 polls, the whole grid
 * runs the handler; the request is broadcast through device memory
 * (grid.sync() orders it).
 * OneWarp: a regular block of one warp (the default launch). Its lanes
 * each keep the request's state in registers (every lane parses the staged
 * header itself, lane 0 alone does what parsing stores) instead of one
 * thread broadcasting it through shared memory, and they order each other
 * with __syncwarp instead of the block barrier. */
template <bool Coop, typename Inline, bool OneWarp>
__device__ __forceinline__ void dispatch_loop_impl(const dispatch_params &p) {
  extern __shared__ __align__(16) uint8_t stage[];
  __shared__ cached_entry cache[MAX_CACHED_ENTRIES];
  __shared__ uint32_t cached;
  __shared__ request_state st_shared;

  const uint32_t first = Coop ? 0u : blockIdx.x;
  const uint32_t step = Coop ? 1u : gridDim.x;
  if (first >= p.num_slots) return; /* more blocks than slots: nothing to serve */
  const uint32_t polling_blocks = Coop ? 1u : (gridDim.x < p.num_slots ? gridDim.x : p.num_slots);
  const bool poll_block = !Coop || blockIdx.x == 0;
  const bool leader = poll_block && threadIdx.x == 0;
  /* Bytes of the request already in this block's staging area once the
   * request is broadcast: the polling warp's prefetch; other blocks of the
   * cooperative grid stage everything after the header themselves. */
  const uint32_t have = poll_block ? p.prefetch_bytes : CUDAQ_RPC_HEADER_SIZE;
  handler_smem_off = p.stage_bytes; /* read by cudaq_dispatch_handler_smem (same value from every thread) */
  request_state st_own; /* OneWarp: this lane's copy */
  request_state *st = OneWarp ? &st_own : Coop ? &p.state->bcast : &st_shared;
  const bool parser = OneWarp || leader; /* fills *st */
  cg::grid_group grid = cg::this_grid();
  auto barrier = [&]() {
    if (Coop) grid.sync();
    else if (OneWarp) __syncwarp();
    else __syncthreads();
  };

  cache_table(p, cache, &cached);
  __syncthreads();
  const uint32_t my_slots = (p.num_slots - first + step - 1) / step; /* slots of this block */
  uint32_t slot = first, iter = 0, draining = 0, drain_left = 0;
  uint32_t pending = 0; /* leader: answered, not yet added to `processed` (flush_count) */
  lookup_memo memo;     /* parser: the last lookup (parse_request) */

  for (;;) {
    if (poll_block && threadIdx.x < 32) {
      uint32_t s = UINT32_MAX, line = 0;
      if (!draining) {
        s = poll_ready_slot(p, slot, first, step, my_slots, &iter, &pending, stage, &line);
        if (s == UINT32_MAX) { /* shutdown: answer what is already signalled */
          draining = 1;
          drain_left = my_slots;
        }
      }
      if (draining) { /* one lap over this block's slots, in ring order */
        while (drain_left > 0 && s == UINT32_MAX) {
          uint32_t ready = threadIdx.x == 0 && cudaq__load_acquire_sys(&p.rx_flags[slot]) != 0; /* A1 (R1) */
          if (__shfl_sync(0xFFFFFFFFu, ready, 0)) s = slot;
          else slot = slot + step < p.num_slots ? slot + step : first;
          --drain_left;
        }
        __syncwarp(); /* lane 0's A1 happens before the prefetch of every lane */
      }
      if (leader && s != UINT32_MAX) Inline::mark(0);
      if (s != UINT32_MAX && !line) prefetch_request(p, s, stage); /* a request seen in its line is staged */
      else if (line && threadIdx.x == 0) line_take(p, s);
      if (parser) {
        if (leader) Inline::mark(5);
        if (s == UINT32_MAX) st->cmd = CMD_EXIT;
        else parse_request(p, cache, cached, s, stage, st, line, memo, leader);
        if (leader) Inline::mark(6);
      }
    }
    barrier();
    const uint32_t cmd = st->cmd;
    if (cmd == CMD_EXIT) break;
    if (leader) Inline::mark(1);

    if (cmd == CMD_CALL) {
      const void *args;
      if (!Coop && CUDAQ_RPC_HEADER_SIZE + st->arg_len <= have) {
        /* Staged whole by the polling warp (the barrier above ordered it):
         * no copy, no barrier (the block's threads agree on the test). */
        args = stage + CUDAQ_RPC_HEADER_SIZE;
      } else {
        args = Coop && p.no_stage ? p.rx_data + (size_t)st->slot * p.rx_stride + CUDAQ_RPC_HEADER_SIZE
                                  : stage_payload(p, st, stage, have);
        barrier();
      }
      if (leader) Inline::mark(2);
      uint32_t len = 0;
      uint8_t *result = p.tx_data + (size_t)st->slot * p.tx_stride + CUDAQ_RPC_HEADER_SIZE;
      /* A kernel instantiated with an Inline handler runs its entries' handler
       * compiled into the loop (no function-pointer call); every other entry
       * through its pointer. */
      int32_t status = Inline::inline_call(st->fn)
                           ? Inline::call(args, result, st->arg_len, p.tx_stride - CUDAQ_RPC_HEADER_SIZE, &len)
                           : st->fn(args, result, st->arg_len, p.tx_stride - CUDAQ_RPC_HEADER_SIZE, &len);
      barrier(); /* every result byte is written */
      if (leader) Inline::mark(3);
      if (poll_block && threadIdx.x < 32) {
        if (len > p.tx_stride - CUDAQ_RPC_HEADER_SIZE) {
          status = CUDAQ_RPC_ERR_RESULT_TOO_LARGE;
          len = 0;
        }
        finish_request<Inline>(p, st, status, len, &pending); /* lane 0's status and len */
      }
      if (leader) Inline::mark(4);
    } else if (cmd == CMD_ANSWER) {
      if (poll_block && threadIdx.x < 32) finish_request<Inline>(p, st, st->status, 0, &pending);
    } else if (leader) {
      drop_request(p, st);
    }
    if (poll_block && threadIdx.x < 32) slot = st->slot + step < p.num_slots ? st->slot + step : first;
    barrier(); /* nobody overwrites the request before every thread has read it */
  }
  if (leader) leave(p, polling_blocks, &pending);
}

/* One persistent loop (dispatch_loop_impl), in its one-warp form for a
 * regular block of 32 threads (H200, header completion, bench_gpu_dispatch
 * --call-header, two visits: device-call p50 3.20-3.34 us before, 3.01-3.14
 * after; the minimal kernel on the ring 2.44-2.57 and 2.37-2.53 in the same
 * visits). */
template <bool Coop, typename Inline = call_by_pointer>
__device__ void dispatch_loop(const dispatch_params &p) {
  if constexpr (!Coop) {
    if (blockDim.x == 32) {
      dispatch_loop_impl<Coop, Inline, true>(p);
      return;
    }
  }
  dispatch_loop_impl<Coop, Inline, false>(p);
}

}  // namespace

/* Validates a device-call launch's arguments and fills its parameters (the
 * staging area, the counters' device state, options); false after
 * reporting a bad launch through cudaGetLastError (dispatch_kernels.cu). */
bool cudaq__dispatch_prepare(bool coop, volatile uint64_t *rx_flags, volatile uint64_t *tx_flags, uint8_t *rx_data,
                             uint8_t *tx_data, size_t rx_stride_sz, size_t tx_stride_sz,
                             cudaq_function_entry_t *function_table, size_t func_count, volatile int *shutdown_flag,
                             uint64_t *stats, size_t num_slots, uint32_t num_blocks, uint32_t threads_per_block,
                             const cudaq_dispatch_coop_options_t *opt, cudaq__dispatch_params *out);

/* Sets prepared parameters' request completion (cudaq_rx_completion_t): a
 * ring with header completion polls the slots' first lines (dispatch_loop's
 * header completion), with the early flag hand-back and a 128-byte
 * prefetch. False (parameters unusable) when the slots are not on 128-byte
 * lines or TX data is RX data. The one home of the rule, for
 * cudaq__dispatch_prepare and launches that prepare by hand (benchmarks). */
bool cudaq__dispatch_set_completion(cudaq__dispatch_params *p, uint32_t completion);

/* The staging area of a launch over slots of rx_stride_sz bytes (header +
 * payload up to MAX_STAGE_BYTES, rounded up to 16 bytes): one home for the
 * rule, used by prepare and the occupancy queries. */
inline uint32_t cudaq__dispatch_stage_bytes(size_t rx_stride_sz) {
  const size_t want = rx_stride_sz < CUDAQ_RPC_HEADER_SIZE + MAX_STAGE_BYTES ? rx_stride_sz
                                                                             : CUDAQ_RPC_HEADER_SIZE + MAX_STAGE_BYTES;
  return (uint32_t)((want + 15) & ~size_t(15));
}

/* Launches a regular dispatch kernel over prepared parameters (its shared
 * memory: the staging area; no handler share). Errors stay for
 * cudaGetLastError(), as for the launch helpers. */
template <typename Kernel>
void cudaq__regular_launch(Kernel kernel, const cudaq__dispatch_params &p, uint32_t num_blocks,
                           uint32_t threads_per_block, cudaStream_t stream) {
  kernel<<<num_blocks, threads_per_block, p.stage_bytes, stream>>>(p);
}

/* A cooperative dispatch kernel's dynamic shared memory: its limit raised
 * where it passes the default 48 KiB. */
template <typename Kernel>
cudaError_t cudaq__coop_set_smem(Kernel kernel, size_t smem) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              (int)(smem > 48 * 1024 ? smem : 48 * 1024));
}

/* Launches a cooperative dispatch kernel over prepared parameters (its
 * shared memory: the staging area and the handlers' share). Errors stay
 * for cudaGetLastError(), as for the launch helpers. */
template <typename Kernel>
void cudaq__coop_launch(Kernel kernel, cudaq__dispatch_params &p, uint32_t num_blocks, uint32_t threads_per_block,
                        cudaStream_t stream) {
  const size_t smem = (size_t)p.stage_bytes + p.handler_smem;
  if (smem > 48 * 1024 && cudaq__coop_set_smem(kernel, smem) != cudaSuccess) return;
  void *args[] = {&p};
  cudaLaunchCooperativeKernel((const void *)kernel, dim3(num_blocks), dim3(threads_per_block), args, smem, stream);
}

/* Blocks per SM of a cooperative dispatch kernel for a slot stride and
 * handler shared memory (the occupancy queries of both libraries). */
template <typename Kernel>
cudaError_t cudaq__coop_occupancy(Kernel kernel, int *out_blocks, uint32_t threads_per_block, size_t rx_stride_sz,
                                  size_t handler_smem_bytes) {
  if (!out_blocks) return cudaErrorInvalidValue;
  *out_blocks = 0;
  if (handler_smem_bytes > MAX_HANDLER_SMEM) return cudaErrorInvalidValue;
  const size_t smem = cudaq__dispatch_stage_bytes(rx_stride_sz) + ((handler_smem_bytes + 15) & ~size_t(15));
  cudaError_t e = cudaq__coop_set_smem(kernel, smem);
  if (e == cudaSuccess)
    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(out_blocks, kernel, (int)threads_per_block, smem);
  if (e != cudaSuccess) *out_blocks = 0;
  return e;
}

#endif
