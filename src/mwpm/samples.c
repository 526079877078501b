/* Readers and writers for stim's 01, b8 and dets sample formats. */
#define _POSIX_C_SOURCE 200809L
#include "cudaq/qec/samples.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "mwpm_internal.h"

struct cudaq_sample_reader {
  FILE *f;
  cudaq_sample_format_t fmt;
  uint32_t num_dets, num_obs;
  size_t record;   /* 1-based index of the record being read */
  uint8_t *buf;    /* b8 record */
  size_t nbytes;
};

cudaq_mwpm_status_t cudaq_sample_format_parse(const char *name, cudaq_sample_format_t *out) {
  if (!name || !out)
    return CUDAQ_MWPM_ERR_INVALID_ARG;
  if (!strcmp(name, "01"))
    *out = CUDAQ_SAMPLE_01;
  else if (!strcmp(name, "b8"))
    *out = CUDAQ_SAMPLE_B8;
  else if (!strcmp(name, "dets"))
    *out = CUDAQ_SAMPLE_DETS;
  else
    return CUDAQ_MWPM_ERR_INVALID_ARG;
  return CUDAQ_MWPM_OK;
}

cudaq_mwpm_status_t cudaq_sample_reader_create(FILE *f, cudaq_sample_format_t fmt,
                                               uint32_t num_dets, uint32_t num_obs,
                                               cudaq_sample_reader_t **out) {
  if (!f || !out || num_obs > 64 || (fmt != CUDAQ_SAMPLE_01 && fmt != CUDAQ_SAMPLE_B8 &&
                                     fmt != CUDAQ_SAMPLE_DETS))
    return CUDAQ_MWPM_ERR_INVALID_ARG;
  cudaq_sample_reader_t *r = calloc(1, sizeof *r);
  if (!r)
    return CUDAQ_MWPM_ERR_NO_MEMORY;
  r->f = f;
  r->fmt = fmt;
  r->num_dets = num_dets;
  r->num_obs = num_obs;
  r->nbytes = ((size_t)num_dets + num_obs + 7) / 8;
  r->buf = malloc(r->nbytes ? r->nbytes : 1);
  if (!r->buf) {
    free(r);
    return CUDAQ_MWPM_ERR_NO_MEMORY;
  }
  *out = r;
  return CUDAQ_MWPM_OK;
}

void cudaq_sample_reader_destroy(cudaq_sample_reader_t *r) {
  if (!r)
    return;
  free(r->buf);
  free(r);
}

static cudaq_mwpm_status_t fmt_err(cudaq_sample_reader_t *r, cudaq_mwpm_error_t *err,
                                   const char *msg) {
  cudaq_mwpm__set_error(err, r->record, "record %zu: %s", r->record, msg);
  return CUDAQ_MWPM_ERR_FORMAT;
}

static void put_bit(cudaq_sample_reader_t *r, size_t bit, uint32_t *events, size_t *ne,
                    uint64_t *obs) {
  if (bit < r->num_dets)
    events[(*ne)++] = (uint32_t)bit;
  else
    *obs |= 1ull << (bit - r->num_dets);
}

static cudaq_mwpm_status_t next_01(cudaq_sample_reader_t *r, uint32_t *events, size_t *ne,
                                   uint64_t *obs, cudaq_mwpm_error_t *err) {
  size_t width = (size_t)r->num_dets + r->num_obs, i = 0;
  int c;
  for (;;) {
    c = getc(r->f);
    if (c == EOF) {
      if (i == 0 && !ferror(r->f))
        return CUDAQ_MWPM_EOF;
      if (ferror(r->f))
        return CUDAQ_MWPM_ERR_IO;
      break;
    }
    if (c == '\n')
      break;
    if (c == '\r')
      continue;
    if (c != '0' && c != '1')
      return fmt_err(r, err, "01 format: expected '0' or '1'");
    if (i >= width)
      return fmt_err(r, err, "01 format: record longer than expected");
    if (c == '1')
      put_bit(r, i, events, ne, obs);
    i++;
  }
  if (i != width)
    return fmt_err(r, err, "01 format: record shorter than expected");
  return CUDAQ_MWPM_OK;
}

static cudaq_mwpm_status_t next_b8(cudaq_sample_reader_t *r, uint32_t *events, size_t *ne,
                                   uint64_t *obs, cudaq_mwpm_error_t *err) {
  size_t width = (size_t)r->num_dets + r->num_obs;
  if (r->nbytes == 0)
    return CUDAQ_MWPM_EOF; /* zero-width records cannot be counted in b8 */
  size_t got = fread(r->buf, 1, r->nbytes, r->f);
  if (got == 0)
    return ferror(r->f) ? CUDAQ_MWPM_ERR_IO : CUDAQ_MWPM_EOF;
  if (got != r->nbytes)
    return fmt_err(r, err, "b8 format: truncated record");
  /* Bits past the record's width, up to its last byte's end, are padding
   * and must be 0 (PyMatching refuses them too): a set one means records of
   * another width, e.g. a file of 8-bit records read for 6 bits. */
  const unsigned used = (unsigned)(width % 8), pad = used ? r->buf[r->nbytes - 1] >> used : 0;
  if (pad) {
    cudaq_mwpm__set_error(err, r->record, "record %zu: b8 format: bit %zu is set, but a record "
                          "has %zu bits (%u detectors + %u observables): its padding bits must be "
                          "0 (records of another width?)", r->record,
                          width + (size_t)__builtin_ctz(pad), width, r->num_dets, r->num_obs);
    return CUDAQ_MWPM_ERR_FORMAT;
  }
  for (size_t b = 0; b < r->nbytes; b++) {
    unsigned v = r->buf[b];
    while (v) {
      unsigned bit = (unsigned)__builtin_ctz(v);
      v &= v - 1;
      size_t i = b * 8 + bit;
      if (i < width)
        put_bit(r, i, events, ne, obs);
    }
  }
  return CUDAQ_MWPM_OK;
}

static cudaq_mwpm_status_t next_dets(cudaq_sample_reader_t *r, uint32_t *events, size_t *ne,
                                     uint64_t *obs, cudaq_mwpm_error_t *err) {
  int c;
  /* Skip blank lines, then expect "shot". */
  do {
    c = getc(r->f);
  } while (c == '\n' || c == '\r' || c == ' ' || c == '\t');
  if (c == EOF)
    return ferror(r->f) ? CUDAQ_MWPM_ERR_IO : CUDAQ_MWPM_EOF;
  const char *kw = "shot";
  for (int k = 0; k < 4; k++) {
    if (c != kw[k])
      return fmt_err(r, err, "dets format: record must start with 'shot'");
    c = getc(r->f);
  }
  for (;;) {
    while (c == ' ' || c == '\t' || c == '\r')
      c = getc(r->f);
    if (c == '\n' || c == EOF)
      break;
    int kind = c;
    if (kind != 'D' && kind != 'L')
      return fmt_err(r, err, "dets format: expected a D# or L# token");
    c = getc(r->f);
    if (!isdigit(c))
      return fmt_err(r, err, "dets format: expected a number after D or L");
    uint64_t v = 0;
    while (isdigit(c)) {
      v = v * 10 + (uint64_t)(c - '0');
      if (v > (1ull << 40))
        return fmt_err(r, err, "dets format: index too large");
      c = getc(r->f);
    }
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n' && c != EOF)
      return fmt_err(r, err, "dets format: bad token");
    if (kind == 'D') {
      if (v >= r->num_dets)
        return fmt_err(r, err, "dets format: detector index out of range");
      /* A token names a set bit: listed twice it is still set (stim's
       * reader); the list stays duplicate-free. */
      size_t j = 0;
      while (j < *ne && events[j] != (uint32_t)v)
        j++;
      if (j == *ne)
        events[(*ne)++] = (uint32_t)v;
    } else {
      if (v >= r->num_obs)
        return fmt_err(r, err, "dets format: observable index out of range");
      *obs |= 1ull << v;
    }
  }
  if (ferror(r->f))
    return CUDAQ_MWPM_ERR_IO;
  return CUDAQ_MWPM_OK;
}

cudaq_mwpm_status_t cudaq_sample_reader_next(cudaq_sample_reader_t *r, uint32_t *events,
                                             size_t *num_events, uint64_t *obs,
                                             cudaq_mwpm_error_t *err) {
  if (!r || !num_events || !obs || (!events && r->num_dets))
    return CUDAQ_MWPM_ERR_INVALID_ARG;
  r->record++;
  *num_events = 0;
  *obs = 0;
  switch (r->fmt) {
  case CUDAQ_SAMPLE_01:
    return next_01(r, events, num_events, obs, err);
  case CUDAQ_SAMPLE_B8:
    return next_b8(r, events, num_events, obs, err);
  case CUDAQ_SAMPLE_DETS:
    return next_dets(r, events, num_events, obs, err);
  }
  return CUDAQ_MWPM_ERR_INVALID_ARG;
}

cudaq_mwpm_status_t cudaq_sample_write_obs(FILE *f, cudaq_sample_format_t fmt, uint64_t obs,
                                           uint32_t num_obs) {
  if (!f || num_obs > 64)
    return CUDAQ_MWPM_ERR_INVALID_ARG;
  int bad = 0;
  if (fmt == CUDAQ_SAMPLE_01) {
    char line[66];
    for (uint32_t i = 0; i < num_obs; i++)
      line[i] = (obs >> i) & 1 ? '1' : '0';
    line[num_obs] = '\n';
    bad = fwrite(line, 1, num_obs + 1, f) != num_obs + 1;
  } else if (fmt == CUDAQ_SAMPLE_B8) {
    uint8_t bytes[8];
    size_t nb = (num_obs + 7) / 8;
    for (size_t b = 0; b < nb; b++)
      bytes[b] = (uint8_t)(obs >> (8 * b));
    bad = nb && fwrite(bytes, 1, nb, f) != nb;
  } else if (fmt == CUDAQ_SAMPLE_DETS) {
    bad = fputs("shot", f) < 0;
    for (uint32_t i = 0; i < num_obs && !bad; i++)
      if ((obs >> i) & 1)
        bad = fprintf(f, " L%u", i) < 0;
    bad = bad || fputc('\n', f) == EOF;
  } else {
    return CUDAQ_MWPM_ERR_INVALID_ARG;
  }
  return bad ? CUDAQ_MWPM_ERR_IO : CUDAQ_MWPM_OK;
}

int cudaq_sample_file_mismatch(const char *path, cudaq_sample_format_t fmt, uint64_t bits,
                               uint64_t *found) {
  struct stat sb;
  if (!path || stat(path, &sb) || !S_ISREG(sb.st_mode) || sb.st_size == 0)
    return 0;
  if (fmt == CUDAQ_SAMPLE_B8) {
    const uint64_t rec = (bits + 7) / 8, size = (uint64_t)sb.st_size;
    if (!rec || size % rec == 0)
      return 0;
    if (found)
      *found = size;
    return 1;
  }
  if (fmt != CUDAQ_SAMPLE_01)
    return 0;
  FILE *f = fopen(path, "rb");
  if (!f)
    return 0; /* the caller's own open reports it */
  uint64_t n = 0;
  int c;
  while ((c = getc(f)) != EOF && c != '\n' && c != '\r')
    n++;
  fclose(f);
  if (n == bits)
    return 0;
  if (found)
    *found = n;
  return 1;
}

/* Whether the regular file at path is 01 text: only '0', '1', '\r' and
 * '\n' bytes, ending with '\n', every line of the same non-zero length (its
 * '0'/'1' characters). Then *lines and *len say what it holds. Reads up to
 * the first other byte, so a real b8 file costs a few bytes. */
static int looks_like_01(const char *path, uint64_t *lines, uint64_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return 0;
  unsigned char buf[65536];
  uint64_t n = 0, first = 0, cur = 0;
  int ok = 1, last = -1;
  size_t got;
  while (ok && (got = fread(buf, 1, sizeof buf, f)) > 0)
    for (size_t i = 0; i < got && ok; i++) {
      const unsigned char c = buf[i];
      last = c;
      if (c == '0' || c == '1')
        cur++;
      else if (c == '\n') {
        if (n == 0)
          first = cur;
        ok = cur > 0 && cur == first;
        n++;
        cur = 0;
      } else if (c != '\r')
        ok = 0;
    }
  ok = ok && !ferror(f) && last == '\n' && n > 0;
  fclose(f);
  *lines = n;
  *len = first;
  return ok;
}

static int check_msg(char *msg, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (msg && cap)
    vsnprintf(msg, cap, fmt, ap);
  va_end(ap);
  return 1;
}

int cudaq_sample_file_check(const char *path, cudaq_sample_format_t fmt, uint32_t num_dets,
                            uint32_t num_obs, const char *format_flag, char *msg, size_t cap) {
  if (!path || !strcmp(path, "-"))
    return 0;
  const uint64_t bits = (uint64_t)num_dets + num_obs, rec = (bits + 7) / 8;
  const char *what = !num_obs ? "" : !num_dets ? " (observables)"
                                               : " (detectors + appended observables)";
  const char *flag = format_flag ? format_flag : "the format";
  struct stat sb;
  uint64_t lines = 0, len = 0, found = 0;
  if (fmt == CUDAQ_SAMPLE_B8 && !stat(path, &sb) && S_ISREG(sb.st_mode) && sb.st_size > 0 &&
      looks_like_01(path, &lines, &len)) {
    if (len == bits)
      return check_msg(msg, cap, "%s: read as b8, but it is 01 text (%llu lines of %llu '0'/'1' "
                       "characters): give %s 01", path, (unsigned long long)lines,
                       (unsigned long long)len, flag);
    return check_msg(msg, cap, "%s: read as b8, but it is 01 text (%llu lines of %llu '0'/'1' "
                     "characters; the DEM needs %llu bits a record%s): is %s 01, and is the DEM "
                     "right?", path, (unsigned long long)lines, (unsigned long long)len,
                     (unsigned long long)bits, what, flag);
  }
  if (!cudaq_sample_file_mismatch(path, fmt, bits, &found))
    return 0;
  if (fmt == CUDAQ_SAMPLE_B8)
    return check_msg(msg, cap, "%s: b8 records of %llu bits%s are %llu bytes each, but the file "
                     "has %llu bytes, not a multiple of %llu (is %s right?)", path,
                     (unsigned long long)bits, what, (unsigned long long)rec,
                     (unsigned long long)found, (unsigned long long)rec, flag);
  return check_msg(msg, cap, "%s: the first 01 record has %llu bits, the DEM needs %llu%s (is %s "
                   "right?)", path, (unsigned long long)found, (unsigned long long)bits, what, flag);
}

/* Whether output out_path would destroy in_path (cudaq_sample_outputs_clobber's rule for one pair). */
static int output_clobbers(const char *out_path, const char *in_path) {
  struct stat so, si;
  if (!out_path || !in_path || !strcmp(out_path, "-") || !strcmp(in_path, "-"))
    return 0;
  if (stat(out_path, &so) || stat(in_path, &si)) /* not there yet: --out F --json F */
    return !strcmp(out_path, in_path);
  return S_ISREG(so.st_mode) && S_ISREG(si.st_mode) && so.st_dev == si.st_dev && so.st_ino == si.st_ino;
}

int cudaq_sample_outputs_clobber(const char *out_path, const char *json_path, const char *const ins[][2],
                                 size_t n, char *msg, size_t cap) {
  if (msg && cap)
    msg[0] = '\0';
  const char *outs[2][2] = {{"--out", out_path}, {"--json", json_path}};
  for (int i = 0; i < 2; i++)
    for (size_t k = 0; k < n + (size_t)i; k++) { /* --json against --out too */
      const char *const *in = k < n ? ins[k] : outs[0];
      if (output_clobbers(outs[i][1], in[1]))
        return check_msg(msg, cap, "%s '%s' is the same file as %s: opening %s would destroy it (give "
                         "another %s)", outs[i][0], outs[i][1], in[0], outs[i][0], outs[i][0]);
    }
  return 0;
}

const char *cudaq_sample_obs_flags_conflict(int appended, int obs_in) {
  return appended && obs_in ? "--obs_in and --in_includes_appended_observables both give the "
                              "observables: use one"
                            : NULL;
}

FILE *cudaq_sample_open(const char *path, const char *mode, FILE *dflt, const char *flag,
                        char *msg, size_t cap) {
  if (msg && cap)
    msg[0] = '\0';
  if (!mode)
    return NULL;
  if (!flag)
    flag = "file";
  if (!path || !strcmp(path, "-")) {
    if (!dflt)
      check_msg(msg, cap, "%s cannot be '-' (stdin or stdout): give a file", flag);
    return dflt;
  }
  FILE *f = fopen(path, mode);
  if (!f) {
    check_msg(msg, cap, "cannot open %s '%s': %s", flag, path, strerror(errno));
    return NULL;
  }
  struct stat sb;
  if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
    check_msg(msg, cap, "cannot read %s '%s': %s", flag, path, strerror(EISDIR));
    fclose(f);
    return NULL;
  }
  return f;
}
