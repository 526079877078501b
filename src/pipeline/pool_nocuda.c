/*
 * pool_nocuda.c - builds without CUDA: no real launch ops (a GPU stage
 * needs emulated ops, see tests), host memory instead of mapped memory.
 */
#include <stdlib.h>

#include "pool.h"

const cudaq__launch_ops_t *cudaq__cuda_launch_ops(void) { return NULL; }

int cudaq__mapped_alloc(size_t bytes, void **host, void **dev, int *mapped) {
  *mapped = 0;
  *host = *dev = calloc(1, bytes);
  return *host ? 0 : -1;
}

void cudaq__mapped_free(void *host, int mapped) {
  (void)mapped;
  free(host);
}
