/* test_util.h - shared helpers for the host API tests. */
#ifndef CUDAQ_TEST_UTIL_H
#define CUDAQ_TEST_UTIL_H

#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "cudaq/realtime/cudaq_realtime.h"

#define FN_ECHO cudaq_fnv1a_hash("echo")
#define FN_SUM cudaq_fnv1a_hash("sum32")
#define FN_FAIL cudaq_fnv1a_hash("fail_with_7")
#define FN_GREEDY cudaq_fnv1a_hash("claims_too_much")
#define FN_DEVICE cudaq_fnv1a_hash("device_only")
#define FN_INPLACE cudaq_fnv1a_hash("negate_in_place")

/* echo: result = args. Safe in place (memmove). */
static inline int h_echo(const void *args, void *result, uint32_t arg_len, uint32_t max_result_len,
                         uint32_t *result_len) {
  if (arg_len > max_result_len) return 1;
  memmove(result, args, arg_len);
  *result_len = arg_len;
  return 0;
}

/* sum32: schema fixes the payload to 4 x int32; result = their sum. */
static inline int h_sum(const void *args, void *result, uint32_t arg_len, uint32_t max_result_len,
                        uint32_t *result_len) {
  int32_t v[4], s = 0;
  (void)max_result_len;
  memcpy(v, args, 16);
  (void)arg_len;
  for (int i = 0; i < 4; ++i) s += v[i];
  memcpy(result, &s, 4);
  *result_len = 4;
  return 0;
}

/* fail_with_7: a handler error with a 1-byte error detail. */
static inline int h_fail(const void *args, void *result, uint32_t arg_len, uint32_t max_result_len,
                         uint32_t *result_len) {
  (void)args, (void)arg_len, (void)max_result_len;
  *(uint8_t *)result = 0xEE;
  *result_len = 1;
  return 7;
}

/* claims_too_much: reports more result bytes than the slot has. */
static inline int h_greedy(const void *args, void *result, uint32_t arg_len,
                           uint32_t max_result_len, uint32_t *result_len) {
  (void)args, (void)result, (void)arg_len;
  *result_len = max_result_len + 1;
  return 0;
}

/* negate_in_place: reads each byte before writing the result over it. */
static inline int h_negate(const void *args, void *result, uint32_t arg_len,
                           uint32_t max_result_len, uint32_t *result_len) {
  const uint8_t *a = (const uint8_t *)args;
  uint8_t *r = (uint8_t *)result;
  if (arg_len > max_result_len) return 1;
  for (uint32_t i = 0; i < arg_len; ++i) {
    uint8_t x = a[i];
    r[i] = (uint8_t)~x;
  }
  *result_len = arg_len;
  return 0;
}

static inline cudaq_function_entry_t test_entry(uint32_t id, cudaq_host_rpc_fn_t fn) {
  cudaq_function_entry_t e;
  memset(&e, 0, sizeof e);
  e.handler.host_fn = fn;
  e.function_id = id;
  e.dispatch_mode = CUDAQ_DISPATCH_HOST_CALL;
  return e;
}

/* The standard table of the host tests (6 entries). */
static inline void test_table(cudaq_function_entry_t e[6]) {
  e[0] = test_entry(FN_ECHO, h_echo);
  e[1] = test_entry(FN_SUM, h_sum);
  e[1].schema.num_args = 1;
  e[1].schema.args[0].type_id = CUDAQ_TYPE_ARRAY_INT32;
  e[1].schema.args[0].size_bytes = 16;
  e[1].schema.args[0].num_elements = 4;
  e[1].schema.num_results = 1;
  e[1].schema.results[0].type_id = CUDAQ_TYPE_INT32;
  e[1].schema.results[0].size_bytes = 4;
  e[1].schema.results[0].num_elements = 1;
  e[2] = test_entry(FN_FAIL, h_fail);
  e[3] = test_entry(FN_GREEDY, h_greedy);
  e[4] = test_entry(FN_DEVICE, NULL);
  e[4].dispatch_mode = CUDAQ_DISPATCH_DEVICE_CALL;
  e[4].handler.device_fn_ptr = (void *)(uintptr_t)0x1000; /* never called on the host */
  e[5] = test_entry(FN_INPLACE, h_negate);
}

/* Spin-wait step for test threads: the machines that run the tests may
 * have fewer cores than spinning threads (2 cores in CI), so test loops
 * yield instead of starving the dispatcher. */
static inline void test_spin(void) { sched_yield(); }

static inline uint64_t test_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

#endif
