/*
 * cudaq_mwpm_decode_batch: many shots, one call, several threads, each with
 * its own decoder (made by the caller). Not on the realtime hot path: the
 * call allocates one event list per thread and starts num_decoders - 1
 * threads, which it joins before returning.
 *
 * Work sharing: a shared counter hands out blocks of BLOCK consecutive shots
 * in increasing order. A thread finishes its block before it looks at the
 * stop flag, and stops inside a block only at a failing shot. So when shot s
 * fails, every block that starts before s's block was taken before it and is
 * finished by its thread, and every later block starts after s: the smallest
 * failing shot over all threads is the first failing shot of the batch, the
 * one a one-thread loop reports.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "cudaq/qec/mwpm.h"

#define BLOCK 64u

typedef struct batch_shared {
  const uint8_t *shots;
  uint8_t *preds;
  double *weights;
  size_t num_shots, in_bytes, out_bytes;
  uint32_t num_dets, num_obs;
  unsigned flags;
  atomic_size_t next; /* first shot of the next block to hand out (relaxed: see below) */
  atomic_int stop;    /* set by a thread whose shot failed (relaxed: only a hint) */
} batch_shared_t;

typedef struct batch_thread {
  batch_shared_t *sh;
  cudaq_mwpm_decoder_t *dec;
  uint32_t *events;
  size_t bad;  /* first failing shot of this thread, or SIZE_MAX */
  int status;  /* its status */
} batch_thread_t;

size_t cudaq_mwpm_shot_events(const uint8_t *row, uint32_t num_dets, int packed, uint32_t *events) {
  size_t n = 0;
  if (!packed) {
    for (uint32_t d = 0; d < num_dets; d++)
      if (row[d])
        events[n++] = d;
    return n;
  }
  for (uint32_t byte = 0; byte < (num_dets + 7) / 8; byte++) {
    unsigned v = row[byte];
    while (v) {
      uint32_t d = byte * 8 + (uint32_t)__builtin_ctz(v);
      v &= v - 1;
      if (d < num_dets) /* padding bits past the last detector are ignored */
        events[n++] = d;
    }
  }
  return n;
}

void cudaq_mwpm_write_prediction(uint8_t *row, uint64_t obs, uint32_t num_obs, int packed) {
  if (!packed) {
    for (uint32_t k = 0; k < num_obs; k++)
      row[k] = (uint8_t)((obs >> k) & 1u);
    return;
  }
  for (uint32_t byte = 0; byte < (num_obs + 7) / 8; byte++)
    row[byte] = (uint8_t)(obs >> (8 * byte));
}

static void *batch_worker(void *arg) {
  batch_thread_t *t = arg;
  batch_shared_t *sh = t->sh;
  const int packed_in = (sh->flags & CUDAQ_MWPM_BATCH_PACKED_SHOTS) != 0;
  const int packed_out = (sh->flags & CUDAQ_MWPM_BATCH_PACKED_PREDICTIONS) != 0;
  const int corr = (sh->flags & CUDAQ_MWPM_BATCH_CORRELATED) != 0;
  for (;;) {
    /* Relaxed is enough for both atomics: the counter only partitions the
     * shot indices (fetch_add is atomic whatever the order), the stop flag is
     * a hint (a thread that misses it decodes a few more blocks, results
     * unchanged), and the rows and per-thread results written here are read
     * by the caller after pthread_join, which orders them. */
    if (atomic_load_explicit(&sh->stop, memory_order_relaxed))
      break;
    size_t first = atomic_fetch_add_explicit(&sh->next, BLOCK, memory_order_relaxed);
    if (first >= sh->num_shots)
      break;
    size_t end = sh->num_shots - first < BLOCK ? sh->num_shots : first + BLOCK;
    for (size_t s = first; s < end; s++) {
      size_t n = cudaq_mwpm_shot_events(sh->shots + s * sh->in_bytes, sh->num_dets, packed_in, t->events);
      cudaq_mwpm_result_t res;
      cudaq_mwpm_status_t st = corr ? cudaq_mwpm_decode_correlated(t->dec, t->events, n, &res)
                                    : cudaq_mwpm_decode(t->dec, t->events, n, &res);
      if (st != CUDAQ_MWPM_OK) {
        t->bad = s;
        t->status = st;
        atomic_store_explicit(&sh->stop, 1, memory_order_relaxed);
        return NULL;
      }
      cudaq_mwpm_write_prediction(sh->preds + s * sh->out_bytes, res.obs_mask, sh->num_obs, packed_out);
      if (sh->weights)
        sh->weights[s] = res.weight;
    }
  }
  return NULL;
}

cudaq_mwpm_status_t cudaq_mwpm_decode_batch(cudaq_mwpm_decoder_t *const *decoders,
                                            size_t num_decoders, const uint8_t *shots,
                                            size_t num_shots, unsigned flags, uint8_t *preds,
                                            double *weights, size_t *bad_shot) {
  const unsigned known = CUDAQ_MWPM_BATCH_PACKED_SHOTS | CUDAQ_MWPM_BATCH_PACKED_PREDICTIONS |
                         CUDAQ_MWPM_BATCH_CORRELATED;
  if (!decoders || num_decoders == 0 || num_decoders > CUDAQ_MWPM_BATCH_MAX_THREADS ||
      (flags & ~known))
    return CUDAQ_MWPM_ERR_INVALID_ARG;
  const cudaq_mwpm_graph_t *g = cudaq_mwpm_decoder_graph(decoders[0]);
  if (!g)
    return CUDAQ_MWPM_ERR_INVALID_ARG;
  for (size_t i = 1; i < num_decoders; i++)
    if (cudaq_mwpm_decoder_graph(decoders[i]) != g)
      return CUDAQ_MWPM_ERR_INVALID_ARG;
  if ((flags & CUDAQ_MWPM_BATCH_CORRELATED) && !cudaq_mwpm_graph_has_correlations(g))
    return CUDAQ_MWPM_ERR_INVALID_ARG;
  batch_shared_t sh = {0};
  sh.num_dets = cudaq_mwpm_graph_num_nodes(g);
  sh.num_obs = cudaq_mwpm_graph_num_observables(g);
  sh.in_bytes = (flags & CUDAQ_MWPM_BATCH_PACKED_SHOTS) ? (sh.num_dets + 7u) / 8u : sh.num_dets;
  sh.out_bytes = (flags & CUDAQ_MWPM_BATCH_PACKED_PREDICTIONS) ? (sh.num_obs + 7u) / 8u : sh.num_obs;
  if (num_shots && ((!shots && sh.in_bytes) || (!preds && sh.out_bytes)))
    return CUDAQ_MWPM_ERR_INVALID_ARG;
  if (num_shots == 0)
    return CUDAQ_MWPM_OK;
  sh.shots = shots;
  sh.preds = preds;
  sh.weights = weights;
  sh.num_shots = num_shots;
  sh.flags = flags;
  atomic_init(&sh.next, 0);
  atomic_init(&sh.stop, 0);
  /* No more threads than blocks. */
  size_t nt = num_decoders, blocks = (num_shots + BLOCK - 1) / BLOCK;
  if (nt > blocks)
    nt = blocks;
  batch_thread_t *th = calloc(nt, sizeof *th);
  pthread_t *tid = calloc(nt, sizeof *tid);
  uint32_t *ev = malloc(nt * ((size_t)sh.num_dets + 1) * sizeof *ev);
  if (!th || !tid || !ev) {
    free(th);
    free(tid);
    free(ev);
    return CUDAQ_MWPM_ERR_NO_MEMORY;
  }
  for (size_t i = 0; i < nt; i++) {
    th[i].sh = &sh;
    th[i].dec = decoders[i];
    th[i].events = ev + i * ((size_t)sh.num_dets + 1);
    th[i].bad = SIZE_MAX;
    th[i].status = CUDAQ_MWPM_OK;
  }
  size_t started = 1;
  int start_failed = 0;
  for (; started < nt; started++)
    if (pthread_create(&tid[started], NULL, batch_worker, &th[started])) {
      start_failed = 1;
      atomic_store_explicit(&sh.stop, 1, memory_order_relaxed);
      break;
    }
  if (!start_failed)
    batch_worker(&th[0]);
  for (size_t i = 1; i < started; i++)
    pthread_join(tid[i], NULL);
  cudaq_mwpm_status_t st = CUDAQ_MWPM_OK;
  if (start_failed) {
    st = CUDAQ_MWPM_ERR_IO;
  } else {
    size_t bad = SIZE_MAX;
    for (size_t i = 0; i < nt; i++)
      if (th[i].bad < bad) {
        bad = th[i].bad;
        st = (cudaq_mwpm_status_t)th[i].status;
      }
    if (st != CUDAQ_MWPM_OK && bad_shot)
      *bad_shot = bad;
  }
  free(th);
  free(tid);
  free(ev);
  return st;
}
