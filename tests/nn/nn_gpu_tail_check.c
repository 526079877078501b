/* The shipped predecoders (models/, contract in models/README.md) on the GPU
 * engine with the tail kernel (src/nn/gpu_tail.cu, issue 12).
 *
 * For each model and precision:
 * - the engine takes the model's tail (Greater -> Cast -> Mul, the two
 *   Gather -> MatMul products and their mod-2 epilogues) as one kernel
 *   (describe names it) and has one graph node fewer than with the tail
 *   pass off (CUDAQ_NN_NO_TAIL=1);
 * - with the same convolution algorithms (the first engine's plan read by
 *   the second), the residual and frame are bit-identical with and without
 *   the tail kernel, on random detection events at densities 0.5% to 50%;
 * - where the engine runs its convolutions as the cluster kernel or its
 *   grid mode (CUDAQ_NN_CNET=1, or AUTO's choice), the copy in front of them
 *   is folded into that kernel (describe says so, one graph node fewer than
 *   with CUDAQ_NN_CNET_FOLD=0) and the outputs are bit-identical to the
 *   unfolded engine's with the same plan (nnk_cnet::fold);
 * - against the CPU executor, at least 99.99% of the output positions agree
 *   (issue 12's bar for thresholded outputs; FP16 logits near the threshold
 *   may round across it), and every value is 0 or 1.
 * Part of the test_nn_gpu binary (one engine build to carry to the GPU
 * machine): `test_nn_gpu --shipped-tail MODELS_DIR MODEL.onnx...`. */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cudaq/nn/gpu_engine.h"
#include "cudaq/nn/nn.h"
#include "nn_gpu_tail_check.h"
#include "nn_test_util.h"

static int g_fail;

#define CHECK(cond, ...) NN_CHECK(g_fail, cond, __VA_ARGS__)

enum { SHOTS = 48 };

static unsigned long long g_rng = 0x9E3779B97F4A7C15ull;
static double uniform(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return (double)(g_rng >> 11) / 9007199254740992.0;
}

static cudaq_nn_gpu_t *make(const cudaq_nn_model_t *m, int half, const char *plan, int tail, int fold,
                            size_t *nodes, char *desc, size_t dlen, const char *what) {
  if (tail) unsetenv("CUDAQ_NN_NO_TAIL");
  else setenv("CUDAQ_NN_NO_TAIL", "1", 1);
  if (fold) unsetenv("CUDAQ_NN_CNET_FOLD");
  else setenv("CUDAQ_NN_CNET_FOLD", "0", 1);
  cudaq_nn_gpu_options_t o;
  cudaq_nn_gpu_options_init(&o);
  o.precision = half ? CUDAQ_NN_FP16 : CUDAQ_NN_FP32;
  o.plan_path = plan;
  o.tune_iterations = 3;
  cudaq_nn_gpu_t *g = NULL;
  cudaq_nn_error_t err;
  cudaq_nn_status_t st = cudaq_nn_gpu_create(m, &o, &g, &err);
  unsetenv("CUDAQ_NN_NO_TAIL");
  unsetenv("CUDAQ_NN_CNET_FOLD");
  CHECK(st == CUDAQ_NN_OK, "%s: create (tail %s, fold %s): %s", what, tail ? "on" : "off", fold ? "on" : "off",
        err.message);
  if (st != CUDAQ_NN_OK) return NULL;
  cudaGraphGetNodes((cudaGraph_t)cudaq_nn_gpu_graph(g), NULL, nodes);
  cudaq_nn_gpu_describe(g, desc, dlen);
  return g;
}

static void check_model(const char *dir, const char *file) {
  char path[1024], plan[1100];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  cudaq_nn_model_t *m = NULL;
  cudaq_nn_error_t err;
  if (cudaq_nn_model_load_file(path, &m, &err) != CUDAQ_NN_OK) {
    CHECK(0, "%s: load: %s", path, err.message);
    return;
  }
  /* residual and frame only, as the hybrid decoder's GPU path (the optional edge logits pruned) */
  if (cudaq_nn_model_num_outputs(m) > 2) cudaq_nn_model_keep_outputs(m, 2);
  cudaq_nn_binding_t bi, br, bf;
  cudaq_nn_model_input(m, 0, &bi);
  cudaq_nn_model_output(m, 0, &br);
  cudaq_nn_model_output(m, 1, &bf);
  const size_t n = bi.num_elements, nf = bf.num_elements;
  if (br.num_elements != n) { /* the contract: the residual has the input's shape */
    CHECK(0, "%s: residual of %zu elements for %zu detectors", file, br.num_elements, n);
    cudaq_nn_model_destroy(m);
    return;
  }
  int32_t *ev = malloc(SHOTS * n * sizeof(int32_t));
  int32_t *cres = malloc(SHOTS * n * sizeof(int32_t)), *cfr = malloc(SHOTS * nf * sizeof(int32_t));
  int32_t *gres[3], *gfr[3];
  for (int k = 0; k < 3; k++) {
    gres[k] = malloc(SHOTS * n * sizeof(int32_t));
    gfr[k] = malloc(SHOTS * nf * sizeof(int32_t));
  }
  static const double density[4] = {0.005, 0.02, 0.1, 0.5};
  for (int s = 0; s < SHOTS; s++)
    for (size_t i = 0; i < n; i++) ev[s * n + i] = uniform() < density[s % 4];
  cudaq_nn_cpu_t *cpu = NULL;
  int cpu_ok = cudaq_nn_cpu_create(m, &cpu) == CUDAQ_NN_OK;
  for (int s = 0; s < SHOTS && cpu_ok; s++) {
    const void *in[1] = {ev + s * n};
    size_t isz[1] = {n * sizeof(int32_t)}, osz[2] = {n * sizeof(int32_t), nf * sizeof(int32_t)};
    void *out[2] = {cres + s * n, cfr + s * nf};
    cpu_ok = cudaq_nn_cpu_run(cpu, in, isz, out, osz, &err) == CUDAQ_NN_OK;
  }
  cudaq_nn_cpu_destroy(cpu);
  CHECK(cpu_ok, "%s: CPU run", file);
  for (int half = 0; half <= 1 && cpu_ok; half++) {
    char what[300], desc[3][8192];
    snprintf(what, sizeof what, "%s %s", file, half ? "fp16" : "fp32");
    snprintf(plan, sizeof plan, "/tmp/test_nn_gpu_tail.%d.%s.plan", (int)getpid(), half ? "fp16" : "fp32");
    remove(plan);
    size_t nodes[3] = {0, 0, 0};
    cudaq_nn_gpu_t *g[3];
    g[0] = make(m, half, plan, 1, 1, &nodes[0], desc[0], sizeof desc[0], what);
    g[1] = g[0] ? make(m, half, plan, 0, 1, &nodes[1], desc[1], sizeof desc[1], what) : NULL;
    g[2] = g[1] ? make(m, half, plan, 1, 0, &nodes[2], desc[2], sizeof desc[2], what) : NULL;
    /* a cluster-kernel or grid-mode stack in use (else there is nothing to fold) */
    const int cnet = g[0] && (strstr(desc[0], "used, cluster") || strstr(desc[0], "used, grid mode"));
    if (g[2]) {
      if (cnet) {
        CHECK(strstr(desc[0], "input copy folded in") != NULL, "%s: the copy is not folded into the cluster kernel:\n%s",
              what, desc[0]);
        CHECK(nodes[0] + 1 == nodes[2], "%s: %zu graph nodes with the copy folded, %zu without", what, nodes[0],
              nodes[2]);
      } else {
        CHECK(nodes[0] == nodes[2], "%s: CUDAQ_NN_CNET_FOLD=0 changed the graph (%zu nodes, %zu) without a cluster "
              "kernel", what, nodes[0], nodes[2]);
      }
      CHECK(strstr(desc[2], "input copy folded in") == NULL, "%s: folded with CUDAQ_NN_CNET_FOLD=0", what);
      /* CUDAQ_NN_TEST_WANT_FIRST_FOLD=1 (with CUDAQ_NN_FIRST_FOLD=1 and no
       * stacks, nn_gpu_tail_fold32): the FP16 engine must fold the first layer
       * into the second's window (gpu_first.cu), so that the checks below
       * cover it. */
      const char *want_fold = getenv("CUDAQ_NN_TEST_WANT_FIRST_FOLD");
      if (half && want_fold && want_fold[0] == '1')
        CHECK(strstr(desc[0], "first layer folded into its window") != NULL, "%s: the first layer is not folded:\n%s",
              what, desc[0]);
      CHECK(strstr(desc[0], "tail (threshold chain + 2 products") != NULL, "%s: no tail kernel:\n%s", what, desc[0]);
      CHECK(strstr(desc[1], "tail (") == NULL, "%s: tail kernel with CUDAQ_NN_NO_TAIL=1", what);
      CHECK(nodes[0] + 1 == nodes[1], "%s: %zu graph nodes with the tail kernel, %zu without", what, nodes[0],
            nodes[1]);
      CHECK(cudaq_nn_gpu_plan_state(g[1]) == CUDAQ_NN_PLAN_HIT, "%s: the second engine did not read the plan", what);
      size_t differ = 0, cpu_bad = 0, nonbinary = 0;
      for (int s = 0; s < SHOTS; s++) {
        const void *in[1] = {ev + s * n};
        size_t isz[1] = {n * sizeof(int32_t)}, osz[2] = {n * sizeof(int32_t), nf * sizeof(int32_t)};
        for (int k = 0; k < 3; k++) {
          void *out[2] = {gres[k] + s * n, gfr[k] + s * nf};
          memset(gres[k] + s * n, 0x5A, n * sizeof(int32_t));
          memset(gfr[k] + s * nf, 0x5A, nf * sizeof(int32_t));
          CHECK(cudaq_nn_gpu_run(g[k], in, isz, out, osz, &err) == CUDAQ_NN_OK, "%s: run: %s", what, err.message);
        }
      }
      size_t fold_differ = 0;
      for (size_t i = 0; i < SHOTS * n; i++) fold_differ += gres[0][i] != gres[2][i];
      for (size_t i = 0; i < SHOTS * nf; i++) fold_differ += gfr[0][i] != gfr[2][i];
      CHECK(fold_differ == 0, "%s: %zu positions differ between the folded copy and CUDAQ_NN_CNET_FOLD=0", what,
            fold_differ);
      for (size_t i = 0; i < SHOTS * n; i++) {
        differ += gres[0][i] != gres[1][i];
        cpu_bad += gres[0][i] != cres[i];
        nonbinary += (uint32_t)gres[0][i] > 1;
      }
      for (size_t i = 0; i < SHOTS * nf; i++) {
        differ += gfr[0][i] != gfr[1][i];
        cpu_bad += gfr[0][i] != cfr[i];
        nonbinary += (uint32_t)gfr[0][i] > 1;
      }
      const size_t positions = SHOTS * (n + nf);
      CHECK(differ == 0, "%s: %zu of %zu positions differ between the tail kernel and the generic steps", what, differ,
            positions);
      CHECK(nonbinary == 0, "%s: %zu values other than 0/1", what, nonbinary);
      CHECK(cpu_bad * 10000 <= positions, "%s: %zu of %zu positions differ from the CPU executor (> 0.01%%)", what,
            cpu_bad, positions);
      printf("%s %s: %zu graph nodes (%zu without the tail kernel, %zu without the fold%s%s), %zu positions, %zu "
             "differ from the generic steps, %zu from the CPU executor, %zu from the unfolded copy\n",
             differ || nonbinary || fold_differ || cpu_bad * 10000 > positions ? "FAIL" : "ok  ", what, nodes[0],
             nodes[1], nodes[2], !cnet ? "" : strstr(desc[0], "used, grid mode") ? ", grid mode" : ", cluster kernel",
             strstr(desc[0], "first layer folded into its window") ? ", first layer folded" : "", positions, differ,
             cpu_bad, fold_differ);
    }
    for (int k = 0; k < 3; k++) cudaq_nn_gpu_destroy(g[k]);
    remove(plan);
  }
  free(ev);
  free(cres);
  free(cfr);
  for (int k = 0; k < 3; k++) {
    free(gres[k]);
    free(gfr[k]);
  }
  cudaq_nn_model_destroy(m);
}

int nn_gpu_tail_check(const char *dir, int n_models, char **models) {
  for (int i = 0; i < n_models; i++) check_model(dir, models[i]);
  printf("%s: %d shipped models, %d failures\n", g_fail ? "FAILED" : "PASSED", n_models, g_fail);
  return g_fail ? 1 : 0;
}
