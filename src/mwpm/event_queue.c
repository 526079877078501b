/* The event queue of the sparse-blossom decoder: a radix heap of integer
 * event times (see decoder_internal.h). */
#include <stdlib.h>

#include "decoder_internal.h"


/* The radix heap is described in decoder_internal.h. */
void cudaq_mwpm__heap_clear(cudaq_mwpm_decoder_t *d) {
  /* Empty buckets are NONE already: reset only those in use (none after a
   * decode that ran to the end). */
  for (uint64_t m = d->bucket_mask; m; m &= m - 1)
    d->bucket[__builtin_ctzll(m)] = NONE;
  d->bucket_mask = 0;
  d->heap_last = 0;
  d->heap_len = 0;
  d->pool_used = 0;
  d->pool_free = NONE;
}

/* The pool is full: doubles it (warm-up only). */
int cudaq_mwpm__heap_grow(cudaq_mwpm_decoder_t *d) {
  size_t ncap = d->pool_cap * 2;
  heap_item_t *p = realloc(d->pool, ncap * sizeof *p);
  if (!p)
    return -1;
  d->pool = p;
  d->pool_cap = ncap;
  return 0;
}

/* Bucket 0 is empty: the lowest non-empty bucket's smallest key becomes the
 * last key, and that bucket's entries move to lower buckets (those of that
 * key into bucket 0). */
void cudaq_mwpm__heap_refill(cudaq_mwpm_decoder_t *d) {
  int b = __builtin_ctzll(d->bucket_mask);
  int32_t e = d->bucket[b];
  int64_t m = d->pool[e].t;
  for (int32_t f = d->pool[e].next; f != NONE; f = d->pool[f].next)
    if (d->pool[f].t < m)
      m = d->pool[f].t;
  d->heap_last = m;
  d->bucket[b] = NONE;
  d->bucket_mask &= ~(1ull << b);
  while (e != NONE) {
    int32_t nx = d->pool[e].next;
    int nb = heap_bucket_of(d->pool[e].t, m);
    d->pool[e].next = d->bucket[nb];
    d->bucket[nb] = e;
    d->bucket_mask |= 1ull << nb;
    e = nx;
  }
}
