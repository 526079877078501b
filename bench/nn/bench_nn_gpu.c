/* Batch-1 latency of the NN GPU engine: graph replay (cudaGraphLaunch +
 * cudaStreamSynchronize, timed on the host) for each model, FP32 and FP16,
 * with the convolutions chosen by timing (auto) and forced to cuDNN, to the
 * own kernel and to the tensor-core kernel (tc); auto also with the input DMA and output DMA around the
 * graph. PyTorch times of the same models (bench/nn/torch_cnn.py, same
 * GPU, same visit) are printed beside when given. The first row is the
 * floor of them all: a one-node graph (a 4-byte memset) timed the same way.
 *
 * --check DIR: for MODEL.onnx with DIR/MODEL.in.bin and DIR/MODEL.out.bin
 * (bench/nn/torch_cnn.py writes PyTorch's FP32 output there), the engine's
 * FP32 and FP16 outputs are compared with PyTorch's (1e-4 and 1e-2 of the
 * output's largest magnitude); a mismatch fails the run.
 *
 * --prec fp16|fp32|both (default both), --impls LIST (default auto,cudnn,own,tc,cl,stack):
 * which rows to run.
 *
 * --plan DIR: engine plans cached in DIR (MODEL.PREC.IMPL.plan): a second run skips the tuning
 * (e.g. under a profiler, scripts/gpu-profile-nn.sh).
 *
 * --all_outputs: a predecoder's edge logits (output 2) kept, as the weighted hybrid mode runs it.
 * Usage: bench_nn_gpu [--iters N] [--torch torch_times.txt] [--check DIR] [--prec P] [--impls L] [--plan DIR]
 *        [--all_outputs]
 *                     MODEL.onnx...
 */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cudaq/nn/gpu_engine.h"
#include "cudaq/nn/nn.h"
#include "../bench_cuda_check.h"

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

typedef struct stats {
  double p50, p99;
} stats_t;

static stats_t percentiles(double *t, int n) {
  qsort(t, (size_t)n, sizeof *t, cmp_double);
  stats_t s = {t[n / 2], t[(int)((double)n * 0.99) < n ? (int)((double)n * 0.99) : n - 1]};
  return s;
}

/* Times iters calls of launch(ctx, s) + cudaStreamSynchronize on the host,
 * after 200 untimed ones. */
typedef int (*launch_fn)(void *ctx, cudaStream_t s);
static int time_loop(launch_fn launch, void *ctx, cudaStream_t s, int iters, stats_t *out) {
  double *t = malloc((size_t)iters * sizeof *t);
  int rc = t ? 0 : -1;
  for (int i = -200; i < iters && !rc; i++) {
    double t0 = now_us();
    if (launch(ctx, s) != 0) rc = -1;
    if (cudaStreamSynchronize(s) != cudaSuccess) rc = -1;
    if (i >= 0) t[i] = now_us() - t0;
  }
  if (!rc) *out = percentiles(t, iters);
  free(t);
  return rc;
}

typedef struct engine_ctx {
  cudaq_nn_gpu_t *g;
  int dma;
  void *hin, *hout;
  size_t in_bytes, out_bytes;
} engine_ctx;
static int launch_engine(void *ctx, cudaStream_t s) {
  engine_ctx *e = ctx;
  int rc = 0;
  if (e->dma) cudaMemcpyAsync(cudaq_nn_gpu_input(e->g, 0), e->hin, e->in_bytes, cudaMemcpyHostToDevice, s);
  if (cudaq_nn_gpu_launch(e->g, s) != CUDAQ_NN_OK) rc = -1;
  if (e->dma) cudaMemcpyAsync(e->hout, cudaq_nn_gpu_output(e->g, 0), e->out_bytes, cudaMemcpyDeviceToHost, s);
  return rc;
}

/* Replays the graph iters times; with dma, copies the primary input in and
 * the primary output out around each launch. */
static int time_engine(cudaq_nn_gpu_t *g, const cudaq_nn_model_t *m, int iters, int dma, stats_t *out) {
  cudaStream_t s;
  if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) return -1;
  cudaq_nn_binding_t bi, bo;
  cudaq_nn_model_input(m, 0, &bi);
  cudaq_nn_model_output(m, 0, &bo);
  engine_ctx e = {g, dma, NULL, NULL, bi.size_bytes, bo.size_bytes};
  cudaMallocHost(&e.hin, bi.size_bytes + 1);
  cudaMallocHost(&e.hout, bo.size_bytes + 1);
  memset(e.hin, 0, bi.size_bytes);
  const int rc = time_loop(launch_engine, &e, s, iters, out);
  cudaFreeHost(e.hin);
  cudaFreeHost(e.hout);
  cudaStreamDestroy(s);
  return rc;
}

static int launch_exec(void *ctx, cudaStream_t s) {
  return cudaGraphLaunch(*(cudaGraphExec_t *)ctx, s) == cudaSuccess ? 0 : -1;
}

/* The floor of every row: a graph of one node (a 4-byte memset), replayed
 * and synchronised as the engines' graphs are. What a whole inference
 * timed this way cannot go below on this host and GPU. */
static int time_floor(int iters, stats_t *out) {
  cudaStream_t s = NULL;
  void *d = NULL;
  cudaGraph_t gr = NULL;
  cudaGraphExec_t ex = NULL;
  struct cudaMemsetParams ms;
  memset(&ms, 0, sizeof ms);
  int rc = -1;
  if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess && cudaMalloc(&d, 4) == cudaSuccess &&
      cudaGraphCreate(&gr, 0) == cudaSuccess) {
    ms.dst = d;
    ms.elementSize = 4;
    ms.width = 1;
    ms.height = 1;
    cudaGraphNode_t node;
    if (cudaGraphAddMemsetNode(&node, gr, NULL, 0, &ms) == cudaSuccess &&
        cudaGraphInstantiate(&ex, gr, 0) == cudaSuccess)
      rc = time_loop(launch_exec, &ex, s, iters, out);
  }
  if (ex) cudaGraphExecDestroy(ex);
  if (gr) cudaGraphDestroy(gr);
  if (d) cudaFree(d);
  if (s) cudaStreamDestroy(s);
  return rc;
}

static int torch_time(const char *file, const char *model, const char *prec, stats_t *out) {
  if (!file) return 0;
  FILE *f = fopen(file, "r");
  if (!f) return 0;
  char name[256], p[16];
  double a, b;
  int found = 0;
  while (fscanf(f, "%255s %15s %lf %lf", name, p, &a, &b) == 4)
    if (!strcmp(name, model) && !strcmp(p, prec)) {
      out->p50 = a;
      out->p99 = b;
      found = 1;
    }
  fclose(f);
  return found;
}

static void *read_all(const char *path, size_t *len) {
  *len = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  rewind(f);
  void *buf = malloc(n > 0 ? (size_t)n : 1);
  if (buf && n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n) { free(buf); buf = NULL; }
  fclose(f);
  if (buf) *len = (size_t)n;
  return buf;
}

/* Engine output against PyTorch's FP32 output for the same input; returns
 * 0 when within tolerance, 1 when not, -1 when there is nothing to check. */
static int check_against_torch(cudaq_nn_gpu_t *g, const cudaq_nn_model_t *m, const char *dir,
                               const char *model, int half) {
  if (!dir || cudaq_nn_model_num_inputs(m) != 1) return -1;
  char path[1024];
  size_t nin = 0, nout = 0;
  snprintf(path, sizeof path, "%s/%s.in.bin", dir, model);
  float *in = read_all(path, &nin);
  snprintf(path, sizeof path, "%s/%s.out.bin", dir, model);
  float *want = read_all(path, &nout);
  cudaq_nn_binding_t bi, bo;
  cudaq_nn_model_input(m, 0, &bi);
  cudaq_nn_model_output(m, 0, &bo);
  int rc = -1;
  if (in && want && nin == bi.size_bytes && nout == bo.size_bytes && bo.dtype == CUDAQ_NN_FLOAT) {
    float *got = malloc(nout);
    const void *ins[1] = {in};
    void *outs[8] = {got};
    size_t isz[1] = {nin}, osz[8] = {nout};
    for (size_t i = 1; i < cudaq_nn_model_num_outputs(m) && i < 8; i++) {
      cudaq_nn_binding_t b;
      cudaq_nn_model_output(m, i, &b);
      outs[i] = malloc(b.size_bytes + 1);
      osz[i] = b.size_bytes;
    }
    cudaq_nn_error_t err;
    if (cudaq_nn_gpu_run(g, ins, isz, outs, osz, &err) == CUDAQ_NN_OK) {
      double maxabs = 0, maxerr = 0;
      for (size_t i = 0; i < bo.num_elements; i++) {
        maxabs = fmax(maxabs, fabs(want[i]));
        maxerr = fmax(maxerr, fabs((double)got[i] - want[i]));
      }
      double tol = (half ? 1e-2 : 1e-4) * fmax(maxabs, 1e-3);
      rc = maxerr <= tol ? 0 : 1;
      printf("#   check vs PyTorch %s: max |err| %.3g (largest |output| %.3g): %s\n", half ? "fp16" : "fp32",
             maxerr, maxabs, rc ? "MISMATCH" : "ok");
      /* The CPU executor on the same exported model, where it is quick. */
      const cudaq_nn_binding_t *pb = &bi;
      if (!half && pb->num_elements <= 4 * 7 * 7 * 7) {
        cudaq_nn_cpu_t *cpu = NULL;
        if (cudaq_nn_cpu_create(m, &cpu) == CUDAQ_NN_OK &&
            cudaq_nn_cpu_run(cpu, ins, isz, outs, osz, &err) == CUDAQ_NN_OK) {
          double cerr = 0;
          for (size_t i = 0; i < bo.num_elements; i++) cerr = fmax(cerr, fabs((double)got[i] - want[i]));
          int bad = cerr > 1e-4 * fmax(maxabs, 1e-3);
          printf("#   check CPU executor vs PyTorch fp32: max |err| %.3g: %s\n", cerr, bad ? "MISMATCH" : "ok");
          rc |= bad;
        }
        cudaq_nn_cpu_destroy(cpu);
      }
    } else {
      printf("#   check vs PyTorch: run failed: %s\n", err.message);
      rc = 1;
    }
    for (size_t i = 1; i < 8; i++) free(i < cudaq_nn_model_num_outputs(m) ? outs[i] : NULL);
    free(got);
  }
  free(in);
  free(want);
  return rc;
}

int main(int argc, char **argv) {
  int iters = 5000;
  const char *torch = NULL, *check = NULL, *plan_dir = NULL, *prec_opt = "both", *impls = "auto,cudnn,own,tc,cl,stack";
  static const char *const impl_names[] = {"auto", "cudnn", "own", "tc", "cl", "stack"};
  int first = 1, all_outputs = 0;
  while (first < argc && !strncmp(argv[first], "--", 2)) {
    if (!strcmp(argv[first], "--all_outputs")) all_outputs = 1;
    else if (!strcmp(argv[first], "--iters") && first + 1 < argc) iters = atoi(argv[++first]);
    else if (!strcmp(argv[first], "--torch") && first + 1 < argc) torch = argv[++first];
    else if (!strcmp(argv[first], "--check") && first + 1 < argc) check = argv[++first];
    else if (!strcmp(argv[first], "--prec") && first + 1 < argc) prec_opt = argv[++first];
    else if (!strcmp(argv[first], "--impls") && first + 1 < argc) impls = argv[++first];
    else if (!strcmp(argv[first], "--plan") && first + 1 < argc) plan_dir = argv[++first];
    else { fprintf(stderr, "unknown option %s\n", argv[first]); return 2; }
    first++;
  }
  if (iters < 100) iters = 100;
  BENCH_EXIT_IF_NO_GPU();
  struct cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  printf("# bench_nn_gpu: %s, %d iterations per row, batch 1, graph replay timed on the host\n", prop.name, iters);
  printf("%-26s %-4s %-6s %10s %10s %12s %12s %11s %11s\n", "model", "prec", "conv", "p50_us", "p99_us",
         "dma_p50_us", "dma_p99_us", "torch_p50", "torch_p99");
  int fails = 0;
  stats_t fl;
  if (time_floor(iters, &fl) == 0) printf("%-26s %-4s %-6s %10.1f %10.1f\n", "floor:1-node-graph", "-", "-", fl.p50, fl.p99);
  else fails++;
  for (int a = first; a < argc; a++) {
    cudaq_nn_model_t *m = NULL;
    cudaq_nn_error_t err;
    if (cudaq_nn_model_load_file(argv[a], &m, &err) != CUDAQ_NN_OK) {
      fprintf(stderr, "%s: %s\n", argv[a], err.message);
      fails++;
      continue;
    }
    /* A predecoder's optional edge logits (output 2, weighted matching) are pruned, as the
     * hybrid decoder's GPU path does with --predecoder_weights off: the timed graph is the
     * residual and frame's. --all_outputs keeps them (the weighted hybrid mode's graph). */
    if (!all_outputs && cudaq_nn_model_num_outputs(m) > 2) cudaq_nn_model_keep_outputs(m, 2);
    const char *base = strrchr(argv[a], '/');
    base = base ? base + 1 : argv[a];
    char model[256];
    snprintf(model, sizeof model, "%s", base);
    char *dot = strstr(model, ".onnx");
    if (dot) *dot = '\0';
    for (int half = 0; half <= 1; half++) {
      const char *prec = half ? "fp16" : "fp32";
      if (strcmp(prec_opt, "both") && strcmp(prec_opt, prec)) continue;
      for (int impl = CUDAQ_NN_CONV_AUTO; impl <= CUDAQ_NN_CONV_STACK; impl++) {
        if (!strstr(impls, impl_names[impl])) continue;
        cudaq_nn_gpu_options_t o;
        cudaq_nn_gpu_options_init(&o);
        o.precision = half ? CUDAQ_NN_FP16 : CUDAQ_NN_FP32;
        o.conv_impl = (cudaq_nn_conv_impl_t)impl;
        char plan[1024];
        if (plan_dir) {
          snprintf(plan, sizeof plan, "%s/%s.%s.%s.plan", plan_dir, model, prec, impl_names[impl]);
          o.plan_path = plan;
        }
        cudaq_nn_gpu_t *g = NULL;
        cudaq_nn_status_t st = cudaq_nn_gpu_create(m, &o, &g, &err);
        if (st == CUDAQ_NN_ERR_UNSUPPORTED && impl != CUDAQ_NN_CONV_AUTO) {
          printf("%-26s %-4s %-6s n/a: %s\n", model, prec, impl_names[impl], err.message);
          continue;
        }
        if (st != CUDAQ_NN_OK) {
          fprintf(stderr, "%s %s: %s\n", model, prec, err.message);
          fails++;
          continue;
        }
        stats_t s = {0, 0}, d = {0, 0}, t = {0, 0};
        if (time_engine(g, m, iters, 0, &s) != 0 || (impl == 0 && time_engine(g, m, iters, 1, &d) != 0)) {
          fprintf(stderr, "%s %s: launch failed\n", model, prec);
          fails++;
        }
        int ht = impl == 0 && torch_time(torch, model, prec, &t);
        const char *iname = impl_names[impl];
        printf("%-26s %-4s %-6s %10.1f %10.1f", model, prec, iname, s.p50, s.p99);
        if (impl == 0) printf(" %12.1f %12.1f", d.p50, d.p99);
        else printf(" %12s %12s", "-", "-");
        if (ht) printf(" %11.1f %11.1f\n", t.p50, t.p99);
        else printf(" %11s %11s\n", "-", "-");
        if (impl == 0 || impl == CUDAQ_NN_CONV_TC || impl == CUDAQ_NN_CONV_CL || impl == CUDAQ_NN_CONV_STACK) {
          char desc[8192];
          cudaq_nn_gpu_describe(g, desc, sizeof desc);
          for (char *line = strtok(desc, "\n"); line; line = strtok(NULL, "\n")) printf("#   %s\n", line);
          if (check_against_torch(g, m, check, model, half) == 1) fails++;
        }
        cudaq_nn_gpu_destroy(g);
      }
    }
    cudaq_nn_model_destroy(m);
  }
  return fails ? 1 : 0;
}
