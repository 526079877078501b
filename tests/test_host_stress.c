/*
 * test_host_stress.c - multi-thread stress of the host-thread dispatcher:
 * one producer thread, one consumer thread, the dispatcher thread between
 * them. Every request carries a fill pattern derived from its request_id;
 * the consumer checks each response and counts every request exactly once.
 * Run under TSan in CI. CUDAQ_STRESS_REQUESTS overrides the count.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_util.h"

#define SLOTS 8u
#define SLOT_SIZE 512u

typedef struct {
  cudaq_ringbuffer_t rb;
  uint32_t n;
  _Atomic uint32_t published[SLOTS]; /* producer -> consumer: request id + 1 in slot */
  uint8_t *seen;                     /* consumer only */
  int ok;
} shared_t;

static uint32_t len_of(uint32_t rid) { return 1 + (rid * 2654435761u >> 7) % (SLOT_SIZE - 24); }
static uint8_t byte_of(uint32_t rid, uint32_t i) { return (uint8_t)((rid * 131u) ^ (i * 7u)); }

static void *producer(void *p) {
  shared_t *s = p;
  uint8_t buf[SLOT_SIZE];
  for (uint32_t rid = 0; rid < s->n; ++rid) {
    uint32_t slot = rid % SLOTS;
    while (!cudaq_host_ringbuffer_slot_available(&s->rb, slot) ||
           atomic_load_explicit(&s->published[slot], memory_order_acquire) != 0)
      test_spin();
    uint32_t len = len_of(rid);
    for (uint32_t i = 0; i < len; ++i) buf[i] = byte_of(rid, i);
    cudaq_host_ringbuffer_write_rpc_request(&s->rb, slot, FN_ECHO, buf, len, rid, ~(uint64_t)rid);
    /* Tell the consumer which request occupies the slot before the
     * dispatcher can answer it (release pairs with the consumer's acquire). */
    atomic_store_explicit(&s->published[slot], rid + 1, memory_order_release);
    cudaq_host_ringbuffer_signal_slot(&s->rb, slot);
  }
  return NULL;
}

static void *consumer(void *p) {
  shared_t *s = p;
  uint32_t done = 0, slot = 0;
  uint64_t t_last = test_now_ns();
  while (done < s->n) {
    uint32_t tag = atomic_load_explicit(&s->published[slot], memory_order_acquire);
    if (tag == 0 || cudaq_host_ringbuffer_poll_tx_flag(&s->rb, slot, NULL) != CUDAQ_TX_READY) {
      if (test_now_ns() - t_last > 20000000000ull) {
        fprintf(stderr, "stress: stuck at %u of %u\n", done, s->n);
        s->ok = 0;
        return NULL;
      }
      test_spin();
      continue;
    }
    uint32_t rid = tag - 1;
    cudaq_rpc_response_t r;
    const uint8_t *tx = s->rb.tx_data_host + (size_t)slot * s->rb.tx_stride_sz;
    memcpy(&r, tx, sizeof r);
    if (r.magic != CUDAQ_RPC_MAGIC_RESPONSE || r.status != 0 || r.request_id != rid ||
        r.ptp_timestamp != ~(uint64_t)rid || r.result_len != len_of(rid)) {
      fprintf(stderr, "stress: bad response header for request %u\n", rid);
      s->ok = 0;
    }
    for (uint32_t i = 0; i < r.result_len && i < SLOT_SIZE - 24; ++i)
      if (tx[24 + i] != byte_of(rid, i)) {
        fprintf(stderr, "stress: request %u byte %u wrong\n", rid, i);
        s->ok = 0;
        break;
      }
    if (rid >= s->n || s->seen[rid]) {
      fprintf(stderr, "stress: request %u answered twice or out of range\n", rid);
      s->ok = 0;
    } else {
      s->seen[rid] = 1;
    }
    /* Order (spec section 7.2): forget the slot's request first, then hand
     * the slot back by clearing TX. */
    atomic_store_explicit(&s->published[slot], 0, memory_order_release);
    cudaq_host_ringbuffer_clear_slot(&s->rb, slot);
    ++done;
    t_last = test_now_ns();
    slot = (slot + 1) % SLOTS;
  }
  return NULL;
}

static void test_stress_every_request_once(void **state) {
  (void)state;
  const char *env = getenv("CUDAQ_STRESS_REQUESTS");
  shared_t *s = calloc(1, sizeof *s);
  s->n = env ? (uint32_t)strtoul(env, NULL, 10) : 200000u;
  s->seen = calloc(s->n, 1);
  s->ok = 1;
  cudaq_dispatch_manager_t *m;
  cudaq_dispatcher_t *d;
  cudaq_dispatcher_config_t c;
  cudaq_dispatcher_config_init(&c);
  c.num_slots = SLOTS;
  c.slot_size = SLOT_SIZE;
  c.dispatch_path = CUDAQ_DISPATCH_PATH_HOST;
  c.dispatch_mode = CUDAQ_DISPATCH_HOST_CALL;
  cudaq_function_entry_t e[6];
  test_table(e);
  cudaq_function_table_t t = {e, 6};
  volatile int shutdown = 0;
  uint64_t stats[1];
  assert_int_equal(cudaq_dispatch_manager_create(&m), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_create(m, &c, &d), CUDAQ_OK);
  assert_int_equal(cudaq_host_ringbuffer_alloc(&s->rb, SLOTS, SLOT_SIZE, CUDAQ_RING_ALLOC_HOST), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_set_ringbuffer(d, &s->rb), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_set_function_table(d, &t), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_set_control(d, &shutdown, stats), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_start(d), CUDAQ_OK);
  pthread_t tp, tc;
  pthread_create(&tc, NULL, consumer, s);
  pthread_create(&tp, NULL, producer, s);
  pthread_join(tp, NULL);
  pthread_join(tc, NULL);
  assert_int_equal(cudaq_dispatcher_stop(d), CUDAQ_OK);
  assert_true(s->ok);
  for (uint32_t i = 0; i < s->n; ++i) assert_int_equal(s->seen[i], 1);
  cudaq_dispatcher_counters_t cnt;
  assert_int_equal(cudaq_dispatcher_get_counters(d, &cnt), CUDAQ_OK);
  assert_int_equal(cnt.processed, s->n);
  printf("stress: %u requests, each answered exactly once with its own payload\n", s->n);
  assert_int_equal(cudaq_dispatch_manager_destroy(m), CUDAQ_OK);
  assert_int_equal(cudaq_host_ringbuffer_free(&s->rb), CUDAQ_OK);
  free(s->seen);
  free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_stress_every_request_once)};
  return cmocka_run_group_tests_name("host_stress", tests, NULL, NULL);
}
