/*
 * bench_pipeline.c - latency and throughput of the realtime pipeline with a
 * passthrough payload (issue 4, item 7).
 *
 * For each mode, payload size and arrival interval (0 = flat out) it
 * submits --requests requests through the injector and reports end-to-end
 * latency (request offered to the injector -> completion handler) percentiles,
 * throughput, backpressure stalls and the stage split:
 *   A dispatch + GPU  offered -> CPU stage entered (GPU modes), or
 *                     offered -> CPU stage entered (cpu mode: dispatch only)
 *   B CPU stage       time inside the CPU stage callback
 *   C consumer lag    CPU stage returned -> completion handler
 * GPU modes (a CUDA build on a GPU machine; see bench_pipeline_gpu.cu): a
 * captured one-kernel graph per worker after a pre-launch DMA of the payload
 * (the kernel copies the payload into mapped host memory and stores the
 * ready flag), and in the same run
 * the graph-launch floor (bare cudaGraphLaunch until its mapped flag is
 * seen). Modes: cpu (CPU only), gpu_cpu, gpu_only (the pipeline's default
 * GPU-only completion: a GPU write of a completion word where the driver
 * offers it), gpu_only_hostfn (the spec's cudaLaunchHostFunc completion).
 * --stage mailbox: no pre-launch DMA; the kernel reads the payload from the
 * ring slot named by the worker's mailbox. --stage prelaunch: the same
 * graph, pre-launched behind a gate kernel (config gpu_prelaunch) that
 * copies the request into device memory, where the kernel reads it through
 * the mailbox: no CUDA call on a request's path; --stage selfgate: the
 * same, but the graph's kernel (one block) waits at the gate itself
 * (waits_at_gate, cudaq_pipeline_gate_wait): no gate kernel before it;
 * --stage selfgate_ring: the same reading the request in the ring
 * (cudaq_pipeline_gate_wait_in_ring), not its copy; --gate_blocks N (default
 * 1): the self-gated kernel's blocks (block 0 waits at the gate, the others
 * for it in device memory; each copies its share);
 * --waiting N (default 1)
 * graphs wait at once; CUDA_DEVICE_MAX_CONNECTIONS is raised to 32 (unless
 * set) so that each waiting worker has a hardware queue. Each GPU row also reports the
 * dispatcher's launch calls (pre-launch + cudaGraphLaunch): mean, max and
 * how many took over 100 us / 1 ms. --hiccup CPU runs a thread on that CPU
 * that only reads the clock and reports the gaps it sees (over 20 us,
 * 100 us, 1 ms): stalls that no code of ours can cause (interrupts, the
 * hypervisor), in the same time window as the row. --warmup N (default
 * 5000, 0 = none): before each mode's rows, an unreported row of N requests
 * of its first payload and interval (a process's first ~1,000 requests run
 * slower); each row also skips its first 1%.
 *
 *   bench_pipeline [--modes cpu,gpu_cpu,gpu_only,gpu_only_hostfn] [--requests N]
 *                  [--payloads 2048,16384] [--intervals 0,1,10,30]
 *                  [--workers W] [--cpus D,C,W0] [--yield]
 *                  [--stage dma|mailbox|prelaunch|selfgate|selfgate_ring] [--gate_blocks N] [--waiting N] [--hiccup CPU]
 *                  [--warmup N]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>

#include "bench_common.h"
#include "cudaq/realtime/pipeline.h"

#define FN_PASS 0x5a5a0001u

/* Provided by bench_pipeline_gpu.cu in CUDA builds. */
#ifdef CUDAQ_BENCH_GPU
int bench_gpu_available(void);
int bench_gpu_factory(void *user, int worker_id, cudaq_gpu_worker_resources_t *r);
void bench_gpu_set_payload(size_t bytes, int signal_ready, int mailbox_read, int timed, int self_gate,
                           int gate_in_ring);
void bench_gpu_launch_stats(uint64_t *n, uint64_t *sum_ns, uint64_t *max_ns, uint64_t *over_100us,
                            uint64_t *over_1ms);
void bench_gpu_release(void);
int bench_gpu_launch_floor(size_t n, uint64_t *samples_ns, size_t payload_bytes);
#endif

typedef struct {
  size_t n;
  uint64_t *t_sub, *t_cpu0, *t_cpu1, *t_done;
  _Atomic uint64_t done;
  size_t payload;
  uint64_t bad;
} run_t;

static size_t cpu_stage(void *user, const cudaq_cpu_stage_context_t *ctx) {
  run_t *r = user;
  uint64_t t = bench_now_ns();
  size_t i = ctx->request_id % r->n;
  r->t_cpu0[i] = t;
  const void *src = ctx->gpu_output ? ctx->gpu_output : ctx->request;
  size_t len = ctx->request_size < ctx->max_response_size ? ctx->request_size : ctx->max_response_size;
  memcpy(ctx->response_buffer, src, len);
  r->t_cpu1[i] = bench_now_ns();
  return len ? len : 1;
}

static void on_done(void *user, const cudaq_completion_t *c) {
  run_t *r = user;
  r->t_done[c->request_id % r->n] = bench_now_ns();
  if (!c->success) r->bad++;
  atomic_store_explicit(&r->done, atomic_load_explicit(&r->done, memory_order_relaxed) + 1,
                        memory_order_release);
}

typedef struct {
  int dispatcher, consumer, worker_base, workers, yield;
  int mailbox;   /* --stage mailbox or prelaunch */
  int prelaunch; /* --stage prelaunch or selfgate */
  int self_gate; /* --stage selfgate or selfgate_ring */
  int gate_blocks; /* --gate_blocks N: the self-gated kernel's blocks (default 1) */
  int gate_in_ring; /* --stage selfgate_ring */
  int waiting;   /* --waiting N: the config's gpu_prelaunch with --stage prelaunch */
  int hiccup;  /* --hiccup CPU, or -1 */
} opts_t;

/* The hiccup thread: spins on the clock on its own CPU and counts the gaps
 * between consecutive reads. */
typedef struct {
  _Atomic int stop;
  int cpu;
  uint64_t over_20us, over_100us, over_1ms, max_ns;
  pthread_t t;
} hiccup_t;

static void *hiccup_main(void *arg) {
  hiccup_t *h = arg;
  bench_pin(h->cpu);
  uint64_t prev = bench_now_ns();
  while (!atomic_load_explicit(&h->stop, memory_order_relaxed)) {
    uint64_t t = bench_now_ns(), d = t - prev;
    prev = t;
    if (d > 20000) h->over_20us++;
    if (d > 100000) h->over_100us++;
    if (d > 1000000) h->over_1ms++;
    if (d > h->max_ns) h->max_ns = d;
  }
  return NULL;
}

/* p50 of the DMA + graph-launch floor per payload size (GPU builds), for
 * the infrastructure overhead line. */
static double g_floor_p50[4];
static size_t g_floor_payload[4];
static int g_nfloor;

/* quiet: the warm-up row (--warmup): run and checked, not reported. */
static void run_one(const char *mode, size_t payload, double interval_us, size_t n, const opts_t *o,
                    int quiet) {
  int gpu = strcmp(mode, "cpu") != 0, cpu = strncmp(mode, "gpu_only", 8) != 0;
  run_t r;
  memset(&r, 0, sizeof r);
  r.n = n;
  r.payload = payload;
  r.t_sub = calloc(n, 8), r.t_cpu0 = calloc(n, 8), r.t_cpu1 = calloc(n, 8), r.t_done = calloc(n, 8);
  cudaq_pipeline_config_t cfg;
  cudaq_pipeline_config_init(&cfg);
  cfg.num_workers = o->workers;
  cfg.num_slots = 32;
  cfg.slot_size = payload + 64;
  cfg.cores.dispatcher = o->dispatcher;
  cfg.cores.consumer = o->consumer;
  cfg.cores.worker_base = o->worker_base;
  cfg.idle_yield = o->yield;
  cfg.drain_timeout_ms = 10000;
  if (!strcmp(mode, "gpu_only_hostfn")) cfg.gpu_only_completion = CUDAQ_GPU_ONLY_COMPLETION_HOST_FUNC;
  cfg.gpu_prelaunch = gpu && o->prelaunch ? o->waiting : 0;
  cudaq_pipeline_t *p = NULL;
  if (cudaq_pipeline_create(&cfg, &p) != CUDAQ_OK) {
    fprintf(stderr, "create: %s\n", cudaq_last_error());
    exit(1);
  }
  cudaq_pipeline_set_completion_handler(p, on_done, &r);
  if (cpu) cudaq_pipeline_set_cpu_stage(p, cpu_stage, &r);
#ifdef CUDAQ_BENCH_GPU
  if (gpu) {
    bench_gpu_set_payload(payload, cpu, o->mailbox, !o->prelaunch, o->self_gate ? o->gate_blocks : 0, o->gate_in_ring);
    cudaq_pipeline_set_gpu_stage(p, bench_gpu_factory, NULL);
  }
#endif
  if (cudaq_pipeline_start(p) != CUDAQ_OK) {
    fprintf(stderr, "start: %s\n", cudaq_last_error());
    exit(1);
  }
  cudaq_gpu_only_completion_t used = CUDAQ_GPU_ONLY_COMPLETION_AUTO;
  cudaq_pipeline_gpu_only_completion(p, &used);
  hiccup_t hc;
  memset(&hc, 0, sizeof hc);
  hc.cpu = o->hiccup;
  if (o->hiccup >= 0) pthread_create(&hc.t, NULL, hiccup_main, &hc);
  cudaq_pipeline_injector_t *inj;
  cudaq_pipeline_injector_create(p, &inj);
  uint8_t *buf = malloc(payload);
  for (size_t i = 0; i < payload; ++i) buf[i] = (uint8_t)i;
  const uint64_t step = (uint64_t)(interval_us * 1000.0);
  const uint64_t t0 = bench_now_ns();
  for (size_t i = 0; i < n; ++i) {
    if (step)
      while (bench_now_ns() < t0 + i * step) {
      }
    /* Timed from the moment the request is offered: a request may complete
     * before submit returns, and a wait for a free slot is latency too. */
    r.t_sub[i] = bench_now_ns();
    cudaq_pipeline_injector_submit(inj, FN_PASS, buf, payload, i);
  }
  while (atomic_load_explicit(&r.done, memory_order_acquire) < n) {
  }
  const uint64_t t1 = bench_now_ns();
  if (o->hiccup >= 0) {
    atomic_store_explicit(&hc.stop, 1, memory_order_relaxed);
    pthread_join(hc.t, NULL);
  }
  cudaq_pipeline_stats_t st;
  cudaq_pipeline_stop(p);
  cudaq_pipeline_stats(p, &st);
  cudaq_pipeline_injector_destroy(inj);
  cudaq_pipeline_destroy(p);
#ifdef CUDAQ_BENCH_GPU
  if (gpu) bench_gpu_release();
#endif
  /* Skip the first 1% (warm-up). */
  size_t skip = n / 100, m = n - skip;
  uint64_t *e2e = malloc(m * 8), *a = malloc(m * 8), *b = malloc(m * 8), *c = malloc(m * 8);
  for (size_t i = 0; i < m; ++i) {
    size_t k = i + skip;
    e2e[i] = r.t_done[k] - r.t_sub[k];
    if (cpu) {
      a[i] = r.t_cpu0[k] > r.t_sub[k] ? r.t_cpu0[k] - r.t_sub[k] : 0;
      b[i] = r.t_cpu1[k] - r.t_cpu0[k];
      c[i] = r.t_done[k] > r.t_cpu1[k] ? r.t_done[k] - r.t_cpu1[k] : 0;
    }
  }
  if (quiet) goto checked;
  char name[96];
  char iv[16];
  if (step) snprintf(iv, sizeof iv, "%gus", interval_us);
  else snprintf(iv, sizeof iv, "flat-out");
  char stage[40];
  snprintf(stage, sizeof stage, "%s", gpu && o->gate_in_ring ? "[selfgate_ring" : gpu && o->self_gate ? "[selfgate"
                                      : gpu && o->prelaunch ? "[prelaunch]" : gpu && o->mailbox ? "[mailbox]" : "");
  if (gpu && o->self_gate) {
    char blocks[16] = "";
    if (o->gate_blocks > 1) snprintf(blocks, sizeof blocks, " x%d", o->gate_blocks);
    strncat(stage, blocks, sizeof stage - strlen(stage) - 2);
    strcat(stage, "]");
  }
  snprintf(name, sizeof name, "%s%s%s %zuB %s end-to-end", mode, stage,
           used == CUDAQ_GPU_ONLY_COMPLETION_STREAM_WRITE ? "[stream-write]"
           : used == CUDAQ_GPU_ONLY_COMPLETION_HOST_FUNC  ? "[host-fn]"
                                                          : "",
           payload, iv);
  bench_stats_t es = bench_percentiles(e2e, m);
  bench_print_row(name, m, es);
  for (int k = 0; gpu && k < g_nfloor; ++k)
    if (g_floor_payload[k] == payload)
      printf("  infrastructure overhead p50: %.2f us over the DMA + graph-launch floor (%.2f us)\n",
             es.p50 - g_floor_p50[k], g_floor_p50[k]);
  if (cpu) {
    snprintf(name, sizeof name, "  A %s", gpu ? "dispatch + GPU" : "dispatch");
    bench_print_row(name, m, bench_percentiles(a, m));
    bench_print_row("  B CPU stage", m, bench_percentiles(b, m));
    bench_print_row("  C consumer lag", m, bench_percentiles(c, m));
  }
  printf("  throughput %.0f req/s, backpressure stalls %llu, worker stalls %llu, errors %llu, "
         "completed %llu of %zu\n",
         (double)n / ((double)(t1 - t0) / 1e9), (unsigned long long)st.backpressure_stalls,
         (unsigned long long)st.worker_stalls, (unsigned long long)st.errors,
         (unsigned long long)st.completed, n);
#ifdef CUDAQ_BENCH_GPU
  if (gpu) {
    uint64_t ln, lsum, lmax, l100, l1ms;
    bench_gpu_launch_stats(&ln, &lsum, &lmax, &l100, &l1ms);
    if (o->prelaunch)
      printf("  pre-launched %llu of %zu (the rest launched on arrival), failed re-arms %llu, "
             "released at stop %llu\n",
             (unsigned long long)st.prelaunched, n, (unsigned long long)st.prelaunch_failures,
             (unsigned long long)st.prelaunch_cancelled);
    else
    printf("  dispatcher launch calls (pre-launch + cudaGraphLaunch): mean %.2f us, max %.1f us, "
           "over 100 us %llu, over 1 ms %llu (of %llu)\n",
           ln ? (double)lsum / (double)ln / 1e3 : 0.0, (double)lmax / 1e3, (unsigned long long)l100,
           (unsigned long long)l1ms, (unsigned long long)ln);
  }
#endif
  if (o->hiccup >= 0)
    printf("  hiccups on CPU %d (clock-only thread): gaps over 20 us %llu, over 100 us %llu, "
           "over 1 ms %llu, max %.1f us\n",
           o->hiccup, (unsigned long long)hc.over_20us, (unsigned long long)hc.over_100us,
           (unsigned long long)hc.over_1ms, (double)hc.max_ns / 1e3);
checked:
  if (st.completed != n || r.bad) {
    fprintf(stderr, "bench_pipeline: LOST or failed requests\n");
    exit(1);
  }
  free(e2e), free(a), free(b), free(c), free(buf);
  free(r.t_sub), free(r.t_cpu0), free(r.t_cpu1), free(r.t_done);
}

static int has_mode(const char *list, const char *mode) {
  size_t m = strlen(mode);
  for (const char *t = list; (t = strstr(t, mode)) != NULL; t += m)
    if ((t == list || t[-1] == ',') && (t[m] == ',' || t[m] == 0)) return 1;
  return 0;
}

static int split(const char *s, double *out, int max) {
  int n = 0;
  char *copy = strdup(s), *save = NULL;
  for (char *t = strtok_r(copy, ",", &save); t && n < max; t = strtok_r(NULL, ",", &save))
    out[n++] = atof(t);
  free(copy);
  return n;
}

int main(int argc, char **argv) {
  const char *modes = "cpu,gpu_cpu,gpu_only";
  size_t n = 100000, warmup = 5000;
  double payloads[4] = {2048, 16384}, intervals[8] = {0, 1, 10, 30};
  int np = 2, ni = 4;
  opts_t o = {.dispatcher = -1, .consumer = -1, .worker_base = -1, .workers = 8, .hiccup = -1, .waiting = 1,
              .gate_blocks = 1};
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--modes") && i + 1 < argc) modes = argv[++i];
    else if (!strcmp(argv[i], "--requests") && i + 1 < argc) n = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) warmup = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--payloads") && i + 1 < argc) np = split(argv[++i], payloads, 4);
    else if (!strcmp(argv[i], "--intervals") && i + 1 < argc) ni = split(argv[++i], intervals, 8);
    else if (!strcmp(argv[i], "--workers") && i + 1 < argc) o.workers = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--cpus") && i + 1 < argc) {
      double c[3] = {-1, -1, -1};
      split(argv[++i], c, 3);
      o.dispatcher = (int)c[0], o.consumer = (int)c[1], o.worker_base = (int)c[2];
    } else if (!strcmp(argv[i], "--yield")) o.yield = 1;
    else if (!strcmp(argv[i], "--stage") && i + 1 < argc) {
      const char *v = argv[++i];
      if (strcmp(v, "dma") && strcmp(v, "mailbox") && strcmp(v, "prelaunch") && strcmp(v, "selfgate") &&
          strcmp(v, "selfgate_ring")) {
        fprintf(stderr, "bench_pipeline: --stage %s: expected dma, mailbox, prelaunch, selfgate or "
                        "selfgate_ring\n", v);
        return 2;
      }
      o.mailbox = strcmp(v, "dma") != 0;
      o.gate_in_ring = !strcmp(v, "selfgate_ring");
      o.self_gate = !strcmp(v, "selfgate") || o.gate_in_ring;
      o.prelaunch = !strcmp(v, "prelaunch") || o.self_gate;
    } else if (!strcmp(argv[i], "--hiccup") && i + 1 < argc) o.hiccup = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--gate_blocks") && i + 1 < argc) {
      o.gate_blocks = atoi(argv[++i]);
      if (o.gate_blocks < 1 || o.gate_blocks > 64) {
        fprintf(stderr, "bench_pipeline: --gate_blocks is 1 to 64 (with --stage selfgate or selfgate_ring)\n");
        return 2;
      }
    } else if (!strcmp(argv[i], "--waiting") && i + 1 < argc) {
      o.waiting = atoi(argv[++i]);
      if (o.waiting < 1) {
        fprintf(stderr, "bench_pipeline: --waiting is 1 or more (with --stage prelaunch)\n");
        return 2;
      }
    }
    else {
      fprintf(stderr, "usage: %s [--modes cpu,gpu_cpu,gpu_only,gpu_only_hostfn] [--requests N] "
                      "[--payloads 2048,16384] [--intervals 0,1,10,30] [--workers W] [--cpus D,C,W0] "
                      "[--yield] [--stage dma|mailbox|prelaunch|selfgate|selfgate_ring] [--gate_blocks N] "
                      "[--waiting N] [--hiccup CPU] [--warmup N]\n", argv[0]);
      return 2;
    }
  }
  if (o.hiccup >= get_nprocs_conf()) {
    fprintf(stderr, "bench_pipeline: --hiccup %d: this machine has CPUs 0..%d\n", o.hiccup,
            get_nprocs_conf() - 1);
    return 2;
  }
  if (n < 100) n = 100;
  if (o.prelaunch) setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0); /* before the first CUDA call */
  int have_gpu = 0;
#ifdef CUDAQ_BENCH_GPU
  have_gpu = bench_gpu_available();
#endif
  printf("bench_pipeline: %zu requests per row, %d workers, %d CPUs, cores d/c/w0 %d/%d/%d%s, GPU %s\n", n,
         o.workers, get_nprocs(), o.dispatcher, o.consumer, o.worker_base, o.yield ? ", idle_yield" : "",
         have_gpu ? "yes" : "no (GPU modes skipped)");
  bench_print_header();
#ifdef CUDAQ_BENCH_GPU
  if (have_gpu) {
    for (int k = 0; k < np; ++k) {
      size_t m = n < 20000 ? n : 20000;
      uint64_t *s = malloc(m * 8);
      if (bench_gpu_launch_floor(m, s, 0) == 0)
        bench_print_row("floor: cudaGraphLaunch -> mapped flag", m, bench_percentiles(s, m));
      char name[80];
      snprintf(name, sizeof name, "floor: DMA %gB + cudaGraphLaunch -> flag", payloads[k]);
      if (bench_gpu_launch_floor(m, s, (size_t)payloads[k]) == 0) {
        bench_stats_t fs = bench_percentiles(s, m);
        bench_print_row(name, m, fs);
        g_floor_payload[g_nfloor] = (size_t)payloads[k];
        g_floor_p50[g_nfloor++] = fs.p50;
      }
      free(s);
    }
  }
#endif
  const char *all[4] = {"cpu", "gpu_cpu", "gpu_only", "gpu_only_hostfn"};
  for (int mi = 0; mi < 4; ++mi) {
    if (!has_mode(modes, all[mi])) continue;
    if (mi > 0 && !have_gpu) continue;
    int warmed = 0; /* one warm-up row per mode (each mode has its own path) */
    for (int k = 0; k < np; ++k)
      for (int j = 0; j < ni; ++j) {
        /* A process's first ~1,000 requests run slower (H200, 2 KiB GPU+CPU every 30 us: p99
         * 92-110 us in a process's first row, 14-20 us in the same row run again after it,
         * with 0 backpressure stalls instead of hundreds): a warm-up row goes first. */
        if (warmup && !warmed) run_one(all[mi], (size_t)payloads[k], intervals[j], warmup, &o, 1);
        warmed = 1;
        run_one(all[mi], (size_t)payloads[k], intervals[j], n, &o, 0);
      }
  }
  return 0;
}
