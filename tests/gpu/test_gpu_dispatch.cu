/*
 * test_gpu_dispatch.cu - the device dispatch path end to end on a GPU
 * (spec: realtime-host-api.txt, "Kernel Launch Helper Functions", "CUDA
 * Graph Dispatch Mode", "Unified Dispatch Mode"; realtime-message-protocol
 * "Request ID Semantics", "PTP Timestamp Semantics", "Status Codes").
 *
 * Without a CUDA device: prints "skipped: no CUDA device" and exits 77.
 * CUDAQ_TEST_SCALE (default 1.0) scales request counts (compute-sanitizer
 * runs use a small scale: its instrumentation slows kernels 100x).
 */
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
#include <unistd.h>

extern "C" {
#include <cmocka.h>
}

#include "cudaq/realtime/cudaq_realtime.h"
#include "cudaq/realtime/dispatch_kernel.h"
#include "cudaq/realtime/emu_transport.h"

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
static uint32_t scaled(uint32_t n) {
  uint32_t v = (uint32_t)(n * g_scale);
  return v < 8 ? 8 : v;
}

static uint64_t now_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
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

static void fixture_init(fixture *f, uint32_t num_slots, uint32_t slot_size, cudaq_kernel_type_t kt,
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

static void fixture_fini(fixture *f) {
  assert_int_equal(cudaq_dispatcher_destroy(f->d), CUDAQ_OK);
  assert_int_equal(cudaq_dispatch_manager_destroy(f->mgr), CUDAQ_OK);
  assert_int_equal(cudaq_host_ringbuffer_free(&f->rb), CUDAQ_OK);
  CK(cudaFree(f->d_table));
  CK(cudaFree(f->d_shutdown));
  CK(cudaFreeHost(f->h_stats));
}


static cudaq_tx_status_t wait_tx(const cudaq_ringbuffer_t *rb, uint32_t slot) {
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
static void wait_rx_consumed(const cudaq_ringbuffer_t *rb, uint32_t slot) {
  uint64_t t0 = now_ns();
  while (__atomic_load_n(&rb->rx_flags_host[slot], __ATOMIC_ACQUIRE) != 0)
    if (now_ns() - t0 > g_wait_ns) {
      if (g_stats) cudaq__dispatch_debug_dump(g_stats);
      fail_msg("slot %u never consumed", slot);
    }
}
static cudaq_rpc_response_t read_resp(const cudaq_ringbuffer_t *rb, uint32_t slot) {
  cudaq_rpc_response_t r;
  memcpy(&r, rb->tx_data_host + (size_t)slot * rb->tx_stride_sz, sizeof r);
  return r;
}
static const uint8_t *resp_payload(const cudaq_ringbuffer_t *rb, uint32_t slot) {
  return rb->tx_data_host + (size_t)slot * rb->tx_stride_sz + CUDAQ_RPC_HEADER_SIZE;
}
static cudaq_tx_status_t roundtrip(fixture *f, uint32_t slot, uint32_t fn, const void *p, uint32_t len,
                                   uint32_t rid, uint64_t ptp) {
  assert_true(cudaq_host_ringbuffer_slot_available(&f->rb, slot));
  assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&f->rb, slot, fn, p, len, rid, ptp), CUDAQ_OK);
  cudaq_host_ringbuffer_signal_slot(&f->rb, slot);
  return wait_tx(&f->rb, slot);
}

/* Streams n requests over every slot (all slots in flight), alternating
 * echo / block_xor / sum32, and checks each response. */
static void stream_and_check(fixture *f, uint32_t n) {
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

/* ---- tests --------------------------------------------------------------- */

static void test_regular_all_slots_many_requests(void **) {
  fixture f;
  fixture_init(&f, 16, 256, CUDAQ_KERNEL_REGULAR, 1, 64);
  assert_int_equal(cudaq_dispatcher_start(f.d), CUDAQ_OK);
  const uint32_t n = scaled(30000);
  stream_and_check(&f, n);
  assert_int_equal(cudaq_dispatcher_stop(f.d), CUDAQ_OK);
  uint64_t processed = 0;
  assert_int_equal(cudaq_dispatcher_get_processed(f.d, &processed), CUDAQ_OK);
  assert_int_equal(processed, n);
  cudaq_dispatcher_counters_t c;
  assert_int_equal(cudaq_dispatcher_get_counters(f.d, &c), CUDAQ_OK);
  assert_int_equal(c.processed, n);
  assert_int_equal(c.dropped_bad_magic + c.dropped_unknown_function + c.handler_errors, 0);
  fixture_fini(&f);
}

/* Several blocks: block b serves slots b, b+4, ...; requests still all answered. */
static void test_regular_multi_block(void **) {
  fixture f;
  fixture_init(&f, 16, 256, CUDAQ_KERNEL_REGULAR, 4, 32);
  assert_int_equal(cudaq_dispatcher_start(f.d), CUDAQ_OK);
  const uint32_t n = scaled(20000);
  stream_and_check(&f, n);
  assert_int_equal(cudaq_dispatcher_stop(f.d), CUDAQ_OK);
  /* Four blocks count into one set of counters: exact after the stop. */
  cudaq_dispatcher_counters_t c;
  assert_int_equal(cudaq_dispatcher_get_counters(f.d, &c), CUDAQ_OK);
  assert_int_equal(c.processed, n);
  assert_int_equal(*f.h_stats, n);
  fixture_fini(&f);
}

static void test_malformed_inputs_and_echo(void **) {
  fixture f;
  fixture_init(&f, 8, 256, CUDAQ_KERNEL_REGULAR, 1, 32);
  assert_int_equal(cudaq_dispatcher_start(f.d), CUDAQ_OK);
  const uint64_t ptp = 0xFEEDFACECAFEBEEFull;
  uint8_t buf[256];
  memset(buf, 0x11, sizeof buf);
  cudaq_rpc_response_t r;
  /* bad magic: consumed, no response */
  assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&f.rb, 0, FN_ECHO, buf, 8, 1, ptp), CUDAQ_OK);
  uint32_t bad = 0x12345678u;
  memcpy(f.rb.rx_data_host, &bad, 4);
  cudaq_host_ringbuffer_signal_slot(&f.rb, 0);
  wait_rx_consumed(&f.rb, 0);
  assert_int_equal(cudaq_host_ringbuffer_poll_tx_flag(&f.rb, 0, NULL), CUDAQ_TX_EMPTY);
  /* unknown function: cleared, no response */
  assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&f.rb, 1, 0xBADF00Du, buf, 8, 2, ptp), CUDAQ_OK);
  cudaq_host_ringbuffer_signal_slot(&f.rb, 1);
  wait_rx_consumed(&f.rb, 1);
  assert_int_equal(cudaq_host_ringbuffer_poll_tx_flag(&f.rb, 1, NULL), CUDAQ_TX_EMPTY);
  /* arg_len beyond the slot (forged header) */
  assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&f.rb, 2, FN_ECHO, buf, 8, 3, ptp), CUDAQ_OK);
  uint32_t huge = 0xFFFFFFFFu;
  memcpy(f.rb.rx_data_host + 2 * f.rb.rx_stride_sz + 8, &huge, 4);
  cudaq_host_ringbuffer_signal_slot(&f.rb, 2);
  assert_int_equal(wait_tx(&f.rb, 2), CUDAQ_TX_READY);
  r = read_resp(&f.rb, 2);
  assert_int_equal(r.status, CUDAQ_RPC_ERR_PAYLOAD_TOO_LARGE);
  assert_int_equal(r.request_id, 3);
  assert_true(r.ptp_timestamp == ptp);
  assert_int_equal(r.result_len, 0);
  cudaq_host_ringbuffer_clear_slot(&f.rb, 2);
  /* the largest payload that fits */
  assert_int_equal(roundtrip(&f, 3, FN_ECHO, buf, 256 - 24, 4, ptp), CUDAQ_TX_READY);
  r = read_resp(&f.rb, 3);
  assert_int_equal(r.status, 0);
  assert_int_equal(r.result_len, 232);
  assert_memory_equal(resp_payload(&f.rb, 3), buf, 232);
  cudaq_host_ringbuffer_clear_slot(&f.rb, 3);
  /* schema mismatch */
  assert_int_equal(roundtrip(&f, 4, FN_SUM, buf, 12, 5, ptp), CUDAQ_TX_READY);
  r = read_resp(&f.rb, 4);
  assert_int_equal(r.status, CUDAQ_RPC_ERR_ARG_LEN_MISMATCH);
  assert_int_equal(r.request_id, 5);
  assert_true(r.ptp_timestamp == ptp);
  cudaq_host_ringbuffer_clear_slot(&f.rb, 4);
  /* handler error propagated with its bytes */
  assert_int_equal(roundtrip(&f, 5, FN_FAIL, buf, 3, 6, ptp + 6), CUDAQ_TX_READY);
  r = read_resp(&f.rb, 5);
  assert_int_equal(r.status, 7);
  assert_int_equal(r.result_len, 1);
  assert_int_equal(resp_payload(&f.rb, 5)[0], 0xEE);
  assert_true(r.ptp_timestamp == ptp + 6);
  cudaq_host_ringbuffer_clear_slot(&f.rb, 5);
  /* handler claims too much */
  assert_int_equal(roundtrip(&f, 6, FN_GREEDY, buf, 0, 7, ptp), CUDAQ_TX_READY);
  r = read_resp(&f.rb, 6);
  assert_int_equal(r.status, CUDAQ_RPC_ERR_RESULT_TOO_LARGE);
  assert_int_equal(r.result_len, 0);
  cudaq_host_ringbuffer_clear_slot(&f.rb, 6);
  /* a GRAPH_LAUNCH entry cannot run in the device-call kernel */
  assert_int_equal(roundtrip(&f, 7, FN_GRAPH_ONLY, buf, 4, 8, ptp), CUDAQ_TX_READY);
  r = read_resp(&f.rb, 7);
  assert_int_equal(r.status, CUDAQ_RPC_ERR_UNSUPPORTED_MODE);
  assert_int_equal(r.request_id, 8);
  cudaq_host_ringbuffer_clear_slot(&f.rb, 7);
  /* an RX flag with an arbitrary nonzero value, out of ring order (slot 2 again) */
  assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&f.rb, 2, FN_ECHO, buf, 4, 9, ptp), CUDAQ_OK);
  __atomic_store_n(&f.rb.rx_flags_host[2], 0xDEADBEEFull, __ATOMIC_RELEASE);
  assert_int_equal(wait_tx(&f.rb, 2), CUDAQ_TX_READY);
  assert_int_equal(read_resp(&f.rb, 2).request_id, 9);
  cudaq_host_ringbuffer_clear_slot(&f.rb, 2);

  assert_int_equal(cudaq_dispatcher_stop(f.d), CUDAQ_OK);
  cudaq_dispatcher_counters_t c;
  assert_int_equal(cudaq_dispatcher_get_counters(f.d, &c), CUDAQ_OK);
  assert_int_equal(c.dropped_bad_magic, 1);
  assert_int_equal(c.dropped_unknown_function, 1);
  assert_int_equal(c.err_payload_too_large, 1);
  assert_int_equal(c.err_arg_len_mismatch, 1);
  assert_int_equal(c.err_result_too_large, 1);
  assert_int_equal(c.err_unsupported_mode, 1);
  assert_int_equal(c.handler_errors, 1);
  assert_int_equal(c.processed, 7);
  assert_int_equal(*f.h_stats, 7);
  fixture_fini(&f);
}


/* Payload sizes around the polling warp's one-step read (512 bytes of the
 * slot: header + 488 payload bytes), around the shared-memory staging limit
 * (32 KiB of payload), and beyond it (handler reads the slot in place). */
static void test_payload_sizes(void **) {
  fixture f;
  const uint32_t SLOT = 64 * 1024;
  fixture_init(&f, 4, SLOT, CUDAQ_KERNEL_REGULAR, 1, 128);
  assert_int_equal(cudaq_dispatcher_start(f.d), CUDAQ_OK);
  const uint32_t lens[] = {0, 1, 4, 487, 488, 489, 1000, 32767, 32768, 32769, 40000, SLOT - 24};
  uint8_t *buf = (uint8_t *)malloc(SLOT);
  uint32_t k = 0;
  for (uint32_t len : lens)
    for (uint32_t fn = 0; fn < 2; ++fn, ++k) {
      const uint32_t slot = k % 4;
      for (uint32_t i = 0; i < len; ++i) buf[i] = (uint8_t)(i * 13 + k);
      assert_int_equal(roundtrip(&f, slot, fn ? FN_BLOCK : FN_ECHO, buf, len, k, k), CUDAQ_TX_READY);
      cudaq_rpc_response_t r = read_resp(&f.rb, slot);
      assert_int_equal(r.status, 0);
      assert_int_equal(r.request_id, k);
      assert_int_equal(r.result_len, len);
      const uint8_t *pl = resp_payload(&f.rb, slot);
      for (uint32_t i = 0; i < len; ++i) {
        const uint8_t want = fn ? (uint8_t)(buf[i] ^ (i & 0xFF)) : buf[i];
        if (pl[i] != want) fail_msg("length %u byte %u: got %u want %u", len, i, pl[i], want);
      }
      cudaq_host_ringbuffer_clear_slot(&f.rb, slot);
    }
  free(buf);
  assert_int_equal(cudaq_dispatcher_stop(f.d), CUDAQ_OK);
  fixture_fini(&f);
}

/* A schema whose last argument is variable-size sets a minimum length
 * (the fixed arguments before it), enforced like on the host path. */
static void variable_schema_checks(fixture *f) {
  uint8_t buf[64];
  memset(buf, 0x5A, sizeof buf);
  const uint32_t lens[] = {0, 3, 4, 5, 60};
  for (uint32_t i = 0; i < 5; ++i) {
    const uint32_t slot = i % f->num_slots;
    assert_int_equal(roundtrip(f, slot, FN_VAR, buf, lens[i], 50 + i, 0), CUDAQ_TX_READY);
    cudaq_rpc_response_t r = read_resp(&f->rb, slot);
    assert_int_equal(r.request_id, 50 + i);
    if (lens[i] < 4) {
      assert_int_equal(r.status, CUDAQ_RPC_ERR_ARG_LEN_MISMATCH);
      assert_int_equal(r.result_len, 0);
    } else {
      assert_int_equal(r.status, 0);
      assert_int_equal(r.result_len, lens[i]);
    }
    cudaq_host_ringbuffer_clear_slot(&f->rb, slot);
  }
}

static void test_variable_schema_min_len(void **) {
  for (int coop = 0; coop < 2; ++coop) {
    fixture f;
    fixture_init(&f, 4, 256, coop ? CUDAQ_KERNEL_COOPERATIVE : CUDAQ_KERNEL_REGULAR, coop ? 2 : 1, 32);
    assert_int_equal(cudaq_dispatcher_start(f.d), CUDAQ_OK);
    variable_schema_checks(&f);
    assert_int_equal(cudaq_dispatcher_stop(f.d), CUDAQ_OK);
    cudaq_dispatcher_counters_t c;
    assert_int_equal(cudaq_dispatcher_get_counters(f.d, &c), CUDAQ_OK);
    assert_int_equal(c.err_arg_len_mismatch, 2);
    fixture_fini(&f);
  }
}

/* A new dispatcher given a stats buffer that holds another dispatcher's
 * count starts from 0; a restarted one continues. */
static void test_counters_fresh_dispatcher_same_stats(void **) {
  fixture f;
  fixture_init(&f, 4, 128, CUDAQ_KERNEL_REGULAR, 1, 32);
  uint8_t p[4] = {1, 2, 3, 4};
  assert_int_equal(cudaq_dispatcher_start(f.d), CUDAQ_OK);
  for (uint32_t k = 0; k < 5; ++k) {
    assert_int_equal(roundtrip(&f, k % 4, FN_ECHO, p, 4, k, 0), CUDAQ_TX_READY);
    cudaq_host_ringbuffer_clear_slot(&f.rb, k % 4);
  }
  assert_int_equal(cudaq_dispatcher_stop(f.d), CUDAQ_OK);
  assert_int_equal(*f.h_stats, 5);
  assert_int_equal(cudaq_dispatcher_destroy(f.d), CUDAQ_OK);

  cudaq_dispatcher_config_t c;
  cudaq_dispatcher_config_init(&c);
  c.num_slots = 4;
  c.slot_size = 128;
  c.num_blocks = 1;
  c.threads_per_block = 32;
  assert_int_equal(cudaq_dispatcher_create(f.mgr, &c, &f.d), CUDAQ_OK);
  cudaq_function_table_t t = {f.d_table, TABLE_SIZE};
  assert_int_equal(cudaq_dispatcher_set_ringbuffer(f.d, &f.rb), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_set_function_table(f.d, &t), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_set_control(f.d, f.d_shutdown, f.h_stats), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_set_launch_fn(f.d, cudaq_launch_dispatch_kernel_regular), CUDAQ_OK);
  for (int run = 0; run < 2; ++run) {
    assert_int_equal(cudaq_dispatcher_start(f.d), CUDAQ_OK);
    for (uint32_t k = 0; k < 3; ++k) {
      assert_int_equal(roundtrip(&f, (k + 1) % 4, FN_ECHO, p, 4, k, 0), CUDAQ_TX_READY);
      cudaq_host_ringbuffer_clear_slot(&f.rb, (k + 1) % 4);
    }
    assert_int_equal(cudaq_dispatcher_stop(f.d), CUDAQ_OK);
    cudaq_dispatcher_counters_t cnt;
    assert_int_equal(cudaq_dispatcher_get_counters(f.d, &cnt), CUDAQ_OK);
    assert_int_equal(cnt.processed, 3u * (run + 1));
    assert_int_equal(*f.h_stats, 3u * (run + 1));
  }
  fixture_fini(&f);
}

static void test_cooperative_grid_handler(void **) {
  fixture f;
  int occ = 0;
  CK(cudaq_dispatch_kernel_cooperative_query_occupancy(&occ, 128));
  fixture_init(&f, 8, 1024, CUDAQ_KERNEL_COOPERATIVE, 4, 128);
  assert_int_equal(cudaq_dispatcher_start(f.d), CUDAQ_OK);
  for (uint32_t k = 0; k < scaled(2000); ++k) {
    uint32_t slot = k % 8;
    uint8_t buf[1000];
    uint32_t len = 1 + (k * 37) % 1000, want = 0;
    for (uint32_t i = 0; i < len; ++i) {
      buf[i] = (uint8_t)(k + i * 3);
      want += buf[i] * (i + 1);
    }
    assert_int_equal(roundtrip(&f, slot, FN_GRID, buf, len, k, k), CUDAQ_TX_READY);
    cudaq_rpc_response_t r = read_resp(&f.rb, slot);
    uint32_t got[2];
    memcpy(got, resp_payload(&f.rb, slot), 8);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.request_id, k);
    assert_int_equal(got[0], want);
    assert_int_equal(got[1], 4); /* all four blocks took part */
    cudaq_host_ringbuffer_clear_slot(&f.rb, slot);
  }
  /* Block-level handlers work in the cooperative kernel too. */
  stream_and_check(&f, scaled(3000));
  assert_int_equal(cudaq_dispatcher_stop(f.d), CUDAQ_OK);
  fixture_fini(&f);
}

static void test_in_place_ring(void **) {
  fixture f;
  fixture_init(&f, 4, 256, CUDAQ_KERNEL_REGULAR, 1, 32, CUDAQ_RING_ALLOC_IN_PLACE);
  assert_ptr_equal(f.rb.tx_data, f.rb.rx_data);
  assert_int_equal(cudaq_dispatcher_start(f.d), CUDAQ_OK);
  for (uint32_t k = 0; k < scaled(2000); ++k) {
    uint32_t slot = k % 4;
    uint8_t p[100];
    for (int i = 0; i < 100; ++i) p[i] = (uint8_t)(k + i);
    assert_int_equal(roundtrip(&f, slot, FN_BLOCK, p, 100, k, 1000 + k), CUDAQ_TX_READY);
    cudaq_rpc_response_t r = read_resp(&f.rb, slot);
    assert_int_equal(r.magic, CUDAQ_RPC_MAGIC_RESPONSE);
    assert_int_equal(r.request_id, k);
    assert_true(r.ptp_timestamp == 1000 + k);
    for (int i = 0; i < 100; ++i) assert_int_equal(resp_payload(&f.rb, slot)[i], (uint8_t)(p[i] ^ i));
    cudaq_host_ringbuffer_clear_slot(&f.rb, slot);
  }
  fixture_fini(&f); /* destroy stops the kernel */
}

static void test_shutdown_idle_busy_restart(void **) {
  fixture f;
  fixture_init(&f, 8, 128, CUDAQ_KERNEL_REGULAR, 1, 32);
  assert_int_equal(cudaq_dispatcher_start(f.d), CUDAQ_OK);
  usleep(2000);
  assert_int_equal(cudaq_dispatcher_stop(f.d), CUDAQ_OK); /* idle */
  assert_int_equal(cudaq_dispatcher_stop(f.d), CUDAQ_OK); /* idempotent */
  assert_int_equal(cudaq_dispatcher_start(f.d), CUDAQ_OK);
  uint8_t p[4] = {1, 2, 3, 4};
  for (uint32_t s = 0; s < 6; ++s) {
    assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&f.rb, s, FN_SLOW, p, 4, s, s), CUDAQ_OK);
    cudaq_host_ringbuffer_signal_slot(&f.rb, s);
  }
  assert_int_equal(cudaq_dispatcher_stop(f.d), CUDAQ_OK); /* busy: drains the 6 */
  for (uint32_t s = 0; s < 6; ++s) {
    assert_int_equal(cudaq_host_ringbuffer_poll_tx_flag(&f.rb, s, NULL), CUDAQ_TX_READY);
    assert_int_equal(read_resp(&f.rb, s).request_id, s);
    cudaq_host_ringbuffer_clear_slot(&f.rb, s);
  }
  /* Restart continues counting and serving. */
  assert_int_equal(cudaq_dispatcher_start(f.d), CUDAQ_OK);
  for (uint32_t s = 6; s < 8; ++s) {
    assert_int_equal(roundtrip(&f, s, FN_ECHO, p, 4, 100 + s, 0), CUDAQ_TX_READY);
    assert_int_equal(read_resp(&f.rb, s).request_id, 100 + s);
    cudaq_host_ringbuffer_clear_slot(&f.rb, s);
  }
  assert_int_equal(cudaq_dispatcher_stop(f.d), CUDAQ_OK);
  uint64_t n = 0;
  assert_int_equal(cudaq_dispatcher_get_processed(f.d, &n), CUDAQ_OK);
  assert_int_equal(n, 8);
  fixture_fini(&f);
}

static void test_out_of_order_slots(void **) {
  fixture f;
  fixture_init(&f, 16, 128, CUDAQ_KERNEL_REGULAR, 1, 32);
  assert_int_equal(cudaq_dispatcher_start(f.d), CUDAQ_OK);
  const uint32_t order[] = {5, 2, 11, 3};
  uint8_t p[4] = {9, 8, 7, 6};
  for (uint32_t s : order) {
    assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&f.rb, s, FN_ECHO, p, 4, s * 10, 0), CUDAQ_OK);
    cudaq_host_ringbuffer_signal_slot(&f.rb, s);
  }
  for (uint32_t s : order) {
    assert_int_equal(wait_tx(&f.rb, s), CUDAQ_TX_READY);
    assert_int_equal(read_resp(&f.rb, s).request_id, s * 10);
    cudaq_host_ringbuffer_clear_slot(&f.rb, s);
  }
  assert_int_equal(cudaq_dispatcher_stop(f.d), CUDAQ_OK);
  fixture_fini(&f);
}

/* Two dispatchers of one manager on one GPU, each with its own ring. */
static void test_two_dispatchers(void **) {
  if (getenv("CUDAQ_TEST_SLOW")) {
    /* compute-sanitizer runs kernels one at a time: a second persistent
     * kernel would wait for the first forever. */
    printf("two persistent kernels at once: not run under compute-sanitizer (CUDAQ_TEST_SLOW)\n");
    skip();
  }
  fixture a, b;
  fixture_init(&a, 8, 256, CUDAQ_KERNEL_REGULAR, 1, 32);
  fixture_init(&b, 8, 256, CUDAQ_KERNEL_REGULAR, 2, 64);
  assert_int_equal(cudaq_dispatcher_start(a.d), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_start(b.d), CUDAQ_OK);
  stream_and_check(&a, scaled(5000));
  stream_and_check(&b, scaled(5000));
  assert_int_equal(cudaq_dispatcher_stop(a.d), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_stop(b.d), CUDAQ_OK);
  fixture_fini(&a);
  fixture_fini(&b);
}

/* Device-path wiring errors caught before anything runs. */
/* Launch helpers called directly with sizes the kernels' 32-bit fields
 * cannot hold: refused with a launch error, never truncated. The pointers
 * are never used, since the check comes first. */
static void test_launch_sizes_too_large(void **) {
  volatile uint64_t *f = reinterpret_cast<volatile uint64_t *>(uintptr_t{64});
  uint8_t *data = reinterpret_cast<uint8_t *>(uintptr_t{64});
  cudaq_function_entry_t *table = reinterpret_cast<cudaq_function_entry_t *>(uintptr_t{64});
  volatile int *sd = reinterpret_cast<volatile int *>(uintptr_t{64});
  uint64_t *stats = reinterpret_cast<uint64_t *>(uintptr_t{64});
  const size_t big = size_t{UINT32_MAX} + 1;
  (void)cudaGetLastError();
  cudaq_launch_dispatch_kernel_regular(f, f, data, data, 256, 256, table, 1, sd, stats, big, 1, 32, 0);
  assert_int_not_equal(cudaGetLastError(), cudaSuccess);
  cudaq_launch_dispatch_kernel_regular(f, f, data, data, 256, 256, table, big, sd, stats, 4, 1, 32, 0);
  assert_int_not_equal(cudaGetLastError(), cudaSuccess);
  cudaq_launch_unified_dispatch_emu(reinterpret_cast<void *>(uintptr_t{64}), table, big, sd, stats, 0);
  assert_int_not_equal(cudaGetLastError(), cudaSuccess);
  assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
}

static void test_device_wiring_errors(void **) {
  cudaq_dispatch_manager_t *m;
  cudaq_dispatcher_t *d;
  cudaq_dispatcher_config_t c;
  cudaq_dispatcher_config_init(&c);
  c.num_slots = 4;
  c.slot_size = 64;
  assert_int_equal(cudaq_dispatch_manager_create(&m), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_create(m, &c, &d), CUDAQ_OK);
  cudaq_ringbuffer_t host_only;
  assert_int_equal(cudaq_host_ringbuffer_alloc(&host_only, 4, 64, CUDAQ_RING_ALLOC_HOST), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_set_ringbuffer(d, &host_only), CUDAQ_ERR_INVALID_ARG);
  assert_non_null(strstr(cudaq_last_error(), "not device-visible"));
  int host_flag = 0;
  uint64_t host_stats = 0;
  assert_int_equal(cudaq_dispatcher_set_control(d, &host_flag, &host_stats), CUDAQ_ERR_INVALID_ARG);
  /* A launch helper refusing its arguments makes start fail with a CUDA error. */
  cudaq_ringbuffer_t rb;
  assert_int_equal(cudaq_host_ringbuffer_alloc(&rb, 4, 64, CUDAQ_RING_ALLOC_MAPPED), CUDAQ_OK);
  cudaq_function_entry_t *t;
  int *flag;
  uint64_t *stats;
  CK(cudaMalloc(&t, TABLE_SIZE * sizeof *t));
  init_table<<<1, 1>>>(t);
  CK(cudaDeviceSynchronize());
  CK(cudaMalloc(&flag, sizeof(int)));
  CK(cudaMalloc(&stats, sizeof(uint64_t)));
  cudaq_function_table_t table = {t, TABLE_SIZE};
  assert_int_equal(cudaq_dispatcher_set_ringbuffer(d, &rb), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_set_function_table(d, &table), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_set_control(d, flag, stats), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_start(d), CUDAQ_ERR_INVALID_ARG); /* no launch fn */
  assert_int_equal(cudaq_dispatcher_set_launch_fn(d, cudaq_launch_dispatch_kernel_regular), CUDAQ_OK);
  cudaq_dispatcher_config_t c2 = c;
  c2.threads_per_block = 48; /* not a multiple of 32: the helper refuses */
  cudaq_dispatcher_t *d2;
  assert_int_equal(cudaq_dispatcher_create(m, &c2, &d2), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_set_ringbuffer(d2, &rb), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_set_function_table(d2, &table), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_set_control(d2, flag, stats), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_set_launch_fn(d2, cudaq_launch_dispatch_kernel_regular), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_start(d2), CUDAQ_ERR_CUDA);
  assert_non_null(strstr(cudaq_last_error(), "launch function failed"));
  /* The good one runs, with the shutdown flag and stats in device memory. */
  assert_int_equal(cudaq_dispatcher_start(d), CUDAQ_OK);
  uint8_t p[2] = {1, 2};
  assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&rb, 0, FN_ECHO, p, 2, 77, 0), CUDAQ_OK);
  cudaq_host_ringbuffer_signal_slot(&rb, 0);
  assert_int_equal(wait_tx(&rb, 0), CUDAQ_TX_READY);
  assert_int_equal(read_resp(&rb, 0).request_id, 77);
  uint64_t n = 0;
  assert_int_equal(cudaq_dispatcher_get_processed(d, &n), CUDAQ_OK);
  assert_int_equal(n, 1);
  assert_int_equal(cudaq_dispatch_manager_destroy(m), CUDAQ_OK); /* stops d */
  assert_int_equal(cudaq_host_ringbuffer_free(&rb), CUDAQ_OK);
  assert_int_equal(cudaq_host_ringbuffer_free(&host_only), CUDAQ_OK);
  CK(cudaFree(t));
  CK(cudaFree(flag));
  CK(cudaFree(stats));
}

/* ---- graph launch ------------------------------------------------------- */

/* The handler graph: echo the payload, then complete. */
__global__ void graph_echo_kernel(cudaq_graph_io_context *io) {
  const uint8_t *src = io->rx_slot + CUDAQ_RPC_HEADER_SIZE;
  uint8_t *dst = io->tx_slot + CUDAQ_RPC_HEADER_SIZE;
  const uint32_t n = io->arg_len;
  for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) dst[i] = (uint8_t)(src[i] + 1);
  __syncthreads();
  if (threadIdx.x == 0) cudaq_graph_io_complete(io, 0, n);
}

static void test_graph_launch_100k(void **) {
  const uint32_t S = 8, SLOT = 256;
  cudaq_ringbuffer_t rb;
  assert_int_equal(cudaq_host_ringbuffer_alloc(&rb, S, SLOT, CUDAQ_RING_ALLOC_MAPPED), CUDAQ_OK);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaq_graph_io_context *io;
  CK(cudaMalloc(&io, sizeof *io));
  /* Capture the handler graph and instantiate it for device launch. */
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  graph_echo_kernel<<<1, 64, 0, s>>>(io);
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiateWithFlags(&ge, g, cudaGraphInstantiateFlagDeviceLaunch));
  CK(cudaGraphUpload(ge, s));
  CK(cudaStreamSynchronize(s));
  cudaq_function_entry_t h[2];
  memset(h, 0, sizeof h);
  h[0].handler.graph_exec = ge;
  h[0].function_id = FN_ECHO;
  h[0].dispatch_mode = CUDAQ_DISPATCH_GRAPH_LAUNCH;
  h[0].schema.num_args = 2; /* a uint8 then a variable-size array: at least 1 byte */
  h[0].schema.args[0].type_id = CUDAQ_TYPE_UINT8;
  h[0].schema.args[0].size_bytes = 1;
  h[0].schema.args[0].num_elements = 1;
  h[0].schema.args[1].type_id = CUDAQ_TYPE_ARRAY_UINT8;
  h[1].handler.device_fn_ptr = nullptr;
  h[1].function_id = FN_SUM;
  h[1].dispatch_mode = CUDAQ_DISPATCH_DEVICE_CALL; /* wrong mode for this dispatcher */
  cudaq_function_entry_t *dt;
  CK(cudaMalloc(&dt, sizeof h));
  CK(cudaMemcpy(dt, h, sizeof h, cudaMemcpyHostToDevice));
  int *flag;
  uint64_t *stats;
  CK(cudaMalloc(&flag, sizeof(int)));
  CK(cudaMemset(flag, 0, sizeof(int)));
  CK(cudaHostAlloc(&stats, sizeof(uint64_t), cudaHostAllocMapped));
  *stats = 0;
  cudaq_dispatch_graph_context *ctx = nullptr;
  /* Sizes beyond 32 bits are refused, not truncated. */
  const size_t huge = (size_t)1 << 33;
  assert_int_equal(cudaq_create_dispatch_graph_regular(rb.rx_flags, rb.tx_flags, rb.rx_data, rb.tx_data, huge,
                                                       rb.tx_stride_sz, dt, 2, io, flag, stats, S, 1, 32, s, &ctx),
                   cudaErrorInvalidValue);
  assert_int_equal(cudaq_create_dispatch_graph_regular(rb.rx_flags, rb.tx_flags, rb.rx_data, rb.tx_data,
                                                       rb.rx_stride_sz, rb.tx_stride_sz, dt, 2, io, flag, stats,
                                                       huge + S, 1, 32, s, &ctx),
                   cudaErrorInvalidValue);
  assert_null(ctx);
  CK(cudaq_create_dispatch_graph_regular(rb.rx_flags, rb.tx_flags, rb.rx_data, rb.tx_data, rb.rx_stride_sz,
                                         rb.tx_stride_sz, dt, 2, io, flag, stats, S, 1, 32, s, &ctx));
  CK(cudaq_launch_dispatch_graph(ctx, s));
  g_stats = stats;
  g_graph = ctx;

  const uint32_t n = scaled(100000);
  uint32_t rid_of[8];
  for (uint32_t k = 0; k < n + S; ++k) {
    uint32_t slot = k % S;
    if (k >= S) {
      assert_int_equal(wait_tx(&rb, slot), CUDAQ_TX_READY);
      cudaq_rpc_response_t r = read_resp(&rb, slot);
      uint32_t rid = rid_of[slot];
      if (r.status != 0 || r.request_id != rid || r.ptp_timestamp != rid + 5ull || r.result_len != 1 + rid % 100)
        fail_msg("graph request %u: status %d id %u len %u", rid, r.status, r.request_id, r.result_len);
      const uint8_t *pl = resp_payload(&rb, slot);
      for (uint32_t i = 0; i < r.result_len; ++i)
        if (pl[i] != (uint8_t)(rid + i + 1)) fail_msg("graph request %u byte %u", rid, i);
      cudaq_host_ringbuffer_clear_slot(&rb, slot);
    }
    if (k >= n) continue;
    uint64_t tw = now_ns();
    while (!cudaq_host_ringbuffer_slot_available(&rb, slot))
      if (now_ns() - tw > g_wait_ns) fail_msg("graph: slot %u never became available (rx %llx tx %llx)", slot,
                                              (unsigned long long)rb.rx_flags_host[slot],
                                              (unsigned long long)rb.tx_flags_host[slot]);
    uint8_t buf[100];
    uint32_t len = 1 + k % 100;
    for (uint32_t i = 0; i < len; ++i) buf[i] = (uint8_t)(k + i);
    assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&rb, slot, FN_ECHO, buf, len, k, k + 5ull), CUDAQ_OK);
    rid_of[slot] = k;
    cudaq_host_ringbuffer_signal_slot(&rb, slot);
  }
  /* Malformed requests in graph mode: wrong mode answered, unknown dropped. */
  assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&rb, n % S, FN_SUM, NULL, 0, 1, 2), CUDAQ_OK);
  cudaq_host_ringbuffer_signal_slot(&rb, n % S);
  assert_int_equal(wait_tx(&rb, n % S), CUDAQ_TX_READY);
  assert_int_equal(read_resp(&rb, n % S).status, CUDAQ_RPC_ERR_UNSUPPORTED_MODE);
  cudaq_host_ringbuffer_clear_slot(&rb, n % S);
  /* Below the schema's minimum length (1 byte): answered with a mismatch.
   * (The graph dispatcher serves slots in ring order: the next one.) */
  assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&rb, (n + 1) % S, FN_ECHO, NULL, 0, 3, 4), CUDAQ_OK);
  cudaq_host_ringbuffer_signal_slot(&rb, (n + 1) % S);
  assert_int_equal(wait_tx(&rb, (n + 1) % S), CUDAQ_TX_READY);
  assert_int_equal(read_resp(&rb, (n + 1) % S).status, CUDAQ_RPC_ERR_ARG_LEN_MISMATCH);
  cudaq_host_ringbuffer_clear_slot(&rb, (n + 1) % S);
  uint32_t us = (n + 2) % S;
  assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&rb, us, 0x1234u, NULL, 0, 1, 2), CUDAQ_OK);
  cudaq_host_ringbuffer_signal_slot(&rb, us);
  wait_rx_consumed(&rb, us);
  assert_int_equal(cudaq_host_ringbuffer_poll_tx_flag(&rb, us, NULL), CUDAQ_TX_EMPTY);

  uint64_t failures = 0, relaunches = 0;
  CK(cudaq_dispatch_graph_get_info(ctx, &failures, &relaunches));
  assert_int_equal(failures, 0);
  assert_true(relaunches >= n / CUDAQ_GRAPH_DISPATCH_RELAUNCH_EVERY - 1);
  printf("graph launch: %u requests answered, %llu relaunches of the dispatcher, %llu launch failures\n", n,
         (unsigned long long)relaunches, (unsigned long long)failures);
  /* Raise the shutdown flag from another stream: the dispatch graph occupies
   * `s` until it exits, so a copy queued on `s` would wait for it forever. */
  int one = 1;
  cudaStream_t ctl;
  CK(cudaStreamCreateWithFlags(&ctl, cudaStreamNonBlocking));
  CK(cudaMemcpyAsync(flag, &one, sizeof one, cudaMemcpyHostToDevice, ctl));
  CK(cudaStreamSynchronize(ctl));
  CK(cudaStreamDestroy(ctl));
  CK(cudaStreamSynchronize(s)); /* waits for the dispatcher and its tail launches */
  cudaq_dispatcher_counters_t c;
  CK(cudaq_dispatch_kernel_get_counters(stats, &c));
  assert_int_equal(c.processed, n + 2);
  assert_int_equal(c.dropped_unknown_function, 1);
  assert_int_equal(c.err_unsupported_mode, 1);
  assert_int_equal(c.err_arg_len_mismatch, 1);
  assert_int_equal(*stats, n + 2);
  g_graph = nullptr;
  g_stats = nullptr;
  CK(cudaq_destroy_dispatch_graph(ctx));
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  CK(cudaFree(io));
  CK(cudaFree(dt));
  CK(cudaFree(flag));
  CK(cudaFreeHost(stats));
  CK(cudaStreamDestroy(s));
  assert_int_equal(cudaq_host_ringbuffer_free(&rb), CUDAQ_OK);
}

/* ---- unified mode over the emulated NIC ---------------------------------- */
struct unified_fixture {
  cudaq_emu_transport_t *t;
  cudaq_dispatch_manager_t *m;
  cudaq_dispatcher_t *d;
  cudaq_function_entry_t *dt;
  int *flag;
  uint64_t *stats; /* mapped pinned */
};

static void unified_init(unified_fixture *u) {
  assert_int_equal(cudaq_emu_transport_create(8, 256, &u->t), CUDAQ_OK);
  cudaq_dispatcher_config_t c;
  cudaq_dispatcher_config_init(&c);
  c.kernel_type = CUDAQ_KERNEL_UNIFIED;
  c.dispatch_mode = CUDAQ_DISPATCH_DEVICE_CALL; /* num_slots, slot_size may be 0 */
  CK(cudaMalloc(&u->dt, TABLE_SIZE * sizeof *u->dt));
  init_table<<<1, 1>>>(u->dt);
  CK(cudaDeviceSynchronize());
  CK(cudaMalloc(&u->flag, sizeof(int)));
  CK(cudaHostAlloc(&u->stats, sizeof(uint64_t), cudaHostAllocMapped));
  cudaq_function_table_t table = {u->dt, TABLE_SIZE};
  assert_int_equal(cudaq_dispatch_manager_create(&u->m), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_create(u->m, &c, &u->d), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_set_unified_launch(u->d, cudaq_launch_unified_dispatch_emu,
                                                       cudaq_emu_transport_ctx(u->t)),
                   CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_set_function_table(u->d, &table), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_set_control(u->d, u->flag, u->stats), CUDAQ_OK);
}

static void unified_fini(unified_fixture *u) {
  assert_int_equal(cudaq_dispatch_manager_destroy(u->m), CUDAQ_OK); /* stops and destroys the dispatcher */
  assert_int_equal(cudaq_emu_transport_destroy(u->t), CUDAQ_OK);
  CK(cudaFree(u->dt));
  CK(cudaFree(u->flag));
  CK(cudaFreeHost(u->stats));
}

static void test_unified_emu(void **) {
  unified_fixture u;
  unified_init(&u);
  cudaq_emu_transport_t *t = u.t;
  cudaq_dispatcher_t *d = u.d;
  uint64_t *stats = u.stats;
  assert_int_equal(cudaq_dispatcher_start(d), CUDAQ_OK);
  const uint32_t n = scaled(20000);
  uint32_t sent = 0, got = 0;
  while (got < n) {
    if (sent < n) {
      uint8_t buf[200];
      uint32_t len = 1 + sent % 200;
      for (uint32_t i = 0; i < len; ++i) buf[i] = (uint8_t)(sent * 3 + i);
      cudaq_status_t st = cudaq_emu_nic_send(t, sent % 2 ? FN_ECHO : FN_BLOCK, buf, len, sent, ~(uint64_t)sent);
      if (st == CUDAQ_OK) ++sent;
      else assert_int_equal(st, CUDAQ_ERR_UNSUPPORTED); /* ring full: try again */
    }
    const uint8_t *f = cudaq_emu_nic_poll(t);
    if (!f) continue;
    cudaq_rpc_response_t r;
    memcpy(&r, f, sizeof r);
    if (r.magic != CUDAQ_RPC_MAGIC_RESPONSE || r.status != 0 || r.request_id != got ||
        r.ptp_timestamp != ~(uint64_t)got || r.result_len != 1 + got % 200)
      fail_msg("unified response %u: magic %x status %d id %u", got, r.magic, r.status, r.request_id);
    for (uint32_t i = 0; i < r.result_len; ++i) {
      uint8_t v = (uint8_t)(got * 3 + i);
      if (got % 2 == 0) v = (uint8_t)(v ^ (i & 0xFF));
      if (f[24 + i] != v) fail_msg("unified response %u byte %u", got, i);
    }
    cudaq_emu_nic_release(t);
    ++got;
  }
  /* bad magic and unknown function: frames come back unanswered */
  uint8_t junk[8] = {0};
  assert_int_equal(cudaq_emu_nic_send(t, 0xABCDu, junk, 8, 1, 2), CUDAQ_OK);
  const uint8_t *f;
  uint64_t t0 = now_ns();
  while (!(f = cudaq_emu_nic_poll(t)))
    if (now_ns() - t0 > 10000000000ull) fail_msg("unified: unknown function frame never returned");
  cudaq_rpc_header_t h;
  memcpy(&h, f, sizeof h);
  assert_int_equal(h.magic, CUDAQ_RPC_MAGIC_REQUEST); /* not answered */
  cudaq_emu_nic_release(t);
  assert_int_equal(cudaq_dispatcher_stop(d), CUDAQ_OK);
  cudaq_dispatcher_counters_t cnt;
  assert_int_equal(cudaq_dispatcher_get_counters(d, &cnt), CUDAQ_OK);
  assert_int_equal(cnt.processed, n);
  assert_int_equal(cnt.dropped_unknown_function, 1);
  assert_int_equal(*stats, n);
  unified_fini(&u);
}

/* Unified mode: stop while frames are queued answers every frame delivered
 * before the stop; a restart on the same transport continues at its
 * position; a fresh transport starts at frame 0 even though the stats
 * buffer (and the counters) carry on. Variable-size schemas too. */
static void unified_roundtrip(cudaq_emu_transport_t *t, uint32_t fn, uint32_t len, uint32_t rid, int32_t want_status) {
  uint8_t buf[64];
  memset(buf, (int)rid, sizeof buf);
  assert_int_equal(cudaq_emu_nic_send(t, fn, buf, len, rid, rid), CUDAQ_OK);
  const uint8_t *f;
  uint64_t t0 = now_ns();
  while (!(f = cudaq_emu_nic_poll(t)))
    if (now_ns() - t0 > g_wait_ns) fail_msg("unified: no answer to request %u", rid);
  cudaq_rpc_response_t r;
  memcpy(&r, f, sizeof r);
  assert_int_equal(r.magic, CUDAQ_RPC_MAGIC_RESPONSE);
  assert_int_equal(r.request_id, rid);
  assert_int_equal(r.status, want_status);
  assert_int_equal(r.result_len, want_status ? 0 : len);
  cudaq_emu_nic_release(t);
}

static void test_unified_shutdown_busy_new_transport(void **) {
  unified_fixture u;
  unified_init(&u);
  cudaq_emu_transport_t *t = u.t, *t2;
  assert_int_equal(cudaq_emu_transport_create(8, 256, &t2), CUDAQ_OK);
  cudaq_dispatcher_t *d = u.d;
  assert_int_equal(cudaq_dispatcher_start(d), CUDAQ_OK);
  /* Busy: six slow frames (about 2 ms each) queued, then stop at once. */
  uint8_t p[4] = {1, 2, 3, 4};
  for (uint32_t k = 0; k < 6; ++k) assert_int_equal(cudaq_emu_nic_send(t, FN_SLOW, p, 4, k, k), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_stop(d), CUDAQ_OK);
  for (uint32_t k = 0; k < 6; ++k) {
    const uint8_t *f = cudaq_emu_nic_poll(t);
    if (!f) fail_msg("unified: frame %u delivered before the stop was not answered", k);
    cudaq_rpc_response_t r;
    memcpy(&r, f, sizeof r);
    assert_int_equal(r.magic, CUDAQ_RPC_MAGIC_RESPONSE);
    assert_int_equal(r.request_id, k);
    cudaq_emu_nic_release(t);
  }
  /* Restart on the same transport: continues at frame 6. */
  assert_int_equal(cudaq_dispatcher_start(d), CUDAQ_OK);
  unified_roundtrip(t, FN_ECHO, 8, 100, 0);
  unified_roundtrip(t, FN_VAR, 3, 101, CUDAQ_RPC_ERR_ARG_LEN_MISMATCH);
  unified_roundtrip(t, FN_VAR, 4, 102, 0);
  unified_roundtrip(t, FN_VAR, 40, 103, 0);
  assert_int_equal(cudaq_dispatcher_stop(d), CUDAQ_OK);
  /* A fresh transport: frame 0 again. */
  assert_int_equal(cudaq_dispatcher_set_unified_launch(d, cudaq_launch_unified_dispatch_emu, cudaq_emu_transport_ctx(t2)),
                   CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_start(d), CUDAQ_OK);
  for (uint32_t k = 0; k < 20; ++k) unified_roundtrip(t2, FN_ECHO, 1 + k, 200 + k, 0);
  assert_int_equal(cudaq_dispatcher_stop(d), CUDAQ_OK);
  cudaq_dispatcher_counters_t cnt;
  assert_int_equal(cudaq_dispatcher_get_counters(d, &cnt), CUDAQ_OK);
  assert_int_equal(cnt.processed, 6 + 4 + 20);
  assert_int_equal(cnt.err_arg_len_mismatch, 1);
  assert_int_equal(*u.stats, 30);
  unified_fini(&u);
  assert_int_equal(cudaq_emu_transport_destroy(t2), CUDAQ_OK);
}

int main(void) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("skipped: no CUDA device\n");
    return 77;
  }
  const char *sc = getenv("CUDAQ_TEST_SCALE");
  if (sc) g_scale = atof(sc);
  if (getenv("CUDAQ_TEST_SLOW")) g_wait_ns = 60000000000ull; /* sanitizer runs are slow */
  const char *filter = getenv("CUDAQ_TEST_FILTER");
  if (filter) cmocka_set_test_filter(filter);
  CK(cudaSetDeviceFlags(cudaDeviceMapHost));
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_regular_all_slots_many_requests),
      cmocka_unit_test(test_regular_multi_block),
      cmocka_unit_test(test_malformed_inputs_and_echo),
      cmocka_unit_test(test_payload_sizes),
      cmocka_unit_test(test_variable_schema_min_len),
      cmocka_unit_test(test_counters_fresh_dispatcher_same_stats),
      cmocka_unit_test(test_cooperative_grid_handler),
      cmocka_unit_test(test_in_place_ring),
      cmocka_unit_test(test_shutdown_idle_busy_restart),
      cmocka_unit_test(test_out_of_order_slots),
      cmocka_unit_test(test_two_dispatchers),
      cmocka_unit_test(test_device_wiring_errors),
      cmocka_unit_test(test_launch_sizes_too_large),
      cmocka_unit_test(test_graph_launch_100k),
      cmocka_unit_test(test_unified_emu),
      cmocka_unit_test(test_unified_shutdown_busy_new_transport),
  };
  return cmocka_run_group_tests_name("gpu_dispatch", tests, NULL, NULL);
}
