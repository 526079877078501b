/*
 * cudaq-udp-emu - an FPGA emulator: replays a stim shot file to a UDP
 * decoder service at a fixed cadence and reports what came back.
 *
 *   cudaq-udp-emu --shots FILE --format 01|b8|dets (--dem FILE | --num-dets N [--num-obs K])
 *                 [--host 127.0.0.1] --port P [--rate HZ | --closed-loop] [--count N]
 *                 [--function NAME] [--late-us US] [--wait-ms MS] [--spin]
 *                 [--max-lost N] [--echo] [--json FILE]
 *
 * Each shot becomes one request: its detection events bit-packed LSB-first
 * (ceil(num_dets / 8) bytes) for function NAME (default "qec_decode"); the
 * file is cycled when --count exceeds it. An answer's first 8 bytes are the
 * decoder's observable mask, compared with the shot's recorded observables
 * (a logical error, reported, not a transport failure); with --echo the
 * answer must equal the payload (cudaq-udp-serve --echo).
 * Prints the latency report and histogram (bench_report.h) from the echoed
 * timestamps, and the sent / answered / lost / duplicated / late counts.
 * Exit status: 0; 1 on a setup error; 2 if a check failed (bad echo,
 * duplicate, wrong echo answer) or more than --max-lost (default 0) lost.
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

static int usage(void) {
  fprintf(stderr, "usage: cudaq-udp-emu --shots FILE --format 01|b8|dets (--dem FILE | --num-dets N "
                  "[--num-obs K]) --port P [--host H] [--rate HZ | --closed-loop] [--count N] "
                  "[--function NAME] [--late-us US] [--wait-ms MS] [--spin] [--max-lost N] "
                  "[--echo] [--json FILE]\n");
  return 1;
}

int main(int argc, char **argv) {
  const char *shots = NULL, *fmt_name = "01", *dem_path = NULL, *json = NULL;
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
    if (!strcmp(a, "--closed-loop")) { cfg.closed_loop = 1; continue; }
    if (!strcmp(a, "--spin")) { cfg.spin = 1; continue; }
    if (!strcmp(a, "--echo")) { ck.echo = 1; continue; }
    if (!v) return usage();
    if (!strcmp(a, "--shots")) shots = v;
    else if (!strcmp(a, "--format")) fmt_name = v;
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
    else return usage();
    ++i;
  }
  cudaq_sample_format_t fmt;
  if (!shots || !cfg.port || cudaq_sample_format_parse(fmt_name, &fmt) != CUDAQ_MWPM_OK)
    return usage();
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
  if (num_dets < 0 || num_obs < 0 || num_obs > 64) return usage();

  /* Read every shot into memory: nothing is parsed while sending. */
  FILE *f = fopen(shots, "rb");
  cudaq_sample_reader_t *rd = NULL;
  if (!f || cudaq_sample_reader_create(f, fmt, (uint32_t)num_dets, (uint32_t)num_obs, &rd)) {
    fprintf(stderr, "cudaq-udp-emu: cannot read %s\n", shots);
    return 1;
  }
  const size_t stride = ((size_t)num_dets + 7) / 8;
  size_t cap = 1024, n = 0;
  uint8_t *pay = calloc(cap, stride ? stride : 1);
  uint64_t *obs = calloc(cap, sizeof *obs);
  uint32_t *ev = malloc(((size_t)num_dets + 1) * sizeof *ev);
  for (;;) {
    size_t ne = 0;
    uint64_t o = 0;
    cudaq_mwpm_error_t err;
    cudaq_mwpm_status_t st = cudaq_sample_reader_next(rd, ev, &ne, &o, &err);
    if (st == CUDAQ_MWPM_EOF) break;
    if (st != CUDAQ_MWPM_OK) {
      fprintf(stderr, "cudaq-udp-emu: %s: %s\n", shots, err.message);
      return 1;
    }
    if (n == cap) {
      cap *= 2;
      pay = realloc(pay, cap * (stride ? stride : 1));
      obs = realloc(obs, cap * sizeof *obs);
    }
    memset(pay + n * stride, 0, stride);
    for (size_t k = 0; k < ne; ++k) pay[n * stride + ev[k] / 8] |= (uint8_t)(1u << (ev[k] % 8));
    obs[n++] = o;
  }
  cudaq_sample_reader_destroy(rd);
  fclose(f);
  if (n == 0) {
    fprintf(stderr, "cudaq-udp-emu: %s holds no shots\n", shots);
    return 1;
  }
  uint32_t *lens = malloc(n * sizeof *lens);
  for (size_t i = 0; i < n; ++i) lens[i] = (uint32_t)stride;

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
  if (cudaq_bench_create("udp", cfg.count ? cfg.count : 1, &cfg.bench) != CUDAQ_OK) return 1;
  cudaq_bench_start(cfg.bench);
  udp_emu_result_t r;
  if (udp_emu_run(&cfg, &r) != 0) return 1;
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
  if (!ck.echo)
    printf("decoded %llu, logical errors %llu\n", (unsigned long long)ck.decoded,
           (unsigned long long)ck.logical_errors);
  cudaq_bench_destroy(cfg.bench);
  free(pay);
  free(obs);
  free(ev);
  free(lens);
  if (r.bad_echo || r.duplicated || r.wrong_answers || (long long)r.lost > max_lost) return 2;
  return 0;
}
