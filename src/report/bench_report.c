/*
 * bench_report.c - the benchmark report utility (cudaq/realtime/bench_report.h).
 *
 * Each request has a state word and three kinds of stamps (submit, complete,
 * stage durations). The stamps are plain uint64_t words accessed through
 * atomics.h with relaxed order; the state word orders them:
 *
 *   R1 (mark_submit, store SUBMITTED, release) publishes submit_ns;
 *      pairs with A1 (mark_complete / mark_timeout CAS, acquire) and A2
 *      (mark_stage load, acquire) and A3 (compute / histogram load, acquire).
 *   R2 (mark_complete, store COMPLETED, release) publishes complete_ns and
 *      the stage stamps; pairs with A3.
 *
 * The transient states CLAIMED (a submit in progress) and COMPLETING (a
 * complete in progress) make a concurrent second caller fail instead of
 * seeing half-written stamps: exactly one of complete and timeout wins.
 *
 * Memory comes from calloc at create: a stage array that is never stamped
 * is never touched, so it costs address space only.
 */
#define _POSIX_C_SOURCE 200809L

#include "cudaq/realtime/bench_report.h"

#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "atomics.h"

enum {
  REQ_IDLE = 0,
  REQ_CLAIMED = 1,    /* mark_submit is writing submit_ns */
  REQ_SUBMITTED = 2,
  REQ_COMPLETING = 3, /* mark_complete is writing complete_ns */
  REQ_COMPLETED = 4,
  REQ_TIMED_OUT = 5
};

struct cudaq_bench {
  char name[CUDAQ_BENCH_NAME_LEN];
  size_t capacity;
  _Atomic int *state;     /* [capacity] REQ_* */
  uint64_t *submit_ns;    /* [capacity] */
  uint64_t *complete_ns;  /* [capacity] */
  uint64_t *stage_ns[CUDAQ_BENCH_MAX_STAGES]; /* [capacity] duration + 1; 0 = not stamped */
  char stage_name[CUDAQ_BENCH_MAX_STAGES][CUDAQ_BENCH_STAGE_NAME_LEN];
  uint32_t num_stages;    /* highest named stage + 1 (report thread only) */
  uint32_t stage_named_mask;
  uint32_t rounds;
  uint64_t start_ns, stop_ns;
  bool started, stopped;
  uint64_t *scratch;      /* [capacity] latencies of the completed requests, for sorting */
};

uint64_t cudaq_bench_now_ns(void) {
  struct timespec t;
  if (clock_gettime(CLOCK_MONOTONIC, &t) != 0) return 0;
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Copies a name of 1..cap-1 bytes; false if it is empty or too long. */
static bool copy_name(char *dst, size_t cap, const char *src) {
  size_t len = strnlen(src, cap);
  if (len == 0 || len >= cap) return false;
  memcpy(dst, src, len + 1);
  return true;
}

cudaq_status_t cudaq_bench_destroy(cudaq_bench_t *b) {
  if (!b) return CUDAQ_ERR_INVALID_ARG;
  free(b->state);
  free(b->submit_ns);
  free(b->complete_ns);
  for (int s = 0; s < CUDAQ_BENCH_MAX_STAGES; ++s) free(b->stage_ns[s]);
  free(b->scratch);
  free(b);
  return CUDAQ_OK;
}

cudaq_status_t cudaq_bench_create(const char *name, size_t capacity, cudaq_bench_t **out) {
  if (!name || !out || capacity == 0 || capacity > CUDAQ_BENCH_MAX_CAPACITY)
    return CUDAQ_ERR_INVALID_ARG;
  cudaq_bench_t *b = calloc(1, sizeof *b);
  if (!b) return CUDAQ_ERR_INTERNAL;
  if (!copy_name(b->name, sizeof b->name, name)) {
    free(b);
    return CUDAQ_ERR_INVALID_ARG;
  }
  b->capacity = capacity;
  /* calloc zeroes: REQ_IDLE is 0, and an all-zero _Atomic int is a valid
   * object holding 0 on every target we build for (atomics.h checks that
   * the lock-free atomic types have the plain types' layout). */
  b->state = calloc(capacity, sizeof *b->state);
  b->submit_ns = calloc(capacity, sizeof *b->submit_ns);
  b->complete_ns = calloc(capacity, sizeof *b->complete_ns);
  b->scratch = calloc(capacity, sizeof *b->scratch);
  bool ok = b->state && b->submit_ns && b->complete_ns && b->scratch;
  for (int s = 0; s < CUDAQ_BENCH_MAX_STAGES && ok; ++s) {
    b->stage_ns[s] = calloc(capacity, sizeof *b->stage_ns[s]);
    ok = b->stage_ns[s] != NULL;
  }
  if (!ok) {
    cudaq_bench_destroy(b);
    return CUDAQ_ERR_INTERNAL;
  }
  *out = b;
  return CUDAQ_OK;
}

cudaq_status_t cudaq_bench_set_stage_name(cudaq_bench_t *b, uint32_t stage, const char *name) {
  if (!b || !name || stage >= CUDAQ_BENCH_MAX_STAGES) return CUDAQ_ERR_INVALID_ARG;
  if (!copy_name(b->stage_name[stage], sizeof b->stage_name[stage], name))
    return CUDAQ_ERR_INVALID_ARG;
  b->stage_named_mask |= 1u << stage;
  if (stage + 1 > b->num_stages) b->num_stages = stage + 1;
  return CUDAQ_OK;
}

cudaq_status_t cudaq_bench_set_rounds(cudaq_bench_t *b, uint32_t rounds) {
  if (!b) return CUDAQ_ERR_INVALID_ARG;
  b->rounds = rounds;
  return CUDAQ_OK;
}

cudaq_status_t cudaq_bench_start(cudaq_bench_t *b) {
  if (!b) return CUDAQ_ERR_INVALID_ARG;
  b->start_ns = cudaq_bench_now_ns();
  b->started = true;
  b->stopped = false;
  return CUDAQ_OK;
}

cudaq_status_t cudaq_bench_stop(cudaq_bench_t *b) {
  if (!b) return CUDAQ_ERR_INVALID_ARG;
  b->stop_ns = cudaq_bench_now_ns();
  b->stopped = true;
  return CUDAQ_OK;
}

cudaq_status_t cudaq_bench_set_wall_ns(cudaq_bench_t *b, uint64_t start_ns, uint64_t stop_ns) {
  if (!b || stop_ns < start_ns) return CUDAQ_ERR_INVALID_ARG;
  b->start_ns = start_ns;
  b->stop_ns = stop_ns;
  b->started = b->stopped = true;
  return CUDAQ_OK;
}

/* ---- hot path: no allocation, no lock, no syscall ---------------------- */

cudaq_status_t cudaq_bench_mark_submit(cudaq_bench_t *b, size_t i, uint64_t t_ns) {
  if (!b || i >= b->capacity) return CUDAQ_ERR_INVALID_ARG;
  int expected = REQ_IDLE;
  /* Relaxed: claiming publishes nothing; it only keeps a second submitter
   * out while submit_ns is written. */
  if (!atomic_compare_exchange_strong_explicit(&b->state[i], &expected, REQ_CLAIMED,
                                               memory_order_relaxed, memory_order_relaxed))
    return CUDAQ_ERR_INVALID_ARG;
  cudaq__store_relaxed_u64(&b->submit_ns[i], t_ns);
  /* R1 publishes submit_ns; pairs with A1 in mark_complete / mark_timeout,
   * A2 in mark_stage and A3 in compute / histogram. */
  atomic_store_explicit(&b->state[i], REQ_SUBMITTED, memory_order_release);
  return CUDAQ_OK;
}

cudaq_status_t cudaq_bench_mark_complete(cudaq_bench_t *b, size_t i, uint64_t t_ns) {
  if (!b || i >= b->capacity) return CUDAQ_ERR_INVALID_ARG;
  int expected = REQ_SUBMITTED;
  /* A1 acquires submit_ns (pairs with R1 in mark_submit); a request that is
   * not SUBMITTED (not yet, or no longer) is refused. */
  if (!atomic_compare_exchange_strong_explicit(&b->state[i], &expected, REQ_COMPLETING,
                                               memory_order_acquire, memory_order_relaxed))
    return CUDAQ_ERR_INVALID_ARG;
  if (t_ns < cudaq__load_relaxed_u64(&b->submit_ns[i])) {
    /* Back to SUBMITTED, changing nothing. Release: a later A1/A2/A3 that
     * reads this store still sees submit_ns (this thread acquired it). */
    atomic_store_explicit(&b->state[i], REQ_SUBMITTED, memory_order_release);
    return CUDAQ_ERR_INVALID_ARG;
  }
  cudaq__store_relaxed_u64(&b->complete_ns[i], t_ns);
  /* R2 publishes complete_ns and this thread's stage stamps; pairs with A3
   * in compute / histogram. */
  atomic_store_explicit(&b->state[i], REQ_COMPLETED, memory_order_release);
  return CUDAQ_OK;
}

cudaq_status_t cudaq_bench_mark_timeout(cudaq_bench_t *b, size_t i) {
  if (!b || i >= b->capacity) return CUDAQ_ERR_INVALID_ARG;
  int expected = REQ_SUBMITTED;
  /* A1 (as in mark_complete): only a SUBMITTED request can time out, and
   * only one of timeout and complete wins. Nothing is published. */
  if (!atomic_compare_exchange_strong_explicit(&b->state[i], &expected, REQ_TIMED_OUT,
                                               memory_order_acquire, memory_order_relaxed))
    return CUDAQ_ERR_INVALID_ARG;
  return CUDAQ_OK;
}

cudaq_status_t cudaq_bench_mark_stage(cudaq_bench_t *b, size_t i, uint32_t stage,
                                      uint64_t duration_ns) {
  if (!b || i >= b->capacity || stage >= CUDAQ_BENCH_MAX_STAGES ||
      !(b->stage_named_mask & (1u << stage)) || duration_ns == UINT64_MAX)
    return CUDAQ_ERR_INVALID_ARG;
  /* A2 pairs with R1: the request must have been submitted. The stamp is
   * published by R2 in this thread's later mark_complete. */
  if (atomic_load_explicit(&b->state[i], memory_order_acquire) != REQ_SUBMITTED)
    return CUDAQ_ERR_INVALID_ARG;
  cudaq__store_relaxed_u64(&b->stage_ns[stage][i], duration_ns + 1);
  return CUDAQ_OK;
}

/* ---- statistics (report thread) --------------------------------------- */

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

cudaq_status_t cudaq_bench_percentile(const uint64_t *sorted, size_t n, double p, uint64_t *out) {
  if (!sorted || !out || n == 0 || !(p > 0.0 && p <= 100.0)) return CUDAQ_ERR_INVALID_ARG;
  /* rank = ceil(p/100 * n). The relative tolerance keeps a product that
   * rounding pushed just above an integer (99.9 * 1000 / 100 =
   * 999.0000000000001) on that integer. */
  double r = p / 100.0 * (double)n;
  size_t rank = (size_t)r;
  if ((double)rank < r * (1.0 - 1e-12)) ++rank;
  if (rank < 1) rank = 1;
  if (rank > n) rank = n;
  *out = sorted[rank - 1];
  return CUDAQ_OK;
}

/* The nearest-rank percentile of n >= 1 sorted latencies, in us. */
static double percentile_us(const uint64_t *sorted, size_t n, double p) {
  uint64_t v = 0;
  cudaq_bench_percentile(sorted, n, p, &v); /* cannot fail: n >= 1, p in (0, 100] */
  return (double)v / 1e3;
}

static double wall_seconds(const cudaq_bench_t *b) {
  if (!b->started) return 0.0;
  uint64_t stop = b->stopped ? b->stop_ns : cudaq_bench_now_ns();
  return stop >= b->start_ns ? (double)(stop - b->start_ns) / 1e9 : 0.0;
}

/* After the latency statistics (b->scratch: the n >= 1 completed
 * requests' latencies, sorted): the slowest 1% (bench_report.h) and what
 * each stage took in it, then each stage's percentiles over the requests
 * that stamped it (sorted in b->scratch, which they overwrite). */
static void tail_and_stage_percentiles(cudaq_bench_t *b, size_t n, cudaq_bench_stats_t *st) {
  const uint64_t thr = b->scratch[n - (n + 99) / 100]; /* the shortest of the ceil(n / 100) longest, in ns */
  double tail_sum[CUDAQ_BENCH_MAX_STAGES] = {0}, tail_lat = 0.0;
  uint64_t tn = 0;
  for (size_t i = 0; i < b->capacity; ++i) {
    /* A3: see compute. */
    if (atomic_load_explicit(&b->state[i], memory_order_acquire) != REQ_COMPLETED) continue;
    uint64_t lat = cudaq__load_relaxed_u64(&b->complete_ns[i]) - cudaq__load_relaxed_u64(&b->submit_ns[i]);
    if (lat < thr) continue;
    ++tn;
    tail_lat += (double)lat;
    for (uint32_t k = 0; k < b->num_stages; ++k) {
      uint64_t v = cudaq__load_relaxed_u64(&b->stage_ns[k][i]);
      if (v) tail_sum[k] += (double)(v - 1);
    }
  }
  st->tail_n = tn;
  st->tail_mean_us = tn ? tail_lat / (double)tn / 1e3 : 0.0;
  double attributed = 0.0;
  for (uint32_t k = 0; k < b->num_stages; ++k) {
    st->stages[k].tail_us = tn ? tail_sum[k] / (double)tn / 1e3 : 0.0;
    attributed += st->stages[k].tail_us;
    size_t m = 0;
    for (size_t i = 0; i < b->capacity; ++i) {
      if (atomic_load_explicit(&b->state[i], memory_order_acquire) != REQ_COMPLETED) continue; /* A3 */
      uint64_t v = cudaq__load_relaxed_u64(&b->stage_ns[k][i]);
      if (v) b->scratch[m++] = v - 1;
    }
    if (!m) continue;
    qsort(b->scratch, m, sizeof *b->scratch, cmp_u64);
    st->stages[k].p50_us = percentile_us(b->scratch, m, 50);
    st->stages[k].p99_us = percentile_us(b->scratch, m, 99);
  }
  st->tail_unattributed_us = st->tail_mean_us - attributed;
}

cudaq_status_t cudaq_bench_compute(cudaq_bench_t *b, cudaq_bench_stats_t *out) {
  if (!b || !out) return CUDAQ_ERR_INVALID_ARG;
  cudaq_bench_stats_t st;
  memset(&st, 0, sizeof st);
  memcpy(st.name, b->name, sizeof st.name);
  st.capacity = b->capacity;
  double stage_sum[CUDAQ_BENCH_MAX_STAGES] = {0};
  double lat_sum = 0.0;
  size_t n = 0;
  for (size_t i = 0; i < b->capacity; ++i) {
    /* A3 pairs with R1 (submit_ns) and R2 (complete_ns, stage stamps). */
    int s = atomic_load_explicit(&b->state[i], memory_order_acquire);
    if (s == REQ_IDLE || s == REQ_CLAIMED) continue;
    ++st.submitted;
    if (s == REQ_TIMED_OUT) ++st.timed_out;
    if (s != REQ_COMPLETED) continue; /* SUBMITTED or COMPLETING: in flight */
    uint64_t lat = cudaq__load_relaxed_u64(&b->complete_ns[i]) -
                   cudaq__load_relaxed_u64(&b->submit_ns[i]);
    b->scratch[n++] = lat;
    lat_sum += (double)lat;
    for (uint32_t k = 0; k < b->num_stages; ++k) {
      uint64_t v = cudaq__load_relaxed_u64(&b->stage_ns[k][i]);
      if (v == 0) continue;
      ++st.stages[k].stamped;
      stage_sum[k] += (double)(v - 1);
    }
  }
  st.completed = n;
  st.in_flight = st.submitted - st.completed - st.timed_out;
  st.wall_s = wall_seconds(b);
  st.throughput_rps = st.wall_s > 0.0 ? (double)n / st.wall_s : 0.0;
  st.num_stages = b->num_stages;
  st.rounds = b->rounds;
  for (uint32_t k = 0; k < b->num_stages; ++k) {
    if (b->stage_named_mask & (1u << k))
      memcpy(st.stages[k].name, b->stage_name[k], sizeof st.stages[k].name);
    else
      snprintf(st.stages[k].name, sizeof st.stages[k].name, "stage %u", (unsigned)k);
  }
  if (n > 0) {
    qsort(b->scratch, n, sizeof *b->scratch, cmp_u64);
    st.min_us = (double)b->scratch[0] / 1e3;
    st.max_us = (double)b->scratch[n - 1] / 1e3;
    st.p50_us = percentile_us(b->scratch, n, 50);
    st.p90_us = percentile_us(b->scratch, n, 90);
    st.p95_us = percentile_us(b->scratch, n, 95);
    st.p99_us = percentile_us(b->scratch, n, 99);
    double mean_ns = lat_sum / (double)n;
    double sq = 0.0; /* second pass: no cancellation of sum(x^2) - n mean^2 */
    for (size_t j = 0; j < n; ++j) {
      double d = (double)b->scratch[j] - mean_ns;
      sq += d * d;
    }
    st.mean_us = mean_ns / 1e3;
    st.stddev_us = sqrt(sq / (double)n) / 1e3;
    double attributed = 0.0;
    for (uint32_t k = 0; k < b->num_stages; ++k) {
      st.stages[k].mean_us = stage_sum[k] / (double)n / 1e3;
      st.stages[k].share = lat_sum > 0.0 ? stage_sum[k] / lat_sum : 0.0;
      attributed += st.stages[k].mean_us;
    }
    st.unattributed_us = st.mean_us - attributed;
    st.unattributed_share = st.mean_us > 0.0 ? st.unattributed_us / st.mean_us : 0.0;
    st.per_round_us = b->rounds ? st.mean_us / (double)b->rounds : 0.0;
    tail_and_stage_percentiles(b, n, &st);
  }
  *out = st;
  return CUDAQ_OK;
}

/* Bucket of x (us) among nb log-spaced buckets from lo to hi. The estimate
 * from the logarithm is corrected against the edges themselves, so a value
 * equal to an edge lands in the bucket that the edge opens. */
static size_t bucket_of(double x, double lo, double hi, size_t nb, double l2lo, double step) {
  if (!(x >= lo)) return 0;
  if (x >= hi) return nb - 1;
  double f = floor((log2(x) - l2lo) / step);
  size_t k = f < 0.0 ? 0 : (f >= (double)nb ? nb - 1 : (size_t)f);
  while (k > 0 && x < exp2(l2lo + (double)k * step)) --k;
  while (k + 1 < nb && x >= exp2(l2lo + (double)(k + 1) * step)) ++k;
  return k;
}

cudaq_status_t cudaq_bench_histogram(cudaq_bench_t *b, double lo_us, double hi_us,
                                     uint64_t *counts, double *edges_us, size_t num_buckets) {
  if (!b || !counts || num_buckets == 0 || !isfinite(lo_us) || !isfinite(hi_us))
    return CUDAQ_ERR_INVALID_ARG;
  bool automatic = lo_us == 0.0 && hi_us == 0.0;
  if (!automatic && !(lo_us > 0.0 && hi_us > lo_us)) return CUDAQ_ERR_INVALID_ARG;
  if (automatic) {
    double mn = INFINITY, mx = 0.0;
    for (size_t i = 0; i < b->capacity; ++i) {
      /* A3: see compute. */
      if (atomic_load_explicit(&b->state[i], memory_order_acquire) != REQ_COMPLETED) continue;
      double us = (double)(cudaq__load_relaxed_u64(&b->complete_ns[i]) -
                           cudaq__load_relaxed_u64(&b->submit_ns[i])) / 1e3;
      if (us < mn) mn = us;
      if (us > mx) mx = us;
    }
    lo_us = isfinite(mn) && mn > 1e-3 ? mn : 1e-3;
    hi_us = mx > lo_us ? mx : 2.0 * lo_us; /* the max itself lands in the last bucket */
  }
  double l2lo = log2(lo_us), step = (log2(hi_us) - l2lo) / (double)num_buckets;
  memset(counts, 0, num_buckets * sizeof *counts);
  if (edges_us) {
    edges_us[0] = lo_us;
    for (size_t k = 1; k < num_buckets; ++k) edges_us[k] = exp2(l2lo + (double)k * step);
    edges_us[num_buckets] = hi_us;
  }
  for (size_t i = 0; i < b->capacity; ++i) {
    /* A3: see compute. */
    if (atomic_load_explicit(&b->state[i], memory_order_acquire) != REQ_COMPLETED) continue;
    double us = (double)(cudaq__load_relaxed_u64(&b->complete_ns[i]) -
                         cudaq__load_relaxed_u64(&b->submit_ns[i])) / 1e3;
    ++counts[bucket_of(us, lo_us, hi_us, num_buckets, l2lo, step)];
  }
  return CUDAQ_OK;
}

/* ---- output -------------------------------------------------------------- */

cudaq_status_t cudaq_bench_print(const cudaq_bench_stats_t *s, FILE *out) {
  if (!s || !out) return CUDAQ_ERR_INVALID_ARG;
  int bad = 0;
  bad |= fprintf(out, "=== Benchmark: %s ===\n", s->name) < 0;
  bad |= fprintf(out,
                 "  Submitted:  %llu\n  Completed:  %llu\n  Timed out:  %llu\n"
                 "  In flight:  %llu\n",
                 (unsigned long long)s->submitted, (unsigned long long)s->completed,
                 (unsigned long long)s->timed_out, (unsigned long long)s->in_flight) < 0;
  bad |= fprintf(out, "  Wall time:  %.3f s\n  Throughput: %.1f req/s\n", s->wall_s,
                 s->throughput_rps) < 0;
  if (s->completed == 0) {
    bad |= fprintf(out, "  Latency:    no completed requests\n") < 0;
    return bad ? CUDAQ_ERR_INTERNAL : CUDAQ_OK;
  }
  bad |= fprintf(out, "  Latency (us, over %llu completed requests):\n",
                 (unsigned long long)s->completed) < 0;
  bad |= fprintf(out,
                 "    min %10.1f   p50 %10.1f   p90 %10.1f   p95 %10.1f\n"
                 "    p99 %10.1f   max %10.1f   mean %9.1f   stddev %7.1f\n",
                 s->min_us, s->p50_us, s->p90_us, s->p95_us, s->p99_us, s->max_us, s->mean_us,
                 s->stddev_us) < 0;
  if (s->num_stages > 0) {
    bad |= fprintf(out, "  Worker Timing Breakdown (avg over %llu requests):\n",
                   (unsigned long long)s->completed) < 0;
    for (uint32_t k = 0; k < s->num_stages && k < CUDAQ_BENCH_MAX_STAGES; ++k) {
      char label[CUDAQ_BENCH_STAGE_NAME_LEN + 1];
      snprintf(label, sizeof label, "%s:", s->stages[k].name);
      bad |= fprintf(out, "    %-24s %10.1f us  (%5.1f%%)   p50 %8.1f  p99 %8.1f  slowest 1%% %8.1f\n", label,
                     s->stages[k].mean_us, 100.0 * s->stages[k].share, s->stages[k].p50_us, s->stages[k].p99_us,
                     s->stages[k].tail_us) < 0;
    }
    bad |= fprintf(out, "    %-24s %10.1f us  (%5.1f%%)   %27s %8.1f\n", "Other (unattributed):",
                   s->unattributed_us, 100.0 * s->unattributed_share, "slowest 1%", s->tail_unattributed_us) < 0;
  }
  bad |= fprintf(out, "    %-24s %10.1f us  %38s %8.1f (%llu requests)\n", "Total end-to-end:", s->mean_us,
                 "slowest 1%", s->tail_mean_us, (unsigned long long)s->tail_n) < 0;
  if (s->rounds > 0) {
    char label[40];
    snprintf(label, sizeof label, "Per-round (/%u):", (unsigned)s->rounds);
    bad |= fprintf(out, "    %-24s %10.1f us/round\n", label, s->per_round_us) < 0;
  }
  return bad ? CUDAQ_ERR_INTERNAL : CUDAQ_OK;
}

/* A JSON string: quotes, backslashes and control bytes escaped. */
static int json_string(FILE *out, const char *str) {
  int bad = fputc('"', out) == EOF;
  for (const unsigned char *p = (const unsigned char *)str; *p; ++p) {
    if (*p == '"' || *p == '\\')
      bad |= fprintf(out, "\\%c", *p) < 0;
    else if (*p < 0x20)
      bad |= fprintf(out, "\\u%04x", *p) < 0;
    else
      bad |= fputc(*p, out) == EOF;
  }
  bad |= fputc('"', out) == EOF;
  return bad;
}

/* A number, or null where JSON has no value for it (NaN, infinity). */
static int json_number(FILE *out, double v) {
  return (isfinite(v) ? fprintf(out, "%.6g", v) : fprintf(out, "null")) < 0;
}

static int json_fixed(FILE *out, const char *fmt, double v) {
  return (isfinite(v) ? fprintf(out, fmt, v) : fprintf(out, "null")) < 0;
}

cudaq_status_t cudaq_bench_write_json(const cudaq_bench_stats_t *s, const uint64_t *counts,
                                      const double *edges_us, size_t num_buckets, FILE *out) {
  if (!s || !out || (!counts != !edges_us) || (counts && num_buckets == 0))
    return CUDAQ_ERR_INVALID_ARG;
  int bad = fprintf(out, "{\n  \"name\": ") < 0;
  bad |= json_string(out, s->name);
  bad |= fprintf(out,
                 ",\n  \"capacity\": %llu,\n  \"submitted\": %llu,\n  \"completed\": %llu,\n"
                 "  \"timed_out\": %llu,\n  \"in_flight\": %llu,\n",
                 (unsigned long long)s->capacity, (unsigned long long)s->submitted,
                 (unsigned long long)s->completed, (unsigned long long)s->timed_out,
                 (unsigned long long)s->in_flight) < 0;
  bad |= fprintf(out, "  \"wall_time_s\": ") < 0 || json_fixed(out, "%.6f", s->wall_s);
  bad |= fprintf(out, ",\n  \"throughput_rps\": ") < 0 || json_fixed(out, "%.1f", s->throughput_rps);
  bad |= fprintf(out, ",\n  \"latency_us\": ") < 0;
  if (s->completed == 0) {
    bad |= fprintf(out, "null") < 0;
  } else {
    const char *key[] = {"min", "max", "mean", "p50", "p90", "p95", "p99", "stddev"};
    const double val[] = {s->min_us, s->max_us, s->mean_us, s->p50_us,
                          s->p90_us, s->p95_us, s->p99_us, s->stddev_us};
    bad |= fputc('{', out) == EOF;
    for (size_t k = 0; k < sizeof val / sizeof val[0]; ++k) {
      bad |= fprintf(out, "%s\"%s\": ", k ? ", " : "", key[k]) < 0;
      bad |= json_fixed(out, "%.3f", val[k]);
    }
    bad |= fputc('}', out) == EOF;
  }
  bad |= fprintf(out, ",\n  \"stages\": [") < 0;
  for (uint32_t k = 0; k < s->num_stages && k < CUDAQ_BENCH_MAX_STAGES; ++k) {
    bad |= fprintf(out, "%s{\"name\": ", k ? ", " : "") < 0;
    bad |= json_string(out, s->stages[k].name);
    bad |= fprintf(out, ", \"stamped\": %llu, \"mean_us\": ",
                   (unsigned long long)s->stages[k].stamped) < 0;
    bad |= json_fixed(out, "%.3f", s->stages[k].mean_us);
    bad |= fprintf(out, ", \"share\": ") < 0 || json_fixed(out, "%.4f", s->stages[k].share);
    bad |= fprintf(out, ", \"p50_us\": ") < 0 || json_fixed(out, "%.3f", s->stages[k].p50_us);
    bad |= fprintf(out, ", \"p99_us\": ") < 0 || json_fixed(out, "%.3f", s->stages[k].p99_us);
    bad |= fprintf(out, ", \"slowest_1pct_us\": ") < 0 || json_fixed(out, "%.3f", s->stages[k].tail_us);
    bad |= fputc('}', out) == EOF;
  }
  bad |= fprintf(out, "],\n  \"unattributed_us\": ") < 0 ||
         json_fixed(out, "%.3f", s->unattributed_us);
  bad |= fprintf(out, ",\n  \"unattributed_share\": ") < 0 ||
         json_fixed(out, "%.4f", s->unattributed_share);
  bad |= fprintf(out, ",\n  \"slowest_1pct\": {\"requests\": %llu, \"mean_us\": ", (unsigned long long)s->tail_n) < 0 ||
         json_fixed(out, "%.3f", s->tail_mean_us);
  bad |= fprintf(out, ", \"unattributed_us\": ") < 0 || json_fixed(out, "%.3f", s->tail_unattributed_us);
  bad |= fputc('}', out) == EOF;
  bad |= fprintf(out, ",\n  \"rounds\": %u,\n  \"per_round_us\": ", (unsigned)s->rounds) < 0 ||
         json_fixed(out, "%.3f", s->per_round_us);
  if (counts) {
    bad |= fprintf(out, ",\n  \"histogram\": {\"edges_us\": [") < 0;
    for (size_t k = 0; k <= num_buckets; ++k) {
      if (k) bad |= fprintf(out, ", ") < 0;
      bad |= json_number(out, edges_us[k]);
    }
    bad |= fprintf(out, "], \"counts\": [") < 0;
    for (size_t k = 0; k < num_buckets; ++k)
      bad |= fprintf(out, "%s%llu", k ? ", " : "", (unsigned long long)counts[k]) < 0;
    bad |= fprintf(out, "]}") < 0;
  }
  bad |= fprintf(out, "\n}\n") < 0;
  return bad ? CUDAQ_ERR_INTERNAL : CUDAQ_OK;
}
