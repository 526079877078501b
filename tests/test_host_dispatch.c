/*
 * test_host_dispatch.c - the host-thread dispatcher end to end
 * (spec: realtime-host-api.txt, "Function ID semantics", "Memory Layout and
 * Ring Buffer Wiring"; realtime-message-protocol.txt "Request ID Semantics",
 * "PTP Timestamp Semantics", "Status Codes", "Size Constraints").
 *
 * Every request is checked: its response carries its own request_id,
 * ptp_timestamp and result, and the counters account for every request.
 */

#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_util.h"

#define SLOT_SIZE 256u

typedef struct {
  cudaq_dispatch_manager_t *mgr;
  cudaq_dispatcher_t *d;
  cudaq_ringbuffer_t rb;
  cudaq_function_entry_t entries[8];
  volatile int shutdown;
  uint64_t stats[1];
  uint32_t num_slots;
} fixture_t;

static int h_cpu(const void *args, void *result, uint32_t arg_len, uint32_t max_result_len,
                 uint32_t *result_len);
static int h_slow(const void *args, void *result, uint32_t arg_len, uint32_t max_result_len,
                  uint32_t *result_len);
#define FN_CPU cudaq_fnv1a_hash("which_cpu")
#define FN_SLOW cudaq_fnv1a_hash("slow_echo")

static void fixture_init(fixture_t *f, uint32_t num_slots, uint32_t ring_flags) {
  memset(f, 0, sizeof *f);
  f->num_slots = num_slots;
  cudaq_dispatcher_config_t c;
  cudaq_dispatcher_config_init(&c);
  c.num_slots = num_slots;
  c.slot_size = SLOT_SIZE;
  c.dispatch_path = CUDAQ_DISPATCH_PATH_HOST;
  c.dispatch_mode = CUDAQ_DISPATCH_HOST_CALL;
  assert_int_equal(cudaq_dispatch_manager_create(&f->mgr), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_create(f->mgr, &c, &f->d), CUDAQ_OK);
  assert_int_equal(cudaq_host_ringbuffer_alloc(&f->rb, num_slots, SLOT_SIZE,
                                               ring_flags | CUDAQ_RING_ALLOC_HOST),
                   CUDAQ_OK);
  test_table(f->entries);
  f->entries[6] = test_entry(FN_CPU, h_cpu);
  f->entries[7] = test_entry(FN_SLOW, h_slow);
  cudaq_function_table_t t = {f->entries, 8};
  assert_int_equal(cudaq_dispatcher_set_ringbuffer(f->d, &f->rb), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_set_function_table(f->d, &t), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_set_control(f->d, &f->shutdown, f->stats), CUDAQ_OK);
}

static void fixture_fini(fixture_t *f) {
  assert_int_equal(cudaq_dispatcher_destroy(f->d), CUDAQ_OK);
  assert_int_equal(cudaq_dispatch_manager_destroy(f->mgr), CUDAQ_OK);
  assert_int_equal(cudaq_host_ringbuffer_free(&f->rb), CUDAQ_OK);
}

/* Waits (bounded: 10 s) for a slot's response; fails the test on time-out. */
static cudaq_tx_status_t wait_tx(const cudaq_ringbuffer_t *rb, uint32_t slot) {
  uint64_t t0 = test_now_ns();
  cudaq_tx_status_t st;
  while ((st = cudaq_host_ringbuffer_poll_tx_flag(rb, slot, NULL)) == CUDAQ_TX_EMPTY) {
    if (test_now_ns() - t0 > 10000000000ull) fail_msg("no response in slot %u after 10 s", slot);
    test_spin();
  }
  return st;
}

/* Waits (bounded) until the dispatcher has consumed the slot (RX cleared). */
static void wait_rx_consumed(const cudaq_ringbuffer_t *rb, uint32_t slot) {
  uint64_t t0 = test_now_ns();
  while (atomic_load_explicit((_Atomic uint64_t *)(uintptr_t)&rb->rx_flags_host[slot],
                              memory_order_acquire) != 0) {
    if (test_now_ns() - t0 > 10000000000ull) fail_msg("slot %u never consumed", slot);
    test_spin();
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

/* Sends one request and waits for its outcome; returns the TX status. */
static cudaq_tx_status_t roundtrip(fixture_t *f, uint32_t slot, uint32_t fn, const void *payload,
                                   uint32_t len, uint32_t rid, uint64_t ptp) {
  assert_true(cudaq_host_ringbuffer_slot_available(&f->rb, slot));
  assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&f->rb, slot, fn, payload, len, rid, ptp),
                   CUDAQ_OK);
  cudaq_host_ringbuffer_signal_slot(&f->rb, slot);
  return wait_tx(&f->rb, slot);
}

static int h_cpu(const void *args, void *result, uint32_t arg_len, uint32_t max_result_len,
                 uint32_t *result_len) {
  (void)args, (void)arg_len, (void)max_result_len;
  cpu_set_t allowed;
  int v[2] = {sched_getcpu(), -1};
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) v[1] = CPU_COUNT(&allowed);
  memcpy(result, v, sizeof v);
  *result_len = sizeof v;
  return 0;
}

static int h_slow(const void *args, void *result, uint32_t arg_len, uint32_t max_result_len,
                  uint32_t *result_len) {
  usleep(2000);
  return h_echo(args, result, arg_len, max_result_len, result_len);
}

/* Every slot, many laps: each response is the request's own (payload
 * pattern from request_id), echoing request_id and ptp_timestamp. */
static void test_all_slots_many_requests(void **state) {
  (void)state;
  fixture_t f;
  fixture_init(&f, 16, 0);
  assert_int_equal(cudaq_dispatcher_start(f.d), CUDAQ_OK);
  const uint32_t N = 20000;
  uint32_t inflight_rid[16];
  for (uint32_t k = 0; k < N + 16; ++k) {
    uint32_t slot = k % 16;
    if (k >= 16) { /* harvest the previous occupant of this slot */
      uint32_t rid = inflight_rid[slot];
      assert_int_equal(wait_tx(&f.rb, slot), CUDAQ_TX_READY);
      cudaq_rpc_response_t r = read_resp(&f.rb, slot);
      assert_int_equal(r.magic, CUDAQ_RPC_MAGIC_RESPONSE);
      assert_int_equal(r.status, 0);
      assert_int_equal(r.request_id, rid);
      assert_true(r.ptp_timestamp == ((uint64_t)rid << 32 | 0xC0FFEEu));
      if (rid % 2) {
        int32_t sum;
        assert_int_equal(r.result_len, 4);
        memcpy(&sum, resp_payload(&f.rb, slot), 4);
        assert_int_equal(sum, (int32_t)(4 * rid + 6));
      } else {
        uint8_t expect[64];
        for (int i = 0; i < 64; ++i) expect[i] = (uint8_t)(rid * 31 + (uint32_t)i);
        assert_int_equal(r.result_len, 1 + rid % 64);
        assert_memory_equal(resp_payload(&f.rb, slot), expect, r.result_len);
      }
      /* The TX flag holds the TX slot's address. */
      assert_int_equal(f.rb.tx_flags_host[slot],
                       (uint64_t)(uintptr_t)(f.rb.tx_data + (size_t)slot * f.rb.tx_stride_sz));
      cudaq_host_ringbuffer_clear_slot(&f.rb, slot);
    }
    if (k >= N) continue;
    while (!cudaq_host_ringbuffer_slot_available(&f.rb, slot)) test_spin();
    uint32_t rid = k * 7 + 1000;
    if (rid % 2) {
      int32_t v[4] = {(int32_t)rid, (int32_t)rid + 1, (int32_t)rid + 2, (int32_t)rid + 3};
      assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&f.rb, slot, FN_SUM, v, 16, rid,
                                                               (uint64_t)rid << 32 | 0xC0FFEEu),
                       CUDAQ_OK);
    } else {
      uint8_t p[64];
      for (int i = 0; i < 64; ++i) p[i] = (uint8_t)(rid * 31 + (uint32_t)i);
      assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&f.rb, slot, FN_ECHO, p, 1 + rid % 64,
                                                               rid, (uint64_t)rid << 32 | 0xC0FFEEu),
                       CUDAQ_OK);
    }
    inflight_rid[slot] = rid;
    cudaq_host_ringbuffer_signal_slot(&f.rb, slot);
  }
  assert_int_equal(cudaq_dispatcher_stop(f.d), CUDAQ_OK);
  uint64_t n = 0;
  assert_int_equal(cudaq_dispatcher_get_processed(f.d, &n), CUDAQ_OK);
  assert_int_equal(n, N);
  assert_int_equal(f.stats[0], N);
  cudaq_dispatcher_counters_t c;
  assert_int_equal(cudaq_dispatcher_get_counters(f.d, &c), CUDAQ_OK);
  assert_int_equal(c.processed, N);
  assert_int_equal(c.dropped_bad_magic + c.dropped_unknown_function + c.handler_errors, 0);
  fixture_fini(&f);
}

/* Each malformed input gets its defined outcome, and every answered one
 * echoes request_id and ptp_timestamp (spec: the echo holds on every path). */
static void test_malformed_inputs_and_echo(void **state) {
  (void)state;
  fixture_t f;
  fixture_init(&f, 4, 0);
  assert_int_equal(cudaq_dispatcher_start(f.d), CUDAQ_OK);
  const uint64_t ptp = 0xFEEDFACECAFEBEEFull;
  uint8_t buf[SLOT_SIZE];
  memset(buf, 0x11, sizeof buf);
  cudaq_rpc_response_t r;

  /* 1. Bad magic: consumed and cleared, no response, counted. */
  assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&f.rb, 0, FN_ECHO, buf, 8, 1, ptp), CUDAQ_OK);
  uint32_t bad_magic = 0x12345678u;
  memcpy(f.rb.rx_data_host, &bad_magic, 4);
  cudaq_host_ringbuffer_signal_slot(&f.rb, 0);
  wait_rx_consumed(&f.rb, 0);
  assert_int_equal(cudaq_host_ringbuffer_poll_tx_flag(&f.rb, 0, NULL), CUDAQ_TX_EMPTY);

  /* 2. Unknown function_id: cleared without a response, counted. */
  assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&f.rb, 1, 0xBADF00Du, buf, 8, 2, ptp), CUDAQ_OK);
  cudaq_host_ringbuffer_signal_slot(&f.rb, 1);
  wait_rx_consumed(&f.rb, 1);
  assert_int_equal(cudaq_host_ringbuffer_poll_tx_flag(&f.rb, 1, NULL), CUDAQ_TX_EMPTY);

  /* 3. arg_len beyond the slot: answered with CUDAQ_RPC_ERR_PAYLOAD_TOO_LARGE.
   * The helper refuses such a write, so the header is forged by hand. */
  assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&f.rb, 2, FN_ECHO, buf, 8, 3, ptp), CUDAQ_OK);
  uint32_t huge = SLOT_SIZE - CUDAQ_RPC_HEADER_SIZE + 1;
  memcpy(f.rb.rx_data_host + 2 * f.rb.rx_stride_sz + 8, &huge, 4);
  cudaq_host_ringbuffer_signal_slot(&f.rb, 2);
  assert_int_equal(wait_tx(&f.rb, 2), CUDAQ_TX_READY);
  r = read_resp(&f.rb, 2);
  assert_int_equal(r.status, CUDAQ_RPC_ERR_PAYLOAD_TOO_LARGE);
  assert_int_equal(r.result_len, 0);
  assert_int_equal(r.request_id, 3);
  assert_true(r.ptp_timestamp == ptp);
  cudaq_host_ringbuffer_clear_slot(&f.rb, 2);
  /* The largest arg_len that fits is accepted. */
  assert_int_equal(roundtrip(&f, 2, FN_ECHO, buf, SLOT_SIZE - 24, 30, ptp), CUDAQ_TX_READY);
  r = read_resp(&f.rb, 2);
  assert_int_equal(r.status, 0);
  assert_int_equal(r.result_len, SLOT_SIZE - 24);
  cudaq_host_ringbuffer_clear_slot(&f.rb, 2);
  /* 0xFFFFFFFF does not wrap around any bound check. */
  assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&f.rb, 2, FN_ECHO, buf, 8, 31, ptp), CUDAQ_OK);
  huge = 0xFFFFFFFFu;
  memcpy(f.rb.rx_data_host + 2 * f.rb.rx_stride_sz + 8, &huge, 4);
  cudaq_host_ringbuffer_signal_slot(&f.rb, 2);
  assert_int_equal(wait_tx(&f.rb, 2), CUDAQ_TX_READY);
  assert_int_equal(read_resp(&f.rb, 2).status, CUDAQ_RPC_ERR_PAYLOAD_TOO_LARGE);
  cudaq_host_ringbuffer_clear_slot(&f.rb, 2);

  /* 4. arg_len differs from the size the schema fixes (16 bytes). */
  assert_int_equal(roundtrip(&f, 3, FN_SUM, buf, 12, 4, ptp), CUDAQ_TX_READY);
  r = read_resp(&f.rb, 3);
  assert_int_equal(r.status, CUDAQ_RPC_ERR_ARG_LEN_MISMATCH);
  assert_int_equal(r.request_id, 4);
  assert_true(r.ptp_timestamp == ptp);
  cudaq_host_ringbuffer_clear_slot(&f.rb, 3);

  /* 5. Handler error: its positive status and result bytes propagate. */
  assert_int_equal(roundtrip(&f, 0, FN_FAIL, buf, 3, 5, ptp + 5), CUDAQ_TX_READY);
  r = read_resp(&f.rb, 0);
  assert_int_equal(r.status, 7);
  assert_int_equal(r.result_len, 1);
  assert_int_equal(resp_payload(&f.rb, 0)[0], 0xEE);
  assert_int_equal(r.request_id, 5);
  assert_true(r.ptp_timestamp == ptp + 5);
  cudaq_host_ringbuffer_clear_slot(&f.rb, 0);

  /* 6. Handler claims more result bytes than the TX slot holds. */
  assert_int_equal(roundtrip(&f, 1, FN_GREEDY, buf, 0, 6, ptp), CUDAQ_TX_READY);
  r = read_resp(&f.rb, 1);
  assert_int_equal(r.status, CUDAQ_RPC_ERR_RESULT_TOO_LARGE);
  assert_int_equal(r.result_len, 0);
  assert_int_equal(r.request_id, 6);
  cudaq_host_ringbuffer_clear_slot(&f.rb, 1);

  /* 7. A DEVICE_CALL entry cannot run on the host thread. */
  assert_int_equal(roundtrip(&f, 2, FN_DEVICE, buf, 4, 7, ptp), CUDAQ_TX_READY);
  r = read_resp(&f.rb, 2);
  assert_int_equal(r.status, CUDAQ_RPC_ERR_UNSUPPORTED_MODE);
  assert_int_equal(r.request_id, 7);
  cudaq_host_ringbuffer_clear_slot(&f.rb, 2);

  /* 8. An RX flag with an arbitrary nonzero value (not the slot address)
   * still means "ready": the slot is found by index, never by the value. */
  assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&f.rb, 3, FN_ECHO, buf, 4, 8, ptp), CUDAQ_OK);
  atomic_store_explicit((_Atomic uint64_t *)(uintptr_t)&f.rb.rx_flags_host[3], 0xDEADBEEFull,
                        memory_order_release);
  assert_int_equal(wait_tx(&f.rb, 3), CUDAQ_TX_READY);
  assert_int_equal(read_resp(&f.rb, 3).request_id, 8);
  cudaq_host_ringbuffer_clear_slot(&f.rb, 3);

  assert_int_equal(cudaq_dispatcher_stop(f.d), CUDAQ_OK);
  cudaq_dispatcher_counters_t c;
  assert_int_equal(cudaq_dispatcher_get_counters(f.d, &c), CUDAQ_OK);
  assert_int_equal(c.dropped_bad_magic, 1);
  assert_int_equal(c.dropped_unknown_function, 1);
  assert_int_equal(c.err_payload_too_large, 2);
  assert_int_equal(c.err_arg_len_mismatch, 1);
  assert_int_equal(c.err_result_too_large, 1);
  assert_int_equal(c.err_unsupported_mode, 1);
  assert_int_equal(c.handler_errors, 1);
  assert_int_equal(c.processed, 8); /* answered: 3, 3b, 3c, 4, 5, 6, 7, 8 */
  assert_int_equal(f.stats[0], 8);
  fixture_fini(&f);
}

/* In-place ring: TX is RX, the response overwrites the request; header
 * fields are read before the handler runs. */
static void test_in_place_response(void **state) {
  (void)state;
  fixture_t f;
  fixture_init(&f, 4, CUDAQ_RING_ALLOC_IN_PLACE);
  assert_ptr_equal(f.rb.tx_data, f.rb.rx_data);
  assert_int_equal(cudaq_dispatcher_start(f.d), CUDAQ_OK);
  for (uint32_t k = 0; k < 400; ++k) {
    uint32_t slot = k % 4;
    uint8_t p[100];
    for (int i = 0; i < 100; ++i) p[i] = (uint8_t)(k + (uint32_t)i);
    assert_int_equal(roundtrip(&f, slot, FN_INPLACE, p, 100, k, 1000 + k), CUDAQ_TX_READY);
    cudaq_rpc_response_t r = read_resp(&f.rb, slot);
    assert_int_equal(r.magic, CUDAQ_RPC_MAGIC_RESPONSE);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.request_id, k);
    assert_true(r.ptp_timestamp == 1000 + k);
    assert_int_equal(r.result_len, 100);
    for (int i = 0; i < 100; ++i) assert_int_equal(resp_payload(&f.rb, slot)[i], (uint8_t)~p[i]);
    cudaq_host_ringbuffer_clear_slot(&f.rb, slot);
  }
  fixture_fini(&f); /* destroy stops the running dispatcher */
}

/* Slots signalled out of ring order (a producer that skips slots) are
 * still served: the idle dispatcher scans the ring. */
static void test_out_of_order_slots(void **state) {
  (void)state;
  fixture_t f;
  fixture_init(&f, 8, 0);
  assert_int_equal(cudaq_dispatcher_start(f.d), CUDAQ_OK);
  const uint32_t order[] = {5, 2, 7, 3};
  uint8_t p[4] = {9, 8, 7, 6};
  for (int i = 0; i < 4; ++i) {
    assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&f.rb, order[i], FN_ECHO, p, 4,
                                                             order[i] * 10, 0),
                     CUDAQ_OK);
    cudaq_host_ringbuffer_signal_slot(&f.rb, order[i]);
  }
  for (int i = 0; i < 4; ++i) {
    assert_int_equal(wait_tx(&f.rb, order[i]), CUDAQ_TX_READY);
    assert_int_equal(read_resp(&f.rb, order[i]).request_id, order[i] * 10);
    cudaq_host_ringbuffer_clear_slot(&f.rb, order[i]);
  }
  /* Slot 0 was never signalled and is untouched. */
  assert_int_equal(cudaq_host_ringbuffer_poll_tx_flag(&f.rb, 0, NULL), CUDAQ_TX_EMPTY);
  assert_int_equal(cudaq_dispatcher_stop(f.d), CUDAQ_OK);
  assert_int_equal(f.stats[0], 4);
  fixture_fini(&f);
}

/* Stop drains requests already signalled; stop while idle; restart. */
static void test_shutdown_idle_busy_and_restart(void **state) {
  (void)state;
  fixture_t f;
  fixture_init(&f, 8, 0);
  /* idle */
  assert_int_equal(cudaq_dispatcher_start(f.d), CUDAQ_OK);
  usleep(1000);
  assert_int_equal(cudaq_dispatcher_stop(f.d), CUDAQ_OK);
  /* busy: 6 slow requests queued, stop right away: all are answered. */
  assert_int_equal(cudaq_dispatcher_start(f.d), CUDAQ_OK);
  uint8_t p[4] = {1, 2, 3, 4};
  for (uint32_t s = 0; s < 6; ++s) {
    assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&f.rb, s, FN_SLOW, p, 4, s, s), CUDAQ_OK);
    cudaq_host_ringbuffer_signal_slot(&f.rb, s);
  }
  assert_int_equal(cudaq_dispatcher_stop(f.d), CUDAQ_OK);
  for (uint32_t s = 0; s < 6; ++s) {
    assert_int_equal(cudaq_host_ringbuffer_poll_tx_flag(&f.rb, s, NULL), CUDAQ_TX_READY);
    assert_int_equal(read_resp(&f.rb, s).request_id, s);
    assert_int_equal(f.rb.rx_flags_host[s], 0);
    cudaq_host_ringbuffer_clear_slot(&f.rb, s);
  }
  uint64_t n;
  assert_int_equal(cudaq_dispatcher_get_processed(f.d, &n), CUDAQ_OK);
  assert_int_equal(n, 6);
  /* Restart: the ring continues at slot 6. */
  assert_int_equal(cudaq_dispatcher_start(f.d), CUDAQ_OK);
  assert_int_equal(f.shutdown, 0);
  for (uint32_t s = 6; s < 8; ++s) {
    assert_int_equal(roundtrip(&f, s, FN_ECHO, p, 4, 100 + s, 0), CUDAQ_TX_READY);
    assert_int_equal(read_resp(&f.rb, s).request_id, 100 + s);
    cudaq_host_ringbuffer_clear_slot(&f.rb, s);
  }
  assert_int_equal(cudaq_dispatcher_stop(f.d), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_get_processed(f.d, &n), CUDAQ_OK);
  assert_int_equal(n, 8);
  fixture_fini(&f);
}

/* The dispatcher thread runs on the core it is pinned to, and by default
 * not (only) on the caller's core. */
static void test_affinity(void **state) {
  (void)state;
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  fixture_t f;
  fixture_init(&f, 2, 0);
  int target = (int)(ncpu - 1);
  assert_int_equal(cudaq_dispatcher_set_host_affinity(f.d, target), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_start(f.d), CUDAQ_OK);
  assert_int_equal(roundtrip(&f, 0, FN_CPU, NULL, 0, 1, 0), CUDAQ_TX_READY);
  int v[2];
  memcpy(v, resp_payload(&f.rb, 0), sizeof v);
  assert_int_equal(v[0], target);
  assert_int_equal(v[1], 1);
  cudaq_host_ringbuffer_clear_slot(&f.rb, 0);
  assert_int_equal(cudaq_dispatcher_stop(f.d), CUDAQ_OK);

  if (ncpu > 1) {
    /* Caller pinned to CPU 0; unpinned dispatcher must not inherit that. */
    cpu_set_t only0, saved;
    pthread_getaffinity_np(pthread_self(), sizeof saved, &saved);
    CPU_ZERO(&only0);
    CPU_SET(0, &only0);
    assert_int_equal(pthread_setaffinity_np(pthread_self(), sizeof only0, &only0), 0);
    assert_int_equal(cudaq_dispatcher_set_host_affinity(f.d, -1), CUDAQ_OK);
    assert_int_equal(cudaq_dispatcher_start(f.d), CUDAQ_OK);
    assert_int_equal(roundtrip(&f, 1, FN_CPU, NULL, 0, 2, 0), CUDAQ_TX_READY);
    memcpy(v, resp_payload(&f.rb, 1), sizeof v);
    assert_true(v[1] > 1); /* may run anywhere, not only on the caller's core */
    cudaq_host_ringbuffer_clear_slot(&f.rb, 1);
    assert_int_equal(cudaq_dispatcher_stop(f.d), CUDAQ_OK);
    pthread_setaffinity_np(pthread_self(), sizeof saved, &saved);
  }
  fixture_fini(&f);
}

/* Several dispatchers of one manager, side by side, each with its own
 * ring and producer thread. */
typedef struct {
  fixture_t *f;
  uint32_t n;
  int ok;
} producer_arg_t;

static void *producer_main(void *p) {
  producer_arg_t *a = p;
  fixture_t *f = a->f;
  a->ok = 1;
  for (uint32_t k = 0; k < a->n; ++k) {
    uint32_t slot = k % f->num_slots;
    uint32_t v = k ^ 0x5A5A5A5Au;
    if (cudaq_host_ringbuffer_write_rpc_request(&f->rb, slot, FN_ECHO, &v, 4, k, k) != CUDAQ_OK) a->ok = 0;
    cudaq_host_ringbuffer_signal_slot(&f->rb, slot);
    uint64_t t0 = test_now_ns();
    while (cudaq_host_ringbuffer_poll_tx_flag(&f->rb, slot, NULL) != CUDAQ_TX_READY)
      if (test_now_ns() - t0 > 10000000000ull) { a->ok = 0; return NULL; } else test_spin();
    cudaq_rpc_response_t r = read_resp(&f->rb, slot);
    uint32_t got;
    memcpy(&got, resp_payload(&f->rb, slot), 4);
    if (r.request_id != k || r.status != 0 || got != v) a->ok = 0;
    cudaq_host_ringbuffer_clear_slot(&f->rb, slot);
  }
  return NULL;
}

static void test_several_dispatchers(void **state) {
  (void)state;
  enum { K = 3 };
  fixture_t f[K];
  pthread_t th[K];
  producer_arg_t a[K];
  for (int i = 0; i < K; ++i) {
    fixture_init(&f[i], 4, 0);
    assert_int_equal(cudaq_dispatcher_start(f[i].d), CUDAQ_OK);
  }
  for (int i = 0; i < K; ++i) {
    a[i].f = &f[i];
    a[i].n = 3000;
    pthread_create(&th[i], NULL, producer_main, &a[i]);
  }
  for (int i = 0; i < K; ++i) pthread_join(th[i], NULL);
  for (int i = 0; i < K; ++i) {
    assert_true(a[i].ok);
    assert_int_equal(cudaq_dispatcher_stop(f[i].d), CUDAQ_OK);
    assert_int_equal(f[i].stats[0], 3000);
    fixture_fini(&f[i]);
  }
}

/* Two dispatchers under one manager, and the manager destroyed while they
 * run: it stops and frees them. */
static void test_manager_destroy_running(void **state) {
  (void)state;
  cudaq_dispatch_manager_t *m;
  cudaq_ringbuffer_t rb[2];
  cudaq_function_entry_t e[6];
  test_table(e);
  cudaq_function_table_t t = {e, 6};
  volatile int sd[2] = {0, 0};
  uint64_t stats[2];
  assert_int_equal(cudaq_dispatch_manager_create(&m), CUDAQ_OK);
  for (int i = 0; i < 2; ++i) {
    cudaq_dispatcher_config_t c;
    cudaq_dispatcher_t *d;
    cudaq_dispatcher_config_init(&c);
    c.num_slots = 2; c.slot_size = 64; c.dispatch_path = CUDAQ_DISPATCH_PATH_HOST;
    assert_int_equal(cudaq_dispatcher_create(m, &c, &d), CUDAQ_OK);
    assert_int_equal(cudaq_host_ringbuffer_alloc(&rb[i], 2, 64, CUDAQ_RING_ALLOC_HOST), CUDAQ_OK);
    assert_int_equal(cudaq_dispatcher_set_ringbuffer(d, &rb[i]), CUDAQ_OK);
    assert_int_equal(cudaq_dispatcher_set_function_table(d, &t), CUDAQ_OK);
    assert_int_equal(cudaq_dispatcher_set_control(d, &sd[i], &stats[i]), CUDAQ_OK);
    assert_int_equal(cudaq_dispatcher_start(d), CUDAQ_OK);
  }
  assert_int_equal(cudaq_dispatch_manager_destroy(m), CUDAQ_OK);
  assert_int_equal(sd[0], 1);
  assert_int_equal(sd[1], 1);
  for (int i = 0; i < 2; ++i) assert_int_equal(cudaq_host_ringbuffer_free(&rb[i]), CUDAQ_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_all_slots_many_requests),
      cmocka_unit_test(test_malformed_inputs_and_echo),
      cmocka_unit_test(test_in_place_response),
      cmocka_unit_test(test_out_of_order_slots),
      cmocka_unit_test(test_shutdown_idle_busy_and_restart),
      cmocka_unit_test(test_affinity),
      cmocka_unit_test(test_several_dispatchers),
      cmocka_unit_test(test_manager_destroy_running),
  };
  return cmocka_run_group_tests_name("host_dispatch", tests, NULL, NULL);
}
