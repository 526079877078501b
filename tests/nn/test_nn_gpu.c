/* GPU engine against the CPU executor, on every model tools/onnx_reference.py
 * wrote: FP32 within 1e-5 relative, FP16 within 1e-2 (threshold outputs of
 * the predecoders may flip on at most 2% of the elements in FP16); with the
 * convolution implementation chosen by timing and forced to cuDNN, to the
 * own kernel and to the tensor-core kernel (FP16; forced, it must be the one
 * that runs the stride-1 3D convolutions). Graph capture and replay through the fixed device buffers;
 * engine cache hit, invalidation (other model, stale key, garbage) and
 * rebuild. Issue 12: Relu keeps NaN at every ReLU site, Concat of 9 and 16
 * inputs (models written byte by byte, check_hardening). The engine's own
 * kernels forced one by one are in nn_gpu_kernel_checks.c.
 * Without a CUDA device: prints "skipped: no CUDA device", exit 77.
 * Usage: test_nn_gpu REF_DIR */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cudaq/nn/gpu_engine.h"
#include "cudaq/nn/nn.h"
#include "nn_gpu_checks.h"
#include "nn_gpu_tail_check.h"
#include "nn_pb_build.h"
#include "nn_test_util.h"

const char *g_dir;
int g_fail;

void io_free(io_t *io) {
  for (int i = 0; i < 8; i++) {
    free(io->in[i]);
    free(io->cpu[i]);
    free(io->gpu[i]);
  }
}

/* Inputs from the reference files (or random ones for seed != 0), CPU
 * outputs computed. */
static int io_make(const cudaq_nn_model_t *m, const char *name, unsigned seed, io_t *io) {
  memset(io, 0, sizeof *io);
  io->n_in = cudaq_nn_model_num_inputs(m);
  io->n_out = cudaq_nn_model_num_outputs(m);
  for (size_t i = 0; i < io->n_in; i++) {
    cudaq_nn_binding_t b;
    cudaq_nn_model_input(m, i, &b);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.in%zu.bin", g_dir, name, i);
    size_t len = 0;
    io->in[i] = nn_test_read_file(path, &len);
    if (!io->in[i] || len != b.size_bytes) return -1;
    io->in_sz[i] = len;
    if (seed) { /* perturb: flip some bytes within the value range of the type */
      srand(seed);
      for (size_t k = 0; k < b.num_elements; k++) {
        if (rand() % 3) continue;
        if (b.dtype == CUDAQ_NN_FLOAT) ((float *)io->in[i])[k] = (float)(rand() % 2001 - 1000) / 500.0f;
        else if (b.dtype == CUDAQ_NN_INT32) ((int32_t *)io->in[i])[k] = rand() % 2;
        else if (b.dtype == CUDAQ_NN_UINT8) ((uint8_t *)io->in[i])[k] = (uint8_t)(rand() % 2);
      }
    }
  }
  for (size_t i = 0; i < io->n_out; i++) {
    cudaq_nn_model_output(m, i, &io->ob[i]);
    io->out_sz[i] = io->ob[i].size_bytes;
    io->cpu[i] = calloc(1, io->out_sz[i] + 1);
    io->gpu[i] = calloc(1, io->out_sz[i] + 1);
  }
  cudaq_nn_cpu_t *cpu = NULL;
  cudaq_nn_error_t err;
  if (cudaq_nn_cpu_create(m, &cpu) != CUDAQ_NN_OK) return -1;
  cudaq_nn_status_t st = cudaq_nn_cpu_run(cpu, (const void *const *)io->in, io->in_sz, io->cpu, io->out_sz, &err);
  cudaq_nn_cpu_destroy(cpu);
  return st == CUDAQ_NN_OK ? 0 : -1;
}

/* Compares GPU against CPU outputs; returns the number of bad elements. */
size_t compare(const io_t *io, int half, const char *what) {
  size_t bad_total = 0;
  for (size_t o = 0; o < io->n_out; o++) {
    const cudaq_nn_binding_t *b = &io->ob[o];
    size_t bad = 0;
    double tol = half ? 1e-2 : 1e-5;
    for (size_t i = 0; i < b->num_elements; i++) {
      double g, c;
      switch (b->dtype) {
        case CUDAQ_NN_FLOAT: g = ((float *)io->gpu[o])[i]; c = ((float *)io->cpu[o])[i]; break;
        case CUDAQ_NN_INT32: g = ((int32_t *)io->gpu[o])[i]; c = ((int32_t *)io->cpu[o])[i]; break;
        case CUDAQ_NN_INT64: g = (double)((int64_t *)io->gpu[o])[i]; c = (double)((int64_t *)io->cpu[o])[i]; break;
        default: g = ((uint8_t *)io->gpu[o])[i]; c = ((uint8_t *)io->cpu[o])[i]; break;
      }
      double lim = b->dtype == CUDAQ_NN_FLOAT ? tol * fmax(1.0, fabs(c)) : 0.0;
      if (!(fabs(g - c) <= lim)) {
        if (bad < 3) fprintf(stderr, "  %s: output '%s'[%zu]: gpu %.8g cpu %.8g\n", what, b->name, i, g, c);
        bad++;
      }
    }
    /* FP16 may flip thresholded (integer) outputs whose logit sits near the
     * threshold, or move a float cast to an integer by one: allow that on
     * 2% of the elements (at least one), never a larger difference. */
    if (half && b->dtype != CUDAQ_NN_FLOAT && bad > 0) {
      size_t off_by_one = 0, worse = 0;
      for (size_t i = 0; i < b->num_elements; i++) {
        double g, c;
        switch (b->dtype) {
          case CUDAQ_NN_INT32: g = ((int32_t *)io->gpu[o])[i]; c = ((int32_t *)io->cpu[o])[i]; break;
          case CUDAQ_NN_INT64: g = (double)((int64_t *)io->gpu[o])[i]; c = (double)((int64_t *)io->cpu[o])[i]; break;
          default: g = ((uint8_t *)io->gpu[o])[i]; c = ((uint8_t *)io->cpu[o])[i]; break;
        }
        if (fabs(g - c) > 1.0) worse++;
        else if (g != c) off_by_one++;
      }
      size_t allowed = b->num_elements / 50 > 1 ? b->num_elements / 50 : 1;
      if (worse == 0 && off_by_one <= allowed) {
        if (off_by_one) printf("  %s: output '%s': %zu of %zu elements off by one (FP16 rounding)\n", what,
                               b->name, off_by_one, b->num_elements);
        bad = 0;
      }
    }
    bad_total += bad;
  }
  return bad_total;
}

/* CUDAQ_NN_TEST_FILTER="a,b": only models whose name contains a or b. */
int selected(const char *name) {
  const char *f = getenv("CUDAQ_NN_TEST_FILTER");
  if (!f || !*f) return 1;
  char buf[512];
  snprintf(buf, sizeof buf, "%s", f);
  for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ","))
    if (strstr(name, tok)) return 1;
  return 0;
}

static const char *impl_name(cudaq_nn_conv_impl_t c) {
  return c == CUDAQ_NN_CONV_AUTO ? "auto" : c == CUDAQ_NN_CONV_CUDNN ? "cudnn" : c == CUDAQ_NN_CONV_TC ? "tc"
         : c == CUDAQ_NN_CONV_CL ? "cl" : c == CUDAQ_NN_CONV_STACK ? "stack" : "own";
}

/* CUDAQ_NN_TEST_IMPLS="own,tc,...": only these engine modes in check_model
 * (default: every mode). With CUDAQ_NN_TUNE_NO_CUDNN=1 and a pinned
 * CUDAQ_NN_CL_ALGO this keeps a compute-sanitizer racecheck run to the
 * engine's own kernels (scripts/gpu-run-onnx.sh, SAN_RACE=1). */
static int impl_selected(cudaq_nn_conv_impl_t c) {
  const char *f = getenv("CUDAQ_NN_TEST_IMPLS");
  if (!f || !*f) return 1;
  const char *n = impl_name(c);
  const size_t len = strlen(n);
  for (const char *p = f; (p = strstr(p, n)); p += len)
    if ((p == f || p[-1] == ',') && (p[len] == ',' || p[len] == 0)) return 1;
  return 0;
}

/* Forced CL (FP16): every 3D/2D convolution of the conv* cases runs the
 * channels-last kernel; the conv*_cl_* chains keep values between
 * convolutions NDHWC, except conv3d_cl_mixed, whose only such value is also
 * read by Sigmoid and is a graph output (must stay NCDHW). */
static void check_cl_describe(cudaq_nn_gpu_t *g, const char *name, const char *what) {
  char desc[8192];
  cudaq_nn_gpu_describe(g, desc, sizeof desc);
  /* A CUDAQ_NN_CL_ALGO pinned by the caller (a racecheck run) may not fit
   * every layer: those fall back, so the layout checks do not apply. */
  if (getenv("CUDAQ_NN_CL_ALGO")) return;
  if (!strncmp(name, "conv", 4)) {
    int convs = 0, cl = 0;
    for (const char *p = desc; (p = strstr(p, "conv #")); p++) convs++;
    for (const char *p = desc; (p = strstr(p, "-> cl algo")); p++) cl++;
    CHECK(convs > 0 && cl == convs, "%s: forced CL ran %d of %d convolutions channels-last:\n%s", what, cl, convs, desc);
  }
  if (strstr(name, "_cl_")) {
    const int ndhwc = strstr(desc, "out NDHWC") != NULL && strstr(desc, "in NDHWC") != NULL;
    const int want = strstr(name, "mixed") == NULL;
    CHECK(ndhwc == want, "%s: NDHWC edges %s expected:\n%s", what, want ? "" : "not", desc);
    printf("%s", desc);
  }
}

/* Whether desc contains tag; a tag ending in a number matches only that
 * number ("cl algo 13" is not found in "cl algo 135"). */
int has_tag(const char *desc, const char *tag) {
  const size_t n = strlen(tag);
  const int num = n > 0 && tag[n - 1] >= '0' && tag[n - 1] <= '9';
  for (const char *p = strstr(desc, tag); p; p = strstr(p + 1, tag))
    if (!num || p[n] < '0' || p[n] > '9') return 1;
  return 0;
}

/* An FP16 engine with conv_impl forced (and the test hooks the caller set):
 * 0 when its description lacks tag (the forced choice did not apply), else
 * 1 after reps runs, each compared with the CPU executor (failures counted). */
int run_forced(const cudaq_nn_model_t *m, io_t *io, cudaq_nn_conv_impl_t impl, const char *tag, int reps,
                      const char *what) {
  cudaq_nn_gpu_options_t o;
  cudaq_nn_gpu_options_init(&o);
  o.precision = CUDAQ_NN_FP16;
  o.conv_impl = impl;
  o.tune_iterations = 1;
  cudaq_nn_gpu_t *g = NULL;
  cudaq_nn_error_t err;
  if (cudaq_nn_gpu_create(m, &o, &g, &err) != CUDAQ_NN_OK) {
    CHECK(0, "%s: create: %s", what, err.message);
    return 0;
  }
  /* The engine counts its device memory: at least its input and output buffers. */
  size_t io_bytes = 0;
  for (size_t i = 0; i < io->n_in; i++) io_bytes += io->in_sz[i];
  for (size_t i = 0; i < io->n_out; i++) io_bytes += io->out_sz[i];
  CHECK(cudaq_nn_gpu_device_bytes(g) >= io_bytes, "%s: device bytes %zu below its %zu bytes of inputs and outputs", what,
        cudaq_nn_gpu_device_bytes(g), io_bytes);
  char desc[8192];
  cudaq_nn_gpu_describe(g, desc, sizeof desc);
  const int applies = has_tag(desc, tag);
  for (int rep = 0; applies && rep < reps; rep++) {
    for (size_t i = 0; i < io->n_out; i++) memset(io->gpu[i], 0x5A, io->out_sz[i]);
    cudaq_nn_status_t st = cudaq_nn_gpu_run(g, (const void *const *)io->in, io->in_sz, io->gpu, io->out_sz, &err);
    CHECK(st == CUDAQ_NN_OK, "%s: run %d: %s", what, rep, err.message);
    size_t bad = st == CUDAQ_NN_OK ? compare(io, 1, what) : 1;
    CHECK(bad == 0, "%s: run %d: %zu elements differ from the CPU executor", what, rep, bad);
  }
  cudaq_nn_gpu_destroy(g);
  return applies;
}

/* Loads reference model name with its inputs and CPU outputs; NULL (counted) on failure. */
cudaq_nn_model_t *load_case(const char *name, io_t *io) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.onnx", g_dir, name);
  cudaq_nn_model_t *m = NULL;
  cudaq_nn_error_t err;
  if (cudaq_nn_model_load_file(path, &m, &err) != CUDAQ_NN_OK) {
    CHECK(0, "%s: load: %s", name, err.message);
    return NULL;
  }
  if (io_make(m, name, 0, io) != 0) {
    CHECK(0, "%s: reference inputs", name);
    io_free(io);
    cudaq_nn_model_destroy(m);
    return NULL;
  }
  return m;
}

/* Forced STACK (FP16): every stack found runs (none falls back), and the
 * linear chains of 3x3x3 / 1x1x1 "same" convolutions form one. */
static void check_stack_describe(cudaq_nn_gpu_t *g, const char *name, const char *what) {
  char desc[8192];
  cudaq_nn_gpu_describe(g, desc, sizeof desc);
  int stacks = 0, used = 0;
  for (const char *p = desc; (p = strstr(p, "stack #")); p++) stacks++;
  for (const char *p = desc; (p = strstr(p, "-> used")); p++) used++;
  CHECK(used == stacks, "%s: %d of %d stacks ran:\n%s", what, used, stacks, desc);
  const int want = strstr(name, "_stack_") || strstr(name, "cl_chain") || strstr(name, "cl_batch2") ||
                   !strncmp(name, "predecoder_", 11);
  CHECK(!want || used >= 1, "%s: no stack:\n%s", what, desc);
  if (want) printf("%s", desc);
}

static void check_model(const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.onnx", g_dir, name);
  cudaq_nn_model_t *m = NULL;
  cudaq_nn_error_t err;
  if (cudaq_nn_model_load_file(path, &m, &err) != CUDAQ_NN_OK) {
    CHECK(0, "%s: load: %s", name, err.message);
    return;
  }
  io_t io;
  if (io_make(m, name, 0, &io) != 0) {
    CHECK(0, "%s: reference inputs / CPU run failed", name);
    io_free(&io);
    cudaq_nn_model_destroy(m);
    return;
  }
  /* The convolution fusions after tuning are opt-in: on for the model that checks them. */
  const int conv_fuse = !strcmp(name, "fuse_conv_io") && !getenv("CUDAQ_NN_CONV_FUSE");
  if (conv_fuse) { /* its two kernels: the first-layer fold (gpu_first.cu) would take the copy first */
    setenv("CUDAQ_NN_CONV_FUSE", "1", 1);
    setenv("CUDAQ_NN_NO_FIRST", "1", 1);
  }
  /* The opt-in chain pass (gpu_fuse.cu) stays tested on the model made for
   * it, with the tail pass (which would take the model first) off. */
  const int gemm_chains = !strcmp(name, "fuse_chain_gathers") && !getenv("CUDAQ_NN_GEMM_CHAINS");
  if (gemm_chains) {
    setenv("CUDAQ_NN_GEMM_CHAINS", "1", 1);
    setenv("CUDAQ_NN_NO_TAIL", "1", 1);
  }
  for (int half = 0; half <= 1; half++)
    for (int impl = CUDAQ_NN_CONV_AUTO; impl <= CUDAQ_NN_CONV_STACK; impl++) {
      if (impl != CUDAQ_NN_CONV_AUTO && !strstr(name, "conv") && !strstr(name, "predecoder")) continue;
      if (!impl_selected((cudaq_nn_conv_impl_t)impl)) continue;
      cudaq_nn_gpu_options_t o;
      cudaq_nn_gpu_options_init(&o);
      o.precision = half ? CUDAQ_NN_FP16 : CUDAQ_NN_FP32;
      o.conv_impl = (cudaq_nn_conv_impl_t)impl;
      o.tune_iterations = 3;
      cudaq_nn_gpu_t *g = NULL;
      cudaq_nn_status_t st = cudaq_nn_gpu_create(m, &o, &g, &err);
      char what[300];
      snprintf(what, sizeof what, "%.200s %s %s", name, half ? "fp16" : "fp32", impl_name((cudaq_nn_conv_impl_t)impl));
      if (st == CUDAQ_NN_ERR_UNSUPPORTED && impl != CUDAQ_NN_CONV_AUTO) {
        printf("n/a     %s: %s\n", what, err.message); /* e.g. asymmetric pads: no cuDNN */
        continue;
      }
      if (st != CUDAQ_NN_OK) {
        CHECK(0, "%s: create: %s: %s", what, cudaq_nn_status_str(st), err.message);
        continue;
      }
      for (size_t i = 0; i < io.n_out; i++) memset(io.gpu[i], 0x5A, io.out_sz[i]);
      st = cudaq_nn_gpu_run(g, (const void *const *)io.in, io.in_sz, io.gpu, io.out_sz, &err);
      CHECK(st == CUDAQ_NN_OK, "%s: run: %s", what, err.message);
      size_t bad = st == CUDAQ_NN_OK ? compare(&io, half, what) : 1;
      CHECK(bad == 0, "%s: %zu elements differ from the CPU executor", what, bad);
      if (bad == 0) printf("ok      %s\n", what);
      if (half && impl == CUDAQ_NN_CONV_TC) {
        char desc[4096];
        cudaq_nn_gpu_describe(g, desc, sizeof desc);
        int want_tc = !strncmp(name, "conv3d", 6) && !strstr(name, "stride");
        CHECK(!want_tc || strstr(desc, "-> tc cfg"), "%s: forced TC ran no layer on tensor cores:\n%s", what, desc);
        if (want_tc || strstr(name, "tc_")) printf("%s", desc);
      }
      if (half && impl == CUDAQ_NN_CONV_CL) check_cl_describe(g, name, what);
      if (half && impl == CUDAQ_NN_CONV_STACK) check_stack_describe(g, name, what);
      if (half && impl == CUDAQ_NN_CONV_CL && !strcmp(name, "fuse_conv_io")) {
        /* gpu_fuse.cu after tuning (CUDAQ_NN_CONV_FUSE=1, opt-in,
         * set by check_model for this model): Cast -> Concat
         * read through the first convolution's input map, Greater -> Cast ->
         * Mul as the second's epilogue: two kernels. */
        size_t nodes = 0;
        cudaGraphGetNodes((cudaGraph_t)cudaq_nn_gpu_graph(g), NULL, &nodes);
        const char *cf = getenv("CUDAQ_NN_CONV_FUSE");
        CHECK(!cf || strcmp(cf, "1") || getenv("CUDAQ_NN_NO_FUSE") || nodes == 2, "%s: %zu graph nodes, 2 expected",
              what, nodes);
        printf("graph   %s: %zu graph nodes\n", what, nodes);
      }
      if (!half && impl == CUDAQ_NN_CONV_AUTO && !strncmp(name, "fuse_", 5)) {
        /* gpu_fuse.cu: fuse_ew_chain runs Mul (its output is a graph
         * output), Add..Cast and Greater..Cast as 3 kernels (9 unfused);
         * fuse_copy_chain its 6 copies as 1 (every reader of each is a copy);
         * fuse_gather_matmul its 12 nodes as 2: each MatMul reads its Gather's
         * map, the first runs Cast..Div as its epilogue, the two share one
         * launch (nng_pair_gemms), the Concat converts; fuse_chain_gathers
         * its 15 as 1 (with CUDAQ_NN_GEMM_CHAINS=1, set above: the threshold
         * chain evaluated in both MatMuls' loads, and the pair);
         * fuse_chain_output as 2 (the chain's value is a graph output: it
         * keeps its step). */
        size_t nodes = 0;
        cudaGraphGetNodes((cudaGraph_t)cudaq_nn_gpu_graph(g), NULL, &nodes);
        const size_t want = !strcmp(name, "fuse_ew_chain") ? 3 : !strcmp(name, "fuse_copy_chain") ? 1
                            : !strcmp(name, "fuse_gather_matmul") ? 2 : !strcmp(name, "fuse_chain_gathers") ? 1
                            : !strcmp(name, "fuse_chain_output") ? 2 : nodes;
        CHECK(getenv("CUDAQ_NN_NO_FUSE") || getenv("CUDAQ_NN_NO_GEMM_FUSE") || nodes == want,
              "%s: %zu graph nodes, %zu expected", what, nodes, want);
        printf("graph   %s: %zu graph nodes\n", what, nodes);
      }
      if (impl == CUDAQ_NN_CONV_AUTO && !strncmp(name, "tail_", 5)) {
        /* nng_plan_tails (gpu_fuse.cu): the threshold chain and its products
         * as one kernel, except where an operand is no small integer. */
        char desc[4096];
        size_t nodes = 0;
        cudaq_nn_gpu_describe(g, desc, sizeof desc);
        cudaGraphGetNodes((cudaGraph_t)cudaq_nn_gpu_graph(g), NULL, &nodes);
        const int off = getenv("CUDAQ_NN_NO_FUSE") || getenv("CUDAQ_NN_NO_TAIL");
        /* tail_not_taken: a mask of 0.5; tail_mask_input: the mask is no constant. */
        const int want = !off && strcmp(name, "tail_not_taken") != 0 && strcmp(name, "tail_mask_input") != 0;
        CHECK((strstr(desc, "tail (") != NULL) == want, "%s: tail kernel %s expected:\n%s", what,
              want ? "" : "not", desc);
        /* One kernel, plus in FP16 a conversion per FLOAT graph input and output. */
        size_t expect = 1;
        for (size_t i = 0; half && i < cudaq_nn_model_num_inputs(m); i++) {
          cudaq_nn_binding_t b;
          cudaq_nn_model_input(m, i, &b);
          expect += b.dtype == CUDAQ_NN_FLOAT;
        }
        for (size_t i = 0; half && i < cudaq_nn_model_num_outputs(m); i++) {
          cudaq_nn_binding_t b;
          cudaq_nn_model_output(m, i, &b);
          expect += b.dtype == CUDAQ_NN_FLOAT;
        }
        CHECK(!want || nodes == expect, "%s: %zu graph nodes, %zu expected", what, nodes, expect);
        printf("graph   %s: %zu graph nodes%s\n", what, nodes, strstr(desc, "tail (") ? ", tail kernel" : "");
      }
      cudaq_nn_gpu_destroy(g);
    }
  if (conv_fuse) {
    unsetenv("CUDAQ_NN_CONV_FUSE");
    unsetenv("CUDAQ_NN_NO_FIRST");
  }
  if (gemm_chains) {
    unsetenv("CUDAQ_NN_GEMM_CHAINS");
    unsetenv("CUDAQ_NN_NO_TAIL");
  }
  io_free(&io);
  cudaq_nn_model_destroy(m);
}

/* The graph over fixed buffers: DMA in, launch the graph, DMA out, for
 * several inputs, on a caller stream; each result matches the CPU. child 1:
 * the engine's graph embedded as a child graph node of a caller's graph,
 * with the PDL edges of the engine's kernels inside it. child 2: the
 * engine's kernels recorded into a caller's capture between two kernels of
 * its own (cudaq_nn_gpu_enqueue, as the realtime app does:
 * src/realtime_app/qrt_gpu.cu): input 0 written by the kernel before (late,
 * after it let the engine's first kernel launch), output 0 read by a kernel
 * launched with PDL after; a kernel that read or wrote a tensor before its
 * griddepcontrol.wait would see the previous round's input. */
static void check_graph_replay(const char *name, int half, int child) {
  if (!selected(name)) return;
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.onnx", g_dir, name);
  cudaq_nn_model_t *m = NULL;
  cudaq_nn_error_t err;
  CHECK(cudaq_nn_model_load_file(path, &m, &err) == CUDAQ_NN_OK, "%s: %s", name, err.message);
  if (!m) return;
  cudaq_nn_gpu_options_t o;
  cudaq_nn_gpu_options_init(&o);
  o.precision = half ? CUDAQ_NN_FP16 : CUDAQ_NN_FP32;
  cudaq_nn_gpu_t *g = NULL;
  CHECK(cudaq_nn_gpu_create(m, &o, &g, &err) == CUDAQ_NN_OK, "%s: %s", name, err.message);
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  CHECK(cudaq_nn_gpu_graph_exec(g) != NULL && cudaq_nn_gpu_graph(g) != NULL, "no graph");
  size_t nodes = 0;
  cudaGraphGetNodes((cudaGraph_t)cudaq_nn_gpu_graph(g), NULL, &nodes);
  printf("graph   %s %s%s: %zu graph nodes\n", name, half ? "fp16" : "fp32",
         child == 2 ? " enqueued in a caller's capture" : child ? " as a child graph" : "", nodes);
  cudaGraph_t parent = NULL;
  cudaGraphExec_t pexec = NULL;
  void *stage = NULL, *copy = NULL; /* child 2: input 0 staged, output 0 copied by the caller's kernels */
  const int enq = child == 2;
  if (enq && g) {
    cudaq_nn_binding_t bi, bo;
    cudaq_nn_model_input(m, 0, &bi);
    cudaq_nn_model_output(m, 0, &bo);
    char msg[512] = "";
    void *x = NULL;
    CHECK(cudaMalloc(&stage, bi.size_bytes) == cudaSuccess && cudaMalloc(&copy, bo.size_bytes) == cudaSuccess &&
              nn_test_capture_between(g, s, stage, bi.size_bytes, copy, bo.size_bytes, &x, msg, sizeof msg) == 0,
          "%s: the engine's kernels in a caller's capture: %s", name, msg);
    pexec = (cudaGraphExec_t)x;
    CHECK(cudaq_nn_gpu_enqueue(NULL, s, &err) == CUDAQ_NN_ERR_INVALID_ARG, "enqueue of a NULL engine");
  } else if (child && g) {
    cudaGraphNode_t cn;
    CHECK(cudaGraphCreate(&parent, 0) == cudaSuccess &&
              cudaGraphAddChildGraphNode(&cn, parent, NULL, 0, (cudaGraph_t)cudaq_nn_gpu_graph(g)) == cudaSuccess &&
              cudaGraphInstantiate(&pexec, parent, 0) == cudaSuccess,
          "%s: the engine's graph as a child graph: %s", name, cudaGetErrorString(cudaGetLastError()));
  }
  for (unsigned round = 1; g && (!child || pexec) && round <= 8; round++) {
    io_t io;
    CHECK(io_make(m, name, round * 7919u, &io) == 0, "inputs");
    for (size_t i = 0; i < io.n_in; i++)
      cudaMemcpyAsync(enq && i == 0 ? stage : cudaq_nn_gpu_input(g, i), io.in[i], io.in_sz[i],
                      cudaMemcpyHostToDevice, s);
    if (child) CHECK(cudaGraphLaunch(pexec, s) == cudaSuccess, "launch of the parent graph");
    else CHECK(cudaq_nn_gpu_launch(g, s) == CUDAQ_NN_OK, "launch");
    for (size_t i = 0; i < io.n_out; i++)
      cudaMemcpyAsync(io.gpu[i], enq && i == 0 ? copy : cudaq_nn_gpu_output(g, i), io.out_sz[i],
                      cudaMemcpyDeviceToHost, s);
    CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync");
    char what[300];
    snprintf(what, sizeof what, "%.200s replay %u", name, round);
    size_t bad = compare(&io, half, what);
    CHECK(bad == 0, "%s: %zu elements differ", what, bad);
    io_free(&io);
  }
  CHECK(cudaq_nn_gpu_input(g, 99) == NULL && cudaq_nn_gpu_output(g, 99) == NULL, "bad index");
  if (pexec) cudaGraphExecDestroy(pexec);
  if (parent) cudaGraphDestroy(parent);
  cudaFree(stage);
  cudaFree(copy);
  cudaStreamDestroy(s);
  cudaq_nn_gpu_destroy(g);
  cudaq_nn_model_destroy(m);
}

static cudaq_nn_plan_state_t create_with_plan(cudaq_nn_model_t *m, const char *plan, char *desc, size_t dlen) {
  cudaq_nn_gpu_options_t o;
  cudaq_nn_gpu_options_init(&o);
  o.precision = CUDAQ_NN_FP16;
  o.plan_path = plan;
  o.tune_iterations = 5;
  cudaq_nn_gpu_t *g = NULL;
  cudaq_nn_error_t err;
  cudaq_nn_status_t st = cudaq_nn_gpu_create(m, &o, &g, &err);
  CHECK(st == CUDAQ_NN_OK, "create with plan %s: %s", plan, err.message);
  if (st) return (cudaq_nn_plan_state_t)-1;
  cudaq_nn_plan_state_t ps = cudaq_nn_gpu_plan_state(g);
  if (desc) cudaq_nn_gpu_describe(g, desc, dlen);
  cudaq_nn_gpu_destroy(g);
  return ps;
}

static void check_cache(void) {
  char dir[] = "/tmp/nn_plan_XXXXXX";
  CHECK(mkdtemp(dir) != NULL, "mkdtemp");
  char pa[1100], pb[1100], src[1024];
  cudaq_nn_model_t *a = NULL, *b = NULL;
  cudaq_nn_error_t err;
  snprintf(src, sizeof src, "%s/predecoder_int32.onnx", g_dir);
  cudaq_nn_model_load_file(src, &a, &err);
  snprintf(src, sizeof src, "%s/predecoder_uint8.onnx", g_dir);
  cudaq_nn_model_load_file(src, &b, &err);
  CHECK(a && b, "models");
  if (!a || !b) return;
  snprintf(src, sizeof src, "%s/predecoder_int32.onnx", dir);
  cudaq_nn_plan_path(src, CUDAQ_NN_FP16, pa, sizeof pa);
  snprintf(src, sizeof src, "%s/predecoder_uint8.onnx", dir);
  cudaq_nn_plan_path(src, CUDAQ_NN_FP16, pb, sizeof pb);
  char d1[4096], d2[4096];
  CHECK(create_with_plan(a, pa, d1, sizeof d1) == CUDAQ_NN_PLAN_BUILT, "first create: BUILT");
  CHECK(access(pa, R_OK) == 0, "plan file written next to the model: %s", pa);
  CHECK(create_with_plan(a, pa, d2, sizeof d2) == CUDAQ_NN_PLAN_HIT, "second create: HIT");
  CHECK(strcmp(d1, d2) == 0, "the plan restores the same choices:\n%s---\n%s", d1, d2);
  printf("plan    %s\n%s", pa, d1);
  /* A plan written for another model is detected and rebuilt, never used. */
  size_t len = 0;
  char *text = nn_test_read_file(pa, &len);
  FILE *f = fopen(pb, "wb");
  fwrite(text, 1, len, f);
  fclose(f);
  CHECK(create_with_plan(b, pb, NULL, 0) == CUDAQ_NN_PLAN_REBUILT, "other model's plan: REBUILT");
  CHECK(create_with_plan(b, pb, NULL, 0) == CUDAQ_NN_PLAN_HIT, "after rebuild: HIT");
  /* Another GPU / library version: the key line differs. */
  char *gpu = strstr(text, "\ngpu ");
  if (gpu) gpu[5] = (char)(gpu[5] == 'X' ? 'Y' : 'X');
  char *ver = strstr(text, "cudnn ");
  if (ver) ver[6] = (char)(ver[6] == '1' ? '2' : '1');
  f = fopen(pa, "wb");
  fwrite(text, 1, len, f);
  fclose(f);
  CHECK(create_with_plan(a, pa, NULL, 0) == CUDAQ_NN_PLAN_REBUILT, "other GPU/version: REBUILT");
  /* Garbage and a truncated plan. */
  f = fopen(pa, "wb");
  fputs("garbage\n", f);
  fclose(f);
  CHECK(create_with_plan(a, pa, NULL, 0) == CUDAQ_NN_PLAN_REBUILT, "garbage plan: REBUILT");
  free(text);
  text = nn_test_read_file(pa, &len);
  f = fopen(pa, "wb");
  fwrite(text, 1, len / 2 + 1, f);
  fclose(f);
  CHECK(create_with_plan(a, pa, NULL, 0) == CUDAQ_NN_PLAN_REBUILT, "truncated plan: REBUILT");
  CHECK(create_with_plan(a, pa, NULL, 0) == CUDAQ_NN_PLAN_HIT, "final: HIT");
  free(text);
  remove(pa);
  remove(pb);
  rmdir(dir);
  cudaq_nn_model_destroy(a);
  cudaq_nn_model_destroy(b);
}

/* Bad options, devices and buffer sizes are refused with a message. */
static void check_errors(void) {
  char path[1024];
  snprintf(path, sizeof path, "%s/predecoder_int32.onnx", g_dir);
  cudaq_nn_model_t *m = NULL;
  cudaq_nn_error_t err;
  if (cudaq_nn_model_load_file(path, &m, &err) != CUDAQ_NN_OK) {
    CHECK(0, "%s", err.message);
    return;
  }
  cudaq_nn_gpu_options_t o;
  cudaq_nn_gpu_options_init(&o);
  cudaq_nn_gpu_t *g = NULL;
  o.precision = (cudaq_nn_precision_t)7;
  CHECK(cudaq_nn_gpu_create(m, &o, &g, &err) == CUDAQ_NN_ERR_INVALID_ARG && !g, "bad precision");
  cudaq_nn_gpu_options_init(&o);
  CHECK(o.concurrent == 1, "default concurrent %d", o.concurrent);
  o.concurrent = -1;
  CHECK(cudaq_nn_gpu_create(m, &o, &g, &err) == CUDAQ_NN_ERR_INVALID_ARG && !g &&
            strstr(err.message, "concurrent") != NULL,
        "negative concurrent: %s", err.message);
  cudaq_nn_gpu_options_init(&o);
  o.device = 1000;
  CHECK(cudaq_nn_gpu_create(m, &o, &g, &err) == CUDAQ_NN_ERR_INVALID_ARG && !g, "bad device");
  CHECK(strstr(err.message, "device 1000") != NULL, "message names the device: %s", err.message);
  CHECK(cudaq_nn_gpu_create(NULL, NULL, &g, &err) == CUDAQ_NN_ERR_INVALID_ARG, "NULL model");
  CHECK(cudaq_nn_gpu_create(m, NULL, &g, &err) == CUDAQ_NN_OK, "defaults: %s", err.message);
  if (g) {
    cudaq_nn_binding_t b;
    cudaq_nn_model_input(m, 0, &b);
    char in[4096] = {0}, out[4096];
    const void *ins[1] = {in};
    void *outs[2] = {out, out + 2048};
    size_t isz[1] = {b.size_bytes - 4}, osz[2] = {0, 0};
    CHECK(cudaq_nn_gpu_run(g, ins, isz, outs, osz, &err) == CUDAQ_NN_ERR_INVALID_ARG, "short input");
    CHECK(strstr(err.message, "input 0 ('x')") != NULL, "message names the input: %s", err.message);
    CHECK(cudaq_nn_gpu_launch(NULL, NULL) == CUDAQ_NN_ERR_INVALID_ARG, "NULL engine");
    cudaq_nn_gpu_destroy(g);
  }
  cudaq_nn_model_destroy(m);
}

/* ------------------------------------------------------------------------ */
/* Issue 12 on the GPU                                                       */

static cudaq_nn_model_t *load_pb(pb_t *b, const char *what) {
  cudaq_nn_model_t *m = NULL;
  cudaq_nn_error_t err;
  cudaq_nn_status_t st = cudaq_nn_model_load(b->d, b->n, &m, &err);
  pb_free(b);
  CHECK(st == CUDAQ_NN_OK, "%s: load: %s", what, err.message);
  return m;
}

/* Runs m on the GPU; 1 when run, 0 when this conv_impl does not apply,
 * -1 on failure (counted). */
static int gpu_run(const cudaq_nn_model_t *m, int half, int impl, const void *const *in, const size_t *isz,
                   void *const *out, const size_t *osz, const char *what) {
  cudaq_nn_gpu_options_t o;
  cudaq_nn_gpu_options_init(&o);
  o.precision = half ? CUDAQ_NN_FP16 : CUDAQ_NN_FP32;
  o.conv_impl = (cudaq_nn_conv_impl_t)impl;
  o.tune_iterations = 3;
  cudaq_nn_gpu_t *g = NULL;
  cudaq_nn_error_t err;
  cudaq_nn_status_t st = cudaq_nn_gpu_create(m, &o, &g, &err);
  if (st == CUDAQ_NN_ERR_UNSUPPORTED && impl != CUDAQ_NN_CONV_AUTO) {
    printf("n/a     %s: %s\n", what, err.message);
    return 0;
  }
  CHECK(st == CUDAQ_NN_OK, "%s: create: %s", what, err.message);
  if (st) return -1;
  st = cudaq_nn_gpu_run(g, in, isz, out, osz, &err);
  CHECK(st == CUDAQ_NN_OK, "%s: run: %s", what, err.message);
  cudaq_nn_gpu_destroy(g);
  return st == CUDAQ_NN_OK ? 1 : -1;
}

/* Elementwise Relu: NaN stays NaN (fmaxf(NaN, 0) is 0). */
static void check_relu_nan_gpu(void) {
  const float x[8] = {NAN, -NAN, INFINITY, -INFINITY, -1.0f, 0.0f, 2.5f, -0.0f};
  pb_t b = nb_relu_model(8);
  cudaq_nn_model_t *m = load_pb(&b, "relu");
  if (!m) return;
  for (int half = 0; half <= 1; half++) {
    float y[8];
    const void *in[1] = {x};
    void *out[1] = {y};
    size_t isz[1] = {sizeof x}, osz[1] = {sizeof y};
    char what[64];
    snprintf(what, sizeof what, "relu nan %s", half ? "fp16" : "fp32");
    if (gpu_run(m, half, CUDAQ_NN_CONV_AUTO, in, isz, out, osz, what) != 1) continue;
    int ok = isnan(y[0]) && isnan(y[1]) && isinf(y[2]) && y[2] > 0 && y[3] == 0.0f && y[4] == 0.0f &&
             y[5] == 0.0f && y[6] == 2.5f && y[7] == 0.0f;
    CHECK(ok, "%s: got %g %g %g %g %g %g %g %g", what, y[0], y[1], y[2], y[3], y[4], y[5], y[6], y[7]);
    if (ok) printf("ok      %s\n", what);
  }
  cudaq_nn_model_destroy(m);
}

/* Relu fused into a convolution (own kernels: the 3x3x3 "same" one and the
 * direct one; cuDNN: the bias+ReLU kernel after it), 1D/2D/3D, FP32/FP16.
 * A NaN bias on channel 1 must make that whole channel NaN (channel 0,
 * bias -100, is 0); a NaN input voxel must give NaN wherever the CPU
 * executor has NaN (cuDNN's transform algorithms may spread it further). */
static void check_conv_relu_nan_gpu(void) {
  for (int nsp = 1; nsp <= 3; nsp++)
    for (int nan_in_x = 0; nan_in_x <= 1; nan_in_x++) {
      const float bias[2] = {-100.0f, nan_in_x ? 1.0f : NAN};
      pb_t b = nb_conv_relu_model(nsp, bias);
      cudaq_nn_model_t *m = load_pb(&b, "conv relu");
      if (!m) continue;
      int n = nsp == 3 ? 64 : nsp == 2 ? 16 : 4;
      float x[64], yc[128], yg[128];
      for (int i = 0; i < n; i++) x[i] = 0.25f * (float)(i % 5);
      if (nan_in_x) x[n == 4 ? 1 : n == 16 ? 5 : 21] = NAN;
      const void *in[1] = {x};
      size_t isz[1] = {(size_t)n * sizeof(float)}, osz[1] = {2 * (size_t)n * sizeof(float)};
      cudaq_nn_cpu_t *cpu = NULL;
      cudaq_nn_error_t err;
      void *oc[1] = {yc}, *og[1] = {yg};
      if (cudaq_nn_cpu_create(m, &cpu) != CUDAQ_NN_OK || cudaq_nn_cpu_run(cpu, in, isz, oc, osz, &err) != CUDAQ_NN_OK)
        CHECK(0, "conv relu: CPU run");
      cudaq_nn_cpu_destroy(cpu);
      for (int half = 0; half <= 1; half++)
        for (int impl = CUDAQ_NN_CONV_AUTO; impl <= CUDAQ_NN_CONV_STACK; impl++) {
          char what[128];
          snprintf(what, sizeof what, "conv%dd+relu nan in %s %s %s", nsp, nan_in_x ? "x" : "bias",
                   half ? "fp16" : "fp32", impl_name((cudaq_nn_conv_impl_t)impl));
          memset(yg, 0x5A, sizeof yg);
          if (gpu_run(m, half, impl, in, isz, og, osz, what) != 1) continue;
          int lost = 0, extra = 0, off = 0;
          for (int i = 0; i < 2 * n; i++) {
            if (isnan(yc[i]) && !isnan(yg[i])) lost++;
            else if (!isnan(yc[i]) && isnan(yg[i])) extra++;
            else if (!isnan(yc[i]) && !(fabsf(yg[i] - yc[i]) <= (half ? 1e-2f : 1e-5f) * fmaxf(1.0f, fabsf(yc[i])))) off++;
          }
          if (!nan_in_x)
            for (int i = 0; i < n; i++) lost += !isnan(yg[n + i]), off += yg[i] != 0.0f;
          CHECK(lost == 0 && off == 0 && (extra == 0 || impl != CUDAQ_NN_CONV_OWN),
                "%s: %d NaN lost, %d NaN not on the CPU, %d values off", what, lost, extra, off);
          if (lost == 0 && off == 0) printf("ok      %s%s\n", what, extra ? " (cuDNN spread the NaN further)" : "");
        }
      cudaq_nn_model_destroy(m);
    }
}

/* Concat of 9 and 16 inputs (node inputs were capped at 8), graph inputs
 * and initializers mixed, against values computed here; FP16 holds these
 * integers exactly. */
static void check_concat_gpu(void) {
  static const int cases[][3] = {{9, 1, 0}, {16, 2, 1}, {16, 0, 0}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    int n = cases[c][0], axis = cases[c][1];
    pb_t b = nb_concat_model(n, axis, cases[c][2]);
    cudaq_nn_model_t *m = load_pb(&b, "concat");
    if (!m) continue;
    float *in[16], want[16 * 36], got[16 * 36];
    size_t isz[16];
    size_t ni = nb_concat_inputs(n, axis, in, isz);
    size_t ny = nb_concat_expect(n, axis, want);
    CHECK(cudaq_nn_model_num_inputs(m) == ni, "concat: %zu inputs", cudaq_nn_model_num_inputs(m));
    for (int half = 0; half <= 1; half++) {
      char what[64];
      snprintf(what, sizeof what, "concat of %d axis %d %s", n, axis, half ? "fp16" : "fp32");
      void *out[1] = {got};
      size_t osz[1] = {ny * sizeof(float)};
      memset(got, 0x5A, sizeof got);
      if (gpu_run(m, half, CUDAQ_NN_CONV_AUTO, (const void *const *)in, isz, out, osz, what) != 1) continue;
      size_t bad = 0;
      for (size_t i = 0; i < ny; i++) bad += got[i] != want[i];
      CHECK(bad == 0, "%s: %zu of %zu elements wrong", what, bad, ny);
      if (bad == 0) printf("ok      %s\n", what);
    }
    for (size_t i = 0; i < ni; i++) free(in[i]);
    cudaq_nn_model_destroy(m);
  }
}

/* Runs model m (inputs in[0..n_in), one INT32 output of n elements) on the
 * CPU executor and on FP32 and FP16 GPU engines; every element must agree.
 * x (the float input, for the messages) and bv (an INT32 input) are shown
 * for a differing element. */
static void int_chain_compare(cudaq_nn_model_t *m, const char *name, const void *const *in, const size_t *isz,
                              int n_in, const float *x, const int32_t *bv, int n) {
  (void)n_in;
  int32_t yc[32], yg[32];
  size_t osz[1] = {(size_t)n * sizeof(int32_t)};
  cudaq_nn_cpu_t *cpu = NULL;
  cudaq_nn_error_t err;
  void *oc[1] = {yc}, *og[1] = {yg};
  const int cpu_ok = cudaq_nn_cpu_create(m, &cpu) == CUDAQ_NN_OK &&
                     cudaq_nn_cpu_run(cpu, in, isz, oc, osz, &err) == CUDAQ_NN_OK;
  cudaq_nn_cpu_destroy(cpu);
  CHECK(cpu_ok, "%s: CPU run", name);
  if (!cpu_ok) return;
  for (int half = 0; half <= 1; half++) {
    char what[96];
    snprintf(what, sizeof what, "%s %s", name, half ? "fp16" : "fp32");
    memset(yg, 0x5A, sizeof yg);
    if (gpu_run(m, half, CUDAQ_NN_CONV_AUTO, in, isz, og, osz, what) != 1) continue;
    int bad = 0;
    for (int i = 0; i < n; i++)
      if (yg[i] != yc[i]) {
        CHECK(0, "%s: element %d (x %g, b %d): GPU %d, CPU %d", what, i, x[i], bv[i], yg[i], yc[i]);
        bad++;
      }
    if (!bad) printf("ok      %s\n", what);
  }
}

/* Fused chains of the tails' integer steps (gpu_ew.cuh's short paths)
 * against the CPU executor, FP32 and FP16 (x exact in FP16):
 * y = Div(Sub(Mul(Add(Cast(x), b), b), Cast(x)), b) over divisors 0 and -1,
 * INT32 extremes (the sums and products wrap) and negative quotients
 * (truncation); and y = Div(Add(Cast(x), b), c), whose sum reaches
 * INT32_MIN and is divided by -1 (the one overflowing quotient, which wraps
 * to INT32_MIN), by 0, and by divisors of both signs. */
static void check_int32_chain_gpu(void) {
  enum { N = 12 };
  const int64_t n = N;
  const float x[N] = {0.0f, -3.5f, 2.5f, 7.0f, -1000.0f, 2047.0f, -2048.0f, 1.0f, -1.0f, 100.25f, -0.5f, 12.0f};
  const int32_t bv[N] = {0, -1, 1, 2, -2, INT32_MAX, INT32_MIN, -1, 0, 3, -7, INT32_MIN + 1};
  const int32_t cv[N] = {-1, 0, 3, -3, 7, -1, 2, -2, 1, -1, 5, -1};
  {
    const char *cin[1] = {"x"}, *ain[2] = {"xi", "b"}, *min_[2] = {"s", "b"}, *sin_[2] = {"p", "xi"},
               *din[2] = {"d", "b"};
    pb_t g = {0}, cast = nb_node("Cast", cin, 1, "xi"), add = nb_node("Add", ain, 2, "s"),
         mul = nb_node("Mul", min_, 2, "p"), sub = nb_node("Sub", sin_, 2, "d"), div = nb_node("Div", din, 2, "y");
    nb_attr_int(&cast, "to", 6 /* INT32 */);
    pb_t vx = nb_value_info("x", 1, 1, &n), vb = nb_value_info("b", 6, 1, &n), vy = nb_value_info("y", 6, 1, &n);
    pb_msg(&g, 1, &cast);
    pb_msg(&g, 1, &add);
    pb_msg(&g, 1, &mul);
    pb_msg(&g, 1, &sub);
    pb_msg(&g, 1, &div);
    pb_msg(&g, 11, &vx);
    pb_msg(&g, 11, &vb);
    pb_msg(&g, 12, &vy);
    pb_t b = nb_model(&g, 17);
    cudaq_nn_model_t *m = load_pb(&b, "int32 chain");
    if (m) {
      const void *in[2] = {x, bv};
      size_t isz[2] = {sizeof x, sizeof bv};
      int_chain_compare(m, "int32 chain", in, isz, 2, x, bv, N);
      cudaq_nn_model_destroy(m);
    }
  }
  {
    /* x = -1 and b = INT32_MIN + 1 (element 11) give INT32_MIN, c = -1. */
    const char *cin[1] = {"x"}, *ain[2] = {"xi", "b"}, *din[2] = {"s", "c"};
    pb_t g = {0}, cast = nb_node("Cast", cin, 1, "xi"), add = nb_node("Add", ain, 2, "s"),
         div = nb_node("Div", din, 2, "y");
    nb_attr_int(&cast, "to", 6 /* INT32 */);
    pb_t vx = nb_value_info("x", 1, 1, &n), vb = nb_value_info("b", 6, 1, &n), vc = nb_value_info("c", 6, 1, &n),
         vy = nb_value_info("y", 6, 1, &n);
    pb_msg(&g, 1, &cast);
    pb_msg(&g, 1, &add);
    pb_msg(&g, 1, &div);
    pb_msg(&g, 11, &vx);
    pb_msg(&g, 11, &vb);
    pb_msg(&g, 11, &vc);
    pb_msg(&g, 12, &vy);
    pb_t b = nb_model(&g, 17);
    cudaq_nn_model_t *m = load_pb(&b, "int32 min div");
    if (m) {
      float x2[N];
      for (int i = 0; i < N; i++) x2[i] = i == 11 ? -1.0f : x[i];
      const void *in[3] = {x2, bv, cv};
      size_t isz[3] = {sizeof x2, sizeof bv, sizeof cv};
      int_chain_compare(m, "int32 min div", in, isz, 3, x2, bv, N);
      cudaq_nn_model_destroy(m);
    }
  }
}

static void check_hardening(void) {
  check_int32_chain_gpu();
  check_relu_nan_gpu();
  check_conv_relu_nan_gpu();
  check_concat_gpu();
}

int main(int argc, char **argv) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    printf("skipped: no CUDA device\n");
    return 77;
  }
  if (argc >= 4 && !strcmp(argv[1], "--shipped-tail")) return nn_gpu_tail_check(argv[2], argc - 3, argv + 3);
  if (argc < 2) {
    fprintf(stderr, "usage: %s REF_DIR | --shipped-tail MODELS_DIR MODEL.onnx...\n", argv[0]);
    return 2;
  }
  g_dir = argv[1];
  char path[1024], line[1024];
  snprintf(path, sizeof path, "%s/cases.txt", g_dir);
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "cannot open %s (run tools/onnx_reference.py gen --out %s)\n", path, g_dir);
    return 1;
  }
  int models = 0;
  while (fgets(line, sizeof line, f)) {
    char name[256];
    if (sscanf(line, "run %255s", name) == 1 && selected(name)) {
      check_model(name);
      models++;
    }
  }
  fclose(f);
  CHECK(models >= 60 || getenv("CUDAQ_NN_TEST_FILTER"), "only %d models", models);
  /* CUDAQ_NN_TEST_MODELS_ONLY=1: the corpus models only (a compute-sanitizer
   * racecheck run on a few of them finishes in minutes). */
  if (getenv("CUDAQ_NN_TEST_MODELS_ONLY")) {
    printf("%s: %d models, %d failures (models only)\n", g_fail ? "FAILED" : "PASSED", models, g_fail);
    return g_fail ? 1 : 0;
  }
  check_hardening();
  check_cl_algos();
  check_first_fold();
  check_stack_splits();
  check_cnet();
  check_graph_replay("predecoder_int32", 0, 0);
  check_graph_replay("predecoder_int32", 1, 0);
  check_graph_replay("predecoder_uint8", 1, 0);
  check_graph_replay("mlp_head", 0, 0);
  check_graph_replay("pre_post", 0, 0);
  check_graph_replay("predecoder_int32", 1, 1);
  check_graph_replay("fuse_copy_chain", 0, 1);
  check_graph_replay("predecoder_int32", 1, 2);
  check_graph_replay("predecoder_int32", 0, 2);
  check_graph_replay("fuse_copy_chain", 1, 2);
  check_cache();
  check_errors();
  printf("%s: %d models, %d failures\n", g_fail ? "FAILED" : "PASSED", models, g_fail);
  return g_fail ? 1 : 0;
}
