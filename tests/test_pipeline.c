/*
 * test_pipeline.c - the realtime pipeline without a GPU: argument checks,
 * the CPU-only mode end to end, and the dispatcher's state machines driven
 * by an emulated GPU stage (pipeline_emu.h). Spec sections named per test:
 * W = host-dispatcher-worker-pool.md, P = realtime-pipeline-api.txt.
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
#include "pipeline_emu.h"
#include "test_util.h"

#define FN_PASS cudaq_fnv1a_hash("passthrough")

static uint32_t len_of(uint64_t rid) { return 4 + (uint32_t)((rid * 2654435761u) >> 9) % 200; }
static uint8_t byte_of(uint64_t rid, uint32_t i) { return (uint8_t)((rid * 131u) ^ (i * 7u) ^ (rid >> 8)); }

static void make_payload(uint64_t rid, uint8_t *buf, uint32_t *len) {
  *len = len_of(rid);
  for (uint32_t i = 0; i < *len; ++i) buf[i] = byte_of(rid, i);
}

/* ---- a recorder of completions ------------------------------------------ */

#define MAXREQ 4096
typedef struct {
  cudaq_pipeline_t *p;
  cudaq_ringbuffer_t rb;
  _Atomic uint32_t count;
  uint64_t order[MAXREQ]; /* request ids in completion order */
  uint8_t seen[MAXREQ];
  int success[MAXREQ];
  int cuda_error[MAXREQ];
  int bad; /* a response whose bytes or header did not match */
} rec_t;

/* Completion handler: records and checks the response bytes (the TX slot is
 * still the consumer's while the handler runs). Expected result: the
 * request payload with every byte XOR 0x5A. */
static void on_done(void *user, const cudaq_completion_t *c) {
  rec_t *r = user;
  uint32_t k = atomic_load_explicit(&r->count, memory_order_relaxed);
  if (c->request_id >= MAXREQ || r->seen[c->request_id]) {
    r->bad++;
    return;
  }
  r->seen[c->request_id] = 1;
  r->order[k] = c->request_id;
  r->success[c->request_id] = c->success;
  r->cuda_error[c->request_id] = c->cuda_error;
  if (c->success) {
    const uint8_t *tx = r->rb.tx_data_host + (size_t)c->slot * r->rb.tx_stride_sz;
    cudaq_rpc_response_t h;
    memcpy(&h, tx, sizeof h);
    if (h.magic != CUDAQ_RPC_MAGIC_RESPONSE || h.request_id != (uint32_t)c->request_id ||
        h.result_len != len_of(c->request_id))
      r->bad++;
    else
      for (uint32_t i = 0; i < h.result_len; ++i)
        if (tx[24 + i] != (uint8_t)(byte_of(c->request_id, i) ^ 0x5A)) {
          r->bad++;
          break;
        }
  }
  atomic_store_explicit(&r->count, k + 1, memory_order_release);
}

/* CPU stage of the CPU-only mode: response = request ^ 0x5A. */
static size_t cpu_xor(void *user, const cudaq_cpu_stage_context_t *ctx) {
  (void)user;
  const uint8_t *in = ctx->request;
  uint8_t *out = ctx->response_buffer;
  for (size_t i = 0; i < ctx->request_size; ++i) out[i] = in[i] ^ 0x5A;
  return ctx->request_size;
}

/* CPU stage after the emulated GPU: response = gpu_output ^ 0x5A. */
static size_t cpu_after_gpu(void *user, const cudaq_cpu_stage_context_t *ctx) {
  (void)user;
  const uint8_t *in = ctx->gpu_output;
  uint8_t *out = ctx->response_buffer;
  for (size_t i = 0; i < ctx->request_size; ++i) out[i] = in[i] ^ 0x5A;
  return ctx->request_size;
}

static cudaq_pipeline_t *make(rec_t *r, int workers, int slots, size_t slot_size) {
  cudaq_pipeline_config_t cfg;
  assert_int_equal(cudaq_pipeline_config_init(&cfg), CUDAQ_OK);
  cfg.num_workers = workers;
  cfg.num_slots = slots;
  cfg.slot_size = slot_size;
  cfg.idle_yield = 1; /* CI has 2 cores for all these threads */
  cudaq_pipeline_t *p = NULL;
  assert_int_equal(cudaq_pipeline_create(&cfg, &p), CUDAQ_OK);
  memset(r, 0, sizeof *r);
  r->p = p;
  assert_int_equal(cudaq_pipeline_ringbuffer(p, &r->rb), CUDAQ_OK);
  assert_int_equal(cudaq_pipeline_set_completion_handler(p, on_done, r), CUDAQ_OK);
  return p;
}

static void submit_range(cudaq_pipeline_injector_t *inj, uint64_t from, uint64_t to) {
  uint8_t buf[256];
  uint32_t len;
  for (uint64_t rid = from; rid < to; ++rid) {
    make_payload(rid, buf, &len);
    assert_int_equal(cudaq_pipeline_injector_submit(inj, FN_PASS, buf, len, rid), CUDAQ_OK);
  }
}

static void wait_count(rec_t *r, uint32_t n) {
  uint64_t t0 = test_now_ns();
  while (atomic_load_explicit(&r->count, memory_order_acquire) < n) {
    if (test_now_ns() - t0 > 20000000000ull) fail_msg("only %u of %u completed", r->count, n);
    test_spin();
  }
}

static void check_all(rec_t *r, uint32_t n) {
  assert_int_equal(r->bad, 0);
  assert_int_equal(atomic_load(&r->count), n);
  for (uint32_t i = 0; i < n; ++i) assert_int_equal(r->seen[i], 1);
}

/* ---- P (every function): bad input gets a status, never a crash --------- */

static size_t never_called(void *u, const cudaq_cpu_stage_context_t *c) {
  (void)u, (void)c;
  return 1;
}

static void test_api_bad_input(void **state) {
  (void)state;
  cudaq_pipeline_config_t cfg;
  cudaq_pipeline_t *p = NULL;
  assert_int_equal(cudaq_pipeline_config_init(NULL), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_pipeline_config_init(&cfg), CUDAQ_OK);
  assert_int_equal(cfg.num_workers, 8);
  assert_int_equal(cfg.num_slots, 32);
  assert_int_equal(cfg.slot_size, 16384);
  assert_int_equal(cfg.cores.dispatcher, -1);
  assert_int_equal(cudaq_pipeline_create(NULL, &p), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_pipeline_create(&cfg, NULL), CUDAQ_ERR_INVALID_ARG);
  cfg.num_workers = 65;
  assert_int_equal(cudaq_pipeline_create(&cfg, &p), CUDAQ_ERR_INVALID_ARG);
  assert_non_null(strstr(cudaq_last_error(), "num_workers"));
  cfg.num_workers = 0;
  assert_int_equal(cudaq_pipeline_create(&cfg, &p), CUDAQ_ERR_INVALID_ARG);
  cfg.num_workers = 2;
  cfg.num_slots = 0;
  assert_int_equal(cudaq_pipeline_create(&cfg, &p), CUDAQ_ERR_INVALID_ARG);
  cfg.num_slots = 4;
  cfg.slot_size = 23;
  assert_int_equal(cudaq_pipeline_create(&cfg, &p), CUDAQ_ERR_INVALID_ARG);
  cfg.slot_size = 256;
  cfg.cores.dispatcher = -2;
  assert_int_equal(cudaq_pipeline_create(&cfg, &p), CUDAQ_ERR_INVALID_ARG);
  cfg.cores.dispatcher = 100000;
  assert_int_equal(cudaq_pipeline_create(&cfg, &p), CUDAQ_ERR_INVALID_ARG);
  cfg.cores.dispatcher = -1;
  cudaq_ringbuffer_t bad_ring;
  memset(&bad_ring, 0, sizeof bad_ring);
  cfg.external_ringbuffer = &bad_ring;
  assert_int_equal(cudaq_pipeline_create(&cfg, &p), CUDAQ_ERR_INVALID_ARG);
  /* A ring with header completion (the device-call kernels' extension). */
  cudaq_ringbuffer_t header_ring;
  assert_int_equal(cudaq_host_ringbuffer_alloc(&header_ring, 4, 256,
                                               CUDAQ_RING_ALLOC_HOST | CUDAQ_RING_ALLOC_HEADER_COMPLETION),
                   CUDAQ_OK);
  cfg.external_ringbuffer = &header_ring;
  assert_int_equal(cudaq_pipeline_create(&cfg, &p), CUDAQ_ERR_INVALID_ARG);
  assert_non_null(strstr(cudaq_last_error(), "flag protocol"));
  assert_int_equal(cudaq_host_ringbuffer_free(&header_ring), CUDAQ_OK);
  cfg.external_ringbuffer = NULL;

  assert_int_equal(cudaq_pipeline_create(&cfg, &p), CUDAQ_OK);
  /* No stage registered. */
  assert_int_equal(cudaq_pipeline_start(p), CUDAQ_ERR_INVALID_ARG);
  assert_non_null(strstr(cudaq_last_error(), "no stage"));
  assert_int_equal(cudaq_pipeline_set_cpu_stage(NULL, never_called, NULL), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_pipeline_set_cpu_stage(p, NULL, NULL), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_pipeline_set_gpu_stage(p, NULL, NULL), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_pipeline_set_completion_handler(p, NULL, NULL), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_pipeline_stats(p, NULL), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_pipeline_stats(NULL, NULL), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_pipeline_ringbuffer_bases(p, NULL), CUDAQ_ERR_INVALID_ARG);
  cudaq_ringbuffer_bases_t b;
  assert_int_equal(cudaq_pipeline_ringbuffer_bases(p, &b), CUDAQ_OK);
  assert_non_null(b.rx_data_host);
  assert_non_null(b.rx_data_dev);
  assert_int_equal(cudaq_pipeline_complete_deferred(p, -1, 0), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_pipeline_complete_deferred(p, 4, 0), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_pipeline_complete_deferred(p, 0, 0), CUDAQ_ERR_INVALID_ARG);
  assert_non_null(strstr(cudaq_last_error(), "not waiting"));
  assert_int_equal(cudaq_pipeline_complete_deferred(NULL, 0, 0), CUDAQ_ERR_INVALID_ARG);

  cudaq_pipeline_injector_t *inj = NULL, *inj2 = NULL;
  assert_int_equal(cudaq_pipeline_injector_create(p, NULL), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_pipeline_injector_create(p, &inj), CUDAQ_OK);
  assert_int_equal(cudaq_pipeline_injector_create(p, &inj2), CUDAQ_ERR_INVALID_ARG);
  int acc = 0;
  uint8_t buf[300] = {0};
  /* Not running yet. */
  assert_int_equal(cudaq_pipeline_injector_try_submit(inj, FN_PASS, buf, 8, 1, &acc),
                   CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_pipeline_injector_try_submit(inj, FN_PASS, buf, 8, 1, NULL),
                   CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_pipeline_injector_try_submit(inj, FN_PASS, NULL, 8, 1, &acc),
                   CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_pipeline_injector_submit(inj, FN_PASS, buf, 256 - 23, 1),
                   CUDAQ_ERR_INVALID_ARG); /* larger than slot_size - 24 */
  assert_int_equal(cudaq_pipeline_injector_submit(NULL, FN_PASS, buf, 8, 1), CUDAQ_ERR_INVALID_ARG);
  uint64_t stalls = 1;
  assert_int_equal(cudaq_pipeline_injector_backpressure_stalls(inj, &stalls), CUDAQ_OK);
  assert_int_equal(stalls, 0);
  assert_int_equal(cudaq_pipeline_injector_backpressure_stalls(NULL, &stalls), CUDAQ_ERR_INVALID_ARG);

  assert_int_equal(cudaq_pipeline_set_cpu_stage(p, never_called, NULL), CUDAQ_OK);
  assert_int_equal(cudaq_pipeline_start(p), CUDAQ_OK);
  assert_int_equal(cudaq_pipeline_start(p), CUDAQ_ERR_INVALID_ARG); /* wrong state */
  assert_int_equal(cudaq_pipeline_set_cpu_stage(p, never_called, NULL), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_pipeline_stop(p), CUDAQ_OK);
  assert_int_equal(cudaq_pipeline_stop(p), CUDAQ_OK); /* idempotent */
  assert_int_equal(cudaq_pipeline_stop(NULL), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_pipeline_start(p), CUDAQ_ERR_INVALID_ARG); /* no restart */
  /* Stopped: the injector refuses. */
  assert_int_equal(cudaq_pipeline_injector_submit(inj, FN_PASS, buf, 8, 1), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_pipeline_injector_destroy(inj), CUDAQ_OK);
  assert_int_equal(cudaq_pipeline_injector_destroy(NULL), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_pipeline_destroy(p), CUDAQ_OK);
  assert_int_equal(cudaq_pipeline_destroy(NULL), CUDAQ_ERR_INVALID_ARG);
}

/* P "external_ringbuffer": the injector is refused, GPU-only mode too. */
static void test_external_ring(void **state) {
  (void)state;
  cudaq_ringbuffer_t rb;
  assert_int_equal(cudaq_host_ringbuffer_alloc(&rb, 4, 256, CUDAQ_RING_ALLOC_HOST), CUDAQ_OK);
  cudaq_pipeline_config_t cfg;
  cudaq_pipeline_config_init(&cfg);
  cfg.num_workers = 2;
  cfg.num_slots = 4;
  cfg.slot_size = 256;
  cfg.idle_yield = 1;
  cfg.external_ringbuffer = &rb;
  cudaq_pipeline_t *p = NULL;
  assert_int_equal(cudaq_pipeline_create(&cfg, &p), CUDAQ_OK);
  cudaq_pipeline_injector_t *inj = NULL;
  assert_int_equal(cudaq_pipeline_injector_create(p, &inj), CUDAQ_ERR_INVALID_ARG);
  assert_non_null(strstr(cudaq_last_error(), "external"));
  cudaq_ringbuffer_bases_t b;
  assert_int_equal(cudaq_pipeline_ringbuffer_bases(p, &b), CUDAQ_OK);
  assert_ptr_equal(b.rx_data_host, rb.rx_data_host);
  emu_t *e = calloc(1, sizeof *e);
  assert_int_equal(emu_attach(e, p, FN_PASS, 1, NULL), CUDAQ_OK);
  assert_int_equal(cudaq_pipeline_start(p), CUDAQ_ERR_INVALID_ARG); /* GPU-only + external */
  assert_non_null(strstr(cudaq_last_error(), "GPU-only"));

  /* CPU-only on the external ring, the caller as producer. */
  rec_t *r = calloc(1, sizeof *r);
  r->rb = rb;
  cudaq_pipeline_destroy(p);
  assert_int_equal(cudaq_pipeline_create(&cfg, &p), CUDAQ_OK);
  assert_int_equal(cudaq_pipeline_set_completion_handler(p, on_done, r), CUDAQ_OK);
  assert_int_equal(cudaq_pipeline_set_cpu_stage(p, cpu_xor, NULL), CUDAQ_OK);
  assert_int_equal(cudaq_pipeline_start(p), CUDAQ_OK);
  uint8_t buf[256];
  uint32_t len;
  for (uint32_t rid = 0; rid < 200; ++rid) {
    uint32_t s = rid % 4;
    while (!cudaq_host_ringbuffer_slot_available(&rb, s)) test_spin();
    make_payload(rid, buf, &len);
    assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&rb, s, FN_PASS, buf, len, rid, 0), CUDAQ_OK);
    cudaq_host_ringbuffer_signal_slot(&rb, s);
  }
  wait_count(r, 200);
  assert_int_equal(cudaq_pipeline_stop(p), CUDAQ_OK);
  check_all(r, 200);
  cudaq_pipeline_destroy(p);
  cudaq_host_ringbuffer_free(&rb);
  free(r);
  free(e);
}

/* CPU-only (cpu_xor), n requests through the injector, stopped and every
 * answer checked; returns the stopped pipeline for more checks. */
static cudaq_pipeline_t *run_cpu_xor(rec_t *r, int workers, int slots, uint32_t n) {
  cudaq_pipeline_t *p = make(r, workers, slots, 512);
  assert_int_equal(cudaq_pipeline_set_cpu_stage(p, cpu_xor, NULL), CUDAQ_OK);
  assert_int_equal(cudaq_pipeline_start(p), CUDAQ_OK);
  cudaq_pipeline_injector_t *inj;
  assert_int_equal(cudaq_pipeline_injector_create(p, &inj), CUDAQ_OK);
  submit_range(inj, 0, n);
  wait_count(r, n);
  assert_int_equal(cudaq_pipeline_stop(p), CUDAQ_OK);
  check_all(r, n);
  cudaq_pipeline_injector_destroy(inj);
  return p;
}

/* P "CPU only" mode, W 2 (allocate, tag, free), W 9 (slot lifecycle): every
 * request completes once with its own bytes; stats add up. */
static void test_cpu_only_end_to_end(void **state) {
  (void)state;
  rec_t *r = malloc(sizeof *r);
  cudaq_pipeline_t *p = run_cpu_xor(r, 3, 8, 3000);
  cudaq_pipeline_stats_t st;
  assert_int_equal(cudaq_pipeline_stats(p, &st), CUDAQ_OK);
  assert_int_equal(st.submitted, 3000);
  assert_int_equal(st.dispatched, 3000);
  assert_int_equal(st.completed, 3000);
  assert_int_equal(st.errors, 0);
  for (uint32_t i = 0; i < 3000; ++i) assert_int_equal(r->success[i], 1);
  cudaq_pipeline_destroy(p);
  free(r);
}

/* W 9 (slot lifecycle) with one worker: completions are handled in ring
 * order, across every wrap of a 4-slot ring, so a slot is freed before any
 * later request is answered (a producer filling the ring in order, the UDP
 * bridge, never finds its next slot taken after an answer it waited for).
 * The consumer starts each pass after the last slot it answered and looks
 * back at a slot it passed unfinished (in flight, or 0: not yet dispatched)
 * before answering a later one. A consumer whose pass always starts at slot
 * 0, or that looks back only at in-flight slots, answers out of order on
 * some runs (thread timing), so this test catches such a regression on some
 * runs, not all; tools/spin/consumer_order.pml (ctest
 * test_spin_consumer_order) checks every interleaving of a small ring. */
static void test_completion_ring_order(void **state) {
  (void)state;
  rec_t *r = malloc(sizeof *r);
  cudaq_pipeline_t *p = run_cpu_xor(r, 1, 4, 4000);
  uint32_t out_of_order = 0;
  for (uint32_t k = 0; k < 4000; ++k) out_of_order += r->order[k] != k;
  assert_int_equal(out_of_order, 0);
  cudaq_pipeline_destroy(p);
  free(r);
}

/* ---- emulated GPU stage ------------------------------------------------- */

/* Request 0 waits until the test releases it (emu.release), the rest run
 * at once. */
static int64_t delay_first_slow(const uint8_t *slot) {
  cudaq_rpc_header_t h;
  memcpy(&h, slot, sizeof h);
  return h.request_id == 0 ? INT64_MAX / 2 : 0;
}

/* W 7 (out-of-order consumer), W 2 (no head-of-line blocking): with two
 * workers, request 0 is slow; requests 1..29 complete on the other worker
 * and are harvested while 0 is in flight, so 0 completes last. */
static void test_out_of_order_completion(void **state) {
  (void)state;
  rec_t *r = malloc(sizeof *r);
  emu_t *e = malloc(sizeof *e);
  cudaq_pipeline_t *p = make(r, 2, 32, 512);
  assert_int_equal(emu_attach(e, p, FN_PASS, 0, delay_first_slow), CUDAQ_OK);
  assert_int_equal(cudaq_pipeline_set_cpu_stage(p, cpu_after_gpu, NULL), CUDAQ_OK);
  assert_int_equal(cudaq_pipeline_start(p), CUDAQ_OK);
  emu_start(e);
  cudaq_pipeline_injector_t *inj;
  assert_int_equal(cudaq_pipeline_injector_create(p, &inj), CUDAQ_OK);
  submit_range(inj, 0, 30);
  wait_count(r, 29); /* all but request 0, harvested while 0 is in flight */
  atomic_store(&e->release, 1);
  wait_count(r, 30);
  assert_int_equal(cudaq_pipeline_stop(p), CUDAQ_OK);
  check_all(r, 30);
  assert_int_equal(r->order[29], 0); /* the slow one last */
  assert_int_equal(r->order[0], 1);
  emu_stop(e);
  cudaq_pipeline_injector_destroy(inj);
  cudaq_pipeline_destroy(p);
  free(r);
  free(e);
}

static int64_t delay_2ms(const uint8_t *slot) {
  (void)slot;
  return 2000000;
}

/* W 13 "no data loss" (all workers busy: the dispatcher spins on the slot,
 * no advance), W 9 (the producer waits for rx == 0 and tx == 0), P
 * try_submit / backpressure_stalls. One worker, four slots, 2 ms jobs. */
static void test_backpressure(void **state) {
  (void)state;
  rec_t *r = malloc(sizeof *r);
  emu_t *e = malloc(sizeof *e);
  cudaq_pipeline_t *p = make(r, 1, 4, 512);
  assert_int_equal(emu_attach(e, p, FN_PASS, 0, delay_2ms), CUDAQ_OK);
  assert_int_equal(cudaq_pipeline_set_cpu_stage(p, cpu_after_gpu, NULL), CUDAQ_OK);
  assert_int_equal(cudaq_pipeline_start(p), CUDAQ_OK);
  emu_start(e);
  cudaq_pipeline_injector_t *inj;
  assert_int_equal(cudaq_pipeline_injector_create(p, &inj), CUDAQ_OK);
  uint8_t buf[256];
  uint32_t len;
  uint64_t refused = 0;
  for (uint64_t rid = 0; rid < 20; ++rid) {
    make_payload(rid, buf, &len);
    int acc = 0;
    for (;;) {
      assert_int_equal(cudaq_pipeline_injector_try_submit(inj, FN_PASS, buf, len, rid, &acc), CUDAQ_OK);
      if (acc) break;
      refused++;
      test_spin();
    }
  }
  wait_count(r, 20);
  assert_int_equal(cudaq_pipeline_stop(p), CUDAQ_OK);
  check_all(r, 20);
  cudaq_pipeline_stats_t st;
  cudaq_pipeline_stats(p, &st);
  uint64_t stalls = 0;
  cudaq_pipeline_injector_backpressure_stalls(inj, &stalls);
  assert_true(refused > 0);
  assert_int_equal(stalls, refused);
  assert_int_equal(st.backpressure_stalls, refused);
  assert_true(st.worker_stalls > 0); /* the dispatcher waited for the worker */
  assert_int_equal(st.completed, 20);
  emu_stop(e);
  cudaq_pipeline_injector_destroy(inj);
  cudaq_pipeline_destroy(p);
  free(r);
  free(e);
}

/* ---- deferred completion (P DEFERRED_COMPLETION, complete_deferred) ------ */

typedef struct {
  cudaq_pipeline_t *p;
  _Atomic int q[64]; /* slot + 1 of deferred jobs, or 0 */
  _Atomic int stop;
  _Atomic uint32_t deferred;
  _Atomic uint32_t errors;
} defer_t;

/* Even requests are deferred to another thread, which writes the response
 * later; odd ones complete at once. */
static size_t cpu_defer(void *user, const cudaq_cpu_stage_context_t *ctx) {
  defer_t *d = user;
  if (ctx->request_id % 2) return cpu_xor(NULL, ctx);
  int slot = ctx->origin_slot;
  /* Hand over the slot: release pairs with the deferred thread's acquire. */
  atomic_store_explicit(&d->q[slot], slot + 1, memory_order_release);
  atomic_fetch_add(&d->deferred, 1);
  return CUDAQ_DEFERRED_COMPLETION;
}

static void *defer_main(void *arg) {
  defer_t *d = arg;
  cudaq_ringbuffer_t rb;
  cudaq_pipeline_ringbuffer(d->p, &rb);
  while (!atomic_load(&d->stop)) {
    for (int s = 0; s < 64; ++s) {
      if (!atomic_load_explicit(&d->q[s], memory_order_acquire)) continue;
      atomic_store_explicit(&d->q[s], 0, memory_order_relaxed);
      const uint8_t *rx = rb.rx_data_host + (size_t)s * rb.rx_stride_sz;
      uint8_t *tx = rb.tx_data_host + (size_t)s * rb.tx_stride_sz;
      cudaq_rpc_header_t h;
      memcpy(&h, rx, sizeof h);
      for (uint32_t i = 0; i < h.arg_len; ++i) tx[24 + i] = rx[24 + i] ^ 0x5A;
      if (cudaq_pipeline_complete_deferred(d->p, s, h.arg_len) != CUDAQ_OK) atomic_fetch_add(&d->errors, 1);
    }
    test_spin();
  }
  return NULL;
}

static void test_deferred_completion(void **state) {
  (void)state;
  rec_t *r = malloc(sizeof *r);
  defer_t *d = calloc(1, sizeof *d);
  cudaq_pipeline_t *p = make(r, 2, 16, 512);
  d->p = p;
  assert_int_equal(cudaq_pipeline_set_cpu_stage(p, cpu_defer, d), CUDAQ_OK);
  assert_int_equal(cudaq_pipeline_start(p), CUDAQ_OK);
  pthread_t t;
  pthread_create(&t, NULL, defer_main, d);
  cudaq_pipeline_injector_t *inj;
  assert_int_equal(cudaq_pipeline_injector_create(p, &inj), CUDAQ_OK);
  submit_range(inj, 0, 1000);
  wait_count(r, 1000);
  assert_int_equal(cudaq_pipeline_stop(p), CUDAQ_OK);
  atomic_store(&d->stop, 1);
  pthread_join(t, NULL);
  check_all(r, 1000);
  assert_int_equal(atomic_load(&d->deferred), 500);
  assert_int_equal(atomic_load(&d->errors), 0);
  /* Every deferred slot was completed once: none is waiting any more. */
  for (int s = 0; s < 16; ++s)
    assert_int_equal(cudaq_pipeline_complete_deferred(p, s, 0), CUDAQ_ERR_INVALID_ARG);
  cudaq_pipeline_injector_destroy(inj);
  cudaq_pipeline_destroy(p);
  free(r);
  free(d);
}

/* A deferred completion that arrives before its CPU stage returns frees the
 * slot at once; with one slot the next request reuses it on the other worker
 * while the first callback is still running. The first worker's late
 * "deferred" hand-over must not touch the second request's state, which
 * would leave that request uncompleted. */
static _Atomic int g_second_entered;
static size_t cpu_complete_early(void *user, const cudaq_cpu_stage_context_t *ctx) {
  cudaq_pipeline_t *p = user;
  size_t n = cpu_xor(NULL, ctx);
  if (ctx->request_id == 0) {
    if (cudaq_pipeline_complete_deferred(p, ctx->origin_slot, n) != CUDAQ_OK) return 0;
    uint64_t t0 = test_now_ns();
    while (!atomic_load(&g_second_entered) && test_now_ns() - t0 < 5000000000ull) test_spin();
    return CUDAQ_DEFERRED_COMPLETION;
  }
  atomic_store(&g_second_entered, 1);
  /* Stay in the callback until the first worker's hand-over has run. */
  struct timespec ts = {0, 50 * 1000 * 1000};
  nanosleep(&ts, NULL);
  return n;
}

static void test_deferred_before_return_then_slot_reused(void **state) {
  (void)state;
  rec_t *r = malloc(sizeof *r);
  cudaq_pipeline_t *p = make(r, 2, 1, 512);
  atomic_store(&g_second_entered, 0);
  assert_int_equal(cudaq_pipeline_set_cpu_stage(p, cpu_complete_early, p), CUDAQ_OK);
  assert_int_equal(cudaq_pipeline_start(p), CUDAQ_OK);
  cudaq_pipeline_injector_t *inj;
  assert_int_equal(cudaq_pipeline_injector_create(p, &inj), CUDAQ_OK);
  submit_range(inj, 0, 2);
  wait_count(r, 2);
  assert_int_equal(atomic_load(&g_second_entered), 1);
  assert_int_equal(cudaq_pipeline_stop(p), CUDAQ_OK);
  check_all(r, 2);
  cudaq_pipeline_injector_destroy(inj);
  cudaq_pipeline_destroy(p);
  free(r);
}

/* ---- launch failure (W 4.2, W 9, W 13 "in-flight sentinel") ------------- */

static int64_t fail_every_fifth(const uint8_t *slot) {
  cudaq_rpc_header_t h;
  memcpy(&h, slot, sizeof h);
  return h.request_id % 5 == 0 ? -1 : 0;
}

/* Launches of every fifth request fail: each is completed with success 0
 * and the CUDA error, the worker goes back to the pool (one worker, so the
 * later requests prove it), nothing is lost. */
static void test_launch_failure(void **state) {
  (void)state;
  rec_t *r = malloc(sizeof *r);
  emu_t *e = malloc(sizeof *e);
  cudaq_pipeline_t *p = make(r, 1, 8, 512);
  assert_int_equal(emu_attach(e, p, FN_PASS, 0, fail_every_fifth), CUDAQ_OK);
  assert_int_equal(cudaq_pipeline_set_cpu_stage(p, cpu_after_gpu, NULL), CUDAQ_OK);
  assert_int_equal(cudaq_pipeline_start(p), CUDAQ_OK);
  emu_start(e);
  cudaq_pipeline_injector_t *inj;
  assert_int_equal(cudaq_pipeline_injector_create(p, &inj), CUDAQ_OK);
  submit_range(inj, 0, 100);
  wait_count(r, 100);
  assert_int_equal(cudaq_pipeline_stop(p), CUDAQ_OK);
  check_all(r, 100);
  for (uint32_t i = 0; i < 100; ++i) {
    assert_int_equal(r->success[i], i % 5 != 0);
    assert_int_equal(r->cuda_error[i], i % 5 == 0 ? 700 : 0);
  }
  cudaq_pipeline_stats_t st;
  cudaq_pipeline_stats(p, &st);
  assert_int_equal(st.errors, 20);
  assert_int_equal(atomic_load(&e->launches), 80);
  emu_stop(e);
  cudaq_pipeline_injector_destroy(inj);
  cudaq_pipeline_destroy(p);
  free(r);
  free(e);
}

/* ---- GPU-only mode (P set_cpu_stage not called: host function) ---------- */

/* The completion copies the emulated GPU output (the request payload) into
 * the response: expected bytes are the payload itself, so this test checks
 * them here rather than in on_done (which expects ^ 0x5A). */
static _Atomic int g_only_bad;
static void on_done_plain(void *user, const cudaq_completion_t *c) {
  rec_t *r = user;
  const uint8_t *tx = r->rb.tx_data_host + (size_t)c->slot * r->rb.tx_stride_sz;
  cudaq_rpc_response_t h;
  memcpy(&h, tx, sizeof h);
  int bad = !c->success || h.result_len < len_of(c->request_id) || c->request_id >= MAXREQ ||
            r->seen[c->request_id];
  for (uint32_t i = 0; !bad && i < len_of(c->request_id); ++i)
    if (tx[24 + i] != byte_of(c->request_id, i)) bad = 1;
  if (bad) atomic_fetch_add(&g_only_bad, 1);
  if (c->request_id < MAXREQ) r->seen[c->request_id] = 1;
  atomic_fetch_add_explicit(&r->count, 1, memory_order_release);
}

static int64_t delay_small(const uint8_t *slot) {
  cudaq_rpc_header_t h;
  memcpy(&h, slot, sizeof h);
  return (h.request_id * 7919) % 50000; /* 0..50 us */
}

/* A pipeline config for the emulated-GPU runs (idle threads yield). */
static void emu_config(cudaq_pipeline_config_t *cfg, int workers, int slots, size_t slot_size) {
  assert_int_equal(cudaq_pipeline_config_init(cfg), CUDAQ_OK);
  cfg->num_workers = workers;
  cfg->num_slots = slots;
  cfg->slot_size = slot_size;
  cfg->idle_yield = 1;
}

/* Runs 500 requests plus one for an unserved function through GPU-only mode
 * with emulator mode `emode` and config gpu_only_completion `want`; checks
 * every answer, the counters and the completion the pipeline chose. */
static void run_gpu_only(int emode, int want, cudaq_gpu_only_completion_t expect) {
  rec_t *r = calloc(1, sizeof *r);
  emu_t *e = malloc(sizeof *e);
  cudaq_pipeline_config_t cfg;
  emu_config(&cfg, 4, 8, EMU_OUT + 24);
  cfg.gpu_only_completion = want;
  cudaq_pipeline_t *p = NULL;
  atomic_store(&g_only_bad, 0);
  assert_int_equal(cudaq_pipeline_create(&cfg, &p), CUDAQ_OK);
  cudaq_pipeline_ringbuffer(p, &r->rb);
  assert_int_equal(cudaq_pipeline_set_completion_handler(p, on_done_plain, r), CUDAQ_OK);
  assert_int_equal(emu_attach(e, p, FN_PASS, emode, delay_small), CUDAQ_OK);
  cudaq_gpu_only_completion_t used = (cudaq_gpu_only_completion_t)-1;
  assert_int_equal(cudaq_pipeline_gpu_only_completion(p, &used), CUDAQ_OK);
  assert_int_equal(used, CUDAQ_GPU_ONLY_COMPLETION_AUTO); /* not started */
  assert_int_equal(cudaq_pipeline_start(p), CUDAQ_OK);
  assert_int_equal(cudaq_pipeline_gpu_only_completion(p, &used), CUDAQ_OK);
  assert_int_equal(used, expect);
  emu_start(e);
  cudaq_pipeline_injector_t *inj;
  assert_int_equal(cudaq_pipeline_injector_create(p, &inj), CUDAQ_OK);
  submit_range(inj, 0, 500);
  /* A function no worker serves: consumed and counted as dropped. */
  uint8_t b[4] = {0};
  assert_int_equal(cudaq_pipeline_injector_submit(inj, FN_ECHO, b, 4, 999), CUDAQ_OK);
  wait_count(r, 500);
  assert_int_equal(cudaq_pipeline_stop(p), CUDAQ_OK);
  assert_int_equal(atomic_load(&g_only_bad), 0);
  for (uint32_t i = 0; i < 500; ++i) assert_int_equal(r->seen[i], 1);
  cudaq_pipeline_stats_t st;
  cudaq_pipeline_stats(p, &st);
  assert_int_equal(st.completed, 500);
  assert_int_equal(st.dropped, 1);
  assert_int_equal(st.dispatched, 501);
  emu_stop(e);
  cudaq_pipeline_injector_destroy(inj);
  cudaq_pipeline_destroy(p);
  free(r);
  free(e);
}

/* The spec's completion: a host function after the graph (AUTO falls back
 * to it where no stream write is offered; HOST_FUNC asks for it). */
static void test_gpu_only(void **state) {
  (void)state;
  run_gpu_only(EMU_GPU_ONLY_HOST_FN, CUDAQ_GPU_ONLY_COMPLETION_AUTO, CUDAQ_GPU_ONLY_COMPLETION_HOST_FUNC);
  run_gpu_only(EMU_GPU_ONLY_WORD, CUDAQ_GPU_ONLY_COMPLETION_HOST_FUNC,
               CUDAQ_GPU_ONLY_COMPLETION_HOST_FUNC);
}

/* (extension) gpu_only_completion STREAM_WRITE: the GPU stores a completion
 * word after the graph and the consumer polls it (no host function); AUTO
 * picks it where the ops offer it. */
static void test_gpu_only_stream_write(void **state) {
  (void)state;
  run_gpu_only(EMU_GPU_ONLY_WORD, CUDAQ_GPU_ONLY_COMPLETION_AUTO, CUDAQ_GPU_ONLY_COMPLETION_STREAM_WRITE);
  run_gpu_only(EMU_GPU_ONLY_WORD, CUDAQ_GPU_ONLY_COMPLETION_STREAM_WRITE,
               CUDAQ_GPU_ONLY_COMPLETION_STREAM_WRITE);
}

/* (extension) STREAM_WRITE asked for where the ops lack it: start refuses,
 * naming it; an out-of-range value is refused at create. */
static void test_gpu_only_completion_refused(void **state) {
  (void)state;
  cudaq_pipeline_config_t cfg;
  cudaq_pipeline_config_init(&cfg);
  cfg.num_workers = 2;
  cfg.num_slots = 4;
  cfg.slot_size = 512;
  cfg.gpu_only_completion = 3;
  cudaq_pipeline_t *p = NULL;
  assert_int_equal(cudaq_pipeline_create(&cfg, &p), CUDAQ_ERR_INVALID_ARG);
  assert_non_null(strstr(cudaq_last_error(), "gpu_only_completion 3"));
  cfg.gpu_only_completion = CUDAQ_GPU_ONLY_COMPLETION_STREAM_WRITE;
  assert_int_equal(cudaq_pipeline_create(&cfg, &p), CUDAQ_OK);
  emu_t *e = malloc(sizeof *e);
  assert_int_equal(emu_attach(e, p, FN_PASS, EMU_GPU_ONLY_HOST_FN, NULL), CUDAQ_OK);
  assert_int_equal(cudaq_pipeline_start(p), CUDAQ_ERR_UNSUPPORTED);
  assert_non_null(strstr(cudaq_last_error(), "STREAM_WRITE"));
  cudaq_gpu_only_completion_t used;
  assert_int_equal(cudaq_pipeline_gpu_only_completion(p, &used), CUDAQ_OK);
  assert_int_equal(used, CUDAQ_GPU_ONLY_COMPLETION_AUTO);
  assert_int_equal(cudaq_pipeline_gpu_only_completion(NULL, &used), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_pipeline_destroy(p), CUDAQ_OK);
  free(e);
}

/* ---- a job that completes before its launch call returns (W 9, W 13) ----- */

/* The launch itself runs the "graph" to completion: it stores the ready
 * flag and waits (up to 1 s) until the CPU worker has published the slot's
 * response before returning. With the reference order (IN_FLIGHT stored
 * after the launch) the marker would then overwrite the response and the
 * request would be lost; see mutation 1 of tools/spin/pipeline.pml. */
static cudaq_ringbuffer_t g_sync_rb;
static int sync_launch(void *user, cudaGraphExec_t g, cudaStream_t s) {
  (void)user, (void)s;
  emu_worker_t *w = (emu_worker_t *)(void *)g;
  const uint8_t *slot = (const uint8_t *)*w->mailbox;
  uint32_t k = (uint32_t)((size_t)(slot - g_sync_rb.rx_data) / g_sync_rb.rx_stride_sz);
  cudaq_rpc_header_t h;
  memcpy(&h, slot, sizeof h);
  w->out_len = h.arg_len;
  memcpy(w->out, slot + 24, h.arg_len);
  atomic_store_explicit(w->ready, 1, memory_order_release);
  /* With the marker stored before the launch (the fix) the TX flag is
   * IN_FLIGHT now: wait until it changes (response, or already harvested).
   * With the reference order it is 0: wait until the response is there. */
  const int marked = cudaq_host_ringbuffer_poll_tx_flag(&g_sync_rb, k, NULL) == CUDAQ_TX_IN_FLIGHT;
  uint64_t t0 = test_now_ns();
  while (test_now_ns() - t0 < 1000000000ull) {
    cudaq_tx_status_t st = cudaq_host_ringbuffer_poll_tx_flag(&g_sync_rb, k, NULL);
    if (marked ? st != CUDAQ_TX_IN_FLIGHT : st == CUDAQ_TX_READY) break;
    test_spin();
  }
  return 0;
}

static void test_completion_before_launch_returns(void **state) {
  (void)state;
  rec_t *r = malloc(sizeof *r);
  emu_t *e = malloc(sizeof *e);
  cudaq_pipeline_t *p = make(r, 2, 16, 512);
  g_sync_rb = r->rb;
  assert_int_equal(emu_attach(e, p, FN_PASS, 0, NULL), CUDAQ_OK);
  static const cudaq__launch_ops_t sync_ops = {.launch_graph = sync_launch, .enqueue_host_fn = emu_enqueue, .sync_stream = emu_sync};
  assert_int_equal(cudaq__pipeline_set_launch_ops(p, &sync_ops), CUDAQ_OK);
  assert_int_equal(cudaq_pipeline_set_cpu_stage(p, cpu_after_gpu, NULL), CUDAQ_OK);
  assert_int_equal(cudaq_pipeline_start(p), CUDAQ_OK);
  cudaq_pipeline_injector_t *inj;
  assert_int_equal(cudaq_pipeline_injector_create(p, &inj), CUDAQ_OK);
  /* As many requests as slots: a lost one makes stop's drain fail (after
   * 5 s) instead of blocking the producer. */
  submit_range(inj, 0, 16);
  assert_int_equal(cudaq_pipeline_stop(p), CUDAQ_OK); /* drains: nothing lost */
  check_all(r, 16);
  cudaq_pipeline_injector_destroy(inj);
  cudaq_pipeline_destroy(p);
  free(r);
  free(e);
}

/* ---- shutdown (W 11, issue: drain before join, bounded, dump) ----------- */

static int64_t delay_1ms(const uint8_t *slot) {
  (void)slot;
  return 1000000;
}

/* stop right after the last submit: every request signalled before stop is
 * still completed (the reference design drops queued work). */
static void test_stop_drains(void **state) {
  (void)state;
  rec_t *r = malloc(sizeof *r);
  emu_t *e = malloc(sizeof *e);
  cudaq_pipeline_t *p = make(r, 2, 16, 512);
  assert_int_equal(emu_attach(e, p, FN_PASS, 0, delay_1ms), CUDAQ_OK);
  assert_int_equal(cudaq_pipeline_set_cpu_stage(p, cpu_after_gpu, NULL), CUDAQ_OK);
  assert_int_equal(cudaq_pipeline_start(p), CUDAQ_OK);
  emu_start(e);
  cudaq_pipeline_injector_t *inj;
  assert_int_equal(cudaq_pipeline_injector_create(p, &inj), CUDAQ_OK);
  submit_range(inj, 0, 40);
  assert_int_equal(cudaq_pipeline_stop(p), CUDAQ_OK);
  check_all(r, 40); /* no wait_count: stop itself drained */
  emu_stop(e);
  cudaq_pipeline_injector_destroy(inj);
  cudaq_pipeline_destroy(p);
  free(r);
  free(e);
}

/* Request 3's CPU stage never becomes ready: stop gives up after the grace
 * period with an error (and a dump on stderr) instead of hanging. */
static size_t cpu_stuck_on_3(void *user, const cudaq_cpu_stage_context_t *ctx) {
  if (ctx->request_id == 3) return 0;
  return cpu_xor(user, ctx);
}

static void test_stop_gives_up(void **state) {
  (void)state;
  rec_t *r = malloc(sizeof *r);
  cudaq_pipeline_config_t cfg;
  cudaq_pipeline_config_init(&cfg);
  cfg.num_workers = 2;
  cfg.num_slots = 8;
  cfg.slot_size = 512;
  cfg.idle_yield = 1;
  cfg.drain_timeout_ms = 200;
  cudaq_pipeline_t *p = NULL;
  assert_int_equal(cudaq_pipeline_create(&cfg, &p), CUDAQ_OK);
  memset(r, 0, sizeof *r);
  cudaq_pipeline_ringbuffer(p, &r->rb);
  cudaq_pipeline_set_completion_handler(p, on_done, r);
  assert_int_equal(cudaq_pipeline_set_cpu_stage(p, cpu_stuck_on_3, NULL), CUDAQ_OK);
  assert_int_equal(cudaq_pipeline_start(p), CUDAQ_OK);
  cudaq_pipeline_injector_t *inj;
  assert_int_equal(cudaq_pipeline_injector_create(p, &inj), CUDAQ_OK);
  submit_range(inj, 0, 6);
  wait_count(r, 5);
  uint64_t t0 = test_now_ns();
  assert_int_equal(cudaq_pipeline_stop(p), CUDAQ_ERR_INTERNAL);
  assert_non_null(strstr(cudaq_last_error(), "pending"));
  assert_true(test_now_ns() - t0 < 5000000000ull);
  assert_int_equal(r->seen[3], 0);
  assert_int_equal(atomic_load(&r->count), 5);
  assert_int_equal(cudaq_pipeline_stop(p), CUDAQ_OK); /* idempotent after a failed drain */
  cudaq_pipeline_injector_destroy(inj);
  assert_int_equal(cudaq_pipeline_destroy(p), CUDAQ_OK); /* no GPU stage: freed */
  free(r);
}

/* ---- (extension) gpu_prelaunch: graphs waiting at a gate ----------------- */

/* A factory whose graph waits at the gate itself (waits_at_gate): it is
 * given its worker's gate (the mailbox word among it) before it runs. */
static int factory_self_gated(void *user, int worker_id, cudaq_gpu_worker_resources_t *r) {
  if (!r->gate || !r->gate->staging_dev || r->gate->mailbox_dev != r->mailbox_dev) return -1;
  int rc = emu_factory(user, worker_id, r);
  r->waits_at_gate = 1;
  return rc;
}

/* Runs `paced` requests one at a time (each waits for the previous answer),
 * then `burst` back to back, through a pipeline with gpu_prelaunch = limit:
 * GPU + CPU (emode 0) or GPU-only with the completion word; self_gated: the
 * factory's graph waits at the gate itself (the emulation is the same; the
 * gate ops are told so). Checks every answer and the pre-launch counters;
 * returns the stats. */
static cudaq_pipeline_stats_t run_prelaunch_max(int emode, int limit, int max, int gate_fail_every, uint32_t paced,
                                                uint32_t burst, int self_gated) {
  rec_t *r = calloc(1, sizeof *r);
  emu_t *e = malloc(sizeof *e);
  cudaq_pipeline_config_t cfg;
  emu_config(&cfg, 4, 8, emode ? EMU_OUT + 24 : 512);
  cfg.gpu_prelaunch = limit;
  cfg.gpu_prelaunch_max = max;
  cudaq_pipeline_t *p = NULL;
  assert_int_equal(cudaq_pipeline_create(&cfg, &p), CUDAQ_OK);
  cudaq_pipeline_ringbuffer(p, &r->rb);
  atomic_store(&g_only_bad, 0);
  assert_int_equal(cudaq_pipeline_set_completion_handler(p, emode ? on_done_plain : on_done, r),
                   CUDAQ_OK);
  assert_int_equal(emu_attach(e, p, FN_PASS, emode, delay_small), CUDAQ_OK);
  if (self_gated) assert_int_equal(cudaq_pipeline_set_gpu_stage(p, factory_self_gated, e), CUDAQ_OK);
  e->gate_fail_every = gate_fail_every;
  if (!emode) assert_int_equal(cudaq_pipeline_set_cpu_stage(p, cpu_after_gpu, NULL), CUDAQ_OK);
  assert_int_equal(cudaq_pipeline_start(p), CUDAQ_OK);
  emu_start(e);
  cudaq_pipeline_injector_t *inj;
  assert_int_equal(cudaq_pipeline_injector_create(p, &inj), CUDAQ_OK);
  cudaq_pipeline_stats_t st;
  for (uint32_t i = 0; i < paced; ++i) {
    /* Sent once a graph waits again (the answer comes before the re-arm). */
    for (uint64_t t0 = test_now_ns(); cudaq_pipeline_stats(p, &st), st.prelaunch_waiting == 0;) {
      if (!gate_fail_every && test_now_ns() - t0 > 10000000000ull) fail_msg("no graph waits after 10 s");
      if (gate_fail_every && test_now_ns() - t0 > 1000000) break; /* a failed re-arm: on arrival */
      test_spin();
    }
    submit_range(inj, i, i + 1);
    wait_count(r, i + 1);
  }
  cudaq_pipeline_stats(p, &st);
  /* Each finisher re-arms its worker before releasing it, so a request that
   * finds every worker idle always finds an armed one. */
  if (!gate_fail_every) assert_int_equal(st.prelaunched, paced);
  /* ... so paced requests never boost the limit (gpu_prelaunch_max). */
  if (!gate_fail_every) assert_int_equal(st.prelaunch_boosted, 0);
  submit_range(inj, paced, paced + burst);
  wait_count(r, paced + burst);
  assert_int_equal(cudaq_pipeline_stop(p), CUDAQ_OK);
  const uint32_t n = paced + burst;
  if (emode) {
    assert_int_equal(atomic_load(&g_only_bad), 0);
    for (uint32_t i = 0; i < n; ++i) assert_int_equal(r->seen[i], 1);
  } else {
    check_all(r, n);
  }
  cudaq_pipeline_stats(p, &st);
  assert_int_equal(st.completed, n);
  assert_true(st.prelaunched <= n);
  /* Every launch is of a gate graph (on arrival too), and every one that
   * was accepted was released: by a request or at stop. A failed launch is
   * a failed re-arm, or on arrival a request answered with an error. */
  assert_int_equal(atomic_load(&e->launches), atomic_load(&e->gates));
  assert_int_equal(atomic_load(&e->gates), atomic_load(&e->gates_opened));
  assert_int_equal(atomic_load(&e->gates), n - st.errors + st.prelaunch_cancelled);
  assert_int_equal(atomic_load(&e->gate_fails), st.prelaunch_failures + st.errors);
  if (!gate_fail_every) assert_int_equal(st.errors, 0);
  /* Those released at stop saw an empty request; every other gate word
   * gave the request's size (rounded up to 16 bytes). */
  assert_int_equal(atomic_load(&e->gates_empty), st.prelaunch_cancelled);
  assert_int_equal(atomic_load(&e->gate_size_wrong), 0);
  /* GPU-only: the gate graph stores the completion word, no stream write. */
  assert_int_equal(atomic_load(&e->word_stores), 0);
  for (int w = 0; w < e->n; ++w) assert_int_equal(e->w[w].self_gated, self_gated);
  emu_stop(e);
  cudaq_pipeline_injector_destroy(inj);
  cudaq_pipeline_destroy(p);
  free(r);
  free(e);
  return st;
}

static cudaq_pipeline_stats_t run_prelaunch(int emode, int limit, int gate_fail_every, uint32_t paced,
                                            uint32_t burst, int self_gated) {
  return run_prelaunch_max(emode, limit, 0, gate_fail_every, paced, burst, self_gated);
}

static void test_prelaunch(void **state) {
  (void)state;
  for (int emode = 0; emode <= EMU_GPU_ONLY_WORD; emode += EMU_GPU_ONLY_WORD)
    for (int limit = 1; limit <= 9; limit += 3) { /* 1, 4 (all workers), 7 (more than there are) */
      cudaq_pipeline_stats_t st = run_prelaunch(emode, limit, 0, 40, 400, limit == 4);
      assert_int_equal(st.prelaunch_failures, 0);
      /* Finishers keep min(limit, 4) graphs waiting: that many are released at stop. */
      assert_int_equal(st.prelaunch_cancelled, limit < 4 ? limit : 4);
      assert_true(st.prelaunched >= 40);
      assert_int_equal(st.prelaunch_boosted, 0); /* no gpu_prelaunch_max */
    }
  /* A negative limit is refused at create. */
  cudaq_pipeline_config_t cfg;
  cudaq_pipeline_config_init(&cfg);
  cfg.gpu_prelaunch = -1;
  cudaq_pipeline_t *p = NULL;
  assert_int_equal(cudaq_pipeline_create(&cfg, &p), CUDAQ_ERR_INVALID_ARG);
  assert_non_null(strstr(cudaq_last_error(), "gpu_prelaunch -1"));
}

/* (extension) gpu_prelaunch_max: paced requests (each finds a graph
 * waiting) keep gpu_prelaunch graphs waiting; a burst (requests launched on
 * arrival for want of one) lets finishers re-arm past it, up to the max,
 * counted in prelaunch_boosted; every answer is checked and every waiting
 * graph is released at stop, however many. Below gpu_prelaunch (not 0) the
 * max is refused at create. */
static void test_prelaunch_boost(void **state) {
  (void)state;
  for (int emode = 0; emode <= EMU_GPU_ONLY_WORD; emode += EMU_GPU_ONLY_WORD) {
    cudaq_pipeline_stats_t st = run_prelaunch_max(emode, 1, 3, 0, 40, 0, 0);
    assert_int_equal(st.prelaunch_boosted, 0);
    assert_int_equal(st.prelaunch_cancelled, 1);
    st = run_prelaunch_max(emode, 1, 3, 0, 40, 2000, 0);
    assert_true(st.prelaunch_boosted > 0);
    assert_true(st.prelaunch_cancelled >= 1 && st.prelaunch_cancelled <= 3);
    assert_int_equal(st.prelaunch_failures, 0);
    /* A max above the workers is capped at them (4). */
    st = run_prelaunch_max(emode, 2, 9, 0, 10, 2000, 0);
    assert_true(st.prelaunch_cancelled >= 2 && st.prelaunch_cancelled <= 4);
  }
  cudaq_pipeline_config_t cfg;
  cudaq_pipeline_config_init(&cfg);
  cfg.gpu_prelaunch = 2;
  cfg.gpu_prelaunch_max = 1;
  cudaq_pipeline_t *p = NULL;
  assert_int_equal(cudaq_pipeline_create(&cfg, &p), CUDAQ_ERR_INVALID_ARG);
  assert_non_null(strstr(cudaq_last_error(), "gpu_prelaunch_max 1 below gpu_prelaunch 2"));
}

/* A failing re-arm is counted and that worker's next request is launched
 * on arrival; a failing launch on arrival answers its request with the CUDA
 * error (spec 9); nothing is lost. */
static void test_prelaunch_arm_failures(void **state) {
  (void)state;
  cudaq_pipeline_stats_t st = run_prelaunch(0, 2, 3, 30, 200, 0);
  assert_true(st.prelaunch_failures > 0);
  assert_true(st.prelaunched < 230);
}

static void no_op_callback(void *user, void *slot_dev, cudaStream_t s) { (void)user, (void)slot_dev, (void)s; }
static int factory_with_dma(void *user, int worker_id, cudaq_gpu_worker_resources_t *r) {
  int rc = emu_factory(user, worker_id, r);
  r->pre_launch_fn = no_op_callback;
  return rc;
}
static int factory_without_graph(void *user, int worker_id, cudaq_gpu_worker_resources_t *r) {
  int rc = emu_factory(user, worker_id, r);
  r->graph = NULL;
  return rc;
}
static int factory_claims_gate(void *user, int worker_id, cudaq_gpu_worker_resources_t *r) {
  int rc = emu_factory(user, worker_id, r);
  r->waits_at_gate = 1; /* while gpu_prelaunch is 0 (k = 6 below) */
  return rc;
}

/* gpu_prelaunch refused at start, naming why: no GPU stage; GPU-only with
 * host-function completion; a pre-launch callback; no gate ops (a build
 * without CUDA); no graph from the factory; an external ring whose stride
 * is not a multiple of 8; a graph that says it waits at a gate
 * (waits_at_gate) while gpu_prelaunch is 0; 65,536 slots (the gate word
 * names a slot in 16 bits). */
static void test_prelaunch_refused(void **state) {
  (void)state;
  static const cudaq__launch_ops_t no_gate = {.launch_graph = emu_launch, .enqueue_host_fn = emu_enqueue, .sync_stream = emu_sync};
  emu_t *e = malloc(sizeof *e);
  /* An external ring of 4 slots with a 516-byte stride. */
  static _Alignas(8) uint8_t ext_data[2][4 * 516];
  static volatile uint64_t ext_flags[2][4];
  cudaq_ringbuffer_t ext = {ext_flags[0], ext_flags[1], ext_data[0], ext_data[1], 516, 516,
                            NULL, NULL, NULL, NULL, CUDAQ_RX_COMPLETION_FLAG};
  for (int k = 0; k < 8; ++k) {
    cudaq_pipeline_config_t cfg;
    emu_config(&cfg, 2, k == 7 ? 65536 : 4, k == 7 ? 64 : 512);
    cfg.gpu_prelaunch = k == 6 ? 0 : 1;
    if (k == 1) cfg.gpu_only_completion = CUDAQ_GPU_ONLY_COMPLETION_HOST_FUNC;
    if (k == 5) {
      cfg.slot_size = 516;
      cfg.external_ringbuffer = &ext;
    }
    cudaq_pipeline_t *p = NULL;
    assert_int_equal(cudaq_pipeline_create(&cfg, &p), CUDAQ_OK);
    if (k == 0) {
      assert_int_equal(cudaq_pipeline_set_cpu_stage(p, cpu_xor, NULL), CUDAQ_OK);
    } else {
      assert_int_equal(emu_attach(e, p, FN_PASS, k == 1 ? EMU_GPU_ONLY_WORD : 0, NULL), CUDAQ_OK);
      if (k == 2) assert_int_equal(cudaq_pipeline_set_gpu_stage(p, factory_with_dma, e), CUDAQ_OK);
      if (k == 3) assert_int_equal(cudaq__pipeline_set_launch_ops(p, &no_gate), CUDAQ_OK);
      if (k == 4) assert_int_equal(cudaq_pipeline_set_gpu_stage(p, factory_without_graph, e), CUDAQ_OK);
      if (k == 6) assert_int_equal(cudaq_pipeline_set_gpu_stage(p, factory_claims_gate, e), CUDAQ_OK);
      if (k != 1) assert_int_equal(cudaq_pipeline_set_cpu_stage(p, cpu_after_gpu, NULL), CUDAQ_OK);
    }
    static const char *why[] = {"needs a GPU stage", "STREAM_WRITE", "pre- or post-launch callback",
                                "needs the gate ops", "no graph", "multiples of 8", "waits_at_gate",
                                "at most 65535 slots, not 65536"};
    assert_int_equal(cudaq_pipeline_start(p), k == 3 ? CUDAQ_ERR_UNSUPPORTED : CUDAQ_ERR_INVALID_ARG);
    assert_non_null(strstr(cudaq_last_error(), why[k]));
    assert_int_equal(cudaq_pipeline_destroy(p), CUDAQ_OK);
  }
  free(e);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_api_bad_input),
      cmocka_unit_test(test_external_ring),
      cmocka_unit_test(test_cpu_only_end_to_end),
      cmocka_unit_test(test_completion_ring_order),
      cmocka_unit_test(test_out_of_order_completion),
      cmocka_unit_test(test_backpressure),
      cmocka_unit_test(test_deferred_completion),
      cmocka_unit_test(test_deferred_before_return_then_slot_reused),
      cmocka_unit_test(test_launch_failure),
      cmocka_unit_test(test_gpu_only),
      cmocka_unit_test(test_gpu_only_stream_write),
      cmocka_unit_test(test_gpu_only_completion_refused),
      cmocka_unit_test(test_completion_before_launch_returns),
      cmocka_unit_test(test_stop_drains),
      cmocka_unit_test(test_stop_gives_up),
      cmocka_unit_test(test_prelaunch), cmocka_unit_test(test_prelaunch_boost),
      cmocka_unit_test(test_prelaunch_arm_failures),
      cmocka_unit_test(test_prelaunch_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
