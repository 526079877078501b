/*
 * test_udp_check.c - the UDP bridge's datagram check (udp_check.c), one
 * case per rule of udp.h's "Bad input" list, plus the config checks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "udp_internal.h"

static size_t make(uint8_t *buf, uint32_t magic, uint32_t fid, uint32_t arg_len, size_t payload) {
  cudaq_rpc_header_t h = {magic, fid, arg_len, 77, 0x1122334455667788ull};
  memcpy(buf, &h, sizeof h);
  memset(buf + sizeof h, 0xAB, payload);
  return sizeof h + payload;
}

static void expect_reply(const cudaq_rpc_response_t *r, int32_t status) {
  assert_int_equal(r->magic, CUDAQ_RPC_MAGIC_RESPONSE);
  assert_int_equal(r->status, status);
  assert_int_equal(r->result_len, 0);
  assert_int_equal(r->request_id, 77);
  assert_true(r->ptp_timestamp == 0x1122334455667788ull);
}

static void test_accept(void **state) {
  (void)state;
  uint8_t buf[256];
  cudaq_rpc_response_t r;
  memset(&r, 0x5A, sizeof r);
  size_t n = make(buf, CUDAQ_RPC_MAGIC_REQUEST, 5, 10, 10);
  assert_int_equal(cudaq__udp_check_datagram(buf, n, n, 256, NULL, 0, &r), CUDAQ__UDP_ACCEPT);
  assert_int_equal(r.magic, 0x5A5A5A5A); /* untouched */
  n = make(buf, CUDAQ_RPC_MAGIC_REQUEST, 5, 0, 0); /* header only */
  assert_int_equal(cudaq__udp_check_datagram(buf, n, n, 24, NULL, 0, &r), CUDAQ__UDP_ACCEPT);
  n = make(buf, CUDAQ_RPC_MAGIC_REQUEST, 5, 232, 232); /* exactly a slot */
  assert_int_equal(cudaq__udp_check_datagram(buf, n, n, 256, NULL, 0, &r), CUDAQ__UDP_ACCEPT);
}

static void test_short_and_magic(void **state) {
  (void)state;
  uint8_t buf[64];
  cudaq_rpc_response_t r;
  memset(&r, 0x5A, sizeof r);
  make(buf, CUDAQ_RPC_MAGIC_REQUEST, 5, 0, 0);
  for (size_t n = 0; n < 24; ++n)
    assert_int_equal(cudaq__udp_check_datagram(buf, n, n, 64, NULL, 0, &r), CUDAQ__UDP_DROP_SHORT);
  size_t n = make(buf, CUDAQ_RPC_MAGIC_RESPONSE, 5, 0, 0);
  assert_int_equal(cudaq__udp_check_datagram(buf, n, n, 64, NULL, 0, &r), CUDAQ__UDP_DROP_BAD_MAGIC);
  n = make(buf, 0, 5, 0, 0);
  assert_int_equal(cudaq__udp_check_datagram(buf, n, n, 64, NULL, 0, &r), CUDAQ__UDP_DROP_BAD_MAGIC);
  assert_int_equal(r.magic, 0x5A5A5A5A); /* no reply for either */
}

static void test_oversize(void **state) {
  (void)state;
  uint8_t buf[64];
  cudaq_rpc_response_t r;
  /* Truncated datagram: 1000 bytes on the wire, 40 held, slot 64. */
  make(buf, CUDAQ_RPC_MAGIC_REQUEST, 5, 976, 16);
  assert_int_equal(cudaq__udp_check_datagram(buf, 40, 1000, 64, NULL, 0, &r), CUDAQ__UDP_REPLY_OVERSIZE);
  expect_reply(&r, CUDAQ_RPC_ERR_PAYLOAD_TOO_LARGE);
  /* Fits, but arg_len says more than a slot can hold. */
  size_t n = make(buf, CUDAQ_RPC_MAGIC_REQUEST, 5, 0xFFFFFFFFu, 16);
  assert_int_equal(cudaq__udp_check_datagram(buf, n, n, 64, NULL, 0, &r), CUDAQ__UDP_REPLY_OVERSIZE);
  expect_reply(&r, CUDAQ_RPC_ERR_PAYLOAD_TOO_LARGE);
  /* Oversize wins over a mismatching arg_len. */
  make(buf, CUDAQ_RPC_MAGIC_REQUEST, 5, 3, 16);
  assert_int_equal(cudaq__udp_check_datagram(buf, 64, 65, 64, NULL, 0, &r), CUDAQ__UDP_REPLY_OVERSIZE);
}

static void test_arg_len(void **state) {
  (void)state;
  uint8_t buf[64];
  cudaq_rpc_response_t r;
  size_t n = make(buf, CUDAQ_RPC_MAGIC_REQUEST, 5, 8, 10); /* says 8, carries 10 */
  assert_int_equal(cudaq__udp_check_datagram(buf, n, n, 64, NULL, 0, &r), CUDAQ__UDP_REPLY_ARG_LEN);
  expect_reply(&r, CUDAQ_RPC_ERR_ARG_LEN_MISMATCH);
  n = make(buf, CUDAQ_RPC_MAGIC_REQUEST, 5, 12, 10); /* says 12, carries 10 */
  assert_int_equal(cudaq__udp_check_datagram(buf, n, n, 64, NULL, 0, &r), CUDAQ__UDP_REPLY_ARG_LEN);
  expect_reply(&r, CUDAQ_RPC_ERR_ARG_LEN_MISMATCH);
}

static void test_unknown_function(void **state) {
  (void)state;
  uint8_t buf[64];
  cudaq_rpc_response_t r;
  const uint32_t ids[] = {3, 9, 100}; /* sorted, as the bridge keeps them */
  for (uint32_t f = 0; f < 120; ++f) {
    size_t n = make(buf, CUDAQ_RPC_MAGIC_REQUEST, f, 4, 4);
    cudaq__udp_verdict_t v = cudaq__udp_check_datagram(buf, n, n, 64, ids, 3, &r);
    if (f == 3 || f == 9 || f == 100) {
      assert_int_equal(v, CUDAQ__UDP_ACCEPT);
    } else {
      assert_int_equal(v, CUDAQ__UDP_REPLY_UNKNOWN_FUNCTION);
      expect_reply(&r, CUDAQ_UDP_ERR_UNKNOWN_FUNCTION);
    }
  }
}

static void test_config(void **state) {
  (void)state;
  cudaq_udp_config_t c;
  cudaq_udp_bridge_t *b = NULL;
  cudaq_ringbuffer_t ring;
  assert_int_equal(cudaq_udp_config_init(NULL), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_udp_config_init(&c), CUDAQ_OK);
  assert_int_equal(cudaq_udp_bridge_create(&c, &b), CUDAQ_ERR_INVALID_ARG); /* no ring */
  assert_int_equal(cudaq_host_ringbuffer_alloc(&ring, 4, 64, CUDAQ_RING_ALLOC_HOST), CUDAQ_OK);
  c.ring = &ring;
  assert_int_equal(cudaq_udp_bridge_create(&c, &b), CUDAQ_ERR_INVALID_ARG); /* num_slots 0 */
  c.num_slots = 4;
  c.batch = 65;
  assert_int_equal(cudaq_udp_bridge_create(&c, &b), CUDAQ_ERR_INVALID_ARG);
  c.batch = 4;
  c.tx_mode = (cudaq_udp_tx_mode_t)7;
  assert_int_equal(cudaq_udp_bridge_create(&c, &b), CUDAQ_ERR_INVALID_ARG);
  c.tx_mode = CUDAQ_UDP_TX_EXTERNAL;
  c.bind_addr = "not-an-address";
  assert_int_equal(cudaq_udp_bridge_create(&c, &b), CUDAQ_ERR_INVALID_ARG);
  c.bind_addr = "127.0.0.1";
  c.num_function_ids = 2;
  assert_int_equal(cudaq_udp_bridge_create(&c, &b), CUDAQ_ERR_INVALID_ARG);
  c.num_function_ids = 0;
  /* A ring with header completion: refused (datagrams land magic first). */
  ring.completion = CUDAQ_RX_COMPLETION_HEADER;
  assert_int_equal(cudaq_udp_bridge_create(&c, &b), CUDAQ_ERR_INVALID_ARG);
  assert_non_null(strstr(cudaq_last_error(), "flag protocol"));
  ring.completion = CUDAQ_RX_COMPLETION_FLAG;
  assert_int_equal(cudaq_udp_bridge_create(&c, &b), CUDAQ_OK);
  uint16_t port = 0;
  assert_int_equal(cudaq_udp_bridge_port(b, &port), CUDAQ_OK);
  assert_true(port != 0);
  assert_int_equal(cudaq_udp_bridge_send_response(b, 4), CUDAQ_ERR_INVALID_ARG); /* out of range */
  assert_int_equal(cudaq_udp_bridge_send_response(b, 0), CUDAQ_ERR_INVALID_ARG); /* no request */
  assert_int_equal(cudaq_udp_bridge_stop(b), CUDAQ_OK); /* never started */
  assert_int_equal(cudaq_udp_bridge_start(b), CUDAQ_OK);
  assert_int_equal(cudaq_udp_bridge_start(b), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_udp_bridge_stop(b), CUDAQ_OK);
  assert_int_equal(cudaq_udp_bridge_stop(b), CUDAQ_OK);
  assert_int_equal(cudaq_udp_bridge_destroy(b), CUDAQ_OK);
  assert_int_equal(cudaq_udp_bridge_destroy(NULL), CUDAQ_ERR_INVALID_ARG);
  cudaq_host_ringbuffer_free(&ring);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_accept),        cmocka_unit_test(test_short_and_magic),
      cmocka_unit_test(test_oversize),      cmocka_unit_test(test_arg_len),
      cmocka_unit_test(test_unknown_function), cmocka_unit_test(test_config),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
