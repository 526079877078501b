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

/* mode: 0 GPU + CPU, 1 GPU only, 2 CPU only */
static void run(int mode, size_t payload, int workers, uint32_t n) {
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
  cudaq_pipeline_config_t cfg;
  cudaq_pipeline_config_init(&cfg);
  cfg.num_workers = workers;
  cfg.num_slots = 32;
  cfg.slot_size = payload + 64;
  cfg.drain_timeout_ms = 20000;
  cudaq_pipeline_t *p = NULL;
  assert_int_equal(cudaq_pipeline_create(&cfg, &p), CUDAQ_OK);
  cudaq_pipeline_ringbuffer(p, &r.rb);
  assert_true(cudaq_host_ringbuffer_is_mapped(&r.rb));
  assert_int_equal(cudaq_pipeline_set_completion_handler(p, on_done, &r), CUDAQ_OK);
  if (mode != 2) assert_int_equal(cudaq_pipeline_set_gpu_stage(p, pgs_factory, st), CUDAQ_OK);
  if (mode != 1) assert_int_equal(cudaq_pipeline_set_cpu_stage(p, cpu_stage, NULL), CUDAQ_OK);
  cudaq_status_t s = cudaq_pipeline_start(p);
  if (s != CUDAQ_OK) fail_msg("start: %s", cudaq_last_error());
  cudaq_pipeline_injector_t *inj;
  assert_int_equal(cudaq_pipeline_injector_create(p, &inj), CUDAQ_OK);
  uint8_t *buf = (uint8_t *)malloc(payload);
  uint64_t t0 = now_ns();
  for (uint64_t rid = 0; rid < n; ++rid) {
    for (size_t i = 0; i < payload; ++i) buf[i] = byte_of(rid, i);
    assert_int_equal(cudaq_pipeline_injector_submit(inj, FN_PASS, buf, payload, rid), CUDAQ_OK);
  }
  assert_int_equal(cudaq_pipeline_stop(p), CUDAQ_OK); /* drains */
  double secs = (double)(now_ns() - t0) / 1e9;
  cudaq_pipeline_stats_t stt;
  cudaq_pipeline_stats(p, &stt);
  uint64_t missing = 0;
  for (uint64_t i = 0; i < n; ++i) missing += r.seen[i] == 0;
  static const char *names[] = {"gpu+cpu", "gpu-only", "cpu-only"};
  printf("pipeline %s %zuB x%d workers: %u requests in %.3f s (%.0f req/s); missing %llu dup %llu bad %llu "
         "failed %llu; stalls %llu\n",
         names[mode], payload, workers, n, secs, n / secs, (unsigned long long)missing,
         (unsigned long long)r.dup, (unsigned long long)r.bad, (unsigned long long)r.failed,
         (unsigned long long)stt.backpressure_stalls);
  assert_int_equal(missing, 0);
  assert_int_equal(r.dup, 0);
  assert_int_equal(r.bad, 0);
  assert_int_equal(r.failed, 0);
  assert_int_equal(stt.completed, n);
  cudaq_pipeline_injector_destroy(inj);
  assert_int_equal(cudaq_pipeline_destroy(p), CUDAQ_OK);
  pgs_release(st);
  free(st);
  free(buf);
  free(r.seen);
}

static void test_gpu_cpu_2k(void **) { run(0, 2048, 4, scaled(50000)); }
static void test_gpu_cpu_16k(void **) { run(0, 16384, 8, scaled(20000)); }
static void test_gpu_cpu_one_worker(void **) { run(0, 2048, 1, scaled(5000)); }
static void test_gpu_only_2k(void **) { run(1, 2048, 4, scaled(50000)); }
static void test_gpu_only_16k(void **) { run(1, 16384, 8, scaled(20000)); }
static void test_cpu_only_mapped(void **) { run(2, 2048, 4, scaled(50000)); }

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
      cmocka_unit_test(test_cpu_only_mapped),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
