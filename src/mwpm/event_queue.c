/* The event queue of the sparse-blossom decoder: a radix heap of integer
 * event times (see decoder_internal.h). */
#include <stdlib.h>

#include "decoder_internal.h"


/* A radix heap: keys never go below the last key popped (event times only
 * move forward), so an entry sits in the bucket of the highest bit in which
 * its key differs from that last key; popping redistributes one bucket into
 * lower ones. Entries live in one pool, linked by index, reused through a
 * free list: the pool grows (doubling) only during warm-up. */
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

static inline int bucket_of(int64_t t, int64_t last) {
  uint64_t x = (uint64_t)(t ^ last);
  return x ? 64 - __builtin_clzll(x) : 0;
}

int cudaq_mwpm__heap_push(cudaq_mwpm_decoder_t *d, int64_t t, int32_t id) {
  int32_t e;
  if (d->pool_free != NONE) {
    e = d->pool_free;
    d->pool_free = d->pool[e].next;
  } else {
    if (d->pool_used == d->pool_cap) {
      size_t ncap = d->pool_cap * 2;
      heap_item_t *p = realloc(d->pool, ncap * sizeof *p);
      if (!p)
        return -1;
      d->pool = p;
      d->pool_cap = ncap;
    }
    e = (int32_t)d->pool_used++;
  }
  int b = bucket_of(t, d->heap_last);
  heap_item_t *it = &d->pool[e];
  it->t = t;
  it->id = id;
  it->next = d->bucket[b];
  d->bucket[b] = e;
  d->bucket_mask |= 1ull << b;
  d->heap_len++;
  return 0;
}

heap_item_t cudaq_mwpm__heap_pop(cudaq_mwpm_decoder_t *d) {
  if (d->bucket[0] == NONE) {
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
      int nb = bucket_of(d->pool[e].t, m);
      d->pool[e].next = d->bucket[nb];
      d->bucket[nb] = e;
      d->bucket_mask |= 1ull << nb;
      e = nx;
    }
  }
  int32_t e = d->bucket[0];
  heap_item_t out = d->pool[e];
  d->bucket[0] = out.next;
  if (out.next == NONE)
    d->bucket_mask &= ~1ull;
  d->pool[e].next = d->pool_free;
  d->pool_free = e;
  d->heap_len--;
  return out;
}

