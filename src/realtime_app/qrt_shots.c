/* qec-realtime: the shot file -> request payloads (qrt_app.h). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudaq/qec/samples.h"
#include "cudaq/realtime/rpc_wire_format.h"
#include "qrt_app.h"


/* Reads every record of a sample file: detectors into payloads (or, with
 * nd = 0, observables only into obs). Returns 0 or 1 after a message. */
static int read_records(const char *flag, const char *path, cudaq_sample_format_t fmt, uint32_t nd,
                        uint32_t nobs_rec, shots_t *s, int obs_only) {
  FILE *f = qrt_open(flag, path, "rb", stdin);
  if (!f)
    return 1;
  cudaq_sample_reader_t *rd = NULL;
  uint32_t *ev = malloc(((size_t)s->nd + 1) * sizeof *ev);
  int rc = 1;
  size_t cap = obs_only ? s->n : 0, n = 0;
  if (!ev || cudaq_sample_reader_create(f, fmt, nd, nobs_rec, &rd)) {
    fprintf(stderr, "qec-realtime: out of memory\n");
    goto done;
  }
  for (;;) {
    size_t ne = 0;
    uint64_t obs = 0;
    cudaq_mwpm_error_t err;
    err.message[0] = '\0';
    cudaq_mwpm_status_t st = cudaq_sample_reader_next(rd, obs_only ? NULL : ev, &ne, &obs, &err);
    if (st == CUDAQ_MWPM_EOF)
      break;
    if (st) {
      fprintf(stderr, "qec-realtime: %s: %s (the DEM has %u detectors and %u observables)\n",
              path, err.message[0] ? err.message : cudaq_mwpm_status_str(st), s->nd, s->no);
      goto done;
    }
    if (obs_only) {
      if (n == s->n) {
        fprintf(stderr, "qec-realtime: %s has more records than the %zu shots\n", path, s->n);
        goto done;
      }
      s->obs[n++] = obs;
      continue;
    }
    if (n == cap) {
      cap = cap ? 2 * cap : 1024;
      int32_t *p = realloc(s->payload, cap * s->nd * sizeof *p);
      uint64_t *o = realloc(s->obs, cap * sizeof *o);
      if (p) s->payload = p;
      if (o) s->obs = o;
      if (!p || !o) {
        fprintf(stderr, "qec-realtime: out of memory\n");
        goto done;
      }
    }
    int32_t *row = s->payload + n * s->nd;
    memset(row, 0, s->nd * sizeof *row);
    for (size_t k = 0; k < ne; k++)
      row[ev[k]] = 1; /* the reader lists each set detector once */
    s->obs[n++] = obs;
  }
  if (obs_only && n != s->n) {
    fprintf(stderr, "qec-realtime: %s has %zu records, the shot file %zu\n", path, n, s->n);
    goto done;
  }
  if (!obs_only)
    s->n = n;
  rc = 0;
done:
  cudaq_sample_reader_destroy(rd);
  free(ev);
  if (f != stdin)
    fclose(f);
  return rc;
}

FILE *qrt_open(const char *flag, const char *path, const char *mode, FILE *dflt) {
  char msg[1024];
  FILE *f = cudaq_sample_open(path, mode, dflt, flag, msg, sizeof msg);
  if (!f)
    fprintf(stderr, "qec-realtime: %s\n", msg);
  return f;
}

/* The tools' shared check of a regular file's record width (and of a 01
 * file read as b8) before reading it. Returns 0, or 1 after a message. */
static int check_file(const char *path, cudaq_sample_format_t fmt, uint32_t nd, uint32_t nobs,
                      const char *format_flag) {
  char msg[1024];
  if (!cudaq_sample_file_check(path, fmt, nd, nobs, format_flag, msg, sizeof msg))
    return 0;
  fprintf(stderr, "qec-realtime: %s\n", msg);
  return 1;
}

int qrt_load_shots(const opts_t *o, shots_t *s) {
  const uint32_t appended = o->appended ? s->no : 0;
  if (check_file(o->in, o->in_fmt, s->nd, appended, "--in_format") ||
      (o->obs_in && check_file(o->obs_in, o->obs_fmt, 0, s->no, "--obs_in_format")) ||
      read_records("--in", o->in, o->in_fmt, s->nd, appended, s, 0))
    return 1;
  if (s->n == 0) {
    fprintf(stderr, "qec-realtime: %s holds no shots\n", o->in);
    return 1;
  }
  s->have_obs = o->appended;
  if (o->obs_in) { /* not with --in_includes_appended_observables: refused */
    if (read_records("--obs_in", o->obs_in, o->obs_fmt, 0, s->no, s, 1))
      return 1;
    s->have_obs = 1;
  }
  s->wire_len = qrt_payload_len(o->payload, s->nd);
  if (o->payload == QRT_PAYLOAD_INT32) {
    s->wire = (uint8_t *)s->payload;
    return 0;
  }
  s->wire = malloc(s->n * s->wire_len);
  uint8_t *bits = malloc(s->nd);
  int rc = 0;
  if (!s->wire || !bits) {
    fprintf(stderr, "qec-realtime: out of memory\n");
    rc = 1;
  }
  for (size_t i = 0; i < s->n && !rc; i++) {
    const int32_t *row = s->payload + i * s->nd;
    for (uint32_t d = 0; d < s->nd; d++)
      bits[d] = (uint8_t)row[d];
    /* the wire format's BIT_PACKED layout (LSB first, padding bits zero) */
    rc = cudaq_bitpack(bits, s->nd, s->wire + i * s->wire_len, (uint32_t)s->wire_len) != CUDAQ_OK;
  }
  free(bits);
  return rc;
}

void qrt_free_shots(shots_t *s) {
  if (s->wire != (uint8_t *)s->payload)
    free(s->wire);
  free(s->payload);
  free(s->obs);
  s->wire = NULL;
  s->payload = NULL;
  s->obs = NULL;
}
