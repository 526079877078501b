/* Executors run at once on several threads give the answers one thread
 * gives (nn.h: distinct executors may run concurrently). The CPU executor's
 * convolutions call OpenBLAS's SGEMM from every thread at once: Debian's
 * serial OpenBLAS hands the same internal buffer to two concurrent calls
 * now and then (the shipped d = 5 model, two threads: about one output in
 * 3,000 differed), so the project links the pthread build, limited to one
 * thread per call (cpu_conv.c). A race shows rarely: this is a check that
 * fails only when it catches one, ROUNDS rounds of INPUTS inputs per thread.
 * Usage: test_nn_threads MODEL.onnx (one INT32 input of [1, N], the shipped
 * predecoders' contract). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cudaq/nn/nn.h"

#define THREADS 2
#define INPUTS 32
#define ROUNDS 40

static const char *g_path;
static cudaq_nn_model_t *g_model;
static size_t g_in_size, g_out_size[2];
static int32_t *g_in[INPUTS];
static uint8_t *g_ref[INPUTS][2];

typedef struct {
  int bad;
  int failed;
} worker_t;

static int run_one(cudaq_nn_cpu_t *cpu, int k, void *out0, void *out1) {
  const void *in[1] = {g_in[k]};
  void *outs[2] = {out0, out1};
  return cudaq_nn_cpu_run(cpu, in, &g_in_size, outs, g_out_size, NULL) != CUDAQ_NN_OK;
}

static void *worker(void *arg) {
  worker_t *w = arg;
  cudaq_nn_cpu_t *cpu = NULL;
  void *o0 = malloc(g_out_size[0]), *o1 = malloc(g_out_size[1]);
  if (!o0 || !o1 || cudaq_nn_cpu_create(g_model, &cpu) != CUDAQ_NN_OK) {
    w->failed = 1;
  } else {
    for (int r = 0; r < ROUNDS && !w->failed; r++)
      for (int k = 0; k < INPUTS; k++) {
        if (run_one(cpu, k, o0, o1)) {
          w->failed = 1;
          break;
        }
        w->bad += memcmp(o0, g_ref[k][0], g_out_size[0]) != 0 || memcmp(o1, g_ref[k][1], g_out_size[1]) != 0;
      }
  }
  cudaq_nn_cpu_destroy(cpu);
  free(o0);
  free(o1);
  return NULL;
}

static void test_concurrent_runs_agree(void **state) {
  (void)state;
  cudaq_nn_error_t err;
  assert_int_equal(cudaq_nn_model_load_file(g_path, &g_model, &err), CUDAQ_NN_OK);
  if (cudaq_nn_model_num_outputs(g_model) > 2) /* residual and frame only (edge logits pruned) */
    assert_int_equal(cudaq_nn_model_keep_outputs(g_model, 2), CUDAQ_NN_OK);
  assert_int_equal(cudaq_nn_model_num_inputs(g_model), 1);
  assert_true(cudaq_nn_model_num_outputs(g_model) >= 2);
  cudaq_nn_binding_t b;
  assert_int_equal(cudaq_nn_model_input(g_model, 0, &b), CUDAQ_NN_OK);
  assert_int_equal(b.dtype, CUDAQ_NN_INT32);
  g_in_size = b.size_bytes;
  for (int i = 0; i < 2; i++) {
    assert_int_equal(cudaq_nn_model_output(g_model, (size_t)i, &b), CUDAQ_NN_OK);
    g_out_size[i] = b.size_bytes;
  }
  /* Inputs: about 5% ones, a fixed generator; references from one thread. */
  uint64_t s = 20261126;
  cudaq_nn_cpu_t *cpu = NULL;
  assert_int_equal(cudaq_nn_cpu_create(g_model, &cpu), CUDAQ_NN_OK);
  for (int k = 0; k < INPUTS; k++) {
    g_in[k] = calloc(g_in_size / 4, 4);
    g_ref[k][0] = malloc(g_out_size[0]);
    g_ref[k][1] = malloc(g_out_size[1]);
    assert_non_null(g_in[k]);
    assert_non_null(g_ref[k][0]);
    assert_non_null(g_ref[k][1]);
    for (size_t i = 0; i < g_in_size / 4; i++) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      g_in[k][i] = (s >> 33) % 20 == 0;
    }
    assert_int_equal(run_one(cpu, k, g_ref[k][0], g_ref[k][1]), 0);
  }
  cudaq_nn_cpu_destroy(cpu);
  pthread_t th[THREADS];
  worker_t w[THREADS];
  memset(w, 0, sizeof w);
  for (int t = 0; t < THREADS; t++)
    assert_int_equal(pthread_create(&th[t], NULL, worker, &w[t]), 0);
  int bad = 0;
  for (int t = 0; t < THREADS; t++) {
    pthread_join(th[t], NULL);
    assert_false(w[t].failed);
    bad += w[t].bad;
  }
  printf("%d threads x %d runs (BLAS kernels %s): %d outputs differ from one thread's\n", THREADS,
         INPUTS * ROUNDS, cudaq_nn_cpu_blas_core(), bad);
  assert_int_equal(bad, 0);
  for (int k = 0; k < INPUTS; k++) {
    free(g_in[k]);
    free(g_ref[k][0]);
    free(g_ref[k][1]);
  }
  cudaq_nn_model_destroy(g_model);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s MODEL.onnx\n", argv[0]);
    return 2;
  }
  g_path = argv[1];
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_concurrent_runs_agree)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
