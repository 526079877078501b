/*
 * test_pipeline_gpu.cu - the pipeline with real captured CUDA graphs
 * (host-dispatcher-worker-pool.md sections 2, 4, 5, 6, 9; the pipeline API
 * modes): pre-launch DMA of the payload from the mapped ring, a passthrough
 * copy kernel, the output copied into mapped memory, the ready signal; in
 * the modes GPU + CPU, GPU only (completion by a host function after the
 * graph) and CPU only on a mapped ring. Every request must complete exactly
 * once with its own payload (fill pattern).
 *
 * Without a CUDA device: prints "skipped: no CUDA device" and exits 77.
 * CUDAQ_TEST_SCALE (default 1.0) scales request counts (compute-sanitizer
 * runs use a small scale).
 */
#include <cuda_runtime.h>

#include <setjmp.h>
#include <stdarg.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern "C" {
#include <cmocka.h>
}

#include "cudaq/realtime/pipeline.h"
#include "pipeline_gpu_stage.cuh"

#define FN_PASS 0x5a5a0001u

static double g_scale = 1.0;
static uint32_t scaled(uint32_t n) {
  uint32_t v = (uint32_t)(n * g_scale);
  return v < 16 ? 16 : v;
}

static uint64_t now_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static uint8_t byte_of(uint64_t rid, size_t i) { return (uint8_t)((rid * 131u) ^ (i * 7u) ^ (rid >> 8)); }

struct rec_t {
  uint64_t n;
  uint8_t *seen;
  cudaq_ringbuffer_t rb;
  size_t payload;
  uint8_t x; /* expected response = payload ^ x */
  uint64_t bad, dup, failed;
  volatile uint64_t count;
};

static void on_done(void *user, const cudaq_completion_t *c) {
  rec_t *r = (rec_t *)user;
  if (c->request_id >= r->n) {
    r->bad++;
    return;
  }
  if (r->seen[c->request_id]++) r->dup++;
  if (!c->success) r->failed++;
  const uint8_t *tx = r->rb.tx_data_host + (size_t)c->slot * r->rb.tx_stride_sz;
  cudaq_rpc_response_t h;
  memcpy(&h, tx, sizeof h);
  int ok = h.magic == CUDAQ_RPC_MAGIC_RESPONSE && h.result_len >= r->payload;
  for (size_t i = 0; ok && i < r->payload; ++i) ok = tx[24 + i] == (uint8_t)(byte_of(c->request_id, i) ^ r->x);
  if (!ok && r->bad++ < 3) fprintf(stderr, "bad response for request %llu\n", (unsigned long long)c->request_id);
  __atomic_store_n(&r->count, r->count + 1, __ATOMIC_RELEASE);
}

/* CPU stage: response = GPU output (the passthrough of the payload) ^ 0x5A,
 * or request ^ 0x5A without a GPU stage. */
static size_t cpu_stage(void *user, const cudaq_cpu_stage_context_t *ctx) {
  (void)user;
  const uint8_t *in = (const uint8_t *)(ctx->gpu_output ? ctx->gpu_output : ctx->request);
  uint8_t *out = (uint8_t *)ctx->response_buffer;
  for (size_t i = 0; i < ctx->request_size; ++i) out[i] = in[i] ^ 0x5A;
  return ctx->request_size;
}

/* mode: 0 GPU + CPU, 1 GPU only, 2 CPU only; completion: the config's
 * gpu_only_completion; mailbox: the stage's kernel reads the payload from
 * the slot named by the mailbox (no pre-launch DMA); prelaunch: the
 * config's gpu_prelaunch (needs mailbox), with the first `paced` requests
 * sent one at a time, each after the previous answer; self_gate N > 0: the
 * stage's kernel (N blocks) waits at the gate itself (waits_at_gate). */
static void run_with(int mode, size_t payload, int workers, uint32_t n, int completion, int mailbox,
                     int prelaunch = 0, uint32_t paced = 0, int self_gate = 0, int in_ring = 0) {
  rec_t r;
  memset(&r, 0, sizeof r);
  pgs_stage *st = (pgs_stage *)calloc(1, sizeof *st);
  r.n = n;
  r.seen = (uint8_t *)calloc(n, 1);
  r.payload = payload;
  r.x = mode == 1 ? 0 : 0x5A;
  st->payload = payload;
  st->signal_ready = mode == 0;
  st->function_id = FN_PASS;
  st->mailbox_read = mailbox;
  st->self_gate = self_gate;
  st->gate_in_ring = in_ring;
  cudaq_pipeline_config_t cfg;
  cudaq_pipeline_config_init(&cfg);
  cfg.num_workers = workers;
  cfg.num_slots = 32;
  cfg.slot_size = payload + 64;
  cfg.drain_timeout_ms = 20000;
  cfg.gpu_only_completion = completion;
  cfg.gpu_prelaunch = prelaunch;
  cudaq_pipeline_t *p = NULL;
  assert_int_equal(cudaq_pipeline_create(&cfg, &p), CUDAQ_OK);
  cudaq_pipeline_ringbuffer(p, &r.rb);
  assert_true(cudaq_host_ringbuffer_is_mapped(&r.rb));
  assert_int_equal(cudaq_pipeline_set_completion_handler(p, on_done, &r), CUDAQ_OK);
  if (mode != 2) assert_int_equal(cudaq_pipeline_set_gpu_stage(p, pgs_factory, st), CUDAQ_OK);
  if (mode != 1) assert_int_equal(cudaq_pipeline_set_cpu_stage(p, cpu_stage, NULL), CUDAQ_OK);
  cudaq_status_t s = cudaq_pipeline_start(p);
  if (s != CUDAQ_OK) fail_msg("start: %s", cudaq_last_error());
  cudaq_gpu_only_completion_t used;
  assert_int_equal(cudaq_pipeline_gpu_only_completion(p, &used), CUDAQ_OK);
  if (mode != 1) assert_int_equal(used, CUDAQ_GPU_ONLY_COMPLETION_AUTO);
  else if (completion != CUDAQ_GPU_ONLY_COMPLETION_AUTO) assert_int_equal(used, completion);
  else assert_true(used == CUDAQ_GPU_ONLY_COMPLETION_STREAM_WRITE || used == CUDAQ_GPU_ONLY_COMPLETION_HOST_FUNC);
  cudaq_pipeline_injector_t *inj;
  assert_int_equal(cudaq_pipeline_injector_create(p, &inj), CUDAQ_OK);
  uint8_t *buf = (uint8_t *)malloc(payload);
  uint64_t t0 = now_ns();
  cudaq_pipeline_stats_t stt;
  for (uint64_t rid = 0; rid < n; ++rid) {
    for (size_t i = 0; i < payload; ++i) buf[i] = byte_of(rid, i);
    if (rid < paced) { /* sent once a graph waits again: the answer comes before the re-arm */
      const uint64_t t_arm = now_ns();
      for (cudaq_pipeline_stats(p, &stt); stt.prelaunch_waiting == 0; cudaq_pipeline_stats(p, &stt))
        if (now_ns() - t_arm > 10000000000ull) fail_msg("no graph waiting 10 s after request %llu", (unsigned long long)rid);
    }
    assert_int_equal(cudaq_pipeline_injector_submit(inj, FN_PASS, buf, payload, rid), CUDAQ_OK);
    if (rid < paced) { /* one at a time, each finding a graph waiting */
      const uint64_t t_wait = now_ns();
      while (__atomic_load_n(&r.count, __ATOMIC_ACQUIRE) < rid + 1)
        if (now_ns() - t_wait > 10000000000ull) fail_msg("request %llu not answered in 10 s", (unsigned long long)rid);
      cudaq_pipeline_stats(p, &stt);
      assert_int_equal(stt.prelaunched, rid + 1);
    }
  }
  assert_int_equal(cudaq_pipeline_stop(p), CUDAQ_OK); /* drains */
  double secs = (double)(now_ns() - t0) / 1e9;
  cudaq_pipeline_stats(p, &stt);
  uint64_t missing = 0;
  for (uint64_t i = 0; i < n; ++i) missing += r.seen[i] == 0;
  static const char *names[] = {"gpu+cpu", "gpu-only", "cpu-only"};
  static const char *how[] = {"", " (host-function completion)", " (stream-write completion)"}; /* by cudaq_gpu_only_completion_t */
  printf("pipeline %s%s%s%s %zuB x%d workers: %u requests in %.3f s (%.0f req/s); missing %llu dup %llu bad %llu "
         "failed %llu; stalls %llu\n",
         names[mode], mode == 1 ? how[used] : "", mailbox ? " mailbox-read" : "",
         self_gate ? (in_ring ? " self-gated in-ring" : " self-gated") : "", payload, workers, n, secs, n / secs, (unsigned long long)missing,
         (unsigned long long)r.dup, (unsigned long long)r.bad, (unsigned long long)r.failed,
         (unsigned long long)stt.backpressure_stalls);
  assert_int_equal(missing, 0);
  assert_int_equal(r.dup, 0);
  assert_int_equal(r.bad, 0);
  assert_int_equal(r.failed, 0);
  assert_int_equal(stt.completed, n);
  if (prelaunch) {
    printf("  pre-launched %llu of %u; failed re-arms %llu; released at stop %llu\n",
           (unsigned long long)stt.prelaunched, n, (unsigned long long)stt.prelaunch_failures,
           (unsigned long long)stt.prelaunch_cancelled);
    assert_true(stt.prelaunched >= paced && stt.prelaunched <= n);
    assert_int_equal(stt.prelaunch_failures, 0);
    /* finishers keep min(prelaunch, workers) graphs waiting: released at stop */
    assert_int_equal(stt.prelaunch_cancelled, (uint64_t)(prelaunch < workers ? prelaunch : workers));
  } else {
    assert_int_equal(stt.prelaunched + stt.prelaunch_cancelled, 0);
  }
  cudaq_pipeline_injector_destroy(inj);
  assert_int_equal(cudaq_pipeline_destroy(p), CUDAQ_OK);
  pgs_release(st);
  free(st);
  free(buf);
  free(r.seen);
}

static void run(int mode, size_t payload, int workers, uint32_t n) {
  run_with(mode, payload, workers, n, CUDAQ_GPU_ONLY_COMPLETION_AUTO, 0);
}

static void test_gpu_cpu_2k(void **) { run(0, 2048, 4, scaled(50000)); }
static void test_gpu_cpu_16k(void **) { run(0, 16384, 8, scaled(20000)); }
static void test_gpu_cpu_one_worker(void **) { run(0, 2048, 1, scaled(5000)); }
static void test_gpu_only_2k(void **) { run(1, 2048, 4, scaled(50000)); }
static void test_gpu_only_16k(void **) { run(1, 16384, 8, scaled(20000)); }
static void test_cpu_only_mapped(void **) { run(2, 2048, 4, scaled(50000)); }
/* (extension) GPU-only completion asked for explicitly: the completion word
 * written by the GPU (cuStreamWriteValue32), and the spec's host function. */
static void test_gpu_only_stream_write(void **) {
  run_with(1, 2048, 4, scaled(50000), CUDAQ_GPU_ONLY_COMPLETION_STREAM_WRITE, 0);
  run_with(1, 16384, 8, scaled(20000), CUDAQ_GPU_ONLY_COMPLETION_STREAM_WRITE, 0);
}
static void test_gpu_only_host_func(void **) {
  run_with(1, 2048, 4, scaled(20000), CUDAQ_GPU_ONLY_COMPLETION_HOST_FUNC, 0);
}
/* The stage reads the payload through the mailbox (spec 5: the dispatcher
 * writes the slot's device address there before each launch). */
static void test_mailbox_read(void **) {
  run_with(0, 2048, 4, scaled(50000), CUDAQ_GPU_ONLY_COMPLETION_AUTO, 1);
  run_with(1, 16384, 8, scaled(20000), CUDAQ_GPU_ONLY_COMPLETION_AUTO, 1);
}
/* (extension) gpu_prelaunch: each worker's graph, behind a gate kernel that
 * copies the request into device memory, is launched ahead (1, 2 or 4 at
 * once) and a request only opens its gate; GPU + CPU (2 KiB) and GPU-only (stream-write
 * completion, 16 KiB: the copy's second round), paced then flat out; the
 * waiting graphs are released at stop. */
static void test_prelaunch(void **) {
  run_with(0, 2048, 4, scaled(20000), CUDAQ_GPU_ONLY_COMPLETION_AUTO, 1, 1, scaled(500));
  run_with(0, 2048, 4, scaled(20000), CUDAQ_GPU_ONLY_COMPLETION_AUTO, 1, 4, scaled(200));
  run_with(1, 16384, 4, scaled(10000), CUDAQ_GPU_ONLY_COMPLETION_AUTO, 1, 2, scaled(500));
  /* A slot stride of 2104 bytes (not a multiple of 16): the 8-byte copy. */
  run_with(0, 2040, 2, scaled(5000), CUDAQ_GPU_ONLY_COMPLETION_AUTO, 1, 1, scaled(100));
}

/* (extension) gpu_prelaunch with waits_at_gate: the stage's own kernel
 * calls cudaq_pipeline_gate_wait (no gate kernel); one block (GPU + CPU,
 * 2 KiB), four blocks (the other blocks wait for block 0's copy: GPU + CPU
 * 16 KiB with 2 waiting, GPU-only 16 KiB), and an 8-byte-copy stride; then
 * with the request read in the ring instead of its copy (1 and 4 blocks);
 * paced then flat out, every answer checked byte for byte. */
static void test_prelaunch_self_gated(void **) {
  run_with(0, 2048, 4, scaled(20000), CUDAQ_GPU_ONLY_COMPLETION_AUTO, 1, 1, scaled(500), 1);
  run_with(0, 16384, 4, scaled(10000), CUDAQ_GPU_ONLY_COMPLETION_AUTO, 1, 2, scaled(300), 4);
  run_with(1, 16384, 4, scaled(10000), CUDAQ_GPU_ONLY_COMPLETION_AUTO, 1, 2, scaled(300), 4);
  run_with(0, 2040, 2, scaled(5000), CUDAQ_GPU_ONLY_COMPLETION_AUTO, 1, 1, scaled(100), 3);
  /* The request read in the ring (cudaq_pipeline_gate_wait_in_ring). */
  run_with(0, 2048, 4, scaled(20000), CUDAQ_GPU_ONLY_COMPLETION_AUTO, 1, 1, scaled(500), 1, 1);
  run_with(0, 16384, 4, scaled(10000), CUDAQ_GPU_ONLY_COMPLETION_AUTO, 1, 2, scaled(300), 4, 1);
  run_with(1, 16384, 4, scaled(10000), CUDAQ_GPU_ONLY_COMPLETION_AUTO, 1, 2, scaled(300), 4, 1);
}

/* A factory whose graph says it waits at a gate while gpu_prelaunch is 0:
 * start refuses it with a message (no gate exists to wait at). */
static int lying_factory(void *user, int id, cudaq_gpu_worker_resources_t *r) {
  int rc = pgs_factory(user, id, r);
  r->waits_at_gate = 1;
  return rc;
}
/* waits_at_gate with another root node beside the kernel that waits (here
 * an empty node): refused at start, the message says why. */
static int two_roots_factory(void *user, int id, cudaq_gpu_worker_resources_t *r) {
  int rc = pgs_factory(user, id, r);
  cudaGraphNode_t extra;
  if (rc == 0 && cudaGraphAddEmptyNode(&extra, r->graph, nullptr, 0) != cudaSuccess) rc = -1;
  return rc;
}
/* Starts a one-worker pipeline over factory f (its stage's kernel waiting at
 * the gate itself when self_gate) and expects start to fail with `status`
 * (0: any error) and a message containing `phrase`. */
static void expect_start_refused(cudaq_gpu_stage_factory_t f, int self_gate, int prelaunch,
                                 cudaq_status_t status, const char *phrase) {
  pgs_stage *st = (pgs_stage *)calloc(1, sizeof *st);
  st->payload = 256;
  st->signal_ready = 1;
  st->function_id = FN_PASS;
  st->mailbox_read = 1;
  st->self_gate = self_gate;
  cudaq_pipeline_config_t cfg;
  cudaq_pipeline_config_init(&cfg);
  cfg.num_workers = 1;
  cfg.num_slots = 8;
  cfg.slot_size = 512;
  cfg.gpu_prelaunch = prelaunch;
  cudaq_pipeline_t *p = NULL;
  assert_int_equal(cudaq_pipeline_create(&cfg, &p), CUDAQ_OK);
  assert_int_equal(cudaq_pipeline_set_gpu_stage(p, f, st), CUDAQ_OK);
  assert_int_equal(cudaq_pipeline_set_cpu_stage(p, cpu_stage, NULL), CUDAQ_OK);
  cudaq_status_t got = cudaq_pipeline_start(p);
  if (status) assert_int_equal(got, status);
  else assert_int_not_equal(got, CUDAQ_OK);
  assert_non_null(strstr(cudaq_last_error(), phrase));
  assert_int_equal(cudaq_pipeline_destroy(p), CUDAQ_OK);
  pgs_release(st);
  free(st);
}

static void test_waits_at_gate_needs_one_root(void **) {
  expect_start_refused(two_roots_factory, 1, 1, CUDAQ_OK, "one root node must be the kernel that waits");
}

static void test_waits_at_gate_needs_prelaunch(void **) {
  expect_start_refused(lying_factory, 0, 0, CUDAQ_ERR_INVALID_ARG, "waits_at_gate");
}

/* GRAPH_LAUNCH entries of a host-path cudaq_dispatcher_t go to real graph
 * workers (W 4): the graph ends with the ready signal; a poller thread
 * claims it by CAS(1 -> 2), answers the origin slot with the GPU output,
 * stores ready = 0 and releases the worker from its own thread. */
struct hw_ctx {
  cudaq_dispatcher_t *d;
  cudaq_ringbuffer_t rb;
  int *ready; /* host view, mapped */
  pgs_stage *st;
  int nw;
  volatile int stop;
};

static void *hw_poller(void *arg) {
  hw_ctx *c = (hw_ctx *)arg;
  while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)) {
    for (int w = 0; w < c->nw; ++w) {
      int one = 1;
      if (!__atomic_compare_exchange_n(&c->ready[w], &one, 2, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        continue;
      uint32_t slot = 0;
      if (cudaq_host_worker_slot(c->d, (uint32_t)w, &slot) != CUDAQ_OK) abort();
      const uint8_t *rx = c->rb.rx_data_host + slot * c->rb.rx_stride_sz;
      uint8_t *tx = c->rb.tx_data_host + slot * c->rb.tx_stride_sz;
      cudaq_rpc_header_t h;
      memcpy(&h, rx, sizeof h);
      memcpy(tx + 24, c->st->w[w].h_out, c->st->payload);
      cudaq_rpc_response_t resp = {CUDAQ_RPC_MAGIC_RESPONSE, 0, (uint32_t)c->st->payload, h.request_id, 0};
      memcpy(tx, &resp, sizeof resp);
      __atomic_store_n((uint64_t *)(uintptr_t)&c->rb.tx_flags_host[slot], (uint64_t)(uintptr_t)tx,
                       __ATOMIC_RELEASE);
      __atomic_store_n(&c->ready[w], 0, __ATOMIC_RELEASE);
      if (cudaq_host_release_worker(c->d, (uint32_t)w) != CUDAQ_OK) abort();
    }
  }
  return NULL;
}

static void test_host_dispatcher_graph_workers(void **) {
  const int NW = 4;
  const uint32_t SLOTS = 16, n = scaled(20000);
  const size_t payload = 2048;
  hw_ctx c;
  memset(&c, 0, sizeof c);
  c.nw = NW;
  c.st = (pgs_stage *)calloc(1, sizeof(pgs_stage));
  c.st->payload = payload;
  c.st->signal_ready = 1;
  c.st->function_id = FN_PASS;
  int *ready_dev = NULL;
  assert_int_equal(cudaHostAlloc(&c.ready, NW * sizeof(int), cudaHostAllocMapped), cudaSuccess);
  memset(c.ready, 0, NW * sizeof(int));
  assert_int_equal(cudaHostGetDevicePointer((void **)&ready_dev, c.ready, 0), cudaSuccess);
  cudaq_host_dispatch_worker_t workers[NW];
  memset(workers, 0, sizeof workers);
  for (int w = 0; w < NW; ++w) {
    cudaq_gpu_worker_resources_t r;
    memset(&r, 0, sizeof r);
    r.ready_flag_dev = &ready_dev[w];
    assert_int_equal(pgs_factory(c.st, w, &r), 0);
    workers[w].graph_exec = r.graph_exec;
    workers[w].stream = r.stream;
    workers[w].function_id = FN_PASS;
    workers[w].pre_launch_fn = r.pre_launch_fn;
    workers[w].pre_launch_data = r.pre_launch_data;
  }
  cudaq_dispatch_manager_t *m;
  cudaq_dispatcher_config_t cfg;
  assert_int_equal(cudaq_dispatch_manager_create(&m), CUDAQ_OK);
  cudaq_dispatcher_config_init(&cfg);
  cfg.num_slots = SLOTS;
  cfg.slot_size = (uint32_t)(payload + 64);
  cfg.dispatch_path = CUDAQ_DISPATCH_PATH_HOST;
  assert_int_equal(cudaq_dispatcher_create(m, &cfg, &c.d), CUDAQ_OK);
  assert_int_equal(cudaq_host_ringbuffer_alloc(&c.rb, SLOTS, cfg.slot_size, CUDAQ_RING_ALLOC_MAPPED), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_set_ringbuffer(c.d, &c.rb), CUDAQ_OK);
  cudaq_function_entry_t e;
  memset(&e, 0, sizeof e);
  e.handler.graph_exec = workers[0].graph_exec;
  e.function_id = FN_PASS;
  e.dispatch_mode = CUDAQ_DISPATCH_GRAPH_LAUNCH;
  cudaq_function_table_t t = {&e, 1};
  assert_int_equal(cudaq_dispatcher_set_function_table(c.d, &t), CUDAQ_OK);
  volatile int shutdown = 0;
  uint64_t stats[1] = {0};
  assert_int_equal(cudaq_dispatcher_set_control(c.d, &shutdown, stats), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_set_host_workers(c.d, workers, NW), CUDAQ_OK);
  assert_int_equal(cudaq_dispatcher_start(c.d), CUDAQ_OK);
  pthread_t pt;
  pthread_create(&pt, NULL, hw_poller, &c);
  uint8_t *buf = (uint8_t *)malloc(payload);
  uint64_t bad = 0;
  /* Window of SLOTS requests in flight: before reusing a slot, harvest and
   * check its previous response. */
  for (uint64_t rid = 0; rid < n + SLOTS; ++rid) {
    uint32_t s = (uint32_t)(rid % SLOTS);
    if (rid >= SLOTS) {
      uint64_t prev = rid - SLOTS, t0 = now_ns();
      cudaq_tx_status_t ts;
      while ((ts = cudaq_host_ringbuffer_poll_tx_flag(&c.rb, s, NULL)) == CUDAQ_TX_EMPTY || ts == CUDAQ_TX_IN_FLIGHT)
        if (now_ns() - t0 > 5000000000ull) fail_msg("request %llu never answered", (unsigned long long)prev);
      const uint8_t *tx = c.rb.tx_data_host + s * c.rb.tx_stride_sz;
      cudaq_rpc_response_t h;
      memcpy(&h, tx, sizeof h);
      int ok = ts == CUDAQ_TX_READY && h.request_id == (uint32_t)prev && h.result_len == payload;
      for (size_t i = 0; ok && i < payload; ++i) ok = tx[24 + i] == byte_of(prev, i);
      bad += !ok;
      cudaq_host_ringbuffer_clear_slot(&c.rb, s);
    }
    if (rid >= n) continue;
    while (!cudaq_host_ringbuffer_slot_available(&c.rb, s)) {
    }
    for (size_t i = 0; i < payload; ++i) buf[i] = byte_of(rid, i);
    assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&c.rb, s, FN_PASS, buf, (uint32_t)payload,
                                                             (uint32_t)rid, 0), CUDAQ_OK);
    cudaq_host_ringbuffer_signal_slot(&c.rb, s);
  }
  printf("host dispatcher + %d graph workers: %u requests, %llu bad\n", NW, n, (unsigned long long)bad);
  assert_int_equal(bad, 0);
  assert_int_equal(cudaq_dispatcher_stop(c.d), CUDAQ_OK);
  __atomic_store_n(&c.stop, 1, __ATOMIC_RELEASE);
  pthread_join(pt, NULL);
  for (int w = 0; w < NW; ++w) cudaStreamSynchronize(workers[w].stream);
  assert_int_equal(cudaq_dispatch_manager_destroy(m), CUDAQ_OK);
  cudaq_host_ringbuffer_free(&c.rb);
  pgs_release(c.st);
  free(c.st);
  cudaFreeHost(c.ready);
  free(buf);
}

/* The graph-launch floor runs and is sane (prints it for the record). */
static void test_launch_floor(void **) {
  size_t n = scaled(2000);
  uint64_t *s = (uint64_t *)calloc(n, 8);
  assert_int_equal(pgs_launch_floor(n, s, 0, now_ns), 0);
  uint64_t mn = s[0];
  for (size_t i = 0; i < n; ++i) mn = s[i] < mn ? s[i] : mn;
  printf("graph launch floor: min %.2f us over %zu launches\n", mn / 1000.0, n);
  assert_true(mn > 0);
  free(s);
}

int main(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    printf("skipped: no CUDA device\n");
    return 77;
  }
  const char *sc = getenv("CUDAQ_TEST_SCALE");
  if (sc && *sc) g_scale = atof(sc);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_launch_floor),     cmocka_unit_test(test_gpu_cpu_one_worker),
      cmocka_unit_test(test_gpu_cpu_2k),       cmocka_unit_test(test_gpu_cpu_16k),
      cmocka_unit_test(test_gpu_only_2k),      cmocka_unit_test(test_gpu_only_16k),
      cmocka_unit_test(test_cpu_only_mapped),   cmocka_unit_test(test_gpu_only_stream_write),
      cmocka_unit_test(test_gpu_only_host_func), cmocka_unit_test(test_mailbox_read),
      cmocka_unit_test(test_prelaunch),
      cmocka_unit_test(test_prelaunch_self_gated),
      cmocka_unit_test(test_waits_at_gate_needs_prelaunch),
      cmocka_unit_test(test_waits_at_gate_needs_one_root),
      cmocka_unit_test(test_host_dispatcher_graph_workers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
