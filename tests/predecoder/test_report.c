/* The count_mistakes report: the Wilson score interval on known inputs
 * (reference values found by bisection of the score equation
 * (k/n - p)^2 = z^2 p (1 - p) / n, independent of the closed form, and
 * matching published tables), its argument checks, and the text and JSON
 * renderings of a report with known numbers. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cudaq/qec/predecoder.h"

static void test_wilson_known(void **state) {
  (void)state;
  static const struct {
    uint64_t k, n;
    double lo, hi;
  } cases[] = {
      {0, 10, 0.0, 0.277532799862889},
      {5, 10, 0.236593090512564, 0.763406909487436},
      {1, 100, 0.00176743206414065, 0.0544861961787053},
      {12, 100000, 6.86488807399473e-05, 0.000209755012696072},
      {10, 10, 0.722467200137111, 1.0},
      {3, 7, 0.15821985525147, 0.749541635472343},
      {1409, 100000, 0.0133779375495082, 0.0148393930815623},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    double lo = -1, hi = -1;
    assert_int_equal(cudaq_wilson_interval(cases[i].k, cases[i].n, CUDAQ_WILSON_Z95, &lo, &hi),
                     CUDAQ_PREDECODER_OK);
    if (fabs(lo - cases[i].lo) > 1e-12 * fmax(1.0, cases[i].lo) ||
        fabs(hi - cases[i].hi) > 1e-12) {
      print_error("%llu / %llu: got [%.15g, %.15g], want [%.15g, %.15g]\n",
                  (unsigned long long)cases[i].k, (unsigned long long)cases[i].n, lo, hi,
                  cases[i].lo, cases[i].hi);
      fail();
    }
  }
  /* Exact ends at k = 0 and k = n; z = 0 collapses to the point estimate. */
  double lo, hi;
  assert_int_equal(cudaq_wilson_interval(0, 1000000, 3.0, &lo, &hi), CUDAQ_PREDECODER_OK);
  assert_true(lo == 0.0 && hi > 0.0);
  assert_int_equal(cudaq_wilson_interval(7, 7, 1.0, &lo, &hi), CUDAQ_PREDECODER_OK);
  assert_true(hi == 1.0 && lo < 1.0);
  assert_int_equal(cudaq_wilson_interval(1, 4, 0.0, &lo, &hi), CUDAQ_PREDECODER_OK);
  assert_true(fabs(lo - 0.25) < 1e-15 && fabs(hi - 0.25) < 1e-15);
}

static void test_wilson_bad(void **state) {
  (void)state;
  double lo, hi;
  assert_int_equal(cudaq_wilson_interval(0, 0, 1.96, &lo, &hi), CUDAQ_PREDECODER_ERR_INVALID_ARG);
  assert_int_equal(cudaq_wilson_interval(3, 2, 1.96, &lo, &hi), CUDAQ_PREDECODER_ERR_INVALID_ARG);
  assert_int_equal(cudaq_wilson_interval(1, 2, -1.0, &lo, &hi), CUDAQ_PREDECODER_ERR_INVALID_ARG);
  assert_int_equal(cudaq_wilson_interval(1, 2, NAN, &lo, &hi), CUDAQ_PREDECODER_ERR_INVALID_ARG);
  assert_int_equal(cudaq_wilson_interval(1, 2, 1.96, NULL, &hi), CUDAQ_PREDECODER_ERR_INVALID_ARG);
  assert_int_equal(cudaq_wilson_interval(1, 2, 1.96, &lo, NULL), CUDAQ_PREDECODER_ERR_INVALID_ARG);
}

/* Renders a report into a string (caller frees). */
static char *render(const cudaq_predecoder_report_t *r, int json) {
  FILE *f = tmpfile();
  assert_non_null(f);
  assert_int_equal(json ? cudaq_predecoder_report_json(f, r) : cudaq_predecoder_report_print(f, r),
                   CUDAQ_PREDECODER_OK);
  long n = ftell(f);
  rewind(f);
  char *s = calloc(1, (size_t)n + 1);
  assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  return s;
}

static void expect(const char *text, const char *part) {
  if (!strstr(text, part)) {
    print_error("missing '%s' in:\n%s\n", part, text);
    fail();
  }
}

static cudaq_predecoder_report_t known(void) {
  cudaq_predecoder_report_t r;
  memset(&r, 0, sizeof r);
  r.predecoder = "models/d\"5\".onnx";
  r.device = "gpu";
  r.precision = "fp16";
  r.shots = 100000;
  r.mistakes = 12;
  r.mistakes_mwpm = 1409;
  r.disagreements = 1400;
  r.events_before = 800000;
  r.events_after = 200000;
  r.mwpm_raw_s = 0.4;       /* 4 us per shot */
  r.mwpm_residual_s = 0.1;  /* 1 us per shot */
  r.inference_s = 1.5;      /* 15 us per shot */
  return r;
}

/* Per-shot MWPM times: a known set (raw 3 / 12.5 / 40 us, residual
 * 0.5 / 2 / 9.25 us), or not measured (all 0). */
static void shot_times(cudaq_predecoder_report_t *r, int on) {
  const cudaq_predecoder_shot_times_t raw = {3e-6, 12.5e-6, 40e-6}, res = {0.5e-6, 2e-6, 9.25e-6}, none = {0, 0, 0};
  r->mwpm_raw_shot = on ? raw : none;
  r->mwpm_residual_shot = on ? res : none;
}

static void test_report_text(void **state) {
  (void)state;
  cudaq_predecoder_report_t r = known();
  char *s = render(&r, 0);
  expect(s, "predecoder: models/d\"5\".onnx (gpu, fp16)\n");
  expect(s, "predecoder + MWPM: 0.00012 (12 / 100000), 95% Wilson interval [6.86489e-05, 0.000209755]");
  expect(s, "MWPM alone:        0.01409 (1409 / 100000), 95% Wilson interval [0.0133779, 0.0148394]");
  expect(s, "disagree: 1400\n");
  expect(s, "detection events per shot: 8.0000 before, 2.0000 after (after / before 0.2500)");
  expect(s, "MWPM time per shot: 4.000 us on raw events, 1.000 us on residual events (speedup 4.00x)");
  expect(s, "inference time per shot: 15.000 us");
  assert_null(strstr(s, "MWPM time of one shot")); /* per-shot times not measured: no line */
  free(s);
  shot_times(&r, 1);
  s = render(&r, 0);
  expect(s, "MWPM time of one shot, p50 / p99 / slowest: 3.000 / 12.500 / 40.000 us on raw events, "
            "0.500 / 2.000 / 9.250 us on residual events\ninference time per shot: 15.000 us");
  free(s);
  shot_times(&r, 0);
  r.shots = 0;
  r.device = r.precision = NULL;
  s = render(&r, 0);
  expect(s, "predecoder: models/d\"5\".onnx\n");
  expect(s, "predecoder + MWPM: no shots");
  free(s);
  /* No shots, no events, nothing timed: n/a, never nan. */
  r.events_before = r.events_after = 0;
  r.mwpm_raw_s = r.mwpm_residual_s = r.inference_s = 0;
  s = render(&r, 0);
  expect(s, "detection events per shot: n/a before, n/a after (after / before n/a)\n");
  expect(s, "MWPM time per shot: n/a on raw events, n/a on residual events (speedup n/a)\n");
  expect(s, "inference time per shot: n/a\n");
  assert_null(strstr(s, "nan"));
  free(s);
  assert_int_equal(cudaq_predecoder_report_print(NULL, &r), CUDAQ_PREDECODER_ERR_INVALID_ARG);
  assert_int_equal(cudaq_predecoder_report_print(stdout, NULL), CUDAQ_PREDECODER_ERR_INVALID_ARG);
}

static void test_report_json(void **state) {
  (void)state;
  cudaq_predecoder_report_t r = known();
  char *s = render(&r, 1);
  expect(s, "\"predecoder\": \"models/d\\\"5\\\".onnx\"");
  expect(s, "\"device\": \"gpu\"");
  expect(s, "\"precision\": \"fp16\"");
  expect(s, "\"shots\": 100000");
  expect(s, "\"predecoder_mwpm\": {\"mistakes\": 12, \"logical_error_rate\": 0.00012, "
            "\"wilson95\": [6.864888074e-05, 0.0002097550127]}");
  expect(s, "\"mwpm\": {\"mistakes\": 1409, \"logical_error_rate\": 0.01409, "
            "\"wilson95\": [0.01337793755, 0.01483939308]}");
  expect(s, "\"disagreements\": 1400");
  expect(s, "\"events_per_shot\": {\"before\": 8, \"after\": 2, \"ratio\": 0.25}");
  expect(s, "\"mwpm_us_per_shot\": {\"raw\": 4, \"residual\": 1, \"speedup\": 4, \"timed_shots\": 100000}");
  expect(s, "\"inference_us_per_shot\": 15");
  /* per-shot times not measured: nulls */
  expect(s, "\"mwpm_us_one_shot\": {\"raw\": {\"p50\": null, \"p99\": null, \"max\": null}, "
            "\"residual\": {\"p50\": null, \"p99\": null, \"max\": null}}");
  free(s);
  shot_times(&r, 1);
  s = render(&r, 1);
  expect(s, "\"mwpm_us_one_shot\": {\"raw\": {\"p50\": 3, \"p99\": 12.5, \"max\": 40}, "
            "\"residual\": {\"p50\": 0.5, \"p99\": 2, \"max\": 9.25}}");
  free(s);
  shot_times(&r, 0);
  /* MWPM timed on 1,000 of the shots (qec-decode's back-to-back passes) */
  r.mwpm_timed_shots = 1000;
  r.mwpm_raw_s = 0.002;      /* 2 us per timed shot */
  r.mwpm_residual_s = 0.0005; /* 0.5 us */
  s = render(&r, 1);
  expect(s, "\"mwpm_us_per_shot\": {\"raw\": 2, \"residual\": 0.5, \"speedup\": 4, \"timed_shots\": 1000}");
  free(s);
  s = render(&r, 0);
  expect(s, "MWPM time per shot: 2.000 us on raw events, 0.500 us on residual events (speedup 4.00x) "
            "over 1000 shots decoded back to back\n");
  free(s);
  r = known();
  /* No shots: nulls, never NaN (not JSON). */
  r.shots = 0;
  r.events_before = r.events_after = 0;
  r.device = NULL;
  s = render(&r, 1);
  expect(s, "\"device\": null");
  expect(s, "\"logical_error_rate\": null, \"wilson95\": [null, null]");
  expect(s, "\"ratio\": null");
  assert_null(strstr(s, "nan"));
  free(s);
  assert_int_equal(cudaq_predecoder_report_json(NULL, &r), CUDAQ_PREDECODER_ERR_INVALID_ARG);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_wilson_known),
      cmocka_unit_test(test_wilson_bad),
      cmocka_unit_test(test_report_text),
      cmocka_unit_test(test_report_json),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
