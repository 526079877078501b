/*
 * test_bench_report.c - the benchmark report utility (bench_report.h).
 *
 * Without arguments (ctest test_bench_report, label unit): statistics
 * against known inputs (latencies 1..100 us), the nearest-rank percentile
 * rule, the only-completed rule, timeouts, wall time and throughput from
 * injected stamps, the stage breakdown (with each stage's percentiles and
 * the slowest 1% split by stage), histogram buckets and sums, the
 * text and JSON reports, and every argument error.
 *
 * With the argument "mt" (ctest test_bench_report_mt, label mt, run under
 * TSan): a submitting and a completing thread on one benchmark, racing on
 * the same index (completes before the submit, timeouts against completes)
 * while the main thread computes snapshots; every request is counted once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "atomics.h"
#include "cudaq/realtime/bench_report.h"

#define US 1000ull /* ns per us */

/* Request i of n submitted at i ms, completing after lat_us[i] us, the
 * completes made in a scrambled order. */
static void fill(cudaq_bench_t *b, const uint64_t *lat_us, size_t n) {
  for (size_t i = 0; i < n; ++i) assert_int_equal(cudaq_bench_mark_submit(b, i, i * 1000 * US), CUDAQ_OK);
  for (size_t k = 0; k < n; ++k) {
    size_t i = (k * 37) % n; /* 37 is coprime with the n used here: a permutation */
    assert_int_equal(cudaq_bench_mark_complete(b, i, i * 1000 * US + lat_us[i] * US), CUDAQ_OK);
  }
}

static cudaq_bench_t *bench_1_to_100(void) {
  cudaq_bench_t *b = NULL;
  assert_int_equal(cudaq_bench_create("one_to_hundred", 100, &b), CUDAQ_OK);
  uint64_t lat[100];
  for (size_t i = 0; i < 100; ++i) lat[i] = 100 - i; /* reversed: compute must sort */
  fill(b, lat, 100);
  return b;
}

static void test_stats_known_inputs(void **state) {
  (void)state;
  cudaq_bench_t *b = bench_1_to_100();
  cudaq_bench_stats_t st;
  assert_int_equal(cudaq_bench_compute(b, &st), CUDAQ_OK);
  assert_string_equal(st.name, "one_to_hundred");
  assert_int_equal(st.capacity, 100);
  assert_int_equal(st.submitted, 100);
  assert_int_equal(st.completed, 100);
  assert_int_equal(st.timed_out, 0);
  assert_int_equal(st.in_flight, 0);
  assert_true(st.min_us == 1.0);
  assert_true(st.max_us == 100.0);
  assert_true(st.mean_us == 50.5);
  /* Nearest rank: ceil(p/100 * 100) = p. */
  assert_true(st.p50_us == 50.0);
  assert_true(st.p90_us == 90.0);
  assert_true(st.p95_us == 95.0);
  assert_true(st.p99_us == 99.0);
  /* Population variance of 1..n is (n^2 - 1) / 12 = 833.25. */
  assert_true(fabs(st.stddev_us - sqrt(833.25)) < 1e-9);
  assert_int_equal(st.num_stages, 0);
  assert_int_equal(st.rounds, 0);
  cudaq_bench_destroy(b);
}

static void test_percentile_rule(void **state) {
  (void)state;
  uint64_t v[1000], out = 0;
  for (size_t i = 0; i < 1000; ++i) v[i] = i + 1;
  /* n = 10 (10, 20, ..., 100): ranks ceil(0.5*10)=5, ceil(9)=9, ceil(9.5)=10, ceil(9.9)=10. */
  uint64_t t[10];
  for (size_t i = 0; i < 10; ++i) t[i] = 10 * (i + 1);
  assert_int_equal(cudaq_bench_percentile(t, 10, 50, &out), CUDAQ_OK), assert_int_equal(out, 50);
  assert_int_equal(cudaq_bench_percentile(t, 10, 90, &out), CUDAQ_OK), assert_int_equal(out, 90);
  assert_int_equal(cudaq_bench_percentile(t, 10, 95, &out), CUDAQ_OK), assert_int_equal(out, 100);
  assert_int_equal(cudaq_bench_percentile(t, 10, 99, &out), CUDAQ_OK), assert_int_equal(out, 100);
  assert_int_equal(cudaq_bench_percentile(t, 10, 100, &out), CUDAQ_OK), assert_int_equal(out, 100);
  assert_int_equal(cudaq_bench_percentile(t, 10, 10, &out), CUDAQ_OK), assert_int_equal(out, 10);
  assert_int_equal(cudaq_bench_percentile(t, 10, 10.5, &out), CUDAQ_OK), assert_int_equal(out, 20);
  assert_int_equal(cudaq_bench_percentile(t, 10, 0.001, &out), CUDAQ_OK), assert_int_equal(out, 10);
  /* One value: every percentile is it. */
  assert_int_equal(cudaq_bench_percentile(t, 1, 1, &out), CUDAQ_OK), assert_int_equal(out, 10);
  assert_int_equal(cudaq_bench_percentile(t, 1, 99, &out), CUDAQ_OK), assert_int_equal(out, 10);
  /* p * n / 100 landing on an integer through rounding: 99.9% of 1000 is rank 999. */
  assert_int_equal(cudaq_bench_percentile(v, 1000, 99.9, &out), CUDAQ_OK), assert_int_equal(out, 999);
  assert_int_equal(cudaq_bench_percentile(v, 1000, 0.1, &out), CUDAQ_OK), assert_int_equal(out, 1);
  assert_int_equal(cudaq_bench_percentile(v, 1000, 99.95, &out), CUDAQ_OK), assert_int_equal(out, 1000);
  /* Bad arguments. */
  assert_int_equal(cudaq_bench_percentile(NULL, 10, 50, &out), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_percentile(t, 10, 50, NULL), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_percentile(t, 0, 50, &out), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_percentile(t, 10, 0, &out), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_percentile(t, 10, -1, &out), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_percentile(t, 10, 100.5, &out), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_percentile(t, 10, NAN, &out), CUDAQ_ERR_INVALID_ARG);
}

/* 12 requests: 0..4 complete (10, 20, 30, 40, 50 us), 5..7 time out, 8..9
 * stay in flight with huge would-be latencies, 10..11 are never submitted. */
static void test_only_completed_and_timeouts(void **state) {
  (void)state;
  cudaq_bench_t *b = NULL;
  assert_int_equal(cudaq_bench_create("mixed", 12, &b), CUDAQ_OK);
  for (size_t i = 0; i < 10; ++i) assert_int_equal(cudaq_bench_mark_submit(b, i, 1000), CUDAQ_OK);
  for (size_t i = 0; i < 5; ++i)
    assert_int_equal(cudaq_bench_mark_complete(b, i, 1000 + (i + 1) * 10 * US), CUDAQ_OK);
  for (size_t i = 5; i < 8; ++i) assert_int_equal(cudaq_bench_mark_timeout(b, i), CUDAQ_OK);
  /* A late answer to a timed-out request is refused and not counted. */
  assert_int_equal(cudaq_bench_mark_complete(b, 5, 2000), CUDAQ_ERR_INVALID_ARG);
  cudaq_bench_stats_t st;
  assert_int_equal(cudaq_bench_compute(b, &st), CUDAQ_OK);
  assert_int_equal(st.capacity, 12);
  assert_int_equal(st.submitted, 10);
  assert_int_equal(st.completed, 5);
  assert_int_equal(st.timed_out, 3);
  assert_int_equal(st.in_flight, 2);
  assert_true(st.min_us == 10.0);
  assert_true(st.max_us == 50.0);
  assert_true(st.mean_us == 30.0);
  assert_true(st.p50_us == 30.0); /* rank ceil(2.5) = 3 */
  assert_true(st.p99_us == 50.0);
  assert_true(fabs(st.stddev_us - sqrt(200.0)) < 1e-9);
  cudaq_bench_destroy(b);

  /* Nothing completed: counts only, latencies 0. */
  assert_int_equal(cudaq_bench_create("none", 3, &b), CUDAQ_OK);
  assert_int_equal(cudaq_bench_mark_submit(b, 0, 5), CUDAQ_OK);
  assert_int_equal(cudaq_bench_mark_timeout(b, 0), CUDAQ_OK);
  assert_int_equal(cudaq_bench_compute(b, &st), CUDAQ_OK);
  assert_int_equal(st.submitted, 1);
  assert_int_equal(st.timed_out, 1);
  assert_int_equal(st.completed, 0);
  assert_true(st.mean_us == 0.0 && st.p99_us == 0.0 && st.stddev_us == 0.0);
  cudaq_bench_destroy(b);
}

static void test_wall_time_and_throughput(void **state) {
  (void)state;
  cudaq_bench_t *b = bench_1_to_100();
  cudaq_bench_stats_t st;
  /* Never started: wall time and throughput 0. */
  assert_int_equal(cudaq_bench_compute(b, &st), CUDAQ_OK);
  assert_true(st.wall_s == 0.0 && st.throughput_rps == 0.0);
  /* Injected: 100 completed in 2 s. */
  assert_int_equal(cudaq_bench_set_wall_ns(b, 1000000000ull, 3000000000ull), CUDAQ_OK);
  assert_int_equal(cudaq_bench_compute(b, &st), CUDAQ_OK);
  assert_true(st.wall_s == 2.0);
  assert_true(st.throughput_rps == 50.0);
  assert_int_equal(cudaq_bench_set_wall_ns(b, 3, 2), CUDAQ_ERR_INVALID_ARG);
  /* Real clock: start/stop give a small positive wall time; stop is a snapshot. */
  assert_int_equal(cudaq_bench_start(b), CUDAQ_OK);
  uint64_t t0 = cudaq_bench_now_ns(); /* after start: stop - start >= 2 ms */
  assert_true(t0 > 0);
  while (cudaq_bench_now_ns() - t0 < 2000000) { /* 2 ms */
  }
  assert_int_equal(cudaq_bench_stop(b), CUDAQ_OK);
  assert_int_equal(cudaq_bench_compute(b, &st), CUDAQ_OK);
  assert_true(st.wall_s >= 0.002 && st.wall_s < 10.0);
  assert_true(fabs(st.throughput_rps - 100.0 / st.wall_s) < 1e-6 * st.throughput_rps);
  double w = st.wall_s;
  assert_int_equal(cudaq_bench_compute(b, &st), CUDAQ_OK);
  assert_true(st.wall_s == w);
  cudaq_bench_destroy(b);
}

/* 4 requests of 100 us: stage 0 "MWPM decode" 20 us on all, stage 2
 * "Worker overhead" 10 us on two of them, stage 1 never named. */
static void test_stage_breakdown(void **state) {
  (void)state;
  cudaq_bench_t *b = NULL;
  assert_int_equal(cudaq_bench_create("stages", 5, &b), CUDAQ_OK);
  assert_int_equal(cudaq_bench_set_stage_name(b, 0, "MWPM decode"), CUDAQ_OK);
  assert_int_equal(cudaq_bench_set_stage_name(b, 2, "Worker overhead"), CUDAQ_OK);
  assert_int_equal(cudaq_bench_set_rounds(b, 10), CUDAQ_OK);
  for (size_t i = 0; i < 5; ++i) assert_int_equal(cudaq_bench_mark_submit(b, i, 0), CUDAQ_OK);
  /* Stage 1 and 3 are not named: refused. */
  assert_int_equal(cudaq_bench_mark_stage(b, 0, 1, 5), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_mark_stage(b, 0, 3, 5), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_mark_stage(b, 0, 4, 5), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_mark_stage(b, 0, 0, UINT64_MAX), CUDAQ_ERR_INVALID_ARG);
  for (size_t i = 0; i < 4; ++i) {
    assert_int_equal(cudaq_bench_mark_stage(b, i, 0, 999), CUDAQ_OK); /* overwritten next */
    assert_int_equal(cudaq_bench_mark_stage(b, i, 0, 20 * US), CUDAQ_OK);
    if (i < 2) assert_int_equal(cudaq_bench_mark_stage(b, i, 2, 10 * US), CUDAQ_OK);
    assert_int_equal(cudaq_bench_mark_complete(b, i, 100 * US), CUDAQ_OK);
  }
  /* Request 4 stamps a stage and times out: not in the breakdown. */
  assert_int_equal(cudaq_bench_mark_stage(b, 4, 0, 500 * US), CUDAQ_OK);
  assert_int_equal(cudaq_bench_mark_timeout(b, 4), CUDAQ_OK);
  /* After completion or timeout a stage stamp is refused. */
  assert_int_equal(cudaq_bench_mark_stage(b, 0, 0, 1), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_mark_stage(b, 4, 0, 1), CUDAQ_ERR_INVALID_ARG);

  cudaq_bench_stats_t st;
  assert_int_equal(cudaq_bench_compute(b, &st), CUDAQ_OK);
  assert_int_equal(st.completed, 4);
  assert_int_equal(st.num_stages, 3);
  assert_string_equal(st.stages[0].name, "MWPM decode");
  assert_string_equal(st.stages[1].name, "stage 1");
  assert_string_equal(st.stages[2].name, "Worker overhead");
  assert_int_equal(st.stages[0].stamped, 4);
  assert_int_equal(st.stages[1].stamped, 0);
  assert_int_equal(st.stages[2].stamped, 2);
  assert_true(st.stages[0].mean_us == 20.0);
  assert_true(st.stages[1].mean_us == 0.0);
  assert_true(st.stages[2].mean_us == 5.0);
  assert_true(fabs(st.stages[0].share - 0.20) < 1e-12);
  assert_true(fabs(st.stages[2].share - 0.05) < 1e-12);
  assert_true(st.mean_us == 100.0);
  assert_true(fabs(st.unattributed_us - 75.0) < 1e-9);
  assert_true(fabs(st.unattributed_share - 0.75) < 1e-12);
  assert_int_equal(st.rounds, 10);
  assert_true(st.per_round_us == 10.0);

  /* Stage names: range, empty, too long. */
  char longname[CUDAQ_BENCH_STAGE_NAME_LEN + 1];
  memset(longname, 'x', sizeof longname - 1), longname[sizeof longname - 1] = '\0';
  assert_int_equal(cudaq_bench_set_stage_name(b, 4, "x"), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_set_stage_name(b, 1, ""), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_set_stage_name(b, 1, longname), CUDAQ_ERR_INVALID_ARG);
  longname[CUDAQ_BENCH_STAGE_NAME_LEN - 1] = '\0'; /* 31 bytes: fits */
  assert_int_equal(cudaq_bench_set_stage_name(b, 1, longname), CUDAQ_OK);
  assert_int_equal(cudaq_bench_set_stage_name(b, 1, NULL), CUDAQ_ERR_INVALID_ARG);
  cudaq_bench_destroy(b);
}

/* Each stage's percentiles over the requests that stamped it, and the
 * slowest 1% (the ceil(n / 100) longest) split by stage: latencies 1..100
 * us, stage 0 half of each, stage 1 stamped (30 us) on the slowest alone;
 * then ties at the boundary and a request that stamped nothing. */
static void test_stage_percentiles_and_tail(void **state) {
  (void)state;
  cudaq_bench_t *b = NULL;
  assert_int_equal(cudaq_bench_create("tail", 100, &b), CUDAQ_OK);
  assert_int_equal(cudaq_bench_set_stage_name(b, 0, "half"), CUDAQ_OK);
  assert_int_equal(cudaq_bench_set_stage_name(b, 1, "slowest only"), CUDAQ_OK);
  for (size_t i = 0; i < 100; ++i) {
    const uint64_t lat = 100 - i, t0 = i * 1000 * US;
    assert_int_equal(cudaq_bench_mark_submit(b, i, t0), CUDAQ_OK);
    assert_int_equal(cudaq_bench_mark_stage(b, i, 0, lat * US / 2), CUDAQ_OK);
    if (lat == 100) assert_int_equal(cudaq_bench_mark_stage(b, i, 1, 30 * US), CUDAQ_OK);
    assert_int_equal(cudaq_bench_mark_complete(b, i, t0 + lat * US), CUDAQ_OK);
  }
  cudaq_bench_stats_t st;
  assert_int_equal(cudaq_bench_compute(b, &st), CUDAQ_OK);
  assert_true(st.p99_us == 99.0);
  assert_true(st.stages[0].p50_us == 25.0); /* nearest rank 50 of 0.5, 1.0, ..., 50.0 */
  assert_true(st.stages[0].p99_us == 49.5);
  assert_true(st.stages[1].p50_us == 30.0 && st.stages[1].p99_us == 30.0); /* its one stamp */
  assert_int_equal(st.tail_n, 1); /* ceil(100 / 100): the 100 us request */
  assert_true(st.tail_mean_us == 100.0);
  assert_true(st.stages[0].tail_us == 50.0);
  assert_true(st.stages[1].tail_us == 30.0);
  assert_true(fabs(st.tail_unattributed_us - 20.0) < 1e-9);
  char buf[4096];
  FILE *f = fmemopen(buf, sizeof buf, "w");
  assert_non_null(f);
  assert_int_equal(cudaq_bench_print(&st, f), CUDAQ_OK);
  fclose(f);
  assert_non_null(strstr(buf, "p50     25.0  p99     49.5  slowest 1%     50.0"));
  assert_non_null(strstr(buf, "slowest 1%    100.0 (1 requests)"));
  cudaq_bench_destroy(b);
  /* 250 requests, the last four tied at 250 us: the ceil(2.5) = 3 slowest
   * and the one tied with them; a request that stamped no stage is in the
   * tail with 0 for every stage */
  assert_int_equal(cudaq_bench_create("ties", 250, &b), CUDAQ_OK);
  assert_int_equal(cudaq_bench_set_stage_name(b, 0, "half"), CUDAQ_OK);
  for (size_t i = 0; i < 250; ++i) {
    const uint64_t lat = i >= 246 ? 250 : i + 1, t0 = i * 1000 * US;
    assert_int_equal(cudaq_bench_mark_submit(b, i, t0), CUDAQ_OK);
    if (i != 249) assert_int_equal(cudaq_bench_mark_stage(b, i, 0, lat * US / 2), CUDAQ_OK);
    assert_int_equal(cudaq_bench_mark_complete(b, i, t0 + lat * US), CUDAQ_OK);
  }
  assert_int_equal(cudaq_bench_compute(b, &st), CUDAQ_OK);
  assert_int_equal(st.tail_n, 4);
  assert_true(st.tail_mean_us == 250.0);
  assert_true(st.stages[0].tail_us == 93.75); /* (3 x 125 + 0) / 4 */
  assert_int_equal(st.stages[0].stamped, 249);
  cudaq_bench_destroy(b);
}

static uint64_t sum(const uint64_t *c, size_t n) {
  uint64_t s = 0;
  for (size_t i = 0; i < n; ++i) s += c[i];
  return s;
}

static void test_histogram(void **state) {
  (void)state;
  cudaq_bench_t *b = bench_1_to_100();
  uint64_t counts[16];
  double edges[17];
  /* Powers of two from 1 to 128 us: [1,2) [2,4) ... [64,128). */
  assert_int_equal(cudaq_bench_histogram(b, 1.0, 128.0, counts, edges, 7), CUDAQ_OK);
  const uint64_t want[7] = {1, 2, 4, 8, 16, 32, 37};
  for (size_t k = 0; k < 7; ++k) assert_int_equal(counts[k], want[k]);
  for (size_t k = 0; k <= 7; ++k) assert_true(edges[k] == (double)(1u << k));
  assert_int_equal(sum(counts, 7), 100);
  /* Out-of-range values are clamped into the end buckets: sums stay 100. */
  assert_int_equal(cudaq_bench_histogram(b, 10.0, 20.0, counts, NULL, 3), CUDAQ_OK);
  assert_int_equal(counts[0], 9 + 3);  /* 1..9 below, then 10, 11, 12 (< 12.6) */
  assert_int_equal(counts[2], 81 + 4); /* 21..100 at or above 20, 16..20 from 15.87 */
  assert_int_equal(sum(counts, 3), 100);
  assert_int_equal(cudaq_bench_histogram(b, 1.0, 2.0, counts, NULL, 1), CUDAQ_OK);
  assert_int_equal(counts[0], 100);
  /* Automatic range: from the smallest to the largest latency. */
  assert_int_equal(cudaq_bench_histogram(b, 0, 0, counts, edges, 16), CUDAQ_OK);
  assert_true(edges[0] == 1.0 && edges[16] == 100.0);
  for (size_t k = 0; k < 16; ++k) assert_true(edges[k] < edges[k + 1]);
  assert_int_equal(sum(counts, 16), 100);
  assert_int_equal(counts[0], 1);  /* [1, 1.33) */
  assert_int_equal(counts[15], 26); /* [74.99, 100]: 75..100 */
  cudaq_bench_destroy(b);

  /* Nothing completed: all zero. */
  assert_int_equal(cudaq_bench_create("empty", 4, &b), CUDAQ_OK);
  counts[0] = counts[1] = 7;
  assert_int_equal(cudaq_bench_histogram(b, 0, 0, counts, NULL, 2), CUDAQ_OK);
  assert_int_equal(sum(counts, 2), 0);
  /* Bad arguments. */
  assert_int_equal(cudaq_bench_histogram(NULL, 1, 2, counts, NULL, 2), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_histogram(b, 1, 2, NULL, NULL, 2), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_histogram(b, 1, 2, counts, NULL, 0), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_histogram(b, 2, 1, counts, NULL, 2), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_histogram(b, 2, 2, counts, NULL, 2), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_histogram(b, 0, 2, counts, NULL, 2), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_histogram(b, -1, 2, counts, NULL, 2), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_histogram(b, 1, INFINITY, counts, NULL, 2), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_histogram(b, NAN, 2, counts, NULL, 2), CUDAQ_ERR_INVALID_ARG);
  cudaq_bench_destroy(b);
}

/* Writes through fn into a memory stream and returns the text (free it). */
static char *capture_json(const cudaq_bench_stats_t *st, const uint64_t *counts, const double *edges,
                          size_t nb) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  assert_int_equal(cudaq_bench_write_json(st, counts, edges, nb, f), CUDAQ_OK);
  fclose(f);
  return buf;
}

/* Structural check: braces and brackets balance outside strings. */
static void assert_balanced(const char *s) {
  int depth = 0, in_str = 0;
  for (const char *p = s; *p; ++p) {
    if (in_str) {
      if (*p == '\\') ++p;
      else if (*p == '"') in_str = 0;
      continue;
    }
    if (*p == '"') in_str = 1;
    else if (*p == '{' || *p == '[') ++depth;
    else if (*p == '}' || *p == ']') assert_true(--depth >= 0);
  }
  assert_int_equal(depth, 0);
  assert_int_equal(in_str, 0);
}

static void test_json(void **state) {
  (void)state;
  cudaq_bench_t *b = bench_1_to_100();
  assert_int_equal(cudaq_bench_set_stage_name(b, 0, "MWPM \"decode\""), CUDAQ_OK);
  assert_int_equal(cudaq_bench_set_rounds(b, 13), CUDAQ_OK);
  assert_int_equal(cudaq_bench_set_wall_ns(b, 0, 2000000000ull), CUDAQ_OK);
  cudaq_bench_stats_t st;
  uint64_t counts[7];
  double edges[8];
  assert_int_equal(cudaq_bench_compute(b, &st), CUDAQ_OK);
  assert_int_equal(cudaq_bench_histogram(b, 1.0, 128.0, counts, edges, 7), CUDAQ_OK);
  char *j = capture_json(&st, counts, edges, 7);
  assert_balanced(j);
  assert_non_null(strstr(j, "\"name\": \"one_to_hundred\""));
  assert_non_null(strstr(j, "\"capacity\": 100,"));
  assert_non_null(strstr(j, "\"submitted\": 100,"));
  assert_non_null(strstr(j, "\"completed\": 100,"));
  assert_non_null(strstr(j, "\"timed_out\": 0,"));
  assert_non_null(strstr(j, "\"in_flight\": 0,"));
  assert_non_null(strstr(j, "\"wall_time_s\": 2.000000"));
  assert_non_null(strstr(j, "\"throughput_rps\": 50.0"));
  assert_non_null(strstr(j, "\"latency_us\": {\"min\": 1.000, \"max\": 100.000, \"mean\": 50.500, "
                            "\"p50\": 50.000, \"p90\": 90.000, \"p95\": 95.000, \"p99\": 99.000, "
                            "\"stddev\": 28.866}"));
  assert_non_null(strstr(j, "\"stages\": [{\"name\": \"MWPM \\\"decode\\\"\", \"stamped\": 0, "
                            "\"mean_us\": 0.000, \"share\": 0.0000, \"p50_us\": 0.000, \"p99_us\": 0.000, "
                            "\"slowest_1pct_us\": 0.000}]"));
  assert_non_null(strstr(j, "\"slowest_1pct\": {\"requests\": 1, \"mean_us\": 100.000, \"unattributed_us\": 100.000}"));
  assert_non_null(strstr(j, "\"unattributed_us\": 50.500"));
  assert_non_null(strstr(j, "\"rounds\": 13,"));
  assert_non_null(strstr(j, "\"per_round_us\": 3.885"));
  assert_non_null(strstr(j, "\"histogram\": {\"edges_us\": [1, 2, 4, 8, 16, 32, 64, 128], "
                            "\"counts\": [1, 2, 4, 8, 16, 32, 37]}"));
  free(j);
  /* Without a histogram; nothing completed: latency null. */
  j = capture_json(&st, NULL, NULL, 0);
  assert_balanced(j);
  assert_null(strstr(j, "histogram"));
  free(j);
  cudaq_bench_destroy(b);
  assert_int_equal(cudaq_bench_create("idle", 2, &b), CUDAQ_OK);
  assert_int_equal(cudaq_bench_compute(b, &st), CUDAQ_OK);
  j = capture_json(&st, NULL, NULL, 0);
  assert_balanced(j);
  assert_non_null(strstr(j, "\"latency_us\": null"));
  assert_non_null(strstr(j, "\"stages\": []"));
  free(j);
  /* Bad arguments. */
  FILE *devnull = fopen("/dev/null", "w");
  assert_non_null(devnull);
  assert_int_equal(cudaq_bench_write_json(NULL, NULL, NULL, 0, devnull), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_write_json(&st, NULL, NULL, 0, NULL), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_write_json(&st, counts, NULL, 7, devnull), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_write_json(&st, NULL, edges, 7, devnull), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_write_json(&st, counts, edges, 0, devnull), CUDAQ_ERR_INVALID_ARG);
  fclose(devnull);
  cudaq_bench_destroy(b);
}

static void test_print(void **state) {
  (void)state;
  cudaq_bench_t *b = bench_1_to_100();
  assert_int_equal(cudaq_bench_set_stage_name(b, 0, "MWPM decode"), CUDAQ_OK);
  assert_int_equal(cudaq_bench_set_rounds(b, 13), CUDAQ_OK);
  assert_int_equal(cudaq_bench_set_wall_ns(b, 0, 1000000000ull), CUDAQ_OK);
  cudaq_bench_stats_t st;
  assert_int_equal(cudaq_bench_compute(b, &st), CUDAQ_OK);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  assert_int_equal(cudaq_bench_print(&st, f), CUDAQ_OK);
  fclose(f);
  assert_non_null(strstr(buf, "=== Benchmark: one_to_hundred ==="));
  assert_non_null(strstr(buf, "Submitted:  100\n"));
  assert_non_null(strstr(buf, "Completed:  100\n"));
  assert_non_null(strstr(buf, "Timed out:  0\n"));
  assert_non_null(strstr(buf, "Throughput: 100.0 req/s"));
  assert_non_null(strstr(buf, "p99       99.0"));
  assert_non_null(strstr(buf, "stddev    28.9"));
  assert_non_null(strstr(buf, "Worker Timing Breakdown (avg over 100 requests):"));
  assert_non_null(strstr(buf, "MWPM decode:"));
  assert_non_null(strstr(buf, "Other (unattributed):"));
  assert_non_null(strstr(buf, "(100.0%)")); /* no stage stamped: all unattributed */
  assert_non_null(strstr(buf, "Total end-to-end:"));
  assert_non_null(strstr(buf, "Per-round (/13):"));
  free(buf);
  cudaq_bench_destroy(b);
  assert_int_equal(cudaq_bench_print(NULL, stdout), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_print(&st, NULL), CUDAQ_ERR_INVALID_ARG);
}

static void test_argument_errors(void **state) {
  (void)state;
  cudaq_bench_t *b = NULL;
  char longname[CUDAQ_BENCH_NAME_LEN + 1];
  memset(longname, 'n', sizeof longname - 1), longname[sizeof longname - 1] = '\0';
  assert_int_equal(cudaq_bench_create(NULL, 4, &b), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_create("x", 4, NULL), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_create("x", 0, &b), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_create("x", CUDAQ_BENCH_MAX_CAPACITY + 1, &b), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_create("", 4, &b), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_create(longname, 4, &b), CUDAQ_ERR_INVALID_ARG);
  assert_null(b);
  assert_int_equal(cudaq_bench_destroy(NULL), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_set_stage_name(NULL, 0, "s"), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_set_rounds(NULL, 1), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_start(NULL), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_stop(NULL), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_set_wall_ns(NULL, 0, 1), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_mark_submit(NULL, 0, 1), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_mark_complete(NULL, 0, 1), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_mark_timeout(NULL, 0), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_mark_stage(NULL, 0, 0, 1), CUDAQ_ERR_INVALID_ARG);
  cudaq_bench_stats_t st;
  assert_int_equal(cudaq_bench_compute(NULL, &st), CUDAQ_ERR_INVALID_ARG);

  longname[CUDAQ_BENCH_NAME_LEN - 1] = '\0'; /* 63 bytes: fits */
  assert_int_equal(cudaq_bench_create(longname, 4, &b), CUDAQ_OK);
  assert_int_equal(cudaq_bench_compute(b, NULL), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_set_stage_name(b, 0, "s"), CUDAQ_OK);
  /* Index out of range. */
  assert_int_equal(cudaq_bench_mark_submit(b, 4, 1), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_mark_submit(b, SIZE_MAX, 1), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_mark_complete(b, 4, 1), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_mark_timeout(b, 4), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_mark_stage(b, 4, 0, 1), CUDAQ_ERR_INVALID_ARG);
  /* Complete, timeout or stage before the submit. */
  assert_int_equal(cudaq_bench_mark_complete(b, 0, 100), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_mark_timeout(b, 0), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_mark_stage(b, 0, 0, 1), CUDAQ_ERR_INVALID_ARG);
  /* Double submit. */
  assert_int_equal(cudaq_bench_mark_submit(b, 0, 100), CUDAQ_OK);
  assert_int_equal(cudaq_bench_mark_submit(b, 0, 50), CUDAQ_ERR_INVALID_ARG);
  /* Complete stamped before the submit stamp: refused, request unchanged. */
  assert_int_equal(cudaq_bench_mark_complete(b, 0, 99), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_compute(b, &st), CUDAQ_OK);
  assert_int_equal(st.submitted, 1);
  assert_int_equal(st.in_flight, 1);
  assert_int_equal(st.completed, 0);
  /* Then a valid complete (latency 0 is allowed); the first submit stamp held. */
  assert_int_equal(cudaq_bench_mark_complete(b, 0, 100), CUDAQ_OK);
  assert_int_equal(cudaq_bench_mark_complete(b, 0, 200), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_mark_timeout(b, 0), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_mark_submit(b, 0, 1), CUDAQ_ERR_INVALID_ARG);
  /* Timeout twice. */
  assert_int_equal(cudaq_bench_mark_submit(b, 1, 1), CUDAQ_OK);
  assert_int_equal(cudaq_bench_mark_timeout(b, 1), CUDAQ_OK);
  assert_int_equal(cudaq_bench_mark_timeout(b, 1), CUDAQ_ERR_INVALID_ARG);
  assert_int_equal(cudaq_bench_compute(b, &st), CUDAQ_OK);
  assert_string_equal(st.name, longname);
  assert_int_equal(st.submitted, 2);
  assert_int_equal(st.completed, 1);
  assert_int_equal(st.timed_out, 1);
  assert_int_equal(st.in_flight, 0);
  assert_true(st.max_us == 0.0 && st.mean_us == 0.0);
  assert_int_equal(cudaq_bench_destroy(b), CUDAQ_OK);
}

/* ---- two threads ------------------------------------------------------- */

#define MT_REQUESTS 50000
#define MT_TIMEOUT_EVERY 7
#define MT_AHEAD 4 /* the submitter runs at most this far ahead of the completer */
#define MT_TIMEOUT_LAG 2 /* the submitter times out request i - 2 after submitting i */

typedef struct {
  cudaq_bench_t *b;
  _Atomic size_t done;                /* completer: requests 0..done-1 are finished */
  _Atomic int timed_out[MT_REQUESTS]; /* set by the submitter after its timeout won */
  uint64_t timeouts_won;              /* submitter only */
  uint64_t completes_won;             /* completer only */
  uint64_t completes_refused;         /* completer only: before the submit, or lost to a timeout */
} mt_t;

static void *submitter(void *arg) {
  mt_t *m = arg;
  for (size_t i = 0; i < MT_REQUESTS + MT_TIMEOUT_LAG; ++i) {
    /* Stay close to the completer, so that the timeouts below race with it. */
    for (unsigned spins = 1; i > atomic_load_explicit(&m->done, memory_order_relaxed) + MT_AHEAD;
         ++spins)
      if (spins % 256 == 0) sched_yield(); /* 2-core CI machine */
      else cudaq__cpu_relax();
    if (i < MT_REQUESTS)
      assert_int_equal(cudaq_bench_mark_submit(m->b, i, cudaq_bench_now_ns()), CUDAQ_OK);
    /* Race a timeout of an earlier request against the completer, which is
     * about to complete it or spinning on it. */
    size_t j = i - MT_TIMEOUT_LAG;
    if (i >= MT_TIMEOUT_LAG && j % MT_TIMEOUT_EVERY == 0 &&
        cudaq_bench_mark_timeout(m->b, j) == CUDAQ_OK) {
      ++m->timeouts_won;
      atomic_store_explicit(&m->timed_out[j], 1, memory_order_release);
    }
  }
  return NULL;
}

static void *completer(void *arg) {
  mt_t *m = arg;
  for (size_t i = 0; i < MT_REQUESTS; ++i) {
    for (unsigned spins = 0;; ++spins) {
      /* Stage first: refused until the submit is visible. */
      if (cudaq_bench_mark_stage(m->b, i, 0, 250) == CUDAQ_OK) {
        if (cudaq_bench_mark_complete(m->b, i, cudaq_bench_now_ns()) == CUDAQ_OK) {
          ++m->completes_won;
          break;
        }
        ++m->completes_refused; /* the timeout won between the two calls */
      } else if (cudaq_bench_mark_complete(m->b, i, cudaq_bench_now_ns()) == CUDAQ_OK) {
        ++m->completes_won; /* submitted between the two calls (no stage stamp) */
        break;
      } else {
        ++m->completes_refused;
      }
      if (atomic_load_explicit(&m->timed_out[i], memory_order_acquire)) break;
      if (spins % 256 == 255) sched_yield(); /* 2-core CI machine */
      else cudaq__cpu_relax();
    }
    atomic_store_explicit(&m->done, i + 1, memory_order_relaxed); /* pacing only */
  }
  return NULL;
}

static void test_two_threads(void **state) {
  (void)state;
  mt_t *m = calloc(1, sizeof *m);
  assert_non_null(m);
  assert_int_equal(cudaq_bench_create("two_threads", MT_REQUESTS, &m->b), CUDAQ_OK);
  assert_int_equal(cudaq_bench_set_stage_name(m->b, 0, "work"), CUDAQ_OK);
  assert_int_equal(cudaq_bench_start(m->b), CUDAQ_OK);
  pthread_t ts, tc;
  assert_int_equal(pthread_create(&tc, NULL, completer, m), 0);
  assert_int_equal(pthread_create(&ts, NULL, submitter, m), 0);
  /* Snapshots while both run: counts are consistent at every moment. */
  cudaq_bench_stats_t st;
  for (int k = 0; k < 20; ++k) {
    assert_int_equal(cudaq_bench_compute(m->b, &st), CUDAQ_OK);
    assert_true(st.completed + st.timed_out + st.in_flight == st.submitted);
    assert_true(st.submitted <= MT_REQUESTS);
    sched_yield();
  }
  assert_int_equal(pthread_join(ts, NULL), 0);
  assert_int_equal(pthread_join(tc, NULL), 0);
  assert_int_equal(cudaq_bench_stop(m->b), CUDAQ_OK);

  assert_int_equal(cudaq_bench_compute(m->b, &st), CUDAQ_OK);
  assert_int_equal(st.submitted, MT_REQUESTS);
  assert_int_equal(st.in_flight, 0);
  assert_int_equal(st.completed, m->completes_won);
  assert_int_equal(st.timed_out, m->timeouts_won);
  assert_int_equal(st.completed + st.timed_out, MT_REQUESTS);
  assert_true(st.timed_out <= (MT_REQUESTS + MT_TIMEOUT_EVERY - 1) / MT_TIMEOUT_EVERY);
  assert_true(st.stages[0].stamped <= st.completed);
  assert_true(st.min_us >= 0.0 && st.max_us >= st.p99_us && st.p99_us >= st.p50_us);
  assert_true(st.wall_s > 0.0 && st.throughput_rps > 0.0);
  uint64_t counts[8];
  assert_int_equal(cudaq_bench_histogram(m->b, 0, 0, counts, NULL, 8), CUDAQ_OK);
  assert_int_equal(sum(counts, 8), st.completed);
  print_message("two threads: %llu completed, %llu timed out (of %d timeout tries), "
                "%llu completes refused while spinning; p50 %.2f us\n",
                (unsigned long long)st.completed, (unsigned long long)st.timed_out,
                (MT_REQUESTS + MT_TIMEOUT_EVERY - 1) / MT_TIMEOUT_EVERY,
                (unsigned long long)m->completes_refused, st.p50_us);
  cudaq_bench_destroy(m->b);
  free(m);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "mt") == 0) {
    const struct CMUnitTest mt[] = {cmocka_unit_test(test_two_threads)};
    return cmocka_run_group_tests_name("bench_report_mt", mt, NULL, NULL);
  }
  const struct CMUnitTest unit[] = {
      cmocka_unit_test(test_stats_known_inputs),
      cmocka_unit_test(test_percentile_rule),
      cmocka_unit_test(test_only_completed_and_timeouts),
      cmocka_unit_test(test_wall_time_and_throughput),
      cmocka_unit_test(test_stage_breakdown),
      cmocka_unit_test(test_stage_percentiles_and_tail),
      cmocka_unit_test(test_histogram),
      cmocka_unit_test(test_json),
      cmocka_unit_test(test_print),
      cmocka_unit_test(test_argument_errors),
  };
  return cmocka_run_group_tests_name("bench_report", unit, NULL, NULL);
}
