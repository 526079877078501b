/*
 * qec-realtime: the realtime QEC decoder as a program (issue 11), first
 * slice: CPU-only mode.
 *
 *   emulated FPGA thread --RPC requests--> pipeline ring (external, host memory)
 *     -> pipeline dispatcher -> CPU worker: validate, predecoder, MWPM
 *     -> response {status, corrections, prediction, ...} in the TX slot
 *     -> consumer (completion handler): stamps, LER, counts.
 *
 * The FPGA thread plays the control system: it streams a stim shot file as
 * RPC requests (request_id = request index, ptp_timestamp = its monotonic
 * clock at send, payload = one INT32 0/1 per detector) in ring order, at a
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
#include "qrt_worker.h"

#ifndef QRT_SOURCE_DIR
#define QRT_SOURCE_DIR "."
#endif

#define QRT_DEFAULT_DURATION_CAPACITY 4000000u /* requests a --duration_s run may send at most */

typedef struct opts {
  const char *dem, *in, *obs_in, *out, *json, *model, *mode, *preset;
  const char *in_format, *obs_in_format, *out_format;
  int appended, workers, slots, idle_yield, pin;
  uint64_t requests, corrupt_every, timeout_ms;
  double duration_s, interval_us, progress_s;
} opts_t;

static void usage(FILE *f) {
  fputs(
      "usage: qec-realtime --dem FILE --in FILE [options]\n"
      "Streams a stim shot file through the realtime pipeline as RPC decoding requests (an\n"
      "emulated FPGA), decodes each with a predecoder then MWPM on CPU workers, and reports\n"
      "latency percentiles, throughput, detection density and the logical error rate.\n"
      "\n"
      "input (PyMatching's flags):\n"
      "  --dem FILE                 detector error model (stim)\n"
      "  --in FILE                  detection events, one shot per record\n"
      "  --in_format 01|b8|dets     (default 01)\n"
      "  --in_includes_appended_observables\n"
      "  --obs_in FILE              true observables (for the logical error rate)\n"
      "  --obs_in_format 01|b8|dets (default 01)\n"
      "decoder:\n"
      "  --mode cpu                 CPU-only pipeline (default; gpu, hybrid and passthrough\n"
      "                             are not built yet)\n"
      "  --model PATH|local|none    ONNX predecoder (models/README.md contract) on the CPU\n"
      "                             executor, the rule-based local predecoder, or none\n"
      "                             (MWPM alone); default none, or the preset's model\n"
      "  --preset d5                models/predecoder_d5_z.onnx; give --dem/--in/--obs_in\n"
      "                             for its circuit (without --dem: prints how to make them)\n"
      "  --workers N                CPU workers, each with its own predecoder and MWPM\n"
      "                             decoder (default 2)\n"
      "  --slots N                  ring slots (default 32)\n"
      "  --pin C                    pin the dispatcher to CPU C, the consumer to C+1, the\n"
      "                             workers to C+2.. and the FPGA thread after them\n"
      "                             (default: no pinning)\n"
      "load:\n"
      "  --requests N               requests to send, looping over the shot file\n"
      "                             (default: one per shot)\n"
      "  --duration_s S             send for S seconds instead (at most --requests, default\n"
      "                             4,000,000)\n"
      "  --interval_us U            one request every U us (0 = flat out, default)\n"
      "  --timeout_ms T             wait at most T ms for the last answers (default 10000)\n"
      "  --idle_yield 0|1           idle threads sched_yield() (default: 1 when the threads\n"
      "                             outnumber the CPUs)\n"
      "output:\n"
      "  --out FILE                 predictions, one record per request in request order\n"
      "  --out_format 01|b8|dets    (default 01)\n"
      "  --json FILE                the report as JSON\n"
      "  --progress_s S             a progress line on stderr every S seconds while sending\n"
      "                             (default 10, 0 = none)\n"
      "testing:\n"
      "  --corrupt_every K          every K-th request carries a bad payload (alternately an\n"
      "                             event value 2 and a length 4 bytes short)\n"
      "  --help\n",
      f);
}

static int parse_u64(const char *flag, const char *v, uint64_t *out) {
  char *end = NULL;
  unsigned long long x = strtoull(v, &end, 10);
  if (!*v || *end || v[0] == '-') {
    fprintf(stderr, "qec-realtime: %s '%s' is not a non-negative integer\n", flag, v);
    return 1;
  }
  *out = x;
  return 0;
}

static int parse_double(const char *flag, const char *v, double *out) {
  char *end = NULL;
  double x = strtod(v, &end);
  if (!*v || *end || !isfinite(x) || x < 0) {
    fprintf(stderr, "qec-realtime: %s '%s' is not a non-negative number\n", flag, v);
    return 1;
  }
  *out = x;
  return 0;
}

static int parse_args(int argc, char **argv, opts_t *o) {
  memset(o, 0, sizeof *o);
  o->in_format = o->obs_in_format = o->out_format = "01";
  o->mode = "cpu";
  o->workers = 2;
  o->slots = 32;
  o->idle_yield = -1;
  o->pin = -1;
  o->timeout_ms = 10000;
  o->progress_s = 10;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--in_includes_appended_observables")) {
      o->appended = 1;
      continue;
    }
    static const char *const valued[] = {
        "--dem", "--in", "--in_format", "--obs_in", "--obs_in_format", "--out", "--out_format",
        "--json", "--model", "--mode", "--preset", "--workers", "--slots", "--requests",
        "--duration_s", "--interval_us", "--timeout_ms", "--idle_yield", "--corrupt_every",
        "--progress_s", "--pin", NULL};
    int known = 0;
    for (int k = 0; valued[k]; k++)
      known |= !strcmp(a, valued[k]);
    if (!known) {
      fprintf(stderr, "qec-realtime: unknown argument '%s' (--help lists them)\n", a);
      return 1;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "qec-realtime: %s needs a value\n", a);
      return 1;
    }
    const char *v = argv[++i];
    uint64_t u = 0;
    if (!strcmp(a, "--dem")) o->dem = v;
    else if (!strcmp(a, "--in")) o->in = v;
    else if (!strcmp(a, "--in_format")) o->in_format = v;
    else if (!strcmp(a, "--obs_in")) o->obs_in = v;
    else if (!strcmp(a, "--obs_in_format")) o->obs_in_format = v;
    else if (!strcmp(a, "--out")) o->out = v;
    else if (!strcmp(a, "--out_format")) o->out_format = v;
    else if (!strcmp(a, "--json")) o->json = v;
    else if (!strcmp(a, "--model")) o->model = v;
    else if (!strcmp(a, "--mode")) o->mode = v;
    else if (!strcmp(a, "--preset")) o->preset = v;
    else if (!strcmp(a, "--requests")) { if (parse_u64(a, v, &o->requests)) return 1; }
    else if (!strcmp(a, "--timeout_ms")) { if (parse_u64(a, v, &o->timeout_ms)) return 1; }
    else if (!strcmp(a, "--corrupt_every")) { if (parse_u64(a, v, &o->corrupt_every)) return 1; }
    else if (!strcmp(a, "--duration_s")) { if (parse_double(a, v, &o->duration_s)) return 1; }
    else if (!strcmp(a, "--interval_us")) { if (parse_double(a, v, &o->interval_us)) return 1; }
    else if (!strcmp(a, "--progress_s")) { if (parse_double(a, v, &o->progress_s)) return 1; }
    else {
      if (parse_u64(a, v, &u)) return 1;
      if (!strcmp(a, "--workers")) {
        if (u < 1 || u > CUDAQ_PIPELINE_MAX_WORKERS) {
          fprintf(stderr, "qec-realtime: --workers is 1..%d\n", CUDAQ_PIPELINE_MAX_WORKERS);
          return 1;
        }
        o->workers = (int)u;
      } else if (!strcmp(a, "--slots")) {
        if (u < 1 || u > 65536) {
          fprintf(stderr, "qec-realtime: --slots is 1..65536\n");
          return 1;
        }
        o->slots = (int)u;
      } else if (!strcmp(a, "--pin")) {
        if (u > 4095) {
          fprintf(stderr, "qec-realtime: --pin is a CPU number\n");
          return 1;
        }
        o->pin = (int)u;
      } else { /* --idle_yield */
        if (u > 1) {
          fprintf(stderr, "qec-realtime: --idle_yield is 0 or 1\n");
          return 1;
        }
        o->idle_yield = (int)u;
      }
    }
  }
  return 0;
}

/* Mode and preset checks; fills the preset's model. Returns 0, or 2 after
 * printing why not. */
static int check_mode_and_preset(opts_t *o) {
  if (!strcmp(o->mode, "gpu") || !strcmp(o->mode, "hybrid") || !strcmp(o->mode, "passthrough")) {
    fprintf(stderr, "qec-realtime: --mode %s is not built yet: needs a GPU path "
                    "(this slice has --mode cpu only)\n", o->mode);
    return 2;
  }
  if (strcmp(o->mode, "cpu")) {
    fprintf(stderr, "qec-realtime: --mode is cpu (gpu, hybrid and passthrough: not built yet), "
                    "not '%s'\n", o->mode);
    return 2;
  }
  if (o->preset) {
    if (strcmp(o->preset, "d5")) {
      fprintf(stderr, "qec-realtime: --preset: only d5 exists in this slice, not '%s'\n", o->preset);
      return 2;
    }
    if (!o->model)
      o->model = QRT_SOURCE_DIR "/models/predecoder_d5_z.onnx";
    if (!o->dem) {
      fprintf(stderr,
              "qec-realtime: --preset d5 needs the shots of its model's circuit. Make them with\n"
              "  %s/.venv/bin/python %s/tools/predecoder/reference_eval.py shots \\\n"
              "      --manifest %s/models/manifest.json --model %s/models/predecoder_d5_z.onnx \\\n"
              "      --shots 10000 --seed 1 --out d5_shots\n"
              "then run\n"
              "  qec-realtime --preset d5 --dem d5_shots/circuit.dem --in d5_shots/shots.b8 \\\n"
              "      --in_format b8 --obs_in d5_shots/obs.01\n",
              QRT_SOURCE_DIR, QRT_SOURCE_DIR, QRT_SOURCE_DIR, QRT_SOURCE_DIR);
      return 2;
    }
  }
  if (!o->dem || !o->in) {
    fprintf(stderr, "qec-realtime: --dem and --in are required (--help lists the flags)\n");
    return 2;
  }
  if (o->duration_s > 0 && o->interval_us > 0 && o->duration_s * 1e6 / o->interval_us > 4e9) {
    fprintf(stderr, "qec-realtime: --duration_s / --interval_us asks for too many requests\n");
    return 2;
  }
  return 0;
}

/* ---- the shot file ------------------------------------------------------ */

typedef struct shots {
  uint32_t nd, no;
  size_t n;
  int32_t *payload; /* n x nd INT32 events: the requests' payloads */
  uint64_t *obs;    /* n true observables (have_obs) */
  int have_obs;
} shots_t;

/* Reads every record of a sample file: detectors into payloads (or, with
 * nd = 0, observables only into obs). Returns 0 or 1 after a message. */
static int read_records(const char *path, const char *fmt_name, uint32_t nd, uint32_t nobs_rec,
                        shots_t *s, int obs_only) {
  cudaq_sample_format_t fmt;
  if (cudaq_sample_format_parse(fmt_name, &fmt)) {
    fprintf(stderr, "qec-realtime: formats are 01, b8 or dets, not '%s'\n", fmt_name);
    return 1;
  }
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "qec-realtime: cannot open '%s'\n", path);
    return 1;
  }
  cudaq_sample_reader_t *rd = NULL;
  uint32_t *ev = malloc(((size_t)s->nd + 1) * sizeof *ev);
  int rc = 1;
  size_t cap = obs_only ? s->n : 0, n = 0;
  if (!ev || cudaq_sample_reader_create(f, fmt, nd, nobs_rec, &rd)) {
    fprintf(stderr, "qec-realtime: out of memory\n");
    goto done;
  }
  for (;;) {
    size_t ne = 0;
    uint64_t obs = 0;
    cudaq_mwpm_error_t err;
    err.message[0] = '\0';
    cudaq_mwpm_status_t st = cudaq_sample_reader_next(rd, obs_only ? NULL : ev, &ne, &obs, &err);
    if (st == CUDAQ_MWPM_EOF)
      break;
    if (st) {
      fprintf(stderr, "qec-realtime: %s: %s (the DEM has %u detectors and %u observables)\n",
              path, err.message[0] ? err.message : cudaq_mwpm_status_str(st), s->nd, s->no);
      goto done;
    }
    if (obs_only) {
      if (n == s->n) {
        fprintf(stderr, "qec-realtime: %s has more records than the %zu shots\n", path, s->n);
        goto done;
      }
      s->obs[n++] = obs;
      continue;
    }
    if (n == cap) {
      cap = cap ? 2 * cap : 1024;
      int32_t *p = realloc(s->payload, cap * s->nd * sizeof *p);
      uint64_t *o = realloc(s->obs, cap * sizeof *o);
      if (p) s->payload = p;
      if (o) s->obs = o;
      if (!p || !o) {
        fprintf(stderr, "qec-realtime: out of memory\n");
        goto done;
      }
    }
    int32_t *row = s->payload + n * s->nd;
    memset(row, 0, s->nd * sizeof *row);
    for (size_t k = 0; k < ne; k++)
      row[ev[k]] ^= 1; /* a detector listed twice cancels, as the decoders do */
    s->obs[n++] = obs;
  }
  if (obs_only && n != s->n) {
    fprintf(stderr, "qec-realtime: %s has %zu records, the shot file %zu\n", path, n, s->n);
    goto done;
  }
  if (!obs_only)
    s->n = n;
  rc = 0;
done:
  cudaq_sample_reader_destroy(rd);
  free(ev);
  fclose(f);
  return rc;
}

static int load_shots(const opts_t *o, shots_t *s) {
  if (read_records(o->in, o->in_format, s->nd, o->appended ? s->no : 0, s, 0))
    return 1;
  if (s->n == 0) {
    fprintf(stderr, "qec-realtime: %s holds no shots\n", o->in);
    return 1;
  }
  s->have_obs = o->appended;
  if (o->obs_in && !o->appended) {
    if (read_records(o->obs_in, o->obs_in_format, 0, s->no, s, 1))
      return 1;
    s->have_obs = 1;
  }
  return 0;
}

/* ---- the run ----------------------------------------------------------- */

enum { ST_RPC = 5, ST_COUNT = 6 }; /* status counters: QRT_* 0..4, then RPC-level errors */

typedef struct app {
  const opts_t *o;
  shots_t shots;
  uint64_t capacity;      /* request indices 0..capacity-1 */
  uint64_t duration_ns;   /* 0: send capacity requests */
  uint64_t interval_ns;
  uint32_t function_id;
  size_t payload_len;
  int idle_yield;
  cudaq_ringbuffer_t ring;
  cudaq_bench_t *bench;
  int has_pd;
  int32_t *bad_payload;   /* --corrupt_every: a copy with a value 2 */
  /* FPGA thread -> main (R/A pairs labelled at the use sites) */
  volatile uint64_t submitted;
  volatile uint64_t producer_done;
  uint64_t stalls;        /* FPGA thread; read after join */
  uint64_t corrupted;     /* FPGA thread; read after join */
  uint64_t *sent_ptp;     /* per request, FPGA thread; read by the consumer after A2 */
  /* consumer thread (completion handler) -> main */
  volatile uint64_t completed;
  uint8_t *answered;      /* per request */
  uint64_t *prediction;   /* per request */
  uint64_t status_count[ST_COUNT];
  uint64_t duplicates, unknown_ids, ptp_mismatches;
  uint64_t mistakes, judged;
  uint64_t events_before, events_after, decoded;
  uint64_t pd_ns, mwpm_ns;
} app_t;

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
    const int32_t *payload = a->shots.payload + (i % a->shots.n) * a->shots.nd;
    size_t len = a->payload_len;
    uint64_t k = a->o->corrupt_every;
    if (k && i % k == k - 1) {
      a->corrupted++;
      if ((i / k) % 2 == 0) {
        memcpy(a->bad_payload, payload, len);
        a->bad_payload[0] = 2;
        payload = a->bad_payload;
      } else {
        len -= 4;
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
  }
  /* R_done: the FPGA thread sent its last request; pairs with A_done in main. */
  cudaq__store_release_u64(&a->producer_done, 1);
  return NULL;
}

/* CPU stage: one request, decoded by this worker's preallocated state. */
static size_t cpu_stage(void *user, const cudaq_cpu_stage_context_t *ctx) {
  qrt_worker_t **workers = user;
  qrt_response_t r;
  qrt_worker_decode(workers[ctx->worker_id], ctx->request, ctx->request_size, &r);
  if (ctx->max_response_size < sizeof r)
    return ctx->max_response_size + 1; /* answered CUDAQ_RPC_ERR_RESULT_TOO_LARGE */
  memcpy(ctx->response_buffer, &r, sizeof r);
  return sizeof r;
}

/* Completion handler: the consumer thread, once per harvested request. */
static void on_complete(void *user, const cudaq_completion_t *c) {
  app_t *a = user;
  const uint64_t t = cudaq_bench_now_ns();
  const uint64_t i = c->request_id;
  if (i >= a->capacity) {
    a->unknown_ids++;
    return;
  }
  if (a->answered[i]) {
    a->duplicates++;
    return;
  }
  a->answered[i] = 1;
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
      a->prediction[i] = r.prediction;
      a->decoded++;
      a->events_before += r.events_in;
      a->events_after += r.events_residual;
      a->pd_ns += r.predecoder_ns;
      a->mwpm_ns += r.mwpm_ns;
      if (a->shots.have_obs) {
        a->judged++;
        a->mistakes += r.prediction != a->shots.obs[i % a->shots.n];
      }
      if (a->has_pd)
        cudaq_bench_mark_stage(a->bench, i, 0, r.predecoder_ns);
      cudaq_bench_mark_stage(a->bench, i, a->has_pd ? 1 : 0, r.mwpm_ns);
    }
  }
  a->ptp_mismatches += h.ptp_timestamp != a->sent_ptp[i];
  cudaq_bench_mark_complete(a->bench, i, t);
  /* R_comp publishes the counters above; pairs with A_comp in main. */
  cudaq__store_release_u64(&a->completed, a->completed + 1);
}

static const char *const status_names[ST_COUNT] = {"ok", "bad_length", "bad_value",
                                                   "predecoder", "mwpm", "rpc"};

static uint64_t errors_of(const app_t *a) {
  uint64_t e = 0;
  for (int k = 1; k < ST_COUNT; k++)
    e += a->status_count[k];
  return e;
}

static void print_report(FILE *f, const app_t *a, const cudaq_bench_stats_t *st,
                         const cudaq_pipeline_stats_t *ps, uint64_t timed_out, const char *pd) {
  cudaq_bench_print(st, f);
  fprintf(f, "\nqec-realtime (mode cpu, predecoder %s, %d workers, %u detectors, %zu shots in the "
             "file)\n", pd, a->o->workers, a->shots.nd, a->shots.n);
  fprintf(f, "requests: submitted %llu, completed %llu, ok %llu, errors %llu, timed out %llu, "
             "duplicates %llu\n",
          (unsigned long long)a->submitted, (unsigned long long)a->completed,
          (unsigned long long)a->status_count[0], (unsigned long long)errors_of(a),
          (unsigned long long)timed_out, (unsigned long long)a->duplicates);
  fprintf(f, "errors by status:");
  for (int k = 1; k < ST_COUNT; k++)
    fprintf(f, " %s %llu", status_names[k], (unsigned long long)a->status_count[k]);
  fprintf(f, " (corrupted on purpose %llu)\n", (unsigned long long)a->corrupted);
  fprintf(f, "backpressure stalls %llu, worker stalls %llu, dropped %llu, ptp echo mismatches "
             "%llu\n", (unsigned long long)a->stalls, (unsigned long long)ps->worker_stalls,
          (unsigned long long)ps->dropped, (unsigned long long)a->ptp_mismatches);
  if (a->decoded) {
    double n = (double)a->decoded, nd = (double)a->shots.nd;
    fprintf(f, "detection events per shot: %.4f before, %.4f after the predecoder "
               "(density %.5f -> %.5f)\n", (double)a->events_before / n,
            (double)a->events_after / n, (double)a->events_before / n / nd,
            (double)a->events_after / n / nd);
    fprintf(f, "stage time per request: predecoder %.3f us, MWPM %.3f us\n",
            1e-3 * (double)a->pd_ns / n, 1e-3 * (double)a->mwpm_ns / n);
  }
  double lo = 0, hi = 0;
  if (a->judged && !cudaq_wilson_interval(a->mistakes, a->judged, CUDAQ_WILSON_Z95, &lo, &hi))
    fprintf(f, "logical error rate %.6g (%llu / %llu), 95%% Wilson interval [%.6g, %.6g]\n",
            (double)a->mistakes / (double)a->judged, (unsigned long long)a->mistakes,
            (unsigned long long)a->judged, lo, hi);
  else
    fprintf(f, "logical error rate: not measured (%s)\n",
            a->shots.have_obs ? "no request decoded" : "no --obs_in");
}

static void json_report(FILE *f, const app_t *a, const cudaq_bench_stats_t *st,
                        const cudaq_pipeline_stats_t *ps, uint64_t timed_out, const char *pd) {
  fprintf(f, "{\n\"program\": \"qec-realtime\", \"mode\": \"cpu\", \"predecoder\": \"");
  for (const char *c = pd; *c; c++)
    fprintf(f, *c == '"' || *c == '\\' ? "\\%c" : "%c", *c);
  fprintf(f, "\", \"workers\": %d, \"num_detectors\": %u, \"num_observables\": %u, "
             "\"shots_in_file\": %zu, \"interval_us\": %.3f,\n", a->o->workers, a->shots.nd,
          a->shots.no, a->shots.n, a->o->interval_us);
  fprintf(f, "\"counts\": {\"submitted\": %llu, \"completed\": %llu, \"ok\": %llu, "
             "\"errors\": %llu, \"timed_out\": %llu, \"duplicates\": %llu, \"unknown_ids\": %llu, "
             "\"corrupted\": %llu, \"backpressure_stalls\": %llu, \"worker_stalls\": %llu, "
             "\"dropped\": %llu, \"ptp_mismatches\": %llu},\n",
          (unsigned long long)a->submitted, (unsigned long long)a->completed,
          (unsigned long long)a->status_count[0], (unsigned long long)errors_of(a),
          (unsigned long long)timed_out, (unsigned long long)a->duplicates,
          (unsigned long long)a->unknown_ids, (unsigned long long)a->corrupted,
          (unsigned long long)a->stalls, (unsigned long long)ps->worker_stalls,
          (unsigned long long)ps->dropped, (unsigned long long)a->ptp_mismatches);
  fprintf(f, "\"errors_by_status\": {");
  for (int k = 1; k < ST_COUNT; k++)
    fprintf(f, "%s\"%s\": %llu", k > 1 ? ", " : "", status_names[k],
            (unsigned long long)a->status_count[k]);
  fprintf(f, "},\n");
  double n = a->decoded ? (double)a->decoded : NAN;
  double v[4] = {(double)a->events_before / n, (double)a->events_after / n,
                 1e-3 * (double)a->pd_ns / n, 1e-3 * (double)a->mwpm_ns / n};
  for (int k = 0; k < 4; k++)
    if (!isfinite(v[k]))
      v[k] = -1; /* printed as null below */
  fprintf(f, "\"events_per_shot\": {\"before\": ");
  v[0] < 0 ? fputs("null", f) : fprintf(f, "%.6g", v[0]);
  fputs(", \"after\": ", f);
  v[1] < 0 ? fputs("null", f) : fprintf(f, "%.6g", v[1]);
  fputs("},\n\"stage_us_per_request\": {\"predecoder\": ", f);
  v[2] < 0 ? fputs("null", f) : fprintf(f, "%.6g", v[2]);
  fputs(", \"mwpm\": ", f);
  v[3] < 0 ? fputs("null", f) : fprintf(f, "%.6g", v[3]);
  fputs("},\n\"logical_error_rate\": ", f);
  double lo = 0, hi = 0;
  if (a->judged && !cudaq_wilson_interval(a->mistakes, a->judged, CUDAQ_WILSON_Z95, &lo, &hi))
    fprintf(f, "{\"mistakes\": %llu, \"shots\": %llu, \"rate\": %.10g, \"wilson95\": [%.10g, "
               "%.10g]}", (unsigned long long)a->mistakes, (unsigned long long)a->judged,
            (double)a->mistakes / (double)a->judged, lo, hi);
  else
    fputs("null", f);
  fputs(",\n\"bench\": ", f);
  enum { NB = 40 };
  uint64_t counts[NB];
  double edges[NB + 1];
  if (st->completed && !cudaq_bench_histogram(a->bench, 0, 0, counts, edges, NB))
    cudaq_bench_write_json(st, counts, edges, NB, f); /* log-spaced latency histogram */
  else
    cudaq_bench_write_json(st, NULL, NULL, 0, f);
  fputs("}\n", f);
}

static int write_predictions(const app_t *a) {
  cudaq_sample_format_t fmt;
  if (cudaq_sample_format_parse(a->o->out_format, &fmt)) {
    fprintf(stderr, "qec-realtime: --out_format is 01, b8 or dets\n");
    return 1;
  }
  FILE *f = fopen(a->o->out, "wb");
  if (!f) {
    fprintf(stderr, "qec-realtime: cannot open '%s'\n", a->o->out);
    return 1;
  }
  int rc = 0;
  for (uint64_t i = 0; i < a->submitted && !rc; i++)
    rc = cudaq_sample_write_obs(f, fmt, a->prediction[i], a->shots.no) != CUDAQ_MWPM_OK;
  if (fclose(f) || rc) {
    fprintf(stderr, "qec-realtime: write error on '%s'\n", a->o->out);
    return 1;
  }
  return 0;
}

/* Warms each worker (MWPM event queue, executor caches) on the first shots,
 * so that no request of the run grows a buffer. */
static int warm_up(app_t *a, qrt_worker_t **w) {
  size_t n = a->shots.n < (a->has_pd ? 4u : 256u) ? a->shots.n : (a->has_pd ? 4u : 256u);
  for (int k = 0; k < a->o->workers; k++)
    for (size_t s = 0; s < n; s++) {
      qrt_response_t r;
      int32_t st = qrt_worker_decode(w[k], a->shots.payload + s * a->shots.nd, a->payload_len, &r);
      if (st == QRT_ERR_PREDECODER) {
        fprintf(stderr, "qec-realtime: the predecoder fails on shot %zu of the file\n", s);
        return 1;
      }
    }
  return 0;
}

static int run(const opts_t *o) {
  cudaq_mwpm_error_t err;
  err.message[0] = '\0';
  err.line = 0;
  cudaq_dem_t *dem = NULL;
  cudaq_mwpm_status_t mst = cudaq_dem_parse_file(o->dem, &dem, &err);
  if (mst) {
    fprintf(stderr, "qec-realtime: %s:%zu: %s\n", o->dem, err.line,
            err.message[0] ? err.message : cudaq_mwpm_status_str(mst));
    return 1;
  }
  cudaq_mwpm_graph_t *g = NULL;
  mst = cudaq_mwpm_graph_from_dem(dem, NULL, &g, &err);
  app_t a;
  memset(&a, 0, sizeof a);
  a.o = o;
  a.shots.nd = dem->num_detectors;
  a.shots.no = dem->num_observables;
  cudaq_dem_destroy(dem);
  if (mst) {
    fprintf(stderr, "qec-realtime: %s: %s\n", o->dem, cudaq_mwpm_status_str(mst));
    return 1;
  }
  int rc = 1;
  qrt_worker_t *workers[CUDAQ_PIPELINE_MAX_WORKERS] = {0};
  cudaq_pipeline_t *p = NULL;
  pthread_t fpga;
  int fpga_started = 0;
  const char *pd = o->model ? o->model : "none";
  qrt_pd_kind_t kind = !strcmp(pd, "none") ? QRT_PD_NONE
                       : !strcmp(pd, "local") ? QRT_PD_LOCAL : QRT_PD_ONNX;
  if (a.shots.nd == 0) {
    fprintf(stderr, "qec-realtime: %s has no detectors\n", o->dem);
    goto done;
  }
  if (load_shots(o, &a.shots))
    goto done;
  a.has_pd = kind != QRT_PD_NONE;
  a.payload_len = (size_t)a.shots.nd * 4u;
  for (int k = 0; k < o->workers; k++) {
    char msg[400];
    if (qrt_worker_create(g, kind, o->model, &workers[k], msg, sizeof msg)) {
      fprintf(stderr, "qec-realtime: --model %s: %s\n", pd, msg);
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
  a.bad_payload = malloc(a.payload_len);
  if (!a.answered || !a.prediction || !a.sent_ptp || !a.bad_payload ||
      cudaq_bench_create("qec-realtime cpu", a.capacity, &a.bench)) {
    fprintf(stderr, "qec-realtime: out of memory for %llu requests\n",
            (unsigned long long)a.capacity);
    goto done;
  }
  if (a.has_pd)
    cudaq_bench_set_stage_name(a.bench, 0, "predecoder");
  cudaq_bench_set_stage_name(a.bench, a.has_pd ? 1 : 0, "MWPM");
  size_t slot_size = CUDAQ_RPC_HEADER_SIZE + a.payload_len;
  if (slot_size < CUDAQ_RPC_HEADER_SIZE + sizeof(qrt_response_t))
    slot_size = CUDAQ_RPC_HEADER_SIZE + sizeof(qrt_response_t);
  slot_size = (slot_size + 63) & ~(size_t)63;
  if (cudaq_host_ringbuffer_alloc(&a.ring, (uint32_t)o->slots, (uint32_t)slot_size,
                                  CUDAQ_RING_ALLOC_HOST)) {
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
  if (cudaq_pipeline_create(&cfg, &p) || cudaq_pipeline_set_cpu_stage(p, cpu_stage, workers) ||
      cudaq_pipeline_set_completion_handler(p, on_complete, &a) || cudaq_pipeline_start(p)) {
    fprintf(stderr, "qec-realtime: pipeline: %s\n", cudaq_last_error());
    goto done;
  }
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
  uint64_t deadline = cudaq_bench_now_ns() + o->timeout_ms * 1000000ull;
  while (cudaq__load_acquire_u64(&a.completed) < cudaq__load_acquire_u64(&a.submitted) &&
         cudaq_bench_now_ns() < deadline) {
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
  }
  cudaq_bench_stop(a.bench);
  cudaq_status_t stop_st = cudaq_pipeline_stop(p); /* drains what was signalled; joins the consumer */
  if (stop_st)
    fprintf(stderr, "qec-realtime: pipeline stop: %s\n", cudaq_last_error());
  uint64_t timed_out = 0;
  for (uint64_t i = 0; i < a.submitted; i++)
    if (!a.answered[i]) {
      cudaq_bench_mark_timeout(a.bench, i);
      timed_out++;
    }
  cudaq_pipeline_stats_t ps;
  cudaq_pipeline_stats(p, &ps);
  cudaq_bench_stats_t st;
  cudaq_bench_compute(a.bench, &st);
  print_report(stdout, &a, &st, &ps, timed_out, pd);
  rc = 0;
  if (o->json) {
    FILE *jf = fopen(o->json, "w");
    if (!jf) {
      fprintf(stderr, "qec-realtime: cannot open '%s'\n", o->json);
      rc = 1;
    } else {
      json_report(jf, &a, &st, &ps, timed_out, pd);
      if (fclose(jf)) {
        fprintf(stderr, "qec-realtime: write error on '%s'\n", o->json);
        rc = 1;
      }
    }
  }
  if (o->out && write_predictions(&a))
    rc = 1;
  /* Exit status 3: the run lost or duplicated a request, or stop failed. */
  if (!rc && (timed_out || a.duplicates || a.unknown_ids || a.completed != a.submitted || stop_st))
    rc = 3;
done:
  if (fpga_started)
    pthread_join(fpga, NULL);
  if (p)
    cudaq_pipeline_destroy(p);
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
  free(a.shots.payload);
  free(a.shots.obs);
  fflush(stdout);
  return rc;
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    }
  opts_t o;
  if (parse_args(argc, argv, &o)) {
    usage(stderr);
    return 2;
  }
  int r = check_mode_and_preset(&o);
  if (r)
    return r;
  return run(&o);
}
