/*
 * Decode-time benchmark of the MWPM decoder on data sets made by
 * tools/mwpm_reference.py gen (DEM + b8 detection events).
 *
 *   bench_mwpm [--repeats R] [--threads T] [--csv 1] DATA_DIR NAME...
 *
 * For each data set: loads every shot into memory, decodes them all once to
 * warm up, then times R passes over all shots on one thread and prints the
 * best pass in microseconds per shot. With --threads T > 1 it also runs T
 * threads, each with its own decoder on the shared graph, each decoding all
 * shots, and prints the aggregate throughput. --csv 1 prints
 * "name,shots,events_per_shot,us_per_shot,threads,mshots_per_s" lines instead.
 *
 *   bench_mwpm --batch T [--repeats R] [--csv 1] DATA_DIR NAME...
 *
 * Batch mode: times cudaq_mwpm_decode_batch (one call over all shots, the b8
 * file's bit-packed rows as they are, bit-packed predictions, weights
 * returned) with 1..T threads, best of R calls after one warm-up call, and
 * prints shots/s and shots/s per thread (per core when T <= the cores). CSV:
 * "name,shots,threads,seconds,shots_per_s,shots_per_s_per_thread".
 *
 *   bench_mwpm --per-shot R [--threads T] [--spinners S] [--cpus C0,C1,...] DATA_DIR NAME...
 *
 * Per-shot mode (the decode-time tail a realtime worker sees): each of T
 * decoder threads (own decoder, shared graph; default 1) decodes every shot
 * R times over (one warm-up pass first), timing each decode on its own; S
 * more threads only spin on a flag with the pause hint, as the pipeline's
 * idle workers poll their ready flags (default 0). Threads are pinned to
 * the CPUs listed, decoders first, then spinners (default: not pinned).
 * Prints, over every (thread, pass, shot) decode, the percentiles of the
 * time (p50 p90 p99 p99.9 max, us) and, per shot, the percentiles of its
 * fastest decode over all passes and threads (the shot's own cost, noise
 * removed), then the five slowest shots by that cost with their event
 * counts.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cudaq/qec/dem.h"
#include "cudaq/qec/mwpm.h"
#include "cudaq/qec/samples.h"
#include "../bench_common.h"
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

typedef struct shots {
  uint32_t *events;   /* all shots' events, concatenated */
  size_t *start;      /* nshots + 1 */
  uint64_t *obs;
  size_t n;
} shots_t;

typedef struct job {
  const cudaq_mwpm_graph_t *g;
  const shots_t *s;
  int repeats;
  double seconds;
  size_t mistakes;
} job_t;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int load(const char *dir, const char *name, cudaq_mwpm_graph_t **g, shots_t *s) {
  char path[2048];
  snprintf(path, sizeof path, "%s/%s.dem", dir, name);
  cudaq_dem_t *dem;
  cudaq_mwpm_error_t err;
  if (cudaq_dem_parse_file(path, &dem, &err)) {
    fprintf(stderr, "%s:%zu: %s\n", path, err.line, err.message);
    return -1;
  }
  uint32_t nd = dem->num_detectors;
  if (cudaq_mwpm_graph_from_dem(dem, NULL, g, &err)) {
    cudaq_dem_destroy(dem);
    return -1;
  }
  cudaq_dem_destroy(dem);
  snprintf(path, sizeof path, "%s/%s.b8", dir, name);
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "cannot open %s\n", path);
    return -1;
  }
  cudaq_sample_reader_t *rd;
  cudaq_sample_reader_create(f, CUDAQ_SAMPLE_B8, nd, 0, &rd);
  size_t cap_ev = 1 << 20, cap_sh = 1 << 16, nev = 0;
  memset(s, 0, sizeof *s);
  s->events = malloc(cap_ev * sizeof *s->events);
  s->start = malloc((cap_sh + 1) * sizeof *s->start);
  uint32_t *tmp = malloc(nd * sizeof *tmp);
  s->start[0] = 0;
  for (;;) {
    size_t ne;
    uint64_t o;
    cudaq_mwpm_status_t st = cudaq_sample_reader_next(rd, tmp, &ne, &o, &err);
    if (st == CUDAQ_MWPM_EOF)
      break;
    if (st) {
      fprintf(stderr, "%s: %s\n", path, err.message);
      return -1;
    }
    if (nev + ne > cap_ev) {
      while (nev + ne > cap_ev)
        cap_ev *= 2;
      s->events = realloc(s->events, cap_ev * sizeof *s->events);
    }
    if (s->n + 1 >= cap_sh) {
      cap_sh *= 2;
      s->start = realloc(s->start, (cap_sh + 1) * sizeof *s->start);
    }
    memcpy(s->events + nev, tmp, ne * sizeof *tmp);
    nev += ne;
    s->start[++s->n] = nev;
  }
  free(tmp);
  cudaq_sample_reader_destroy(rd);
  fclose(f);
  return 0;
}

static void *worker(void *arg) {
  job_t *j = arg;
  cudaq_mwpm_decoder_t *dec;
  if (cudaq_mwpm_decoder_create(j->g, &dec))
    return NULL;
  cudaq_mwpm_result_t res;
  for (size_t i = 0; i < j->s->n; i++) /* warm-up */
    cudaq_mwpm_decode(dec, j->s->events + j->s->start[i], j->s->start[i + 1] - j->s->start[i],
                      &res);
  double best = 1e300;
  for (int r = 0; r < j->repeats; r++) {
    double t0 = now_s();
    for (size_t i = 0; i < j->s->n; i++)
      cudaq_mwpm_decode(dec, j->s->events + j->s->start[i],
                        j->s->start[i + 1] - j->s->start[i], &res);
    double t = now_s() - t0;
    if (t < best)
      best = t;
  }
  j->seconds = best;
  cudaq_mwpm_decoder_destroy(dec);
  return NULL;
}

static int batch_mode(const char *dir, const char *name, int max_threads, int repeats, int csv) {
  cudaq_mwpm_graph_t *g;
  shots_t s;
  if (load(dir, name, &g, &s))
    return -1;
  free(s.events);
  free(s.start);
  uint32_t nd = cudaq_mwpm_graph_num_nodes(g), no = cudaq_mwpm_graph_num_observables(g);
  size_t row = (nd + 7) / 8, n = s.n;
  char path[2048];
  snprintf(path, sizeof path, "%s/%s.b8", dir, name);
  FILE *f = fopen(path, "rb");
  uint8_t *raw = malloc(n * row + 1), *preds = malloc(n * ((no + 7) / 8) + 1);
  double *w = malloc((n + 1) * sizeof *w);
  if (!f || fread(raw, 1, n * row, f) != n * row) {
    fprintf(stderr, "cannot read %s\n", path);
    return -1;
  }
  fclose(f);
  cudaq_mwpm_decoder_t *decs[256];
  for (int t = 0; t < max_threads; t++)
    if (cudaq_mwpm_decoder_create(g, &decs[t]))
      return -1;
  double base = 0;
  for (int t = 1; t <= max_threads; t++) {
    unsigned flags = CUDAQ_MWPM_BATCH_PACKED_SHOTS | CUDAQ_MWPM_BATCH_PACKED_PREDICTIONS;
    double best = 1e300;
    for (int r = 0; r <= repeats; r++) { /* r = 0: warm-up */
      double t0 = now_s();
      cudaq_mwpm_status_t st = cudaq_mwpm_decode_batch(decs, (size_t)t, raw, n, flags, preds, w, NULL);
      double dt = now_s() - t0;
      if (st) {
        fprintf(stderr, "%s: %s\n", name, cudaq_mwpm_status_str(st));
        return -1;
      }
      if (r && dt < best)
        best = dt;
    }
    double sps = (double)n / best;
    if (t == 1)
      base = sps;
    if (csv)
      printf("%s,%zu,%d,%.6f,%.0f,%.0f\n", name, n, t, best, sps, sps / t);
    else
      printf("| %s | %zu | %d | %.4f | %.0f | %.0f | %.2f |\n", name, n, t, best, sps, sps / t,
             sps / base);
    fflush(stdout);
  }
  for (int t = 0; t < max_threads; t++)
    cudaq_mwpm_decoder_destroy(decs[t]);
  cudaq_mwpm_graph_destroy(g);
  free(raw);
  free(preds);
  free(w);
  return 0;
}

/* ------------------------------------------------------------ per-shot mode */

typedef struct shot_job {
  const cudaq_mwpm_graph_t *g;
  const shots_t *s;
  int passes, cpu;
  pthread_barrier_t *start;
  uint64_t *ns; /* passes x shots decode times */
  int failed;
} shot_job_t;

static _Atomic int spin_stop;

static void pin_self(int cpu) {
  if (cpu >= 0 && bench_pin(cpu))
    fprintf(stderr, "bench_mwpm: cannot pin a thread to CPU %d (left unpinned)\n", cpu);
}

static void *shot_worker(void *arg) {
  shot_job_t *j = arg;
  pin_self(j->cpu);
  cudaq_mwpm_decoder_t *dec;
  j->failed = cudaq_mwpm_decoder_create(j->g, &dec) != CUDAQ_MWPM_OK;
  cudaq_mwpm_result_t res;
  const shots_t *s = j->s;
  if (!j->failed)
    for (size_t i = 0; i < s->n; i++) /* warm-up */
      cudaq_mwpm_decode(dec, s->events + s->start[i], s->start[i + 1] - s->start[i], &res);
  pthread_barrier_wait(j->start);
  for (int r = 0; r < j->passes && !j->failed; r++)
    for (size_t i = 0; i < s->n; i++) {
      uint64_t t0 = bench_now_ns();
      cudaq_mwpm_decode(dec, s->events + s->start[i], s->start[i + 1] - s->start[i], &res);
      j->ns[(size_t)r * s->n + i] = bench_now_ns() - t0;
    }
  if (!j->failed)
    cudaq_mwpm_decoder_destroy(dec);
  return NULL;
}

static void *spinner(void *arg) {
  pin_self(*(const int *)arg);
  while (!atomic_load_explicit(&spin_stop, memory_order_relaxed)) {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#endif
  }
  return NULL;
}

/* p50 p90 p99 p99.9 max of v[n] (sorted in place), us. */
static void print_pcts(uint64_t *v, size_t n) {
  const bench_stats_t st = bench_percentiles(v, n);
  printf(" %.2f | %.2f | %.2f | %.2f | %.2f |", st.p50, st.p90, st.p99, st.p999, st.max);
}

static int per_shot_mode(const char *dir, const char *name, int passes, int threads, int spinners,
                         const int *cpus, int ncpus) {
  cudaq_mwpm_graph_t *g;
  shots_t s;
  if (load(dir, name, &g, &s))
    return -1;
  if (s.n == 0) {
    fprintf(stderr, "%s: no shots\n", name);
    return -1;
  }
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
  shot_job_t jobs[256];
  pthread_t th[256], sp[256];
  int sp_cpu[256];
  atomic_store(&spin_stop, 0);
  for (int t = 0; t < spinners; t++) {
    sp_cpu[t] = threads + t < ncpus ? cpus[threads + t] : -1;
    pthread_create(&sp[t], NULL, spinner, &sp_cpu[t]);
  }
  for (int t = 0; t < threads; t++) {
    jobs[t] = (shot_job_t){g, &s, passes, t < ncpus ? cpus[t] : -1, &start, NULL, 0};
    jobs[t].ns = malloc((size_t)passes * s.n * sizeof(uint64_t));
    if (!jobs[t].ns) {
      fprintf(stderr, "out of memory\n");
      return -1;
    }
    pthread_create(&th[t], NULL, shot_worker, &jobs[t]);
  }
  pthread_barrier_wait(&start);
  for (int t = 0; t < threads; t++)
    pthread_join(th[t], NULL);
  atomic_store(&spin_stop, 1);
  for (int t = 0; t < spinners; t++)
    pthread_join(sp[t], NULL);
  pthread_barrier_destroy(&start);
  size_t per = (size_t)passes * s.n, all_n = per * (size_t)threads;
  uint64_t *all = malloc(all_n * sizeof *all), *best = malloc(s.n * sizeof *best);
  size_t *order = malloc(s.n * sizeof *order);
  int failed = 0;
  for (size_t i = 0; i < s.n; i++)
    best[i] = UINT64_MAX;
  for (int t = 0; t < threads; t++) {
    failed |= jobs[t].failed;
    memcpy(all + (size_t)t * per, jobs[t].ns, per * sizeof *all);
    for (size_t k = 0; k < per; k++)
      if (jobs[t].ns[k] < best[k % s.n])
        best[k % s.n] = jobs[t].ns[k];
    free(jobs[t].ns);
  }
  if (failed) {
    fprintf(stderr, "%s: a decoder could not be created\n", name);
    return -1;
  }
  printf("| %s | %zu | %.2f | %d | %d | %d |", name, s.n, (double)s.start[s.n] / (double)s.n, threads,
         spinners, passes);
  print_pcts(all, all_n);
  /* The five slowest shots by their own cost (selection on a copy). */
  uint64_t *b2 = malloc(s.n * sizeof *b2);
  memcpy(b2, best, s.n * sizeof *b2);
  print_pcts(b2, s.n);
  for (size_t i = 0; i < s.n; i++)
    order[i] = i;
  printf(" ");
  for (int k = 0; k < 5 && (size_t)k < s.n; k++) {
    size_t m = (size_t)k;
    for (size_t i = (size_t)k + 1; i < s.n; i++)
      if (best[order[i]] > best[order[m]])
        m = i;
    size_t tmp = order[k];
    order[k] = order[m];
    order[m] = tmp;
    printf("%s#%zu: %zu ev, %.1f", k ? "; " : "", order[k], s.start[order[k] + 1] - s.start[order[k]],
           1e-3 * (double)best[order[k]]);
  }
  printf(" |\n");
  fflush(stdout);
  free(all);
  free(best);
  free(b2);
  free(order);
  free(s.events);
  free(s.start);
  cudaq_mwpm_graph_destroy(g);
  return 0;
}

/* "2,3,4" -> cpus; returns the count or -1. */
static int parse_cpus(const char *v, int *cpus, int max) {
  int n = 0;
  while (*v) {
    char *end;
    long c = strtol(v, &end, 10);
    if (end == v || c < 0 || c > 4095 || n == max)
      return -1;
    cpus[n++] = (int)c;
    v = *end == ',' ? end + 1 : end;
    if (*end && *end != ',')
      return -1;
  }
  return n;
}

int main(int argc, char **argv) {
  int repeats = 3, threads = 1, csv = 0, batch = 0, i = 1, per_shot = 0, spinners = 0, ncpus = 0;
  int cpus[512];
  for (; i < argc && !strncmp(argv[i], "--", 2); i += 2) {
    if (i + 1 >= argc)
      break;
    if (!strcmp(argv[i], "--repeats"))
      repeats = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--threads"))
      threads = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--csv"))
      csv = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--batch"))
      batch = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--per-shot"))
      per_shot = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--spinners"))
      spinners = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--cpus")) {
      if ((ncpus = parse_cpus(argv[i + 1], cpus, 512)) < 0) {
        fprintf(stderr, "bench_mwpm: --cpus %s: expected a comma-separated list of CPU numbers\n", argv[i + 1]);
        return 2;
      }
    } else
      break;
  }
  if (argc - i < 2 || repeats < 1 || threads < 1 || threads > 256 || batch < 0 || batch > 256 || per_shot < 0 ||
      spinners < 0 || spinners > 256 || (per_shot && batch)) {
    fprintf(stderr,
            "usage: %s [--repeats R] [--threads T | --batch T] [--csv 1] DATA_DIR NAME...\n"
            "       %s --per-shot R [--threads T] [--spinners S] [--cpus C0,C1,...] DATA_DIR NAME...\n",
            argv[0], argv[0]);
    return 2;
  }
  const char *dir = argv[i++];
  if (per_shot) {
    printf("| data set | shots | mean events/shot | decoder threads | spinners | passes | all decodes: p50 | "
           "p90 | p99 | p99.9 | max (us) | each shot's fastest: p50 | p90 | p99 | p99.9 | max (us) | "
           "slowest shots (index: events, us) |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (; i < argc; i++)
      if (per_shot_mode(dir, argv[i], per_shot, threads, spinners, cpus, ncpus))
        return 1;
    return 0;
  }
  if (batch) {
    if (!csv) {
      printf("| data set | shots | threads | best call (s) | shots/s | shots/s per thread | vs 1 thread |\n");
      printf("|---|---|---|---|---|---|---|\n");
    }
    for (; i < argc; i++)
      if (batch_mode(dir, argv[i], batch, repeats, csv))
        return 1;
    return 0;
  }
  if (!csv) {
    printf("| data set | shots | mean events/shot | ours us/shot (1 thread) |%s\n",
           threads > 1 ? " threads | aggregate Mshots/s | us/shot per thread |" : "");
    printf("|---|---|---|---|%s\n", threads > 1 ? "---|---|---|" : "");
  }
  for (; i < argc; i++) {
    cudaq_mwpm_graph_t *g;
    shots_t s;
    if (load(dir, argv[i], &g, &s))
      return 1;
    job_t one = {g, &s, repeats, 0, 0};
    worker(&one);
    double us1 = 1e6 * one.seconds / (double)s.n, evs = (double)s.start[s.n] / (double)s.n;
    if (!csv)
      printf("| %s | %zu | %.2f | %.3f |", argv[i], s.n, evs, us1);
    double mshots = 1.0 / us1;
    if (threads > 1) {
      pthread_t th[256];
      job_t jobs[256];
      double t0 = now_s();
      for (int t = 0; t < threads; t++) {
        jobs[t] = one;
        jobs[t].repeats = 1;
        pthread_create(&th[t], NULL, worker, &jobs[t]);
      }
      for (int t = 0; t < threads; t++)
        pthread_join(th[t], NULL);
      (void)t0;
      double worst = 0;
      for (int t = 0; t < threads; t++)
        if (jobs[t].seconds > worst)
          worst = jobs[t].seconds;
      mshots = (double)threads * (double)s.n / worst / 1e6;
      if (!csv)
        printf(" %d | %.3f | %.3f |", threads, mshots, 1e6 * worst / (double)s.n);
    }
    if (csv)
      printf("%s,%zu,%.3f,%.4f,%d,%.4f\n", argv[i], s.n, evs, us1, threads, mshots);
    else
      printf("\n");
    fflush(stdout);
    free(s.events);
    free(s.start);
    cudaq_mwpm_graph_destroy(g);
  }
  return 0;
}
