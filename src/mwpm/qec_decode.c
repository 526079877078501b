/*
 * qec-decode: command-line MWPM decoding with the commands and flags of
 * PyMatching's command line, so that scripts written for one run with the
 * other.
 *
 *   qec-decode predict --dem FILE [--in FILE] [--in_format 01|b8|dets]
 *                      [--out FILE] [--out_format 01|b8|dets]
 *                      [--in_includes_appended_observables]
 *   qec-decode count_mistakes --dem FILE [--in FILE] [--in_format ...]
 *                      [--obs_in FILE] [--obs_in_format ...]
 *                      [--in_includes_appended_observables] [--out FILE] [--time]
 *
 * count_mistakes prints "mistakes / shots". Extra flags:
 * --merge_strategy independent|smallest_weight, and a predecoder before
 * MWPM (include/cudaq/qec/predecoder.h):
 *
 *   --predecoder MODEL.onnx|local  [--device cpu|gpu] [--precision fp32|fp16]
 *   [--local_weight_factor F] [--json FILE]
 *
 * With a predecoder the prediction is the model's logical frame XOR the MWPM
 * prediction on its residual events; count_mistakes also decodes every shot
 * with MWPM alone and prints a comparison report after its usual line (and
 * writes it as JSON with --json). Without --predecoder the behaviour is
 * PyMatching's.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cudaq/qec/dem.h"
#include "cudaq/qec/mwpm.h"
#include "cudaq/qec/predecoder.h"
#include "cudaq/qec/samples.h"
#include "cudaq/realtime/bench_report.h"

typedef struct opts {
  const char *cmd, *dem, *in, *out, *obs_in;
  const char *in_format, *out_format, *obs_in_format, *merge;
  const char *predecoder, *device, *precision, *local_factor, *json, *weights;
  int appended, timing, correlations, skip_layout_check;
  int threads; /* --threads: 1 = the streaming one-thread loop */
} opts_t;

#ifndef CUDAQ_VERSION
#define CUDAQ_VERSION "unknown"
#endif

static void usage(FILE *f) {
  fputs("usage:\n"
        "  qec-decode predict --dem FILE [--in FILE] [--in_format 01|b8|dets (default b8)]\n"
        "                     [--out FILE] [--out_format 01|b8|dets (default 01)]\n"
        "                     [--in_includes_appended_observables]\n"
        "  qec-decode count_mistakes --dem FILE [--in FILE] [--in_format 01|b8|dets (default 01)]\n"
        "                     [--obs_in FILE] [--obs_in_format 01|b8|dets (default 01)]\n"
        "                     [--in_includes_appended_observables] [--out FILE] [--time]\n"
        "  common: [--merge_strategy independent|smallest_weight]\n"
        "          [--enable_correlations]   two-pass correlated matching from the DEM's\n"
        "                     decomposed errors ('^'), as PyMatching 2.4's\n"
        "          [--threads N]   decode on N threads, 4096 shots at a time\n"
        "                     (cudaq_mwpm_decode_batch); same output (default 1)\n"
        "  predecoder (before MWPM; prediction = frame XOR MWPM(residual); count_mistakes\n"
        "  also decodes with MWPM alone and prints a comparison report):\n"
        "          [--predecoder MODEL.onnx|local]   an ONNX model (models/README.md\n"
        "                     contract) or the rule-based local predecoder\n"
        "          [--device cpu|gpu] [--precision fp32|fp16]   ONNX model: CPU executor\n"
        "                     (default) or GPU engine; fp16 on the GPU only\n"
        "          [--skip_layout_check]   ONNX model: do not compare the detector layout\n"
        "                     it records with the DEM's coordinates (a DEM without\n"
        "                     coordinates needs it; you vouch that the model fits)\n"
        "          [--predecoder_weights auto|on|off]   ONNX model with edge logits\n"
        "                     (models/README.md): MWPM on the residual of threshold 0\n"
        "                     with the network's per-shot edge weights (auto: where the\n"
        "                     model has them, unless --enable_correlations; off: its\n"
        "                     thresholded residual)\n"
        "          [--local_weight_factor F]   local: likely edges weigh at most F x the\n"
        "                     lightest detector-detector edge (default 1.3)\n"
        "          [--json FILE]   count_mistakes: the report (predecoder + MWPM vs MWPM\n"
        "                     alone) also as JSON\n"
        "  qec-decode --help | -h | --version\n"
        "Defaults are PyMatching 2.4's: predict reads b8, count_mistakes reads 01.\n",
        f);
}

static int parse_args(int argc, char **argv, opts_t *o) {
  memset(o, 0, sizeof *o);
  o->merge = "independent";
  o->threads = 1;
  if (argc < 2)
    return -1;
  o->cmd = argv[1];
  /* PyMatching 2.4's defaults: predict reads b8 and writes 01; count_mistakes
   * reads 01 detection events and 01 observables. */
  o->in_format = !strcmp(o->cmd, "predict") ? "b8" : "01";
  o->out_format = o->obs_in_format = "01";
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    const char **slot = NULL;
    if (!strcmp(a, "--in_includes_appended_observables")) {
      o->appended = 1;
      continue;
    }
    if (!strcmp(a, "--time")) {
      o->timing = 1;
      continue;
    }
    if (!strcmp(a, "--enable_correlations")) {
      o->correlations = 1;
      continue;
    }
    if (!strcmp(a, "--skip_layout_check")) {
      o->skip_layout_check = 1;
      continue;
    }
    if (!strcmp(a, "--threads")) {
      char *end = NULL;
      long t = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : 0;
      if (i + 1 >= argc || !end || *end || end == argv[i + 1] || t < 1 ||
          t > CUDAQ_MWPM_BATCH_MAX_THREADS) {
        fprintf(stderr, "qec-decode: --threads needs a number of threads from 1 to %d\n",
                CUDAQ_MWPM_BATCH_MAX_THREADS);
        return -1;
      }
      o->threads = (int)t;
      i++;
      continue;
    }
    if (!strcmp(a, "--dem"))
      slot = &o->dem;
    else if (!strcmp(a, "--in"))
      slot = &o->in;
    else if (!strcmp(a, "--out"))
      slot = &o->out;
    else if (!strcmp(a, "--obs_in"))
      slot = &o->obs_in;
    else if (!strcmp(a, "--in_format"))
      slot = &o->in_format;
    else if (!strcmp(a, "--out_format"))
      slot = &o->out_format;
    else if (!strcmp(a, "--obs_in_format"))
      slot = &o->obs_in_format;
    else if (!strcmp(a, "--merge_strategy"))
      slot = &o->merge;
    else if (!strcmp(a, "--predecoder"))
      slot = &o->predecoder;
    else if (!strcmp(a, "--device"))
      slot = &o->device;
    else if (!strcmp(a, "--precision"))
      slot = &o->precision;
    else if (!strcmp(a, "--local_weight_factor"))
      slot = &o->local_factor;
    else if (!strcmp(a, "--json"))
      slot = &o->json;
    else if (!strcmp(a, "--predecoder_weights"))
      slot = &o->weights;
    if (!slot) {
      fprintf(stderr, "qec-decode: unknown argument '%s'\n", a);
      return -1;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "qec-decode: %s needs a value\n", a);
      return -1;
    }
    *slot = argv[++i];
  }
  if (strcmp(o->cmd, "predict") && strcmp(o->cmd, "count_mistakes")) {
    fprintf(stderr, "qec-decode: unknown command '%s' (predict or count_mistakes)\n", o->cmd);
    return -1;
  }
  if (!o->dem) {
    fprintf(stderr, "qec-decode: --dem is required\n");
    return -1;
  }
  return 0;
}

/* Opens the file of a flag (cudaq_sample_open: "-" or none is dflt). */
static FILE *open_or(const char *flag, const char *path, const char *mode, FILE *dflt) {
  char msg[1024];
  FILE *f = cudaq_sample_open(path, mode, dflt, flag, msg, sizeof msg);
  if (!f)
    fprintf(stderr, "qec-decode: %s\n", msg);
  return f;
}

/* --out and --json against the files the run reads and against each other
 * (cudaq_sample_outputs_clobber). Returns 0, or 1 after the message. */
static int check_outputs(const opts_t *o) {
  const char *model = o->predecoder && strcmp(o->predecoder, "local") ? o->predecoder : NULL;
  const char *const ins[][2] = {{"--dem", o->dem}, {"--in", o->in}, {"--obs_in", o->obs_in},
                                {"--predecoder", model}};
  char msg[1024];
  if (!cudaq_sample_outputs_clobber(o->out, o->json, ins, 4, msg, sizeof msg))
    return 0;
  fprintf(stderr, "qec-decode: %s\n", msg);
  return 1;
}

/* Parses one format flag; names the flag and the bad value. */
static int parse_format(const char *flag, const char *name, cudaq_sample_format_t *out) {
  if (cudaq_sample_format_parse(name, out) == CUDAQ_MWPM_OK)
    return 0;
  fprintf(stderr, "qec-decode: %s '%s' is not a format: use 01, b8 or dets\n", flag, name);
  return 1;
}

/* Before decoding a regular input file: checks that its records fit the DEM
 * (cudaq_sample_file_check) and says why not. */
static int check_width(const char *path, cudaq_sample_format_t fmt, uint32_t nd, uint32_t nobs,
                       const char *format_flag) {
  char msg[1024];
  if (!cudaq_sample_file_check(path, fmt, nd, nobs, format_flag, msg, sizeof msg))
    return 0;
  fprintf(stderr, "qec-decode: %s\n", msg);
  return 1;
}

/* The message for a shot that no set of errors explains. */
static void no_matching_message(size_t shot, const char *which) {
  fprintf(stderr, "qec-decode: shot %zu: %sno set of errors in the DEM produces these detection "
                  "events (a part of the matching graph with no boundary edge holds an odd number of "
                  "them): are the shots from this DEM's circuit, in its detector order?\n",
          shot, which);
}

/* Checks the predecoder flags; fills the ONNX / local options. Prints the
 * problem and returns non-zero on a bad combination. */
static int check_predecoder_flags(const opts_t *o, int cmd_predict,
                                  cudaq_onnx_predecoder_options_t *onnx,
                                  cudaq_local_predecoder_options_t *local) {
  cudaq_onnx_predecoder_options_init(onnx);
  cudaq_local_predecoder_options_init(local);
  const char *needs = o->device ? "--device" : o->precision ? "--precision"
                      : o->local_factor ? "--local_weight_factor" : o->json ? "--json"
                      : o->weights ? "--predecoder_weights" : NULL;
  if (!o->predecoder && o->skip_layout_check && !needs)
    needs = "--skip_layout_check";
  if (!o->predecoder) {
    if (needs)
      fprintf(stderr, "qec-decode: %s needs --predecoder\n", needs);
    return needs != NULL;
  }
  if (o->json && cmd_predict) {
    fprintf(stderr, "qec-decode: --json is for count_mistakes (the report)\n");
    return 1;
  }
  if (!strcmp(o->predecoder, "local")) {
    if (o->skip_layout_check) {
      fprintf(stderr, "qec-decode: --skip_layout_check is for ONNX models, not --predecoder local\n");
      return 1;
    }
    if (o->device || o->precision || o->weights) {
      fprintf(stderr, "qec-decode: %s is for ONNX models, not --predecoder local\n",
              o->device ? "--device" : o->precision ? "--precision" : "--predecoder_weights");
      return 1;
    }
    char *end = NULL;
    if (o->local_factor) {
      local->weight_factor = strtod(o->local_factor, &end);
      if (end == o->local_factor || *end || !isfinite(local->weight_factor) ||
          local->weight_factor <= 0) {
        fprintf(stderr, "qec-decode: --local_weight_factor '%s' is not a positive number\n",
                o->local_factor);
        return 1;
      }
    }
    return 0;
  }
  if (o->local_factor) {
    fprintf(stderr, "qec-decode: --local_weight_factor is for --predecoder local\n");
    return 1;
  }
  if (o->device && strcmp(o->device, "cpu") && strcmp(o->device, "gpu")) {
    fprintf(stderr, "qec-decode: --device is cpu or gpu, not '%s'\n", o->device);
    return 1;
  }
  if (o->precision && strcmp(o->precision, "fp32") && strcmp(o->precision, "fp16")) {
    fprintf(stderr, "qec-decode: --precision is fp32 or fp16, not '%s'\n", o->precision);
    return 1;
  }
  onnx->device = o->device && !strcmp(o->device, "gpu") ? CUDAQ_PREDECODER_GPU : CUDAQ_PREDECODER_CPU;
  onnx->precision = o->precision && !strcmp(o->precision, "fp16") ? CUDAQ_PREDECODER_FP16
                                                                  : CUDAQ_PREDECODER_FP32;
  switch (cudaq_predecoder_weights_flag(o->weights, o->correlations, &onnx->weights)) {
    case -1:
      fprintf(stderr, "qec-decode: --predecoder_weights is auto, on or off, not '%s'\n", o->weights);
      return 1;
    case -2: /* correlated matching reweights the DEM's edges itself */
      fprintf(stderr, "qec-decode: --enable_correlations does not combine with --predecoder_weights on\n");
      return 1;
  }
  if (onnx->precision == CUDAQ_PREDECODER_FP16 && onnx->device == CUDAQ_PREDECODER_CPU) {
    fprintf(stderr, "qec-decode: --precision fp16 needs --device gpu (the CPU executor is fp32)\n");
    return 1;
  }
  return 0;
}

static double now_s(void) { return 1e-9 * (double)cudaq_bench_now_ns(); }

/* The events of the shots kept for the MWPM timing passes (shot s: ev[off[s]
 * .. off[s + 1]), nshots shots). */
typedef struct shot_list {
  uint32_t *ev;
  size_t *off;
  size_t nshots;
} shot_list_t;

/* count_mistakes with a predecoder times MWPM on raw and residual events in
 * passes over up to TIMING_SHOTS shots, after the run, each pass decoding
 * its shots back to back (as a CPU worker that only matches does): timed
 * inside the run, right after the shot's inference, each decode would start
 * on caches the inference has just flushed, and the two times would measure
 * that more than matching. At most TIMING_EVENTS events per list. */
#define TIMING_SHOTS 100000
#define TIMING_EVENTS (1u << 22)
/* A weighted predecoder's per-shot edge logits kept for the residual pass
 * (at most this many floats: the kept shots are fewer at large distances). */
#define TIMING_WEIGHTS (1u << 23)

/* Everything one decoding run holds. */
typedef struct run_state {
  cudaq_mwpm_decoder_t *dec;
  int correlations;              /* --enable_correlations: two-pass decode */
  cudaq_predecoder_t *pd;        /* NULL: MWPM alone */
  uint32_t *residual;
  size_t num_residual;           /* of the last shot */
  shot_list_t timing[2];         /* raw, residual (count_mistakes with a predecoder) */
  /* A weighted predecoder's edge logits of the shot, which MWPM reads as
   * weights through the map set on dec (cudaq_predecoder_edge_weights, read
   * once: the pointer is stable); w_values NULL otherwise. */
  const float *w_values;
  size_t w_num;
  float *timing_w;               /* weighted predecoder: each kept shot's edge logits */
  size_t timing_w_shots;         /* room for this many shots' weights */
  uint64_t *shot_ns;             /* one timed pass: each kept shot's decode, ns */
  cudaq_predecoder_report_t rep;
} run_state_t;

static cudaq_mwpm_status_t mwpm(run_state_t *r, const uint32_t *events, size_t ne,
                                cudaq_mwpm_result_t *res) {
  return r->correlations ? cudaq_mwpm_decode_correlated(r->dec, events, ne, res)
                         : cudaq_mwpm_decode(r->dec, events, ne, res);
}

/* MWPM on a predecoder's residual: with the shot's edge logits as weights
 * where the predecoder gives them (weighted mode: logits not NULL; the
 * run's, or a kept shot's in the timing passes), else as mwpm(). */
static cudaq_mwpm_status_t mwpm_residual(run_state_t *r, const uint32_t *events, size_t ne,
                                         const float *logits, cudaq_mwpm_result_t *res) {
  if (logits)
    return cudaq_mwpm_decode_mapped(r->dec, events, ne, logits, res);
  return mwpm(r, events, ne, res);
}

/* Keeps a shot for the timing passes while both lists have room. */
static void keep_for_timing(run_state_t *r, const uint32_t *raw, size_t ne) {
  shot_list_t *a = &r->timing[0], *b = &r->timing[1];
  if (!a->ev || !b->ev || a->nshots == TIMING_SHOTS || a->off[a->nshots] + ne > TIMING_EVENTS ||
      b->off[b->nshots] + r->num_residual > TIMING_EVENTS ||
      (r->w_values && a->nshots == r->timing_w_shots))
    return;
  if (r->w_values)
    memcpy(r->timing_w + a->nshots * r->w_num, r->w_values, r->w_num * sizeof *r->w_values);
  memcpy(a->ev + a->off[a->nshots], raw, ne * sizeof *raw);
  a->off[a->nshots + 1] = a->off[a->nshots] + ne;
  a->nshots++;
  memcpy(b->ev + b->off[b->nshots], r->residual, r->num_residual * sizeof *r->residual);
  b->off[b->nshots + 1] = b->off[b->nshots] + r->num_residual;
  b->nshots++;
}

static int timing_alloc(run_state_t *r) {
  if (r->w_values) {
    r->timing_w_shots = TIMING_WEIGHTS / (r->w_num ? r->w_num : 1);
    if (r->timing_w_shots > TIMING_SHOTS)
      r->timing_w_shots = TIMING_SHOTS;
    if (!(r->timing_w = malloc((r->timing_w_shots * r->w_num + 1) * sizeof *r->timing_w)))
      return 1;
  }
  for (int k = 0; k < 2; k++) {
    shot_list_t *l = &r->timing[k];
    l->ev = malloc(TIMING_EVENTS * sizeof *l->ev);
    l->off = calloc(TIMING_SHOTS + 1, sizeof *l->off);
    if (!l->ev || !l->off)
      return 1;
  }
  return !(r->shot_ns = malloc(TIMING_SHOTS * sizeof *r->shot_ns));
}

static void timing_free(run_state_t *r) {
  free(r->timing_w);
  free(r->shot_ns);
  for (int k = 0; k < 2; k++) {
    free(r->timing[k].ev);
    free(r->timing[k].off);
  }
}

/* MWPM on kept shot s of a list; the residual list of a weighted predecoder
 * is matched with the shot's kept weights. Each was decoded once already:
 * no status to check. */
static void decode_kept(run_state_t *r, const shot_list_t *l, int residual, size_t s) {
  cudaq_mwpm_result_t res;
  (void)mwpm_residual(r, l->ev + l->off[s], l->off[s + 1] - l->off[s],
                      residual && r->w_values ? r->timing_w + s * r->w_num : NULL, &res);
}

/* One pass of MWPM over a list, back to back: seconds. */
static double timing_pass(run_state_t *r, const shot_list_t *l, int residual) {
  double t0 = now_s();
  for (size_t s = 0; s < l->nshots; s++)
    decode_kept(r, l, residual, s);
  return now_s() - t0;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* One more pass over a list with each decode timed alone (the clock reads
 * between decodes are why the means come from the back-to-back passes):
 * the median, 99th percentile (cudaq_bench_percentile's nearest rank) and
 * slowest decode. */
static cudaq_predecoder_shot_times_t shot_times(run_state_t *r, const shot_list_t *l, int residual) {
  cudaq_predecoder_shot_times_t t = {0, 0, 0};
  for (size_t s = 0; s < l->nshots; s++) {
    const uint64_t a = cudaq_bench_now_ns();
    decode_kept(r, l, residual, s);
    r->shot_ns[s] = cudaq_bench_now_ns() - a;
  }
  qsort(r->shot_ns, l->nshots, sizeof *r->shot_ns, cmp_u64);
  uint64_t p50 = 0, p99 = 0;
  if (cudaq_bench_percentile(r->shot_ns, l->nshots, 50, &p50) == CUDAQ_OK &&
      cudaq_bench_percentile(r->shot_ns, l->nshots, 99, &p99) == CUDAQ_OK) {
    t.p50_s = 1e-9 * (double)p50;
    t.p99_s = 1e-9 * (double)p99;
    t.max_s = 1e-9 * (double)r->shot_ns[l->nshots - 1]; /* n >= 1 where the percentiles are */
  }
  return t;
}

/* The report's MWPM times from the kept shots: raw and residual passes in
 * turn, twice, the faster of each; then one pass of each with every decode
 * timed alone, for the per-shot percentiles. */
static void timing_run(run_state_t *r) {
  if (!r->timing[0].nshots)
    return;
  double raw = 0, res = 0;
  for (int rep = 0; rep < 2; rep++) {
    double a = timing_pass(r, &r->timing[0], 0), b = timing_pass(r, &r->timing[1], 1);
    raw = rep == 0 || a < raw ? a : raw;
    res = rep == 0 || b < res ? b : res;
  }
  r->rep.mwpm_raw_s = raw;
  r->rep.mwpm_residual_s = res;
  r->rep.mwpm_timed_shots = r->timing[0].nshots;
  r->rep.mwpm_raw_shot = shot_times(r, &r->timing[0], 0);
  r->rep.mwpm_residual_shot = shot_times(r, &r->timing[1], 1);
}

/* MWPM alone on the raw events, into *plain (timed in timing_run's passes). */
static int decode_plain(run_state_t *r, const uint32_t *events, size_t ne, size_t shot,
                        uint64_t *plain) {
  cudaq_mwpm_result_t res;
  cudaq_mwpm_status_t st = mwpm(r, events, ne, &res);
  if (st) {
    if (st == CUDAQ_MWPM_ERR_NO_SOLUTION)
      no_matching_message(shot, "MWPM: ");
    else
      fprintf(stderr, "qec-decode: shot %zu: MWPM: %s\n", shot, cudaq_mwpm_status_str(st));
    return 1;
  }
  *plain = res.obs_mask;
  return 0;
}

/* Predecoder, then MWPM on its residual, timed, into *pred. */
static int decode_predecoded(run_state_t *r, const uint32_t *events, size_t ne, size_t shot,
                             uint64_t *pred) {
  size_t nr = 0;
  uint64_t frame = 0;
  cudaq_predecoder_error_t perr;
  cudaq_mwpm_result_t res;
  double t0 = now_s();
  cudaq_predecoder_status_t pst = cudaq_predecoder_run(r->pd, events, ne, r->residual, &nr,
                                                       &frame, &perr);
  double t1 = now_s();
  if (pst) {
    fprintf(stderr, "qec-decode: shot %zu: predecoder: %s\n", shot, perr.message);
    return 1;
  }
  cudaq_mwpm_status_t st = mwpm_residual(r, r->residual, nr, r->w_values, &res);
  double t2 = now_s();
  if (st) {
    if (st == CUDAQ_MWPM_ERR_NO_SOLUTION)
      no_matching_message(shot, "MWPM on the residual events: ");
    else
      fprintf(stderr, "qec-decode: shot %zu: MWPM on the residual events: %s\n", shot,
              cudaq_mwpm_status_str(st));
    return 1;
  }
  *pred = frame ^ res.obs_mask;
  r->num_residual = nr;
  r->rep.inference_s += t1 - t0;
  r->rep.mwpm_residual_s += t2 - t1;
  r->rep.events_before += ne;
  r->rep.events_after += nr;
  return 0;
}

/* Decodes one shot (number `shot`, 1-based, for messages) into *pred; with a
 * predecoder and `compare`, also with MWPM alone into *plain, fills the
 * report and keeps the shot for the MWPM timing passes (timing_run).
 * Returns 0, or 1 after printing the problem. */
static int decode_shot(run_state_t *r, const uint32_t *events, size_t ne, size_t shot,
                       int compare, uint64_t *pred, uint64_t *plain) {
  if (!r->pd) {
    cudaq_mwpm_result_t res;
    cudaq_mwpm_status_t st = mwpm(r, events, ne, &res);
    if (st) {
      if (st == CUDAQ_MWPM_ERR_NO_SOLUTION)
        no_matching_message(shot, "");
      else
        fprintf(stderr, "qec-decode: shot %zu: %s\n", shot, cudaq_mwpm_status_str(st));
      return 1;
    }
    *pred = *plain = res.obs_mask;
    return 0;
  }
  if (!compare)
    return decode_predecoded(r, events, ne, shot, pred);
  if (decode_plain(r, events, ne, shot, plain) || decode_predecoded(r, events, ne, shot, pred))
    return 1;
  keep_for_timing(r, events, ne);
  r->rep.disagreements += *plain != *pred;
  return 0;
}

/* --threads N > 1 (MWPM alone): reads up to CHUNK shots, decodes them with
 * cudaq_mwpm_decode_batch on the decoders decs[0..nt-1], then writes or
 * counts them in order; the output and the messages are the one-thread
 * loop's (the shots before a failing one are written first). Returns 0, or 1
 * after printing the problem. */
#define CHUNK 4096
/* The next record of --obs_in into *obs. Returns 0, or 1 after a message
 * (the file ended before the detection events, or a bad record). */
static int next_obs(cudaq_sample_reader_t *ord, uint64_t *obs, cudaq_mwpm_error_t *err) {
  size_t dummy = 0;
  cudaq_mwpm_status_t st = cudaq_sample_reader_next(ord, NULL, &dummy, obs, err);
  if (!st)
    return 0;
  fprintf(stderr, "qec-decode: obs_in: %s\n",
          st == CUDAQ_MWPM_EOF ? "fewer records than the detection events"
                               : (err->message[0] ? err->message : cudaq_mwpm_status_str(st)));
  return 1;
}

/* What a decoded shot leads to, for both loops: predict writes the
 * prediction; count_mistakes takes the true observables into *obs (from
 * --obs_in when given; otherwise *obs already holds the appended ones).
 * Returns 0, or 1 on a write or input error (reported). */
static int shot_outcome(FILE *fout, cudaq_sample_format_t out_fmt, int cmd_predict, uint64_t pred,
                        uint32_t no, cudaq_sample_reader_t *ord, uint64_t *obs,
                        cudaq_mwpm_error_t *err) {
  if (!cmd_predict)
    return ord && next_obs(ord, obs, err);
  if (cudaq_sample_write_obs(fout, out_fmt, pred, no)) {
    fprintf(stderr, "qec-decode: write error\n");
    return 1;
  }
  return 0;
}

static int run_threaded(cudaq_mwpm_decoder_t *const *decs, size_t nt, int correlated, uint32_t nd,
                        uint32_t no, cudaq_sample_reader_t *rd, cudaq_sample_reader_t *ord,
                        FILE *fout, cudaq_sample_format_t out_fmt, int cmd_predict,
                        size_t *shots_out, size_t *mistakes_out) {
  const size_t row = (nd + 7) / 8, pb = (no + 7) / 8;
  uint8_t *packed = malloc(CHUNK * row + 1), *preds = malloc(CHUNK * pb + 1);
  uint64_t *obs = malloc(CHUNK * sizeof *obs);
  uint32_t *events = malloc(((size_t)nd + 1) * sizeof *events);
  int rc = 1;
  size_t shots = 0, mistakes = 0;
  if (!packed || !preds || !obs || !events) {
    fprintf(stderr, "qec-decode: out of memory\n");
    goto done;
  }
  const unsigned flags = CUDAQ_MWPM_BATCH_PACKED_SHOTS | CUDAQ_MWPM_BATCH_PACKED_PREDICTIONS |
                         (correlated ? CUDAQ_MWPM_BATCH_CORRELATED : 0u);
  for (;;) {
    size_t k = 0;
    cudaq_mwpm_error_t err;
    memset(&err, 0, sizeof err);
    cudaq_mwpm_status_t in_st = CUDAQ_MWPM_OK;
    memset(packed, 0, CHUNK * row);
    while (k < CHUNK) {
      size_t ne = 0;
      uint64_t o = 0;
      in_st = cudaq_sample_reader_next(rd, events, &ne, &o, &err);
      if (in_st)
        break;
      uint8_t *r = packed + k * row;
      for (size_t e = 0; e < ne; e++) /* the reader checks events[e] < nd */
        r[events[e] / 8] ^= (uint8_t)(1u << (events[e] % 8)); /* twice cancels, as in decode */
      obs[k++] = o;
    }
    size_t bad = 0;
    cudaq_mwpm_status_t st =
        k ? cudaq_mwpm_decode_batch(decs, nt, packed, k, flags, preds, NULL, &bad) : CUDAQ_MWPM_OK;
    size_t good = st ? bad : k;
    for (size_t s = 0; s < good; s++) {
      uint64_t pred = 0;
      for (size_t b = 0; b < pb; b++)
        pred |= (uint64_t)preds[s * pb + b] << (8 * b);
      shots++;
      uint64_t o = obs[s];
      if (shot_outcome(fout, out_fmt, cmd_predict, pred, no, ord, &o, &err))
        goto done;
      mistakes += !cmd_predict && pred != o;
    }
    if (st) {
      if (st == CUDAQ_MWPM_ERR_NO_SOLUTION)
        no_matching_message(shots + 1, "");
      else
        fprintf(stderr, "qec-decode: shot %zu: %s\n", shots + 1, cudaq_mwpm_status_str(st));
      goto done;
    }
    if (in_st == CUDAQ_MWPM_EOF)
      break;
    if (in_st) {
      fprintf(stderr, "qec-decode: input: %s\n", err.message[0] ? err.message :
                                                  cudaq_mwpm_status_str(in_st));
      goto done;
    }
  }
  rc = 0;
done:
  *shots_out = shots;
  *mistakes_out = mistakes;
  free(packed);
  free(preds);
  free(obs);
  free(events);
  return rc;
}

/* Creates the predecoder the flags ask for (none without --predecoder). */
static int make_predecoder(const opts_t *o, const cudaq_mwpm_graph_t *g, uint32_t nd, uint32_t no,
                           const cudaq_onnx_predecoder_options_t *onnx,
                           const cudaq_local_predecoder_options_t *local, run_state_t *r) {
  if (!o->predecoder)
    return 0;
  cudaq_predecoder_error_t perr;
  cudaq_predecoder_status_t st;
  r->rep.predecoder = o->predecoder;
  if (!strcmp(o->predecoder, "local")) {
    st = cudaq_predecoder_create_local(g, local, &r->pd, &perr);
  } else {
    cudaq_onnx_predecoder_options_t oo = *onnx;
    oo.graph = o->skip_layout_check ? NULL : g; /* the model's detector layout against the DEM's */
    oo.match_graph = g;                          /* weighted matching maps its edges onto g's */
    st = cudaq_predecoder_create_onnx(o->predecoder, nd, no, &oo, &r->pd, &perr);
    r->rep.device = onnx->device == CUDAQ_PREDECODER_GPU ? "gpu" : "cpu";
    r->rep.precision = onnx->precision == CUDAQ_PREDECODER_FP16 ? "fp16" : "fp32";
  }
  if (st) {
    fprintf(stderr, "qec-decode: --predecoder %s: %s\n", o->predecoder, perr.message);
    return 1;
  }
  /* weighted: never with --enable_correlations (the flags); the map goes
   * onto the decoder once it exists (run) */
  const uint32_t *we, *ws;
  r->rep.weighted = cudaq_predecoder_edge_weights(r->pd, &we, &ws, &r->w_num, &r->w_values) ==
                    CUDAQ_PREDECODER_OK;
  r->residual = malloc(((size_t)nd + 1) * sizeof *r->residual);
  if (!r->residual) {
    fprintf(stderr, "qec-decode: out of memory\n");
    return 1;
  }
  return 0;
}

static int run(const opts_t *o) {
  int cmd_predict = !strcmp(o->cmd, "predict"); /* else count_mistakes (parse_args checked) */
  cudaq_sample_format_t in_fmt, out_fmt, obs_fmt;
  if (parse_format("--in_format", o->in_format, &in_fmt) ||
      parse_format("--out_format", o->out_format, &out_fmt) ||
      parse_format("--obs_in_format", o->obs_in_format, &obs_fmt))
    return 2;
  cudaq_mwpm_graph_options_t gopt;
  cudaq_mwpm_graph_options_init(&gopt);
  if (!strcmp(o->merge, "smallest_weight"))
    gopt.merge = CUDAQ_MWPM_MERGE_SMALLEST_WEIGHT;
  else if (strcmp(o->merge, "independent")) {
    fprintf(stderr, "qec-decode: --merge_strategy is independent or smallest_weight\n");
    return 2;
  }
  gopt.enable_correlations = o->correlations;
  const char *conflict = cudaq_sample_obs_flags_conflict(o->appended, o->obs_in != NULL);
  if (conflict) {
    fprintf(stderr, "qec-decode: %s\n", conflict);
    return 2;
  }
  if (!cmd_predict && !o->appended && !o->obs_in) {
    fprintf(stderr, "qec-decode: count_mistakes needs --obs_in or "
                    "--in_includes_appended_observables\n");
    return 2;
  }
  cudaq_onnx_predecoder_options_t onnx_opts;
  cudaq_local_predecoder_options_t local_opts;
  if (check_predecoder_flags(o, cmd_predict, &onnx_opts, &local_opts))
    return 2;
  /* an ONNX predecoder may give per-shot edge weights (weighted mode; off with
   * --predecoder_weights off or --enable_correlations) */
  gopt.per_shot_weights = o->predecoder && strcmp(o->predecoder, "local") &&
                          onnx_opts.weights != CUDAQ_PREDECODER_WEIGHTS_OFF;
  if (o->threads > 1 && o->predecoder) {
    fprintf(stderr, "qec-decode: --threads decodes with MWPM alone; it cannot be combined with "
                    "--predecoder\n");
    return 2;
  }
  if (check_outputs(o))
    return 2;
  FILE *probe = open_or("--dem", o->dem, "rb", NULL); /* the OS's reason, which the parser does not give */
  if (!probe)
    return 1;
  fclose(probe);
  cudaq_mwpm_error_t err;
  cudaq_dem_t *dem = NULL;
  cudaq_mwpm_status_t st = cudaq_dem_parse_file(o->dem, &dem, &err);
  if (st) {
    fprintf(stderr, "qec-decode: %s", o->dem);
    if (err.line)
      fprintf(stderr, ":%zu", err.line);
    fprintf(stderr, ": %s\n", err.message[0] ? err.message : cudaq_mwpm_status_str(st));
    return 1;
  }
  cudaq_mwpm_graph_t *g = NULL;
  memset(&err, 0, sizeof err);
  st = cudaq_mwpm_graph_from_dem(dem, &gopt, &g, &err);
  uint32_t nd = dem->num_detectors, no = dem->num_observables;
  cudaq_dem_destroy(dem);
  if (st) {
    fprintf(stderr, "qec-decode: %s", o->dem);
    if (err.line)
      fprintf(stderr, ":%zu", err.line);
    fprintf(stderr, ": %s\n", err.message[0] ? err.message : cudaq_mwpm_status_str(st));
    return 1;
  }
  int rc = 1;
  run_state_t r;
  memset(&r, 0, sizeof r);
  r.correlations = o->correlations;
  cudaq_sample_reader_t *rd = NULL, *ord = NULL;
  uint32_t *events = malloc(((size_t)nd + 1) * sizeof *events);
  FILE *fin = NULL, *fout = NULL, *fobs = NULL, *fjson = NULL;
  if (check_width(o->in, in_fmt, nd, o->appended ? no : 0, "--in_format") ||
      (o->obs_in && check_width(o->obs_in, obs_fmt, 0, no, "--obs_in_format")))
    goto done;
  if (make_predecoder(o, g, nd, no, &onnx_opts, &local_opts, &r))
    goto done;
  if (r.pd && !cmd_predict && timing_alloc(&r)) {
    fprintf(stderr, "qec-decode: out of memory\n");
    goto done;
  }
  fin = open_or("--in", o->in, "rb", stdin);
  fout = open_or("--out", o->out, "wb", stdout);
  fobs = o->obs_in ? open_or("--obs_in", o->obs_in, "rb", NULL) : NULL;
  fjson = o->json ? open_or("--json", o->json, "w", NULL) : NULL;
  if (!events || !fin || !fout || (o->obs_in && !fobs) || (o->json && !fjson))
    goto done;
  if (cudaq_mwpm_decoder_create(g, &r.dec) ||
      (r.w_values && cudaq_predecoder_set_weight_map(r.pd, r.dec)) ||
      cudaq_sample_reader_create(fin, in_fmt, nd, o->appended ? no : 0, &rd) ||
      (fobs && cudaq_sample_reader_create(fobs, obs_fmt, 0, no, &ord))) {
    fprintf(stderr, "qec-decode: out of memory\n");
    goto done;
  }
  size_t shots = 0, mistakes = 0;
  const double t0 = now_s();
  if (o->threads > 1) {
    cudaq_mwpm_decoder_t *decs[CUDAQ_MWPM_BATCH_MAX_THREADS] = {r.dec};
    int made = 1, bad = 0;
    for (; made < o->threads; made++)
      if (cudaq_mwpm_decoder_create(g, &decs[made])) {
        fprintf(stderr, "qec-decode: out of memory\n");
        bad = 1;
        break;
      }
    if (!bad)
      bad = run_threaded(decs, (size_t)o->threads, o->correlations, nd, no, rd, ord, fout, out_fmt,
                         cmd_predict, &shots, &mistakes);
    for (int t = 1; t < made; t++)
      cudaq_mwpm_decoder_destroy(decs[t]);
    if (bad)
      goto done;
    r.rep.mistakes_mwpm = mistakes; /* MWPM alone: the plain prediction is the prediction */
  }
  for (; o->threads == 1;) { /* the streaming one-thread loop */
    size_t ne = 0;
    uint64_t obs = 0, pred = 0, plain = 0;
    st = cudaq_sample_reader_next(rd, events, &ne, &obs, &err);
    if (st == CUDAQ_MWPM_EOF)
      break;
    if (st) {
      fprintf(stderr, "qec-decode: input: %s\n", err.message[0] ? err.message :
                                                  cudaq_mwpm_status_str(st));
      goto done;
    }
    if (decode_shot(&r, events, ne, shots + 1, !cmd_predict, &pred, &plain))
      goto done;
    shots++;
    if (shot_outcome(fout, out_fmt, cmd_predict, pred, no, ord, &obs, &err))
      goto done;
    if (!cmd_predict) {
      mistakes += pred != obs;
      r.rep.mistakes_mwpm += plain != obs;
    }
  }
  const double t1 = now_s();
  timing_run(&r); /* after the run's clock: not part of --time */
  if (!cmd_predict)
    fprintf(fout, "%zu / %zu\n", mistakes, shots);
  r.rep.shots = shots;
  r.rep.mistakes = mistakes;
  if (!cmd_predict && r.pd)
    cudaq_predecoder_report_print(fout, &r.rep);
  if (fjson)
    cudaq_predecoder_report_json(fjson, &r.rep);
  if (o->timing) {
    double s = t1 - t0;
    fprintf(stderr, "decoded %zu shots in %.6f s (%.3f us per shot)\n", shots, s,
            shots ? 1e6 * s / (double)shots : 0.0);
  }
  if (fflush(fout)) { /* the last buffered records: a full disk shows here */
    if (fout == stdout)
      fprintf(stderr, "qec-decode: write error on stdout: %s\n", strerror(errno));
    else
      fprintf(stderr, "qec-decode: write error on --out '%s': %s\n", o->out, strerror(errno));
    goto done;
  }
  rc = 0;
done:
  cudaq_sample_reader_destroy(rd);
  cudaq_sample_reader_destroy(ord);
  cudaq_mwpm_decoder_destroy(r.dec);
  cudaq_predecoder_destroy(r.pd);
  cudaq_mwpm_graph_destroy(g);
  free(r.residual);
  timing_free(&r);
  free(events);
  if (fin && fin != stdin)
    fclose(fin);
  if (fobs)
    fclose(fobs);
  if (fjson && fclose(fjson)) {
    fprintf(stderr, "qec-decode: write error on '%s'\n", o->json);
    rc = 1;
  }
  if (fout && fout != stdout && fclose(fout) && !rc) {
    fprintf(stderr, "qec-decode: write error on --out '%s': %s\n", o->out, strerror(errno));
    rc = 1;
  }
  return rc;
}

int main(int argc, char **argv) {
  opts_t o;
  /* --help / -h / --version anywhere (also after a command, before --dem). */
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h") ||
        (i == 1 && !strcmp(argv[i], "help"))) {
      usage(stdout);
      return 0;
    }
    if (!strcmp(argv[i], "--version")) {
      printf("qec-decode (cudaq-realtime) %s\n", CUDAQ_VERSION);
      return 0;
    }
  }
  int r = parse_args(argc, argv, &o);
  if (r) {
    if (r == -1)
      usage(stderr);
    return 2;
  }
  return run(&o);
}
