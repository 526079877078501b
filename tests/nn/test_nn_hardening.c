/* NN engine hardening (issue 12): models written byte by byte here (no
 * venv needed) that once crashed the loader or were accepted wrongly:
 * messages nested thousands deep, bad protobuf framing. */
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_deep_subgraph_refused),
      cmocka_unit_test(test_deep_type_refused),
      cmocka_unit_test(test_shallow_subgraph_reaches_loader),
      cmocka_unit_test(test_bad_framing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
