/* NN engine API: argument checks, bindings (names, types, shapes, sizes,
 * primary/auxiliary order, pinned batch), run-time size checks, I/O errors,
 * every prefix of a model (truncations never crash), plan paths.
 * Usage: test_nn_api REF_DIR (the directory tools/onnx_reference.py wrote). */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cudaq/nn/gpu_engine.h"
#include "cudaq/nn/nn.h"
#include "nn_test_util.h"

static const char *g_dir;

static cudaq_nn_model_t *load(const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.onnx", g_dir, name);
  cudaq_nn_model_t *m = NULL;
  cudaq_nn_error_t err;
  cudaq_nn_status_t st = cudaq_nn_model_load_file(path, &m, &err);
  if (st != CUDAQ_NN_OK) fail_msg("%s: %s", path, err.message);
  return m;
}

static void test_null_args(void **state) {
  (void)state;
  cudaq_nn_model_t *m = NULL;
  cudaq_nn_error_t err;
  uint8_t byte = 0;
  assert_int_equal(cudaq_nn_model_load(NULL, 1, &m, &err), CUDAQ_NN_ERR_INVALID_ARG);
  assert_int_equal(cudaq_nn_model_load(&byte, 1, NULL, &err), CUDAQ_NN_ERR_INVALID_ARG);
  assert_int_equal(cudaq_nn_model_load_file(NULL, &m, NULL), CUDAQ_NN_ERR_INVALID_ARG);
  assert_int_equal(cudaq_nn_cpu_create(NULL, NULL), CUDAQ_NN_ERR_INVALID_ARG);
  assert_int_equal(cudaq_nn_cpu_run(NULL, NULL, NULL, NULL, NULL, NULL), CUDAQ_NN_ERR_INVALID_ARG);
  assert_int_equal(cudaq_nn_model_num_inputs(NULL), 0);
  assert_int_equal(cudaq_nn_model_num_outputs(NULL), 0);
  cudaq_nn_binding_t b;
  assert_int_equal(cudaq_nn_model_input(NULL, 0, &b), CUDAQ_NN_ERR_INVALID_ARG);
  assert_int_equal(cudaq_nn_gpu_options_init(NULL), CUDAQ_NN_ERR_INVALID_ARG);
  cudaq_nn_gpu_options_t o;
  assert_int_equal(cudaq_nn_gpu_options_init(&o), CUDAQ_NN_OK);
  assert_int_equal(o.concurrent, 1); /* one engine at a time: the latency plan */
  assert_int_equal(o.tune_iterations, 20);
  cudaq_nn_model_destroy(NULL);
  cudaq_nn_cpu_destroy(NULL);
  cudaq_nn_gpu_destroy(NULL);
  assert_int_equal(cudaq_nn_gpu_device_bytes(NULL), 0);
  assert_string_equal(cudaq_nn_status_str(CUDAQ_NN_ERR_SHAPE), "shape mismatch");
}

static void test_missing_file(void **state) {
  (void)state;
  cudaq_nn_model_t *m = (cudaq_nn_model_t *)1;
  cudaq_nn_error_t err;
  assert_int_equal(cudaq_nn_model_load_file("/nonexistent/model.onnx", &m, &err), CUDAQ_NN_ERR_IO);
  assert_null(m);
  assert_non_null(strstr(err.message, "/nonexistent/model.onnx"));
}

/* The predecoder-shaped model: int32 input (batch, 4, 5, 5, 5) with the
 * batch pinned to 1; primary output 'residual' (1, 125), auxiliary output
 * 'logical_frame' (1, 1, 2, 5, 5). */
static void test_bindings(void **state) {
  (void)state;
  cudaq_nn_model_t *m = load("predecoder_int32");
  assert_int_equal(cudaq_nn_model_num_inputs(m), 1);
  assert_int_equal(cudaq_nn_model_num_outputs(m), 2);
  cudaq_nn_binding_t b;
  assert_int_equal(cudaq_nn_model_input(m, 0, &b), CUDAQ_NN_OK);
  assert_string_equal(b.name, "x");
  assert_int_equal(b.dtype, CUDAQ_NN_INT32);
  assert_int_equal(b.rank, 5);
  int64_t want_in[5] = {1, 4, 5, 5, 5};
  for (int i = 0; i < 5; i++) assert_int_equal(b.shape[i], want_in[i]);
  assert_int_equal(b.num_elements, 500);
  assert_int_equal(b.size_bytes, 2000);
  assert_true(b.is_input);
  assert_int_equal(cudaq_nn_model_output(m, 0, &b), CUDAQ_NN_OK);
  assert_string_equal(b.name, "residual");
  assert_int_equal(b.rank, 2);
  assert_int_equal(b.shape[1], 125);
  assert_int_equal(b.size_bytes, 500);
  assert_false(b.is_input);
  assert_int_equal(cudaq_nn_model_output(m, 1, &b), CUDAQ_NN_OK);
  assert_string_equal(b.name, "logical_frame");
  assert_int_equal(b.rank, 5);
  assert_int_equal(b.shape[2], 2);
  assert_int_equal(b.size_bytes, 2 * 25 * 4);
  assert_int_equal(cudaq_nn_model_output(m, 2, &b), CUDAQ_NN_ERR_INVALID_ARG);
  assert_int_equal(cudaq_nn_model_input(m, 1, &b), CUDAQ_NN_ERR_INVALID_ARG);
  assert_int_not_equal(cudaq_nn_model_hash(m), 0);
  cudaq_nn_model_destroy(m);
}

/* Buffers of the wrong size are refused naming the binding; a run then
 * still works, and runs are repeatable. */
static void test_run_sizes(void **state) {
  (void)state;
  cudaq_nn_model_t *m = load("predecoder_uint8");
  cudaq_nn_cpu_t *cpu = NULL;
  assert_int_equal(cudaq_nn_cpu_create(m, &cpu), CUDAQ_NN_OK);
  cudaq_nn_binding_t bi, b0, b1;
  cudaq_nn_model_input(m, 0, &bi);
  cudaq_nn_model_output(m, 0, &b0);
  cudaq_nn_model_output(m, 1, &b1);
  uint8_t *in = calloc(1, bi.size_bytes), *o0 = calloc(1, b0.size_bytes), *o1 = calloc(1, b1.size_bytes);
  uint8_t *r0 = calloc(1, b0.size_bytes);
  for (size_t i = 0; i < bi.size_bytes; i++) in[i] = (uint8_t)((i * 7) % 3 == 0);
  const void *ins[1] = {in};
  void *outs[2] = {o0, o1};
  size_t isz[1] = {bi.size_bytes}, osz[2] = {b0.size_bytes, b1.size_bytes};
  cudaq_nn_error_t err;
  isz[0]--;
  assert_int_equal(cudaq_nn_cpu_run(cpu, ins, isz, outs, osz, &err), CUDAQ_NN_ERR_INVALID_ARG);
  assert_non_null(strstr(err.message, "input 0 ('x')"));
  isz[0]++;
  osz[1]++;
  assert_int_equal(cudaq_nn_cpu_run(cpu, ins, isz, outs, osz, &err), CUDAQ_NN_ERR_INVALID_ARG);
  assert_non_null(strstr(err.message, "output 1 ('logical_frame')"));
  osz[1]--;
  assert_int_equal(cudaq_nn_cpu_run(cpu, ins, isz, outs, osz, &err), CUDAQ_NN_OK);
  memcpy(r0, o0, b0.size_bytes);
  memset(o0, 0xAA, b0.size_bytes);
  assert_int_equal(cudaq_nn_cpu_run(cpu, ins, isz, outs, osz, &err), CUDAQ_NN_OK);
  assert_memory_equal(o0, r0, b0.size_bytes);
  for (size_t i = 0; i < b0.size_bytes; i++) assert_true(o0[i] <= 1);
  free(in); free(o0); free(o1); free(r0);
  cudaq_nn_cpu_destroy(cpu);
  cudaq_nn_model_destroy(m);
}

/* Every prefix of a real model either loads (only the whole file here,
 * since the last field is the opset) or is refused with a message. */
static void test_every_prefix(void **state) {
  (void)state;
  char path[1024];
  snprintf(path, sizeof path, "%s/pre_post.onnx", g_dir);
  size_t len = 0;
  uint8_t *buf = nn_test_read_file(path, &len);
  assert_non_null(buf);
  size_t loaded = 0;
  for (size_t n = 0; n <= len; n++) {
    uint8_t *copy = malloc(n ? n : 1); /* exact size, so ASan sees overreads */
    memcpy(copy, buf, n);
    cudaq_nn_model_t *m = NULL;
    cudaq_nn_error_t err;
    cudaq_nn_status_t st = cudaq_nn_model_load(copy, n, &m, &err);
    if (st == CUDAQ_NN_OK) {
      loaded++;
      cudaq_nn_model_destroy(m);
    } else {
      assert_null(m);
      assert_true(strlen(err.message) > 0);
    }
    free(copy);
  }
  assert_true(loaded >= 1);
  free(buf);
}

/* cudaq_nn_cpu_blas_core (cpu_conv.c): OpenBLAS's unknown-CPU fallback, the
 * SSE3 "Prescott" kernels, is replaced where the CPU runs AVX2 + FMA (the
 * d = 5 predecoder: 18 ms a shot on Prescott kernels, 8.5 on SkylakeX here). */
static void test_blas_core(void **state) {
  (void)state;
  const char *core = cudaq_nn_cpu_blas_core();
  assert_non_null(core);
  assert_true(core[0] != '\0');
  assert_string_equal(core, cudaq_nn_cpu_blas_core()); /* chosen once */
  printf("CPU executor BLAS kernels: %s\n", core);
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  const char *keep = getenv("CUDAQ_NN_BLAS_KEEP");
  __builtin_cpu_init();
  if (strcmp(core, "none") != 0 && !getenv("OPENBLAS_CORETYPE") && !(keep && !strcmp(keep, "1")) &&
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    assert_string_not_equal(core, "Prescott");
  /* CUDAQ_NN_BLAS_REPICK=1 (ctest nn_api_blas_repick, with 16 OpenBLAS
   * threads): the re-pick ran whatever OpenBLAS chose, and the process then
   * exits cleanly (the re-initialisation it replaced crashed at exit). */
  const char *repick = getenv("CUDAQ_NN_BLAS_REPICK");
  if (repick && !strcmp(repick, "1") && !getenv("OPENBLAS_CORETYPE") && !(keep && !strcmp(keep, "1"))) {
    const int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                       __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
                       __builtin_cpu_supports("avx512cd");
    if (avx512) assert_string_equal(core, "SkylakeX");
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) assert_string_equal(core, "Haswell");
  }
#endif
}

static void test_plan_path(void **state) {
  (void)state;
  char out[64];
  assert_int_equal(cudaq_nn_plan_path("dir/m.onnx", CUDAQ_NN_FP16, out, sizeof out), CUDAQ_NN_OK);
  assert_string_equal(out, "dir/m.fp16.plan");
  assert_int_equal(cudaq_nn_plan_path("a.b/model", CUDAQ_NN_FP32, out, sizeof out), CUDAQ_NN_OK);
  assert_string_equal(out, "a.b/model.fp32.plan");
  assert_int_equal(cudaq_nn_plan_path("dir/m.onnx", CUDAQ_NN_FP32, out, 8), CUDAQ_NN_ERR_INVALID_ARG);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s REF_DIR\n", argv[0]);
    return 2;
  }
  g_dir = argv[1];
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_null_args),  cmocka_unit_test(test_missing_file),
      cmocka_unit_test(test_bindings),   cmocka_unit_test(test_run_sizes),
      cmocka_unit_test(test_every_prefix), cmocka_unit_test(test_plan_path),
      cmocka_unit_test(test_blas_core),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
