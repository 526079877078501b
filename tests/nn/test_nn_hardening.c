/* NN engine hardening (issue 12): models written byte by byte here (no
 * venv needed) that once crashed the loader or were accepted wrongly:
 * messages nested thousands deep, bad protobuf framing, graph inputs
 * declared unlike the initializer they name, negative dimensions, Relu of
 * NaN, Concat of more than 8 inputs. The GPU side of the last two is in
 * test_nn_gpu.c (check_hardening). */
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
#include "nn_pb_build.h"

#define NN_TEST_MAX_CONCAT 256

/* Loads b (freeing it) and expects status want with every needle in the
 * message; returns the model when want is CUDAQ_NN_OK. */
static cudaq_nn_model_t *load_expect(pb_t *b, cudaq_nn_status_t want, const char *n1, const char *n2) {
  cudaq_nn_model_t *m = (cudaq_nn_model_t *)1;
  cudaq_nn_error_t err;
  cudaq_nn_status_t st = cudaq_nn_model_load(b->d ? (const void *)b->d : "", b->n, &m, &err);
  pb_free(b);
  if (st != want) fail_msg("status %s, want %s (%s)", cudaq_nn_status_str(st), cudaq_nn_status_str(want), err.message);
  if (n1 && !strstr(err.message, n1)) fail_msg("message lacks '%s': %s", n1, err.message);
  if (n2 && !strstr(err.message, n2)) fail_msg("message lacks '%s': %s", n2, err.message);
  if (want != CUDAQ_NN_OK) {
    assert_null(m);
    return NULL;
  }
  assert_non_null(m);
  return m;
}

/* ------------------------------------------------------------------------ */
/* Nesting (protobuf-c recurses without limit)                               */

/* ModelProto whose graph's node has a GRAPH attribute whose graph's node has
 * another, depth levels deep (the ~50 KB file of issue 12 at 3000). With
 * an input, the outer graph is otherwise loadable up to the If node. */
static pb_t deep_subgraph_model(int depth, int with_input) {
  pb_t g = {0};
  for (int i = 0; i < depth; i++) {
    pb_t attr = {0}, node = {0}, outer = {0};
    pb_str(&attr, 1, "then_branch");
    pb_int(&attr, 20, 5); /* AttributeProto.type = GRAPH */
    pb_msg(&attr, 6, &g);
    pb_str(&node, 2, "y");
    pb_str(&node, 4, "If");
    pb_msg(&node, 5, &attr);
    pb_msg(&outer, 1, &node);
    g = outer;
  }
  if (with_input) {
    int64_t one = 1;
    pb_t vi = nb_value_info("x", CUDAQ_NN_FLOAT, 1, &one);
    pb_msg(&g, 11, &vi);
  }
  return nb_model(&g, 17);
}

static void test_deep_subgraph_refused(void **state) {
  (void)state;
  pb_t b = deep_subgraph_model(3000, 0);
  assert_true(b.n > 40000);
  load_expect(&b, CUDAQ_NN_ERR_UNSUPPORTED, "more than 64 levels deep", "GraphProto");
}

/* TypeProto.sequence_type > Sequence.elem_type > TypeProto ... as the type
 * of a graph input: the other self-nesting path of onnx.proto. */
static void test_deep_type_refused(void **state) {
  (void)state;
  pb_t t = {0};
  for (int i = 0; i < 5000; i++) {
    pb_t seq = {0}, outer = {0};
    pb_msg(&seq, 1, &t);
    pb_msg(&outer, 4, &seq);
    t = outer;
  }
  pb_t vi = {0}, g = {0};
  pb_str(&vi, 1, "x");
  pb_msg(&vi, 2, &t);
  pb_msg(&g, 11, &vi);
  pb_t b = nb_model(&g, 17);
  load_expect(&b, CUDAQ_NN_ERR_UNSUPPORTED, "more than 64 levels deep", "TypeProto");
}

/* A few levels pass the scan and reach the loader's own refusal. */
static void test_shallow_subgraph_reaches_loader(void **state) {
  (void)state;
  pb_t b = deep_subgraph_model(3, 1);
  load_expect(&b, CUDAQ_NN_ERR_UNSUPPORTED, "operator 'If' not supported", NULL);
  b = deep_subgraph_model(20, 1);
  load_expect(&b, CUDAQ_NN_ERR_UNSUPPORTED, "operator 'If' not supported", NULL);
}

/* Framing protobuf forbids is refused before protobuf-c sees it. */
static void test_bad_framing(void **state) {
  (void)state;
  static const uint8_t group[] = {0x3b, 0x3c};          /* field 7 start group, end group */
  static const uint8_t zero_field[] = {0x02, 0x00};     /* field 0 */
  static const uint8_t long_len[] = {0x3a, 0x05, 0x0a}; /* graph: 5 bytes announced, 1 there */
  static const uint8_t inner_len[] = {0x3a, 0x02, 0x0a, 0x05}; /* node overruns the graph */
  static const uint8_t long_varint[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
  static const uint8_t fixed64[] = {0x09, 1, 2, 3};    /* field 1, 64-bit, 3 bytes */
  const struct { const uint8_t *p; size_t n; } cases[] = {
      {group, sizeof group},     {zero_field, sizeof zero_field}, {long_len, sizeof long_len},
      {inner_len, sizeof inner_len}, {long_varint, sizeof long_varint}, {fixed64, sizeof fixed64},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    pb_t b = {0};
    pb_put(&b, cases[i].p, cases[i].n);
    load_expect(&b, CUDAQ_NN_ERR_PARSE, "does not parse", "truncated");
  }
}

/* ------------------------------------------------------------------------ */
/* Graph inputs that name an initializer                                     */

/* y = Conv(x, w): x [1,3,4,4,4] a graph input, w [5,3,1,1,1] an initializer
 * (w[m][c] = m + 1) that the graph also lists as an input declared with
 * (elem, rank, dims); rank NB_NO_SHAPE declares no shape. */
static pb_t conv_declared_w(int elem, int rank, const int64_t *dims) {
  static const int64_t xd[5] = {1, 3, 4, 4, 4}, wd[5] = {5, 3, 1, 1, 1}, yd[5] = {1, 5, 4, 4, 4};
  float w[15];
  for (int i = 0; i < 15; i++) w[i] = (float)(i / 3 + 1);
  const char *in[2] = {"x", "w"};
  pb_t g = {0}, node = nb_node("Conv", in, 2, "y");
  pb_t init = nb_tensor("w", CUDAQ_NN_FLOAT, 5, wd, w, sizeof w);
  pb_t vx = nb_value_info("x", CUDAQ_NN_FLOAT, 5, xd), vw = nb_value_info("w", elem, rank, dims);
  pb_t vy = nb_value_info("y", CUDAQ_NN_FLOAT, 5, yd);
  pb_msg(&g, 1, &node);
  pb_msg(&g, 5, &init);
  pb_msg(&g, 11, &vx);
  pb_msg(&g, 11, &vw);
  pb_msg(&g, 12, &vy);
  return nb_model(&g, 17);
}

/* The case of issue 12: a [5,3,3,3,3] declaration over a [5,3,1,1,1]
 * initializer ran as a 1x1x1 convolution; onnxruntime refuses it. */
static void test_initializer_input_shape_mismatch(void **state) {
  (void)state;
  static const int64_t d3[5] = {5, 3, 3, 3, 3}, d4[4] = {5, 3, 1, 1};
  pb_t b = conv_declared_w(CUDAQ_NN_FLOAT, 5, d3);
  load_expect(&b, CUDAQ_NN_ERR_SHAPE, "graph input 'w'",
              "declared float [5,3,3,3,3] but its initializer is float [5,3,1,1,1]");
  b = conv_declared_w(CUDAQ_NN_FLOAT, 4, d4);
  load_expect(&b, CUDAQ_NN_ERR_SHAPE, "graph input 'w'", "declared float [5,3,1,1] but");
}

static void test_initializer_input_type_mismatch(void **state) {
  (void)state;
  static const int64_t d[5] = {5, 3, 1, 1, 1};
  pb_t b = conv_declared_w(CUDAQ_NN_INT64, 5, d);
  load_expect(&b, CUDAQ_NN_ERR_SHAPE, "graph input 'w'",
              "declared int64 [5,3,1,1,1] but its initializer is float [5,3,1,1,1]");
  b = conv_declared_w(11 /* double */, 5, d);
  load_expect(&b, CUDAQ_NN_ERR_SHAPE, "graph input 'w'", "declared element type 11 [5,3,1,1,1]");
}

/* Declarations that agree (symbolic dimensions and a missing shape agree
 * with anything) load; w stays a constant, not a caller-bound input, and
 * the convolution is the 1x1x1 one the initializer holds. */
static void test_initializer_input_matching(void **state) {
  (void)state;
  static const int64_t same[5] = {5, 3, 1, 1, 1}, sym[5] = {NB_SYMBOLIC, 3, 1, NB_SYMBOLIC, 1};
  for (int c = 0; c < 3; c++) {
    pb_t b = c == 0 ? conv_declared_w(CUDAQ_NN_FLOAT, 5, same)
           : c == 1 ? conv_declared_w(CUDAQ_NN_FLOAT, 5, sym)
                    : conv_declared_w(CUDAQ_NN_FLOAT, NB_NO_SHAPE, NULL);
    cudaq_nn_model_t *m = load_expect(&b, CUDAQ_NN_OK, NULL, NULL);
    assert_int_equal(cudaq_nn_model_num_inputs(m), 1);
    cudaq_nn_cpu_t *cpu = NULL;
    assert_int_equal(cudaq_nn_cpu_create(m, &cpu), CUDAQ_NN_OK);
    float x[192], y[320];
    for (int i = 0; i < 192; i++) x[i] = 1.0f;
    const void *ins[1] = {x};
    void *outs[1] = {y};
    size_t isz[1] = {sizeof x}, osz[1] = {sizeof y};
    cudaq_nn_error_t err;
    assert_int_equal(cudaq_nn_cpu_run(cpu, ins, isz, outs, osz, &err), CUDAQ_NN_OK);
    for (int i = 0; i < 320; i++) assert_float_equal(y[i], 3.0f * (float)(i / 64 + 1), 0.0f);
    cudaq_nn_cpu_destroy(cpu);
    cudaq_nn_model_destroy(m);
  }
}

/* ------------------------------------------------------------------------ */
/* Negative dimensions                                                       */

/* y = op(x) with x and y declared as given. */
static pb_t unary_model(const char *op, int rx, const int64_t *xd, int ry, const int64_t *yd) {
  const char *in[1] = {"x"};
  pb_t g = {0}, node = nb_node(op, in, 1, "y");
  pb_t vx = nb_value_info("x", CUDAQ_NN_FLOAT, rx, xd), vy = nb_value_info("y", CUDAQ_NN_FLOAT, ry, yd);
  pb_msg(&g, 1, &node);
  pb_msg(&g, 11, &vx);
  pb_msg(&g, 12, &vy);
  return nb_model(&g, 17);
}

/* Once reported as "a symbolic dimension", and at position 0 silently
 * taken as batch 1. */
static void test_negative_dims(void **state) {
  (void)state;
  static const int64_t neg0[2] = {-1, 3}, neg1[2] = {2, -5}, ok[2] = {2, 3}, negy[2] = {2, -2};
  pb_t b = unary_model("Relu", 2, neg0, 2, ok);
  load_expect(&b, CUDAQ_NN_ERR_SHAPE, "graph input 'x'", "dimension 0 as -1 (negative)");
  b = unary_model("Relu", 2, neg1, 2, ok);
  load_expect(&b, CUDAQ_NN_ERR_SHAPE, "graph input 'x'", "dimension 1 as -5 (negative)");
  b = unary_model("Relu", 2, ok, 2, negy);
  load_expect(&b, CUDAQ_NN_ERR_SHAPE, "graph output 'y'", "dimension 1 as -2 (negative)");
  /* An initializer's own dims. */
  static const int64_t wd[2] = {-2, 3};
  float w[6] = {0};
  const char *in[2] = {"x", "w"};
  pb_t g = {0}, node = nb_node("Add", in, 2, "y"), init = nb_tensor("w", CUDAQ_NN_FLOAT, 2, wd, w, sizeof w);
  pb_t vx = nb_value_info("x", CUDAQ_NN_FLOAT, 2, ok), vy = nb_value_info("y", CUDAQ_NN_FLOAT, 2, ok);
  pb_msg(&g, 1, &node);
  pb_msg(&g, 5, &init);
  pb_msg(&g, 11, &vx);
  pb_msg(&g, 12, &vy);
  b = nb_model(&g, 17);
  load_expect(&b, CUDAQ_NN_ERR_SHAPE, "tensor 'w'", "dimension 0 = -2 (negative)");
  /* A symbolic batch is still pinned to 1; a symbolic dimension 1 is still refused. */
  static const int64_t sym0[2] = {NB_SYMBOLIC, 3}, one[2] = {1, 3}, sym1[2] = {2, NB_SYMBOLIC};
  b = unary_model("Relu", 2, sym0, 2, one);
  cudaq_nn_model_t *m = load_expect(&b, CUDAQ_NN_OK, NULL, NULL);
  cudaq_nn_binding_t bx;
  assert_int_equal(cudaq_nn_model_input(m, 0, &bx), CUDAQ_NN_OK);
  assert_int_equal(bx.shape[0], 1);
  cudaq_nn_model_destroy(m);
  b = unary_model("Relu", 2, sym1, 2, ok);
  load_expect(&b, CUDAQ_NN_ERR_UNSUPPORTED, "graph input 'x'", "symbolic dimension 1");
}

/* ------------------------------------------------------------------------ */
/* Relu keeps NaN (onnxruntime and PyTorch do)                               */

/* Runs a one-input, one-output float model on the CPU. */
static void run_cpu(cudaq_nn_model_t *m, const float *x, size_t nx, float *y, size_t ny) {
  cudaq_nn_cpu_t *cpu = NULL;
  assert_int_equal(cudaq_nn_cpu_create(m, &cpu), CUDAQ_NN_OK);
  const void *ins[1] = {x};
  void *outs[1] = {y};
  size_t isz[1] = {nx * sizeof(float)}, osz[1] = {ny * sizeof(float)};
  cudaq_nn_error_t err;
  assert_int_equal(cudaq_nn_cpu_run(cpu, ins, isz, outs, osz, &err), CUDAQ_NN_OK);
  cudaq_nn_cpu_destroy(cpu);
}

static void test_relu_nan(void **state) {
  (void)state;
  const float x[8] = {NAN, -NAN, INFINITY, -INFINITY, -1.0f, 0.0f, 2.5f, -0.0f};
  float y[8];
  pb_t b = nb_relu_model(8);
  cudaq_nn_model_t *m = load_expect(&b, CUDAQ_NN_OK, NULL, NULL);
  run_cpu(m, x, 8, y, 8);
  assert_true(isnan(y[0]) && isnan(y[1]));
  assert_true(isinf(y[2]) && y[2] > 0);
  for (int i = 3; i < 6; i++) assert_true(y[i] == 0.0f);
  assert_true(y[6] == 2.5f && y[7] == 0.0f);
  cudaq_nn_model_destroy(m);
}

/* Relu after a convolution with bias: a NaN input voxel makes the outputs
 * whose 3x3x3 window covers it NaN, in both channels; elsewhere channel 0
 * (bias -100) is 0 and channel 1 (bias 1) positive. 1D and 2D as well. */
static void test_conv_relu_nan(void **state) {
  (void)state;
  const float bias[2] = {-100.0f, 1.0f};
  for (int nsp = 1; nsp <= 3; nsp++) {
    pb_t b = nb_conv_relu_model(nsp, bias);
    cudaq_nn_model_t *m = load_expect(&b, CUDAQ_NN_OK, NULL, NULL);
    int n = nsp == 3 ? 64 : nsp == 2 ? 16 : 4;
    float x[64], y[128];
    for (int i = 0; i < n; i++) x[i] = 0.25f * (float)(i % 5);
    x[n == 4 ? 1 : n == 16 ? 5 : 21] = NAN; /* position 1 in each dimension */
    run_cpu(m, x, (size_t)n, y, 2 * (size_t)n);
    for (int c = 0; c < 2; c++)
      for (int p = 0; p < n; p++) {
        int near = 1;
        for (int d = 0, q = p; d < nsp; d++, q /= 4) near &= q % 4 <= 2; /* |index - 1| <= 1 */
        float v = y[c * n + p];
        if (near) assert_true(isnan(v));
        else if (c == 0) assert_true(v == 0.0f);
        else assert_true(v > 0.0f);
      }
    cudaq_nn_model_destroy(m);
  }
}

/* A Relu folded at load (constant input) keeps NaN too. */
static void test_relu_nan_folded(void **state) {
  (void)state;
  const float c[2] = {NAN, -1.0f};
  int64_t two = 2;
  const char *rin[1] = {"c"}, *ain[2] = {"x", "r"};
  pb_t g = {0}, relu = nb_node("Relu", rin, 1, "r"), add = nb_node("Add", ain, 2, "y");
  pb_t tc = nb_tensor("c", CUDAQ_NN_FLOAT, 1, &two, c, sizeof c);
  pb_t vx = nb_value_info("x", CUDAQ_NN_FLOAT, 1, &two), vy = nb_value_info("y", CUDAQ_NN_FLOAT, 1, &two);
  pb_msg(&g, 1, &relu);
  pb_msg(&g, 1, &add);
  pb_msg(&g, 5, &tc);
  pb_msg(&g, 11, &vx);
  pb_msg(&g, 12, &vy);
  pb_t b = nb_model(&g, 17);
  cudaq_nn_model_t *m = load_expect(&b, CUDAQ_NN_OK, NULL, NULL);
  const float x[2] = {1.0f, 2.0f};
  float y[2];
  run_cpu(m, x, 2, y, 2);
  assert_true(isnan(y[0]));
  assert_true(y[1] == 2.0f);
  cudaq_nn_model_destroy(m);
}

/* ------------------------------------------------------------------------ */
/* Concat of more than 8 inputs (node I/O was capped at 8)                   */

static void check_concat(int n, int axis, int negative_axis) {
  pb_t b = nb_concat_model(n, axis, negative_axis);
  cudaq_nn_model_t *m = load_expect(&b, CUDAQ_NN_OK, NULL, NULL);
  float *in[NN_TEST_MAX_CONCAT];
  size_t isz[NN_TEST_MAX_CONCAT];
  size_t ni = nb_concat_inputs(n, axis, in, isz);
  assert_int_equal(cudaq_nn_model_num_inputs(m), ni);
  float want[NN_TEST_MAX_CONCAT * 36], got[NN_TEST_MAX_CONCAT * 36];
  size_t ny = nb_concat_expect(n, axis, want);
  cudaq_nn_binding_t by;
  assert_int_equal(cudaq_nn_model_output(m, 0, &by), CUDAQ_NN_OK);
  assert_int_equal(by.num_elements, ny);
  cudaq_nn_cpu_t *cpu = NULL;
  assert_int_equal(cudaq_nn_cpu_create(m, &cpu), CUDAQ_NN_OK);
  void *outs[1] = {got};
  size_t osz[1] = {ny * sizeof(float)};
  cudaq_nn_error_t err;
  assert_int_equal(cudaq_nn_cpu_run(cpu, (const void *const *)in, isz, outs, osz, &err), CUDAQ_NN_OK);
  for (size_t i = 0; i < ny; i++)
    if (got[i] != want[i]) fail_msg("Concat of %d, axis %d: y[%zu] = %g, want %g", n, axis, i, got[i], want[i]);
  cudaq_nn_cpu_destroy(cpu);
  for (size_t i = 0; i < ni; i++) free(in[i]);
  cudaq_nn_model_destroy(m);
}

static void test_concat_many(void **state) {
  (void)state;
  check_concat(9, 1, 0);
  check_concat(16, 2, 1);
  check_concat(16, 0, 0);
  check_concat(256, 1, 0);
}

static void test_concat_too_many(void **state) {
  (void)state;
  pb_t b = nb_concat_model(257, 1, 0);
  load_expect(&b, CUDAQ_NN_ERR_UNSUPPORTED, "(Concat)", "257 inputs (Concat of at most 256 supported)");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_deep_subgraph_refused),
      cmocka_unit_test(test_deep_type_refused),
      cmocka_unit_test(test_shallow_subgraph_reaches_loader),
      cmocka_unit_test(test_bad_framing),
      cmocka_unit_test(test_initializer_input_shape_mismatch),
      cmocka_unit_test(test_initializer_input_type_mismatch),
      cmocka_unit_test(test_initializer_input_matching),
      cmocka_unit_test(test_negative_dims),
      cmocka_unit_test(test_relu_nan),
      cmocka_unit_test(test_conv_relu_nan),
      cmocka_unit_test(test_relu_nan_folded),
      cmocka_unit_test(test_concat_many),
      cmocka_unit_test(test_concat_too_many),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
