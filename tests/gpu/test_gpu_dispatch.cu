/*
 * test_gpu_dispatch.cu - the device dispatch path end to end on a GPU
 * (spec: realtime-host-api.txt, "Kernel Launch Helper Functions", "Unified
 * Dispatch Mode"; realtime-message-protocol
 * "Request ID Semantics", "PTP Timestamp Semantics", "Status Codes").
 *
 * Without a CUDA device: prints "skipped: no CUDA device" and exits 77.
 * CUDAQ_TEST_SCALE (default 1.0) scales request counts (compute-sanitizer
 * runs use a small scale: its instrumentation slows kernels 100x).
 * The graph-launch dispatcher's tests are in test_graph_dispatch.cu.
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

#include <vector>
#include <unistd.h>

extern "C" {
#include <cmocka.h>
}

#include "cudaq/realtime/cudaq_realtime.h"
#include "cudaq/realtime/dispatch_kernel.h"
#include "cudaq/realtime/emu_transport.h"

#include "gpu_dispatch_fixture.cuh"

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

/* Stops the fixture's dispatcher and checks that its counters and stats[0]
 * hold exactly n answered requests. */
static void stop_expect_processed(fixture *f, uint64_t n) {
  assert_int_equal(cudaq_dispatcher_stop(f->d), CUDAQ_OK);
  cudaq_dispatcher_counters_t c;
  assert_int_equal(cudaq_dispatcher_get_counters(f->d, &c), CUDAQ_OK);
  assert_int_equal(c.processed, n);
  assert_int_equal(*f->h_stats, n);
}

/* Spec (realtime-host-api, cudaq_dispatcher_get_processed: "reads the
 * processed-packet counter ... for throughput tracking"): while the
 * dispatcher runs, stats[0] never counts a request before its response,
 * and becomes exact once the dispatcher idles, with no stop. The kernels
 * add answers to the count in batches (every 64, and at the first poll
 * that finds nothing); n and n + 1 requests (1,000 and 1,001 at full
 * scale) are not both multiples of the batch. One block and four blocks
 * (each block flushes its own batch). */
static void check_processed_while_running(uint32_t blocks) {
  fixture f;
  fixture_init(&f, 16, 256, CUDAQ_KERNEL_REGULAR, blocks, 32);
  assert_int_equal(cudaq_dispatcher_start(f.d), CUDAQ_OK);
  uint64_t total = 0;
  const uint32_t n1 = scaled(1000) < 100 ? 100 : scaled(1000);
  for (uint32_t n : {n1, n1 + 1, 1u}) {
    stream_and_check(&f, n); /* every response seen */
    total += n;
    uint64_t seen = 0;
    assert_int_equal(cudaq_dispatcher_get_processed(f.d, &seen), CUDAQ_OK);
    assert_true(seen <= total);
    assert_int_equal(wait_processed(f.d, total), total);
  }
  stop_expect_processed(&f, total);
  fixture_fini(&f);
}
static void test_processed_exact_when_idle(void **) {
  check_processed_while_running(1);
  check_processed_while_running(4);
}

/* Several blocks: block b serves slots b, b+4, ...; requests still all answered. */
static void test_regular_multi_block(void **) {
  fixture f;
  fixture_init(&f, 16, 256, CUDAQ_KERNEL_REGULAR, 4, 32);
  assert_int_equal(cudaq_dispatcher_start(f.d), CUDAQ_OK);
  const uint32_t n = scaled(20000);
  stream_and_check(&f, n);
  /* Four blocks count into one set of counters: exact after the stop. */
  stop_expect_processed(&f, n);
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
  write_forged_request(&f.rb, 0, FN_ECHO, buf, 8, 1, ptp, 0, 0x12345678u);
  cudaq_host_ringbuffer_signal_slot(&f.rb, 0);
  wait_dropped(&f.rb, 0);
  assert_int_equal(cudaq_host_ringbuffer_poll_tx_flag(&f.rb, 0, NULL), CUDAQ_TX_EMPTY);
  /* unknown function: cleared, no response */
  assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&f.rb, 1, 0xBADF00Du, buf, 8, 2, ptp), CUDAQ_OK);
  cudaq_host_ringbuffer_signal_slot(&f.rb, 1);
  wait_dropped(&f.rb, 1);
  assert_int_equal(cudaq_host_ringbuffer_poll_tx_flag(&f.rb, 1, NULL), CUDAQ_TX_EMPTY);
  /* arg_len beyond the slot (forged header) */
  write_forged_request(&f.rb, 2, FN_ECHO, buf, 8, 3, ptp, 2, 0xFFFFFFFFu);
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


/* Flag order (spec realtime-host-api, "Ring buffer": a slot may be reused
 * when both flags are 0; cudaq_host_ringbuffer_slot_available): a request
 * is never seen free before its answer. The kernels clear RX before the
 * handler runs, with the TX in-flight marker stored before it (early: while
 * the request's read is in flight; CUDAQ_DISPATCH_EARLY_CLEAR=0: after
 * it); a producer that reads RX == 0 must then read TX != 0 until the
 * response. A 2 ms handler leaves that window wide open. Regular and
 * cooperative kernels. */
static void check_in_flight_until_answered(cudaq_kernel_type_t kind) {
  fixture f;
  fixture_init(&f, 4, 256, kind, kind == CUDAQ_KERNEL_COOPERATIVE ? 2 : 1, 32);
  assert_int_equal(cudaq_dispatcher_start(f.d), CUDAQ_OK);
  uint8_t p[4] = {1, 2, 3, 4};
  uint64_t seen_cleared = 0;
  for (uint32_t k = 0; k < 12; ++k) {
    const uint32_t slot = k % 4;
    assert_true(cudaq_host_ringbuffer_slot_available(&f.rb, slot));
    assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&f.rb, slot, FN_SLOW, p, 4, k, k), CUDAQ_OK);
    cudaq_host_ringbuffer_signal_slot(&f.rb, slot);
    const uint64_t t0 = now_ns();
    for (;;) {
      /* RX first (acquire), then TX: the marker came before the RX clear. */
      const uint64_t rx = __atomic_load_n(&f.rb.rx_flags_host[slot], __ATOMIC_ACQUIRE);
      const uint64_t tx = __atomic_load_n(&f.rb.tx_flags_host[slot], __ATOMIC_ACQUIRE);
      if (rx == 0 && tx == 0) fail_msg("request %u: slot %u free (both flags 0) before its answer", k, slot);
      if (rx == 0 && tx == CUDAQ_TX_FLAG_IN_FLIGHT) ++seen_cleared;
      if (tx != 0 && tx != CUDAQ_TX_FLAG_IN_FLIGHT) break;
      if (now_ns() - t0 > g_wait_ns) fail_msg("request %u: no answer", k);
    }
    cudaq_rpc_response_t r = read_resp(&f.rb, slot);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.request_id, k);
    assert_int_equal(__atomic_load_n(&f.rb.rx_flags_host[slot], __ATOMIC_ACQUIRE), 0);
    cudaq_host_ringbuffer_clear_slot(&f.rb, slot);
  }
  assert_true(seen_cleared > 0); /* the window was observed, not skipped over */
  stop_expect_processed(&f, 12);
  fixture_fini(&f);
}
static void test_in_flight_until_answered(void **) {
  check_in_flight_until_answered(CUDAQ_KERNEL_REGULAR);
  check_in_flight_until_answered(CUDAQ_KERNEL_COOPERATIVE);
}

/* One request of `len` bytes (byte i = i * mul + k) to FN_ECHO or
 * FN_BLOCK (xor with the index) in `slot`, its answer checked byte for
 * byte; the slot is left answered (not cleared). */
static void echo_roundtrip(fixture *f, uint32_t slot, bool block, uint8_t *buf, uint32_t len, uint32_t k,
                           uint32_t mul) {
  for (uint32_t i = 0; i < len; ++i) buf[i] = (uint8_t)(i * mul + k);
  assert_int_equal(roundtrip(f, slot, block ? FN_BLOCK : FN_ECHO, buf, len, k, k), CUDAQ_TX_READY);
  cudaq_rpc_response_t r = read_resp(&f->rb, slot);
  assert_int_equal(r.status, 0);
  assert_int_equal(r.request_id, k);
  assert_int_equal(r.result_len, len);
  const uint8_t *pl = resp_payload(&f->rb, slot);
  for (uint32_t i = 0; i < len; ++i) {
    const uint8_t want = block ? (uint8_t)(buf[i] ^ (i & 0xFF)) : buf[i];
    if (pl[i] != want) fail_msg("length %u byte %u: got %u want %u", len, i, pl[i], want);
  }
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
      echo_roundtrip(&f, slot, fn != 0, buf, len, k, 13);
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

/* Replaces the fixture's dispatcher by a new regular one (1 block of 32
 * threads, 128-byte slots) wired to the same ring, table and control words. */
static void fixture_new_dispatcher(fixture *f) {
  assert_int_equal(cudaq_dispatcher_destroy(f->d), CUDAQ_OK);
  cudaq_dispatcher_config_t c;
  cudaq_dispatcher_config_init(&c);
  c.num_slots = f->num_slots;
  c.slot_size = 128;
  assert_int_equal(cudaq_dispatcher_create(f->mgr, &c, &f->d), CUDAQ_OK);
  cudaq_function_table_t t = {f->d_table, TABLE_SIZE};
  assert_int_equal(cudaq_dispatcher_set_ringbuffer(f->d, &f->rb), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_set_function_table(f->d, &t), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_set_control(f->d, f->d_shutdown, f->h_stats), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_set_launch_fn(f->d, cudaq_launch_dispatch_kernel_regular), CUDAQ_OK);
}

static void expect_counts(cudaq_dispatcher_t *d, const uint64_t *stats, uint64_t processed, uint64_t dropped) {
  cudaq_dispatcher_counters_t c;
  assert_int_equal(cudaq_dispatcher_get_counters(d, &c), CUDAQ_OK);
  assert_int_equal(c.processed, processed);
  assert_int_equal(c.dropped_unknown_function, dropped);
  assert_int_equal(*stats, processed);
}

/* A restarted dispatcher whose first run only dropped requests keeps its
 * drop counters (stats[0] is still 0 then: the device path decides from
 * the dispatcher having started before); a new dispatcher on the same
 * stats buffer starts from 0. */
static void test_restart_keeps_drop_counters(void **) {
  fixture f;
  fixture_init(&f, 4, 128, CUDAQ_KERNEL_REGULAR, 1, 32);
  assert_int_equal(cudaq_dispatcher_start(f.d), CUDAQ_OK);
  for (uint32_t s = 0; s < 3; ++s) { /* unknown function: consumed, not answered */
    assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&f.rb, s, 0x1234u, NULL, 0, s, 0), CUDAQ_OK);
    cudaq_host_ringbuffer_signal_slot(&f.rb, s);
    wait_dropped(&f.rb, s);
  }
  assert_int_equal(cudaq_dispatcher_stop(f.d), CUDAQ_OK);
  expect_counts(f.d, f.h_stats, 0, 3);
  assert_int_equal(cudaq_dispatcher_start(f.d), CUDAQ_OK);
  uint8_t p[4] = {1, 2, 3, 4};
  assert_int_equal(roundtrip(&f, 3, FN_ECHO, p, 4, 9, 0), CUDAQ_TX_READY);
  cudaq_host_ringbuffer_clear_slot(&f.rb, 3);
  assert_int_equal(cudaq_dispatcher_stop(f.d), CUDAQ_OK);
  expect_counts(f.d, f.h_stats, 1, 3);
  fixture_new_dispatcher(&f);
  assert_int_equal(cudaq_dispatcher_start(f.d), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_stop(f.d), CUDAQ_OK);
  expect_counts(f.d, f.h_stats, 0, 0);
  fixture_fini(&f);
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
  fixture_new_dispatcher(&f);
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

/* Header completion (cudaq_rx_completion_t, an extension of the spec's
 * flag protocol; dispatch_loop.cuh): the kernel reads the slot's first
 * 128-byte line with the RX flag and serves a request whose magic it sees
 * there without a dependent read. Every answer is checked byte for byte,
 * so a line seen half-written (the magic new, a payload word old) fails
 * the test: stream_and_check writes each slot again as soon as its answer
 * is read, while the kernel polls it. Payloads inside the line, on its end
 * and past it; bad requests; every kernel shape. */
static void test_header_completion(void **) {
  {
    fixture f;
    fixture_init(&f, 16, 256, CUDAQ_KERNEL_REGULAR, 1, 32, CUDAQ_RING_ALLOC_HEADER_COMPLETION);
    assert_int_equal(f.rb.completion, CUDAQ_RX_COMPLETION_HEADER);
    assert_int_equal(cudaq_dispatcher_start(f.d), CUDAQ_OK);
    const uint32_t n = scaled(100000);
    stream_and_check(&f, n);
    uint8_t buf[232];
    uint32_t k = 0;
    for (uint32_t len : {0u, 1u, 103u, 104u, 105u, 232u})
      for (uint32_t fn = 0; fn < 2; ++fn, ++k) {
        const uint32_t slot = k % 16;
        echo_roundtrip(&f, slot, fn != 0, buf, len, k, 29);
        /* Answered: RX is 0 and the slot's magic word is marked consumed;
         * with TX cleared by hand (not by the consumer's release) the slot
         * is still not free, which is what keeps a producer off it between
         * the kernel's RX clear and its answer. clear_slot frees it. */
        uint32_t magic;
        memcpy(&magic, f.rb.rx_data_host + (size_t)slot * f.rb.rx_stride_sz, 4);
        assert_int_equal(magic, CUDAQ_RPC_SLOT_CONSUMED);
        assert_int_equal(__atomic_load_n(&f.rb.rx_flags_host[slot], __ATOMIC_ACQUIRE), 0);
        const uint64_t tx = __atomic_load_n(&f.rb.tx_flags_host[slot], __ATOMIC_ACQUIRE);
        __atomic_store_n(&f.rb.tx_flags_host[slot], 0, __ATOMIC_RELEASE);
        assert_false(cudaq_host_ringbuffer_slot_available(&f.rb, slot));
        __atomic_store_n(&f.rb.tx_flags_host[slot], tx, __ATOMIC_RELEASE);
        cudaq_host_ringbuffer_clear_slot(&f.rb, slot);
        assert_true(cudaq_host_ringbuffer_slot_available(&f.rb, slot));
      }
    /* A bad magic is never a request in the line: found by RX, dropped. */
    write_forged_request(&f.rb, 0, FN_ECHO, buf, 8, 1, 0, 0, 0x12345678u);
    cudaq_host_ringbuffer_signal_slot(&f.rb, 0);
    wait_dropped(&f.rb, 0);
    /* An unknown function seen in the line: dropped, the slot free again. */
    assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&f.rb, 1, 0xBADF00Du, buf, 8, 2, 0), CUDAQ_OK);
    cudaq_host_ringbuffer_signal_slot(&f.rb, 1);
    wait_dropped(&f.rb, 1);
    /* The slots serve again after the drops. */
    assert_int_equal(roundtrip(&f, 0, FN_ECHO, buf, 4, 3, 0), CUDAQ_TX_READY);
    cudaq_host_ringbuffer_clear_slot(&f.rb, 0);
    assert_int_equal(roundtrip(&f, 1, FN_ECHO, buf, 4, 4, 0), CUDAQ_TX_READY);
    cudaq_host_ringbuffer_clear_slot(&f.rb, 1);
    assert_int_equal(cudaq_dispatcher_stop(f.d), CUDAQ_OK);
    cudaq_dispatcher_counters_t c;
    assert_int_equal(cudaq_dispatcher_get_counters(f.d, &c), CUDAQ_OK);
    assert_int_equal(c.dropped_bad_magic, 1);
    assert_int_equal(c.dropped_unknown_function, 1);
    assert_int_equal(c.processed, n + k + 2);
    fixture_fini(&f);
  }
  /* The other kernel shapes: cooperative; a regular block of two warps
   * (not the one-warp loop); two regular blocks. */
  const struct {
    cudaq_kernel_type_t kind;
    uint32_t blocks, threads;
  } shapes[] = {{CUDAQ_KERNEL_COOPERATIVE, 2, 64}, {CUDAQ_KERNEL_REGULAR, 1, 64}, {CUDAQ_KERNEL_REGULAR, 2, 32}};
  for (const auto &sh : shapes) {
    fixture f;
    fixture_init(&f, 8, 1024, sh.kind, sh.blocks, sh.threads, CUDAQ_RING_ALLOC_HEADER_COMPLETION);
    assert_int_equal(cudaq_dispatcher_start(f.d), CUDAQ_OK);
    stream_and_check(&f, scaled(10000));
    assert_int_equal(cudaq_dispatcher_stop(f.d), CUDAQ_OK);
    fixture_fini(&f);
  }
}

/* Header completion refused where it cannot hold, each with a message:
 * slots off 128-byte lines or in place (alloc and set_ringbuffer), the host
 * path, a launch function of the user's own, a completion value that is
 * not one. */
static void launch_regular_by_hand(volatile uint64_t *rx_flags, volatile uint64_t *tx_flags, uint8_t *rx_data,
                                   uint8_t *tx_data, size_t rx_stride, size_t tx_stride, cudaq_function_entry_t *table,
                                   size_t count, volatile int *shutdown, uint64_t *stats, size_t slots,
                                   uint32_t blocks, uint32_t threads, cudaStream_t stream) {
  cudaq_launch_dispatch_kernel_regular(rx_flags, tx_flags, rx_data, tx_data, rx_stride, tx_stride, table, count,
                                       shutdown, stats, slots, blocks, threads, stream);
}

static void test_header_completion_refused(void **) {
  cudaq_ringbuffer_t rb;
  assert_int_equal(cudaq_host_ringbuffer_alloc(&rb, 4, 192, CUDAQ_RING_ALLOC_MAPPED | CUDAQ_RING_ALLOC_HEADER_COMPLETION),
                   CUDAQ_ERR_INVALID_ARG);
  assert_non_null(strstr(cudaq_last_error(), "128-byte lines"));
  assert_int_equal(cudaq_host_ringbuffer_alloc(&rb, 4, 256, CUDAQ_RING_ALLOC_MAPPED | CUDAQ_RING_ALLOC_IN_PLACE |
                                                                CUDAQ_RING_ALLOC_HEADER_COMPLETION),
                   CUDAQ_ERR_INVALID_ARG);
  fixture f;
  fixture_init(&f, 4, 256, CUDAQ_KERNEL_REGULAR, 1, 32);
  cudaq_ringbuffer_t bad = f.rb;
  bad.completion = 7;
  assert_int_equal(cudaq_dispatcher_set_ringbuffer(f.d, &bad), CUDAQ_ERR_INVALID_ARG);
  assert_non_null(strstr(cudaq_last_error(), "not a cudaq_rx_completion_t"));
  bad.completion = CUDAQ_RX_COMPLETION_HEADER;
  bad.rx_stride_sz = bad.tx_stride_sz = 200; /* within the slots, off the lines */
  assert_int_equal(cudaq_dispatcher_set_ringbuffer(f.d, &bad), CUDAQ_ERR_INVALID_ARG);
  bad = f.rb;
  bad.completion = CUDAQ_RX_COMPLETION_HEADER;
  assert_int_equal(cudaq_dispatcher_set_ringbuffer(f.d, &bad), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_set_launch_fn(f.d, launch_regular_by_hand), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_start(f.d), CUDAQ_ERR_INVALID_ARG);
  assert_non_null(strstr(cudaq_last_error(), "header completion needs"));
  fixture_fini(&f);
  /* The host path serves the flag protocol only. */
  cudaq_dispatch_manager_t *m;
  cudaq_dispatcher_t *d;
  cudaq_dispatcher_config_t c;
  cudaq_dispatcher_config_init(&c);
  c.num_slots = 4;
  c.slot_size = 256;
  c.dispatch_path = CUDAQ_DISPATCH_PATH_HOST;
  assert_int_equal(cudaq_dispatch_manager_create(&m), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_create(m, &c, &d), CUDAQ_OK);
  assert_int_equal(cudaq_host_ringbuffer_alloc(&rb, 4, 256, CUDAQ_RING_ALLOC_MAPPED | CUDAQ_RING_ALLOC_HEADER_COMPLETION),
                   CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_set_ringbuffer(d, &rb), CUDAQ_ERR_INVALID_ARG);
  assert_non_null(strstr(cudaq_last_error(), "not the host path"));
  assert_int_equal(cudaq_dispatch_manager_destroy(m), CUDAQ_OK);
  assert_int_equal(cudaq_host_ringbuffer_free(&rb), CUDAQ_OK);
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
  c.slot_size = 128;
  assert_int_equal(cudaq_dispatch_manager_create(&m), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_create(m, &c, &d), CUDAQ_OK);
  cudaq_ringbuffer_t host_only;
  assert_int_equal(cudaq_host_ringbuffer_alloc(&host_only, 4, 128, CUDAQ_RING_ALLOC_HOST), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_set_ringbuffer(d, &host_only), CUDAQ_ERR_INVALID_ARG);
  assert_non_null(strstr(cudaq_last_error(), "not device-visible"));
  int host_flag = 0;
  uint64_t host_stats = 0;
  assert_int_equal(cudaq_dispatcher_set_control(d, &host_flag, &host_stats), CUDAQ_ERR_INVALID_ARG);
  /* A launch helper refusing its arguments makes start fail with a CUDA error. */
  cudaq_ringbuffer_t rb;
  assert_int_equal(cudaq_host_ringbuffer_alloc(&rb, 4, 128, CUDAQ_RING_ALLOC_MAPPED), CUDAQ_OK);
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
  /* A device-memory table with a duplicate function id is refused, naming
   * the entries and the id. */
  cudaq_function_entry_t *dup;
  CK(cudaMalloc(&dup, TABLE_SIZE * sizeof *dup));
  init_table<<<1, 1>>>(dup);
  CK(cudaDeviceSynchronize());
  const uint32_t echo_id = FN_ECHO;
  CK(cudaMemcpy(&dup[5].function_id, &echo_id, sizeof echo_id, cudaMemcpyHostToDevice));
  cudaq_function_table_t dup_table = {dup, TABLE_SIZE};
  assert_int_equal(cudaq_dispatcher_set_function_table(d, &dup_table), CUDAQ_ERR_INVALID_ARG);
  char want[64];
  snprintf(want, sizeof want, "entries 0 and 5 share function_id 0x%08x", echo_id);
  assert_non_null(strstr(cudaq_last_error(), want));
  CK(cudaFree(dup));
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
  assert_int_equal(wait_processed(d, 1), 1);
  assert_int_equal(cudaq_dispatch_manager_destroy(m), CUDAQ_OK); /* stops d */
  assert_int_equal(cudaq_host_ringbuffer_free(&rb), CUDAQ_OK);
  assert_int_equal(cudaq_host_ringbuffer_free(&host_only), CUDAQ_OK);
  CK(cudaFree(t));
  CK(cudaFree(flag));
  CK(cudaFree(stats));
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

/* Every kernel serves a request with the first entry of its function id
 * (one lookup rule, cudaq__find_entry): a table handed to the launch
 * helpers directly, in which entry 2 (fail_with_7) repeats entry 0's id
 * (echo). The regular kernel's flag is in device memory, the unified
 * kernel's in mapped host memory: cudaq_dispatch_set_shutdown_flag stops
 * both without a copy on their stream. */
static void test_duplicate_id_first_entry_wins(void **) {
  cudaq_function_entry_t *t;
  CK(cudaMalloc(&t, TABLE_SIZE * sizeof *t));
  init_table<<<1, 1>>>(t);
  CK(cudaDeviceSynchronize());
  const uint32_t echo_id = FN_ECHO;
  CK(cudaMemcpy(&t[2].function_id, &echo_id, sizeof echo_id, cudaMemcpyHostToDevice));
  int *dflag, *hflag;
  uint64_t *stats;
  CK(cudaMalloc(&dflag, sizeof(int)));
  CK(cudaHostAlloc(&hflag, sizeof(int), cudaHostAllocMapped));
  CK(cudaHostAlloc(&stats, sizeof(uint64_t), cudaHostAllocMapped));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  cudaq_ringbuffer_t rb;
  assert_int_equal(cudaq_host_ringbuffer_alloc(&rb, 4, 128, CUDAQ_RING_ALLOC_MAPPED), CUDAQ_OK);
  assert_int_equal(cudaq_dispatch_set_shutdown_flag(dflag, 0), CUDAQ_OK);
  *stats = 0;
  g_stats = stats;
  (void)cudaGetLastError();
  cudaq_launch_dispatch_kernel_regular(rb.rx_flags, rb.tx_flags, rb.rx_data, rb.tx_data, rb.rx_stride_sz,
                                       rb.tx_stride_sz, t, TABLE_SIZE, dflag, stats, 4, 1, 32, s);
  CK(cudaGetLastError());
  uint8_t p[4] = {5, 6, 7, 8};
  assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&rb, 0, FN_ECHO, p, 4, 21, 0), CUDAQ_OK);
  cudaq_host_ringbuffer_signal_slot(&rb, 0);
  assert_int_equal(wait_tx(&rb, 0), CUDAQ_TX_READY);
  cudaq_rpc_response_t r = read_resp(&rb, 0);
  assert_int_equal(r.status, 0);
  assert_int_equal(r.result_len, 4);
  assert_memory_equal(resp_payload(&rb, 0), p, 4);
  assert_int_equal(cudaq_dispatch_set_shutdown_flag(dflag, 1), CUDAQ_OK);
  CK(cudaStreamSynchronize(s));
  assert_int_equal(cudaq_host_ringbuffer_free(&rb), CUDAQ_OK);

  cudaq_emu_transport_t *et;
  assert_int_equal(cudaq_emu_transport_create(4, 128, &et), CUDAQ_OK);
  assert_int_equal(cudaq_dispatch_set_shutdown_flag(hflag, 0), CUDAQ_OK);
  *stats = 0;
  cudaq_launch_unified_dispatch_emu(cudaq_emu_transport_ctx(et), t, TABLE_SIZE, hflag, stats, s);
  CK(cudaGetLastError());
  unified_roundtrip(et, FN_ECHO, 4, 22, 0);
  assert_int_equal(cudaq_dispatch_set_shutdown_flag(hflag, 1), CUDAQ_OK);
  assert_int_equal(*hflag, 1);
  CK(cudaStreamSynchronize(s));
  assert_int_equal(cudaq_emu_transport_destroy(et), CUDAQ_OK);
  g_stats = nullptr;
  CK(cudaStreamDestroy(s));
  CK(cudaFree(t));
  CK(cudaFree(dflag));
  CK(cudaFreeHost(hflag));
  CK(cudaFreeHost(stats));
}

int main(void) {
  if (gpu_test_init() != 0) return 77;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_regular_all_slots_many_requests),
      cmocka_unit_test(test_regular_multi_block),
      cmocka_unit_test(test_processed_exact_when_idle),
      cmocka_unit_test(test_malformed_inputs_and_echo),
      cmocka_unit_test(test_in_flight_until_answered),
      cmocka_unit_test(test_payload_sizes),
      cmocka_unit_test(test_variable_schema_min_len),
      cmocka_unit_test(test_counters_fresh_dispatcher_same_stats),
      cmocka_unit_test(test_restart_keeps_drop_counters),
      cmocka_unit_test(test_cooperative_grid_handler),
      cmocka_unit_test(test_in_place_ring),
      cmocka_unit_test(test_header_completion),
      cmocka_unit_test(test_header_completion_refused),
      cmocka_unit_test(test_shutdown_idle_busy_restart),
      cmocka_unit_test(test_out_of_order_slots),
      cmocka_unit_test(test_two_dispatchers),
      cmocka_unit_test(test_device_wiring_errors),
      cmocka_unit_test(test_launch_sizes_too_large),
      cmocka_unit_test(test_unified_emu),
      cmocka_unit_test(test_unified_shutdown_busy_new_transport),
      cmocka_unit_test(test_duplicate_id_first_entry_wins),
  };
  return cmocka_run_group_tests_name("gpu_dispatch", tests, NULL, NULL);
}
