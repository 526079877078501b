/* Shared by test_nn_gpu.c and nn_gpu_kernel_checks.c (the GPU engine's
 * test program): the reference directory, the failure count, one model's
 * inputs and outputs, and the helpers that run an engine against the CPU
 * executor. */
#ifndef CUDAQ_TEST_NN_GPU_CHECKS_H
#define CUDAQ_TEST_NN_GPU_CHECKS_H

#include <stddef.h>

#include "cudaq/nn/gpu_engine.h"
#include "cudaq/nn/nn.h"
#include "nn_test_util.h"

extern const char *g_dir; /* the reference models (tools/onnx_reference.py gen) */
extern int g_fail;

#define CHECK(cond, ...) NN_CHECK(g_fail, cond, __VA_ARGS__)

typedef struct io {
  size_t n_in, n_out;
  void *in[8], *cpu[8], *gpu[8];
  size_t in_sz[8], out_sz[8];
  cudaq_nn_binding_t ob[8];
} io_t;

void io_free(io_t *io);
/* Elements of the GPU outputs off the CPU ones (FP32 or FP16 tolerance). */
size_t compare(const io_t *io, int half, const char *what);
/* Whether CUDAQ_NN_TEST_FILTER (comma-separated substrings) selects name. */
int selected(const char *name);
/* Whether desc (cudaq_nn_gpu_describe) holds tag (a tag ending in a digit: not followed by one). */
int has_tag(const char *desc, const char *tag);
/* An FP16 engine with impl forced: when its description holds tag, runs it
 * reps times against the CPU outputs (counted failures); returns whether the tag was there. */
int run_forced(const cudaq_nn_model_t *m, io_t *io, cudaq_nn_conv_impl_t impl, const char *tag, int reps,
               const char *what);
/* Reference model name with its inputs and CPU outputs; NULL (counted) on failure. */
cudaq_nn_model_t *load_case(const char *name, io_t *io);

/* nn_gpu_pdl_caller.cu: *exec (a cudaGraphExec_t) = one graph captured on
 * stream: a kernel that copies in_bytes from stage into the engine's input 0
 * ~20 us after letting its dependents launch, cudaq_nn_gpu_enqueue, and a
 * kernel launched with PDL that copies output 0 (out_bytes) into copy after
 * griddepcontrol.wait. Non-zero with a sentence in msg on failure. */
int nn_test_capture_between(cudaq_nn_gpu_t *g, void *stream, const void *stage, size_t in_bytes, void *copy,
                            size_t out_bytes, void **exec, char *msg, size_t msg_len);

/* nn_gpu_kernel_checks.c: the engine's own kernels, each forced */
void check_cl_algos(void);
void check_first_fold(void);
void check_stack_splits(void);
void check_cnet(void);

#endif
