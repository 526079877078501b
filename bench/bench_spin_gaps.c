/* bench_spin_gaps - what a polling thread loses on this machine (issue 15's
 * tails; issue 11's host hand-offs).
 *
 * Every thread of the pipeline (dispatcher, CPU workers, consumer) polls a
 * flag in a loop with cudaq__cpu_relax (x86: PAUSE) between polls. On a
 * virtual machine, a vCPU that executes PAUSE in a tight loop can be made to
 * exit to the hypervisor (pause-loop exiting), and any vCPU can be
 * preempted or interrupted. This bench measures it directly: T threads, each
 * pinned to its own CPU, spin for S seconds reading CLOCK_MONOTONIC (vDSO)
 * and record every gap between two consecutive reads, in three modes per
 * round (interleaved):
 *   pause  a PAUSE between reads (the pipeline's idle poll);
 *   plain  no PAUSE (a plain load loop);
 *   yield  sched_yield() between reads (the pipeline's idle_yield).
 * Per mode: reads per second per thread, gaps of at least 1, 5, 20, 100 and
 * 1,000 us (all threads), the time lost in gaps of at least 1 us (percent of
 * the threads' time) and the longest gap.
 *
 * Use: bench_spin_gaps [--cpus 2,3,4,5] [--seconds 1] [--rounds 2]
 * No GPU; the numbers describe the host it runs on. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "bench_common.h"

enum { MODE_PAUSE, MODE_PLAIN, MODE_YIELD, MODES };
static const char *const mode_name[MODES] = {"pause", "plain", "yield"};
static const uint64_t thresholds_ns[] = {1000, 5000, 20000, 100000, 1000000};
#define NT (sizeof thresholds_ns / sizeof thresholds_ns[0])
#define MAX_THREADS 64

typedef struct {
  int cpu, mode, pinned;
  uint64_t seconds_ns;
  uint64_t reads, lost_ns, max_ns, over[NT];
} spinner_t;

static void relax(int mode) {
  if (mode == MODE_YIELD) {
    sched_yield();
  } else if (mode == MODE_PAUSE) {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
  }
}

static void *spin(void *arg) {
  spinner_t *s = (spinner_t *)arg;
  s->pinned = bench_pin(s->cpu) == 0;
  const uint64_t t0 = bench_now_ns(), end = t0 + s->seconds_ns;
  uint64_t prev = t0, reads = 0;
  for (;;) {
    relax(s->mode);
    const uint64_t t = bench_now_ns();
    const uint64_t gap = t - prev;
    prev = t;
    reads++;
    if (gap >= thresholds_ns[0]) {
      s->lost_ns += gap;
      if (gap > s->max_ns) s->max_ns = gap;
      for (size_t k = 0; k < NT; k++) s->over[k] += gap >= thresholds_ns[k];
    }
    if (t >= end) break;
  }
  s->reads = reads;
  return NULL;
}

static int parse_cpus(const char *v, int *cpus) {
  int n = 0;
  char *copy = strdup(v), *save = NULL;
  if (!copy) return 0;
  for (char *tok = strtok_r(copy, ",", &save); tok && n < MAX_THREADS; tok = strtok_r(NULL, ",", &save)) {
    char *e = NULL;
    errno = 0;
    long c = strtol(tok, &e, 10);
    if (errno || !*tok || *e || c < 0 || c > 4095) {
      free(copy);
      return 0;
    }
    cpus[n++] = (int)c;
  }
  free(copy);
  return n;
}

int main(int argc, char **argv) {
  int cpus[MAX_THREADS] = {2, 3, 4, 5}, nthreads = 4, rounds = 2;
  double seconds = 1.0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--cpus") && v) {
      nthreads = parse_cpus(v, cpus);
      if (!nthreads) {
        fprintf(stderr, "bench_spin_gaps: --cpus is a comma-separated list of CPU numbers, not '%s'\n", v);
        return 2;
      }
      i++;
    } else if (!strcmp(a, "--seconds") && v) {
      seconds = atof(v);
      if (!(seconds > 0 && seconds <= 600)) {
        fprintf(stderr, "bench_spin_gaps: --seconds is in (0, 600]\n");
        return 2;
      }
      i++;
    } else if (!strcmp(a, "--rounds") && v) {
      rounds = atoi(v);
      if (rounds < 1 || rounds > 100) {
        fprintf(stderr, "bench_spin_gaps: --rounds is 1..100\n");
        return 2;
      }
      i++;
    } else {
      fprintf(stderr, "usage: bench_spin_gaps [--cpus 2,3,4,5] [--seconds 1] [--rounds 2]\n");
      return 2;
    }
  }
  printf("# bench_spin_gaps: %d threads on CPUs", nthreads);
  for (int t = 0; t < nthreads; t++) printf("%s%d", t ? "," : " ", cpus[t]);
  printf(", %.2f s per mode, %d rounds\n", seconds, rounds);
  printf("%-5s %-6s %12s %9s %9s %9s %9s %9s %9s %10s\n", "round", "mode", "reads/s/thr", ">=1us", ">=5us", ">=20us",
         ">=100us", ">=1ms", "lost%", "max_us");
  int rc = 0;
  for (int r = 1; r <= rounds; r++) {
    for (int m = 0; m < MODES; m++) {
      spinner_t s[MAX_THREADS];
      pthread_t th[MAX_THREADS];
      memset(s, 0, sizeof s);
      for (int t = 0; t < nthreads; t++) {
        s[t].cpu = cpus[t];
        s[t].mode = m;
        s[t].seconds_ns = (uint64_t)(seconds * 1e9);
        if (pthread_create(&th[t], NULL, spin, &s[t])) {
          fprintf(stderr, "bench_spin_gaps: pthread_create failed\n");
          return 1;
        }
      }
      uint64_t reads = 0, lost = 0, mx = 0, over[NT] = {0};
      for (int t = 0; t < nthreads; t++) {
        pthread_join(th[t], NULL);
        if (!s[t].pinned) {
          fprintf(stderr, "bench_spin_gaps: could not pin a thread to CPU %d\n", s[t].cpu);
          rc = 1;
        }
        reads += s[t].reads;
        lost += s[t].lost_ns;
        if (s[t].max_ns > mx) mx = s[t].max_ns;
        for (size_t k = 0; k < NT; k++) over[k] += s[t].over[k];
      }
      printf("%-5d %-6s %12.0f %9llu %9llu %9llu %9llu %9llu %9.4f %10.1f\n", r, mode_name[m],
             (double)reads / nthreads / seconds, (unsigned long long)over[0], (unsigned long long)over[1],
             (unsigned long long)over[2], (unsigned long long)over[3], (unsigned long long)over[4],
             100.0 * (double)lost / ((double)nthreads * seconds * 1e9), (double)mx / 1e3);
      fflush(stdout);
    }
  }
  return rc;
}
