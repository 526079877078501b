/* CPU convolution as im2col + SGEMM (OpenBLAS, one thread per call).
 *
 * The direct loop of cpu_exec.c runs the 128-channel predecoder at about
 * 1 GFLOP/s; a tuned SGEMM runs it 30-100x faster. Writing a competitive GEMM
 * by hand is what OpenBLAS already does (runtime CPU dispatch, AVX2/AVX-512),
 * so we use Debian's OpenBLAS, linked statically. Its pthread build, limited
 * to one thread per call (blas_pick_core): executors on several threads call
 * SGEMM at once, and Debian's serial build is not safe for that (it can hand
 * two concurrent calls the same internal buffer: the shipped d = 5 model on
 * two threads gave about one wrong output in 3,000; tests/nn/test_nn_threads.c).
 * The pthread build takes its buffers under its own lock; its worker threads,
 * started with the library, are never given work.
 *
 * Output positions are processed in tiles of NN_CONV_TILE so that the
 * im2col scratch stays small (C * k^3 * tile floats, plus k^3 * tile int32
 * source offsets), sized once per executor by nn__conv_scratch_floats. The
 * im2col matrix is written row by row from the offset table: writing it
 * column by column (one cache line per channel per element) took 40% of a
 * d = 7 inference and more at d = 9, 13 (2-core AMD EPYC VM, one thread,
 * ms per shot at d = 5 / 7 / 9 / 13: 7.1 / 28.8 / 46.3 / 156 before, 6.9 /
 * 16.1 / 32 / 86 after, at a tile of 256 positions (128: same, 512-2048:
 * up to 9% slower at d = 13); the SGEMM is now most of the time, at ~57
 * GFLOP/s). */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn_internal.h"

#ifdef CUDAQ_HAVE_CBLAS
#include <cblas.h>
/* OpenBLAS's kernel selection (DYNAMIC_ARCH builds, as Debian's), exported
 * by the library but not in its headers: gotoblas_dynamic_quit forgets the
 * kernel table, gotoblas_dynamic_init picks it again (reading
 * OPENBLAS_CORETYPE). Only the table: not gotoblas_quit / gotoblas_init,
 * which also tear down and restart the thread server and the buffers, and
 * whose second teardown at exit crashed the process on a 16-core machine
 * (test_nn_gpu and every CPU-executor user exited with SIGSEGV after their
 * work on the H200 host, 2026-11-27; not with OPENBLAS_NUM_THREADS=1). */
void gotoblas_dynamic_init(void);
void gotoblas_dynamic_quit(void);
#endif

/* The core kernels OpenBLAS runs (Debian's build picks them at start-up).
 *
 * Why: OpenBLAS 0.3.21 (Debian 12) chooses its kernels by CPU model number,
 * and a model it does not know (Sapphire and Emerald Rapids, e.g. family 6
 * model 207, as on our development and GPU machines) falls back to
 * "Prescott", its SSE3 kernels: the d = 5 predecoder then takes 18 ms per
 * shot here instead of 8.5 ms with the AVX-512 ones. Where that fallback
 * was taken on a CPU that runs AVX-512 (or AVX2 + FMA) kernels, we set
 * OPENBLAS_CORETYPE to SkylakeX (or Haswell) and let OpenBLAS initialise
 * again, once, at the first executor's creation, before any SGEMM of ours.
 * A user's own OPENBLAS_CORETYPE is left alone, and CUDAQ_NN_BLAS_KEEP=1
 * keeps OpenBLAS's choice. */
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static char blas_core[32] = "none";

static void blas_pick_core(void) {
#ifdef CUDAQ_HAVE_CBLAS
  const char *core = openblas_get_corename();
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  const char *keep = getenv("CUDAQ_NN_BLAS_KEEP");
  /* CUDAQ_NN_BLAS_REPICK=1 (a test hook): choose again whatever OpenBLAS
   * chose, so that a machine whose CPU OpenBLAS knows runs this path too. */
  const char *repick = getenv("CUDAQ_NN_BLAS_REPICK");
  const int fallback = core && (!strcmp(core, "Prescott") || (repick && !strcmp(repick, "1")));
  if (fallback && !getenv("OPENBLAS_CORETYPE") && !(keep && !strcmp(keep, "1"))) {
    __builtin_cpu_init();
    /* __builtin_cpu_supports also checks that the OS saves the wider registers */
    const int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                       __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
                       __builtin_cpu_supports("avx512cd");
    const int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    const char *want = avx512 ? "SkylakeX" : avx2 ? "Haswell" : NULL;
    if (want && !setenv("OPENBLAS_CORETYPE", want, 0)) {
      gotoblas_dynamic_quit();
      gotoblas_dynamic_init(); /* reads OPENBLAS_CORETYPE */
      core = openblas_get_corename();
      unsetenv("OPENBLAS_CORETYPE"); /* not inherited by child processes or another OpenBLAS */
    }
  }
#endif
  openblas_set_num_threads(1); /* each call on its caller's thread: executors are per thread */
  snprintf(blas_core, sizeof blas_core, "%s", core ? core : "unknown");
#endif
}

void nn__blas_init(void) { pthread_once(&blas_once, blas_pick_core); }

const char *cudaq_nn_cpu_blas_core(void) {
  nn__blas_init();
  return blas_core;
}

#define NN_CONV_TILE 256
/* the offset table lives in the float scratch, one int32 per float slot */
_Static_assert(sizeof(int32_t) == sizeof(float), "int32 offsets in float scratch");

void nn__conv_geom(const cudaq_nn_model_t *m, const nn_node_t *node, nn_conv_geom_t *g) {
  const nn_value_t *x = &m->values[node->in[0]], *w = &m->values[node->in[1]];
  const nn_value_t *y = &m->values[node->out[0]];
  const nn_conv_attr_t *c = &node->conv;
  for (int i = 0; i < 3; i++) g->in3[i] = g->out3[i] = 1;
  for (int s = 0; s < c->nsp; s++) {
    g->in3[3 - c->nsp + s] = x->dims[2 + s];
    g->out3[3 - c->nsp + s] = y->dims[2 + s];
  }
  g->N = x->dims[0];
  g->C = x->dims[1];
  g->M = w->dims[0];
  g->ksz = c->k[0] * c->k[1] * c->k[2];
  g->isz = g->in3[0] * g->in3[1] * g->in3[2];
  g->osz = g->out3[0] * g->out3[1] * g->out3[2];
}

size_t nn__conv_scratch_floats(const cudaq_nn_model_t *m, const nn_node_t *node) {
#ifdef CUDAQ_HAVE_CBLAS
  nn_conv_geom_t g;
  nn__conv_geom(m, node, &g);
  int64_t tile = g.osz < NN_CONV_TILE ? g.osz : NN_CONV_TILE;
  /* the im2col matrix, then the tile's source offsets (one int32 per tap
   * and output position, as wide as a float) */
  return (size_t)(g.C * g.ksz * tile + g.ksz * tile);
#else
  (void)m;
  (void)node;
  return 0;
#endif
}

int nn__conv_gemm(const cudaq_nn_model_t *m, const nn_node_t *node, void **bufs, float *scratch) {
#ifdef CUDAQ_HAVE_CBLAS
  if (!scratch) return 0;
  nn_conv_geom_t g;
  nn__conv_geom(m, node, &g);
  /* offsets are int32, and cblas_sgemm takes int sizes: larger ones take the direct loops */
  if (g.isz > INT32_MAX || g.osz > INT_MAX || g.C * g.ksz > INT_MAX || g.M > INT_MAX) return 0;
  const nn_conv_attr_t *c = &node->conv;
  const float *X = bufs[node->in[0]], *W = bufs[node->in[1]];
  const float *B = node->n_in > 2 && node->in[2] >= 0 ? bufs[node->in[2]] : NULL;
  float *Y = bufs[node->out[0]];
  const int64_t K = g.C * g.ksz;
  const int64_t tile = g.osz < NN_CONV_TILE ? g.osz : NN_CONV_TILE;
  /* Past the im2col matrix (nn__conv_scratch_floats): src[r * pt + j] is
   * the input offset (within one channel) that tap r reads for output
   * position p0 + j, or -1 in the padding. Written and read only as int32. */
  int32_t *src = (int32_t *)(scratch + K * tile);
  for (int64_t n = 0; n < g.N; n++) {
    const float *xn = X + n * g.C * g.isz;
    float *yn = Y + n * g.M * g.osz;
    for (int64_t p0 = 0; p0 < g.osz; p0 += NN_CONV_TILE) {
      int64_t pt = g.osz - p0 < NN_CONV_TILE ? g.osz - p0 : NN_CONV_TILE;
      /* im2col: row (ci, kd, kh, kw), column = output position p0 + j. The
       * offsets first (per tap and position), then each row is one
       * contiguous run of writes, so the matrix is written line by line. */
      for (int64_t j = 0; j < pt; j++) {
        int64_t p = p0 + j;
        int64_t ow = p % g.out3[2], oh = (p / g.out3[2]) % g.out3[1], od = p / (g.out3[2] * g.out3[1]);
        int64_t r = 0;
        for (int64_t kd = 0; kd < c->k[0]; kd++) {
          int64_t id = od * c->stride[0] - c->pad0[0] + kd * c->dil[0];
          for (int64_t kh = 0; kh < c->k[1]; kh++) {
            int64_t ih = oh * c->stride[1] - c->pad0[1] + kh * c->dil[1];
            for (int64_t kw = 0; kw < c->k[2]; kw++, r++) {
              int64_t iw = ow * c->stride[2] - c->pad0[2] + kw * c->dil[2];
              int inside = id >= 0 && id < g.in3[0] && ih >= 0 && ih < g.in3[1] && iw >= 0 && iw < g.in3[2];
              src[r * pt + j] = inside ? (int32_t)((id * g.in3[1] + ih) * g.in3[2] + iw) : -1;
            }
          }
        }
      }
      for (int64_t ci = 0; ci < g.C; ci++) {
        const float *xc = xn + ci * g.isz;
        for (int64_t r = 0; r < g.ksz; r++) {
          const int32_t *o = src + r * pt;
          float *dst = scratch + (ci * g.ksz + r) * pt;
          for (int64_t j = 0; j < pt; j++) dst[j] = o[j] >= 0 ? xc[o[j]] : 0.0f;
        }
      }
      for (int64_t mo = 0; mo < g.M; mo++) {
        float *row = yn + mo * g.osz + p0;
        float b = B ? B[mo] : 0.0f;
        for (int64_t j = 0; j < pt; j++) row[j] = b;
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)g.M, (int)pt, (int)K, 1.0f, W,
                  (int)K, scratch, (int)pt, 1.0f, yn + p0, (int)g.osz);
    }
  }
  return 1;
#else
  (void)m;
  (void)node;
  (void)bufs;
  (void)scratch;
  return 0;
#endif
}
