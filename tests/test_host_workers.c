/*
 * test_host_workers.c - GRAPH_LAUNCH entries on the host-thread dispatch
 * path go to the worker pool (host-dispatcher-worker-pool.md 2, 4, 9, 13),
 * driven by an emulated launch: the "graph" posts the job to a poller
 * thread (the user's CPU worker) that answers the slot and releases the
 * worker with cudaq_host_release_worker() from its own thread.
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

#include "cudaq/realtime/pipeline.h"
#include "pipeline/pool.h"
#include "test_util.h"

#define FN_GRAPH cudaq_fnv1a_hash("graph_passthrough")
#define SLOTS 8u
#define NW 2

typedef struct {
  _Atomic int pending; /* launched, not yet answered */
  int id;
} fake_t;

static fake_t fakes[NW];
static _Atomic int hold;       /* 1: the poller leaves jobs pending */
static _Atomic int fail_next;  /* the next launch fails with this error */
static _Atomic int poller_stop;
static _Atomic uint64_t poller_iter; /* poller loop count: lets the test wait out a stale pass */
static cudaq_dispatcher_t *g_d;
static cudaq_ringbuffer_t g_rb;

static int fake_launch(void *user, cudaGraphExec_t g, cudaStream_t s) {
  (void)user, (void)s;
  fake_t *f = (fake_t *)(void *)g;
  int err = atomic_exchange(&fail_next, 0);
  if (err) return err;
  atomic_store_explicit(&f->pending, 1, memory_order_release); /* pairs with the poller */
  return 0;
}
static int fake_enqueue(void *u, cudaStream_t s, cudaq__host_fn_t fn, void *a) {
  (void)u, (void)s, (void)fn, (void)a;
  return 0;
}
static int fake_sync(void *u, cudaStream_t s) {
  (void)u, (void)s;
  return 0;
}
static const cudaq__launch_ops_t fake_ops = {.launch_graph = fake_launch, .enqueue_host_fn = fake_enqueue, .sync_stream = fake_sync};

/* The user's CPU poller: answers the origin slot (payload + 1 per byte),
 * publishes the TX flag, then returns the worker to the pool. */
static void *poller(void *arg) {
  (void)arg;
  while (!atomic_load(&poller_stop)) {
    atomic_fetch_add(&poller_iter, 1);
    for (int w = 0; w < NW; ++w) {
      if (atomic_load(&hold) || !atomic_load_explicit(&fakes[w].pending, memory_order_acquire)) continue;
      uint32_t slot = 99;
      if (cudaq_host_worker_slot(g_d, (uint32_t)w, &slot) != CUDAQ_OK) abort();
      const uint8_t *rx = g_rb.rx_data_host + slot * g_rb.rx_stride_sz;
      uint8_t *tx = g_rb.tx_data_host + slot * g_rb.tx_stride_sz;
      cudaq_rpc_header_t h;
      memcpy(&h, rx, sizeof h);
      for (uint32_t i = 0; i < h.arg_len; ++i) tx[24 + i] = (uint8_t)(rx[24 + i] + 1);
      cudaq_rpc_response_t r = {CUDAQ_RPC_MAGIC_RESPONSE, 0, h.arg_len, h.request_id, 0};
      memcpy(tx, &r, sizeof r);
      atomic_store_explicit(&fakes[w].pending, 0, memory_order_relaxed);
      /* Publishes the response (release), then frees the worker. */
      atomic_store_explicit((_Atomic uint64_t *)(uintptr_t)&g_rb.tx_flags_host[slot],
                            (uint64_t)(uintptr_t)tx, memory_order_release);
      if (cudaq_host_release_worker(g_d, (uint32_t)w) != CUDAQ_OK) abort();
    }
    test_spin();
  }
  return NULL;
}

static void submit(uint32_t slot, uint32_t fn, uint32_t rid) {
  uint8_t p[16];
  for (int i = 0; i < 16; ++i) p[i] = (uint8_t)(rid + i);
  while (!cudaq_host_ringbuffer_slot_available(&g_rb, slot)) test_spin();
  assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&g_rb, slot, fn, p, 16, rid, 0), CUDAQ_OK);
  cudaq_host_ringbuffer_signal_slot(&g_rb, slot);
}

static cudaq_tx_status_t wait_tx(uint32_t slot, int *err) {
  uint64_t t0 = test_now_ns();
  cudaq_tx_status_t s;
  while ((s = cudaq_host_ringbuffer_poll_tx_flag(&g_rb, slot, err)) == CUDAQ_TX_EMPTY ||
         s == CUDAQ_TX_IN_FLIGHT) {
    if (test_now_ns() - t0 > 10000000000ull) fail_msg("slot %u never answered", slot);
    test_spin();
  }
  return s;
}

static void check_graph_answer(uint32_t slot, uint32_t rid) {
  int err = 0;
  assert_int_equal(wait_tx(slot, &err), CUDAQ_TX_READY);
  const uint8_t *tx = g_rb.tx_data_host + slot * g_rb.tx_stride_sz;
  cudaq_rpc_response_t r;
  memcpy(&r, tx, sizeof r);
  assert_int_equal(r.request_id, rid);
  assert_int_equal(r.result_len, 16);
  for (int i = 0; i < 16; ++i) assert_int_equal(tx[24 + i], (uint8_t)(rid + i + 1));
  cudaq_host_ringbuffer_clear_slot(&g_rb, slot);
}

static void test_host_workers(void **state) {
  (void)state;
  cudaq_dispatch_manager_t *m;
  cudaq_dispatcher_config_t cfg;
  assert_int_equal(cudaq_dispatch_manager_create(&m), CUDAQ_OK);
  cudaq_dispatcher_config_init(&cfg);
  cfg.num_slots = SLOTS;
  cfg.slot_size = 256;
  cfg.dispatch_path = CUDAQ_DISPATCH_PATH_HOST;
  assert_int_equal(cudaq_dispatcher_create(m, &cfg, &g_d), CUDAQ_OK);
  assert_int_equal(cudaq_host_ringbuffer_alloc(&g_rb, SLOTS, 256, CUDAQ_RING_ALLOC_HOST), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_set_ringbuffer(g_d, &g_rb), CUDAQ_OK);
  cudaq_function_entry_t e[2];
  e[0] = test_entry(FN_ECHO, h_echo);
  e[1] = test_entry(FN_GRAPH, NULL);
  e[1].dispatch_mode = CUDAQ_DISPATCH_GRAPH_LAUNCH;
  e[1].handler.graph_exec = (cudaGraphExec_t)(void *)&fakes[0];
  cudaq_function_table_t t = {e, 2};
  assert_int_equal(cudaq_dispatcher_set_function_table(g_d, &t), CUDAQ_OK);
  volatile int shutdown = 0;
  uint64_t stats[1] = {0};
  assert_int_equal(cudaq_dispatcher_set_control(g_d, &shutdown, stats), CUDAQ_OK);

  /* Bad input. */
  cudaq_host_dispatch_worker_t w[NW];
  memset(w, 0, sizeof w);
  for (int i = 0; i < NW; ++i) {
    fakes[i].id = i;
    w[i].graph_exec = (cudaGraphExec_t)(void *)&fakes[i];
    w[i].stream = (cudaStream_t)(void *)&fakes[i];
    w[i].function_id = FN_GRAPH;
  }
  assert_int_equal(cudaq_dispatcher_set_host_workers(NULL, w, NW), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_dispatcher_set_host_workers(g_d, NULL, NW), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_dispatcher_set_host_workers(g_d, w, 0), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_dispatcher_set_host_workers(g_d, w, 65), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_host_release_worker(g_d, 0), CUDAQ_ERR_INVALID_ARG); /* no workers */
  cudaq_host_dispatch_worker_t nog = w[0];
  nog.graph_exec = NULL;
  assert_int_equal(cudaq__dispatcher_set_host_workers_ops(g_d, &nog, 1, &fake_ops), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq__dispatcher_set_host_workers_ops(g_d, w, NW, &fake_ops), CUDAQ_OK);
  assert_int_equal(cudaq_host_release_worker(g_d, 0), CUDAQ_ERR_INVALID_ARG); /* idle already */
  assert_int_equal(cudaq_host_release_worker(g_d, NW), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_host_release_worker(NULL, 0), CUDAQ_ERR_INVALID_ARG);
  uint32_t slot;
  assert_int_equal(cudaq_host_worker_slot(g_d, 0, &slot), CUDAQ_ERR_INVALID_ARG); /* idle */
  assert_int_equal(cudaq_host_worker_slot(g_d, 0, NULL), CUDAQ_ERR_INVALID_ARG);

  assert_int_equal(cudaq_dispatcher_start(g_d), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_set_host_workers(g_d, w, NW), CUDAQ_ERR_INVALID_ARG); /* running */
  pthread_t pt;
  pthread_create(&pt, NULL, poller, NULL);

  /* W 4.2: a graph request is launched on a worker and answered by it;
   * host-call entries still run on the dispatcher thread. */
  submit(0, FN_GRAPH, 10);
  check_graph_answer(0, 10);
  submit(1, FN_ECHO, 11);
  assert_int_equal(wait_tx(1, NULL), CUDAQ_TX_READY);
  cudaq_host_ringbuffer_clear_slot(&g_rb, 1);

  /* W 13 "no data loss": both workers held busy; the third graph request
   * stays in its slot (RX still set) and the dispatcher does not advance
   * past it to the echo request behind it. */
  atomic_store(&hold, 1);
  /* A poller pass that started before the store may still answer a job:
   * wait until a later pass has begun. */
  uint64_t it = atomic_load(&poller_iter);
  while (atomic_load(&poller_iter) < it + 2) test_spin();
  submit(2, FN_GRAPH, 12);
  submit(3, FN_GRAPH, 13);
  submit(4, FN_GRAPH, 14);
  submit(5, FN_ECHO, 15);
  uint64_t t0 = test_now_ns();
  while (test_now_ns() - t0 < 50000000ull) test_spin(); /* 50 ms */
  assert_int_equal(cudaq_host_ringbuffer_poll_tx_flag(&g_rb, 2, NULL), CUDAQ_TX_IN_FLIGHT);
  assert_int_equal(cudaq_host_ringbuffer_poll_tx_flag(&g_rb, 3, NULL), CUDAQ_TX_IN_FLIGHT);
  assert_int_equal(cudaq_host_ringbuffer_poll_tx_flag(&g_rb, 4, NULL), CUDAQ_TX_EMPTY);
  assert_true(g_rb.rx_flags_host[4] != 0);
  assert_int_equal(cudaq_host_ringbuffer_poll_tx_flag(&g_rb, 5, NULL), CUDAQ_TX_EMPTY);
  assert_true(g_rb.rx_flags_host[5] != 0);
  assert_int_equal(cudaq_host_worker_slot(g_d, 0, &slot), CUDAQ_OK); /* origin tags */
  assert_int_equal(slot, 2);
  assert_int_equal(cudaq_host_worker_slot(g_d, 1, &slot), CUDAQ_OK);
  assert_int_equal(slot, 3);
  atomic_store(&hold, 0);
  check_graph_answer(2, 12);
  check_graph_answer(3, 13);
  check_graph_answer(4, 14);
  assert_int_equal(wait_tx(5, NULL), CUDAQ_TX_READY);
  cudaq_host_ringbuffer_clear_slot(&g_rb, 5);

  /* W 9: a failed launch leaves the error marker with the CUDA error and
   * returns the worker (the next request still runs). */
  atomic_store(&fail_next, 719);
  submit(6, FN_GRAPH, 16);
  int err = 0;
  assert_int_equal(wait_tx(6, &err), CUDAQ_TX_ERROR);
  assert_int_equal(err, 719);
  cudaq_host_ringbuffer_clear_slot(&g_rb, 6);
  for (uint32_t k = 0; k < 40; ++k) {
    submit(k % SLOTS, FN_GRAPH, 100 + k);
    check_graph_answer(k % SLOTS, 100 + k);
  }
  uint64_t processed = 0;
  assert_int_equal(cudaq_dispatcher_get_processed(g_d, &processed), CUDAQ_OK);
  assert_int_equal(processed, 2 + 4 + 1 + 40);

  /* Re-arming the workers while a job is held is refused (the job would be
   * lost); after its finisher releases the worker it is accepted. */
  atomic_store(&hold, 1);
  it = atomic_load(&poller_iter);
  while (atomic_load(&poller_iter) < it + 2) test_spin();
  submit(7, FN_GRAPH, 17);
  t0 = test_now_ns();
  while (cudaq_host_ringbuffer_poll_tx_flag(&g_rb, 7, NULL) != CUDAQ_TX_IN_FLIGHT &&
         test_now_ns() - t0 < 5000000000ull)
    test_spin();
  assert_int_equal(cudaq_host_ringbuffer_poll_tx_flag(&g_rb, 7, NULL), CUDAQ_TX_IN_FLIGHT);
  assert_int_equal(cudaq_dispatcher_stop(g_d), CUDAQ_OK);
  assert_int_equal(cudaq__dispatcher_set_host_workers_ops(g_d, w, NW, &fake_ops),
                   CUDAQ_ERR_INVALID_ARG);
  assert_non_null(strstr(cudaq_last_error(), "still held"));
  atomic_store(&hold, 0);
  check_graph_answer(7, 17);
  assert_int_equal(cudaq__dispatcher_set_host_workers_ops(g_d, w, NW, &fake_ops), CUDAQ_OK);

  atomic_store(&poller_stop, 1);
  pthread_join(pt, NULL);
  assert_int_equal(cudaq_dispatch_manager_destroy(m), CUDAQ_OK);
  cudaq_host_ringbuffer_free(&g_rb);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_host_workers)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
