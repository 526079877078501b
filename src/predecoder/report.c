/* The count_mistakes report with a predecoder: text and JSON. */
#include <math.h>
#include <stdio.h>

#include "predecoder_internal.h"

typedef struct rate {
  double value, lo, hi;
  int ok;  /* 0 when there are no shots */
} rate_t;

static rate_t rate_of(uint64_t k, uint64_t n) {
  rate_t r = {0.0, 0.0, 0.0, 0};
  if (n && cudaq_wilson_interval(k, n, CUDAQ_WILSON_Z95, &r.lo, &r.hi) == CUDAQ_PREDECODER_OK) {
    r.value = (double)k / (double)n;
    r.ok = 1;
  }
  return r;
}

/* x / y, NaN when y is 0. */
static double ratio(double x, double y) { return y != 0.0 ? x / y : NAN; }

/* Per-shot MWPM times are measured where the slowest shot took time (all 0: not). */
static int shot_times_measured(const cudaq_predecoder_shot_times_t *t) { return t->max_s > 0; }

/* x with fmt (one double conversion and its unit), or "n/a" where x is not
 * a number (no shots, no events, nothing timed). */
static void text_num(FILE *f, const char *fmt, double x) {
  if (isfinite(x))
    fprintf(f, fmt, x);
  else
    fputs("n/a", f);
}

static void print_rate(FILE *f, const char *what, uint64_t k, uint64_t n) {
  rate_t r = rate_of(k, n);
  if (!r.ok) {
    fprintf(f, "logical error rate, %s no shots\n", what);
    return;
  }
  fprintf(f, "logical error rate, %s %.6g (%llu / %llu), 95%% Wilson interval [%.6g, %.6g]\n",
          what, r.value, (unsigned long long)k, (unsigned long long)n, r.lo, r.hi);
}

cudaq_predecoder_status_t cudaq_predecoder_report_print(FILE *f, const cudaq_predecoder_report_t *r) {
  if (!f || !r)
    return CUDAQ_PREDECODER_ERR_INVALID_ARG;
  double n = (double)r->shots;
  fprintf(f, "predecoder: %s", r->predecoder ? r->predecoder : "?");
  if (r->device)
    fprintf(f, " (%s%s%s)", r->device, r->precision ? ", " : "", r->precision ? r->precision : "");
  if (r->weighted)
    fputs(", weighted matching (per-shot edge weights)", f);
  fputc('\n', f);
  print_rate(f, "predecoder + MWPM:", r->mistakes, r->shots);
  print_rate(f, "MWPM alone:       ", r->mistakes_mwpm, r->shots);
  fprintf(f, "shots where predecoder + MWPM and MWPM alone disagree: %llu\n",
          (unsigned long long)r->disagreements);
  fputs("detection events per shot: ", f);
  text_num(f, "%.4f", ratio((double)r->events_before, n));
  fputs(" before, ", f);
  text_num(f, "%.4f", ratio((double)r->events_after, n));
  fputs(" after (after / before ", f);
  text_num(f, "%.4f", ratio((double)r->events_after, (double)r->events_before));
  fputs(")\n", f);
  double tn = r->mwpm_timed_shots ? (double)r->mwpm_timed_shots : n;
  double raw = 1e6 * ratio(r->mwpm_raw_s, tn), res = 1e6 * ratio(r->mwpm_residual_s, tn);
  fputs("MWPM time per shot: ", f);
  text_num(f, "%.3f us", raw);
  fputs(" on raw events, ", f);
  text_num(f, "%.3f us", res);
  fputs(" on residual events (speedup ", f);
  text_num(f, "%.2fx", ratio(raw, res));
  fputc(')', f);
  if (r->mwpm_timed_shots)
    fprintf(f, " over %llu shots decoded back to back", (unsigned long long)r->mwpm_timed_shots);
  const cudaq_predecoder_shot_times_t *a = &r->mwpm_raw_shot, *b = &r->mwpm_residual_shot;
  if (shot_times_measured(a) || shot_times_measured(b))
    fprintf(f, "\nMWPM time of one shot, p50 / p99 / slowest: %.3f / %.3f / %.3f us on raw events, "
               "%.3f / %.3f / %.3f us on residual events",
            1e6 * a->p50_s, 1e6 * a->p99_s, 1e6 * a->max_s, 1e6 * b->p50_s, 1e6 * b->p99_s, 1e6 * b->max_s);
  fputs("\ninference time per shot: ", f);
  text_num(f, "%.3f us", 1e6 * ratio(r->inference_s, n));
  fputc('\n', f);
  return CUDAQ_PREDECODER_OK;
}

/* A number, or null for NaN / infinity (not JSON). */
static void json_num(FILE *f, double x) {
  if (isfinite(x))
    fprintf(f, "%.10g", x);
  else
    fputs("null", f);
}

static void json_str(FILE *f, const char *s) {
  if (!s) {
    fputs("null", f);
    return;
  }
  fputc('"', f);
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    if (*c == '"' || *c == '\\')
      fprintf(f, "\\%c", *c);
    else if (*c < 0x20)
      fprintf(f, "\\u%04x", *c);
    else
      fputc(*c, f);
  }
  fputc('"', f);
}

static void json_rate(FILE *f, const char *key, uint64_t k, uint64_t n) {
  rate_t r = rate_of(k, n);
  fprintf(f, "  \"%s\": {\"mistakes\": %llu, \"logical_error_rate\": ", key, (unsigned long long)k);
  json_num(f, r.ok ? r.value : NAN);
  fputs(", \"wilson95\": [", f);
  json_num(f, r.ok ? r.lo : NAN);
  fputs(", ", f);
  json_num(f, r.ok ? r.hi : NAN);
  fputs("]},\n", f);
}

/* "key": {"p50": .., "p99": .., "max": ..} in us, nulls where not measured. */
static void json_shot_times(FILE *f, const char *key, const cudaq_predecoder_shot_times_t *t) {
  const int ok = shot_times_measured(t);
  fprintf(f, "\"%s\": {\"p50\": ", key);
  json_num(f, ok ? 1e6 * t->p50_s : NAN);
  fputs(", \"p99\": ", f);
  json_num(f, ok ? 1e6 * t->p99_s : NAN);
  fputs(", \"max\": ", f);
  json_num(f, ok ? 1e6 * t->max_s : NAN);
  fputc('}', f);
}

cudaq_predecoder_status_t cudaq_predecoder_report_json(FILE *f, const cudaq_predecoder_report_t *r) {
  if (!f || !r)
    return CUDAQ_PREDECODER_ERR_INVALID_ARG;
  double n = (double)r->shots;
  fputs("{\n  \"predecoder\": ", f);
  json_str(f, r->predecoder);
  fputs(",\n  \"device\": ", f);
  json_str(f, r->device);
  fputs(",\n  \"precision\": ", f);
  json_str(f, r->precision);
  if (r->weighted)
    fputs(",\n  \"weighted\": true", f);
  fprintf(f, ",\n  \"shots\": %llu,\n", (unsigned long long)r->shots);
  json_rate(f, "predecoder_mwpm", r->mistakes, r->shots);
  json_rate(f, "mwpm", r->mistakes_mwpm, r->shots);
  fprintf(f, "  \"disagreements\": %llu,\n  \"events_per_shot\": {\"before\": ",
          (unsigned long long)r->disagreements);
  json_num(f, ratio((double)r->events_before, n));
  fputs(", \"after\": ", f);
  json_num(f, ratio((double)r->events_after, n));
  fputs(", \"ratio\": ", f);
  json_num(f, ratio((double)r->events_after, (double)r->events_before));
  double tn = r->mwpm_timed_shots ? (double)r->mwpm_timed_shots : n;
  double raw = 1e6 * ratio(r->mwpm_raw_s, tn), res = 1e6 * ratio(r->mwpm_residual_s, tn);
  fputs("},\n  \"mwpm_us_per_shot\": {\"raw\": ", f);
  json_num(f, raw);
  fputs(", \"residual\": ", f);
  json_num(f, res);
  fputs(", \"speedup\": ", f);
  json_num(f, ratio(raw, res));
  fprintf(f, ", \"timed_shots\": %llu", (unsigned long long)(r->mwpm_timed_shots ? r->mwpm_timed_shots : r->shots));
  fputs("},\n  \"mwpm_us_one_shot\": {", f);
  json_shot_times(f, "raw", &r->mwpm_raw_shot);
  fputs(", ", f);
  json_shot_times(f, "residual", &r->mwpm_residual_shot);
  fputs("},\n  \"inference_us_per_shot\": ", f);
  json_num(f, 1e6 * ratio(r->inference_s, n));
  fputs("\n}\n", f);
  return CUDAQ_PREDECODER_OK;
}
