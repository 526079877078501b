/*
 * test_wire.c - the RPC wire protocol (spec: realtime-message-protocol.txt).
 * Golden byte vectors from the spec's examples, FNV-1a known values, the
 * type system and schema rules, bit and nibble packing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cudaq/realtime/rpc_wire_format.h"

static cudaq_type_desc_t desc(uint8_t type, uint32_t size, uint32_t n) {
  cudaq_type_desc_t d;
  memset(&d, 0, sizeof d);
  d.type_id = type;
  d.size_bytes = size;
  d.num_elements = n;
  return d;
}

/* Spec "RPC Header / Response": 24 bytes each, fields at 0/4/8/12/16,
 * little-endian, magic bytes 'R' 'Q' 'U' 'C' / 'S' 'Q' 'U' 'C'. */
static void test_header_layout_and_magic(void **state) {
  (void)state;
  assert_int_equal(sizeof(cudaq_rpc_header_t), 24);
  assert_int_equal(sizeof(cudaq_rpc_response_t), 24);
  assert_int_equal(CUDAQ_RPC_HEADER_SIZE, 24);
  cudaq_rpc_header_t h = {CUDAQ_RPC_MAGIC_REQUEST, 0x11223344u, 8u, 0xA0B0C0D0u,
                          0x0102030405060708ull};
  const uint8_t expect[24] = {0x52, 0x51, 0x55, 0x43, 0x44, 0x33, 0x22, 0x11, 0x08, 0x00, 0x00, 0x00,
                              0xD0, 0xC0, 0xB0, 0xA0, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01};
  assert_memory_equal(&h, expect, 24);
  assert_memory_equal(&h, "RQUC", 4); /* 'CUQR' little-endian */
}

/* Spec "Single-Result Response": the response bytes of a handler returning
 * one uint8_t (value 3). */
static void test_single_result_response_bytes(void **state) {
  (void)state;
  uint8_t slot[32];
  memset(slot, 0xAB, sizeof slot);
  cudaq_rpc_response_t r = {CUDAQ_RPC_MAGIC_RESPONSE, 0, 1, 0x00000007u, 0x1122334455667788ull};
  memcpy(slot, &r, sizeof r);
  slot[24] = 0x03;
  const uint8_t golden[25] = {0x53, 0x51, 0x55, 0x43, /* magic */
                              0x00, 0x00, 0x00, 0x00, /* status 0 */
                              0x01, 0x00, 0x00, 0x00, /* result_len 1 */
                              0x07, 0x00, 0x00, 0x00, /* request_id */
                              0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, /* ptp */
                              0x03};
  assert_memory_equal(slot, golden, sizeof golden);
  assert_int_equal(slot[25], 0xAB); /* padding untouched */
}

/* Spec "Encoding Examples", Example 1: (int32 count, float threshold) is
 * at offsets 24-27 and 28-31 of the slot, arg_len 8. */
static void test_two_argument_offsets(void **state) {
  (void)state;
  cudaq_handler_schema_t s;
  memset(&s, 0, sizeof s);
  s.num_args = 2;
  s.args[0] = desc(CUDAQ_TYPE_INT32, 4, 1);
  s.args[1] = desc(CUDAQ_TYPE_FLOAT32, 4, 1);
  uint32_t off[CUDAQ_SCHEMA_MAX_ARGS] = {0}, total = 0;
  int fixed = 0;
  assert_int_equal(cudaq_schema_arg_layout(&s, off, &total, &fixed), CUDAQ_OK);
  assert_int_equal(total, 8);
  assert_true(fixed);
  assert_int_equal(CUDAQ_RPC_HEADER_SIZE + off[0], 24);
  assert_int_equal(CUDAQ_RPC_HEADER_SIZE + off[1], 28);

  uint8_t slot[32];
  int32_t count = 0x01020304;
  float thr = 0.5f;
  memcpy(slot + CUDAQ_RPC_HEADER_SIZE + off[0], &count, 4);
  memcpy(slot + CUDAQ_RPC_HEADER_SIZE + off[1], &thr, 4);
  const uint8_t golden[8] = {0x04, 0x03, 0x02, 0x01, 0x00, 0x00, 0x00, 0x3F};
  assert_memory_equal(slot + 24, golden, 8);
}

/* Spec "Schema-Driven Argument Parsing": offsets 0, 16, 80 for a 16-byte
 * bit-packed argument (128 bits), 16 float32 (64 bytes), then a third. */
static void test_offsets_0_16_80(void **state) {
  (void)state;
  cudaq_handler_schema_t s;
  memset(&s, 0, sizeof s);
  s.num_args = 3;
  s.args[0] = desc(CUDAQ_TYPE_BIT_PACKED, 16, 128);
  s.args[1] = desc(CUDAQ_TYPE_ARRAY_FLOAT32, 64, 16);
  s.args[2] = desc(CUDAQ_TYPE_UINT8, 1, 1);
  uint32_t off[CUDAQ_SCHEMA_MAX_ARGS] = {0}, total = 0;
  int fixed = 0;
  assert_int_equal(cudaq_schema_arg_layout(&s, off, &total, &fixed), CUDAQ_OK);
  assert_int_equal(off[0], 0);
  assert_int_equal(off[1], 16);
  assert_int_equal(off[2], 80);
  assert_int_equal(total, 81);
  assert_true(fixed);
}

/* Spec "Multi-Result Response": correction (uint8) + confidence (float32):
 * result_len 5, results at 24 and 25. */
static void test_multi_result_layout(void **state) {
  (void)state;
  cudaq_handler_schema_t s;
  memset(&s, 0, sizeof s);
  s.num_results = 2;
  s.results[0] = desc(CUDAQ_TYPE_UINT8, 1, 1);
  s.results[1] = desc(CUDAQ_TYPE_FLOAT32, 4, 1);
  uint32_t off[CUDAQ_SCHEMA_MAX_RESULTS] = {0}, total = 0;
  int fixed = 0;
  assert_int_equal(cudaq_schema_result_layout(&s, off, &total, &fixed), CUDAQ_OK);
  assert_int_equal(total, 5);
  assert_int_equal(off[1] + CUDAQ_RPC_HEADER_SIZE, 25);
}

/* Spec "Bit-Packed Data Encoding": 10 bits -> 2 bytes, LSB-first, the
 * unused bits of byte 1 zero. */
static void test_bitpack_10_bits(void **state) {
  (void)state;
  const uint8_t bits[10] = {1, 0, 1, 1, 0, 0, 0, 1, 1, 1};
  uint8_t out[2] = {0xFF, 0xFF};
  assert_int_equal(cudaq_bitpacked_size(10), 2);
  assert_int_equal(cudaq_bitpack(bits, 10, out, sizeof out), CUDAQ_OK);
  assert_int_equal(out[0], 0x8D); /* b0=1 b2=1 b3=1 b7=1 */
  assert_int_equal(out[1], 0x03); /* b8=1 b9=1, bits 2..7 zero */
  uint8_t back[10];
  assert_int_equal(cudaq_bitunpack(out, 10, back), CUDAQ_OK);
  assert_memory_equal(back, bits, 10);
  /* Nonzero inputs count as 1. */
  const uint8_t loud[3] = {7, 0, 200};
  assert_int_equal(cudaq_bitpack(loud, 3, out, 1), CUDAQ_OK);
  assert_int_equal(out[0], 0x05);
}

static void test_bitpack_sizes_and_errors(void **state) {
  (void)state;
  assert_int_equal(cudaq_bitpacked_size(0), 0);
  assert_int_equal(cudaq_bitpacked_size(1), 1);
  assert_int_equal(cudaq_bitpacked_size(8), 1);
  assert_int_equal(cudaq_bitpacked_size(9), 2);
  assert_int_equal(cudaq_bitpacked_size(128), 16);
  uint8_t bits[17] = {0}, out[3];
  assert_int_equal(cudaq_bitpack(bits, 17, out, 2), CUDAQ_ERR_INVALID_ARG); /* too short */
  assert_int_equal(cudaq_bitpack(NULL, 17, out, 3), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bitpack(bits, 17, NULL, 3), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bitpack(NULL, 0, NULL, 0), CUDAQ_OK);
  assert_int_equal(cudaq_bitunpack(NULL, 3, bits), CUDAQ_ERR_INVALID_ARG);
  /* Round trip over every length up to 70 with a pseudo-random pattern. */
  for (uint32_t n = 0; n <= 70; ++n) {
    uint8_t in[70], packed[9], back[70];
    for (uint32_t i = 0; i < n; ++i) in[i] = (uint8_t)(((i * 2654435761u) >> 7) & 1u);
    memset(packed, 0xFF, sizeof packed);
    assert_int_equal(cudaq_bitpack(in, n, packed, sizeof packed), CUDAQ_OK);
    if (n % 8) assert_int_equal(packed[n / 8] >> (n % 8), 0); /* unused bits zero */
    assert_int_equal(cudaq_bitunpack(packed, n, back), CUDAQ_OK);
    if (n) assert_memory_equal(in, back, n);
  }
}

/* Spec "Multi-Bit Measurement Encoding", 4-bit soft readout: low nibble =
 * measurement[0], high nibble = measurement[1]; size ceil(n/2). */
static void test_nibble_packing(void **state) {
  (void)state;
  const uint8_t v[5] = {0x3, 0xA, 0xF, 0x0, 0x7};
  uint8_t out[3] = {0xFF, 0xFF, 0xFF};
  assert_int_equal(cudaq_nibble_packed_size(5), 3);
  assert_int_equal(cudaq_nibble_pack(v, 5, out, sizeof out), CUDAQ_OK);
  assert_int_equal(out[0], 0xA3);
  assert_int_equal(out[1], 0x0F);
  assert_int_equal(out[2], 0x07); /* odd count: high nibble 0 */
  uint8_t back[5];
  assert_int_equal(cudaq_nibble_unpack(out, 5, back), CUDAQ_OK);
  assert_memory_equal(back, v, 5);
  const uint8_t bad[2] = {1, 16};
  uint8_t o2[1] = {0x55};
  assert_int_equal(cudaq_nibble_pack(bad, 2, o2, 1), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(o2[0], 0x55); /* nothing written on refusal */
  assert_int_equal(cudaq_nibble_pack(v, 5, out, 2), CUDAQ_ERR_INVALID_ARG);
}

/* FNV-1a 32-bit known values (the published FNV test vectors). */
static void test_fnv1a_known_values(void **state) {
  (void)state;
  assert_int_equal(cudaq_fnv1a_hash(""), 0x811c9dc5u);
  assert_int_equal(cudaq_fnv1a_hash(NULL), 0x811c9dc5u);
  assert_int_equal(cudaq_fnv1a_hash("a"), 0xe40c292cu);
  assert_int_equal(cudaq_fnv1a_hash("foobar"), 0xbf9cf968u);
  /* Bytes above 0x7F hash as unsigned bytes, not sign-extended chars. */
  assert_int_equal(cudaq_fnv1a_hash("\xff"), (0x811c9dc5u ^ 0xffu) * 16777619u);
  assert_int_not_equal(cudaq_fnv1a_hash("mock_decode"), cudaq_fnv1a_hash("mock_decodf"));
}

static void test_type_ids_and_sizes(void **state) {
  (void)state;
  assert_int_equal(CUDAQ_TYPE_UINT8, 0x10);
  assert_int_equal(CUDAQ_TYPE_INT32, 0x11);
  assert_int_equal(CUDAQ_TYPE_INT64, 0x12);
  assert_int_equal(CUDAQ_TYPE_FLOAT32, 0x13);
  assert_int_equal(CUDAQ_TYPE_FLOAT64, 0x14);
  assert_int_equal(CUDAQ_TYPE_ARRAY_UINT8, 0x20);
  assert_int_equal(CUDAQ_TYPE_ARRAY_INT32, 0x21);
  assert_int_equal(CUDAQ_TYPE_ARRAY_FLOAT32, 0x22);
  assert_int_equal(CUDAQ_TYPE_ARRAY_FLOAT64, 0x23);
  assert_int_equal(CUDAQ_TYPE_BIT_PACKED, 0x30);
  assert_int_equal(cudaq_payload_type_elem_size(CUDAQ_TYPE_UINT8), 1);
  assert_int_equal(cudaq_payload_type_elem_size(CUDAQ_TYPE_INT64), 8);
  assert_int_equal(cudaq_payload_type_elem_size(CUDAQ_TYPE_ARRAY_FLOAT64), 8);
  assert_int_equal(cudaq_payload_type_elem_size(CUDAQ_TYPE_ARRAY_INT32), 4);
  assert_int_equal(cudaq_payload_type_elem_size(CUDAQ_TYPE_BIT_PACKED), 0);
  assert_int_equal(cudaq_payload_type_elem_size(0x99), 0);
}

/* Spec "Type System": scalars num_elements 1 and their size, arrays
 * count * element size, bit-packed ceil(bits / 8). */
static void test_type_desc_validation(void **state) {
  (void)state;
  cudaq_type_desc_t ok[] = {
      desc(CUDAQ_TYPE_UINT8, 1, 1),          desc(CUDAQ_TYPE_INT32, 4, 1),
      desc(CUDAQ_TYPE_INT64, 8, 1),          desc(CUDAQ_TYPE_FLOAT32, 4, 1),
      desc(CUDAQ_TYPE_FLOAT64, 8, 1),        desc(CUDAQ_TYPE_ARRAY_UINT8, 7, 7),
      desc(CUDAQ_TYPE_ARRAY_INT32, 12, 3),   desc(CUDAQ_TYPE_ARRAY_FLOAT32, 64, 16),
      desc(CUDAQ_TYPE_ARRAY_FLOAT64, 16, 2), desc(CUDAQ_TYPE_BIT_PACKED, 2, 10),
      desc(CUDAQ_TYPE_BIT_PACKED, 16, 128),  desc(CUDAQ_TYPE_BIT_PACKED, 0, 0) /* variable */,
      desc(CUDAQ_TYPE_ARRAY_UINT8, 0, 0) /* variable */};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; ++i)
    assert_int_equal(cudaq_type_desc_validate(&ok[i]), CUDAQ_OK);
  cudaq_type_desc_t bad[] = {
      desc(CUDAQ_TYPE_UINT8, 2, 1),          desc(CUDAQ_TYPE_INT32, 4, 2),
      desc(CUDAQ_TYPE_INT32, 0, 0) /* scalars are never variable */,
      desc(CUDAQ_TYPE_ARRAY_INT32, 11, 3),   desc(CUDAQ_TYPE_ARRAY_FLOAT64, 8, 2),
      desc(CUDAQ_TYPE_BIT_PACKED, 1, 10),    desc(CUDAQ_TYPE_BIT_PACKED, 3, 10),
      desc(CUDAQ_TYPE_BIT_PACKED, 16, 0),    desc(0x15, 4, 1),
      desc(0x00, 0, 0),                      desc(CUDAQ_TYPE_ARRAY_UINT8, 0, 5)};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i)
    assert_int_equal(cudaq_type_desc_validate(&bad[i]), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_type_desc_validate(NULL), CUDAQ_ERR_INVALID_ARG);
}

static void test_schema_validation(void **state) {
  (void)state;
  cudaq_handler_schema_t s;
  memset(&s, 0, sizeof s);
  assert_int_equal(cudaq_schema_validate(&s), CUDAQ_OK); /* no schema declared */
  assert_int_equal(cudaq_schema_validate(NULL), CUDAQ_ERR_INVALID_ARG);
  /* The QEC decoder schema: variable bit-packed events, then a count:
   * a variable-size argument that is not last has no defined offsets. */
  s.num_args = 2;
  s.args[0] = desc(CUDAQ_TYPE_BIT_PACKED, 0, 0);
  s.args[1] = desc(CUDAQ_TYPE_INT32, 4, 1);
  assert_int_equal(cudaq_schema_validate(&s), CUDAQ_ERR_INVALID_ARG);
  s.args[0] = desc(CUDAQ_TYPE_INT32, 4, 1);
  s.args[1] = desc(CUDAQ_TYPE_BIT_PACKED, 0, 0);
  assert_int_equal(cudaq_schema_validate(&s), CUDAQ_OK);
  uint32_t total = 0;
  int fixed = 1;
  assert_int_equal(cudaq_schema_arg_layout(&s, NULL, &total, &fixed), CUDAQ_OK);
  assert_false(fixed);
  assert_int_equal(total, 4); /* minimum size */
  s.num_args = 9;
  assert_int_equal(cudaq_schema_validate(&s), CUDAQ_ERR_INVALID_ARG);
  s.num_args = 1;
  s.num_results = 5;
  assert_int_equal(cudaq_schema_validate(&s), CUDAQ_ERR_INVALID_ARG);
  s.num_results = 1;
  s.results[0] = desc(CUDAQ_TYPE_FLOAT64, 4, 1);
  assert_int_equal(cudaq_schema_validate(&s), CUDAQ_ERR_INVALID_ARG);
  s.results[0] = desc(CUDAQ_TYPE_FLOAT64, 8, 1);
  assert_int_equal(cudaq_schema_validate(&s), CUDAQ_OK);
  /* Eight maximal arrays overflow 32 bits: refused, not wrapped. */
  s.num_args = 8;
  for (int i = 0; i < 8; ++i) s.args[i] = desc(CUDAQ_TYPE_ARRAY_FLOAT64, 0xFFFFFFF8u, 0x1FFFFFFFu);
  assert_int_equal(cudaq_schema_validate(&s), CUDAQ_ERR_INVALID_ARG);
}

/* The request-length rule's one home (cudaq_schema_arg_rule +
 * cudaq_rpc_check_arg_len), as every dispatch path applies it. */
static void test_arg_len_rule(void **state) {
  (void)state;
  cudaq_handler_schema_t s;
  memset(&s, 0, sizeof s);
  uint32_t len = 99;
  int exact = 7;
  cudaq_schema_arg_rule(&s, &len, &exact); /* no schema: anything up to the room */
  assert_int_equal(len, 0);
  assert_int_equal(exact, 0);
  assert_int_equal(cudaq_rpc_check_arg_len(0, 100, len, exact), 0);
  assert_int_equal(cudaq_rpc_check_arg_len(100, 100, len, exact), 0);
  assert_int_equal(cudaq_rpc_check_arg_len(101, 100, len, exact), CUDAQ_RPC_ERR_PAYLOAD_TOO_LARGE);
  /* Fixed: an INT32 array of 10 and a UINT8: exactly 41 bytes. */
  s.num_args = 2;
  s.args[0].type_id = CUDAQ_TYPE_ARRAY_INT32;
  s.args[0].num_elements = 10;
  s.args[0].size_bytes = 40;
  s.args[1].type_id = CUDAQ_TYPE_UINT8;
  s.args[1].num_elements = 1;
  s.args[1].size_bytes = 1;
  cudaq_schema_arg_rule(&s, &len, &exact);
  assert_int_equal(len, 41);
  assert_int_equal(exact, 1);
  assert_int_equal(cudaq_rpc_check_arg_len(41, 100, len, exact), 0);
  assert_int_equal(cudaq_rpc_check_arg_len(40, 100, len, exact), CUDAQ_RPC_ERR_ARG_LEN_MISMATCH);
  assert_int_equal(cudaq_rpc_check_arg_len(42, 100, len, exact), CUDAQ_RPC_ERR_ARG_LEN_MISMATCH);
  assert_int_equal(cudaq_rpc_check_arg_len(41, 40, len, exact), CUDAQ_RPC_ERR_PAYLOAD_TOO_LARGE);
  /* Variable last argument: at least the fixed ones before it. */
  s.args[1].type_id = CUDAQ_TYPE_BIT_PACKED;
  s.args[1].num_elements = 0;
  s.args[1].size_bytes = 0;
  cudaq_schema_arg_rule(&s, &len, &exact);
  assert_int_equal(len, 40);
  assert_int_equal(exact, 0);
  assert_int_equal(cudaq_rpc_check_arg_len(40, 100, len, exact), 0);
  assert_int_equal(cudaq_rpc_check_arg_len(77, 100, len, exact), 0);
  assert_int_equal(cudaq_rpc_check_arg_len(39, 100, len, exact), CUDAQ_RPC_ERR_ARG_LEN_MISMATCH);
  /* An invalid schema (a variable descriptor not last) gives no rule. */
  s.args[0].type_id = CUDAQ_TYPE_BIT_PACKED;
  s.args[0].num_elements = 0;
  s.args[0].size_bytes = 0;
  cudaq_schema_arg_rule(&s, &len, &exact);
  assert_int_equal(len, 0);
  assert_int_equal(exact, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_header_layout_and_magic),
      cmocka_unit_test(test_single_result_response_bytes),
      cmocka_unit_test(test_two_argument_offsets),
      cmocka_unit_test(test_offsets_0_16_80),
      cmocka_unit_test(test_multi_result_layout),
      cmocka_unit_test(test_bitpack_10_bits),
      cmocka_unit_test(test_bitpack_sizes_and_errors),
      cmocka_unit_test(test_nibble_packing),
      cmocka_unit_test(test_fnv1a_known_values),
      cmocka_unit_test(test_type_ids_and_sizes),
      cmocka_unit_test(test_type_desc_validation),
      cmocka_unit_test(test_schema_validation),
      cmocka_unit_test(test_arg_len_rule),
  };
  return cmocka_run_group_tests_name("wire_format", tests, NULL, NULL);
}
