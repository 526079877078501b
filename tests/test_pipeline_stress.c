/*
 * test_pipeline_stress.c - every request completes exactly once with its own
 * payload, under random per-request delays, through the whole pipeline:
 * injector -> dispatcher -> worker pool -> (emulated GPU) -> CPU stage /
 * deferred thread -> out-of-order consumer. Covers W 2, 6.1, 7, 9, 13 and
 * P (injector, deferred completion, stats) at volume.
 *
 * Modes: "cpu" (CPU only, 1 in 8 requests deferred to another thread),
 * "gpu_cpu" (emulated GPU + CPU stage), "gpu_only" (emulated GPU, host
 * function completion), "gpu_word" (emulated GPU, STREAM_WRITE completion:
 * the consumer polls the completion words). CUDAQ_PIPELINE_STRESS_REQUESTS sets the count per
 * mode (default 1000000); CUDAQ_PIPELINE_STRESS_MODES picks modes
 * (comma-separated, default all).
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
#define SLOTS 16
#define SLOT_SIZE 512
#define WORKERS 4

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}
static uint32_t len_of(uint64_t rid) { return 8 + (uint32_t)(mix(rid) % 256); }
static uint8_t byte_of(uint64_t rid, uint32_t i) { return (uint8_t)(mix(rid * 977 + i) >> 17); }

/* Random per-request delays: about half the requests 0, the rest up to
 * 20 us in the GPU stage and up to 5 us in the CPU stage. */
static int64_t gpu_delay(const uint8_t *slot) {
  cudaq_rpc_header_t h;
  memcpy(&h, slot, sizeof h);
  uint64_t m = mix(h.request_id ^ 0xabcdef);
  return (m & 1) ? (int64_t)(m >> 8) % 20000 : 0;
}
static void cpu_delay(uint64_t rid) {
  uint64_t m = mix(rid ^ 0x1234567);
  if (m & 3) return;
  uint64_t until = test_now_ns() + (m >> 8) % 5000;
  while (test_now_ns() < until) {
  }
}

typedef struct {
  uint64_t n;
  uint8_t *seen;
  cudaq_ringbuffer_t rb;
  int expect_xor; /* response = payload ^ 0x5A (CPU stage), else = payload */
  _Atomic uint64_t count;
  uint64_t bad, dup;
  /* deferred jobs: slot + 1 per slot, handed over with release/acquire */
  _Atomic int q[SLOTS];
  _Atomic int stop;
  cudaq_pipeline_t *p;
} stress_t;

static void on_done(void *user, const cudaq_completion_t *c) {
  stress_t *s = user;
  uint64_t rid = c->request_id;
  if (rid >= s->n) {
    s->bad++;
    return;
  }
  if (s->seen[rid]++) s->dup++;
  const uint8_t *tx = s->rb.tx_data_host + (size_t)c->slot * s->rb.tx_stride_sz;
  cudaq_rpc_response_t h;
  memcpy(&h, tx, sizeof h);
  uint32_t len = len_of(rid);
  uint8_t x = s->expect_xor ? 0x5A : 0;
  int ok = c->success && h.magic == CUDAQ_RPC_MAGIC_RESPONSE && h.request_id == (uint32_t)rid &&
           h.result_len >= len;
  for (uint32_t i = 0; ok && i < len; ++i) ok = tx[24 + i] == (uint8_t)(byte_of(rid, i) ^ x);
  if (!ok) {
    if (s->bad < 5) fprintf(stderr, "stress: bad response for request %llu\n", (unsigned long long)rid);
    s->bad++;
  }
  atomic_store_explicit(&s->count, atomic_load_explicit(&s->count, memory_order_relaxed) + 1,
                        memory_order_release);
}

static size_t cpu_stage(void *user, const cudaq_cpu_stage_context_t *ctx) {
  stress_t *s = user;
  const uint8_t *in = ctx->gpu_output ? ctx->gpu_output : ctx->request;
  uint64_t rid = ctx->request_id;
  cpu_delay(rid);
  if (!ctx->gpu_output && mix(rid ^ 0x77) % 8 == 0) {
    /* Deferred: another thread writes the response later. */
    atomic_store_explicit(&s->q[ctx->origin_slot], ctx->origin_slot + 1, memory_order_release);
    return CUDAQ_DEFERRED_COMPLETION;
  }
  uint8_t *out = ctx->response_buffer;
  for (size_t i = 0; i < ctx->request_size; ++i) out[i] = in[i] ^ 0x5A;
  return ctx->request_size;
}

static void *deferred_main(void *arg) {
  stress_t *s = arg;
  while (!atomic_load_explicit(&s->stop, memory_order_acquire)) {
    int any = 0;
    for (int k = 0; k < SLOTS; ++k) {
      if (!atomic_load_explicit(&s->q[k], memory_order_acquire)) continue; /* pairs with the stage */
      atomic_store_explicit(&s->q[k], 0, memory_order_relaxed);
      any = 1;
      const uint8_t *rx = s->rb.rx_data_host + (size_t)k * s->rb.rx_stride_sz;
      uint8_t *tx = s->rb.tx_data_host + (size_t)k * s->rb.tx_stride_sz;
      cudaq_rpc_header_t h;
      memcpy(&h, rx, sizeof h);
      for (uint32_t i = 0; i < h.arg_len; ++i) tx[24 + i] = rx[24 + i] ^ 0x5A;
      if (cudaq_pipeline_complete_deferred(s->p, k, h.arg_len) != CUDAQ_OK) s->bad++;
    }
    if (!any) test_spin();
  }
  return NULL;
}

static uint64_t env_u64(const char *name, uint64_t dflt) {
  const char *v = getenv(name);
  return v && *v ? strtoull(v, NULL, 10) : dflt;
}

static int mode_enabled(const char *mode) {
  const char *v = getenv("CUDAQ_PIPELINE_STRESS_MODES");
  if (!v || !*v) return 1;
  size_t m = strlen(mode);
  for (const char *t = v; (t = strstr(t, mode)) != NULL; t += m)
    if ((t == v || t[-1] == ',') && (t[m] == ',' || t[m] == 0)) return 1;
  return 0;
}

/* mode: 0 cpu, 1 gpu_cpu, 2 gpu_only, 3 gpu_word */
static void run(int mode) {
  const uint64_t n = env_u64("CUDAQ_PIPELINE_STRESS_REQUESTS", 1000000);
  stress_t *s = calloc(1, sizeof *s);
  emu_t *e = calloc(1, sizeof *e);
  s->n = n;
  s->seen = calloc(n, 1);
  const int gpu_only = mode >= 2;
  s->expect_xor = !gpu_only;
  cudaq_pipeline_config_t cfg;
  cudaq_pipeline_config_init(&cfg);
  cfg.num_workers = WORKERS;
  cfg.num_slots = SLOTS;
  cfg.slot_size = SLOT_SIZE;
  cfg.idle_yield = 1;
  cfg.drain_timeout_ms = 20000;
  cudaq_pipeline_t *p = NULL;
  assert_int_equal(cudaq_pipeline_create(&cfg, &p), CUDAQ_OK);
  s->p = p;
  cudaq_pipeline_ringbuffer(p, &s->rb);
  assert_int_equal(cudaq_pipeline_set_completion_handler(p, on_done, s), CUDAQ_OK);
  if (mode != 0)
    assert_int_equal(emu_attach(e, p, FN_PASS,
                                mode == 3 ? EMU_GPU_ONLY_WORD : gpu_only ? EMU_GPU_ONLY_HOST_FN : EMU_GPU_CPU,
                                gpu_delay),
                     CUDAQ_OK);
  if (!gpu_only) assert_int_equal(cudaq_pipeline_set_cpu_stage(p, cpu_stage, s), CUDAQ_OK);
  assert_int_equal(cudaq_pipeline_start(p), CUDAQ_OK);
  if (gpu_only) {
    cudaq_gpu_only_completion_t used;
    cudaq_pipeline_gpu_only_completion(p, &used);
    assert_int_equal(used, mode == 3 ? CUDAQ_GPU_ONLY_COMPLETION_STREAM_WRITE
                                     : CUDAQ_GPU_ONLY_COMPLETION_HOST_FUNC);
  }
  if (mode != 0) emu_start(e);
  pthread_t dt;
  pthread_create(&dt, NULL, deferred_main, s);
  cudaq_pipeline_injector_t *inj;
  assert_int_equal(cudaq_pipeline_injector_create(p, &inj), CUDAQ_OK);
  uint8_t buf[SLOT_SIZE];
  uint64_t t0 = test_now_ns();
  for (uint64_t rid = 0; rid < n; ++rid) {
    uint32_t len = len_of(rid);
    for (uint32_t i = 0; i < len; ++i) buf[i] = byte_of(rid, i);
    assert_int_equal(cudaq_pipeline_injector_submit(inj, FN_PASS, buf, len, rid), CUDAQ_OK);
  }
  /* stop drains: everything submitted must be complete when it returns. */
  assert_int_equal(cudaq_pipeline_stop(p), CUDAQ_OK);
  double secs = (double)(test_now_ns() - t0) / 1e9;
  atomic_store_explicit(&s->stop, 1, memory_order_release);
  pthread_join(dt, NULL);
  if (mode != 0) emu_stop(e);
  cudaq_pipeline_stats_t st;
  cudaq_pipeline_stats(p, &st);
  uint64_t missing = 0;
  for (uint64_t i = 0; i < n; ++i) missing += s->seen[i] == 0;
  static const char *names[] = {"cpu", "gpu_cpu", "gpu_only", "gpu_word"};
  printf("stress %s: %llu requests in %.2f s; completed %llu, missing %llu, duplicates %llu, bad %llu, "
         "backpressure stalls %llu, worker stalls %llu\n",
         names[mode], (unsigned long long)n, secs, (unsigned long long)st.completed,
         (unsigned long long)missing, (unsigned long long)s->dup, (unsigned long long)s->bad,
         (unsigned long long)st.backpressure_stalls, (unsigned long long)st.worker_stalls);
  assert_int_equal(missing, 0);
  assert_int_equal(s->dup, 0);
  assert_int_equal(s->bad, 0);
  assert_int_equal(st.submitted, n);
  assert_int_equal(st.dispatched, n);
  assert_int_equal(st.completed, n);
  assert_int_equal(atomic_load(&s->count), n);
  cudaq_pipeline_injector_destroy(inj);
  cudaq_pipeline_destroy(p);
  free(s->seen);
  free(s);
  free(e);
}

static void test_stress_cpu_only(void **state) {
  (void)state;
  if (mode_enabled("cpu")) run(0);
}
static void test_stress_gpu_cpu_emulated(void **state) {
  (void)state;
  if (mode_enabled("gpu_cpu")) run(1);
}
static void test_stress_gpu_only_emulated(void **state) {
  (void)state;
  if (mode_enabled("gpu_only")) run(2);
}
static void test_stress_gpu_only_word_emulated(void **state) {
  (void)state;
  if (mode_enabled("gpu_word")) run(3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stress_cpu_only),
      cmocka_unit_test(test_stress_gpu_cpu_emulated),
      cmocka_unit_test(test_stress_gpu_only_emulated),
      cmocka_unit_test(test_stress_gpu_only_word_emulated),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
