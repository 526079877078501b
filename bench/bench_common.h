/* bench_common.h - timing, pinning and percentile tables for benchmarks. */
#ifndef CUDAQ_BENCH_COMMON_H
#define CUDAQ_BENCH_COMMON_H

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline uint64_t bench_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Pins the calling thread to one CPU; returns 0 on success. */
static inline int bench_pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  return pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

static int bench_cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

typedef struct {
  double min, p50, p90, p99, p999, max, mean;
} bench_stats_t;

/* Sorts v and returns its percentiles in microseconds. */
static inline bench_stats_t bench_percentiles(uint64_t *v, size_t n) {
  bench_stats_t s = {0, 0, 0, 0, 0, 0, 0};
  if (!n) return s;
  qsort(v, n, sizeof *v, bench_cmp_u64);
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += (double)v[i];
#define Q(p) ((double)v[(size_t)((p) * (double)(n - 1))] / 1000.0)
  s.min = Q(0.0), s.p50 = Q(0.5), s.p90 = Q(0.9), s.p99 = Q(0.99), s.p999 = Q(0.999), s.max = Q(1.0);
#undef Q
  s.mean = sum / (double)n / 1000.0;
  return s;
}

static inline void bench_print_header(void) {
  printf("%-44s %8s %7s %7s %7s %7s %7s %8s\n", "path", "n", "min", "p50", "p90", "p99", "p99.9",
         "max");
}

static inline void bench_print_row(const char *name, size_t n, bench_stats_t s) {
  printf("%-44s %8zu %7.2f %7.2f %7.2f %7.2f %7.2f %8.2f  us\n", name, n, s.min, s.p50, s.p90, s.p99,
         s.p999, s.max);
}

/* A log-linear latency histogram for runs too long to keep every sample
 * (soak runs): 16 buckets per power of two, so a reported percentile is the
 * lower edge of its bucket, at most 6.25% below the true value. */
#define BENCH_HIST_BUCKETS (64 * 16)
typedef struct {
  uint64_t count[BENCH_HIST_BUCKETS];
  uint64_t n, max_ns, sum_ns;
} bench_hist_t;

static inline unsigned bench_hist_index(uint64_t v) {
  if (v < 16) return (unsigned)v;
  unsigned e = 63u - (unsigned)__builtin_clzll(v); /* v in [2^e, 2^(e+1)), e >= 4 */
  return e * 16u + (unsigned)((v >> (e - 4)) & 15u) - 48u; /* e = 4 starts at 16 */
}
static inline uint64_t bench_hist_lower(unsigned i) {
  if (i < 16) return i;
  unsigned e = (i + 48u) / 16u, sub = (i + 48u) % 16u;
  return (16ull + sub) << (e - 4);
}
static inline void bench_hist_add(bench_hist_t *h, uint64_t v) {
  h->count[bench_hist_index(v)]++;
  h->n++;
  h->sum_ns += v;
  if (v > h->max_ns) h->max_ns = v;
}
/* The q-quantile (0..1) in ns, the lower edge of its bucket. */
static inline uint64_t bench_hist_quantile(const bench_hist_t *h, double q) {
  if (!h->n) return 0;
  uint64_t want = (uint64_t)(q * (double)(h->n - 1)) + 1, seen = 0;
  for (unsigned i = 0; i < BENCH_HIST_BUCKETS; ++i)
    if ((seen += h->count[i]) >= want) return bench_hist_lower(i);
  return h->max_ns;
}
static inline void bench_hist_print(const char *name, const bench_hist_t *h) {
  printf("%-44s n %llu  p50 %.2f  p99 %.2f  p99.9 %.2f  p99.99 %.2f  max %.2f  mean %.2f us\n", name,
         (unsigned long long)h->n, (double)bench_hist_quantile(h, 0.5) / 1e3,
         (double)bench_hist_quantile(h, 0.99) / 1e3, (double)bench_hist_quantile(h, 0.999) / 1e3,
         (double)bench_hist_quantile(h, 0.9999) / 1e3, (double)h->max_ns / 1e3,
         h->n ? (double)h->sum_ns / (double)h->n / 1e3 : 0.0);
}

#endif
