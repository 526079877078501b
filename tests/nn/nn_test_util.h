/* Small helpers shared by the NN tests. */
#ifndef CUDAQ_NN_TEST_UTIL_H
#define CUDAQ_NN_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>

/* Reads a whole file; NULL when it cannot be read. *len gets its size. */
static inline void *nn_test_read_file(const char *path, size_t *len) {
  *len = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  if (fseek(f, 0, SEEK_END) != 0) { fclose(f); return NULL; }
  long n = ftell(f);
  rewind(f);
  void *buf = malloc(n > 0 ? (size_t)n : 1);
  if (buf && n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n) { free(buf); buf = NULL; }
  fclose(f);
  if (buf) *len = (size_t)(n > 0 ? n : 0);
  return buf;
}

/* A failed check: "FAIL file:line: message" on stderr, counted in fails
 * (each test's own counter; its CHECK macro names it). */
#define NN_CHECK(fails, cond, ...)                        \
  do {                                                    \
    if (!(cond)) {                                        \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                       \
      fprintf(stderr, "\n");                              \
      (fails)++;                                          \
    }                                                     \
  } while (0)

#endif
