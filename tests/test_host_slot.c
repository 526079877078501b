/*
 * test_host_slot.c - the host path's slot parser on its own, single
 * threaded: outcome of each kind of slot, the response header written by
 * the dispatcher (not the handler), the handler's view of its arguments,
 * header fields captured before an in-place handler overwrites them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "internal.h"
#include "test_util.h"

static uint32_t seen_arg_len, seen_max;
static const void *seen_args;
static void *seen_result;

/* Scribbles over the whole in-place slot, header included, then answers. */
static int h_clobber(const void *args, void *result, uint32_t arg_len, uint32_t max_result_len,
                     uint32_t *result_len) {
  seen_args = args, seen_result = result, seen_arg_len = arg_len, seen_max = max_result_len;
  memset((uint8_t *)result - CUDAQ_RPC_HEADER_SIZE, 0x77, CUDAQ_RPC_HEADER_SIZE + max_result_len);
  *result_len = 2;
  return 0;
}

static void build(cudaq__host_entry_t *t, uint32_t *count) {
  cudaq_function_entry_t e[7];
  test_table(e);
  e[6] = test_entry(cudaq_fnv1a_hash("clobber"), h_clobber);
  assert_int_equal(cudaq__host_table_build(e, 7, t), CUDAQ_OK);
  *count = 7;
  assert_true(t[1].has_fixed_arg_len);
  assert_int_equal(t[1].fixed_arg_len, 16);
  assert_false(t[0].has_fixed_arg_len); /* no schema: any length */
}

static void put_req(uint8_t *slot, uint32_t fn, uint32_t len, uint32_t rid, uint64_t ptp) {
  cudaq_rpc_header_t h = {CUDAQ_RPC_MAGIC_REQUEST, fn, len, rid, ptp};
  memcpy(slot, &h, sizeof h);
}

static void test_in_place_header_read_before_handler(void **state) {
  (void)state;
  cudaq__host_entry_t t[7];
  uint32_t n;
  build(t, &n);
  uint8_t slot[128];
  memset(slot, 0, sizeof slot);
  put_req(slot, cudaq_fnv1a_hash("clobber"), 10, 0xABCDEF01u, 0x1122334455667788ull);
  int32_t status = -100;
  assert_int_equal(cudaq__host_process_slot(t, n, slot, 104, slot, sizeof slot, &status),
                   CUDAQ__SLOT_ANSWERED);
  assert_int_equal(status, 0);
  assert_ptr_equal(seen_args, slot + 24);
  assert_ptr_equal(seen_result, slot + 24); /* in place: same address */
  assert_int_equal(seen_arg_len, 10);
  assert_int_equal(seen_max, 104);
  cudaq_rpc_response_t r;
  memcpy(&r, slot, sizeof r);
  assert_int_equal(r.magic, CUDAQ_RPC_MAGIC_RESPONSE);
  assert_int_equal(r.result_len, 2);
  assert_int_equal(r.request_id, 0xABCDEF01u);
  assert_true(r.ptp_timestamp == 0x1122334455667788ull);
  assert_int_equal(slot[24], 0x77); /* the handler's bytes survive */
}

static void test_outcomes(void **state) {
  (void)state;
  cudaq__host_entry_t t[7];
  uint32_t n;
  build(t, &n);
  uint8_t rx[64], tx[64];
  int32_t status;
  memset(tx, 0xA5, sizeof tx);
  memset(rx, 0, sizeof rx);
  assert_int_equal(cudaq__host_process_slot(t, n, rx, 40, tx, sizeof tx, &status),
                   CUDAQ__SLOT_BAD_MAGIC);
  assert_int_equal(tx[0], 0xA5); /* nothing written */
  put_req(rx, 0x1234u, 0, 1, 2);
  assert_int_equal(cudaq__host_process_slot(t, n, rx, 40, tx, sizeof tx, &status),
                   CUDAQ__SLOT_UNKNOWN_FUNCTION);
  assert_int_equal(tx[0], 0xA5);
  put_req(rx, FN_ECHO, 41, 1, 2);
  assert_int_equal(cudaq__host_process_slot(t, n, rx, 40, tx, sizeof tx, &status),
                   CUDAQ__SLOT_ANSWERED);
  assert_int_equal(status, CUDAQ_RPC_ERR_PAYLOAD_TOO_LARGE);
  put_req(rx, FN_ECHO, 40, 1, 2);
  assert_int_equal(cudaq__host_process_slot(t, n, rx, 40, tx, sizeof tx, &status),
                   CUDAQ__SLOT_ANSWERED);
  assert_int_equal(status, 0);
  /* A TX slot smaller than the request: the echo does not fit, the
   * handler says so with its own error (max_result_len told it). */
  put_req(rx, FN_ECHO, 40, 1, 2);
  assert_int_equal(cudaq__host_process_slot(t, n, rx, 40, tx, 32, &status), CUDAQ__SLOT_ANSWERED);
  assert_int_equal(status, 1);
  put_req(rx, FN_SUM, 16, 1, 2);
  assert_int_equal(cudaq__host_process_slot(t, n, rx, 40, tx, sizeof tx, &status),
                   CUDAQ__SLOT_ANSWERED);
  assert_int_equal(status, 0);
  put_req(rx, FN_SUM, 20, 1, 2);
  assert_int_equal(cudaq__host_process_slot(t, n, rx, 40, tx, sizeof tx, &status),
                   CUDAQ__SLOT_ANSWERED);
  assert_int_equal(status, CUDAQ_RPC_ERR_ARG_LEN_MISMATCH);
  /* A 24-byte TX slot leaves no room for results. */
  put_req(rx, FN_GREEDY, 0, 1, 2);
  assert_int_equal(cudaq__host_process_slot(t, n, rx, 40, tx, 24, &status), CUDAQ__SLOT_ANSWERED);
  assert_int_equal(status, CUDAQ_RPC_ERR_RESULT_TOO_LARGE);
}

/* A schema whose last argument is variable fixes a minimum length: the
 * fixed arguments before it. Shorter requests never reach the handler. */
static void test_variable_schema_minimum(void **state) {
  (void)state;
  cudaq_function_entry_t e = test_entry(FN_ECHO, h_echo);
  e.schema.num_args = 2;
  e.schema.args[0].type_id = CUDAQ_TYPE_INT32;
  e.schema.args[0].size_bytes = 4;
  e.schema.args[0].num_elements = 1;
  e.schema.args[1].type_id = CUDAQ_TYPE_ARRAY_UINT8; /* size 0, count 0: variable */
  cudaq__host_entry_t t;
  assert_int_equal(cudaq__host_table_build(&e, 1, &t), CUDAQ_OK);
  assert_false(t.has_fixed_arg_len);
  assert_int_equal(t.fixed_arg_len, 4);
  uint8_t rx[64], tx[64];
  int32_t status;
  memset(rx, 0, sizeof rx);
  const uint32_t lens[] = {0, 3, 4, 5, 40};
  const int32_t want[] = {CUDAQ_RPC_ERR_ARG_LEN_MISMATCH, CUDAQ_RPC_ERR_ARG_LEN_MISMATCH, 0, 0, 0};
  for (int i = 0; i < 5; ++i) {
    put_req(rx, FN_ECHO, lens[i], (uint32_t)i, 9);
    assert_int_equal(cudaq__host_process_slot(&t, 1, rx, 40, tx, sizeof tx, &status), CUDAQ__SLOT_ANSWERED);
    assert_int_equal(status, want[i]);
  }
}

/* With graph workers (graph_ok), a valid GRAPH_LAUNCH request comes back
 * unanswered for the worker pool, after one lookup and the length rule;
 * without them, or with a bad length, it is answered as before. */
static void test_graph_launch_outcome(void **state) {
  (void)state;
  cudaq_function_entry_t e[2];
  e[0] = test_entry(FN_ECHO, h_echo);
  e[1] = test_entry(FN_SUM, NULL);
  e[1].dispatch_mode = CUDAQ_DISPATCH_GRAPH_LAUNCH;
  e[1].schema.num_args = 1;
  e[1].schema.args[0].type_id = CUDAQ_TYPE_ARRAY_UINT8;
  e[1].schema.args[0].size_bytes = 8;
  e[1].schema.args[0].num_elements = 8;
  cudaq__host_entry_t t[2];
  assert_int_equal(cudaq__host_table_build(e, 2, t), CUDAQ_OK);
  uint8_t rx[64], tx[64];
  int32_t status = -100;
  uint32_t fid = 0;
  memset(rx, 0, sizeof rx);
  memset(tx, 0xEE, sizeof tx);
  put_req(rx, FN_SUM, 8, 1, 2);
  assert_int_equal(cudaq__host_process_slot_ex(t, 2, rx, 40, tx, sizeof tx, &status, 1, &fid),
                   CUDAQ__SLOT_GRAPH_LAUNCH);
  assert_int_equal(status, 0);
  assert_int_equal(fid, FN_SUM);
  assert_int_equal(tx[0], 0xEE); /* nothing written */
  /* graph_ok 0: answered UNSUPPORTED_MODE */
  assert_int_equal(cudaq__host_process_slot_ex(t, 2, rx, 40, tx, sizeof tx, &status, 0, &fid),
                   CUDAQ__SLOT_ANSWERED);
  assert_int_equal(status, CUDAQ_RPC_ERR_UNSUPPORTED_MODE);
  /* a bad length is answered even with graph workers */
  put_req(rx, FN_SUM, 7, 1, 2);
  assert_int_equal(cudaq__host_process_slot_ex(t, 2, rx, 40, tx, sizeof tx, &status, 1, &fid),
                   CUDAQ__SLOT_ANSWERED);
  assert_int_equal(status, CUDAQ_RPC_ERR_ARG_LEN_MISMATCH);
  /* a HOST_CALL request is handled as usual with graph_ok */
  put_req(rx, FN_ECHO, 4, 3, 4);
  assert_int_equal(cudaq__host_process_slot_ex(t, 2, rx, 40, tx, sizeof tx, &status, 1, &fid),
                   CUDAQ__SLOT_ANSWERED);
  assert_int_equal(status, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_in_place_header_read_before_handler),
      cmocka_unit_test(test_outcomes),
      cmocka_unit_test(test_variable_schema_minimum),
      cmocka_unit_test(test_graph_launch_outcome),
  };
  return cmocka_run_group_tests_name("host_slot", tests, NULL, NULL);
}
