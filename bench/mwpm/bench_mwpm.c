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
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cudaq/qec/dem.h"
#include "cudaq/qec/mwpm.h"
#include "cudaq/qec/samples.h"

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

int main(int argc, char **argv) {
  int repeats = 3, threads = 1, csv = 0, batch = 0, i = 1;
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
    else
      break;
  }
  if (argc - i < 2 || repeats < 1 || threads < 1 || threads > 256 || batch < 0 || batch > 256) {
    fprintf(stderr, "usage: %s [--repeats R] [--threads T | --batch T] [--csv 1] DATA_DIR NAME...\n",
            argv[0]);
    return 2;
  }
  const char *dir = argv[i++];
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
