/*
 * host_workers.c - GRAPH_LAUNCH entries on the host-thread dispatch path go
 * to a pool of up to 64 CUDA-graph workers (host-dispatcher-worker-pool.md
 * section 4; the pool itself is pool.c). The job's finisher (the user's CPU
 * poller, or a host function after the graph) writes the slot's response
 * and TX flag and calls cudaq_host_release_worker().
 */
#include <stdlib.h>
#include <string.h>

#include "../atomics.h"
#include "../internal.h"
#include "pool.h"

static cudaq_status_t set_workers(cudaq_dispatcher_t *d, const cudaq_host_dispatch_worker_t *workers,
                                  uint32_t count, const cudaq__launch_ops_t *ops) {
  static const char *fn = "cudaq_dispatcher_set_host_workers";
  if (!d || !workers) return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: NULL argument", fn);
  if (d->config.dispatch_path != CUDAQ_DISPATCH_PATH_HOST)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: the dispatcher is not on the host path", fn);
  if (d->running) return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: the dispatcher is running", fn);
  if (count == 0 || count > CUDAQ_PIPELINE_MAX_WORKERS)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: count %u outside 1..64", fn, count);
  for (uint32_t w = 0; w < count; ++w)
    if (!workers[w].graph_exec || !workers[w].stream)
      return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: worker %u has no graph_exec or stream", fn, w);
  if (!ops) {
    ops = cudaq__cuda_launch_ops();
    if (!ops)
      return cudaq__fail(CUDAQ_ERR_UNSUPPORTED, "%s: graph workers need a build with CUDA", fn);
  }
  cudaq__pool_t *p = d->pool;
  /* A6' (like A6 in pool.c): acquire pairs with the finishers' release of their workers (R6 in
   * pool.c); a job still held (its finisher has not called
   * cudaq_host_release_worker) would be lost if the pool were re-armed. */
  if (p && (atomic_load_explicit(&p->idle_mask, memory_order_acquire) & p->all_mask) != p->all_mask)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG,
                       "%s: graph worker jobs are still held (call cudaq_host_release_worker for "
                       "each before re-arming the workers)", fn);
  if (!p) {
    p = calloc(1, sizeof *p);
    if (!p) return cudaq__fail(CUDAQ_ERR_INTERNAL, "%s: out of memory", fn);
    void *dev = NULL;
    if (cudaq__mapped_alloc(CUDAQ_PIPELINE_MAX_WORKERS * sizeof(void *), &p->mailbox_block, &dev,
                            &p->mailbox_mapped) != 0) {
      free(p);
      return cudaq__fail(CUDAQ_ERR_CUDA, "%s: allocating the mailbox bank failed", fn);
    }
    p->mailbox = p->mailbox_block;
    d->pool = p;
  }
  p->count = count;
  memcpy(p->workers, workers, count * sizeof *workers);
  p->ops = *ops;
  cudaq__pool_init(p);
  return cudaq__ok();
}

cudaq_status_t cudaq_dispatcher_set_host_workers(cudaq_dispatcher_t *dispatcher,
                                                 const cudaq_host_dispatch_worker_t *workers,
                                                 uint32_t count) {
  return set_workers(dispatcher, workers, count, NULL);
}

cudaq_status_t cudaq__dispatcher_set_host_workers_ops(cudaq_dispatcher_t *d,
                                                    const cudaq_host_dispatch_worker_t *workers,
                                                    uint32_t count, const cudaq__launch_ops_t *ops) {
  if (!ops || !ops->launch_graph)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "cudaq__dispatcher_set_host_workers_ops: incomplete ops");
  return set_workers(d, workers, count, ops);
}

void cudaq__host_pool_free(cudaq_dispatcher_t *d) {
  if (!d->pool) return;
  cudaq__mapped_free(d->pool->mailbox_block, d->pool->mailbox_mapped);
  free(d->pool);
  d->pool = NULL;
}

static cudaq_status_t check_worker(cudaq_dispatcher_t *d, uint32_t w, const char *fn) {
  if (!d) return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: dispatcher is NULL", fn);
  if (!d->pool) return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: the dispatcher has no workers", fn);
  if (w >= d->pool->count)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: worker_id %u outside 0..%u", fn, w,
                       d->pool->count - 1);
  return CUDAQ_OK;
}

cudaq_status_t cudaq_host_worker_slot(cudaq_dispatcher_t *dispatcher, uint32_t worker_id,
                                      uint32_t *out_slot) {
  static const char *fn = "cudaq_host_worker_slot";
  cudaq_status_t st = check_worker(dispatcher, worker_id, fn);
  if (st != CUDAQ_OK) return st;
  if (!out_slot) return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: out_slot is NULL", fn);
  /* Acquire: the caller learnt of the job through the worker's ready flag;
   * this load only checks that the worker is busy. */
  if ((atomic_load_explicit(&dispatcher->pool->idle_mask, memory_order_acquire) >> worker_id) & 1)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: worker %u is idle", fn, worker_id);
  *out_slot = dispatcher->pool->tags[worker_id];
  return cudaq__ok();
}

cudaq_status_t cudaq_host_release_worker(cudaq_dispatcher_t *dispatcher, uint32_t worker_id) {
  static const char *fn = "cudaq_host_release_worker";
  cudaq_status_t st = check_worker(dispatcher, worker_id, fn);
  if (st != CUDAQ_OK) return st;
  if (cudaq__pool_release(dispatcher->pool, worker_id) != 0) /* R6 */
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: worker %u was idle already", fn, worker_id);
  return cudaq__ok();
}

int cudaq__host_pool_slot(cudaq_dispatcher_t *d, uint32_t slot, uint32_t function_id) {
  const cudaq_ringbuffer_t *rb = &d->ring;
  void *slot_dev = rb->rx_data + (size_t)slot * rb->rx_stride_sz;
  cudaq__pool_result_t r =
      cudaq__pool_dispatch(d->pool, function_id, slot, 0, slot_dev, &rb->tx_flags_host[slot], NULL, NULL);
  if (r == CUDAQ__POOL_BUSY) return 1;
  if (r == CUDAQ__POOL_NO_WORKER) return 2; /* answered UNSUPPORTED_MODE by the host path */
  /* R3 hands the RX slot back; pairs with A3 in the producer (which waits
   * for TX, now IN_FLIGHT or the error marker, too). */
  cudaq__store_release_u64(&rb->rx_flags_host[slot], 0);
  _Atomic uint64_t *c = &d->counters.processed;
  uint64_t n = atomic_load_explicit(c, memory_order_relaxed) + 1;
  atomic_store_explicit(c, n, memory_order_relaxed); /* single writer: this thread */
  atomic_store_explicit(CUDAQ__A64(d->stats), n, memory_order_relaxed);
  return 0;
}
