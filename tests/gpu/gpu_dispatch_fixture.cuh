/*
 * gpu_dispatch_fixture.cuh - the device handlers, function table, fixture
 * and request helpers of test_gpu_dispatch.cu and test_graph_dispatch.cu
 * (included by each: one translation unit per test program).
 */
#ifndef CUDAQ_TESTS_GPU_DISPATCH_FIXTURE_CUH
#define CUDAQ_TESTS_GPU_DISPATCH_FIXTURE_CUH

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern "C" {
#include <cmocka.h>
}

#include "cudaq/realtime/cudaq_realtime.h"
#include "cudaq/realtime/dispatch_kernel.h"

namespace cg = cooperative_groups;

#define CK(x)                                                                         \
  do {                                                                                \
    cudaError_t e_ = (x);                                                             \
    if (e_ != cudaSuccess) fail_msg("%s: %s", #x, cudaGetErrorString(e_));            \
  } while (0)

static double g_scale = 1.0;
extern "C" void cudaq__dispatch_debug_dump(const uint64_t *stats);
extern "C" void cudaq__graph_debug_dump(cudaq_dispatch_graph_context *context);
static cudaq_dispatch_graph_context *g_graph; /* the running graph dispatcher, for diagnostics */
static const uint64_t *g_stats; /* the running dispatcher's stats, for diagnostics */
static uint64_t g_wait_ns = 5000000000ull;
static inline uint32_t scaled(uint32_t n) {
  uint32_t v = (uint32_t)(n * g_scale);
  return v < 8 ? 8 : v;
}

static inline uint64_t now_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* A test program's start: 1 without a CUDA device (the caller prints
 * nothing more and exits 77), else 0 after reading the environment:
 * CUDAQ_TEST_SCALE, CUDAQ_TEST_SLOW (sanitizer runs are slow),
 * CUDAQ_TEST_FILTER and CUDAQ_TEST_SKIP (tests to leave out, e.g. the
 * graph-launch tests under synccheck, which does not support device-side
 * launches and reports their barriers as divergent). */
static inline int gpu_test_init(void) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("skipped: no CUDA device\n");
    return 1;
  }
  const char *sc = getenv("CUDAQ_TEST_SCALE");
  if (sc) g_scale = atof(sc);
  if (getenv("CUDAQ_TEST_SLOW")) g_wait_ns = 60000000000ull;
  const char *filter = getenv("CUDAQ_TEST_FILTER");
  if (filter) cmocka_set_test_filter(filter);
  const char *skip = getenv("CUDAQ_TEST_SKIP");
  if (skip) cmocka_set_skip_filter(skip);
  CK(cudaSetDeviceFlags(cudaDeviceMapHost));
  return 0;
}

/* ---- device handlers ---------------------------------------------------- */
#define FN_ECHO cudaq_fnv1a_hash("echo")
#define FN_SUM cudaq_fnv1a_hash("sum32")
#define FN_FAIL cudaq_fnv1a_hash("fail_with_7")
#define FN_GREEDY cudaq_fnv1a_hash("claims_too_much")
#define FN_GRAPH_ONLY cudaq_fnv1a_hash("graph_only")
#define FN_BLOCK cudaq_fnv1a_hash("block_xor")
#define FN_SLOW cudaq_fnv1a_hash("slow_echo")
#define FN_GRID cudaq_fnv1a_hash("grid_sum")
#define FN_VAR cudaq_fnv1a_hash("var_echo") /* echo; schema: int32 + variable-size uint8 array */

/* Every thread of the block calls a handler; they share the work. */
__device__ int d_echo(const void *args, void *result, uint32_t arg_len, uint32_t max, uint32_t *len) {
  if (arg_len > max) return 1;
  const uint8_t *a = (const uint8_t *)args;
  uint8_t *r = (uint8_t *)result;
  for (uint32_t i = threadIdx.x; i < arg_len; i += blockDim.x) r[i] = a[i];
  *len = arg_len;
  return 0;
}
__device__ int d_sum(const void *args, void *result, uint32_t, uint32_t, uint32_t *len) {
  const int32_t *v = (const int32_t *)args;
  if (threadIdx.x == 0) {
    int32_t s = v[0] + v[1] + v[2] + v[3];
    memcpy(result, &s, 4);
  }
  *len = 4;
  return 0;
}
__device__ int d_fail(const void *, void *result, uint32_t, uint32_t, uint32_t *len) {
  if (threadIdx.x == 0) *(uint8_t *)result = 0xEE;
  *len = 1;
  return 7;
}
__device__ int d_greedy(const void *, void *, uint32_t, uint32_t max, uint32_t *len) {
  *len = max + 1;
  return 0;
}
/* Thread i XORs byte i with (i & 0xFF): checks that every thread ran. */
__device__ int d_block_xor(const void *args, void *result, uint32_t arg_len, uint32_t max, uint32_t *len) {
  if (arg_len > max) return 1;
  const uint8_t *a = (const uint8_t *)args;
  uint8_t *r = (uint8_t *)result;
  for (uint32_t i = threadIdx.x; i < arg_len; i += blockDim.x) r[i] = (uint8_t)(a[i] ^ (i & 0xFF));
  *len = arg_len;
  return 0;
}
__device__ int d_slow(const void *args, void *result, uint32_t arg_len, uint32_t max, uint32_t *len) {
  for (int i = 0; i < 2000; ++i) __nanosleep(1000); /* ~2 ms */
  return d_echo(args, result, arg_len, max, len);
}
/* Cooperative: every thread of the grid sums a strided share of the
 * payload bytes into a scratch array, the grid syncs, thread 0 of block 0
 * adds the partial sums. Needs the cooperative kernel. */
__device__ uint32_t g_partial[64 * 1024];
__device__ int d_grid_sum(const void *args, void *result, uint32_t arg_len, uint32_t, uint32_t *len) {
  cg::grid_group grid = cg::this_grid();
  const uint8_t *a = (const uint8_t *)args;
  const uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x, n = gridDim.x * blockDim.x;
  uint32_t s = 0;
  for (uint32_t i = tid; i < arg_len; i += n) s += a[i] * (i + 1);
  g_partial[tid] = s;
  grid.sync();
  if (tid == 0) {
    uint32_t total = 0;
    for (uint32_t i = 0; i < n; ++i) total += g_partial[i];
    uint32_t nblocks = gridDim.x;
    memcpy(result, &total, 4);
    memcpy((uint8_t *)result + 4, &nblocks, 4);
  }
  grid.sync();
  *len = 8;
  return 0;
}

__global__ void init_table(cudaq_function_entry_t *e) {
  cudaq_device_rpc_fn_t fns[] = {d_echo, d_sum, d_fail, d_greedy, nullptr, d_block_xor, d_slow, d_grid_sum, d_echo};
  uint32_t ids[] = {FN_ECHO, FN_SUM, FN_FAIL, FN_GREEDY, FN_GRAPH_ONLY, FN_BLOCK, FN_SLOW, FN_GRID, FN_VAR};
  for (int i = 0; i < 9; ++i) {
    memset(&e[i], 0, sizeof e[i]);
    e[i].handler.device_fn_ptr = (void *)fns[i];
    e[i].function_id = ids[i];
    e[i].dispatch_mode = CUDAQ_DISPATCH_DEVICE_CALL;
  }
  e[1].schema.num_args = 1;
  e[1].schema.args[0].type_id = CUDAQ_TYPE_ARRAY_INT32;
  e[1].schema.args[0].size_bytes = 16;
  e[1].schema.args[0].num_elements = 4;
  e[4].dispatch_mode = CUDAQ_DISPATCH_GRAPH_LAUNCH; /* not runnable by the device-call kernel */
  /* Variable-size schema: at least 4 bytes (the int32 before the array). */
  e[8].schema.num_args = 2;
  e[8].schema.args[0].type_id = CUDAQ_TYPE_INT32;
  e[8].schema.args[0].size_bytes = 4;
  e[8].schema.args[0].num_elements = 1;
  e[8].schema.args[1].type_id = CUDAQ_TYPE_ARRAY_UINT8; /* size 0, 0 elements: any length */
}
#define TABLE_SIZE 9

/* ---- fixture ------------------------------------------------------------- */
struct fixture {
  cudaq_dispatch_manager_t *mgr;
  cudaq_dispatcher_t *d;
  cudaq_ringbuffer_t rb;
  cudaq_function_entry_t *d_table;
  int *d_shutdown;
  uint64_t *h_stats; /* mapped pinned */
  uint32_t num_slots;
};

static inline void fixture_init(fixture *f, uint32_t num_slots, uint32_t slot_size, cudaq_kernel_type_t kt,
                         uint32_t blocks, uint32_t threads, uint32_t ring_flags = 0) {
  memset(f, 0, sizeof *f);
  f->num_slots = num_slots;
  cudaq_dispatcher_config_t c;
  cudaq_dispatcher_config_init(&c);
  c.num_slots = num_slots;
  c.slot_size = slot_size;
  c.kernel_type = kt;
  c.num_blocks = blocks;
  c.threads_per_block = threads;
  assert_int_equal(cudaq_dispatch_manager_create(&f->mgr), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_create(f->mgr, &c, &f->d), CUDAQ_OK);
  assert_int_equal(cudaq_host_ringbuffer_alloc(&f->rb, num_slots, slot_size, CUDAQ_RING_ALLOC_MAPPED | ring_flags),
                   CUDAQ_OK);
  CK(cudaMalloc(&f->d_table, TABLE_SIZE * sizeof(cudaq_function_entry_t)));
  init_table<<<1, 1>>>(f->d_table);
  CK(cudaDeviceSynchronize());
  CK(cudaMalloc(&f->d_shutdown, sizeof(int)));
  CK(cudaHostAlloc(&f->h_stats, sizeof(uint64_t), cudaHostAllocMapped));
  *f->h_stats = 0;
  g_stats = f->h_stats;
  cudaq_function_table_t t = {f->d_table, TABLE_SIZE};
  assert_int_equal(cudaq_dispatcher_set_ringbuffer(f->d, &f->rb), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_set_function_table(f->d, &t), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_set_control(f->d, f->d_shutdown, f->h_stats), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_set_launch_fn(f->d, kt == CUDAQ_KERNEL_COOPERATIVE
                                                            ? cudaq_launch_dispatch_kernel_cooperative
                                                            : cudaq_launch_dispatch_kernel_regular),
                   CUDAQ_OK);
  int occ = 0;
  if (kt == CUDAQ_KERNEL_COOPERATIVE) CK(cudaq_dispatch_kernel_cooperative_query_occupancy(&occ, threads));
  else CK(cudaq_dispatch_kernel_query_occupancy(&occ, threads));
  assert_true(occ > 0);
}

static inline void fixture_fini(fixture *f) {
  assert_int_equal(cudaq_dispatcher_destroy(f->d), CUDAQ_OK);
  assert_int_equal(cudaq_dispatch_manager_destroy(f->mgr), CUDAQ_OK);
  assert_int_equal(cudaq_host_ringbuffer_free(&f->rb), CUDAQ_OK);
  CK(cudaFree(f->d_table));
  CK(cudaFree(f->d_shutdown));
  CK(cudaFreeHost(f->h_stats));
}


static inline cudaq_tx_status_t wait_tx(const cudaq_ringbuffer_t *rb, uint32_t slot) {
  uint64_t t0 = now_ns();
  cudaq_tx_status_t st;
  while ((st = cudaq_host_ringbuffer_poll_tx_flag(rb, slot, NULL)) == CUDAQ_TX_EMPTY ||
         st == CUDAQ_TX_IN_FLIGHT)
    if (now_ns() - t0 > g_wait_ns) {
      fprintf(stderr, "slot %u timed out; rx/tx data at %p / %p, flags %p / %p, host flags %p / %p\n", slot,
              (void *)rb->rx_data, (void *)rb->tx_data, (void *)rb->rx_flags, (void *)rb->tx_flags,
              (void *)rb->rx_flags_host, (void *)rb->tx_flags_host);
      for (uint32_t i = 0; i < 16; ++i)
        fprintf(stderr, "  slot %2u: rx flag %llx tx flag %llx\n", i, (unsigned long long)rb->rx_flags_host[i],
                (unsigned long long)rb->tx_flags_host[i]);
      if (g_stats) cudaq__dispatch_debug_dump(g_stats);
      if (g_graph) cudaq__graph_debug_dump(g_graph);
      fail_msg("no response in slot %u after %.0f s", slot, g_wait_ns / 1e9);
    }
  return st;
}
/* Waits (bounded) until a request the dispatcher drops is consumed without
 * an answer: the slot free again (cudaq_host_ringbuffer_slot_available:
 * both flags 0, and on a ring with header completion the magic word 0). RX
 * alone is not enough: the device-call kernels mark the slot in flight (or,
 * with header completion, its magic word consumed) and clear RX before
 * they read the header, and undo that when they drop the request. A drop
 * that answers instead fails here at once; one that leaves the slot taken,
 * after the wait, with the slot's flags. */
static inline void wait_dropped(const cudaq_ringbuffer_t *rb, uint32_t slot) {
  uint64_t t0 = now_ns();
  while (!cudaq_host_ringbuffer_slot_available(rb, slot)) {
    const uint64_t tx = __atomic_load_n(&rb->tx_flags_host[slot], __ATOMIC_ACQUIRE);
    if (tx != 0 && tx != CUDAQ_TX_FLAG_IN_FLIGHT) fail_msg("slot %u: a dropped request was answered (TX %llx)", slot,
                                                           (unsigned long long)tx);
    if (now_ns() - t0 > g_wait_ns) {
      if (g_stats) cudaq__dispatch_debug_dump(g_stats);
      fail_msg("slot %u never consumed: rx flag %llx, tx flag %llx", slot,
               (unsigned long long)rb->rx_flags_host[slot], (unsigned long long)tx);
    }
  }
}
/* Waits (bounded) until cudaq_dispatcher_get_processed reads `want` on a
 * running dispatcher: the device-call kernels mirror the count into
 * stats[0] at the first poll that finds no request. Returns the last read. */
static inline uint64_t wait_processed(cudaq_dispatcher_t *d, uint64_t want) {
  uint64_t t0 = now_ns(), n = 0;
  for (;;) {
    assert_int_equal(cudaq_dispatcher_get_processed(d, &n), CUDAQ_OK);
    if (n == want || now_ns() - t0 > g_wait_ns) return n;
  }
}
static inline cudaq_rpc_response_t read_resp(const cudaq_ringbuffer_t *rb, uint32_t slot) {
  cudaq_rpc_response_t r;
  memcpy(&r, rb->tx_data_host + (size_t)slot * rb->tx_stride_sz, sizeof r);
  return r;
}
static inline const uint8_t *resp_payload(const cudaq_ringbuffer_t *rb, uint32_t slot) {
  return rb->tx_data_host + (size_t)slot * rb->tx_stride_sz + CUDAQ_RPC_HEADER_SIZE;
}
/* Writes a request with a forged header word (word_index, value) into
 * `slot` as a producer would write it: payload and header first, the
 * magic word last (release), so a dispatcher with header completion never
 * sees a valid magic over a half-written or later-altered request. Not
 * signalled. */
static inline void write_forged_request(const cudaq_ringbuffer_t *rb, uint32_t slot, uint32_t fn, const void *p,
                                        uint32_t len, uint32_t rid, uint64_t ptp, uint32_t word_index,
                                        uint32_t value) {
  uint8_t *s = rb->rx_data_host + (size_t)slot * rb->rx_stride_sz;
  cudaq_rpc_header_t h = {CUDAQ_RPC_MAGIC_REQUEST, fn, len, rid, ptp};
  memcpy((uint32_t *)&h + word_index, &value, 4);
  if (len) memcpy(s + CUDAQ_RPC_HEADER_SIZE, p, len);
  memcpy(s + 4, (const uint8_t *)&h + 4, sizeof h - 4);
  __atomic_store_n((uint32_t *)s, h.magic, __ATOMIC_RELEASE);
}

static inline cudaq_tx_status_t roundtrip(fixture *f, uint32_t slot, uint32_t fn, const void *p, uint32_t len,
                                   uint32_t rid, uint64_t ptp) {
  assert_true(cudaq_host_ringbuffer_slot_available(&f->rb, slot));
  assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&f->rb, slot, fn, p, len, rid, ptp), CUDAQ_OK);
  cudaq_host_ringbuffer_signal_slot(&f->rb, slot);
  return wait_tx(&f->rb, slot);
}

/* Streams n requests over every slot (all slots in flight), alternating
 * echo / block_xor / sum32, and checks each response. */
static inline void stream_and_check(fixture *f, uint32_t n) {
  const uint32_t S = f->num_slots;
  uint32_t *rid_of = (uint32_t *)calloc(S, sizeof(uint32_t));
  for (uint32_t k = 0; k < n + S; ++k) {
    uint32_t slot = k % S;
    if (k >= S) {
      uint32_t rid = rid_of[slot];
      assert_int_equal(wait_tx(&f->rb, slot), CUDAQ_TX_READY);
      cudaq_rpc_response_t r = read_resp(&f->rb, slot);
      assert_int_equal(r.magic, CUDAQ_RPC_MAGIC_RESPONSE);
      assert_int_equal(r.status, 0);
      assert_int_equal(r.request_id, rid);
      assert_true(r.ptp_timestamp == ((uint64_t)rid << 32 | 0xABCDu));
      const uint8_t *pl = resp_payload(&f->rb, slot);
      switch (rid % 3) {
      case 0: {
        int32_t s;
        memcpy(&s, pl, 4);
        assert_int_equal(r.result_len, 4);
        assert_int_equal(s, (int32_t)(4 * rid + 6));
        break;
      }
      default: {
        uint32_t len = 1 + rid % 200;
        assert_int_equal(r.result_len, len);
        for (uint32_t i = 0; i < len; ++i) {
          uint8_t v = (uint8_t)(rid * 7 + i);
          if (rid % 3 == 2) v = (uint8_t)(v ^ (i & 0xFF));
          if (pl[i] != v) fail_msg("request %u byte %u: got %u want %u", rid, i, pl[i], v);
        }
      }
      }
      assert_int_equal(f->rb.tx_flags_host[slot], (uint64_t)(uintptr_t)(f->rb.tx_data + (size_t)slot * f->rb.tx_stride_sz));
      cudaq_host_ringbuffer_clear_slot(&f->rb, slot);
    }
    if (k >= n) continue;
    uint32_t rid = k;
    uint8_t buf[256];
    if (rid % 3 == 0) {
      int32_t v[4] = {(int32_t)rid, (int32_t)rid + 1, (int32_t)rid + 2, (int32_t)rid + 3};
      assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&f->rb, slot, FN_SUM, v, 16, rid, (uint64_t)rid << 32 | 0xABCDu), CUDAQ_OK);
    } else {
      uint32_t len = 1 + rid % 200;
      for (uint32_t i = 0; i < len; ++i) buf[i] = (uint8_t)(rid * 7 + i);
      assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&f->rb, slot, rid % 3 == 1 ? FN_ECHO : FN_BLOCK, buf, len,
                                                               rid, (uint64_t)rid << 32 | 0xABCDu), CUDAQ_OK);
    }
    rid_of[slot] = rid;
    cudaq_host_ringbuffer_signal_slot(&f->rb, slot);
  }
  free(rid_of);
}

#endif
