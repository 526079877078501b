/*
 * test_api.c - every public call of the host API and the ring helpers with
 * bad arguments, each returning its documented status and a message
 * (spec: realtime-host-api.txt "Error handling"; DESIGN.md "Errors").
 * Single-threaded and deterministic.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_util.h"

#define EXPECT_ERR(call, status)                                   \
  do {                                                             \
    assert_int_equal((call), (status));                            \
    assert_true(strlen(cudaq_last_error()) > 0); /* named problem */ \
  } while (0)

static cudaq_dispatcher_config_t host_config(void) {
  cudaq_dispatcher_config_t c;
  cudaq_dispatcher_config_init(&c);
  c.num_slots = 4;
  c.slot_size = 256;
  c.dispatch_path = CUDAQ_DISPATCH_PATH_HOST;
  c.dispatch_mode = CUDAQ_DISPATCH_HOST_CALL;
  return c;
}

static void test_manager_errors(void **state) {
  (void)state;
  EXPECT_ERR(cudaq_dispatch_manager_create(NULL), CUDAQ_ERR_INVALID_ARG);
  EXPECT_ERR(cudaq_dispatch_manager_destroy(NULL), CUDAQ_ERR_INVALID_ARG);
  cudaq_dispatch_manager_t *m = NULL;
  assert_int_equal(cudaq_dispatch_manager_create(&m), CUDAQ_OK);
  assert_string_equal(cudaq_last_error(), ""); /* success clears the message */
  assert_int_equal(cudaq_dispatch_manager_destroy(m), CUDAQ_OK);
}

static void test_config_defaults(void **state) {
  (void)state;
  EXPECT_ERR(cudaq_dispatcher_config_init(NULL), CUDAQ_ERR_INVALID_ARG);
  cudaq_dispatcher_config_t c;
  memset(&c, 0xFF, sizeof c);
  assert_int_equal(cudaq_dispatcher_config_init(&c), CUDAQ_OK);
  assert_int_equal(c.device_id, 0);
  assert_int_equal(c.num_blocks, 1);
  assert_int_equal(c.threads_per_block, 32);
  assert_int_equal(c.vp_id, 0);
  assert_int_equal(c.kernel_type, CUDAQ_KERNEL_REGULAR);
  assert_int_equal(c.dispatch_mode, CUDAQ_DISPATCH_DEVICE_CALL);
  assert_int_equal(c.dispatch_path, CUDAQ_DISPATCH_PATH_DEVICE);
  assert_int_equal(CUDAQ_DISPATCH_PATH_DEVICE, 0);
  assert_int_equal(CUDAQ_DISPATCH_PATH_HOST, 1);
  assert_int_equal(CUDAQ_DISPATCH_DEVICE_CALL, 0);
  assert_int_equal(CUDAQ_DISPATCH_GRAPH_LAUNCH, 1);
  assert_int_equal(CUDAQ_DISPATCH_HOST_CALL, 2);
  assert_int_equal(CUDAQ_KERNEL_UNIFIED, 2);
  assert_int_equal(CUDAQ_ERR_UNSUPPORTED, 4);
}

static void test_dispatcher_create_errors(void **state) {
  (void)state;
  cudaq_dispatch_manager_t *m;
  cudaq_dispatcher_t *d = NULL;
  assert_int_equal(cudaq_dispatch_manager_create(&m), CUDAQ_OK);
  cudaq_dispatcher_config_t c = host_config();
  EXPECT_ERR(cudaq_dispatcher_create(NULL, &c, &d), CUDAQ_ERR_INVALID_ARG);
  EXPECT_ERR(cudaq_dispatcher_create(m, NULL, &d), CUDAQ_ERR_INVALID_ARG);
  EXPECT_ERR(cudaq_dispatcher_create(m, &c, NULL), CUDAQ_ERR_INVALID_ARG);

  /* Each invalid configuration, one at a time. */
  c = host_config(); c.kernel_type = (cudaq_kernel_type_t)7;
  EXPECT_ERR(cudaq_dispatcher_create(m, &c, &d), CUDAQ_ERR_INVALID_ARG);
  c = host_config(); c.dispatch_mode = (cudaq_dispatch_mode_t)3;
  EXPECT_ERR(cudaq_dispatcher_create(m, &c, &d), CUDAQ_ERR_INVALID_ARG);
  c = host_config(); c.dispatch_path = (cudaq_dispatch_path_t)2;
  EXPECT_ERR(cudaq_dispatcher_create(m, &c, &d), CUDAQ_ERR_INVALID_ARG);
  c = host_config(); c.device_id = -1;
  EXPECT_ERR(cudaq_dispatcher_create(m, &c, &d), CUDAQ_ERR_INVALID_ARG);
  c = host_config(); c.num_slots = 0;
  EXPECT_ERR(cudaq_dispatcher_create(m, &c, &d), CUDAQ_ERR_INVALID_ARG);
  c = host_config(); c.slot_size = 23;
  EXPECT_ERR(cudaq_dispatcher_create(m, &c, &d), CUDAQ_ERR_INVALID_ARG);
  assert_non_null(strstr(cudaq_last_error(), "slot_size 23"));
  c = host_config(); c.kernel_type = CUDAQ_KERNEL_COOPERATIVE;
  EXPECT_ERR(cudaq_dispatcher_create(m, &c, &d), CUDAQ_ERR_INVALID_ARG);
  c = host_config(); c.kernel_type = CUDAQ_KERNEL_UNIFIED;
  EXPECT_ERR(cudaq_dispatcher_create(m, &c, &d), CUDAQ_ERR_INVALID_ARG);
  c = host_config(); c.dispatch_path = CUDAQ_DISPATCH_PATH_DEVICE;
  c.kernel_type = CUDAQ_KERNEL_UNIFIED; c.dispatch_mode = CUDAQ_DISPATCH_GRAPH_LAUNCH;
  EXPECT_ERR(cudaq_dispatcher_create(m, &c, &d), CUDAQ_ERR_INVALID_ARG);
  assert_null(d);

  /* Unified mode may leave num_slots and slot_size 0 (spec). */
  c = host_config(); c.dispatch_path = CUDAQ_DISPATCH_PATH_DEVICE;
  c.kernel_type = CUDAQ_KERNEL_UNIFIED; c.dispatch_mode = CUDAQ_DISPATCH_DEVICE_CALL;
  c.num_slots = 0; c.slot_size = 0;
  assert_int_equal(cudaq_dispatcher_create(m, &c, &d), CUDAQ_OK);
  assert_non_null(d);
  /* A zero-initialised config gets the spec's grid defaults. */
  cudaq_dispatcher_config_t z;
  memset(&z, 0, sizeof z);
  z.num_slots = 2; z.slot_size = 64;
  cudaq_dispatcher_t *d2 = NULL;
  assert_int_equal(cudaq_dispatcher_create(m, &z, &d2), CUDAQ_OK);
  EXPECT_ERR(cudaq_dispatcher_destroy(NULL), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_dispatcher_destroy(d2), CUDAQ_OK);
  /* The manager destroys the dispatchers it still owns (d). */
  assert_int_equal(cudaq_dispatch_manager_destroy(m), CUDAQ_OK);
}

static void test_wiring_errors(void **state) {
  (void)state;
  cudaq_dispatch_manager_t *m;
  cudaq_dispatcher_t *d;
  cudaq_dispatcher_config_t c = host_config();
  assert_int_equal(cudaq_dispatch_manager_create(&m), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_create(m, &c, &d), CUDAQ_OK);
  cudaq_ringbuffer_t rb;
  assert_int_equal(cudaq_host_ringbuffer_alloc(&rb, 4, 256, CUDAQ_RING_ALLOC_HOST), CUDAQ_OK);

  /* set_ringbuffer */
  EXPECT_ERR(cudaq_dispatcher_set_ringbuffer(NULL, &rb), CUDAQ_ERR_INVALID_ARG);
  EXPECT_ERR(cudaq_dispatcher_set_ringbuffer(d, NULL), CUDAQ_ERR_INVALID_ARG);
  cudaq_ringbuffer_t bad = rb; bad.rx_flags = NULL;
  EXPECT_ERR(cudaq_dispatcher_set_ringbuffer(d, &bad), CUDAQ_ERR_INVALID_ARG);
  bad = rb; bad.tx_data = NULL;
  EXPECT_ERR(cudaq_dispatcher_set_ringbuffer(d, &bad), CUDAQ_ERR_INVALID_ARG);
  bad = rb; bad.tx_flags = bad.rx_flags;
  EXPECT_ERR(cudaq_dispatcher_set_ringbuffer(d, &bad), CUDAQ_ERR_INVALID_ARG);
  bad = rb; bad.rx_stride_sz = 128; /* smaller than slot_size 256 */
  EXPECT_ERR(cudaq_dispatcher_set_ringbuffer(d, &bad), CUDAQ_ERR_INVALID_ARG);
  bad = rb; bad.tx_stride_sz = 16;
  EXPECT_ERR(cudaq_dispatcher_set_ringbuffer(d, &bad), CUDAQ_ERR_INVALID_ARG);
  bad = rb; bad.tx_data = bad.rx_data; bad.tx_data_host = bad.rx_data_host; bad.tx_stride_sz = 512;
  EXPECT_ERR(cudaq_dispatcher_set_ringbuffer(d, &bad), CUDAQ_ERR_INVALID_ARG);

  /* set_function_table */
  cudaq_function_entry_t e[6];
  test_table(e);
  cudaq_function_table_t t = {e, 6};
  EXPECT_ERR(cudaq_dispatcher_set_function_table(NULL, &t), CUDAQ_ERR_INVALID_ARG);
  EXPECT_ERR(cudaq_dispatcher_set_function_table(d, NULL), CUDAQ_ERR_INVALID_ARG);
  cudaq_function_table_t tb = {NULL, 1};
  EXPECT_ERR(cudaq_dispatcher_set_function_table(d, &tb), CUDAQ_ERR_INVALID_ARG);
  tb.entries = e; tb.count = 0;
  EXPECT_ERR(cudaq_dispatcher_set_function_table(d, &tb), CUDAQ_ERR_INVALID_ARG);
  e[2].dispatch_mode = 9;
  EXPECT_ERR(cudaq_dispatcher_set_function_table(d, &t), CUDAQ_ERR_INVALID_ARG);
  assert_non_null(strstr(cudaq_last_error(), "entry 2"));
  test_table(e);
  e[3].handler.host_fn = NULL;
  EXPECT_ERR(cudaq_dispatcher_set_function_table(d, &t), CUDAQ_ERR_INVALID_ARG);
  assert_non_null(strstr(cudaq_last_error(), "entry 3"));
  test_table(e);
  e[1].schema.args[0].size_bytes = 15; /* 4 int32 are 16 bytes */
  EXPECT_ERR(cudaq_dispatcher_set_function_table(d, &t), CUDAQ_ERR_INVALID_ARG);
  assert_non_null(strstr(cudaq_last_error(), "schema"));
  test_table(e);
  e[5].function_id = e[0].function_id;
  EXPECT_ERR(cudaq_dispatcher_set_function_table(d, &t), CUDAQ_ERR_INVALID_ARG);
  assert_non_null(strstr(cudaq_last_error(), "share function_id"));
  test_table(e);

  /* set_control, set_launch_fn, set_unified_launch, set_host_affinity */
  volatile int shutdown = 0;
  uint64_t stats[1] = {0};
  EXPECT_ERR(cudaq_dispatcher_set_control(NULL, &shutdown, stats), CUDAQ_ERR_INVALID_ARG);
  EXPECT_ERR(cudaq_dispatcher_set_control(d, NULL, stats), CUDAQ_ERR_INVALID_ARG);
  EXPECT_ERR(cudaq_dispatcher_set_control(d, &shutdown, NULL), CUDAQ_ERR_INVALID_ARG);
  EXPECT_ERR(cudaq_dispatcher_set_launch_fn(NULL, NULL), CUDAQ_ERR_INVALID_ARG);
  EXPECT_ERR(cudaq_dispatcher_set_launch_fn(d, NULL), CUDAQ_ERR_INVALID_ARG);
  EXPECT_ERR(cudaq_dispatcher_set_unified_launch(d, NULL, NULL), CUDAQ_ERR_INVALID_ARG);
  EXPECT_ERR(cudaq_dispatcher_set_host_affinity(NULL, 0), CUDAQ_ERR_INVALID_ARG);
  EXPECT_ERR(cudaq_dispatcher_set_host_affinity(d, -2), CUDAQ_ERR_INVALID_ARG);
  EXPECT_ERR(cudaq_dispatcher_set_host_affinity(d, 1 << 20), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_dispatcher_set_host_affinity(d, -1), CUDAQ_OK);

  /* get_processed before set_control has no stats buffer. */
  uint64_t n = 0;
  EXPECT_ERR(cudaq_dispatcher_get_processed(d, &n), CUDAQ_ERR_INVALID_ARG);
  EXPECT_ERR(cudaq_dispatcher_get_processed(NULL, &n), CUDAQ_ERR_INVALID_ARG);
  EXPECT_ERR(cudaq_dispatcher_get_processed(d, NULL), CUDAQ_ERR_INVALID_ARG);
  cudaq_dispatcher_counters_t cnt;
  EXPECT_ERR(cudaq_dispatcher_get_counters(NULL, &cnt), CUDAQ_ERR_INVALID_ARG);
  EXPECT_ERR(cudaq_dispatcher_get_counters(d, NULL), CUDAQ_ERR_INVALID_ARG);

  /* start is refused until everything is wired, naming what is missing. */
  EXPECT_ERR(cudaq_dispatcher_start(NULL), CUDAQ_ERR_INVALID_ARG);
  EXPECT_ERR(cudaq_dispatcher_start(d), CUDAQ_ERR_INVALID_ARG);
  assert_non_null(strstr(cudaq_last_error(), "function table"));
  assert_int_equal(cudaq_dispatcher_set_function_table(d, &t), CUDAQ_OK);
  EXPECT_ERR(cudaq_dispatcher_start(d), CUDAQ_ERR_INVALID_ARG);
  assert_non_null(strstr(cudaq_last_error(), "control"));
  assert_int_equal(cudaq_dispatcher_set_control(d, &shutdown, stats), CUDAQ_OK);
  EXPECT_ERR(cudaq_dispatcher_start(d), CUDAQ_ERR_INVALID_ARG);
  assert_non_null(strstr(cudaq_last_error(), "ring"));
  assert_int_equal(cudaq_dispatcher_set_ringbuffer(d, &rb), CUDAQ_OK);

  /* stop before start, and twice, is fine (idempotent). */
  EXPECT_ERR(cudaq_dispatcher_stop(NULL), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_dispatcher_stop(d), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_start(d), CUDAQ_OK);
  EXPECT_ERR(cudaq_dispatcher_start(d), CUDAQ_ERR_INVALID_ARG); /* already running */
  /* No rewiring while running. */
  EXPECT_ERR(cudaq_dispatcher_set_ringbuffer(d, &rb), CUDAQ_ERR_INVALID_ARG);
  EXPECT_ERR(cudaq_dispatcher_set_function_table(d, &t), CUDAQ_ERR_INVALID_ARG);
  EXPECT_ERR(cudaq_dispatcher_set_control(d, &shutdown, stats), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_dispatcher_stop(d), CUDAQ_OK);
  assert_int_equal(shutdown, 1);
  assert_int_equal(cudaq_dispatcher_stop(d), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_get_processed(d, &n), CUDAQ_OK);
  assert_int_equal(n, 0);

  assert_int_equal(cudaq_dispatcher_destroy(d), CUDAQ_OK);
  assert_int_equal(cudaq_dispatch_manager_destroy(m), CUDAQ_OK);
  assert_int_equal(cudaq_host_ringbuffer_free(&rb), CUDAQ_OK);
}

/* Device path without the pieces it needs: start is refused, naming what
 * is missing. With a GPU present, memory the GPU cannot read (this test's
 * stack) is refused already when it is wired. */
static void test_device_path_start(void **state) {
  (void)state;
  cudaq_dispatch_manager_t *m;
  cudaq_dispatcher_t *d;
  cudaq_dispatcher_config_t c = host_config();
  c.dispatch_path = CUDAQ_DISPATCH_PATH_DEVICE;
  c.dispatch_mode = CUDAQ_DISPATCH_DEVICE_CALL;
  assert_int_equal(cudaq_dispatch_manager_create(&m), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_create(m, &c, &d), CUDAQ_OK);
  EXPECT_ERR(cudaq_dispatcher_start(d), CUDAQ_ERR_INVALID_ARG);
  assert_non_null(strstr(cudaq_last_error(), "function table"));
  cudaq_function_entry_t e[6];
  test_table(e);
  cudaq_function_table_t t = {e, 6};
  cudaq_status_t st = cudaq_dispatcher_set_function_table(d, &t);
  if (st != CUDAQ_OK) { /* a GPU is present: host stack memory is not device-visible */
    assert_int_equal(st, CUDAQ_ERR_INVALID_ARG);
    assert_non_null(strstr(cudaq_last_error(), "not device-visible"));
  }
  /* Duplicate function ids are refused on the device path too, naming the
   * id (checked here in builds without CUDA, where the device path's table
   * is host memory; test_gpu_dispatch checks a device-memory table). */
  e[4].function_id = e[1].function_id;
  st = cudaq_dispatcher_set_function_table(d, &t);
  assert_int_equal(st, CUDAQ_ERR_INVALID_ARG);
  if (!strstr(cudaq_last_error(), "not device-visible")) {
    char want[64];
    snprintf(want, sizeof want, "entries 1 and 4 share function_id 0x%08x", e[1].function_id);
    assert_non_null(strstr(cudaq_last_error(), want));
  }
  assert_int_equal(cudaq_dispatch_manager_destroy(m), CUDAQ_OK);

  /* The shutdown-flag writer: NULL refused; host stack memory is not
   * device-visible (CUDA builds; test_gpu_dispatch uses it on device and
   * mapped memory), and without CUDA there is no device path. */
  EXPECT_ERR(cudaq_dispatch_set_shutdown_flag(NULL, 1), CUDAQ_ERR_INVALID_ARG);
  volatile int flag = 0;
  st = cudaq_dispatch_set_shutdown_flag(&flag, 1);
  assert_true(st == CUDAQ_ERR_INVALID_ARG || st == CUDAQ_ERR_UNSUPPORTED);
  assert_true(strlen(cudaq_last_error()) > 0);
  assert_int_equal(flag, 0);
}

static void test_tx_flag_classification(void **state) {
  (void)state;
  cudaq_ringbuffer_t rb;
  assert_int_equal(cudaq_host_ringbuffer_alloc(&rb, 2, 64, CUDAQ_RING_ALLOC_HOST), CUDAQ_OK);
  int err = -1;
  assert_int_equal(cudaq_host_ringbuffer_poll_tx_flag(&rb, 1, &err), CUDAQ_TX_EMPTY);
  rb.tx_flags_host[1] = CUDAQ_TX_FLAG_IN_FLIGHT;
  assert_int_equal(cudaq_host_ringbuffer_poll_tx_flag(&rb, 1, &err), CUDAQ_TX_IN_FLIGHT);
  assert_false(cudaq_host_ringbuffer_slot_available(&rb, 1));
  rb.tx_flags_host[1] = CUDAQ_TX_FLAG_ERROR(719);
  assert_int_equal(rb.tx_flags_host[1] >> 48, 0xDEAD);
  assert_int_equal(cudaq_host_ringbuffer_poll_tx_flag(&rb, 1, &err), CUDAQ_TX_ERROR);
  assert_int_equal(err, 719);
  assert_int_equal(cudaq_host_ringbuffer_poll_tx_flag(&rb, 1, NULL), CUDAQ_TX_ERROR);
  rb.tx_flags_host[1] = (uint64_t)(uintptr_t)rb.tx_data;
  assert_int_equal(cudaq_host_ringbuffer_poll_tx_flag(&rb, 1, &err), CUDAQ_TX_READY);
  cudaq_host_ringbuffer_clear_slot(&rb, 1);
  assert_int_equal(rb.tx_flags_host[1], 0);
  assert_true(cudaq_host_ringbuffer_slot_available(&rb, 1));
  cudaq_host_ringbuffer_signal_slot(&rb, 1);
  assert_int_equal(rb.rx_flags_host[1], (uint64_t)(uintptr_t)(rb.rx_data + rb.rx_stride_sz));
  assert_false(cudaq_host_ringbuffer_slot_available(&rb, 1));
  assert_int_equal(cudaq_host_ringbuffer_free(&rb), CUDAQ_OK);
}

/* The slot helpers ignore a NULL or empty ring instead of crashing. */
static void test_slot_helpers_null_ring(void **state) {
  (void)state;
  cudaq_ringbuffer_t zero;
  memset(&zero, 0, sizeof zero);
  int err = -1;
  cudaq_host_ringbuffer_signal_slot(NULL, 0);
  cudaq_host_ringbuffer_signal_slot(&zero, 0);
  assert_int_equal(cudaq_host_ringbuffer_poll_tx_flag(NULL, 0, &err), CUDAQ_TX_EMPTY);
  assert_int_equal(cudaq_host_ringbuffer_poll_tx_flag(&zero, 0, &err), CUDAQ_TX_EMPTY);
  assert_int_equal(err, -1);
  assert_int_equal(cudaq_host_ringbuffer_slot_available(NULL, 0), 0);
  assert_int_equal(cudaq_host_ringbuffer_slot_available(&zero, 0), 0);
  cudaq_host_ringbuffer_clear_slot(NULL, 0);
  cudaq_host_ringbuffer_clear_slot(&zero, 0);
  EXPECT_ERR(cudaq_host_ringbuffer_write_rpc_request(&zero, 0, 1, NULL, 0, 0, 0), CUDAQ_ERR_INVALID_ARG);
}

static void test_write_request(void **state) {
  (void)state;
  cudaq_ringbuffer_t rb;
  assert_int_equal(cudaq_host_ringbuffer_alloc(&rb, 2, 64, CUDAQ_RING_ALLOC_HOST), CUDAQ_OK);
  uint8_t payload[41];
  memset(payload, 0x5A, sizeof payload);
  EXPECT_ERR(cudaq_host_ringbuffer_write_rpc_request(NULL, 0, 1, payload, 4, 0, 0),
             CUDAQ_ERR_INVALID_ARG);
  EXPECT_ERR(cudaq_host_ringbuffer_write_rpc_request(&rb, 0, 1, NULL, 4, 0, 0),
             CUDAQ_ERR_INVALID_ARG);
  EXPECT_ERR(cudaq_host_ringbuffer_write_rpc_request(&rb, 0, 1, payload, 41, 0, 0),
             CUDAQ_ERR_INVALID_ARG); /* 24 + 41 > 64 */
  assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&rb, 1, 0xABCD, payload, 40, 77,
                                                           0x123456789ull),
                   CUDAQ_OK);
  cudaq_rpc_header_t h;
  memcpy(&h, rb.rx_data_host + rb.rx_stride_sz, sizeof h);
  assert_int_equal(h.magic, CUDAQ_RPC_MAGIC_REQUEST);
  assert_int_equal(h.function_id, 0xABCD);
  assert_int_equal(h.arg_len, 40);
  assert_int_equal(h.request_id, 77);
  assert_true(h.ptp_timestamp == 0x123456789ull);
  assert_memory_equal(rb.rx_data_host + rb.rx_stride_sz + 24, payload, 40);
  assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&rb, 0, 1, NULL, 0, 0, 0), CUDAQ_OK);
  assert_int_equal(cudaq_host_ringbuffer_free(&rb), CUDAQ_OK);
}

/* Header completion's host side (cudaq_rx_completion_t, extension): the
 * allocation flag and its layout rules, and the slot's life as a producer
 * sees it: free; a request (magic written); taken and answered by the
 * dispatcher (RX 0, magic CUDAQ_RPC_SLOT_CONSUMED, then TX set: the slot is
 * not free in between, although both flags read 0 for a moment); released
 * by clear_slot (magic 0, TX 0: free). A flag-protocol ring ignores the
 * magic word. */
static void test_header_completion_host(void **state) {
  (void)state;
  cudaq_ringbuffer_t rb;
  EXPECT_ERR(cudaq_host_ringbuffer_alloc(&rb, 2, 192, CUDAQ_RING_ALLOC_HOST | CUDAQ_RING_ALLOC_HEADER_COMPLETION),
             CUDAQ_ERR_INVALID_ARG);
  EXPECT_ERR(cudaq_host_ringbuffer_alloc(&rb, 2, 128, CUDAQ_RING_ALLOC_HOST | CUDAQ_RING_ALLOC_IN_PLACE |
                                                          CUDAQ_RING_ALLOC_HEADER_COMPLETION),
             CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_host_ringbuffer_alloc(&rb, 2, 256, CUDAQ_RING_ALLOC_HOST | CUDAQ_RING_ALLOC_HEADER_COMPLETION),
                   CUDAQ_OK);
  assert_int_equal(rb.completion, CUDAQ_RX_COMPLETION_HEADER);
  assert_int_equal((uintptr_t)rb.rx_data % CUDAQ_HEADER_LINE, 0);
  assert_int_equal(rb.rx_stride_sz % CUDAQ_HEADER_LINE, 0);
  volatile uint32_t *magic = (volatile uint32_t *)(void *)(rb.rx_data_host + rb.rx_stride_sz);
  assert_true(cudaq_host_ringbuffer_slot_available(&rb, 1));
  uint8_t payload[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&rb, 1, 9, payload, 8, 3, 4), CUDAQ_OK);
  assert_int_equal(*magic, CUDAQ_RPC_MAGIC_REQUEST);
  cudaq_host_ringbuffer_signal_slot(&rb, 1);
  assert_false(cudaq_host_ringbuffer_slot_available(&rb, 1));
  /* The dispatcher's take: magic consumed, RX cleared, no answer yet. */
  *magic = CUDAQ_RPC_SLOT_CONSUMED;
  rb.rx_flags_host[1] = 0;
  assert_false(cudaq_host_ringbuffer_slot_available(&rb, 1));
  /* The answer, then the consumer's release. */
  rb.tx_flags_host[1] = (uint64_t)(uintptr_t)rb.tx_data;
  assert_false(cudaq_host_ringbuffer_slot_available(&rb, 1));
  cudaq_host_ringbuffer_clear_slot(&rb, 1);
  assert_int_equal(*magic, 0);
  assert_int_equal(rb.tx_flags_host[1], 0);
  assert_true(cudaq_host_ringbuffer_slot_available(&rb, 1));
  /* A flag ring: the flags alone decide. */
  rb.completion = CUDAQ_RX_COMPLETION_FLAG;
  *magic = CUDAQ_RPC_SLOT_CONSUMED;
  assert_true(cudaq_host_ringbuffer_slot_available(&rb, 1));
  cudaq_host_ringbuffer_clear_slot(&rb, 1);
  assert_int_equal(*magic, CUDAQ_RPC_SLOT_CONSUMED);
  rb.completion = CUDAQ_RX_COMPLETION_HEADER;
  assert_int_equal(cudaq_host_ringbuffer_free(&rb), CUDAQ_OK);
}

static void test_ring_alloc(void **state) {
  (void)state;
  cudaq_ringbuffer_t rb;
  EXPECT_ERR(cudaq_host_ringbuffer_alloc(NULL, 4, 64, 0), CUDAQ_ERR_INVALID_ARG);
  EXPECT_ERR(cudaq_host_ringbuffer_alloc(&rb, 0, 64, 0), CUDAQ_ERR_INVALID_ARG);
  EXPECT_ERR(cudaq_host_ringbuffer_alloc(&rb, 4, 23, 0), CUDAQ_ERR_INVALID_ARG);
  EXPECT_ERR(cudaq_host_ringbuffer_alloc(&rb, 4, 64, 0x80), CUDAQ_ERR_INVALID_ARG);
  EXPECT_ERR(cudaq_host_ringbuffer_alloc(&rb, 4, 64, CUDAQ_RING_ALLOC_HOST | CUDAQ_RING_ALLOC_MAPPED),
             CUDAQ_ERR_INVALID_ARG);

  /* Sizes that overflow are refused, not wrapped into a small allocation. */
  EXPECT_ERR(cudaq_host_ringbuffer_alloc(&rb, 0x80000000u, 0xFFFFFFF8u, CUDAQ_RING_ALLOC_HOST),
             CUDAQ_ERR_INVALID_ARG);
  assert_non_null(strstr(cudaq_last_error(), "overflow"));
  EXPECT_ERR(cudaq_host_ringbuffer_alloc(&rb, 0xFFFFFFFFu, 0xFFFFFFFFu, CUDAQ_RING_ALLOC_HOST),
             CUDAQ_ERR_INVALID_ARG);

  assert_int_equal(cudaq_host_ringbuffer_alloc(&rb, 5, 100, CUDAQ_RING_ALLOC_HOST), CUDAQ_OK);
  assert_int_equal(rb.rx_stride_sz, 104); /* rounded up to 8 */
  assert_int_equal(rb.tx_stride_sz, 104);
  assert_int_equal((uintptr_t)rb.rx_flags_host % 128, 0);
  assert_int_equal((uintptr_t)rb.tx_flags_host % 128, 0);
  assert_int_equal((uintptr_t)rb.rx_data_host % 128, 0);
  assert_int_equal((uintptr_t)rb.tx_data_host % 128, 0);
  /* Flags are on cache lines of their own: no overlap with each other or data. */
  assert_true((uint8_t *)(uintptr_t)rb.tx_flags_host >= (uint8_t *)(uintptr_t)(rb.rx_flags_host + 5));
  assert_true(rb.rx_data_host >= (uint8_t *)(uintptr_t)(rb.tx_flags_host + 5));
  assert_true(rb.tx_data_host >= rb.rx_data_host + 5 * 104);
  assert_ptr_equal(rb.rx_data, rb.rx_data_host); /* host memory: one view */
  assert_false(cudaq_host_ringbuffer_is_mapped(&rb));
  for (int i = 0; i < 5; ++i) assert_true(cudaq_host_ringbuffer_slot_available(&rb, (uint32_t)i));
  cudaq_ringbuffer_t copy = rb;
  assert_int_equal(cudaq_host_ringbuffer_free(&rb), CUDAQ_OK);
  assert_null(rb.rx_flags_host);
  assert_int_equal(cudaq_host_ringbuffer_free(&rb), CUDAQ_OK); /* zeroed ring: no-op */
  EXPECT_ERR(cudaq_host_ringbuffer_free(&copy), CUDAQ_ERR_INVALID_ARG); /* double free refused */
  EXPECT_ERR(cudaq_host_ringbuffer_free(NULL), CUDAQ_ERR_INVALID_ARG);

  /* A ring the caller allocated is not ours to free. */
  uint64_t flags[8] = {0};
  uint8_t data[256];
  cudaq_ringbuffer_t mine = {flags, flags + 4, data, data + 128, 32, 32, NULL, NULL, NULL, NULL, CUDAQ_RX_COMPLETION_FLAG};
  EXPECT_ERR(cudaq_host_ringbuffer_free(&mine), CUDAQ_ERR_INVALID_ARG);

  assert_int_equal(cudaq_host_ringbuffer_alloc(&rb, 3, 64, CUDAQ_RING_ALLOC_IN_PLACE | CUDAQ_RING_ALLOC_HOST),
                   CUDAQ_OK);
  assert_ptr_equal(rb.tx_data, rb.rx_data);
  assert_ptr_not_equal(rb.tx_flags, rb.rx_flags);
  assert_int_equal(cudaq_host_ringbuffer_free(&rb), CUDAQ_OK);

  /* MAPPED needs CUDA and a device; without either it fails cleanly. The
   * default falls back to host memory when no device is usable. */
  cudaq_status_t st = cudaq_host_ringbuffer_alloc(&rb, 2, 64, CUDAQ_RING_ALLOC_MAPPED);
  if (st == CUDAQ_OK) {
    assert_true(cudaq_host_ringbuffer_is_mapped(&rb));
    assert_int_equal(cudaq_host_ringbuffer_free(&rb), CUDAQ_OK);
  } else {
    assert_true(st == CUDAQ_ERR_UNSUPPORTED || st == CUDAQ_ERR_CUDA);
    assert_true(strlen(cudaq_last_error()) > 0);
  }
  assert_int_equal(cudaq_host_ringbuffer_alloc(&rb, 2, 64, CUDAQ_RING_ALLOC_DEFAULT), CUDAQ_OK);
  assert_int_equal(cudaq_host_ringbuffer_free(&rb), CUDAQ_OK);
}

static void test_status_strings(void **state) {
  (void)state;
  assert_string_equal(cudaq_status_string(CUDAQ_OK), "CUDAQ_OK");
  assert_string_equal(cudaq_status_string(CUDAQ_ERR_UNSUPPORTED), "CUDAQ_ERR_UNSUPPORTED");
  assert_string_equal(cudaq_status_string((cudaq_status_t)99), "unknown cudaq_status_t");
  assert_string_equal(cudaq_rpc_status_string(0), "ok");
  assert_string_equal(cudaq_rpc_status_string(3), "handler error");
  assert_non_null(strstr(cudaq_rpc_status_string(CUDAQ_RPC_ERR_PAYLOAD_TOO_LARGE), "slot"));
  assert_string_equal(cudaq_rpc_status_string(-99), "unknown protocol error");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_manager_errors),      cmocka_unit_test(test_config_defaults),
      cmocka_unit_test(test_dispatcher_create_errors), cmocka_unit_test(test_wiring_errors),
      cmocka_unit_test(test_device_path_start),   cmocka_unit_test(test_tx_flag_classification),
      cmocka_unit_test(test_write_request),       cmocka_unit_test(test_ring_alloc),
      cmocka_unit_test(test_slot_helpers_null_ring), cmocka_unit_test(test_header_completion_host),
      cmocka_unit_test(test_status_strings),
  };
  return cmocka_run_group_tests_name("host_api", tests, NULL, NULL);
}
