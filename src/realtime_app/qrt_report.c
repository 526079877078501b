/* qec-realtime: the report and the predictions file (qrt_app.h). */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudaq/qec/predecoder.h"
#include "cudaq/qec/samples.h"
#include "qrt_app.h"

static const char *const status_names[ST_COUNT] = {"ok", "bad_length", "bad_value",
                                                   "predecoder", "mwpm", "rpc"};

const char *qrt_mode_name(qrt_mode_t m) {
  return m == QRT_MODE_HYBRID ? "hybrid" : m == QRT_MODE_PASSTHROUGH ? "passthrough" : "cpu";
}

/* Quantile q (0..1) in us of a split histogram (QRT_SPLIT_BINS bins of
 * QRT_SPLIT_BIN_NS; a bin's upper edge); -1 when it is empty. */
static double hist_quantile_us(const uint32_t *hist, uint64_t n, double q) {
  if (!n)
    return -1;
  uint64_t want = (uint64_t)(q * (double)n), seen = 0;
  if (want >= n)
    want = n - 1;
  for (uint32_t b = 0; b < QRT_SPLIT_BINS; b++) {
    seen += hist[b];
    if (seen > want)
      return 1e-3 * (double)((b + 1u) * QRT_SPLIT_BIN_NS);
  }
  return 1e-3 * (double)(QRT_SPLIT_BINS * QRT_SPLIT_BIN_NS);
}

/* GPU modes' split of dispatch + GPU, for the text and the JSON report alike:
 * the graph's kernels mean / p50 / p99, publish mean, the rest mean / p50 /
 * p99 (us). a->split_n must be > 0. */
enum { SPLIT_GPU, SPLIT_GPU_P50, SPLIT_GPU_P99, SPLIT_PUB, SPLIT_REST, SPLIT_REST_P50, SPLIT_REST_P99, SPLIT_N };
static void split_us(const app_t *a, double v[SPLIT_N]) {
  const double n = (double)a->split_n;
  v[SPLIT_GPU] = 1e-3 * (double)a->gpu_ns / n;
  v[SPLIT_GPU_P50] = hist_quantile_us(a->hist_gpu, a->split_n, 0.5);
  v[SPLIT_GPU_P99] = hist_quantile_us(a->hist_gpu, a->split_n, 0.99);
  v[SPLIT_PUB] = 1e-3 * (double)a->gpu_pub_ns / n;
  v[SPLIT_REST] = 1e-3 * (double)a->rest_ns / n; /* clamped per request, as its histogram */
  v[SPLIT_REST_P50] = hist_quantile_us(a->hist_rest, a->split_n, 0.5);
  v[SPLIT_REST_P99] = hist_quantile_us(a->hist_rest, a->split_n, 0.99);
}

uint64_t qrt_errors_of(const app_t *a) {
  uint64_t e = 0;
  for (int k = 1; k < ST_COUNT; k++)
    e += a->status_count[k];
  return e;
}

/* The workers' MWPM as the reports name it. */
static const char *qrt_mwpm_kind(const app_t *a) {
  return a->o->correlations ? "correlated" : a->weighted ? "weighted" : "plain";
}

void qrt_print_report(FILE *f, const app_t *a, const cudaq_bench_stats_t *st,
                         const cudaq_pipeline_stats_t *ps, uint64_t timed_out, const char *pd) {
  cudaq_bench_print(st, f);
  fprintf(f, "\nqec-realtime (mode %s, predecoder %s, %s MWPM, %d workers, %u detectors, %s "
             "payload, %zu shots in the file)\n", qrt_mode_name(a->o->mode), pd,
          qrt_mwpm_kind(a), a->o->workers, a->shots.nd,
          a->o->payload == QRT_PAYLOAD_BITS ? "bit-packed" : "INT32", a->shots.n);
  if (a->o->mode != QRT_MODE_CPU)
    fprintf(f, "GPU: %s, %s%s, device memory allocated by the GPU stage %.2f MiB\n", a->gpu_name,
            a->o->mode == QRT_MODE_HYBRID ? (a->o->fp16 ? "FP16" : "FP32") : "copies only",
            a->o->mode != QRT_MODE_HYBRID ? "" : a->o->gpu_plan_latency ? ", planned for latency"
                                                                          : ", planned for throughput",
            (double)a->gpu_bytes / 1048576.0);
  fprintf(f, "peak resident memory %.1f MiB\n", (double)a->rss_peak_kib / 1024.0);
  fprintf(f, "requests: submitted %llu, completed %llu, ok %llu, errors %llu, timed out %llu, "
             "duplicates %llu\n",
          (unsigned long long)a->submitted, (unsigned long long)a->completed,
          (unsigned long long)a->status_count[0], (unsigned long long)qrt_errors_of(a),
          (unsigned long long)timed_out, (unsigned long long)a->duplicates);
  if (timed_out)
    fprintf(f, "timed out: %llu requests not answered within --timeout_ms %llu (ms) of the last send "
               "(%llu of them answered later, while the pipeline stopped: not completed, not in "
               "the latencies)\n", (unsigned long long)timed_out,
            (unsigned long long)a->o->timeout_ms, (unsigned long long)a->late);
  fprintf(f, "errors by status:");
  for (int k = 1; k < ST_COUNT; k++)
    fprintf(f, " %s %llu", status_names[k], (unsigned long long)a->status_count[k]);
  fprintf(f, " (corrupted on purpose %llu)\n", (unsigned long long)a->corrupted);
  fprintf(f, "backpressure stalls %llu, worker stalls %llu, dropped %llu, ptp echo mismatches "
             "%llu\n", (unsigned long long)a->stalls, (unsigned long long)ps->worker_stalls,
          (unsigned long long)ps->dropped, (unsigned long long)a->ptp_mismatches);
  if (a->o->prelaunch)
    fprintf(f, "pre-launched graphs: %llu requests found theirs waiting (the rest launched on "
               "arrival), failed re-arms %llu, released at stop %llu, re-arms past --prelaunch %llu\n",
            (unsigned long long)ps->prelaunched, (unsigned long long)ps->prelaunch_failures,
            (unsigned long long)ps->prelaunch_cancelled, (unsigned long long)ps->prelaunch_boosted);
  if (a->decoded) {
    double n = (double)a->decoded, nd = (double)a->shots.nd;
    fprintf(f, "detection events per shot: %.4f before, %.4f after the predecoder "
               "(density %.5f -> %.5f)\n", (double)a->events_before / n,
            (double)a->events_after / n, (double)a->events_before / n / nd,
            (double)a->events_after / n / nd);
    fprintf(f, "stage time per request: %s %.3f us, predecoder %.3f us, MWPM %.3f us, worker "
               "overhead %.3f us, consumer lag %.3f us (mean latency %.3f us)\n",
            a->o->mode == QRT_MODE_CPU ? "dispatch (send to CPU stage)"
                                       : "dispatch + GPU (send to CPU stage)",
            1e-3 * (double)a->front_ns / n, 1e-3 * (double)a->pd_ns / n,
            1e-3 * (double)a->mwpm_ns / n, 1e-3 * (double)a->overhead_ns / n,
            st->unattributed_us, st->mean_us);
    if (a->split_n) {
      double v[SPLIT_N];
      split_us(a, v);
      fprintf(f, "dispatch + GPU split: the graph's kernels (first kernel's start to the ready flag, "
                 "GPU clock) mean %.3f p50 %.2f p99 %.2f us, of which publish %.3f; the rest (ring "
                 "pick-up, gate or launch, ready-flag pick-up) mean %.3f p50 %.2f p99 %.2f us\n",
              v[SPLIT_GPU], v[SPLIT_GPU_P50], v[SPLIT_GPU_P99], v[SPLIT_PUB], v[SPLIT_REST],
              v[SPLIT_REST_P50], v[SPLIT_REST_P99]);
    }
  }
  double lo = 0, hi = 0;
  if (a->judged && !cudaq_wilson_interval(a->mistakes, a->judged, CUDAQ_WILSON_Z95, &lo, &hi))
    fprintf(f, "logical error rate %.6g (%llu / %llu), 95%% Wilson interval [%.6g, %.6g]\n",
            (double)a->mistakes / (double)a->judged, (unsigned long long)a->mistakes,
            (unsigned long long)a->judged, lo, hi);
  else
    fprintf(f, "logical error rate: not measured (%s)\n",
            a->shots.have_obs ? "no request decoded" : "no --obs_in");
  if (a->mwpm_alone_judged &&
      !cudaq_wilson_interval(a->mwpm_alone_mistakes, a->mwpm_alone_judged, CUDAQ_WILSON_Z95, &lo,
                             &hi)) {
    char ratio[32] = "n/a"; /* MWPM alone made no mistake */
    if (a->mwpm_alone_mistakes)
      snprintf(ratio, sizeof ratio, "%.3f", (double)a->mistakes / (double)a->mwpm_alone_mistakes);
    fprintf(f, "%sMWPM alone on the same requests: %.6g (%llu / %llu) [%.6g, %.6g]; ratio %s; "
               "predictions differ on %llu\n", a->o->correlations ? "correlated " : "",
            (double)a->mwpm_alone_mistakes / (double)a->mwpm_alone_judged,
            (unsigned long long)a->mwpm_alone_mistakes,
            (unsigned long long)a->mwpm_alone_judged, lo, hi, ratio,
            (unsigned long long)a->disagreements);
  }
}

void qrt_json_report(FILE *f, const app_t *a, const cudaq_bench_stats_t *st,
                        const cudaq_pipeline_stats_t *ps, uint64_t timed_out, const char *pd) {
  fprintf(f, "{\n\"program\": \"qec-realtime\", \"mode\": \"%s\", \"payload\": \"%s\", "
             "\"precision\": \"%s\", \"gpu_plan\": \"%s\", \"gpu\": \"%s\", \"gpu_stage_bytes\": %zu, "
             "\"rss_peak_kib\": %llu, \"mwpm\": \"%s\", \"predecoder\": \"",
          qrt_mode_name(a->o->mode), a->o->payload == QRT_PAYLOAD_BITS ? "bits" : "int32",
          a->o->mode == QRT_MODE_HYBRID ? (a->o->fp16 ? "fp16" : "fp32") : "",
          a->o->mode != QRT_MODE_HYBRID ? "" : a->o->gpu_plan_latency ? "latency" : "throughput",
          a->gpu_name ? a->gpu_name : "", a->gpu_bytes, (unsigned long long)a->rss_peak_kib,
          qrt_mwpm_kind(a));
  for (const char *c = pd; *c; c++)
    fprintf(f, *c == '"' || *c == '\\' ? "\\%c" : "%c", *c);
  fprintf(f, "\", \"workers\": %d, \"num_detectors\": %u, \"num_observables\": %u, "
             "\"shots_in_file\": %zu, \"interval_us\": %.3f,\n", a->o->workers, a->shots.nd,
          a->shots.no, a->shots.n, a->o->interval_us);
  fprintf(f, "\"counts\": {\"submitted\": %llu, \"completed\": %llu, \"ok\": %llu, "
             "\"errors\": %llu, \"timed_out\": %llu, \"answered_late\": %llu, \"duplicates\": %llu, \"unknown_ids\": %llu, "
             "\"corrupted\": %llu, \"backpressure_stalls\": %llu, \"worker_stalls\": %llu, "
             "\"dropped\": %llu, \"ptp_mismatches\": %llu, \"prelaunched\": %llu, "
             "\"prelaunch_failures\": %llu, \"prelaunch_boosted\": %llu},\n",
          (unsigned long long)a->submitted, (unsigned long long)a->completed,
          (unsigned long long)a->status_count[0], (unsigned long long)qrt_errors_of(a),
          (unsigned long long)timed_out, (unsigned long long)a->late,
          (unsigned long long)a->duplicates, (unsigned long long)a->unknown_ids, (unsigned long long)a->corrupted,
          (unsigned long long)a->stalls, (unsigned long long)ps->worker_stalls,
          (unsigned long long)ps->dropped, (unsigned long long)a->ptp_mismatches,
          (unsigned long long)ps->prelaunched, (unsigned long long)ps->prelaunch_failures,
          (unsigned long long)ps->prelaunch_boosted);
  fprintf(f, "\"errors_by_status\": {");
  for (int k = 1; k < ST_COUNT; k++)
    fprintf(f, "%s\"%s\": %llu", k > 1 ? ", " : "", status_names[k],
            (unsigned long long)a->status_count[k]);
  fprintf(f, "},\n");
  double n = a->decoded ? (double)a->decoded : NAN;
  double v[6] = {(double)a->events_before / n, (double)a->events_after / n,
                 1e-3 * (double)a->pd_ns / n, 1e-3 * (double)a->mwpm_ns / n,
                 1e-3 * (double)a->front_ns / n, 1e-3 * (double)a->overhead_ns / n};
  for (int k = 0; k < 6; k++)
    if (!isfinite(v[k]))
      v[k] = -1; /* printed as null below */
  fprintf(f, "\"events_per_shot\": {\"before\": ");
  v[0] < 0 ? fputs("null", f) : fprintf(f, "%.6g", v[0]);
  fputs(", \"after\": ", f);
  v[1] < 0 ? fputs("null", f) : fprintf(f, "%.6g", v[1]);
  /* dispatch (GPU modes: dispatch + copy + inference), predecoder (cpu mode),
   * MWPM, worker overhead; consumer lag is the bench's unattributed_us */
  static const char *const keys[4] = {"dispatch", "predecoder", "mwpm", "worker_overhead"};
  const int idx[4] = {4, 2, 3, 5};
  fputs("},\n\"stage_us_per_request\": {", f);
  for (int k = 0; k < 4; k++) {
    fprintf(f, "%s\"%s\": ", k ? ", " : "", keys[k]);
    v[idx[k]] < 0 ? fputs("null", f) : fprintf(f, "%.6g", v[idx[k]]);
  }
  fputs(", \"consumer_lag\": ", f);
  st->completed ? fprintf(f, "%.6g", st->unattributed_us) : fputs("null", f);
  if (a->split_n) { /* GPU modes: dispatch split into the graph's kernels and the rest */
    double sp[SPLIT_N];
    split_us(a, sp);
    fprintf(f, ", \"gpu_kernels\": %.6g, \"gpu_publish\": %.6g, \"gpu_kernels_p50\": %.6g, "
               "\"gpu_kernels_p99\": %.6g, \"dispatch_rest_p50\": %.6g, \"dispatch_rest_p99\": %.6g",
            sp[SPLIT_GPU], sp[SPLIT_PUB], sp[SPLIT_GPU_P50], sp[SPLIT_GPU_P99], sp[SPLIT_REST_P50], sp[SPLIT_REST_P99]);
  }
  fputs("},\n\"logical_error_rate\": ", f);
  double lo = 0, hi = 0;
  if (a->judged && !cudaq_wilson_interval(a->mistakes, a->judged, CUDAQ_WILSON_Z95, &lo, &hi))
    fprintf(f, "{\"mistakes\": %llu, \"shots\": %llu, \"rate\": %.10g, \"wilson95\": [%.10g, "
               "%.10g]}", (unsigned long long)a->mistakes, (unsigned long long)a->judged,
            (double)a->mistakes / (double)a->judged, lo, hi);
  else
    fputs("null", f);
  fputs(",\n\"mwpm_alone\": ", f);
  if (a->mwpm_alone_judged)
    fprintf(f, "{\"mistakes\": %llu, \"shots\": %llu, \"disagreements\": %llu}",
            (unsigned long long)a->mwpm_alone_mistakes, (unsigned long long)a->mwpm_alone_judged,
            (unsigned long long)a->disagreements);
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

int qrt_write_predictions(const app_t *a) {
  const cudaq_sample_format_t fmt = a->o->out_fmt;
  int rc = 0;
  for (uint64_t i = 0; i < a->submitted && !rc; i++)
    rc = cudaq_sample_write_obs(a->out_f, fmt, a->prediction[i], a->shots.no) != CUDAQ_MWPM_OK;
  if (fflush(a->out_f) || rc) {
    fprintf(stderr, "qec-realtime: write error on --out '%s'\n", a->o->out);
    return 1;
  }
  return 0;
}

/* Warms each worker (MWPM event queue, executor caches) on the first shots,
 * so that no request of the run grows a buffer. */
