/*
 * bench_gpu_dispatch.cu - GPU dispatch round trip against the measured
 * floor, in one run on one GPU.
 *
 *   floor            host stores a mapped word, a persistent 1-thread kernel
 *                    polls it and stores a reply word the host polls (as
 *                    shared/tools/floor.cu); "fenced" adds
 *                    __threadfence_system() before each device-side poll.
 *   device-call      host writes an RPC request (header + payload) into a
 *                    mapped slot and signals it; the persistent dispatch
 *                    kernel runs an echo handler and publishes the response;
 *                    the host sees the TX flag, reads the response, clears.
 *                    Regular (1 block) and cooperative (2 blocks).
 *   graph-launch     the same through the graph-launch dispatcher: a handler
 *                    graph launched from the device per request.
 *   unified          the emulated-NIC unified kernel (in-place frames).
 * One request in flight (latency), then all slots in flight (throughput).
 *
 * Usage: bench_gpu_dispatch [--requests N] [--payload BYTES] [--cpu C] [--ab ROUNDS]
 *   --ab R: R interleaved rounds of the graph-launch path with and without
 *           the dispatcher's staged copy of the request (see main).
 */
#include <cuda/atomic>
#include <cuda_runtime.h>

#include <algorithm>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <string>
#include <vector>

#include "cudaq/realtime/cudaq_realtime.h"
#include "cudaq/realtime/dispatch_kernel.h"
#include "cudaq/realtime/emu_transport.h"
#include "bench_device_echo.cuh"
#include "dispatch_loop.cuh" /* src/cuda: the loop instantiated with the echo compiled in (a row below) */

/* CUDA and library calls: exit with a message on failure (bench_cuda_check.h). */
#define CK BENCH_CUDA_CK
#define CQ BENCH_CUDAQ_CK

static uint64_t now_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void report(const char *name, std::vector<uint64_t> &v, double *p50_out = nullptr) {
  std::sort(v.begin(), v.end());
  auto q = [&](double p) { return v[(size_t)(p * (double)(v.size() - 1))] / 1000.0; };
  printf("%-46s n=%-7zu min %6.2f  p50 %6.2f  p90 %6.2f  p99 %6.2f  p99.9 %7.2f  max %8.2f us\n", name, v.size(), q(0),
         q(.5), q(.9), q(.99), q(.999), q(1));
  if (p50_out) *p50_out = q(.5);
  fflush(stdout);
}

/* The ring rows' slot size for a payload: header and payload with room to
 * spare, on whole 128-byte lines where `lines` (header completion needs
 * them). */
static uint32_t bench_slot_size(uint32_t payload, bool lines) {
  const uint32_t size = 64 + ((payload + 7) & ~7u);
  return lines ? (size + CUDAQ_HEADER_LINE - 1) / CUDAQ_HEADER_LINE * CUDAQ_HEADER_LINE : size;
}

#include "bench_dispatch_floors.cuh" /* the floor rows */

/* ---- handlers ---------------------------------------------------------------- */
#define FN_ECHO BENCH_ECHO_FN
__global__ void graph_echo(cudaq_graph_io_context *io) {
  const uint32_t n = io->arg_len;
  for (uint32_t i = threadIdx.x; i < n; i += blockDim.x)
    io->tx_slot[CUDAQ_RPC_HEADER_SIZE + i] = io->rx_slot[CUDAQ_RPC_HEADER_SIZE + i];
  __syncthreads();
  if (threadIdx.x == 0) cudaq_graph_io_complete(io, 0, n);
}

/* The same echo, written for a pre-launched graph: its kernel waits at the
 * gate first (cudaq_dispatch_graph_set_prelaunch). */
__global__ void graph_echo_gated(cudaq_graph_io_context *io) {
  cudaq_graph_io_wait(io); /* a cancelled launch has arg_len 0: nothing to copy */
  const uint32_t n = io->arg_len;
  for (uint32_t i = threadIdx.x; i < n; i += blockDim.x)
    io->tx_slot[CUDAQ_RPC_HEADER_SIZE + i] = io->rx_slot[CUDAQ_RPC_HEADER_SIZE + i];
  __syncthreads();
  if (threadIdx.x == 0) cudaq_graph_io_complete(io, 0, n);
}

/* --ab: the setting of the dispatcher A/B switches a row ran with, added to its name. */
static const char *g_variant = "";
/* Microseconds from one response to the next request in the latency phase
 * of measure_ring (0: back to back); a realtime source's cadence. */
static double g_gap_us = 0;

/* One in flight, then all slots in flight, over a ring. */
static double measure_ring(const char *base, cudaq_ringbuffer_t *rb, uint32_t slots, uint32_t payload, uint64_t n) {
  char name[160];
  snprintf(name, sizeof name, "%s%s", base, g_variant);
  std::vector<uint8_t> buf(payload + 1, 0x5A);
  std::vector<uint64_t> lat(n);
  uint64_t tnext = 0;
  for (uint64_t w = 0; w < 2000 + n; ++w) { /* 2000 warm-up requests */
    uint32_t slot = (uint32_t)(w % slots);
    while (now_ns() < tnext) {
    }
    uint64_t t0 = now_ns();
    cudaq_host_ringbuffer_write_rpc_request(rb, slot, FN_ECHO, buf.data(), payload, (uint32_t)w, t0);
    cudaq_host_ringbuffer_signal_slot(rb, slot);
    cudaq_tx_status_t st;
    uint64_t tw = now_ns();
    uint32_t spins = 0;
    /* The clock read only every 4,096 polls (one per poll, 43 ns on the
     * H200, made no measurable difference: kept off the loop anyway). */
    while ((st = cudaq_host_ringbuffer_poll_tx_flag(rb, slot, NULL)) != CUDAQ_TX_READY) {
      if ((++spins & 4095u) == 0 && now_ns() - tw > 5000000000ull) {
        fprintf(stderr, "%s: no response after 5 s (status %d)\n", name, (int)st);
        exit(1);
      }
    }
    const cudaq_rpc_response_t *r = (const cudaq_rpc_response_t *)(rb->tx_data_host + (size_t)slot * rb->tx_stride_sz);
    if (r->request_id != (uint32_t)w || r->status != 0) {
      fprintf(stderr, "%s: bad response to %llu\n", name, (unsigned long long)w);
      exit(1);
    }
    cudaq_host_ringbuffer_clear_slot(rb, slot);
    const uint64_t t1 = now_ns();
    /* The echo itself, checked off the timed path (the slot is not reused
     * before the next request is written). */
    if (r->result_len != payload || memcmp((const uint8_t *)r + CUDAQ_RPC_HEADER_SIZE, buf.data(), payload)) {
      fprintf(stderr, "%s: wrong echo for request %llu (%u bytes)\n", name, (unsigned long long)w, r->result_len);
      exit(1);
    }
    if (w >= 2000) lat[w - 2000] = t1 - t0;
    tnext = t1 + (uint64_t)(g_gap_us * 1000.0);
  }
  double p50;
  report(name, lat, &p50);
  uint64_t t0 = now_ns();
  /* Slots continue in ring order from the latency phase (the graph
   * dispatcher serves them in that order). */
  const uint64_t first_slot = (2000 + n) % slots;
  for (uint64_t k = 0; k < n + slots; ++k) {
    uint32_t slot = (uint32_t)((first_slot + k) % slots);
    if (k >= slots) {
      uint64_t tw = now_ns();
      while (cudaq_host_ringbuffer_poll_tx_flag(rb, slot, NULL) != CUDAQ_TX_READY)
        if (now_ns() - tw > 5000000000ull) {
          printf("%-46s throughput phase: no response in slot %u after 5 s (request %llu); stopped\n", "", slot,
                 (unsigned long long)(k - slots));
          return p50;
        }
      cudaq_host_ringbuffer_clear_slot(rb, slot);
    }
    if (k >= n) continue;
    {
      uint64_t tw = now_ns();
      while (!cudaq_host_ringbuffer_slot_available(rb, slot))
        if (now_ns() - tw > 5000000000ull) {
          printf("%-46s throughput phase: slot %u never free after 5 s; stopped\n", "", slot);
          return p50;
        }
    }
    cudaq_host_ringbuffer_write_rpc_request(rb, slot, FN_ECHO, buf.data(), payload, (uint32_t)k, 0);
    cudaq_host_ringbuffer_signal_slot(rb, slot);
  }
  double secs = (double)(now_ns() - t0) / 1e9;
  printf("%-46s throughput %.0f requests/s with %u slots in flight\n", "", (double)n / secs, slots);
  return p50;
}

/* --call-profile's clock marks (the dispatch loop's: call_by_pointer::mark;
 * the minimal kernel's: 0 found, 4 answered), for the first PROF_N
 * requests of a run. */
constexpr uint32_t PROF_N = 8192, PROF_MARKS = 8;
__device__ unsigned long long g_prof[PROF_N][PROF_MARKS];
__device__ uint32_t g_prof_req;

/* The device-call protocol on the dispatcher's ring, with nothing else: one
 * warp, slots in ring order; lane 0 polls the RX flag (fence before each
 * poll; on a ring with header completion the warp polls the slot's first
 * line with it, and the magic word and RX are cleared before the answer's
 * release, no marker); the warp reads the slot's first 128 bytes (header and payload);
 * lane 0 stores the in-flight marker and clears RX (release) while the read
 * is in flight; the warp writes the response header and echoes the payload
 * (4-byte words) into the TX slot; lane 0 publishes the TX flag (release).
 * Driven by measure_ring (the same host loop as the device-call rows), it
 * separates what the dispatcher's own code costs from what the protocol and
 * the host side do. Payloads up to 104 bytes; stops on *stop. */
__device__ inline uint32_t floor_smid() {
  uint32_t id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}
/* want_sm >= 0 (--sm-sweep): launched as one block per SM, only the block
 * on SM want_sm serves; *where: the SM that served. */
__global__ void min_dispatch(cudaq_ringbuffer_t rb, uint32_t slots, const volatile int *stop, int want_sm,
                             int *where, int prof = 0) {
  const uint32_t lane = threadIdx.x & 31u;
  if (want_sm >= 0 && floor_smid() != (uint32_t)want_sm) return;
  if (lane == 0) *where = (int)floor_smid();
  const bool header = rb.completion == CUDAQ_RX_COMPLETION_HEADER;
  for (uint32_t slot = 0, it = 0;; slot = slot + 1 == slots ? 0 : slot + 1) {
    uint32_t go = 0, v = 0, rx_seen = 0;
    const uint32_t *rq = (const uint32_t *)(rb.rx_data + (size_t)slot * rb.rx_stride_sz);
    cuda::atomic_ref<uint64_t, cuda::thread_scope_system> rxf(((uint64_t *)rb.rx_flags)[slot]);
    while (!go) {
      if (header) {
        /* Header completion: the line and RX together (dispatch_loop.cuh's
         * poll, without its bad-request path). */
        __threadfence_system();
        v = ((const volatile uint32_t *)rq)[lane];
        const uint32_t f = lane == 0 && rxf.load(cuda::memory_order_acquire) != 0;
        rx_seen = __shfl_sync(0xFFFFFFFFu, f, 0);
        go = __shfl_sync(0xFFFFFFFFu, v, 0) == CUDAQ_RPC_MAGIC_REQUEST;
        if (!go && lane == 0 && (++it & 63u) == 0 && *stop) go = 2;
      } else if (lane == 0) {
        if ((++it & 63u) == 0 && *stop) go = 2;
        else {
          __threadfence_system();
          go = rxf.load(cuda::memory_order_acquire) != 0; /* pairs with the host's signal (R1) */
        }
      }
      go = __shfl_sync(0xFFFFFFFFu, go, 0);
    }
    if (go == 2) return;
    unsigned long long t_found = prof ? clock64() : 0;
    __syncwarp();
    if (!header) v = 4u * lane < rb.rx_stride_sz ? rq[lane] : 0u; /* the slot's first 128 bytes at most */
    if (header && lane == 0) {
      /* Magic consumed, RX cleared once seen, both before the answer's release. */
      cuda::atomic_ref<uint32_t, cuda::thread_scope_system>(*(uint32_t *)rq).store(CUDAQ_RPC_SLOT_CONSUMED,
                                                                                   cuda::memory_order_relaxed);
      while (!rx_seen && rxf.load(cuda::memory_order_acquire) == 0) {}
      rxf.store(0, cuda::memory_order_relaxed);
    } else if (lane == 0) {
      cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(((uint64_t *)rb.tx_flags)[slot])
          .store(CUDAQ_TX_FLAG_IN_FLIGHT, cuda::memory_order_relaxed);
      cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(((uint64_t *)rb.rx_flags)[slot])
          .store(0, cuda::memory_order_release);
    }
    const uint32_t arg_len = __shfl_sync(0xFFFFFFFFu, v, 2);
    const uint32_t request_id = __shfl_sync(0xFFFFFFFFu, v, 3);
    uint32_t *tx = (uint32_t *)(rb.tx_data + (size_t)slot * rb.tx_stride_sz);
    uint32_t w = v; /* words 6.. : the payload, echoed */
    if (lane == 0) w = CUDAQ_RPC_MAGIC_RESPONSE;
    else if (lane == 1) w = 0;
    else if (lane == 2) w = arg_len;
    else if (lane == 3) w = request_id;
    if (lane < 6 + (arg_len + 3) / 4) tx[lane] = w;
    __syncwarp();
    if (lane == 0) /* publishes the response; pairs with the host's acquire (A2) */
      cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(((uint64_t *)rb.tx_flags)[slot])
          .store((uint64_t)(uintptr_t)tx, cuda::memory_order_release);
    if (prof && lane == 0) { /* after the answer: off the measured path */
      const unsigned long long t_answered = clock64();
      const uint32_t r = g_prof_req;
      if (r < PROF_N) {
        g_prof[r][0] = t_found;
        g_prof[r][4] = t_answered;
      }
      g_prof_req = r + 1;
    }
  }
}

/* Runs the minimal kernel over ring rb (one block, or with want_sm >= 0
 * one block per SM, the one on SM want_sm serving) through measure_ring,
 * then stops it; prints the SM that served. */
static void print_profile(bool loop_marks);
static double run_min_on_ring(cudaq_ringbuffer_t *rb, uint32_t slots, uint32_t payload, uint64_t n, int want_sm,
                              const char *name, bool prof = false) {
  if (payload > 104) {
    printf("%-46s skipped: the minimal kernel echoes payloads of at most 104 bytes\n", name);
    return 0;
  }
  int *stop, *where;
  CK(cudaMalloc(&stop, sizeof(int)));
  CK(cudaMallocManaged(&where, sizeof(int)));
  *where = -1;
  CQ(cudaq_dispatch_set_shutdown_flag(stop, 0));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  if (want_sm < 0) {
    if (prof) {
      const uint32_t zero = 0;
      CK(cudaMemcpyToSymbol(g_prof_req, &zero, sizeof zero));
      n = n < PROF_N ? n : PROF_N - 2000;
    }
    min_dispatch<<<1, 32, 0, s>>>(*rb, slots, stop, -1, where, prof ? 1 : 0);
  } else {
    /* One block per SM: each asks for more than half an SM's shared memory. */
    int sms = 0, smem = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    CK(cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
    CK(cudaFuncSetAttribute(min_dispatch, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    min_dispatch<<<sms, 32, smem, s>>>(*rb, slots, stop, want_sm, where);
  }
  CK(cudaGetLastError());
  double p50 = measure_ring(name, rb, slots, payload, n);
  printf("%-46s served by SM %d\n", "", *(volatile int *)where);
  CQ(cudaq_dispatch_set_shutdown_flag(stop, 1));
  CK(cudaStreamSynchronize(s));
  if (prof) print_profile(false);
  CK(cudaStreamDestroy(s));
  CK(cudaFree(stop));
  CK(cudaFree(where));
  return p50;
}

static double bench_min_dispatch(uint32_t payload, uint64_t n, uint32_t slots = 32, int want_sm = -1,
                                 bool header = false, bool prof = false) {
  const uint32_t slot_size = bench_slot_size(payload, header);
  cudaq_ringbuffer_t rb;
  CQ(cudaq_host_ringbuffer_alloc(&rb, slots, slot_size,
                                 CUDAQ_RING_ALLOC_MAPPED | (header ? CUDAQ_RING_ALLOC_HEADER_COMPLETION : 0u)));
  char name[80];
  if (header)
    snprintf(name, sizeof name, "header protocol on the ring (minimal kernel%s), %u slots", prof ? ", profiled" : "",
             slots);
  else if (want_sm < 0)
    snprintf(name, sizeof name, "protocol on the ring (minimal kernel), %u slot%s", slots, slots > 1 ? "s" : "");
  else
    snprintf(name, sizeof name, "protocol on the ring, %u slots, on SM %d", slots, want_sm);
  double p50 = run_min_on_ring(&rb, slots, payload, n, want_sm, name, prof);
  CQ(cudaq_host_ringbuffer_free(&rb));
  return p50;
}

/* The regular device-call kernel with the echo handler compiled into the
 * loop (no call through the entry's function pointer), as the NN device
 * program runs its handler: shows what the indirect call costs. */
struct echo_inline : call_by_pointer {
  static __device__ __forceinline__ bool inline_call(cudaq_device_rpc_fn_t fn) { return fn == bench_d_echo; }
  static __device__ __forceinline__ int32_t call(const void *a, void *r, uint32_t len, uint32_t max, uint32_t *rl) {
    return bench_d_echo(a, r, len, max, rl);
  }
};
__global__ void dispatch_regular_echo_inline(cudaq__dispatch_params p) { dispatch_loop<false, echo_inline>(p); }

/* --call-profile: the same kernel recording the leader's clock at the
 * loop's marks (call_by_pointer::mark) for the first PROF_N requests. */
struct echo_profiled : echo_inline {
  /* The clock first, kept in shared memory; the request's marks go to
   * device memory after the last one (off the measured intervals). */
  static __device__ __forceinline__ void mark(uint32_t k) {
    __shared__ unsigned long long ts[PROF_MARKS];
    ts[k] = clock64();
    if (k == 4) { /* the last mark of a request */
      const uint32_t r = g_prof_req;
      if (r < PROF_N)
        for (uint32_t j = 0; j < PROF_MARKS; ++j) g_prof[r][j] = ts[j];
      g_prof_req = r + 1;
    }
  }
};
__global__ void dispatch_regular_echo_profiled(cudaq__dispatch_params p) { dispatch_loop<false, echo_profiled>(p); }

/* Prints the median (p90) cycles between the clock marks recorded in
 * g_prof for requests 2000.. (the warm-up excluded): every mark of the
 * dispatch loop (loop_marks), or the minimal kernel's two; and from each
 * answer to the next request's find. */
static void print_profile(bool loop_marks) {
  static unsigned long long h[PROF_N][PROF_MARKS];
  CK(cudaMemcpyFromSymbol(h, g_prof, sizeof h));
  /* The marks in path order (call_by_pointer::mark). */
  const uint32_t loop_order[PROF_MARKS] = {0, 5, 6, 1, 2, 3, 7, 4}, min_order[2] = {0, 4};
  const char *loop_names[PROF_MARKS - 1] = {"found -> flags given back", "-> parsed", "-> broadcast", "-> staged",
                                            "-> handler done", "-> header written", "-> answered"};
  const char *min_names[1] = {"found -> answered"};
  const uint32_t *order = loop_marks ? loop_order : min_order;
  const char **names = loop_marks ? loop_names : min_names;
  const uint32_t marks = loop_marks ? PROF_MARKS : 2;
  printf("%-46s median cycles (p90) between the loop's marks, requests 2000..%u:", "", PROF_N - 1);
  for (uint32_t k = 0; k + 1 < marks; ++k) {
    std::vector<uint64_t> d;
    for (uint32_t r = 2000; r < PROF_N; ++r)
      if (h[r][order[k + 1]] >= h[r][order[k]]) d.push_back(h[r][order[k + 1]] - h[r][order[k]]);
    std::sort(d.begin(), d.end());
    if (!d.empty()) printf(" %s %llu (%llu);", names[k], (unsigned long long)d[d.size() / 2],
                           (unsigned long long)d[d.size() * 9 / 10]);
  }
  /* From the answer to the next request's find: the host's part and the polls. */
  std::vector<uint64_t> d;
  for (uint32_t r = 2000; r + 1 < PROF_N; ++r)
    if (h[r + 1][0] > h[r][4]) d.push_back(h[r + 1][0] - h[r][4]);
  std::sort(d.begin(), d.end());
  if (!d.empty()) printf(" answered -> next found %llu (%llu)", (unsigned long long)d[d.size() / 2],
                         (unsigned long long)d[d.size() * 9 / 10]);
  printf("\n");
}

/* The profiled kernel launched directly over a ring with header completion
 * (or the flag protocol), the rows' host loop, then the median cycles
 * between marks over the requests after the warm-up. */
static void bench_call_profile(uint32_t payload, uint64_t n, bool header) {
  const uint32_t slots = 32;
  const uint32_t slot_size = bench_slot_size(payload, true); /* the same for both rings */
  cudaq_ringbuffer_t rb;
  CQ(cudaq_host_ringbuffer_alloc(&rb, slots, slot_size,
                                 CUDAQ_RING_ALLOC_MAPPED | (header ? CUDAQ_RING_ALLOC_HEADER_COMPLETION : 0u)));
  cudaq_function_entry_t *t = bench_echo_table();
  int *flag;
  uint64_t *stats;
  CK(cudaMalloc(&flag, sizeof(int)));
  CQ(cudaq_dispatch_set_shutdown_flag(flag, 0));
  CK(cudaMalloc(&stats, sizeof(uint64_t)));
  CK(cudaMemset(stats, 0, sizeof(uint64_t)));
  const uint32_t zero = 0;
  CK(cudaMemcpyToSymbol(g_prof_req, &zero, sizeof zero));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaq__dispatch_params p;
  if (!cudaq__dispatch_prepare(false, rb.rx_flags, rb.tx_flags, rb.rx_data, rb.tx_data, rb.rx_stride_sz,
                               rb.tx_stride_sz, t, 1, flag, stats, slots, 1, 32, nullptr, &p)) {
    fprintf(stderr, "profile: prepare refused the launch\n");
    exit(1);
  }
  if (!cudaq__dispatch_set_completion(&p, rb.completion)) {
    fprintf(stderr, "profile: the ring's completion was refused\n");
    exit(1);
  }
  cudaq__regular_launch(dispatch_regular_echo_profiled, p, 1, 32, s);
  CK(cudaGetLastError());
  measure_ring(header ? "profiled loop, header completion" : "profiled loop, flag protocol", &rb, slots, payload,
               n < PROF_N ? n : PROF_N - 2000);
  CQ(cudaq_dispatch_set_shutdown_flag(flag, 1));
  CK(cudaStreamSynchronize(s));
  print_profile(true);
  CK(cudaStreamDestroy(s));
  CK(cudaFree(t));
  CK(cudaFree(flag));
  CK(cudaFree(stats));
  CQ(cudaq_host_ringbuffer_free(&rb));
}
static void launch_echo_inline(volatile uint64_t *rx_flags, volatile uint64_t *tx_flags, uint8_t *rx_data,
                               uint8_t *tx_data, size_t rx_stride_sz, size_t tx_stride_sz,
                               cudaq_function_entry_t *table, size_t count, volatile int *shutdown_flag,
                               uint64_t *stats, size_t num_slots, uint32_t num_blocks, uint32_t threads,
                               cudaStream_t stream) {
  cudaq__dispatch_params p;
  if (cudaq__dispatch_prepare(false, rx_flags, tx_flags, rx_data, tx_data, rx_stride_sz, tx_stride_sz, table, count,
                              shutdown_flag, stats, num_slots, num_blocks, threads, nullptr, &p))
    cudaq__regular_launch(dispatch_regular_echo_inline, p, num_blocks, threads, stream);
}

/* header: a ring with header completion (slots rounded up to 128-byte
 * lines), served by the library's regular kernel. */
static double bench_device_call(bool coop, uint32_t payload, uint64_t n, bool inline_echo = false,
                                bool header = false, bool words = false) {
  const uint32_t slots = 32;
  const uint32_t slot_size = bench_slot_size(payload, header);
  int occ;
  CK(coop ? cudaq_dispatch_kernel_cooperative_query_occupancy(&occ, 32) : cudaq_dispatch_kernel_query_occupancy(&occ, 32));
  bench_device_echo e;
  bench_device_echo_start(&e, slots, slot_size, coop, coop ? 2 : 1, inline_echo ? launch_echo_inline : nullptr,
                          header ? CUDAQ_RING_ALLOC_HEADER_COMPLETION : 0u, words);
  char name[96];
  snprintf(name, sizeof name, "%s%s",
           coop           ? "device-call cooperative (2x32) round trip"
           : inline_echo ? "device-call regular, handler inline"
           : header      ? "device-call regular, header completion"
                         : "device-call regular (1x32) round trip",
           words ? ", echo by words" : "");
  double p50 = measure_ring(name, &e.rb, slots, payload, n);
  bench_device_echo_stop(&e, NULL);
  return p50;
}

/* prelaunch: the handler graph is launched ahead of its request and waits
 * at the gate (graph_echo_gated); with instances > 1, that many
 * instantiations over I/O contexts of their own take turns
 * (cudaq_dispatch_graph_add_prelaunch_instance). */
static double bench_graph(uint32_t payload, uint64_t n, bool prelaunch = false, uint32_t instances = 1) {
  const uint32_t slots = 32, slot_size = bench_slot_size(payload, false);
  cudaq_ringbuffer_t rb;
  CQ(cudaq_host_ringbuffer_alloc(&rb, slots, slot_size, CUDAQ_RING_ALLOC_MAPPED));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaq_graph_io_context *ios[CUDAQ_GRAPH_PRELAUNCH_MAX_INSTANCES];
  cudaGraph_t gs[CUDAQ_GRAPH_PRELAUNCH_MAX_INSTANCES];
  cudaGraphExec_t ges[CUDAQ_GRAPH_PRELAUNCH_MAX_INSTANCES];
  if (!prelaunch || instances < 1) instances = 1;
  for (uint32_t k = 0; k < instances; ++k) {
    CK(cudaMalloc(&ios[k], sizeof *ios[k]));
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    if (prelaunch) graph_echo_gated<<<1, 32, 0, s>>>(ios[k]);
    else graph_echo<<<1, 32, 0, s>>>(ios[k]);
    CK(cudaStreamEndCapture(s, &gs[k]));
    CK(cudaGraphInstantiateWithFlags(&ges[k], gs[k], cudaGraphInstantiateFlagDeviceLaunch));
    CK(cudaGraphUpload(ges[k], s));
  }
  CK(cudaStreamSynchronize(s));
  cudaq_graph_io_context *io = ios[0];
  cudaq_function_entry_t h;
  memset(&h, 0, sizeof h);
  h.handler.graph_exec = ges[0];
  h.function_id = FN_ECHO;
  h.dispatch_mode = CUDAQ_DISPATCH_GRAPH_LAUNCH;
  cudaq_function_entry_t *dt;
  CK(cudaMalloc(&dt, sizeof h));
  CK(cudaMemcpy(dt, &h, sizeof h, cudaMemcpyHostToDevice));
  int *flag;
  uint64_t *stats;
  CK(cudaMalloc(&flag, sizeof(int)));
  CQ(cudaq_dispatch_set_shutdown_flag(flag, 0)); /* never through a stream a kernel may occupy */
  CK(cudaMalloc(&stats, sizeof(uint64_t)));
  cudaq_dispatch_graph_context *ctx;
  CK(cudaq_create_dispatch_graph_regular(rb.rx_flags, rb.tx_flags, rb.rx_data, rb.tx_data, rb.rx_stride_sz, rb.tx_stride_sz,
                                         dt, 1, io, flag, stats, slots, 1, 32, s, &ctx));
  if (prelaunch) CK(cudaq_dispatch_graph_set_prelaunch(ctx, FN_ECHO));
  for (uint32_t k = 1; k < instances; ++k) CK(cudaq_dispatch_graph_add_prelaunch_instance(ctx, ges[k], ios[k]));
  CK(cudaq_launch_dispatch_graph(ctx, s));
  char name[96], inst[24] = "";
  if (instances > 1) snprintf(inst, sizeof inst, " x%u", instances);
  snprintf(name, sizeof name, "graph-launch%s%s%s round trip", prelaunch ? ", pre-launched" : " (device-side)", inst,
           g_gap_us > 0 ? ", paced" : "");
  double p50 = measure_ring(name, &rb, slots, payload, n);
  uint64_t failures = 0, relaunches = 0, hits = 0, cancelled = 0;
  CK(cudaq_dispatch_graph_get_info(ctx, &failures, &relaunches));
  CK(cudaq_dispatch_graph_get_prelaunch_info(ctx, &hits, &cancelled, nullptr));
  printf("%-46s %llu dispatcher relaunches (one per %u graph launches), %llu launch failures, %llu served pre-launched\n",
         "", (unsigned long long)relaunches, CUDAQ_GRAPH_DISPATCH_RELAUNCH_EVERY, (unsigned long long)failures,
         (unsigned long long)hits);
  /* The dispatch graph occupies `s` until it exits: the flag is raised
   * without queueing anything on `s` (a copy queued there would wait for
   * the graph forever). */
  CQ(cudaq_dispatch_set_shutdown_flag(flag, 1));
  CK(cudaStreamSynchronize(s));
  CK(cudaq_destroy_dispatch_graph(ctx));
  for (uint32_t k = 0; k < instances; ++k) {
    CK(cudaGraphExecDestroy(ges[k]));
    CK(cudaGraphDestroy(gs[k]));
    CK(cudaFree(ios[k]));
  }
  CK(cudaFree(dt));
  CK(cudaFree(flag));
  CK(cudaFree(stats));
  CK(cudaStreamDestroy(s));
  CQ(cudaq_host_ringbuffer_free(&rb));
  return p50;
}

static double bench_unified(uint32_t payload, uint64_t n) {
  cudaq_emu_transport_t *t;
  CQ(cudaq_emu_transport_create(32, bench_slot_size(payload, false), &t));
  cudaq_dispatch_manager_t *m;
  cudaq_dispatcher_t *d;
  cudaq_dispatcher_config_t c;
  cudaq_dispatcher_config_init(&c);
  c.kernel_type = CUDAQ_KERNEL_UNIFIED;
  cudaq_function_entry_t *dt;
  CK(cudaMalloc(&dt, sizeof *dt));
  bench_init_echo_table<<<1, 1>>>(dt);
  CK(cudaDeviceSynchronize());
  int *flag;
  uint64_t *stats;
  CK(cudaMalloc(&flag, sizeof(int)));
  CK(cudaMalloc(&stats, sizeof(uint64_t)));
  cudaq_function_table_t table = {dt, 1};
  CQ(cudaq_dispatch_manager_create(&m));
  CQ(cudaq_dispatcher_create(m, &c, &d));
  CQ(cudaq_dispatcher_set_unified_launch(d, cudaq_launch_unified_dispatch_emu, cudaq_emu_transport_ctx(t)));
  CQ(cudaq_dispatcher_set_function_table(d, &table));
  CQ(cudaq_dispatcher_set_control(d, flag, stats));
  CQ(cudaq_dispatcher_start(d));
  std::vector<uint8_t> buf(payload + 1, 0x33);
  std::vector<uint64_t> lat(n);
  for (uint64_t w = 0; w < n + 2000; ++w) {
    uint64_t t0 = now_ns();
    CQ(cudaq_emu_nic_send(t, FN_ECHO, buf.data(), payload, (uint32_t)w, t0));
    const uint8_t *f;
    uint64_t tw = now_ns();
    while (!(f = cudaq_emu_nic_poll(t)))
      if (now_ns() - tw > 5000000000ull) {
        fprintf(stderr, "unified: no response\n");
        exit(1);
      }
    if (((const cudaq_rpc_response_t *)f)->request_id != (uint32_t)w) {
      fprintf(stderr, "unified: bad response\n");
      exit(1);
    }
    cudaq_emu_nic_release(t);
    if (w >= 2000) lat[w - 2000] = now_ns() - t0;
  }
  double p50;
  report("unified (emulated NIC) round trip", lat, &p50);
  uint64_t sent = 0, got = 0, t0 = now_ns();
  uint64_t tlast = now_ns();
  while (got < n) {
    if (now_ns() - tlast > 5000000000ull) {
      printf("unified throughput: stalled at %llu of %llu\n", (unsigned long long)got, (unsigned long long)n);
      break;
    }
    if (sent < n && cudaq_emu_nic_send(t, FN_ECHO, buf.data(), payload, (uint32_t)sent, 0) == CUDAQ_OK) ++sent;
    if (cudaq_emu_nic_poll(t)) {
      cudaq_emu_nic_release(t);
      ++got;
      tlast = now_ns();
    }
  }
  printf("%-46s throughput %.0f requests/s with 32 frames in flight\n", "", (double)n / ((now_ns() - t0) / 1e9));
  CQ(cudaq_dispatcher_stop(d));
  CQ(cudaq_dispatch_manager_destroy(m));
  CQ(cudaq_emu_transport_destroy(t));
  CK(cudaFree(dt));
  CK(cudaFree(flag));
  CK(cudaFree(stats));
  return p50;
}

int main(int argc, char **argv) {
  uint64_t n = 100000;
  uint32_t payload = 64;
  int cpu = 2, ab_rounds = 0, call_rounds = 0, only_call = 0, call_inline = 0, call_header = 0, call_profile = 0,
      sm_sweep = 0;
  double interval = 20.0;
  std::vector<const char *> call_envs;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--requests") && i + 1 < argc) n = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--payload") && i + 1 < argc) payload = (uint32_t)atoi(argv[++i]);
    else if (!strcmp(argv[i], "--cpu") && i + 1 < argc) cpu = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--ab") && i + 1 < argc) ab_rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--call-rounds") && i + 1 < argc) call_rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--call-env") && i + 1 < argc) call_envs.push_back(argv[++i]);
    else if (!strcmp(argv[i], "--only-call")) only_call = 1;
    else if (!strcmp(argv[i], "--call-inline")) call_inline = 1;
    else if (!strcmp(argv[i], "--call-header")) call_header = 1;
    else if (!strcmp(argv[i], "--call-profile")) call_profile = 1;
    else if (!strcmp(argv[i], "--sm-sweep") && i + 1 < argc) sm_sweep = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--interval") && i + 1 < argc) interval = atof(argv[++i]);
    else {
      fprintf(stderr,
              "usage: %s [--requests N] [--payload BYTES] [--cpu C] [--ab ROUNDS]\n"
              "          [--call-rounds ROUNDS --call-env NAME=VALUE[,NAME=VALUE]...]... [--only-call] [--call-inline]\n"
              "          [--call-header] [--call-profile]\n"
              "          [--interval US]\n"
              "  --ab ROUNDS         graph launch with and without the staged copy, interleaved\n"
              "  --call-rounds R     device-call (regular) once per --call-env setting (\"\" = as is), R rounds\n"
              "  --only-call         only the floors and the --call-rounds rows\n"
              "  --sm-sweep STEP     the protocol alone on the ring served from SM 0, STEP, 2 STEP, ... (twice)\n"
              "  --call-inline       each --call-rounds row again with the echo compiled into the loop, and the\n"
              "                      protocol alone on the ring (a minimal one-warp kernel; 32, 1, 2 slots)\n"
              "  --call-header       each --call-rounds row again over a ring with header completion, and with\n"
              "                      an echo handler that copies words (flag and header rings)\n"
              "  --call-profile      per --call-rounds round, the loop's cycles between its marks (flag and\n"
              "                      header rings, the echo compiled in)\n"
              "  --interval US       the paced graph-launch rows: one request US after each response (default 20)\n",
              argv[0]);
      return 2;
    }
  }
  if (n < 4) {
    fprintf(stderr, "%s: --requests must be at least 4 (some rows run n / 4)\n", argv[0]);
    return 2;
  }
  BENCH_EXIT_IF_NO_GPU();
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set); /* the producer thread */
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  int native = 0;
  cudaDeviceGetAttribute(&native, cudaDevAttrHostNativeAtomicSupported, 0);
  printf("GPU dispatch benchmark: %s, hostNativeAtomicSupported=%d, %llu requests, %u-byte payload, host thread on CPU %d\n",
         prop.name, native, (unsigned long long)n, payload, cpu);
  {
    const uint64_t c0 = now_ns();
    uint64_t x = 0;
    for (int k = 0; k < 100000; ++k) x += now_ns();
    printf("clock_gettime(CLOCK_MONOTONIC): %.1f ns a call (%llu)\n", (double)(now_ns() - c0) / 100000.0,
           (unsigned long long)(x & 1));
  }
  run_floor<true, 0, 0, 0, true>(n, "bare floor: volatile echo, fence before poll");
  double floor_plain = run_floor<false>(n, "floor: host <-> persistent kernel (mapped)");
  double floor_fenced = run_floor<true>(n, "floor: same, fence before each device poll");
  /* What each piece of a dispatcher's work costs on top of the floor. */
  run_floor<true, 1, 0>(n / 4, "floor (fenced) + 1 dependent host read");
  run_floor<true, 2, 0>(n / 4, "floor (fenced) + 2 dependent host reads");
  run_floor<true, 0, 1>(n / 4, "floor (fenced) + 1 release store");
  run_floor<true, 0, 2>(n / 4, "floor (fenced) + 2 release stores");
  /* The device-call's flag work: a read, the in-flight marker, the RX
   * clear (release), the answer (release); the marker after or before the
   * read. */
  run_floor<true, 1, 1, 1>(n / 4, "floor (fenced) + read, marker, release");
  run_floor<true, 1, 1, 2>(n / 4, "floor (fenced) + marker, read, release");
  /* The same reads of lines the host has just written (a request). */
  run_floor<true, 1, 0, 0, false, true>(n / 4, "floor (fenced) + 1 read, host-written line");
  run_floor<true, 1, 1, 1, false, true>(n / 4, "floor + read, marker, release, host-written");
  /* The marker and the release while the read is in flight. */
  run_floor<true, 1, 1, 3>(n / 4, "floor (fenced) + read || marker, release");
  /* Several pollers, staggered. */
  run_floor_multi(n / 4, 1, 0, "floor (fenced), 1 polling warp (kernel below)");
  run_floor_multi(n / 4, 2, 400, "floor (fenced), 2 polling warps 400 ns apart");
  run_floor_multi(n / 4, 4, 200, "floor (fenced), 4 polling warps 200 ns apart");
  run_floor_multi(n / 4, 8, 100, "floor (fenced), 8 polling warps 100 ns apart");
  /* The device-call protocol alone, one warp, 88-byte request and response. */
  run_floor_proto<0>(n / 4, "protocol floor (warp): read, marker, RX, answer");
  run_floor_proto<1>(n / 4, "protocol floor (warp): read || marker, RX, answer");
  /* Header completion: the request seen in its line with the flag. */
  run_floor_line<0>(n / 4, "header floor (warp): line, answer + clears, 1 fence");
  run_floor_line<1>(n / 4, "header floor (warp): line, marker, RX, answer");
  if (call_rounds > 0) {
    if (call_envs.empty()) call_envs.push_back("");
    for (int round = 1; round <= call_rounds; ++round) {
      /* --call-inline: the protocol alone on the ring once a round (its
       * kernel takes no switch), then each setting's rows. */
      if (call_inline)
        for (uint32_t slots : {32u, 1u, 2u}) bench_min_dispatch(payload, n, slots);
      for (const char *spec : call_envs) {
        /* Set each NAME=VALUE of the spec, run, then unset them. */
        std::vector<std::string> names;
        std::string all(spec);
        for (size_t at = 0; at < all.size();) {
          size_t end = all.find(',', at);
          if (end == std::string::npos) end = all.size();
          std::string kv = all.substr(at, end - at);
          size_t eq = kv.find('=');
          if (eq == std::string::npos || eq == 0) {
            fprintf(stderr, "--call-env: '%s' is not NAME=VALUE\n", kv.c_str());
            return 2;
          }
          names.push_back(kv.substr(0, eq));
          setenv(names.back().c_str(), kv.substr(eq + 1).c_str(), 1);
          at = end + 1;
        }
        std::string v = std::string(" [") + (spec[0] ? spec : "as is") + "]";
        g_variant = v.c_str();
        bench_device_call(false, payload, n);
        if (call_inline) bench_device_call(false, payload, n, true);
        if (call_profile) {
          bench_call_profile(payload, n, false);
          bench_call_profile(payload, n, true);
        }
        if (call_header) {
          bench_min_dispatch(payload, n, 32, -1, true);
          if (call_profile) bench_min_dispatch(payload, n, 32, -1, true, true);
          bench_device_call(false, payload, n, false, true);
          /* The handler's stores: the echo by words (flag and header rings). */
          bench_device_call(false, payload, n, false, false, true);
          bench_device_call(false, payload, n, false, true, true);
        }
        g_variant = "";
        for (const std::string &nm : names) unsetenv(nm.c_str());
      }
    }
  }
  if (sm_sweep > 0) {
    /* Does the serving SM decide the round trip? Every SM STEP apart, two
     * passes (each row a new ring). */
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    for (int pass = 0; pass < 2; ++pass)
      for (int sm = 0; sm < sms; sm += sm_sweep) bench_min_dispatch(payload, n / 4, 32, sm);
  }
  if (only_call) return 0;
  double reg = bench_device_call(false, payload, n);
  double coop = bench_device_call(true, payload, n);
  double graph = bench_graph(payload, n);
  /* The handler graph launched ahead of its request (pre-launch), alone and
   * as two instances taking turns, back to back and paced; the paced
   * on-arrival row beside them. */
  bench_graph(payload, n, true);
  bench_graph(payload, n, true, 2);
  bench_graph(payload, n, true, 3);
  if (interval > 0) {
    g_gap_us = interval;
    bench_graph(payload, n / 4);
    bench_graph(payload, n / 4, true);
    bench_graph(payload, n / 4, true, 2);
    bench_graph(payload, n / 4, true, 3);
    g_gap_us = 0;
  }
  double uni = bench_unified(payload, n);
  /* --ab: the graph-launch path with and without the request staged in
   * device memory by the dispatcher (CUDAQ_DISPATCH_NO_STAGE=1, read at
   * launch: the graph reads the RX slot), interleaved rounds in this run. */
  for (int round = 1; round <= ab_rounds; ++round) {
    for (const char *nostage : {"0", "1"}) {
      setenv("CUDAQ_DISPATCH_NO_STAGE", nostage, 1);
      g_variant = nostage[0] == '1' ? " [no staging]" : " [default]";
      bench_graph(payload, n);
    }
    g_variant = "";
    unsetenv("CUDAQ_DISPATCH_NO_STAGE");
  }
  double best_floor = floor_plain < floor_fenced ? floor_plain : floor_fenced;
  printf("p50 / best floor: device-call regular %.2fx, cooperative %.2fx, graph-launch %.2fx, unified %.2fx (target: device-call <= 1.5x)\n",
         reg / best_floor, coop / best_floor, graph / best_floor, uni / best_floor);
  return 0;
}
