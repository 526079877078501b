/* libFuzzer target for the ONNX loader and the CPU executor: any byte string
 * either loads (bindings consistent, and, when small enough, runs on zeroed
 * inputs) or is refused with a status and a message; never a crash, leak or
 * out-of-bounds access. Replayed over fuzz/corpus/onnx in ctest. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudaq/nn/nn.h"
#include "nn_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Work the CPU run would do: skip the run for models that are valid but
 * large, so the fuzzer explores the loader instead of waiting. */
static int small_enough(const cudaq_nn_model_t *m) {
  size_t elems = 0;
  double macs = 0;
  for (size_t i = 0; i < m->n_values; i++) elems += m->values[i].n;
  for (size_t i = 0; i < m->n_nodes; i++) {
    const nn_node_t *node = &m->nodes[i];
    const nn_value_t *out = &m->values[node->out[0]];
    double per = 1;
    if (node->op == NN_OP_CONV) {
      const nn_value_t *w = &m->values[node->in[1]];
      per = (double)w->n / (double)(w->dims[0] ? w->dims[0] : 1);
    } else if (node->op == NN_OP_MATMUL || node->op == NN_OP_GEMM) {
      const nn_value_t *a = &m->values[node->in[0]];
      per = (double)(a->rank ? a->dims[a->rank - 1] + a->dims[0] : 1);
    }
    macs += per * (double)out->n;
  }
  return elems <= ((size_t)1 << 20) && macs <= 2e7;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  cudaq_nn_model_t *m = NULL;
  cudaq_nn_error_t err;
  cudaq_nn_status_t st = cudaq_nn_model_load(size ? data : (const uint8_t *)"", size, &m, &err);
  if (st != CUDAQ_NN_OK) {
    if (m != NULL || err.message[0] == '\0') abort(); /* refusals always say why */
    return 0;
  }
  size_t ni = cudaq_nn_model_num_inputs(m), no = cudaq_nn_model_num_outputs(m);
  if (ni == 0 || no == 0) abort();
  if (small_enough(m) && ni <= 8 && no <= 8) {
    void *in[8] = {0}, *out[8] = {0};
    size_t isz[8] = {0}, osz[8] = {0};
    cudaq_nn_binding_t b;
    for (size_t i = 0; i < ni; i++) {
      if (cudaq_nn_model_input(m, i, &b) != CUDAQ_NN_OK || b.size_bytes != b.num_elements * cudaq_nn_dtype_size(b.dtype)) abort();
      in[i] = calloc(1, b.size_bytes + 1);
      isz[i] = b.size_bytes;
    }
    for (size_t i = 0; i < no; i++) {
      if (cudaq_nn_model_output(m, i, &b) != CUDAQ_NN_OK) abort();
      out[i] = calloc(1, b.size_bytes + 1);
      osz[i] = b.size_bytes;
    }
    cudaq_nn_cpu_t *cpu = NULL;
    if (cudaq_nn_cpu_create(m, &cpu) == CUDAQ_NN_OK) {
      if (cudaq_nn_cpu_run(cpu, (const void *const *)in, isz, out, osz, &err) != CUDAQ_NN_OK) abort();
      cudaq_nn_cpu_destroy(cpu);
    }
    for (size_t i = 0; i < 8; i++) {
      free(in[i]);
      free(out[i]);
    }
  }
  cudaq_nn_model_destroy(m);
  return 0;
}
