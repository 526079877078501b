/* The GPU engine's own kernels, each forced, against the CPU executor (part
 * of test_nn_gpu: see test_nn_gpu.c): every channels-last algorithm, the
 * first-layer fold under the wgmma algorithms, the stack kernel's work
 * splits and the cluster kernel (gpu_cnet.cu). */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_algos.h"
#include "nn_gpu_checks.h"

/* 1 on a compute capability 9.0 device (H100, H200). */
static int sm90(void) {
  int dev = 0, major = 0, minor = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  return major * 10 + minor == 90;
}

/* Every channels-last algorithm (tile x split, CUDAQ_NN_CL_ALGO) on models
 * that cover NDHWC and NCDHW inputs and outputs, one and several channel
 * blocks, partial tiles and split K, against the CPU executor. */
void check_cl_algos(void) {
  static const char *models[] = {"conv3d_cl_chain", "conv3d_cl_branch", "conv3d_tc_odd", "conv3d_tc_d13_c64_m128",
                                 "conv3d_cl_batch2", "conv3d_cl_wide", "conv3d_cl_batch2_wide", "conv3d_cl_narrow",
                                 "conv3d_cl_narrow_pads", "conv3d_cl_narrow_valid", "conv3d_cl_splitk_odd"};
  for (size_t mi = 0; mi < sizeof models / sizeof *models; mi++) {
    if (!selected(models[mi])) continue;
    io_t io;
    cudaq_nn_model_t *m = load_case(models[mi], &io);
    if (!m) continue;
    int ran = 0, narrow = 0, flat = 0;
    /* A CUDAQ_NN_CL_ALGO set by the caller pins this check to that one
     * algorithm (and each layer of every engine of the run to the first
     * listed algorithm that applies to it: gpu_tune.cu). */
    const char *pinned = getenv("CUDAQ_NN_CL_ALGO");
    const int only = pinned && *pinned ? atoi(pinned) : -1;
    for (int k = 0; k < NNK_CL_ALL_ALGOS; k++) {
      if (only >= 0 && k != only) continue;
      char ks[16], what[300], tag[32];
      snprintf(ks, sizeof ks, "%d", k);
      setenv("CUDAQ_NN_CL_ALGO", ks, 1);
      snprintf(what, sizeof what, "%.200s fp16 cl algo %d", models[mi], k);
      snprintf(tag, sizeof tag, "-> cl algo %d", k);
      const int r = run_forced(m, &io, CUDAQ_NN_CONV_CL, tag, 1, what);
      ran += r;
      narrow += k >= NNK_CL_NARROW_BASE && k < NNK_CL_WGF_BASE ? r : 0;
      flat += k >= NNK_CL_WGF_BASE ? r : 0;
    }
    if (only < 0) unsetenv("CUDAQ_NN_CL_ALGO");
    CHECK(ran >= (only < 0 ? 4 : 0), "%s: only %d channels-last algorithms ran", models[mi], ran);
    /* The narrow cases' narrow layers fit every narrow configuration on an
     * sm_90 device (227 KiB of shared memory; less elsewhere: at least one). */
    if (strstr(models[mi], "narrow") && only < 0)
      CHECK(narrow == NNK_CL_NARROW_CONFIGS || (!sm90() && narrow >= 1), "%s: %d of the %d narrow algorithms ran",
            models[mi], narrow, NNK_CL_NARROW_CONFIGS);
    /* These cases have a "same" layer (3 x 3 x 3, padding 1 on every side)
     * on NDHWC input: the wgmma flat tiles run it on an sm_90 device. */
    static const char *same_cl[] = {"conv3d_cl_chain", "conv3d_cl_branch", "conv3d_cl_wide", "conv3d_cl_batch2_wide",
                                    "conv3d_cl_narrow", "conv3d_cl_narrow_pads"};
    int has_same = 0;
    for (size_t i = 0; i < sizeof same_cl / sizeof *same_cl; i++) has_same |= !strcmp(models[mi], same_cl[i]);
    if (has_same && only < 0)
      CHECK(flat >= 1 || !sm90(), "%s: no wgmma flat tile algorithm ran", models[mi]);
    printf("ok      %s: %d channels-last algorithms match the CPU (%d on flat tiles)\n", models[mi], ran, flat);
    io_free(&io);
    cudaq_nn_model_destroy(m);
  }
}

/* A first layer folded into the next convolution's window (gpu_first.cu,
 * nng_fold_first_layers): the second convolution pinned to each wgmma
 * algorithm in turn (the first layer to a tile), on a copy of two run-time
 * channels (values -1 .. 2) beside a real-valued constant one, on a
 * predecoder's front (events gathered onto a grid with empty sites, two
 * constant site masks), and on FP32 run-time values with a first layer of
 * 40 channels (a partial block) without bias or ReLU; every engine where the
 * fold applied runs twice against the CPU executor. Two models must not
 * fold under any algorithm (a nonzero constant inside the run-time channel;
 * the copy also a graph output). On a device without the wgmma kernels
 * (compute capability other than 9.0) nothing folds. */
void check_first_fold(void) {
  static const struct {
    const char *name;
    int min; /* wgmma algorithms that must fold on an sm_90 device; -1: none may */
  } models[] = {{"first_fold_concat", 2},        {"first_fold_gather", 10},         {"first_fold_tail", 2},
                {"first_fold_refused_const", -1}, {"first_fold_refused_output", -1}};
  const int wg = sm90() && !getenv("CUDAQ_NN_NO_FUSE");
  for (size_t mi = 0; mi < sizeof models / sizeof *models; mi++) {
    const char *name = models[mi].name;
    if (!selected(name) || getenv("CUDAQ_NN_CL_ALGO")) continue;
    io_t io;
    cudaq_nn_model_t *m = load_case(name, &io);
    if (!m) continue;
    int ran = 0;
    /* The wgmma bricks, NNK_CL_WG_BASE .. NNK_CL_NARROW_BASE - 1, and flat
     * tiles, NNK_CL_WGF_BASE .. NNK_CL_ALL_ALGOS - 1 (gpu_algos.h). */
    int ran_flat = 0;
    for (int k = NNK_CL_WG_BASE; k < NNK_CL_ALL_ALGOS; k++) {
      if (k == NNK_CL_NARROW_BASE) k = NNK_CL_WGF_BASE;
      char ks[32], what[300];
      snprintf(ks, sizeof ks, "%d,0", k);
      setenv("CUDAQ_NN_CL_ALGO", ks, 1);
      snprintf(what, sizeof what, "%.200s fp16 first layer folded, cl algo %d", name, k);
      const int r = run_forced(m, &io, CUDAQ_NN_CONV_CL, "first layer folded into its window", 2, what);
      ran += r;
      ran_flat += k >= NNK_CL_WGF_BASE ? r : 0;
    }
    /* The A/B switch turns it off. */
    char ab[32];
    snprintf(ab, sizeof ab, "%d,0", NNK_CL_WG_BASE);
    setenv("CUDAQ_NN_CL_ALGO", ab, 1);
    setenv("CUDAQ_NN_NO_FIRST", "1", 1);
    CHECK(!run_forced(m, &io, CUDAQ_NN_CONV_CL, "first layer folded", 1, "CUDAQ_NN_NO_FIRST=1"),
          "%s: folded with CUDAQ_NN_NO_FIRST=1", name);
    unsetenv("CUDAQ_NN_NO_FIRST");
    unsetenv("CUDAQ_NN_CL_ALGO");
    if (models[mi].min < 0) CHECK(ran == 0, "%s: folded under %d wgmma algorithms, none expected", name, ran);
    else {
      CHECK(ran >= (wg ? models[mi].min : 0), "%s: the fold applied with only %d wgmma algorithms", name, ran);
      CHECK(ran_flat >= (wg ? 1 : 0), "%s: the fold applied under no wgmma flat tile algorithm", name);
    }
    printf("ok      %s: folded first layer under %d wgmma algorithms (%d flat)%s\n", name, ran, ran_flat,
           models[mi].min < 0 ? " (not foldable)" : ", matches the CPU");
    io_free(&io);
    cudaq_nn_model_destroy(m);
  }
}

/* The stack kernel (gpu_stack.cu) with every work split the tests can force
 * (CUDAQ_NN_STACK_BN 16/32 x CUDAQ_NN_STACK_KS 1/2/4/8: column blocks, K
 * slices added between layers with red.add) on chains with partial bricks,
 * odd channel counts, four layers and a split first layer; each engine runs
 * three times (a run relies on the buffers the run before it zeroed) and
 * every result must match the CPU executor. */
void check_stack_splits(void) {
  static const char *models[] = {"conv3d_stack_wide", "conv3d_stack_deep", "conv3d_cl_chain", "conv3d_cl_batch2",
                                 "conv2d_cl_chain"};
  static const int bns[] = {16, 32}, kss[] = {1, 2, 4, 8};
  setenv("CUDAQ_NN_CNET", "0", 1); /* the grid kernel, not the cluster one (check_cnet) */
  for (size_t mi = 0; mi < sizeof models / sizeof *models; mi++) {
    if (!selected(models[mi])) continue;
    io_t io;
    cudaq_nn_model_t *m = load_case(models[mi], &io);
    if (!m) continue;
    int ran = 0;
    for (int b = 0; b < 2; b++)
      for (int k = 0; k < 4; k++) {
        char v[16], what[300];
        snprintf(v, sizeof v, "%d", bns[b]);
        setenv("CUDAQ_NN_STACK_BN", v, 1);
        snprintf(v, sizeof v, "%d", kss[k]);
        setenv("CUDAQ_NN_STACK_KS", v, 1);
        snprintf(what, sizeof what, "%.200s fp16 stack bn %d ks %d", models[mi], bns[b], kss[k]);
        const int r = run_forced(m, &io, CUDAQ_NN_CONV_STACK, "-> used", 3, what);
        CHECK(r == 1, "%s: no stack ran", what);
        ran += r;
      }
    unsetenv("CUDAQ_NN_STACK_BN");
    unsetenv("CUDAQ_NN_STACK_KS");
    printf("ok      %s: %d stack work splits match the CPU\n", models[mi], ran);
    io_free(&io);
    cudaq_nn_model_destroy(m);
  }
  unsetenv("CUDAQ_NN_CNET");
}

/* The cluster kernel (gpu_cnet.cu), forced (CUDAQ_NN_CNET=1): every chain
 * of at most 32 channels runs as one cluster and matches the CPU executor
 * three runs in a row (2D, batch 2, 1 x 1 x 1 and 1 x 3 x 3 kernels, odd
 * channel counts, a layer without ReLU, one to four m16 tiles per warp;
 * one to eight m64 blocks a CTA, odd counts split between the warpgroups),
 * its products on mma.sync (CUDAQ_NN_CNET_WG=0) and, on a compute
 * capability 9.0 device, on wgmma; a chain with 64 channels gets no
 * cluster plan and still runs (grid), as does a volume of 18^3 cells
 * (more than a cluster holds); a volume of 3 cells leaves most of the
 * cluster's CTAs without cells, some without window rows; two chains with
 * a copy in front (run-time channels at 2, and at 1 and 2) read it inside
 * the kernel (nnk_cnet::fold; describe says "input copy folded in"). Then the same
 * kernel in grid mode (CUDAQ_NN_CNET_GRID=1: a cooperative grid, activations through global
 * memory, a flag per CTA and layer; the tuner's row count, and 16 rows a
 * CTA where that fits: the most CTAs, each waiting on many owners), whose
 * three runs in a row also check that the flags' epochs advance. */
/* One forced run of reference case name (run_forced: the tag in the
 * engine's description, then three runs against the CPU); 1 when the tag
 * was there, 0 when not, -1 when the case did not load (counted there). */
static int cnet_case(const char *name, const char *tag, const char *what) {
  io_t io;
  cudaq_nn_model_t *m = load_case(name, &io);
  if (!m) return -1;
  const int r = run_forced(m, &io, CUDAQ_NN_CONV_STACK, tag, 3, what);
  io_free(&io);
  cudaq_nn_model_destroy(m);
  return r;
}

void check_cnet(void) {
  static const struct {
    const char *name;
    int fits, grid; /* a cluster plan; a grid-mode plan */
    int fold;       /* the copy in front read inside the kernel (nnk_cnet::fold): checked by its tag */
  } models[] = {{"conv3d_cl_chain", 1, 1, 0},    {"conv3d_cl_batch2", 1, 1, 0},      {"conv3d_stack_deep", 1, 1, 0},
                {"conv2d_cl_chain", 1, 1, 0},    {"conv3d_cnet_d13", 1, 1, 0},       {"conv3d_cnet_mixed", 1, 1, 0},
                {"conv3d_cnet_large", 1, 1, 0},  {"conv3d_cnet_odd5", 1, 1, 0},      {"conv3d_cnet_grid18", 0, 1, 0},
                {"conv3d_cnet_tiny", 1, 1, 0},   {"conv3d_cnet_fold_last", 1, 1, 1}, {"conv3d_cnet_fold_two", 1, 1, 1},
                {"conv3d_stack_wide", 0, 0, 0}};
  static const char fold_tag[] = "input copy folded in";
  setenv("CUDAQ_NN_CNET", "1", 1);
  for (int wg = sm90(); wg >= 0; wg--) {
    setenv("CUDAQ_NN_CNET_WG", wg ? "1" : "0", 1);
    const char *tag = wg ? "-> used, cluster, wgmma" : "-> used, cluster, mma.sync";
    for (size_t mi = 0; mi < sizeof models / sizeof *models; mi++) {
      if (!selected(models[mi].name)) continue;
      char what[300];
      snprintf(what, sizeof what, "%.200s fp16 cluster (%s)", models[mi].name, wg ? "wgmma" : "mma.sync");
      const int r = cnet_case(models[mi].name, !models[mi].fits ? "no cluster plan" : models[mi].fold ? fold_tag : tag,
                              what);
      if (r < 0) continue;
      CHECK(r == 1, "%s: %s", what, models[mi].fits ? "the cluster kernel did not run" : "a cluster plan where none fits");
      if (r) printf("ok      %s: %s\n", what, models[mi].fits ? "matches the CPU" : "no cluster plan (too wide or too large)");
    }
  }
  /* grid mode: R 0 the tuner's choice among the row counts that fit, 16 forced (where it fits) */
  setenv("CUDAQ_NN_CNET_GRID", "1", 1);
  int ran16 = 0, tried16 = 0;
  for (int wg = sm90(); wg >= 0; wg--) {
    setenv("CUDAQ_NN_CNET_WG", wg ? "1" : "0", 1);
    const char *tag = wg ? "-> used, grid mode, wgmma" : "-> used, grid mode, mma.sync";
    for (int r16 = 0; r16 < 2; r16++) {
      if (r16) setenv("CUDAQ_NN_CNET_GRID_R", "16", 1);
      else unsetenv("CUDAQ_NN_CNET_GRID_R");
      for (size_t mi = 0; mi < sizeof models / sizeof *models; mi++) {
        if (!selected(models[mi].name)) continue;
        char what[300];
        snprintf(what, sizeof what, "%.200s fp16 grid mode (%s, %s)", models[mi].name, wg ? "wgmma" : "mma.sync",
                 r16 ? "16 rows a CTA" : "tuned rows");
        const int r = cnet_case(models[mi].name,
                                !models[mi].grid ? "no grid-mode plan" : models[mi].fold ? fold_tag : tag, what);
        if (r < 0) continue;
        /* 16 rows a CTA may need more CTAs than the device holds at once: then no plan, and nothing to check */
        CHECK(r == 1 || (r16 && models[mi].grid), "%s: %s", what,
              models[mi].grid ? "the grid-mode kernel did not run" : "a grid-mode plan for 64 channels");
        if (r) printf("ok      %s: %s\n", what, models[mi].grid ? "matches the CPU" : "no grid-mode plan (64 channels)");
        ran16 += r16 && models[mi].grid && r;
        tried16 += r16 && models[mi].grid;
      }
    }
  }
  CHECK(tried16 == 0 || ran16 > 0, "grid mode at 16 rows a CTA ran on none of %d chains", tried16);
  unsetenv("CUDAQ_NN_CNET_GRID_R");
  unsetenv("CUDAQ_NN_CNET_GRID");
  unsetenv("CUDAQ_NN_CNET_WG");
  unsetenv("CUDAQ_NN_CNET");
}
