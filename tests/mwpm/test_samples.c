/* Sample readers and writers (01, b8, dets), good and bad input; and
 * several threads decoding with one shared graph. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cudaq/qec/mwpm.h"
#include "cudaq/qec/samples.h"

static FILE *from_bytes(const void *data, size_t n) {
  FILE *f = tmpfile();
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, n, f), n);
  rewind(f);
  return f;
}

static void read_all(FILE *f, cudaq_sample_format_t fmt, uint32_t nd, uint32_t no,
                     uint32_t ev[][8], size_t *nev, uint64_t *obs, size_t *nshots,
                     cudaq_mwpm_status_t *last) {
  cudaq_sample_reader_t *r;
  assert_int_equal(cudaq_sample_reader_create(f, fmt, nd, no, &r), CUDAQ_MWPM_OK);
  cudaq_mwpm_error_t err;
  *nshots = 0;
  for (;;) {
    cudaq_mwpm_status_t st = cudaq_sample_reader_next(r, ev[*nshots], &nev[*nshots],
                                                      &obs[*nshots], &err);
    *last = st;
    if (st != CUDAQ_MWPM_OK)
      break;
    (*nshots)++;
  }
  cudaq_sample_reader_destroy(r);
  fclose(f);
}

static void test_formats_agree(void **state) {
  (void)state;
  /* Two shots of 5 detectors + 2 appended observables:
   * shot 1: D1 D4 L1; shot 2: D0 L0. */
  const char *t01 = "0100101\n1000010\n";
  const uint8_t b8[] = {0x12 | 0x40, 0x01 | 0x20};
  const char *dets = "shot D1 D4 L1\nshot D0 L0\n";
  struct {
    cudaq_sample_format_t fmt;
    const void *data;
    size_t n;
  } cases[] = {{CUDAQ_SAMPLE_01, t01, strlen(t01)},
               {CUDAQ_SAMPLE_B8, b8, sizeof b8},
               {CUDAQ_SAMPLE_DETS, dets, strlen(dets)}};
  for (size_t c = 0; c < 3; c++) {
    uint32_t ev[4][8];
    size_t nev[4], n;
    uint64_t obs[4];
    cudaq_mwpm_status_t last;
    read_all(from_bytes(cases[c].data, cases[c].n), cases[c].fmt, 5, 2, ev, nev, obs, &n, &last);
    assert_int_equal(last, CUDAQ_MWPM_EOF);
    assert_int_equal(n, 2);
    assert_int_equal(nev[0], 2);
    assert_int_equal(ev[0][0], 1);
    assert_int_equal(ev[0][1], 4);
    assert_int_equal(obs[0], 2);
    assert_int_equal(nev[1], 1);
    assert_int_equal(ev[1][0], 0);
    assert_int_equal(obs[1], 1);
  }
}

/* dets: a token names a set bit, as stim's reader reads it: a detector or
 * observable listed twice is set once, not cancelled. */
static void test_dets_repeated(void **state) {
  (void)state;
  const char *dets = "shot D3 D3\nshot D1 L0 D0 D1 L0 D1\n";
  uint32_t ev[4][8];
  size_t nev[4], n;
  uint64_t obs[4];
  cudaq_mwpm_status_t last;
  read_all(from_bytes(dets, strlen(dets)), CUDAQ_SAMPLE_DETS, 5, 1, ev, nev, obs, &n, &last);
  assert_int_equal(last, CUDAQ_MWPM_EOF);
  assert_int_equal(n, 2);
  assert_int_equal(nev[0], 1);
  assert_int_equal(ev[0][0], 3);
  assert_int_equal(obs[0], 0);
  assert_int_equal(nev[1], 2);
  assert_int_equal(ev[1][0], 1);
  assert_int_equal(ev[1][1], 0);
  assert_int_equal(obs[1], 1);
}

static void expect_format_error(cudaq_sample_format_t fmt, const char *data, size_t n) {
  uint32_t ev[4][8];
  size_t nev[4], count;
  uint64_t obs[4];
  cudaq_mwpm_status_t last;
  read_all(from_bytes(data, n), fmt, 5, 1, ev, nev, obs, &count, &last);
  assert_int_equal(last, CUDAQ_MWPM_ERR_FORMAT);
}

static void test_bad_input(void **state) {
  (void)state;
  expect_format_error(CUDAQ_SAMPLE_01, "01001\n", 6);        /* short */
  expect_format_error(CUDAQ_SAMPLE_01, "0100100\n", 8);      /* long */
  expect_format_error(CUDAQ_SAMPLE_01, "01x010\n", 7);       /* bad char */
  expect_format_error(CUDAQ_SAMPLE_DETS, "shot D5\n", 8);    /* out of range */
  expect_format_error(CUDAQ_SAMPLE_DETS, "shot L1\n", 8);
  expect_format_error(CUDAQ_SAMPLE_DETS, "shots D1\n", 9);
  expect_format_error(CUDAQ_SAMPLE_DETS, "shot X1\n", 8);
  expect_format_error(CUDAQ_SAMPLE_DETS, "shot D\n", 7);
  expect_format_error(CUDAQ_SAMPLE_DETS, "hello\n", 6);
  expect_format_error(CUDAQ_SAMPLE_DETS, "shot D1x\n", 8);
  /* b8 with 10 bits per record (2 bytes): 3 bytes = one record + a torn one. */
  uint32_t ev[4][8];
  size_t nev[4], count;
  uint64_t obs[4];
  cudaq_mwpm_status_t last;
  read_all(from_bytes("\x01\x02\x03", 3), CUDAQ_SAMPLE_B8, 10, 0, ev, nev, obs, &count, &last);
  assert_int_equal(count, 1);
  assert_int_equal(last, CUDAQ_MWPM_ERR_FORMAT);
  cudaq_sample_format_t f;
  assert_int_equal(cudaq_sample_format_parse("b8", &f), CUDAQ_MWPM_OK);
  assert_int_equal(f, CUDAQ_SAMPLE_B8);
  assert_int_equal(cudaq_sample_format_parse("r8", &f), CUDAQ_MWPM_ERR_INVALID_ARG);
}

/* b8 padding bits (past the record's width, up to its last byte's end) must
 * be 0: a set one names the record and the bit. Records of 6 bits: 0x3f is
 * fine, 0x80 sets bit 7. Observables-only records (1 bit) the same. */
static void test_b8_padding(void **state) {
  (void)state;
  uint32_t ev[4][8];
  size_t nev[4], count;
  uint64_t obs[4];
  cudaq_mwpm_status_t last;
  read_all(from_bytes("\x3f\x01", 2), CUDAQ_SAMPLE_B8, 6, 0, ev, nev, obs, &count, &last);
  assert_int_equal(last, CUDAQ_MWPM_EOF);
  assert_int_equal(count, 2);
  assert_int_equal(nev[0], 6);
  const struct {
    const char *data;
    uint32_t nd, no;
    const char *msg;
  } bad[] = {
      {"\x3f\x81", 6, 0, "record 2: b8 format: bit 7 is set, but a record has 6 bits "
                         "(6 detectors + 0 observables)"},
      {"\x01\x40", 5, 1, "record 2: b8 format: bit 6 is set, but a record has 6 bits "
                         "(5 detectors + 1 observables)"},
      {"\x00\x02", 0, 1, "record 2: b8 format: bit 1 is set, but a record has 1 bits "
                         "(0 detectors + 1 observables)"},
  };
  for (size_t c = 0; c < sizeof bad / sizeof bad[0]; c++) {
    cudaq_sample_reader_t *r;
    FILE *f = from_bytes(bad[c].data, 2);
    assert_int_equal(cudaq_sample_reader_create(f, CUDAQ_SAMPLE_B8, bad[c].nd, bad[c].no, &r),
                     CUDAQ_MWPM_OK);
    cudaq_mwpm_error_t err;
    size_t ne;
    uint64_t o;
    assert_int_equal(cudaq_sample_reader_next(r, ev[0], &ne, &o, &err), CUDAQ_MWPM_OK);
    assert_int_equal(cudaq_sample_reader_next(r, ev[0], &ne, &o, &err), CUDAQ_MWPM_ERR_FORMAT);
    assert_non_null(strstr(err.message, bad[c].msg));
    cudaq_sample_reader_destroy(r);
    fclose(f);
  }
}

/* Writes n bytes to a new temporary file; its path into path (>= 32 bytes). */
static void temp_file(char *path, const void *data, size_t n) {
  strcpy(path, "/tmp/test_samples_XXXXXX");
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  FILE *f = fdopen(fd, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, n, f), n);
  assert_int_equal(fclose(f), 0);
}

/* cudaq_sample_file_check: what each tool checks before reading a file. */
static void test_file_check(void **state) {
  (void)state;
  char p[64], msg[512];
  /* 01 text read as b8: refused whatever its size (6 bytes = 3 records of 2
   * bytes for 10 or 16 bits), with the --in_format 01 hint. */
  temp_file(p, "01\n11\n", 6);
  assert_int_equal(cudaq_sample_file_check(p, CUDAQ_SAMPLE_B8, 2, 0, "--in_format", msg, sizeof msg), 1);
  assert_non_null(strstr(msg, "read as b8, but it is 01 text (2 lines of 2 '0'/'1' characters): "
                              "give --in_format 01"));
  assert_int_equal(cudaq_sample_file_check(p, CUDAQ_SAMPLE_B8, 16, 0, "--in_format", msg, sizeof msg), 1);
  assert_non_null(strstr(msg, "the DEM needs 16 bits a record"));
  /* As 01 it fits; as 01 of 3 bits it does not. */
  assert_int_equal(cudaq_sample_file_check(p, CUDAQ_SAMPLE_01, 2, 0, "--in_format", msg, sizeof msg), 0);
  assert_int_equal(cudaq_sample_file_check(p, CUDAQ_SAMPLE_01, 2, 1, "--in_format", msg, sizeof msg), 1);
  assert_non_null(strstr(msg, "the first 01 record has 2 bits, the DEM needs 3 (detectors + "
                              "appended observables) (is --in_format right?)"));
  assert_int_equal(cudaq_sample_file_check(p, CUDAQ_SAMPLE_01, 0, 1, "--obs_in_format", msg, sizeof msg), 1);
  assert_non_null(strstr(msg, "the DEM needs 1 (observables) (is --obs_in_format right?)"));
  remove(p);
  /* Lines of different lengths, or another byte: not 01 text, so real b8. */
  temp_file(p, "01\n1\n", 5);
  assert_int_equal(cudaq_sample_file_check(p, CUDAQ_SAMPLE_B8, 8, 0, "--in_format", msg, sizeof msg), 0);
  remove(p);
  temp_file(p, "01\n1\x02\n", 6);
  assert_int_equal(cudaq_sample_file_check(p, CUDAQ_SAMPLE_B8, 8, 0, "--in_format", msg, sizeof msg), 0);
  assert_int_equal(cudaq_sample_file_check(p, CUDAQ_SAMPLE_B8, 33, 0, "--in_format", msg, sizeof msg), 1);
  assert_non_null(strstr(msg, "b8 records of 33 bits are 5 bytes each, but the file has 6 bytes"));
  remove(p);
  /* No path, stdin, or a missing file: cannot tell. */
  assert_int_equal(cudaq_sample_file_check(NULL, CUDAQ_SAMPLE_B8, 8, 0, NULL, msg, sizeof msg), 0);
  assert_int_equal(cudaq_sample_file_check("-", CUDAQ_SAMPLE_B8, 8, 0, NULL, msg, sizeof msg), 0);
  assert_int_equal(cudaq_sample_file_check("/nonexistent/x", CUDAQ_SAMPLE_B8, 9, 0, NULL, msg,
                                           sizeof msg), 0);
}

static void test_writers(void **state) {
  (void)state;
  FILE *f = tmpfile();
  assert_non_null(f);
  assert_int_equal(cudaq_sample_write_obs(f, CUDAQ_SAMPLE_01, 5, 3), CUDAQ_MWPM_OK);
  assert_int_equal(cudaq_sample_write_obs(f, CUDAQ_SAMPLE_B8, 0x1ff, 9), CUDAQ_MWPM_OK);
  assert_int_equal(cudaq_sample_write_obs(f, CUDAQ_SAMPLE_DETS, 5, 3), CUDAQ_MWPM_OK);
  rewind(f);
  char buf[64] = {0};
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  const char want[] = "101\n\xff\x01shot L0 L2\n";
  assert_int_equal(n, sizeof want - 1);
  assert_memory_equal(buf, want, n);
}

/* Threads: a ring of 40 nodes with a boundary every 7th; each thread decodes
 * the same shots and must agree with the single-thread answers. */
typedef struct tjob {
  const cudaq_mwpm_graph_t *g;
  const uint32_t (*shots)[6];
  const cudaq_mwpm_result_t *want;
  int nshots, bad;
} tjob_t;

static void *tworker(void *arg) {
  tjob_t *j = arg;
  cudaq_mwpm_decoder_t *d;
  if (cudaq_mwpm_decoder_create(j->g, &d)) {
    j->bad = 1;
    return NULL;
  }
  for (int rep = 0; rep < 50; rep++)
    for (int i = 0; i < j->nshots; i++) {
      cudaq_mwpm_result_t r;
      if (cudaq_mwpm_decode(d, j->shots[i], 6, &r) || r.obs_mask != j->want[i].obs_mask ||
          r.weight != j->want[i].weight)
        j->bad++;
    }
  cudaq_mwpm_decoder_destroy(d);
  return NULL;
}

static void test_threads(void **state) {
  (void)state;
  enum { N = 40, S = 64 };
  cudaq_mwpm_edge_t e[N + N / 7 + 1];
  int m = 0;
  for (int i = 0; i < N; i++) {
    e[m++] = (cudaq_mwpm_edge_t){i, (i + 1) % N, 1.0 + (i % 5) * 0.25, (uint64_t)(i % 3)};
    if (i % 7 == 0)
      e[m++] = (cudaq_mwpm_edge_t){i, -1, 2.5, 4};
  }
  cudaq_mwpm_graph_t *g;
  assert_int_equal(cudaq_mwpm_graph_from_edges(N, 3, e, (size_t)m, NULL, &g), CUDAQ_MWPM_OK);
  static uint32_t shots[S][6];
  static cudaq_mwpm_result_t want[S];
  uint64_t x = 12345;
  cudaq_mwpm_decoder_t *d;
  assert_int_equal(cudaq_mwpm_decoder_create(g, &d), CUDAQ_MWPM_OK);
  for (int i = 0; i < S; i++) {
    for (int k = 0; k < 6; k++) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      shots[i][k] = (uint32_t)((x >> 33) % N);
    }
    assert_int_equal(cudaq_mwpm_decode(d, shots[i], 6, &want[i]), CUDAQ_MWPM_OK);
  }
  cudaq_mwpm_decoder_destroy(d);
  pthread_t th[4];
  tjob_t jobs[4];
  for (int t = 0; t < 4; t++) {
    jobs[t] = (tjob_t){g, (const uint32_t(*)[6])shots, want, S, 0};
    assert_int_equal(pthread_create(&th[t], NULL, tworker, &jobs[t]), 0);
  }
  for (int t = 0; t < 4; t++) {
    pthread_join(th[t], NULL);
    assert_int_equal(jobs[t].bad, 0);
  }
  cudaq_mwpm_graph_destroy(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_formats_agree),
      cmocka_unit_test(test_bad_input),
      cmocka_unit_test(test_b8_padding),
      cmocka_unit_test(test_dets_repeated),
      cmocka_unit_test(test_file_check),
      cmocka_unit_test(test_writers),
      cmocka_unit_test(test_threads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
