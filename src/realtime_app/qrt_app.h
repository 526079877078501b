/*
 * qrt_app.h - qec-realtime's program state, shared by its files:
 *   qec_realtime.c  the run: FPGA thread, stages, consumer, main
 *   qrt_args.c      flags, modes and presets
 *   qrt_shots.c     the shot file -> request payloads
 *   qrt_report.c    the text and JSON report, the predictions file
 * Private to src/realtime_app.
 */
#ifndef QRT_APP_H
#define QRT_APP_H

#include <stdint.h>
#include <stdio.h>

#include "cudaq/qec/samples.h"
#include "cudaq/realtime/bench_report.h"
#include "cudaq/realtime/cudaq_realtime.h"
#include "cudaq/realtime/pipeline.h"
#include "qrt_worker.h"

#ifndef QRT_SOURCE_DIR
#define QRT_SOURCE_DIR "."
#endif

/* --prelaunch when not given, in the GPU modes: graphs waiting at their gates
 * took the d = 13 fast hybrid decoder's request from 79.6 to 52.7-70 us (p50,
 * one request every 2 ms), d = 7's from 41.8 to 34.6-35.7 us at 100k
 * requests/s, and the accurate d = 13 model from 28.5k requests/s saturated
 * to 33.3k sustained (H200, bench/results/realtime-split-h200-2026-11-28.md). */
#define QRT_DEFAULT_PRELAUNCH 2
/* --prelaunch_max when not given, with graphs pre-launched: 0 (no boost) or
 * the limit near saturation (pipeline.h, gpu_prelaunch_max). */
#define QRT_DEFAULT_PRELAUNCH_MAX 0
#define QRT_STR(x) #x
#define QRT_XSTR(x) QRT_STR(x)
#define QRT_SPLIT_BINS 4096u   /* histograms of the GPU modes' split of dispatch + GPU */
#define QRT_SPLIT_BIN_NS 250u  /* ... 0.25 us bins, up to 1,024 us */
#define QRT_DEFAULT_DURATION_CAPACITY 4000000u /* requests a --duration_s run may send at most */

typedef enum { QRT_MODE_CPU = 0, QRT_MODE_HYBRID = 1, QRT_MODE_PASSTHROUGH = 2 } qrt_mode_t;

typedef struct opts {
  const char *dem, *in, *obs_in, *out, *json, *model, *mode_name, *preset, *plan_dir;
  const char *gpu_engine_flag; /* the last of --precision / --plan_dir / --gpu_plan given, or NULL */
  int gpu_plan_latency;        /* --gpu_plan latency: engines planned for one inference at a time */
  const char *in_format, *obs_in_format, *out_format;
  cudaq_sample_format_t in_fmt, obs_fmt, out_fmt; /* parsed by qrt_check_mode_and_preset */
  qrt_mode_t mode;
  qrt_payload_t payload;
  int appended, workers, slots, idle_yield, pin, fp16, compare_mwpm, prelaunch, prelaunch_max;
  int self_gate; /* --self_gate: with --prelaunch, the graph's first kernel waits at the gate
                    (given without pre-launch: refused) */
  int skip_layout_check; /* --skip_layout_check: the model's detector layout is not compared */
  int correlations; /* --enable_correlations: two-pass correlated matching in every MWPM */
  const char *weights_flag; /* --predecoder_weights, or NULL (auto) */
  cudaq_predecoder_weights_t weights; /* parsed by qrt_check_mode_and_preset (OFF with correlations) */
  uint64_t requests, corrupt_every, timeout_ms;
  uint64_t fail_launch_every; /* testing: every K-th GPU graph launch fails (0: none) */
  double duration_s, interval_us, progress_s;
} opts_t;

/* Prints --help. */
void qrt_usage(FILE *f);
/* Parses the flags into o. Returns 0, or 1 after a message. */
int qrt_parse_args(int argc, char **argv, opts_t *o);
/* Mode, preset and flag combination checks; fills the preset's model.
 * Returns 0, or 2 after printing why not. */
int qrt_check_mode_and_preset(opts_t *o);

typedef struct shots {
  uint32_t nd, no;
  size_t n;
  int32_t *payload; /* n x nd INT32 events */
  uint64_t *obs;    /* n true observables (have_obs) */
  int have_obs;
  size_t wire_len;  /* request payload bytes (INT32 or bit-packed) */
  uint8_t *wire;    /* n x wire_len: the requests' payloads (== payload for INT32) */
} shots_t;

/* Reads --in (and --obs_in) for a DEM of s->nd detectors and s->no
 * observables, and lays out the request payloads in o->payload's format.
 * Returns 0 or 1 after a message. */
int qrt_load_shots(const opts_t *o, shots_t *s);
void qrt_free_shots(shots_t *s);
/* Opens the file of a flag ("-": dflt, NULL where the flag takes no stream;
 * cudaq_sample_open, as qec-decode); NULL after a message naming the flag,
 * the path and the system's reason. */
FILE *qrt_open(const char *flag, const char *path, const char *mode, FILE *dflt);

enum { ST_RPC = 5, ST_COUNT = 6 }; /* status counters: QRT_* 0..4, then RPC-level errors */
/* app_t.answered[i]: what became of request i */
enum { QRT_ANSWER_NONE = 0, QRT_ANSWER_ERROR = 1, QRT_ANSWER_OK = 2, QRT_ANSWER_LATE = 3 };

typedef struct app {
  const opts_t *o;
  shots_t shots;
  uint64_t capacity;      /* request indices 0..capacity-1 */
  uint64_t duration_ns;   /* 0: send capacity requests */
  uint64_t interval_ns;
  uint32_t function_id;
  int idle_yield;
  cudaq_ringbuffer_t ring;
  cudaq_bench_t *bench;
  int has_pd;
  int weighted;           /* the workers match with the predecoder's per-shot weights */
  uint8_t *bad_payload;   /* --corrupt_every: a copy with a bad value */
  /* FPGA thread -> main (R/A pairs labelled at the use sites) */
  volatile uint64_t submitted;
  volatile uint64_t producer_done;
  uint64_t stalls;        /* FPGA thread; read after join */
  uint64_t corrupted;     /* FPGA thread; read after join */
  uint64_t *sent_ptp;     /* per request, FPGA thread; read by the consumer after A2 */
  /* main -> consumer: answers harvested at or after this time (set once the
   * FPGA thread is done: last send + --timeout_ms) count as timed out, not
   * completed (R_dl / A_dl) */
  volatile uint64_t deadline_ns;
  /* consumer thread (completion handler) -> main */
  volatile uint64_t completed; /* answered before the deadline */
  uint64_t late;          /* answered at or after the deadline (timed out) */
  uint8_t *answered;      /* per request: QRT_ANSWER_* */
  uint64_t *prediction;   /* per request */
  uint64_t status_count[ST_COUNT];
  uint64_t duplicates, unknown_ids, ptp_mismatches;
  uint64_t mistakes, judged;
  uint64_t events_before, events_after, decoded;
  uint64_t pd_ns, mwpm_ns, front_ns, overhead_ns;
  /* GPU modes: the graph's kernels (qrt_response_t::gpu_ns) and the rest of
   * dispatch + GPU (front_ns - gpu_ns: the dispatcher's pick-up, the gate or
   * launch, the CPU worker's pick-up of the ready flag), summed and as
   * histograms of QRT_SPLIT_BIN_NS bins (the last bin holds everything
   * above) for their p50 / p99 */
  uint64_t gpu_ns, gpu_pub_ns, rest_ns, split_n; /* rest_ns: the sum of max(front - gpu, 0), as hist_rest */
  uint32_t hist_gpu[QRT_SPLIT_BINS], hist_rest[QRT_SPLIT_BINS];
  /* main, after the run */
  uint64_t mwpm_alone_mistakes, mwpm_alone_judged, disagreements; /* --compare_mwpm */
  uint64_t rss_peak_kib;
  size_t gpu_bytes;
  const char *gpu_name, *engine_describe;
  double run_s;
  FILE *out_f, *json_f; /* --out, --json: opened at start-up, written after the run */
} app_t;

/* The report: text (stdout) and JSON (--json). pd names the predecoder. */
void qrt_print_report(FILE *f, const app_t *a, const cudaq_bench_stats_t *st,
                      const cudaq_pipeline_stats_t *ps, uint64_t timed_out, const char *pd);
void qrt_json_report(FILE *f, const app_t *a, const cudaq_bench_stats_t *st,
                     const cudaq_pipeline_stats_t *ps, uint64_t timed_out, const char *pd);
uint64_t qrt_errors_of(const app_t *a);
const char *qrt_mode_name(qrt_mode_t m);
/* --out (a->out_f): predictions in request order. Returns 0 or 1 after a
 * message. */
int qrt_write_predictions(const app_t *a);

#endif
