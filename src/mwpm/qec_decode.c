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
 * count_mistakes prints "mistakes / shots". Extra flag:
 * --merge_strategy independent|smallest_weight.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cudaq/qec/dem.h"
#include "cudaq/qec/mwpm.h"
#include "cudaq/qec/samples.h"

typedef struct opts {
  const char *cmd, *dem, *in, *out, *obs_in;
  const char *in_format, *out_format, *obs_in_format, *merge;
  int appended, timing;
} opts_t;

static void usage(FILE *f) {
  fputs("usage:\n"
        "  qec-decode predict --dem FILE [--in FILE] [--in_format 01|b8|dets]\n"
        "                     [--out FILE] [--out_format 01|b8|dets]\n"
        "                     [--in_includes_appended_observables]\n"
        "  qec-decode count_mistakes --dem FILE [--in FILE] [--in_format 01|b8|dets]\n"
        "                     [--obs_in FILE] [--obs_in_format 01|b8|dets]\n"
        "                     [--in_includes_appended_observables] [--out FILE] [--time]\n"
        "  common: [--merge_strategy independent|smallest_weight]\n",
        f);
}

static int parse_args(int argc, char **argv, opts_t *o) {
  memset(o, 0, sizeof *o);
  o->in_format = o->out_format = o->obs_in_format = "01";
  o->merge = "independent";
  if (argc < 2)
    return -1;
  o->cmd = argv[1];
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
      fprintf(stderr, "qec-decode: --enable_correlations is not supported\n");
      return -2;
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
  if (!o->dem) {
    fprintf(stderr, "qec-decode: --dem is required\n");
    return -1;
  }
  return 0;
}

static FILE *open_or(const char *path, const char *mode, FILE *dflt) {
  if (!path || !strcmp(path, "-"))
    return dflt;
  FILE *f = fopen(path, mode);
  if (!f)
    fprintf(stderr, "qec-decode: cannot open '%s'\n", path);
  return f;
}

static int run(const opts_t *o) {
  int cmd_predict = !strcmp(o->cmd, "predict");
  if (!cmd_predict && strcmp(o->cmd, "count_mistakes")) {
    fprintf(stderr, "qec-decode: unknown command '%s'\n", o->cmd);
    usage(stderr);
    return 2;
  }
  cudaq_sample_format_t in_fmt, out_fmt, obs_fmt;
  if (cudaq_sample_format_parse(o->in_format, &in_fmt) ||
      cudaq_sample_format_parse(o->out_format, &out_fmt) ||
      cudaq_sample_format_parse(o->obs_in_format, &obs_fmt)) {
    fprintf(stderr, "qec-decode: formats are 01, b8 or dets\n");
    return 2;
  }
  cudaq_mwpm_graph_options_t gopt;
  cudaq_mwpm_graph_options_init(&gopt);
  if (!strcmp(o->merge, "smallest_weight"))
    gopt.merge = CUDAQ_MWPM_MERGE_SMALLEST_WEIGHT;
  else if (strcmp(o->merge, "independent")) {
    fprintf(stderr, "qec-decode: --merge_strategy is independent or smallest_weight\n");
    return 2;
  }
  if (!cmd_predict && !o->appended && !o->obs_in) {
    fprintf(stderr, "qec-decode: count_mistakes needs --obs_in or "
                    "--in_includes_appended_observables\n");
    return 2;
  }
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
  st = cudaq_mwpm_graph_from_dem(dem, &gopt, &g, &err);
  uint32_t nd = dem->num_detectors, no = dem->num_observables;
  cudaq_dem_destroy(dem);
  if (st) {
    fprintf(stderr, "qec-decode: %s: %s\n", o->dem, cudaq_mwpm_status_str(st));
    return 1;
  }
  int rc = 1;
  cudaq_mwpm_decoder_t *dec = NULL;
  cudaq_sample_reader_t *rd = NULL, *ord = NULL;
  uint32_t *events = malloc(((size_t)nd + 1) * sizeof *events);
  FILE *fin = open_or(o->in, "rb", stdin);
  FILE *fout = open_or(o->out, "wb", stdout);
  FILE *fobs = o->obs_in && !o->appended ? open_or(o->obs_in, "rb", NULL) : NULL;
  if (!events || !fin || !fout || (o->obs_in && !o->appended && !fobs))
    goto done;
  if (cudaq_mwpm_decoder_create(g, &dec) ||
      cudaq_sample_reader_create(fin, in_fmt, nd, o->appended ? no : 0, &rd) ||
      (fobs && cudaq_sample_reader_create(fobs, obs_fmt, 0, no, &ord))) {
    fprintf(stderr, "qec-decode: out of memory\n");
    goto done;
  }
  size_t shots = 0, mistakes = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    size_t ne = 0;
    uint64_t obs = 0;
    st = cudaq_sample_reader_next(rd, events, &ne, &obs, &err);
    if (st == CUDAQ_MWPM_EOF)
      break;
    if (st) {
      fprintf(stderr, "qec-decode: input: %s\n", err.message[0] ? err.message :
                                                  cudaq_mwpm_status_str(st));
      goto done;
    }
    cudaq_mwpm_result_t res;
    st = cudaq_mwpm_decode(dec, events, ne, &res);
    if (st) {
      fprintf(stderr, "qec-decode: shot %zu: %s\n", shots + 1, cudaq_mwpm_status_str(st));
      goto done;
    }
    shots++;
    if (cmd_predict) {
      if (cudaq_sample_write_obs(fout, out_fmt, res.obs_mask, no)) {
        fprintf(stderr, "qec-decode: write error\n");
        goto done;
      }
      continue;
    }
    if (ord) {
      size_t dummy = 0;
      st = cudaq_sample_reader_next(ord, NULL, &dummy, &obs, &err);
      if (st) {
        fprintf(stderr, "qec-decode: obs_in: %s\n",
                st == CUDAQ_MWPM_EOF ? "fewer records than the detection events"
                                     : (err.message[0] ? err.message : cudaq_mwpm_status_str(st)));
        goto done;
      }
    }
    mistakes += res.obs_mask != obs;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (!cmd_predict)
    fprintf(fout, "%zu / %zu\n", mistakes, shots);
  if (o->timing) {
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    fprintf(stderr, "decoded %zu shots in %.6f s (%.3f us per shot)\n", shots, s,
            shots ? 1e6 * s / (double)shots : 0.0);
  }
  rc = fflush(fout) ? 1 : 0;
done:
  cudaq_sample_reader_destroy(rd);
  cudaq_sample_reader_destroy(ord);
  cudaq_mwpm_decoder_destroy(dec);
  cudaq_mwpm_graph_destroy(g);
  free(events);
  if (fin && fin != stdin)
    fclose(fin);
  if (fobs)
    fclose(fobs);
  if (fout && fout != stdout && fclose(fout))
    rc = 1;
  return rc;
}

int main(int argc, char **argv) {
  opts_t o;
  if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "help"))) {
    usage(stdout);
    return 0;
  }
  int r = parse_args(argc, argv, &o);
  if (r) {
    if (r == -1)
      usage(stderr);
    return 2;
  }
  return run(&o);
}
