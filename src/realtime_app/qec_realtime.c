/*
 * qec-realtime: the realtime QEC decoder as a program (issue 11).
 *
 *   emulated FPGA thread --RPC requests--> pipeline ring (external; mapped
 *     pinned memory in the GPU modes)
 *     -> pipeline dispatcher
 *     -> cpu mode:    CPU worker: validate, predecoder (CPU executor), MWPM
 *        GPU modes:   the worker's CUDA graph (qrt_gpu.cu: ingest from the
 *                     slot, [inference], residual compaction, ready flag),
 *                     then its CPU thread: the length (the values were checked on the GPU),
 *                     MWPM on the residual
 *     -> response {status, corrections, prediction, ...} in the TX slot
 *     -> consumer (completion handler): stamps, LER, counts.
 *
 * The FPGA thread plays the control system: it streams a stim shot file as
 * RPC requests (request_id = request index, ptp_timestamp = its monotonic
 * clock at send, payload = one INT32 0/1 per detector, or bit-packed) in ring order, at a
 * fixed cadence or flat out, waiting for a free slot when the ring is full
 * (backpressure, counted). It writes the ring itself (the wire format's
 * request header) rather than through the pipeline's injector, which has no
 * ptp_timestamp.
 *
 * Every request is answered once: bad payloads are answered with an error
 * status in the response body (the pipeline's CPU stage cannot set the RPC
 * header's status) and counted. All memory is allocated before the FPGA
 * thread starts.
 */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>
#include <time.h>

#include "atomics.h"
#include "cudaq/qec/dem.h"
#include "cudaq/qec/mwpm.h"
#include "cudaq/qec/predecoder.h"
#include "cudaq/qec/samples.h"
#include "cudaq/realtime/bench_report.h"
#include "cudaq/realtime/cudaq_realtime.h"
#include "cudaq/realtime/pipeline.h"
#include "pipeline/pipeline_internal.h"
#include "qrt_app.h"
#include "qrt_gpu.h"
#include "qrt_nvtx.h"



/* --fail_launch_every K (testing): the pipeline's graph launches go through
 * the real launch ops, except every K-th, which fails with
 * cudaErrorLaunchFailure (719) without launching; the pipeline answers that
 * request with an error and returns the worker (host-dispatcher-worker-pool
 * section 4.2). Only the pipeline's dispatcher thread launches, so the
 * count is a plain word. Not on any path unless asked for. */
static const cudaq__launch_ops_t *g_real_ops;
static uint64_t g_fail_every, g_launches;

static int failing_launch(void *user, cudaGraphExec_t g, cudaStream_t s) {
  if (++g_launches % g_fail_every == 0) return 719; /* cudaErrorLaunchFailure */
  return g_real_ops->launch_graph(user, g, s);
}

static int fail_launch_every(cudaq_pipeline_t *p, uint64_t k) {
  g_real_ops = cudaq__cuda_launch_ops();
  if (!g_real_ops) {
    fprintf(stderr, "qec-realtime: --fail_launch_every needs a build with CUDA\n");
    return 1;
  }
  g_fail_every = k;
  g_launches = 0;
  cudaq__launch_ops_t ops = *g_real_ops;
  ops.launch_graph = failing_launch;
  return cudaq__pipeline_set_launch_ops(p, &ops) != CUDAQ_OK;
}

static void relax(const app_t *a) {
  if (a->idle_yield)
    sched_yield(); /* only while waiting (emulator, fewer cores than threads) */
  else
    cudaq__cpu_relax();
}

static void *fpga_main(void *arg) {
  app_t *a = arg;
  const uint32_t nslots = (uint32_t)a->o->slots;
  const uint64_t t_start = cudaq_bench_now_ns();
  uint64_t i = 0;
  for (; i < a->capacity; i++) {
    uint64_t now = cudaq_bench_now_ns();
    if (a->duration_ns && (now - t_start >= a->duration_ns ||
                           (a->interval_ns && i * a->interval_ns >= a->duration_ns)))
      break; /* with a cadence: exactly duration / interval requests */
    if (a->interval_ns) { /* open-loop schedule: late requests go at once */
      uint64_t target = t_start + i * a->interval_ns;
      while (now < target) {
        relax(a);
        now = cudaq_bench_now_ns();
      }
    }
    const uint32_t s = (uint32_t)(i % nslots);
    /* Backpressure: the slot is free once the consumer cleared its TX flag
     * (A3 inside slot_available pairs with R5 in the pipeline's consumer). */
    if (!cudaq_host_ringbuffer_slot_available(&a->ring, s)) {
      a->stalls++;
      while (!cudaq_host_ringbuffer_slot_available(&a->ring, s))
        relax(a);
    }
    QRT_RANGE_PUSH("send");
    const uint8_t *payload = a->shots.wire + (i % a->shots.n) * a->shots.wire_len;
    size_t len = a->shots.wire_len;
    uint64_t k = a->o->corrupt_every;
    if (k && i % k == k - 1) {
      a->corrupted++;
      const int bits = a->o->payload == QRT_PAYLOAD_BITS;
      if ((i / k) % 2 == 0 && (!bits || a->shots.nd % 8u)) {
        /* a value 2 (in the first detector, and every other time in the
         * last one: another block of a multi-block ingest kernel), or a
         * padding bit set */
        memcpy(a->bad_payload, payload, len);
        a->bad_payload[bits ? len - 1 : (i / k / 2) % 2 ? len - 4 : 0] |= bits ? 0x80 : 2;
        payload = a->bad_payload;
      } else {
        len -= bits ? 1 : 4;
      }
    }
    now = cudaq_bench_now_ns();
    a->sent_ptp[i] = now;
    cudaq_host_ringbuffer_write_rpc_request(&a->ring, s, a->function_id, payload, (uint32_t)len,
                                            (uint32_t)i, now);
    cudaq_bench_mark_submit(a->bench, i, now); /* before the signal: the consumer may complete it */
    /* R_sub publishes the submitted count; pairs with A_sub in main. */
    cudaq__store_release_u64(&a->submitted, i + 1);
    cudaq_host_ringbuffer_signal_slot(&a->ring, s); /* R1 of the ring: request bytes */
    QRT_RANGE_POP();
  }
  /* R_done: the FPGA thread sent its last request; pairs with A_done in main. */
  cudaq__store_release_u64(&a->producer_done, 1);
  return NULL;
}

static uint32_t sat32(uint64_t v) { return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v; }

/* The request's send time: its header's ptp_timestamp, still intact in the
 * RX slot (the ring is not in place). */
static uint64_t sent_ns(const cudaq_cpu_stage_context_t *ctx) {
  uint64_t sent;
  memcpy(&sent, (const uint8_t *)ctx->request - CUDAQ_RPC_HEADER_SIZE +
                    offsetof(cudaq_rpc_header_t, ptp_timestamp), sizeof sent);
  return sent;
}

/* Stamps the stage times (send -> stage start, stage start -> now) and
 * writes the response. */
static size_t put_response(const cudaq_cpu_stage_context_t *ctx, qrt_response_t *r, uint64_t t0) {
  const uint64_t sent = sent_ns(ctx);
  r->front_ns = sat32(t0 > sent ? t0 - sent : 0);
  r->stage_ns = sat32(cudaq_bench_now_ns() - t0);
  if (ctx->max_response_size < sizeof *r)
    return ctx->max_response_size + 1; /* answered CUDAQ_RPC_ERR_RESULT_TOO_LARGE */
  memcpy(ctx->response_buffer, r, sizeof *r);
  return sizeof *r;
}

/* CPU stage, cpu mode: one request, decoded by this worker's preallocated
 * state. */
static size_t cpu_stage(void *user, const cudaq_cpu_stage_context_t *ctx) {
  const uint64_t t0 = cudaq_bench_now_ns();
  qrt_worker_t **workers = user;
  qrt_response_t r;
  QRT_RANGE_PUSH("predecoder+MWPM");
  qrt_worker_decode(workers[ctx->worker_id], ctx->request, ctx->request_size, &r);
  QRT_RANGE_POP();
  return put_response(ctx, &r, t0);
}

/* CPU stage, GPU modes: the worker's graph has published its residual
 * (ctx->gpu_output: R_gpu in qrt_gpu.cu, acquired by A8, the pipeline's
 * claim of the ready flag); check the request's length, take the GPU's verdict on its values and run MWPM on the
 * residual. */
static size_t cpu_stage_gpu(void *user, const cudaq_cpu_stage_context_t *ctx) {
  (void)user;
  const uint64_t t0 = cudaq_bench_now_ns();
  qrt_response_t r;
  QRT_RANGE_PUSH("MWPM");
  qrt_worker_decode_gpu(ctx->user_context, ctx->request_size, ctx->gpu_output, &r);
  QRT_RANGE_POP();
  return put_response(ctx, &r, t0);
}

/* Completion handler: the consumer thread, once per harvested request. */
static void on_complete(void *user, const cudaq_completion_t *c) {
  app_t *a = user;
  const uint64_t t = cudaq_bench_now_ns();
  QRT_RANGE_PUSH("complete");
  const uint64_t i = c->request_id;
  if (i >= a->capacity) {
    a->unknown_ids++;
    QRT_RANGE_POP();
    return;
  }
  if (a->answered[i]) {
    a->duplicates++;
    QRT_RANGE_POP();
    return;
  }
  /* A_dl pairs with R_dl in run: an answer harvested at or after the
   * deadline is timed out (spec section 13: completed means answered in
   * time), whatever it says; stop's drain delivers such answers. */
  if (t >= cudaq__load_acquire_u64(&a->deadline_ns)) {
    a->answered[i] = QRT_ANSWER_LATE;
    a->late++;
    cudaq_bench_mark_timeout(a->bench, i);
    QRT_RANGE_POP();
    return;
  }
  a->answered[i] = QRT_ANSWER_ERROR;
  const uint8_t *slot = a->ring.tx_data_host + (size_t)c->slot * a->ring.tx_stride_sz;
  cudaq_rpc_response_t h;
  memcpy(&h, slot, sizeof h);
  qrt_response_t r;
  if (!c->success || h.result_len < sizeof r) {
    a->status_count[ST_RPC]++;
  } else {
    memcpy(&r, slot + CUDAQ_RPC_HEADER_SIZE, sizeof r);
    a->status_count[r.status >= 0 && r.status < ST_RPC ? r.status : ST_RPC]++;
    if (r.status == QRT_OK) {
      a->answered[i] = QRT_ANSWER_OK; /* answered with a prediction */
      a->prediction[i] = r.prediction;
      a->decoded++;
      a->events_before += r.events_in;
      a->events_after += r.events_residual;
      a->pd_ns += r.predecoder_ns;
      a->mwpm_ns += r.mwpm_ns;
      a->front_ns += r.front_ns;
      if (a->o->mode != QRT_MODE_CPU) {
        const uint32_t rest = r.front_ns > r.gpu_ns ? r.front_ns - r.gpu_ns : 0;
        const uint32_t bg = r.gpu_ns / QRT_SPLIT_BIN_NS, br = rest / QRT_SPLIT_BIN_NS;
        a->gpu_ns += r.gpu_ns;
        a->gpu_pub_ns += r.gpu_publish_ns;
        a->rest_ns += rest;
        a->split_n++;
        a->hist_gpu[bg < QRT_SPLIT_BINS ? bg : QRT_SPLIT_BINS - 1]++;
        a->hist_rest[br < QRT_SPLIT_BINS ? br : QRT_SPLIT_BINS - 1]++;
      }
      const uint32_t inner = r.predecoder_ns + r.mwpm_ns;
      const uint32_t overhead = r.stage_ns > inner ? r.stage_ns - inner : 0;
      a->overhead_ns += overhead;
      if (a->shots.have_obs) {
        a->judged++;
        a->mistakes += r.prediction != a->shots.obs[i % a->shots.n];
      }
      /* stages (names set in run): dispatch[+GPU], [predecoder], MWPM, worker
       * overhead; the report's unattributed rest is the consumer's lag */
      uint32_t k = 0;
      cudaq_bench_mark_stage(a->bench, i, k++, r.front_ns);
      if (a->has_pd && a->o->mode == QRT_MODE_CPU)
        cudaq_bench_mark_stage(a->bench, i, k++, r.predecoder_ns);
      cudaq_bench_mark_stage(a->bench, i, k++, r.mwpm_ns);
      cudaq_bench_mark_stage(a->bench, i, k, overhead);
    }
  }
  a->ptp_mismatches += h.ptp_timestamp != a->sent_ptp[i];
  cudaq_bench_mark_complete(a->bench, i, t);
  /* R_comp publishes the counters above; pairs with A_comp in main. */
  cudaq__store_release_u64(&a->completed, a->completed + 1);
  QRT_RANGE_POP();
}

static int warm_up(app_t *a, qrt_worker_t **w) {
  size_t n = a->shots.n < (a->has_pd ? 4u : 256u) ? a->shots.n : (a->has_pd ? 4u : 256u);
  for (int k = 0; k < a->o->workers; k++)
    for (size_t s = 0; s < n; s++) {
      qrt_response_t r;
      int32_t st = qrt_worker_decode(w[k], a->shots.wire + s * a->shots.wire_len,
                                     a->shots.wire_len, &r);
      if (st == QRT_ERR_PREDECODER) {
        fprintf(stderr, "qec-realtime: the predecoder fails on shot %zu of the file\n", s);
        return 1;
      }
    }
  return 0;
}

/* MWPM alone on the shots of the requests answered with a prediction (each
 * distinct shot decoded once), after the run: the logical error rate the
 * predecoder is compared with, and the shots where the answers differ. */
static int compare_mwpm(app_t *a, const cudaq_mwpm_graph_t *g) {
  qrt_worker_t *w = NULL;
  char msg[200];
  uint64_t *pred = calloc(a->shots.n, sizeof *pred);
  uint8_t *have = calloc(a->shots.n, 1);
  int rc = 1;
  if (!pred || !have ||
      qrt_worker_create(g, QRT_PD_NONE, NULL, 1, QRT_PAYLOAD_INT32, CUDAQ_PREDECODER_WEIGHTS_OFF, &w, msg, sizeof msg)) {
    fprintf(stderr, "qec-realtime: MWPM-alone comparison: out of memory\n");
    goto out;
  }
  for (uint64_t i = 0; i < a->submitted; i++) {
    if (a->answered[i] != QRT_ANSWER_OK)
      continue;
    const size_t s = (size_t)(i % a->shots.n);
    if (!have[s]) {
      qrt_response_t r;
      if (qrt_worker_decode(w, a->shots.payload + s * a->shots.nd, (size_t)a->shots.nd * 4u, &r)) {
        fprintf(stderr, "qec-realtime: MWPM alone fails on shot %zu (status %d)\n", s,
                (int)r.status);
        goto out;
      }
      pred[s] = r.prediction;
      have[s] = 1;
    }
    a->mwpm_alone_judged++;
    a->mwpm_alone_mistakes += pred[s] != a->shots.obs[s];
    a->disagreements += pred[s] != a->prediction[i];
  }
  rc = 0;
out:
  qrt_worker_destroy(w);
  free(pred);
  free(have);
  return rc;
}

/* Peak resident set (VmHWM) in KiB, 0 if unknown. */
static uint64_t rss_peak_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  unsigned long long kib = 0;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "VmHWM: %llu kB", &kib) == 1)
      break;
  if (f)
    fclose(f);
  return kib;
}

/* Closes --out and --json; 1 after a message where a write failed. */
static int close_outputs(app_t *a) {
  int rc = 0;
  if (a->out_f && fclose(a->out_f)) {
    fprintf(stderr, "qec-realtime: write error on --out '%s'\n", a->o->out);
    rc = 1;
  }
  if (a->json_f && fclose(a->json_f)) {
    fprintf(stderr, "qec-realtime: write error on --json '%s'\n", a->o->json);
    rc = 1;
  }
  a->out_f = a->json_f = NULL;
  return rc;
}

static int run(const opts_t *o) {
  app_t a;
  memset(&a, 0, sizeof a);
  a.o = o;
  /* The files of the run, opened before anything else: a path that cannot
   * be written fails now, not after the run. */
  FILE *probe = qrt_open("--dem", o->dem, "rb", NULL); /* the OS's reason */
  if (!probe)
    return 1;
  fclose(probe);
  if ((o->out && !(a.out_f = qrt_open("--out", o->out, "wb", NULL))) ||
      (o->json && !(a.json_f = qrt_open("--json", o->json, "w", NULL)))) {
    close_outputs(&a);
    return 1;
  }
  cudaq_mwpm_error_t err;
  err.message[0] = '\0';
  err.line = 0;
  cudaq_dem_t *dem = NULL;
  cudaq_mwpm_status_t mst = cudaq_dem_parse_file(o->dem, &dem, &err);
  if (mst) {
    close_outputs(&a);
    fprintf(stderr, "qec-realtime: %s:%zu: %s\n", o->dem, err.line,
            err.message[0] ? err.message : cudaq_mwpm_status_str(mst));
    return 1;
  }
  cudaq_mwpm_graph_t *g = NULL;
  cudaq_mwpm_graph_options_t gopts;
  cudaq_mwpm_graph_options_init(&gopts);
  gopts.enable_correlations = o->correlations; /* the workers decode correlated on such a graph */
  /* an ONNX model may give per-shot edge weights (weighted matching) */
  gopts.per_shot_weights = qrt_pd_kind_of(o->model) == QRT_PD_ONNX && o->mode != QRT_MODE_PASSTHROUGH &&
                           o->weights != CUDAQ_PREDECODER_WEIGHTS_OFF;
  mst = cudaq_mwpm_graph_from_dem(dem, &gopts, &g, &err);
  a.deadline_ns = UINT64_MAX; /* no answer is late until the FPGA thread is done */
  a.shots.nd = dem->num_detectors;
  a.shots.no = dem->num_observables;
  cudaq_dem_destroy(dem);
  if (mst) { /* e.g. a probability above 1/2 with --enable_correlations: the message says which */
    close_outputs(&a);
    fprintf(stderr, "qec-realtime: %s", o->dem);
    if (err.line)
      fprintf(stderr, ":%zu", err.line);
    fprintf(stderr, ": %s\n", err.message[0] ? err.message : cudaq_mwpm_status_str(mst));
    return 1;
  }
  int rc = 1;
  qrt_worker_t *workers[CUDAQ_PIPELINE_MAX_WORKERS] = {0};
  cudaq_pipeline_t *p = NULL;
  qrt_gpu_stage_t *gst = NULL;
  int leak_ring = 0;
  pthread_t fpga;
  int fpga_started = 0;
  const char *pd = o->model ? o->model : "none"; /* as the report names it */
  qrt_pd_kind_t kind = qrt_pd_kind_of(o->model);
  const int gpu = o->mode != QRT_MODE_CPU;
  if (a.shots.nd == 0) {
    fprintf(stderr, "qec-realtime: %s has no detectors\n", o->dem);
    goto done;
  }
  if (qrt_load_shots(o, &a.shots))
    goto done;
  a.has_pd = kind != QRT_PD_NONE;
  for (int k = 0; k < o->workers; k++) {
    char msg[400];
    /* GPU modes: the predecoder runs in the worker's graph; the CPU half
     * checks the length, takes the GPU's verdict on the values and runs MWPM. */
    if (qrt_worker_create(g, gpu ? QRT_PD_NONE : kind, o->model, !o->skip_layout_check, o->payload, o->weights,
                          &workers[k], msg, sizeof msg)) {
      fprintf(stderr, "qec-realtime: --model %s: %s\n", pd, msg);
      goto done;
    }
  }
  if (gpu) {
    qrt_gpu_config_t gc;
    memset(&gc, 0, sizeof gc);
    gc.kind = o->mode == QRT_MODE_HYBRID ? QRT_GPU_HYBRID : QRT_GPU_PASSTHROUGH;
    gc.model = o->model;
    gc.fp16 = o->fp16;
    gc.plan_dir = o->plan_dir;
    gc.concurrent = o->gpu_plan_latency ? 1 : o->workers; /* every worker's engine may run at once */
    gc.num_detectors = a.shots.nd;
    gc.num_observables = a.shots.no;
    gc.graph = o->skip_layout_check ? NULL : g; /* the model's layout checked against it */
    gc.match_graph = g;
    gc.weights = o->weights;
    gc.payload = o->payload;
    gc.self_gate = o->self_gate;
    gc.function_id = cudaq_fnv1a_hash("qec_realtime_decode");
    gc.cpu_workers = workers;
    char msg[400];
    if (qrt_gpu_stage_create(&gc, &gst, msg, sizeof msg)) {
      fprintf(stderr, "qec-realtime: --mode %s: %s\n", qrt_mode_name(o->mode), msg);
      goto done;
    }
  }
  if (warm_up(&a, workers))
    goto done;
  /* Sizes and per-request arrays: all allocated before the run. */
  a.capacity = o->requests ? o->requests
               : o->duration_s > 0 ? QRT_DEFAULT_DURATION_CAPACITY : a.shots.n;
  if (a.capacity > UINT32_MAX) {
    fprintf(stderr, "qec-realtime: at most %u requests (request_id is 32 bits)\n", UINT32_MAX);
    goto done;
  }
  a.duration_ns = (uint64_t)(o->duration_s * 1e9);
  a.interval_ns = (uint64_t)(o->interval_us * 1e3);
  a.function_id = cudaq_fnv1a_hash("qec_realtime_decode");
  a.answered = calloc(a.capacity, 1);
  a.prediction = calloc(a.capacity, sizeof *a.prediction);
  a.sent_ptp = calloc(a.capacity, sizeof *a.sent_ptp);
  a.bad_payload = malloc(a.shots.wire_len);
  char bench_name[64];
  snprintf(bench_name, sizeof bench_name, "qec-realtime %s", qrt_mode_name(o->mode));
  if (!a.answered || !a.prediction || !a.sent_ptp || !a.bad_payload ||
      cudaq_bench_create(bench_name, a.capacity, &a.bench)) {
    fprintf(stderr, "qec-realtime: out of memory for %llu requests\n",
            (unsigned long long)a.capacity);
    goto done;
  }
  {
    uint32_t k = 0;
    cudaq_bench_set_stage_name(a.bench, k++, gpu ? "dispatch+GPU" : "dispatch");
    if (a.has_pd && !gpu)
      cudaq_bench_set_stage_name(a.bench, k++, "predecoder");
    cudaq_bench_set_stage_name(a.bench, k++, "MWPM");
    cudaq_bench_set_stage_name(a.bench, k, "worker overhead");
  }
  size_t slot_size = CUDAQ_RPC_HEADER_SIZE + a.shots.wire_len;
  if (slot_size < CUDAQ_RPC_HEADER_SIZE + sizeof(qrt_response_t))
    slot_size = CUDAQ_RPC_HEADER_SIZE + sizeof(qrt_response_t);
  slot_size = (slot_size + 63) & ~(size_t)63;
  /* GPU modes: the graph reads the request from the slot, so the ring is
   * mapped pinned memory. Not in place: the CPU stage reads the request
   * header after the GPU stage. */
  if (cudaq_host_ringbuffer_alloc(&a.ring, (uint32_t)o->slots, (uint32_t)slot_size,
                                  gpu ? CUDAQ_RING_ALLOC_MAPPED : CUDAQ_RING_ALLOC_HOST)) {
    fprintf(stderr, "qec-realtime: ring: %s\n", cudaq_last_error());
    goto done;
  }
  int threads = o->workers + 3; /* dispatcher, consumer, FPGA */
  a.idle_yield = o->idle_yield >= 0 ? o->idle_yield : threads > get_nprocs();
  cudaq_pipeline_config_t cfg;
  cudaq_pipeline_config_init(&cfg);
  cfg.num_workers = o->workers;
  cfg.num_slots = o->slots;
  cfg.slot_size = slot_size;
  cfg.external_ringbuffer = &a.ring;
  cfg.idle_yield = a.idle_yield;
  cfg.gpu_prelaunch = o->prelaunch;
  cfg.gpu_prelaunch_max = o->prelaunch_max;
  int fpga_cpu = -1;
  if (o->pin >= 0) {
    fpga_cpu = o->pin + 2 + o->workers;
    if (fpga_cpu >= get_nprocs()) {
      fprintf(stderr, "qec-realtime: --pin %d needs CPUs %d..%d, this machine has %d\n", o->pin,
              o->pin, fpga_cpu, get_nprocs());
      goto done;
    }
    cfg.cores.dispatcher = o->pin;
    cfg.cores.consumer = o->pin + 1;
    cfg.cores.worker_base = o->pin + 2;
  }
  if (cudaq_pipeline_create(&cfg, &p) ||
      (gpu && cudaq_pipeline_set_gpu_stage(p, qrt_gpu_factory, gst)) ||
      (gpu && o->fail_launch_every && fail_launch_every(p, o->fail_launch_every)) ||
      cudaq_pipeline_set_cpu_stage(p, gpu ? cpu_stage_gpu : cpu_stage, workers) ||
      cudaq_pipeline_set_completion_handler(p, on_complete, &a) || cudaq_pipeline_start(p)) {
    fprintf(stderr, "qec-realtime: pipeline: %s\n", cudaq_last_error());
    goto done;
  }
  a.weighted = qrt_worker_weighted(workers[0]); /* GPU modes: the factories gave the map */
  cudaq_bench_start(a.bench);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  if (fpga_cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(fpga_cpu, &set);
    pthread_attr_setaffinity_np(&attr, sizeof set, &set);
  }
  int prc = pthread_create(&fpga, &attr, fpga_main, &a);
  pthread_attr_destroy(&attr);
  if (prc) {
    fprintf(stderr, "qec-realtime: cannot start the FPGA thread\n");
    cudaq_pipeline_stop(p);
    goto done;
  }
  fpga_started = 1;
  /* Wait for the producer, then for the answers (at most timeout_ms after
   * the last request). A_done pairs with R_done; A_sub / A_comp with
   * R_sub / R_comp. */
  const uint64_t t_run = cudaq_bench_now_ns(), progress_ns = (uint64_t)(o->progress_s * 1e9);
  uint64_t next_progress = t_run + progress_ns;
  while (!cudaq__load_acquire_u64(&a.producer_done)) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
    uint64_t now = cudaq_bench_now_ns();
    if (progress_ns && now >= next_progress) {
      next_progress += progress_ns;
      uint64_t done_n = cudaq__load_acquire_u64(&a.completed);
      fprintf(stderr, "qec-realtime: %.0f s: submitted %llu, completed %llu (%.0f requests/s)\n",
              1e-9 * (double)(now - t_run),
              (unsigned long long)cudaq__load_acquire_u64(&a.submitted),
              (unsigned long long)done_n, (double)done_n / (1e-9 * (double)(now - t_run)));
    }
  }
  pthread_join(fpga, NULL);
  fpga_started = 0;
  /* R_dl publishes the deadline; pairs with A_dl in on_complete. Answers
   * harvested from then on (the rest of the wait cannot see any; stop's
   * drain can) are timed out, so the counts, the latencies and the wall
   * time all end at the deadline. */
  uint64_t deadline = cudaq_bench_now_ns() + o->timeout_ms * 1000000ull;
  cudaq__store_release_u64(&a.deadline_ns, deadline);
  while (cudaq__load_acquire_u64(&a.completed) < cudaq__load_acquire_u64(&a.submitted) &&
         cudaq_bench_now_ns() < deadline) {
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
  }
  cudaq_bench_stop(a.bench);
  cudaq_status_t stop_st = cudaq_pipeline_stop(p); /* drains what was signalled; joins the consumer */
  if (stop_st)
    fprintf(stderr, "qec-realtime: pipeline stop: %s\n", cudaq_last_error());
  uint64_t timed_out = a.late; /* answered after the deadline: marked by the consumer */
  for (uint64_t i = 0; i < a.submitted; i++)
    if (a.answered[i] == QRT_ANSWER_NONE) {
      cudaq_bench_mark_timeout(a.bench, i);
      timed_out++;
    }
  cudaq_pipeline_stats_t ps;
  cudaq_pipeline_stats(p, &ps);
  cudaq_bench_stats_t st;
  cudaq_bench_compute(a.bench, &st);
  a.run_s = 1e-9 * (double)(cudaq_bench_now_ns() - t_run);
  a.rss_peak_kib = rss_peak_kib();
  if (gst) {
    a.gpu_bytes = qrt_gpu_stage_device_bytes(gst);
    a.gpu_name = qrt_gpu_stage_device_name(gst);
    a.engine_describe = qrt_gpu_stage_describe(gst);
  }
  rc = 0;
  if (a.shots.have_obs && o->compare_mwpm != 0 && compare_mwpm(&a, g))
    rc = 1;
  qrt_print_report(stdout, &a, &st, &ps, timed_out, pd);
  if (a.json_f)
    qrt_json_report(a.json_f, &a, &st, &ps, timed_out, pd);
  if (a.out_f && qrt_write_predictions(&a))
    rc = 1;
  if (close_outputs(&a))
    rc = 1;
  /* Exit status 3: the run lost or duplicated a request (a timeout counts:
   * answered late is not answered), or stop failed. */
  if (!rc && (timed_out || a.duplicates || a.unknown_ids || a.completed != a.submitted || stop_st)) {
    fprintf(stderr, "qec-realtime: %llu of %llu requests not answered in time (--timeout_ms %llu), "
                    "%llu duplicate and %llu unknown answers%s\n",
            (unsigned long long)timed_out, (unsigned long long)a.submitted,
            (unsigned long long)o->timeout_ms, (unsigned long long)a.duplicates,
            (unsigned long long)a.unknown_ids, stop_st ? ", the pipeline did not stop cleanly" : "");
    if (o->out)
      fprintf(stderr, "qec-realtime: --out records of requests without a prediction (not "
                      "answered in time, or answered with an error status) are 0\n");
    rc = 3;
  }
  /* Exit status 4: every request answered in time, some with an error status. */
  const uint64_t errors = qrt_errors_of(&a);
  if (!rc && errors) {
    fprintf(stderr, "qec-realtime: %llu of %llu requests answered with an error status (errors by "
                    "status in the report)%s; the first (0-based request numbers, request i is "
                    "shot i mod %zu of the file):", (unsigned long long)errors,
            (unsigned long long)a.submitted,
            o->out ? ", no prediction: their --out records are 0" : "", a.shots.n);
    for (uint64_t i = 0, shown = 0; i < a.submitted && shown < 10; i++)
      if (a.answered[i] == QRT_ANSWER_ERROR) {
        fprintf(stderr, " %llu", (unsigned long long)i);
        shown++;
      }
    fputc('\n', stderr);
    rc = 4;
  }
done:
  if (fpga_started)
    pthread_join(fpga, NULL);
  if (p && cudaq_pipeline_destroy(p) == CUDAQ_ERR_INTERNAL && gst) {
    /* stop gave up with GPU work pending: a graph may still write into the
     * stage's buffers and the ring, so they are left allocated */
    gst = NULL;
    leak_ring = 1;
  }
  qrt_gpu_stage_destroy(gst);
  if (!leak_ring)
    cudaq_host_ringbuffer_free(&a.ring);
  for (int k = 0; k < CUDAQ_PIPELINE_MAX_WORKERS; k++)
    qrt_worker_destroy(workers[k]);
  cudaq_mwpm_graph_destroy(g);
  if (a.bench)
    cudaq_bench_destroy(a.bench);
  free(a.answered);
  free(a.prediction);
  free(a.sent_ptp);
  free(a.bad_payload);
  qrt_free_shots(&a.shots);
  close_outputs(&a); /* a start-up failure: left empty */
  fflush(stdout);
  return rc;
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      qrt_usage(stdout);
      return 0;
    }
  opts_t o;
  if (qrt_parse_args(argc, argv, &o)) {
    qrt_usage(stderr);
    return 2;
  }
  int r = qrt_check_mode_and_preset(&o);
  if (r)
    return r;
  /* --prelaunch: each waiting worker holds one of the GPU's hardware queues
   * (pipeline.h, gpu_prelaunch); before the first CUDA call, unless set. */
  if (o.prelaunch)
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  return run(&o);
}

