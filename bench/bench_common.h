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

#endif
