/* The ONNX loader and the CPU executor against onnxruntime: every model that
 * tools/onnx_reference.py wrote (one per operator, int32/uint8/float paths,
 * multi-operator predecoder-shaped models) is loaded and run on the inputs
 * it drew; outputs must match onnxruntime's. Every model it marks as bad must
 * be refused with the given status and an error naming the problem.
 * Usage: test_onnx_reference REF_DIR */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cudaq/nn/nn.h"
#include "nn_test_util.h"

static const char *g_dir;

static int compare(const cudaq_nn_binding_t *b, const void *got, const void *want, double tol,
                   const char *what) {
  int bad = 0;
  for (size_t i = 0; i < b->num_elements && bad < 5; i++) {
    double g, w;
    switch (b->dtype) {
      case CUDAQ_NN_FLOAT: g = ((const float *)got)[i]; w = ((const float *)want)[i]; break;
      case CUDAQ_NN_INT32: g = ((const int32_t *)got)[i]; w = ((const int32_t *)want)[i]; break;
      case CUDAQ_NN_INT64: g = (double)((const int64_t *)got)[i]; w = (double)((const int64_t *)want)[i]; break;
      default: g = ((const uint8_t *)got)[i]; w = ((const uint8_t *)want)[i]; break;
    }
    double lim = b->dtype == CUDAQ_NN_FLOAT ? tol * (1.0 + fabs(w)) : 0.0;
    if (!(fabs(g - w) <= lim)) {
      fprintf(stderr, "%s: output '%s' element %zu: got %.9g, onnxruntime %.9g\n", what, b->name, i, g, w);
      bad++;
    }
  }
  return bad;
}

static int run_case(const char *name, int n_in, int n_out, double tol) {
  char path[1024];
  cudaq_nn_error_t err;
  cudaq_nn_model_t *m = NULL;
  snprintf(path, sizeof path, "%s/%s.onnx", g_dir, name);
  cudaq_nn_status_t st = cudaq_nn_model_load_file(path, &m, &err);
  if (st != CUDAQ_NN_OK) {
    fprintf(stderr, "%s: load failed: %s: %s\n", name, cudaq_nn_status_str(st), err.message);
    return 1;
  }
  int fails = 0;
  if ((int)cudaq_nn_model_num_inputs(m) != n_in || (int)cudaq_nn_model_num_outputs(m) != n_out) {
    fprintf(stderr, "%s: %zu inputs / %zu outputs, expected %d / %d\n", name,
            cudaq_nn_model_num_inputs(m), cudaq_nn_model_num_outputs(m), n_in, n_out);
    cudaq_nn_model_destroy(m);
    return 1;
  }
  void *in[8] = {0}, *out[8] = {0}, *want[8] = {0};
  size_t in_sz[8] = {0}, out_sz[8] = {0};
  cudaq_nn_binding_t b;
  for (int i = 0; i < n_in; i++) {
    cudaq_nn_model_input(m, (size_t)i, &b);
    snprintf(path, sizeof path, "%s/%s.in%d.bin", g_dir, name, i);
    in[i] = nn_test_read_file(path, &in_sz[i]);
    if (!in[i] || in_sz[i] != b.size_bytes) {
      fprintf(stderr, "%s: input %d: file has %zu bytes, binding %zu\n", name, i, in_sz[i], b.size_bytes);
      fails++;
    }
  }
  for (int i = 0; i < n_out; i++) {
    cudaq_nn_model_output(m, (size_t)i, &b);
    snprintf(path, sizeof path, "%s/%s.out%d.bin", g_dir, name, i);
    size_t wsz = 0;
    want[i] = nn_test_read_file(path, &wsz);
    out_sz[i] = b.size_bytes;
    out[i] = calloc(1, b.size_bytes + 1);
    if (!want[i] || wsz != b.size_bytes) {
      fprintf(stderr, "%s: output %d: reference has %zu bytes, binding %zu\n", name, i, wsz, b.size_bytes);
      fails++;
    }
  }
  cudaq_nn_cpu_t *cpu = NULL;
  if (!fails && cudaq_nn_cpu_create(m, &cpu) == CUDAQ_NN_OK) {
    st = cudaq_nn_cpu_run(cpu, (const void *const *)in, in_sz, out, out_sz, &err);
    if (st != CUDAQ_NN_OK) {
      fprintf(stderr, "%s: run failed: %s\n", name, err.message);
      fails++;
    }
    for (int i = 0; i < n_out && !fails; i++) {
      cudaq_nn_model_output(m, (size_t)i, &b);
      fails += compare(&b, out[i], want[i], tol, name) != 0;
    }
  } else if (!fails) {
    fails++;
  }
  cudaq_nn_cpu_destroy(cpu);
  for (int i = 0; i < 8; i++) {
    free(in[i]);
    free(out[i]);
    free(want[i]);
  }
  cudaq_nn_model_destroy(m);
  return fails;
}

static cudaq_nn_status_t status_named(const char *s) {
  if (!strcmp(s, "PARSE")) return CUDAQ_NN_ERR_PARSE;
  if (!strcmp(s, "UNSUPPORTED")) return CUDAQ_NN_ERR_UNSUPPORTED;
  if (!strcmp(s, "SHAPE")) return CUDAQ_NN_ERR_SHAPE;
  if (!strcmp(s, "MODEL")) return CUDAQ_NN_ERR_MODEL;
  return CUDAQ_NN_OK;
}

/* "refuse FILE STATUS PHRASE|PHRASE...": the load must fail with STATUS and
 * the error message must contain every phrase. */
static int refuse_case(char *line) {
  char *file = strtok(line, " "), *status = strtok(NULL, " "), *rest = strtok(NULL, "");
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", g_dir, file);
  cudaq_nn_model_t *m = NULL;
  cudaq_nn_error_t err;
  cudaq_nn_status_t st = cudaq_nn_model_load_file(path, &m, &err);
  cudaq_nn_status_t want = status_named(status);
  int fails = 0;
  if (st != want || m != NULL) {
    fprintf(stderr, "%s: status %s (%s), expected %s\n", file, cudaq_nn_status_str(st), err.message, status);
    fails++;
  }
  if (rest) {
    char *save = NULL;
    for (char *ph = strtok_r(rest, "|", &save); ph; ph = strtok_r(NULL, "|", &save)) {
      if (!strstr(err.message, ph)) {
        fprintf(stderr, "%s: message \"%s\" lacks \"%s\"\n", file, err.message, ph);
        fails++;
      }
    }
  }
  if (!fails) printf("refused %-28s %s: %s\n", file, cudaq_nn_status_str(st), err.message);
  cudaq_nn_model_destroy(m);
  return fails;
}

static void test_reference_cases(void **state) {
  (void)state;
  char path[1024], line[1024];
  snprintf(path, sizeof path, "%s/cases.txt", g_dir);
  FILE *f = fopen(path, "r");
  if (!f) fail_msg("cannot open %s: run the reference fixture (tools/onnx_reference.py gen)", path);
  int runs = 0, refusals = 0, fails = 0;
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    if (!strncmp(line, "run ", 4)) {
      char name[256];
      int ni, no;
      double tol;
      assert_int_equal(sscanf(line + 4, "%255s %d %d %lf", name, &ni, &no, &tol), 4);
      int bad = run_case(name, ni, no, tol);
      if (!bad) printf("ok      %s\n", name);
      fails += bad != 0;
      runs++;
    } else if (!strncmp(line, "refuse ", 7)) {
      fails += refuse_case(line + 7) != 0;
      refusals++;
    }
  }
  fclose(f);
  printf("%d models run, %d refusals checked, %d failed\n", runs, refusals, fails);
  assert_true(runs >= 60);
  assert_true(refusals >= 20);
  assert_int_equal(fails, 0);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s REF_DIR\n", argv[0]);
    return 2;
  }
  g_dir = argv[1];
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_reference_cases)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
