/*
 * cudaq-udp-emu - an FPGA emulator: replays a stim shot file to a UDP
 * decoder service at a fixed cadence and reports what came back.
 *
 *   cudaq-udp-emu --shots FILE --format 01|b8|dets (--dem FILE | --num-dets N [--num-obs K])
 *                 [--obs_in FILE [--obs_in_format 01|b8|dets]]
 *                 [--host 127.0.0.1] --port P [--rate HZ | --closed-loop] [--count N]
 *                 [--function NAME] [--late-us US] [--wait-ms MS] [--spin]
 *                 [--max-lost N] [--echo] [--json FILE]
 *   cudaq-udp-emu --help | -h
 *
 * The shot file's records (stim's sample formats, cudaq/qec/samples.h):
 * without --obs_in each record is the shot's detectors followed by its
 * observables (stim's --append_observables layout: num_dets + num_obs bits,
 * in b8 ceil((num_dets + num_obs) / 8) bytes); with --obs_in FILE (the flag
 * and formats of qec-decode and qec-realtime, PyMatching's) the records are
 * the detectors only and FILE holds one record of num_obs observables per
 * shot. A record of the wrong size is refused with what was expected; a b8
 * file whose every appended observable reads 0, when those bits fit in a
 * detector-only record's padding, gets a note (it may be detector-only).
 * --dem gives num_dets and num_obs; --num-dets N without --num-obs sends
 * the shots with no observables: logical errors are not counted then (said
 * so on the last line), the transport measurements are the same.
 *
 * Each shot becomes one request: its detection events bit-packed LSB-first
 * (ceil(num_dets / 8) bytes) for function NAME (default "qec_decode"); the
 * file is cycled when --count exceeds it. An answer's first 8 bytes are the
 * decoder's observable mask, compared with the shot's recorded observables
 * (a logical error, reported, not a transport failure); with --echo the
 * answer must equal the payload (cudaq-udp-serve --echo).
 * Prints the latency report and histogram (bench_report.h) from the echoed
 * timestamps, and the sent / answered / lost / duplicated / late counts.
 * Exit status: 0 (also for --help); 1 on a setup error (a bad command line
 * or an unreadable / wrongly sized input file); 2 if a check failed (bad
 * echo, duplicate, wrong echo answer) or more than --max-lost (default 0)
 * lost.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudaq/qec/dem.h"
#include "cudaq/qec/samples.h"
#include "udp_emu.h"

typedef struct {
  int echo;
  const uint8_t *payloads;
  size_t stride;
  const uint64_t *obs;
  size_t nshots;
  uint64_t obs_mask;
  uint64_t logical_errors, decoded;
} checker_t;

static int check(void *user, uint64_t i, int32_t status, const uint8_t *res, uint32_t len) {
  checker_t *c = user;
  size_t s = i % c->nshots;
  if (status != 0) return 0; /* counted as an error status already */
  if (c->echo) return len != c->stride || memcmp(res, c->payloads + s * c->stride, len) != 0;
  if (len < 8) return 1;
  uint64_t obs;
  memcpy(&obs, res, 8);
  c->decoded++;
  if ((obs ^ c->obs[s]) & c->obs_mask) c->logical_errors++;
  return 0;
}

static void usage(FILE *f) {
  fputs("usage: cudaq-udp-emu --shots FILE --format 01|b8|dets (--dem FILE | --num-dets N "
        "[--num-obs K])\n"
        "                     [--obs_in FILE [--obs_in_format 01|b8|dets (default 01)]]\n"
        "                     --port P [--host H] [--rate HZ | --closed-loop] [--count N]\n"
        "                     [--function NAME] [--late-us US] [--wait-ms MS] [--spin]\n"
        "                     [--max-lost N] [--echo] [--json FILE]\n"
        "       cudaq-udp-emu --help | -h\n"
        "Shot records: without --obs_in, each record is the detectors followed by the\n"
        "observables (stim's --append_observables layout: N + K bits; b8: ceil((N + K) / 8)\n"
        "bytes). With --obs_in FILE the records are the detectors only (N bits) and FILE\n"
        "holds each shot's K observables. --dem gives N and K; --num-dets N without\n"
        "--num-obs (or --obs_in) sends detectors only and does not count logical errors.\n"
        "Exit status: 0; 1 on a bad command line or input file; 2 if a check failed\n"
        "(bad echo, duplicate, wrong echo answer) or more than --max-lost lost.\n",
        f);
}

/* The record layout of one input file, for reading and for messages. */
typedef struct {
  const char *flag, *path; /* flag: "--shots" or "--obs_in" */
  cudaq_sample_format_t fmt;
  uint32_t nd, no;    /* each record: nd detector bits, then no observable bits */
  int obs_only;       /* the --obs_in file */
  int shots_obs_in;   /* --shots with --obs_in: the observables are in another file */
  uint64_t alt_bits;  /* --shots: the record width of the other layout (appended <->
                         --obs_in), for the hint; 0: no hint */
} layout_t;

static const char *plural(uint64_t n) { return n == 1 ? "" : "s"; }

/* "expected ..." for messages: what a record of l holds, and why. */
static void expected(const layout_t *l, char *buf, size_t len) {
  const uint64_t bits = (uint64_t)l->nd + l->no;
  const uint32_t nd = l->obs_only ? 0 : l->nd;
  size_t k = 0;
#define PUT(...)                                                                  \
  do {                                                                            \
    int w_ = snprintf(buf + k, k < len ? len - k : 0, __VA_ARGS__);               \
    if (w_ > 0) k = k + (size_t)w_ < len ? k + (size_t)w_ : len;                  \
  } while (0)
  if (l->fmt == CUDAQ_SAMPLE_DETS) { /* tokens, not bits */
    PUT("expected ");
    if (nd) PUT("D0..D%u", nd - 1);
    if (nd && l->no) PUT(" and ");
    if (l->no) PUT("L0..L%u", l->no - 1);
    PUT(" tokens");
  } else {
    if (nd && l->no)
      PUT("expected %u detector%s + %u observable%s = %llu bits", nd, plural(nd), l->no,
          plural(l->no), (unsigned long long)bits);
    else if (!l->obs_only)
      PUT("expected %u detector%s", nd, plural(nd));
    else
      PUT("expected %u observable%s", l->no, plural(l->no));
    PUT(" a record");
    if (l->fmt == CUDAQ_SAMPLE_B8) PUT(", %llu bytes in b8", (unsigned long long)(bits + 7) / 8);
  }
  PUT(" (%s)", l->obs_only       ? "--obs_in: the observables only"
               : l->no           ? "observables appended; use --obs_in for a separate file"
               : l->shots_obs_in ? "detectors only: the observables come from --obs_in"
                                 : "no observables");
#undef PUT
}

/* The hint when a file that does not fit its layout fits the other one. */
static void other_layout_hint(const layout_t *l) {
  if (l->no)
    fprintf(stderr, "; it fits records of the detectors only: if that is what it holds, give "
                    "the observables with --obs_in FILE");
  else
    fprintf(stderr, "; it fits records of the detectors + appended observables: if that is what "
                    "it holds, leave out --obs_in");
}

/* Checks a regular file's size (b8) or first record's width (01) against
 * its layout before reading it (cudaq_sample_file_mismatch). Returns 0, or
 * 1 after a message saying what was expected and, where the file fits the
 * other layout (--shots), which flag to change. */
static int check_layout(const layout_t *l) {
  const uint64_t bits = (uint64_t)l->nd + l->no;
  uint64_t found = 0;
  if (!cudaq_sample_file_mismatch(l->path, l->fmt, bits, &found)) return 0;
  char exp[256];
  expected(l, exp, sizeof exp);
  int alt;
  if (l->fmt == CUDAQ_SAMPLE_B8) {
    const uint64_t alt_rec = (l->alt_bits + 7) / 8;
    fprintf(stderr, "cudaq-udp-emu: %s %s: %llu bytes is not a whole number of b8 records of "
                    "%llu bytes; %s", l->flag, l->path, (unsigned long long)found,
            (unsigned long long)(bits + 7) / 8, exp);
    alt = alt_rec && found % alt_rec == 0;
  } else {
    fprintf(stderr, "cudaq-udp-emu: %s %s: record 1 has %llu bits; %s", l->flag, l->path,
            (unsigned long long)found, exp);
    alt = l->alt_bits && found == l->alt_bits;
  }
  if (alt) other_layout_hint(l);
  fputc('\n', stderr);
  return 1;
}

/* Reads every record of a file of layout l with the project's sample
 * reader (samples.h): the detectors bit-packed LSB-first into *pay (stride
 * bytes a record; pay NULL for the --obs_in file) and the observables into
 * *obs; *n records. Returns 0, or 1 after a message. */
static int read_records(const layout_t *l, size_t stride, uint8_t **pay, uint64_t **obs,
                        size_t *n) {
  char exp[256];
  if (check_layout(l)) return 1;
  FILE *f = fopen(l->path, "rb");
  if (!f) {
    fprintf(stderr, "cudaq-udp-emu: cannot open %s %s\n", l->flag, l->path);
    return 1;
  }
  cudaq_sample_reader_t *rd = NULL;
  size_t cap = 1024, k = 0;
  uint8_t *p = pay ? calloc(cap, stride) : NULL;
  uint64_t *o = calloc(cap, sizeof *o);
  uint32_t *ev = malloc(((size_t)l->nd + 1) * sizeof *ev);
  int rc = 1;
  if ((pay && !p) || !o || !ev || cudaq_sample_reader_create(f, l->fmt, l->nd, l->no, &rd)) {
    fprintf(stderr, "cudaq-udp-emu: out of memory\n");
    goto done;
  }
  for (;;) {
    size_t ne = 0;
    uint64_t ob = 0;
    cudaq_mwpm_error_t err;
    err.message[0] = '\0';
    cudaq_mwpm_status_t st = cudaq_sample_reader_next(rd, ev, &ne, &ob, &err);
    if (st == CUDAQ_MWPM_EOF) break;
    if (st != CUDAQ_MWPM_OK) {
      expected(l, exp, sizeof exp);
      fprintf(stderr, "cudaq-udp-emu: %s %s: %s; %s\n", l->flag, l->path,
              err.message[0] ? err.message : cudaq_mwpm_status_str(st), exp);
      goto done;
    }
    if (k == cap) {
      cap *= 2;
      uint64_t *o2 = realloc(o, cap * sizeof *o);
      if (o2) o = o2;
      uint8_t *p2 = pay ? realloc(p, cap * stride) : NULL;
      if (p2) p = p2;
      if (!o2 || (pay && !p2)) {
        fprintf(stderr, "cudaq-udp-emu: out of memory\n");
        goto done;
      }
    }
    if (pay) {
      memset(p + k * stride, 0, stride);
      for (size_t e = 0; e < ne; ++e) /* twice cancels, as the decoders do */
        p[k * stride + ev[e] / 8] ^= (uint8_t)(1u << (ev[e] % 8));
    }
    o[k++] = ob;
  }
  if (pay) *pay = p;
  *obs = o;
  *n = k;
  p = NULL;
  o = NULL;
  rc = 0;
done:
  cudaq_sample_reader_destroy(rd);
  fclose(f);
  free(p);
  free(o);
  free(ev);
  return rc;
}

/* --shots (and --obs_in) into memory: the payloads, stride bytes each, and
 * each shot's observables; *n shots. Returns 0, or 1 after a message
 * (nothing left allocated). */
static int load_shots(const char *shots, cudaq_sample_format_t fmt, const char *obs_in,
                      cudaq_sample_format_t obs_fmt, uint32_t nd, uint32_t no, size_t stride,
                      uint8_t **pay, uint64_t **obs, size_t *n) {
  const uint64_t det_bits = nd, app_bits = (uint64_t)nd + no;
  const layout_t shots_l = {.flag = "--shots", .path = shots, .fmt = fmt, .nd = nd,
                            .no = obs_in ? 0u : no, .shots_obs_in = obs_in != NULL,
                            .alt_bits = !no ? 0 : obs_in ? app_bits : det_bits};
  if (read_records(&shots_l, stride, pay, obs, n)) return 1;
  if (*n == 0) {
    fprintf(stderr, "cudaq-udp-emu: %s holds no shots\n", shots);
    goto fail;
  }
  if (obs_in) {
    const layout_t obs_l = {.flag = "--obs_in", .path = obs_in, .fmt = obs_fmt, .nd = 0,
                            .no = no, .obs_only = 1};
    uint64_t *obs2 = NULL;
    size_t n2 = 0;
    if (read_records(&obs_l, 1, NULL, &obs2, &n2)) goto fail;
    free(*obs);
    *obs = obs2;
    if (n2 != *n) {
      fprintf(stderr, "cudaq-udp-emu: --obs_in %s has %zu record%s, --shots %s %zu: one "
                      "observables record per shot\n", obs_in, n2, plural(n2), shots, *n);
      goto fail;
    }
  } else if (fmt == CUDAQ_SAMPLE_B8 && no > 0 && (det_bits + 7) / 8 == (app_bits + 7) / 8) {
    /* A detector-only b8 file reads as one with the observables appended
     * (all 0) in its padding bits: say so when every one read 0. */
    size_t s = 0;
    while (s < *n && !(*obs)[s]) ++s;
    if (s == *n)
      fprintf(stderr, "cudaq-udp-emu: note: --shots %s: every record's appended observables read "
                      "0; a b8 record of %u detectors holds %u observable bit%s in its padding, "
                      "so a detector-only file reads the same: if it holds the detectors only, "
                      "give the observables with --obs_in FILE (the logical-error count is "
                      "meaningless otherwise)\n", shots, nd, no, plural(no));
  }
  return 0;
fail:
  free(*pay);
  free(*obs);
  *pay = NULL;
  *obs = NULL;
  return 1;
}

/* A format flag's value. Returns 0, or 1 after a message. */
static int parse_format(const char *flag, const char *name, cudaq_sample_format_t *fmt) {
  if (cudaq_sample_format_parse(name, fmt) == CUDAQ_MWPM_OK) return 0;
  fprintf(stderr, "cudaq-udp-emu: %s is 01, b8 or dets, not '%s'\n", flag, name);
  return 1;
}

int main(int argc, char **argv) {
  const char *shots = NULL, *fmt_name = "01", *dem_path = NULL, *json = NULL;
  const char *obs_in = NULL, *obs_fmt_name = "01";
  const char *fname = "qec_decode";
  udp_emu_config_t cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.host = "127.0.0.1";
  cfg.rate_hz = 10000;
  cfg.late_ns = 1000000;
  cfg.wait_ms = 1000;
  long num_dets = -1, num_obs = 0;
  long long count = -1, max_lost = 0;
  checker_t ck;
  memset(&ck, 0, sizeof ck);
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
    if (!strcmp(a, "--closed-loop")) { cfg.closed_loop = 1; continue; }
    if (!strcmp(a, "--spin")) { cfg.spin = 1; continue; }
    if (!strcmp(a, "--echo")) { ck.echo = 1; continue; }
    if (!v) { usage(stderr); return 1; }
    if (!strcmp(a, "--shots")) shots = v;
    else if (!strcmp(a, "--format")) fmt_name = v;
    else if (!strcmp(a, "--obs_in")) obs_in = v;
    else if (!strcmp(a, "--obs_in_format")) obs_fmt_name = v;
    else if (!strcmp(a, "--dem")) dem_path = v;
    else if (!strcmp(a, "--num-dets")) num_dets = atol(v);
    else if (!strcmp(a, "--num-obs")) num_obs = atol(v);
    else if (!strcmp(a, "--host")) cfg.host = v;
    else if (!strcmp(a, "--port")) cfg.port = (uint16_t)atoi(v);
    else if (!strcmp(a, "--rate")) cfg.rate_hz = atof(v);
    else if (!strcmp(a, "--count")) count = atoll(v);
    else if (!strcmp(a, "--function")) fname = v;
    else if (!strcmp(a, "--late-us")) cfg.late_ns = (uint64_t)(atof(v) * 1000);
    else if (!strcmp(a, "--wait-ms")) cfg.wait_ms = (uint32_t)atoi(v);
    else if (!strcmp(a, "--max-lost")) max_lost = atoll(v);
    else if (!strcmp(a, "--json")) json = v;
    else { usage(stderr); return 1; }
    ++i;
  }
  cudaq_sample_format_t fmt, obs_fmt;
  if (!shots || !cfg.port) { usage(stderr); return 1; }
  if (parse_format("--format", fmt_name, &fmt) ||
      parse_format("--obs_in_format", obs_fmt_name, &obs_fmt))
    return 1;
  if (obs_in && ck.echo) {
    fprintf(stderr, "cudaq-udp-emu: --obs_in is for the logical-error count, which --echo does "
                    "not make\n");
    return 1;
  }
  if (dem_path) {
    cudaq_dem_t *dem;
    cudaq_mwpm_error_t err;
    if (cudaq_dem_parse_file(dem_path, &dem, &err) != CUDAQ_MWPM_OK) {
      fprintf(stderr, "cudaq-udp-emu: %s: line %zu: %s\n", dem_path, err.line, err.message);
      return 1;
    }
    num_dets = dem->num_detectors;
    num_obs = dem->num_observables;
    cudaq_dem_destroy(dem);
  }
  if (num_dets < 0 || num_obs < 0 || num_obs > 64) { usage(stderr); return 1; }
  if (obs_in && num_obs == 0) {
    fprintf(stderr, "cudaq-udp-emu: --obs_in needs the number of observables: --dem FILE (with "
                    "observables) or --num-obs K\n");
    return 1;
  }

  /* Read every shot into memory: nothing is parsed while sending. */
  const size_t stride = ((size_t)num_dets + 7) / 8;
  uint8_t *pay = NULL;
  uint64_t *obs = NULL;
  size_t n = 0;
  if (load_shots(shots, fmt, obs_in, obs_fmt, (uint32_t)num_dets, (uint32_t)num_obs,
                 stride ? stride : 1, &pay, &obs, &n))
    return 1;
  uint32_t *lens = malloc(n * sizeof *lens);
  for (size_t i = 0; lens && i < n; ++i) lens[i] = (uint32_t)stride;

  ck.payloads = pay;
  ck.stride = stride;
  ck.obs = obs;
  ck.nshots = n;
  ck.obs_mask = num_obs == 64 ? ~0ull : ((1ull << num_obs) - 1);
  cfg.function_id = cudaq_fnv1a_hash(fname);
  cfg.payloads = pay;
  cfg.payload_stride = stride;
  cfg.payload_lens = lens;
  cfg.num_payloads = n;
  cfg.count = count >= 0 ? (uint64_t)count : n;
  cfg.check = check;
  cfg.check_user = &ck;
  int rc = 1;
  udp_emu_result_t r;
  if (!lens || cudaq_bench_create("udp", cfg.count ? cfg.count : 1, &cfg.bench) != CUDAQ_OK)
    goto done;
  cudaq_bench_start(cfg.bench);
  if (udp_emu_run(&cfg, &r) != 0) goto done;
  cudaq_bench_stop(cfg.bench);

  cudaq_bench_stats_t st;
  uint64_t hist[20];
  double edges[21];
  cudaq_bench_compute(cfg.bench, &st);
  cudaq_bench_print(&st, stdout);
  int have_hist = st.completed &&
                  cudaq_bench_histogram(cfg.bench, 1.0, 100000.0, hist, edges, 20) == CUDAQ_OK;
  if (have_hist) {
    printf("latency histogram:\n");
    for (int b = 0; b < 20; ++b)
      if (hist[b])
        printf("  [%9.1f, %9.1f) us  %llu\n", edges[b], edges[b + 1], (unsigned long long)hist[b]);
  }
  if (json) {
    FILE *jf = fopen(json, "w");
    if (jf) {
      cudaq_bench_write_json(&st, have_hist ? hist : NULL, have_hist ? edges : NULL, 20, jf);
      fclose(jf);
    }
  }
  udp_emu_print(&r, stdout);
  if (!ck.echo && num_obs > 0)
    printf("decoded %llu, logical errors %llu\n", (unsigned long long)ck.decoded,
           (unsigned long long)ck.logical_errors);
  else if (!ck.echo) /* a count against no observables would always read 0 */
    printf("decoded %llu, logical errors not counted (no observables: give --dem, or --num-obs "
           "with appended observables or --obs_in)\n", (unsigned long long)ck.decoded);
  rc = r.bad_echo || r.duplicated || r.wrong_answers || (long long)r.lost > max_lost ? 2 : 0;
done:
  cudaq_bench_destroy(cfg.bench);
  free(pay);
  free(obs);
  free(lens);
  return rc;
}
