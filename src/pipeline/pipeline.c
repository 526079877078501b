/*
 * pipeline.c - the realtime pipeline (realtime-pipeline-api.txt, C
 * counterpart) built on the worker pool (host-dispatcher-worker-pool.md).
 *
 * Threads and what each owns:
 *   dispatcher  polls RX flags in ring order, hands slots to workers
 *               (pool.c), clears RX flags; sole writer of `dispatched`.
 *   worker w    (CPU stage modes) claims its ready flag (CAS 1 -> 2), runs
 *               the CPU stage, completes the slot, releases itself.
 *   consumer    scans every TX flag (out of order, spec 7), calls the
 *               completion handler, clears TX flags; sole writer of
 *               `completed` and `errors`. In GPU-only mode with
 *               STREAM_WRITE completion it also polls the busy workers'
 *               completion words and completes their slots.
 *   injector    (caller's thread) writes requests in ring order (injector.c).
 * Slot lifecycle (spec 9): idle (rx 0, tx 0) -> written (rx set) -> in
 * flight (tx IN_FLIGHT, then rx 0) -> completed (tx response or error) ->
 * harvested (tx 0) -> idle.
 *
 * Hot paths (the four loops) do not allocate, lock or make syscalls, except
 * sched_yield() when the caller asked for idle_yield.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>
#include <time.h>

#include "../atomics.h"
#include "../internal.h"
#include "pipeline_internal.h"
#include "pipeline_state.h"
#include "pool.h"

/* Deferred-completion state of a slot (dstate): who completes it. The low
 * bits (DS_MASK) are the state; ARMED and DEFERRED also carry the worker
 * (ds_tag), so that a worker's late hand-over cannot hit the state of a
 * later request in the same slot, armed by another worker after an early
 * cudaq_pipeline_complete_deferred freed the slot. */
enum { DS_NONE = 0, DS_ARMED = 1 /* CPU stage running */, DS_DEFERRED = 2, DS_MASK = 3 };
static inline int ds_tag(uint32_t w) { return (int)(w + 1) << 2; }

static inline uint8_t *rx_slot(const cudaq_pipeline_t *p, uint32_t s) {
  return p->ring.rx_data_host + (size_t)s * p->ring.rx_stride_sz;
}
static inline uint8_t *tx_slot(const cudaq_pipeline_t *p, uint32_t s) {
  return p->ring.tx_data_host + (size_t)s * p->ring.tx_stride_sz;
}
static inline uint64_t tx_value(const cudaq_pipeline_t *p, uint32_t s) {
  return (uint64_t)(uintptr_t)(p->ring.tx_data + (size_t)s * p->ring.tx_stride_sz);
}

static int *ready_host_base(const cudaq_pipeline_t *p) { return (int *)p->mapped_host; }
static void **mailbox_host_base(const cudaq_pipeline_t *p) {
  return (void **)((uint8_t *)p->mapped_host + CUDAQ_PIPELINE_MAX_WORKERS * sizeof(int));
}
#define DONE_OFFSET (CUDAQ_PIPELINE_MAX_WORKERS * (sizeof(int) + sizeof(void *)))
#define GATE_OFFSET (DONE_OFFSET + CUDAQ_PIPELINE_MAX_WORKERS * sizeof(uint32_t))
#define MAPPED_BYTES (GATE_OFFSET + CUDAQ_PIPELINE_MAX_WORKERS * sizeof(uint64_t))
static _Atomic uint32_t *done_host_base(const cudaq_pipeline_t *p) {
  return (_Atomic uint32_t *)(void *)((uint8_t *)p->mapped_host + DONE_OFFSET);
}
static _Atomic uint64_t *gate_host_base(const cudaq_pipeline_t *p) { /* 8-aligned: GATE_OFFSET = 1024 */
  return (_Atomic uint64_t *)(void *)((uint8_t *)p->mapped_host + GATE_OFFSET);
}
/* Device view of a word of the mapped block (the host view where the GPU is emulated). */
static void *mapped_dev_at(const cudaq_pipeline_t *p, size_t offset) {
  return (uint8_t *)(p->mapped ? p->mapped_dev : p->mapped_host) + offset;
}

/* ---- config / create / destroy ----------------------------------------- */

cudaq_status_t cudaq_pipeline_config_init(cudaq_pipeline_config_t *config) {
  CHECK_ARG(config, "cudaq_pipeline_config_init", "config is NULL");
  memset(config, 0, sizeof *config);
  config->num_workers = 8;
  config->num_slots = 32;
  config->slot_size = 16384;
  config->cores.dispatcher = config->cores.consumer = config->cores.worker_base = -1;
  config->drain_timeout_ms = 5000;
  return cudaq__ok();
}

static cudaq_status_t check_core(int core, int count, const char *what) {
  int ncpu = get_nprocs_conf();
  if (!cudaq__cpus_valid(core, count))
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG,
                       "cudaq_pipeline_create: cores.%s = %d is not -1 or a CPU of this machine "
                       "(0..%d, %d needed)", what, core, ncpu - 1, count);
  return CUDAQ_OK;
}

static cudaq_status_t bind_external(cudaq_pipeline_t *p, const cudaq_ringbuffer_t *r) {
  static const char *fn = "cudaq_pipeline_create";
  CHECK_ARG(r->rx_flags && r->tx_flags && r->rx_data && r->tx_data, fn,
            "external ring has a NULL flag or data pointer");
  CHECK_ARG(r->rx_flags != r->tx_flags, fn, "external ring: rx_flags and tx_flags are the same array");
  CHECK_ARG(r->completion == CUDAQ_RX_COMPLETION_FLAG, fn,
            "external ring: the pipeline serves the flag protocol (completion must be CUDAQ_RX_COMPLETION_FLAG)");
  if (r->rx_stride_sz < p->cfg.slot_size || r->tx_stride_sz < CUDAQ_RPC_HEADER_SIZE)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG,
                       "%s: external ring strides (rx %zu, tx %zu) below slot_size %zu / 24", fn,
                       r->rx_stride_sz, r->tx_stride_sz, p->cfg.slot_size);
  p->ring = *r;
  if (!p->ring.rx_flags_host) p->ring.rx_flags_host = p->ring.rx_flags;
  if (!p->ring.tx_flags_host) p->ring.tx_flags_host = p->ring.tx_flags;
  if (!p->ring.rx_data_host) p->ring.rx_data_host = p->ring.rx_data;
  if (!p->ring.tx_data_host) p->ring.tx_data_host = p->ring.tx_data;
  return CUDAQ_OK;
}

/* Frees the gates of gpu_prelaunch and their graphs (no graph running). */
static void free_gates(cudaq_pipeline_t *p) {
  for (uint32_t w = 0; w < p->ngates; ++w) {
    p->ops.gate_free(p->ops.user, &p->gate[w], p->pool.gate_exec[w]);
    p->pool.gate_exec[w] = NULL;
  }
  p->ngates = 0;
}

static void free_parts(cudaq_pipeline_t *p) {
  free_gates(p);
  if (p->own_ring) cudaq_host_ringbuffer_free(&p->ring);
  if (p->mapped_host) cudaq__mapped_free(p->mapped_host, p->mapped);
  free(p->slot_request);
  free(p->dstate);
  free(p);
}

cudaq_status_t cudaq_pipeline_create(const cudaq_pipeline_config_t *config, cudaq_pipeline_t **out) {
  static const char *fn = "cudaq_pipeline_create";
  CHECK_ARG(config, fn, "config is NULL");
  CHECK_ARG(out, fn, "out is NULL");
  const cudaq_pipeline_config_t *c = config;
  if (c->num_workers < 1 || c->num_workers > CUDAQ_PIPELINE_MAX_WORKERS)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: num_workers %d outside 1..64", fn, c->num_workers);
  if (c->num_slots < 1)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: num_slots %d < 1", fn, c->num_slots);
  if (c->slot_size < CUDAQ_RPC_HEADER_SIZE || c->slot_size > UINT32_MAX)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: slot_size %zu outside 24 .. 4 GiB - 1", fn,
                       c->slot_size);
  if (c->gpu_prelaunch < 0)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: gpu_prelaunch %d < 0", fn, c->gpu_prelaunch);
  if (c->gpu_prelaunch_max != 0 && c->gpu_prelaunch_max < c->gpu_prelaunch)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: gpu_prelaunch_max %d below gpu_prelaunch %d (0: no boost)", fn,
                       c->gpu_prelaunch_max, c->gpu_prelaunch);
  if (c->drain_timeout_ms < 0)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: drain_timeout_ms %d < 0", fn, c->drain_timeout_ms);
  if (c->gpu_only_completion < CUDAQ_GPU_ONLY_COMPLETION_AUTO ||
      c->gpu_only_completion > CUDAQ_GPU_ONLY_COMPLETION_STREAM_WRITE)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG,
                       "%s: gpu_only_completion %d is not AUTO (0), HOST_FUNC (1) or STREAM_WRITE (2)",
                       fn, c->gpu_only_completion);
  cudaq_status_t st = check_core(c->cores.dispatcher, 1, "dispatcher");
  if (st == CUDAQ_OK) st = check_core(c->cores.consumer, 1, "consumer");
  if (st == CUDAQ_OK) st = check_core(c->cores.worker_base, c->num_workers, "worker_base");
  if (st != CUDAQ_OK) return st;

  cudaq_pipeline_t *p = calloc(1, sizeof *p);
  if (!p) return cudaq__fail(CUDAQ_ERR_INTERNAL, "%s: out of memory", fn);
  p->cfg = *c;
  if (p->cfg.drain_timeout_ms == 0) p->cfg.drain_timeout_ms = 5000;
  p->nslots = (uint32_t)c->num_slots;
  p->nworkers = (uint32_t)c->num_workers;
  p->slot_request = calloc(p->nslots, sizeof *p->slot_request);
  p->dstate = calloc(p->nslots, sizeof *p->dstate);
  if (!p->slot_request || !p->dstate) {
    free_parts(p);
    return cudaq__fail(CUDAQ_ERR_INTERNAL, "%s: out of memory", fn);
  }
  for (uint32_t s = 0; s < p->nslots; ++s)
    atomic_store_explicit(&p->slot_request[s], SLOT_NONE, memory_order_relaxed);
  if (c->external_ringbuffer) {
    st = bind_external(p, (const cudaq_ringbuffer_t *)c->external_ringbuffer);
  } else {
    st = cudaq_host_ringbuffer_alloc(&p->ring, p->nslots, (uint32_t)c->slot_size,
                                     CUDAQ_RING_ALLOC_DEFAULT);
    p->own_ring = st == CUDAQ_OK;
  }
  if (st != CUDAQ_OK) {
    free_parts(p);
    return st;
  }
  if (cudaq__mapped_alloc(MAPPED_BYTES, &p->mapped_host, &p->mapped_dev, &p->mapped) != 0) {
    p->mapped_host = NULL;
    free_parts(p);
    return cudaq__fail(CUDAQ_ERR_CUDA, "%s: allocating the ready flags and mailboxes failed", fn);
  }
  p->state = ST_CREATED;
  *out = p;
  return cudaq__ok();
}

cudaq_status_t cudaq_pipeline_destroy(cudaq_pipeline_t *p) {
  CHECK_ARG(p, "cudaq_pipeline_destroy", "pipeline is NULL");
  cudaq_status_t st = cudaq_pipeline_stop(p);
  if (p->stuck && p->factory)
    /* A graph (or its completion host function) may still run and write
     * into the ring, the mailboxes or this object: leaking them is the only
     * safe choice. */
    return cudaq__fail(CUDAQ_ERR_INTERNAL,
                       "cudaq_pipeline_destroy: GPU work was still pending at stop; the "
                       "pipeline's memory is leaked rather than freed under it");
  free_parts(p);
  return st == CUDAQ_OK ? cudaq__ok() : st;
}

/* ---- registration ------------------------------------------------------ */

#define CHECK_CREATED(p, fn)                                                            \
  do {                                                                                  \
    if ((p)->state != ST_CREATED)                                                       \
      return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: the pipeline was started already", fn); \
  } while (0)

cudaq_status_t cudaq_pipeline_set_gpu_stage(cudaq_pipeline_t *p, cudaq_gpu_stage_factory_t factory,
                                            void *user) {
  static const char *fn = "cudaq_pipeline_set_gpu_stage";
  CHECK_ARG(p, fn, "pipeline is NULL");
  CHECK_ARG(factory, fn, "factory is NULL");
  CHECK_CREATED(p, fn);
  p->factory = factory;
  p->factory_user = user;
  return cudaq__ok();
}

cudaq_status_t cudaq_pipeline_set_cpu_stage(cudaq_pipeline_t *p, cudaq_cpu_stage_fn_t cpu_fn,
                                            void *user) {
  static const char *fn = "cudaq_pipeline_set_cpu_stage";
  CHECK_ARG(p, fn, "pipeline is NULL");
  CHECK_ARG(cpu_fn, fn, "callback is NULL");
  CHECK_CREATED(p, fn);
  p->cpu_fn = cpu_fn;
  p->cpu_user = user;
  return cudaq__ok();
}

cudaq_status_t cudaq_pipeline_set_completion_handler(cudaq_pipeline_t *p, cudaq_completion_fn_t done,
                                                     void *user) {
  static const char *fn = "cudaq_pipeline_set_completion_handler";
  CHECK_ARG(p, fn, "pipeline is NULL");
  CHECK_ARG(done, fn, "handler is NULL");
  CHECK_CREATED(p, fn);
  p->done_fn = done;
  p->done_user = user;
  return cudaq__ok();
}

cudaq_status_t cudaq__pipeline_set_launch_ops(cudaq_pipeline_t *p, const cudaq__launch_ops_t *ops) {
  static const char *fn = "cudaq__pipeline_set_launch_ops";
  CHECK_ARG(p && ops, fn, "NULL argument");
  CHECK_ARG(ops->launch_graph && ops->enqueue_host_fn && ops->sync_stream, fn, "incomplete ops");
  CHECK_CREATED(p, fn);
  p->ops = *ops;
  p->have_ops = 1;
  return cudaq__ok();
}

_Atomic int *cudaq__pipeline_ready_flag(cudaq_pipeline_t *p, int w) {
  return (_Atomic int *)(void *)&ready_host_base(p)[w];
}

/* ---- completion of a slot (workers, GPU-only host function, deferred) --- */

/* Writes the response header (request fields echoed from the RX slot,
 * which the producer cannot reuse while TX is IN_FLIGHT) and publishes the
 * TX flag. Called exactly once per request by whoever owns its completion. */
static void complete_slot(cudaq_pipeline_t *p, uint32_t s, int32_t status, uint32_t result_len) {
  cudaq_rpc_header_t req;
  memcpy(&req, rx_slot(p, s), sizeof req);
  cudaq_rpc_response_t resp = {CUDAQ_RPC_MAGIC_RESPONSE, status, result_len, req.request_id,
                               req.ptp_timestamp};
  memcpy(tx_slot(p, s), &resp, sizeof resp);
  /* R2 publishes the response bytes; pairs with A2 in the consumer. */
  cudaq__store_release_u64(&p->ring.tx_flags_host[s], tx_value(p, s));
}

static size_t max_result(const cudaq_pipeline_t *p) {
  return p->ring.tx_stride_sz - CUDAQ_RPC_HEADER_SIZE;
}

/* GPU-only mode: runs after worker w's graph, on the CUDA callback thread
 * (HOST_FUNC completion) or on the consumer thread (STREAM_WRITE). */
static void gpu_only_complete(void *arg) {
  worker_ctx_t *wc = arg;
  cudaq_pipeline_t *p = wc->p;
  const uint32_t w = (uint32_t)wc->id;
  const uint32_t s = p->pool.tags[w]; /* owned by this job until the release below */
  const cudaq_gpu_worker_resources_t *r = &p->res[w];
  size_t n = r->gpu_output_size < max_result(p) ? r->gpu_output_size : max_result(p);
  if (r->gpu_output_host && n) memcpy(tx_slot(p, s) + CUDAQ_RPC_HEADER_SIZE, r->gpu_output_host, n);
  else n = 0;
  complete_slot(p, s, 0, (uint32_t)n);
  if (p->pool.prelaunch) cudaq__pool_arm(&p->pool, w); /* STREAM_WRITE only: the consumer thread */
  cudaq__pool_release(&p->pool, w); /* R6 */
}

/* GPU-only mode, STREAM_WRITE completion: completes the slot of every busy
 * worker whose completion word the GPU has set. Consumer thread only.
 * Returns 1 if it completed any. */
static int poll_gpu_done(cudaq_pipeline_t *p) {
  /* Relaxed: a stale bit only delays the check to the next round; the
   * word's acquire below is what orders the job's data. */
  uint64_t busy = ~atomic_load_explicit(&p->pool.idle_mask, memory_order_relaxed) & p->pool.all_mask;
  int any = 0;
  while (busy) {
    const uint32_t w = (uint32_t)__builtin_ctzll(busy);
    busy &= busy - 1;
    _Atomic uint32_t *done = &done_host_base(p)[w];
    /* A13 pairs with G13 (the fenced GPU write enqueued after the graph in
     * cudaq__pool_dispatch): the graph's output in mapped memory, and
     * tags[w] (written by the dispatcher before that launch, as for A8),
     * are visible once the word is seen 1. */
    if (atomic_load_explicit(done, memory_order_acquire) != 1) continue;
    /* Re-armed before the release R6 inside gpu_only_complete: the next
     * job's G13 comes after the dispatcher's A6 sees w idle. */
    atomic_store_explicit(done, 0, memory_order_relaxed);
    gpu_only_complete(&p->wctx[w]);
    any = 1;
  }
  return any;
}

/* ---- threads ----------------------------------------------------------- */

/* First slot at or after `from` (ring order) whose RX flag is set, or -1. */
static int64_t scan_rx(const cudaq_pipeline_t *p, uint32_t from) {
  return cudaq__scan_rx_flags(p->ring.rx_flags_host, from, p->nslots); /* A1 inside */
}

#define IDLE_SCAN_INTERVAL 256u

/* Handles the request in slot s whose RX flag is set. Returns 0 if the
 * slot was consumed, 1 if every suitable worker is busy (spin on it). */
static int dispatch_slot(cudaq_pipeline_t *p, uint32_t s) {
  cudaq_rpc_header_t h;
  memcpy(&h, rx_slot(p, s), sizeof h);
  volatile uint64_t *tx = &p->ring.tx_flags_host[s];
  if (h.magic != CUDAQ_RPC_MAGIC_REQUEST) {
    bump(&p->dropped); /* not a request: consumed without response (protocol) */
  } else if (h.arg_len > p->ring.rx_stride_sz - CUDAQ_RPC_HEADER_SIZE) {
    complete_slot(p, s, CUDAQ_RPC_ERR_PAYLOAD_TOO_LARGE, 0);
  } else {
    void *slot_dev = p->ring.rx_data + (size_t)s * p->ring.rx_stride_sz;
    int err = 0;
    cudaq__pool_result_t r = cudaq__pool_dispatch(&p->pool, h.function_id, s,
                                                  (uint64_t)CUDAQ_RPC_HEADER_SIZE + h.arg_len, slot_dev,
                                                  tx, &err, NULL);
    if (r == CUDAQ__POOL_BUSY) return 1;
    if (r == CUDAQ__POOL_NO_WORKER) bump(&p->dropped); /* unknown function: as the host path */
  }
  /* R3 hands the RX slot back (we are done reading it); pairs with A3 in
   * the producer, which also waits for TX to be 0. */
  cudaq__store_release_u64(&p->ring.rx_flags_host[s], 0);
  bump(&p->dispatched);
  return 0;
}

static void *dispatcher_main(void *arg) {
  cudaq_pipeline_t *p = arg;
  uint32_t slot = 0, idle = 0;
  int stalled = 0;
  for (;;) {
    /* A4 pairs with R4 in cudaq_pipeline_stop (nothing published). */
    if (atomic_load_explicit(&p->shutdown, memory_order_acquire)) break;
    /* A1 pairs with R1 in cudaq_host_ringbuffer_signal_slot (the producer):
     * the request bytes are visible once the flag is seen set. */
    if (cudaq__load_acquire_u64(&p->ring.rx_flags_host[slot]) == 0) {
      if (++idle == IDLE_SCAN_INTERVAL) { /* a producer that skipped slots */
        idle = 0;
        int64_t s = scan_rx(p, slot);
        if (s >= 0) slot = (uint32_t)s;
      }
      idle_wait(p);
      continue;
    }
    idle = 0;
    if (dispatch_slot(p, slot)) {
      /* No worker free: stay on this slot (spec 13, no advance, no loss). */
      if (!stalled) bump(&p->worker_stalls);
      stalled = 1;
      idle_wait(p);
      continue;
    }
    stalled = 0;
    slot = slot + 1 == p->nslots ? 0 : slot + 1;
  }
  return NULL;
}

static void *worker_main(void *arg) {
  worker_ctx_t *wc = arg;
  cudaq_pipeline_t *p = wc->p;
  const uint32_t w = (uint32_t)wc->id;
  _Atomic int *ready = cudaq__pipeline_ready_flag(p, wc->id);
  const cudaq_gpu_worker_resources_t *r = &p->res[w];
  for (;;) {
    int expect = 1;
    /* A8: claim the job exactly once (spec 6.1); acquire pairs with R8 (CPU
     * only: the dispatcher) or the graph's release store of 1, making
     * tags[w] and the GPU output visible; relaxed on failure so polling adds
     * no barrier. */
    if (!atomic_compare_exchange_strong_explicit(ready, &expect, 2, memory_order_acquire,
                                                 memory_order_relaxed)) {
      if (atomic_load_explicit(&p->shutdown, memory_order_acquire)) break; /* A4 */
      idle_wait(p);
      continue;
    }
    const uint32_t s = p->pool.tags[w];
    cudaq_rpc_header_t h;
    memcpy(&h, rx_slot(p, s), sizeof h);
    cudaq_cpu_stage_context_t ctx = {
        .worker_id = (int)w,
        .origin_slot = (int)s,
        .gpu_output = r->gpu_output_host,
        .gpu_output_size = r->gpu_output_size,
        .response_buffer = tx_slot(p, s) + CUDAQ_RPC_HEADER_SIZE,
        .max_response_size = max_result(p),
        .user_context = p->factory ? r->user_context : p->cpu_user,
        .request = rx_slot(p, s) + CUDAQ_RPC_HEADER_SIZE,
        .request_size = h.arg_len,
        .request_id = h.request_id,
        .function_id = h.function_id,
    };
    /* Arm before the callback: a deferred completion may arrive from
     * another thread before the callback returns. Relaxed: the slot number
     * reaches that thread through the callback itself. */
    atomic_store_explicit(&p->dstate[s], DS_ARMED | ds_tag(w), memory_order_relaxed);
    size_t n;
    int abandoned = 0;
    for (;;) {
      n = p->cpu_fn(p->cpu_user, &ctx);
      if (n != 0) break;
      /* Poll mode: 0 = not ready. Give up only on shutdown (after stop's
       * grace period), leaving the slot in flight for the dump. */
      if (atomic_load_explicit(&p->shutdown, memory_order_acquire)) { /* A4 */
        abandoned = 1;
        break;
      }
      idle_wait(p);
    }
    if (abandoned) break;
    int armed = DS_ARMED | ds_tag(w);
    if (n == CUDAQ_DEFERRED_COMPLETION) {
      /* R10 hands the completion to cudaq_pipeline_complete_deferred; pairs
       * with A10 there. Fails only if it completed already. */
      atomic_compare_exchange_strong_explicit(&p->dstate[s], &armed, DS_DEFERRED | ds_tag(w),
                                              memory_order_release, memory_order_relaxed);
    } else if (atomic_compare_exchange_strong_explicit(&p->dstate[s], &armed, DS_NONE,
                                                       memory_order_acq_rel,
                                                       memory_order_relaxed)) {
      if (n > max_result(p))
        complete_slot(p, s, CUDAQ_RPC_ERR_RESULT_TOO_LARGE, 0);
      else
        complete_slot(p, s, 0, (uint32_t)n);
    }
    /* R11 releases the ready flag (release_job, 2 -> 0) before the worker
     * bit: the dispatcher's next R8 / launch finds it 0. */
    atomic_store_explicit(ready, 0, memory_order_release);
    /* Pre-launch: the next graph waits at w's gate before w is free. Its
     * store of 1 into the ready flag cannot come before the gate opens,
     * which needs the dispatcher to take w after R6. */
    if (p->pool.prelaunch) cudaq__pool_arm(&p->pool, w);
    cudaq__pool_release(&p->pool, w); /* R6 */
  }
  return NULL;
}

/* Answers slot s, whose TX flag read v (a response or an error marker),
 * and frees it. */
static void answer_slot(cudaq_pipeline_t *p, uint32_t s, uint64_t v, int internal) {
  cudaq_completion_t c = {0, (int)s, 0, 0, 0};
  if ((v & CUDAQ_TX_FLAG_ERROR_MASK) == CUDAQ_TX_FLAG_ERROR_TAG) {
    cudaq_rpc_header_t h;
    memcpy(&h, rx_slot(p, s), sizeof h);
    c.request_id = h.request_id;
    c.cuda_error = (int)(uint32_t)(v & 0xFFFFFFFFull);
    c.rpc_status = 0;
  } else {
    cudaq_rpc_response_t r;
    memcpy(&r, tx_slot(p, s), sizeof r);
    c.request_id = r.request_id;
    c.rpc_status = r.status;
    c.success = r.status == 0;
  }
  /* The injector's full 64-bit id; its store is ordered before R1, and
   * R1 -> A1 ... R2 -> A2 carries it here. */
  if (internal) {
    uint64_t id = atomic_load_explicit(&p->slot_request[s], memory_order_relaxed);
    if (id != SLOT_NONE) c.request_id = id;
  }
  if (p->done_fn) p->done_fn(p->done_user, &c);
  bump(&p->completed);
  if (!c.success) bump(&p->errors);
  /* Spec 7.2: reset the slot's request id before the TX flag is cleared,
   * so a producer that sees the slot free cannot have its new id
   * clobbered by this reset. The fence is the spec's
   * __sync_synchronize(); in C11 the release store R5 alone already
   * orders the reset before the clear. */
  atomic_store_explicit(&p->slot_request[s], SLOT_NONE, memory_order_relaxed);
  atomic_thread_fence(memory_order_seq_cst);
  cudaq_host_ringbuffer_clear_slot(&p->ring, s); /* R5, pairs with A3 (producer) */
}

/* Completions are answered and freed oldest first where the workers allow:
 * each pass starts after the last slot answered (the oldest unanswered
 * request with in-order producers and one worker, for requests answered by
 * that worker: a drop frees its slot at once, and an error the dispatcher
 * answers or a deferred completion may come out of turn), and a finished slot found
 * after one that was not (in flight, or 0: free, or a request not yet
 * dispatched) sends the pass back to look at that one again (a worker
 * finishes its requests in order, so it may have finished meanwhile; one
 * still unfinished stays skipped: no head-of-line wait). A
 * producer that fills the ring in order (the UDP bridge) then finds its next
 * slot free once the answers it waited for are out. (Not the oldest taken
 * slot: a slot answered in this pass may already hold the newest request.) */
static void *consumer_main(void *arg) {
  cudaq_pipeline_t *p = arg;
  const int internal = p->own_ring;
  const int poll_done = p->completion == CUDAQ_GPU_ONLY_COMPLETION_STREAM_WRITE;
  const uint32_t n = p->nslots, NONE = UINT32_MAX;
  uint32_t next = 0; /* the slot after the last one answered */
  for (;;) {
    int found = poll_done ? poll_gpu_done(p) : 0;
    const uint32_t start = next;
    /* k: position in this pass; back: the first unfinished slot passed since
     * the last look back; looked: positions before it were looked at again. */
    uint32_t back = NONE, looked = 0;
    for (uint32_t k = 0; k < n;) {
      const uint32_t s = start + k < n ? start + k : start + k - n;
      /* A2 pairs with R2 / R9: the response (or error marker) is visible. */
      const uint64_t v = cudaq__load_acquire_u64(&p->ring.tx_flags_host[s]);
      if (v == 0 || v == CUDAQ_TX_FLAG_IN_FLIGHT) { /* spec 9: ignore in-flight */
        /* 0 counts as passed too: a slot whose request is not yet submitted
         * or not yet dispatched reads 0, and that request may be dispatched
         * and answered, with the next one, before this pass reaches the
         * next slot (tools/spin/consumer_order.pml). */
        if (back == NONE && k >= looked) back = k;
        ++k;
        continue;
      }
      if (back != NONE) { /* look back once; at most n times a pass */
        looked = k;
        k = back;
        back = NONE;
        continue;
      }
      answer_slot(p, s, v, internal);
      found = 1;
      next = s + 1 == n ? 0 : s + 1;
      ++k;
    }
    if (!found) {
      if (atomic_load_explicit(&p->shutdown, memory_order_acquire)) break; /* A4 */
      idle_wait(p);
    }
  }
  return NULL;
}

/* ---- start / stop ------------------------------------------------------ */

static int spawn(pthread_t *t, void *(*main_fn)(void *), void *arg, int core, const char *name) {
  return cudaq__spawn_pinned(t, main_fn, arg, core, name); /* shared with the host dispatcher */
}

/* gpu_prelaunch, before the factories: the checks that need no factory,
 * then each worker's gate (its mailbox_dev and the request's device copy). */
static cudaq_status_t prelaunch_alloc(cudaq_pipeline_t *p) {
  static const char *fn = "cudaq_pipeline_start";
  if (!p->ops.gate_alloc || !p->ops.gate_graph || !p->ops.gate_free)
    return cudaq__fail(CUDAQ_ERR_UNSUPPORTED, "%s: gpu_prelaunch needs the gate ops (a build with CUDA)",
                       fn);
  if (p->pool.host_completion && p->completion != CUDAQ_GPU_ONLY_COMPLETION_STREAM_WRITE)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG,
                       "%s: gpu_prelaunch in GPU-only mode needs STREAM_WRITE completion (a host "
                       "function cannot launch the next graph); use AUTO or STREAM_WRITE", fn);
  if (p->nslots > CUDAQ_PIPELINE_GATE_NO_SLOT)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG,
                       "%s: gpu_prelaunch names a slot in 16 bits of its gate word: at most %u slots, "
                       "not %u", fn, CUDAQ_PIPELINE_GATE_NO_SLOT, p->nslots);
  if (((uintptr_t)p->ring.rx_data | p->ring.rx_stride_sz) % 8 != 0)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG,
                       "%s: gpu_prelaunch copies requests in 8-byte words: the RX ring's data (%p) "
                       "and stride (%zu) must be multiples of 8", fn, (void *)p->ring.rx_data,
                       p->ring.rx_stride_sz);
  for (uint32_t w = 0; w < p->nworkers; ++w) {
    cudaq_pipeline_gate_t *g = &p->gate[w];
    memset(g, 0, sizeof *g);
    int e = p->ops.gate_alloc(p->ops.user, p->ring.rx_stride_sz, g);
    if (e != 0)
      return cudaq__fail(CUDAQ_ERR_CUDA, "%s: gpu_prelaunch: device memory for worker %u's gate: error %d",
                         fn, w, e);
    p->ngates = w + 1;
    g->gate_dev = (const uint64_t *)mapped_dev_at(p, GATE_OFFSET) + w;
    g->ring_dev = p->ring.rx_data;
    g->stride = p->ring.rx_stride_sz;
    g->nslots = p->nslots;
    g->done_dev = p->pool.host_completion ? &p->pool.done_dev[w] : NULL; /* STREAM_WRITE (checked above) */
  }
  return CUDAQ_OK;
}

/* gpu_prelaunch, after the factories: the checks of their results, then
 * the gate graphs. */
static cudaq_status_t prelaunch_graphs(cudaq_pipeline_t *p) {
  static const char *fn = "cudaq_pipeline_start";
  cudaq__pool_t *pool = &p->pool;
  for (uint32_t w = 0; w < p->nworkers; ++w) {
    const cudaq_gpu_worker_resources_t *r = &p->res[w];
    if (r->pre_launch_fn || r->post_launch_fn)
      return cudaq__fail(CUDAQ_ERR_INVALID_ARG,
                         "%s: gpu_prelaunch: worker %u has a pre- or post-launch callback, but its "
                         "graph is launched before the request is known; read the request "
                         "through mailbox_dev instead", fn, w);
    if (!r->graph)
      return cudaq__fail(CUDAQ_ERR_INVALID_ARG,
                         "%s: gpu_prelaunch: the factory gave worker %u no graph (the cudaGraph_t "
                         "its graph_exec was instantiated from)", fn, w);
    int e = p->ops.gate_graph(p->ops.user, r->graph, &p->gate[w], r->waits_at_gate != 0, r->stream,
                              &pool->gate_exec[w]);
    if (e != 0)
      return cudaq__fail(CUDAQ_ERR_CUDA, "%s: gpu_prelaunch: worker %u's gate graph: error %d%s", fn, w, e,
                         r->waits_at_gate ? " (with waits_at_gate the graph's one root node must be the "
                                            "kernel that waits at the gate)" : "");
  }
  pool->prelaunch = (uint32_t)p->cfg.gpu_prelaunch < p->nworkers ? (uint32_t)p->cfg.gpu_prelaunch
                                                                   : p->nworkers;
  pool->prelaunch_max = (uint32_t)p->cfg.gpu_prelaunch_max < p->nworkers ? (uint32_t)p->cfg.gpu_prelaunch_max
                                                                           : p->nworkers;
  if (pool->prelaunch_max < pool->prelaunch) pool->prelaunch_max = pool->prelaunch;
  atomic_store_explicit(&pool->boost, 0, memory_order_relaxed);
  pool->gate_host = gate_host_base(p);
  atomic_store_explicit(&pool->armed_mask, 0, memory_order_relaxed);
  atomic_store_explicit(&pool->narmed, 0, memory_order_relaxed);
  for (uint32_t w = 0; w < p->nworkers; ++w) {
    atomic_store_explicit(&pool->gate_host[w], 0, memory_order_relaxed);
    pool->ticket[w] = 0;
  }
  return CUDAQ_OK;
}

static cudaq_status_t build_workers(cudaq_pipeline_t *p) {
  static const char *fn = "cudaq_pipeline_start";
  cudaq__pool_t *pool = &p->pool;
  free_gates(p); /* from an earlier start that failed */
  memset(pool, 0, sizeof *pool);
  pool->count = p->nworkers;
  pool->mailbox = mailbox_host_base(p);
  pool->ready = cudaq__pipeline_ready_flag(p, 0);
  int *ready_dev = (int *)p->mapped_dev;
  void **mailbox_dev = (void **)((uint8_t *)p->mapped_dev + CUDAQ_PIPELINE_MAX_WORKERS * sizeof(int));
  for (uint32_t w = 0; w < p->nworkers; ++w) {
    p->wctx[w].p = p;
    p->wctx[w].id = (int)w;
    pool->completion_arg[w] = &p->wctx[w];
    atomic_store_explicit(cudaq__pipeline_ready_flag(p, (int)w), 0, memory_order_relaxed);
    atomic_store_explicit(&done_host_base(p)[w], 0, memory_order_relaxed);
  }
  p->completion = CUDAQ_GPU_ONLY_COMPLETION_AUTO;
  if (!p->factory && p->cfg.gpu_prelaunch)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: gpu_prelaunch needs a GPU stage", fn);
  if (!p->factory) {
    pool->cpu_only = 1;
    cudaq__pool_init(pool);
    return CUDAQ_OK;
  }
  if (!p->have_ops) {
    const cudaq__launch_ops_t *real = cudaq__cuda_launch_ops();
    if (!real)
      return cudaq__fail(CUDAQ_ERR_UNSUPPORTED, "%s: a GPU stage needs a build with CUDA", fn);
    p->ops = *real;
  }
  pool->ops = p->ops;
  pool->host_completion = p->cpu_fn == NULL;
  pool->completion_fn = gpu_only_complete;
  if (pool->host_completion) {
    const int want = p->cfg.gpu_only_completion;
    const int can = p->ops.enqueue_word_store != NULL && (p->mapped || p->have_ops);
    if (want == CUDAQ_GPU_ONLY_COMPLETION_STREAM_WRITE && !can)
      return cudaq__fail(CUDAQ_ERR_UNSUPPORTED,
                         "%s: gpu_only_completion STREAM_WRITE needs cuStreamWriteValue32 from the "
                         "CUDA driver and mapped memory; use AUTO or HOST_FUNC", fn);
    if (can && want != CUDAQ_GPU_ONLY_COMPLETION_HOST_FUNC) {
      p->completion = CUDAQ_GPU_ONLY_COMPLETION_STREAM_WRITE;
      /* Device view of the words; an emulated GPU (no mapping) uses the host view. */
      pool->done_dev = (uint32_t *)mapped_dev_at(p, DONE_OFFSET);
    } else {
      p->completion = CUDAQ_GPU_ONLY_COMPLETION_HOST_FUNC;
    }
  }
  if (p->cfg.gpu_prelaunch) {
    cudaq_status_t st = prelaunch_alloc(p);
    if (st != CUDAQ_OK) return st;
  }
  for (uint32_t w = 0; w < p->nworkers; ++w) {
    cudaq_gpu_worker_resources_t *r = &p->res[w];
    memset(r, 0, sizeof *r);
    r->ready_flag_dev = p->mapped ? &ready_dev[w] : NULL;
    r->mailbox_dev = p->mapped ? &mailbox_dev[w] : NULL;
    if (!p->mapped && p->have_ops) { /* emulated GPU: host views stand in */
      r->ready_flag_dev = &ready_host_base(p)[w];
      r->mailbox_dev = &mailbox_host_base(p)[w];
    }
    if (p->cfg.gpu_prelaunch) {
      r->mailbox_dev = p->gate[w].mailbox_dev;
      r->gate = &p->gate[w];
    }
    int rc = p->factory(p->factory_user, (int)w, r);
    if (rc != 0)
      return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: the GPU stage factory failed for worker %u (%d)",
                         fn, w, rc);
    if (!r->graph_exec || !r->stream)
      return cudaq__fail(CUDAQ_ERR_INVALID_ARG,
                         "%s: the GPU stage factory returned no graph_exec or stream for worker %u",
                         fn, w);
    if (r->waits_at_gate && !p->cfg.gpu_prelaunch)
      return cudaq__fail(CUDAQ_ERR_INVALID_ARG,
                         "%s: worker %u's graph waits at a gate (waits_at_gate), but gpu_prelaunch "
                         "is 0: no gate exists", fn, w);
    cudaq_host_dispatch_worker_t *wk = &pool->workers[w];
    wk->graph_exec = r->graph_exec;
    wk->stream = r->stream;
    wk->function_id = r->function_id;
    wk->pre_launch_fn = r->pre_launch_fn;
    wk->pre_launch_data = r->pre_launch_data;
    wk->post_launch_fn = r->post_launch_fn;
    wk->post_launch_data = r->post_launch_data;
  }
  if (p->cfg.gpu_prelaunch) {
    cudaq_status_t st = prelaunch_graphs(p);
    if (st != CUDAQ_OK) return st;
  }
  cudaq__pool_init(pool);
  return CUDAQ_OK;
}

/* Pre-launch start: arms every worker (before the dispatcher thread runs:
 * its creation publishes armed_mask and ticket[]). A failed arm is counted and
 * leaves that worker to launch on arrival. */
static void arm_all(cudaq_pipeline_t *p) {
  for (uint32_t w = 0; w < p->nworkers; ++w) cudaq__pool_arm(&p->pool, w);
}

/* Pre-launch, a start that failed after arm_all (no pipeline thread
 * running): releases every waiting graph and waits for the streams (the
 * start's error is what the caller reports). */
static void disarm_all(cudaq_pipeline_t *p) {
  cudaq__pool_cancel_armed(&p->pool);
  for (uint32_t w = 0; w < p->nworkers; ++w) (void)p->ops.sync_stream(p->ops.user, p->pool.workers[w].stream);
}

static void join_all(cudaq_pipeline_t *p, int dispatcher, int consumer) {
  /* R4 asks every thread to exit; pairs with A4 in each loop. */
  atomic_store_explicit(&p->shutdown, 1, memory_order_release);
  if (dispatcher) pthread_join(p->dispatcher_thread, NULL);
  for (uint32_t i = 0; i < p->nworker_threads; ++i) pthread_join(p->worker_threads[i], NULL);
  p->nworker_threads = 0;
  if (consumer) pthread_join(p->consumer_thread, NULL);
}

cudaq_status_t cudaq_pipeline_start(cudaq_pipeline_t *p) {
  static const char *fn = "cudaq_pipeline_start";
  CHECK_ARG(p, fn, "pipeline is NULL");
  if (p->state != ST_CREATED)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: the pipeline was started already (%s)", fn,
                       p->state == ST_RUNNING ? "running" : "stopped; create a new one");
  CHECK_ARG(p->factory || p->cpu_fn, fn,
            "no stage registered (call cudaq_pipeline_set_gpu_stage and/or _set_cpu_stage)");
  if (p->factory && !p->cpu_fn && p->cfg.external_ringbuffer)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG,
                       "%s: GPU-only mode is not available with an external ring buffer", fn);
  cudaq_status_t st = build_workers(p);
  if (st != CUDAQ_OK) return st;

  atomic_store_explicit(&p->shutdown, 0, memory_order_relaxed);
  int rc = spawn(&p->consumer_thread, consumer_main, p, p->cfg.cores.consumer, "cudaq-consumer");
  if (rc != 0) return cudaq__fail(CUDAQ_ERR_INTERNAL, "%s: consumer thread: %s", fn, strerror(rc));
  if (p->cpu_fn) {
    for (uint32_t w = 0; w < p->nworkers; ++w) {
      int core = p->cfg.cores.worker_base < 0 ? -1 : p->cfg.cores.worker_base + (int)w;
      rc = spawn(&p->worker_threads[w], worker_main, &p->wctx[w], core, "cudaq-worker");
      if (rc != 0) {
        join_all(p, 0, 1);
        return cudaq__fail(CUDAQ_ERR_INTERNAL, "%s: worker thread %u: %s", fn, w, strerror(rc));
      }
      p->nworker_threads = w + 1;
    }
  }
  if (p->pool.prelaunch) arm_all(p);
  rc = spawn(&p->dispatcher_thread, dispatcher_main, p, p->cfg.cores.dispatcher, "cudaq-pl-disp");
  if (rc != 0) {
    join_all(p, 0, 1);
    if (p->pool.prelaunch) disarm_all(p);
    return cudaq__fail(CUDAQ_ERR_INTERNAL, "%s: dispatcher thread: %s", fn, strerror(rc));
  }
  p->state = ST_RUNNING;
  /* The injector may submit from now on (A12 in the injector). */
  atomic_store_explicit(&p->accepting, 1, memory_order_seq_cst);
  return cudaq__ok();
}

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Everything signalled was dispatched, finished and harvested. */
static int drained(const cudaq_pipeline_t *p) {
  for (uint32_t s = 0; s < p->nslots; ++s)
    if (cudaq__load_acquire_u64(&p->ring.rx_flags_host[s]) ||
        cudaq__load_acquire_u64(&p->ring.tx_flags_host[s]))
      return 0;
  return atomic_load_explicit(&p->pool.idle_mask, memory_order_acquire) == p->pool.all_mask;
}

static void dump_stuck(const cudaq_pipeline_t *p) {
  static const char *ds[] = {"-", "cpu-stage", "deferred"};
  fprintf(stderr, "cudaq_pipeline_stop: work still pending after %d ms; slots with rx or tx set:\n",
          p->cfg.drain_timeout_ms);
  for (uint32_t s = 0; s < p->nslots; ++s) {
    uint64_t rx = cudaq__load_acquire_u64(&p->ring.rx_flags_host[s]);
    uint64_t tx = cudaq__load_acquire_u64(&p->ring.tx_flags_host[s]);
    uint64_t rq = atomic_load_explicit(&p->slot_request[s], memory_order_relaxed);
    int d = atomic_load_explicit(&p->dstate[s], memory_order_relaxed);
    if (!rx && !tx) continue;
    fprintf(stderr, "  slot %3u: rx 0x%016llx tx 0x%016llx%s request %lld completion %s\n", s,
            (unsigned long long)rx, (unsigned long long)tx,
            tx == CUDAQ_TX_FLAG_IN_FLIGHT ? " (in flight)" : "",
            rq == SLOT_NONE ? -1ll : (long long)rq, ds[(d & DS_MASK) <= DS_DEFERRED ? (d & DS_MASK) : 0]);
  }
  uint64_t idle = atomic_load_explicit(&p->pool.idle_mask, memory_order_acquire);
  fprintf(stderr, "  workers: idle_mask 0x%016llx\n", (unsigned long long)idle);
  for (uint32_t w = 0; w < p->nworkers; ++w) {
    if ((idle >> w) & 1) continue;
    fprintf(stderr, "  worker %2u: busy, origin slot %u, ready flag %d\n", w, p->pool.tags[w],
            atomic_load_explicit(cudaq__pipeline_ready_flag((cudaq_pipeline_t *)p, (int)w),
                                 memory_order_acquire));
  }
}

cudaq_status_t cudaq_pipeline_stop(cudaq_pipeline_t *p) {
  CHECK_ARG(p, "cudaq_pipeline_stop", "pipeline is NULL");
  if (p->state != ST_RUNNING) return cudaq__ok();
  /* R12 closes the injector, then wait for submits in progress (a
   * store-load handshake with the injector's A12: both seq_cst). */
  atomic_store_explicit(&p->accepting, 0, memory_order_seq_cst);
  while (atomic_load_explicit(&p->producers_in, memory_order_seq_cst) != 0) sched_yield();
  const uint64_t deadline = now_ns() + (uint64_t)p->cfg.drain_timeout_ms * 1000000ull;
  int ok = 0;
  for (;;) {
    if (drained(p)) {
      ok = 1;
      break;
    }
    if (now_ns() > deadline) break;
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  if (!ok) {
    dump_stuck(p);
    p->stuck = 1;
  }
  join_all(p, 1, 1);
  cudaq_status_t st = cudaq__ok();
  /* No thread runs any more (joined): release the waiting graphs (one
   * would hold its stream for ever); the stream waits below drain them. */
  if (p->pool.prelaunch) cudaq__pool_cancel_armed(&p->pool);
  if (!ok && p->pool.prelaunch) {
    /* After a timeout wait for the idle workers' streams only (their one
     * run left is that release; a busy worker's stream may be stuck). */
    const uint64_t idle = atomic_load_explicit(&p->pool.idle_mask, memory_order_acquire);
    for (uint32_t w = 0; w < p->nworkers; ++w)
      if ((idle >> w) & 1) (void)p->ops.sync_stream(p->ops.user, p->pool.workers[w].stream);
  }
  if (ok && p->factory) {
    /* Everything completed, so this returns once the graphs released
     * above (pre-launch) have run; it makes sure no work of ours is left
     * on the streams before the caller frees them. */
    for (uint32_t w = 0; w < p->nworkers; ++w) {
      int e = p->ops.sync_stream(p->ops.user, p->pool.workers[w].stream);
      if (e != 0 && st == CUDAQ_OK)
        st = cudaq__fail(CUDAQ_ERR_CUDA, "cudaq_pipeline_stop: stream of worker %u: error %d", w, e);
    }
  }
  p->state = ST_STOPPED;
  if (!ok)
    return cudaq__fail(CUDAQ_ERR_INTERNAL,
                       "cudaq_pipeline_stop: requests still pending after %d ms (dumped to stderr)",
                       p->cfg.drain_timeout_ms);
  return st;
}

/* ---- queries ----------------------------------------------------------- */

cudaq_status_t cudaq_pipeline_stats(const cudaq_pipeline_t *p, cudaq_pipeline_stats_t *out) {
  CHECK_ARG(p, "cudaq_pipeline_stats", "pipeline is NULL");
  CHECK_ARG(out, "cudaq_pipeline_stats", "out is NULL");
  out->submitted = atomic_load_explicit(&p->submitted, memory_order_relaxed);
  out->completed = atomic_load_explicit(&p->completed, memory_order_relaxed);
  out->dispatched = atomic_load_explicit(&p->dispatched, memory_order_relaxed);
  out->backpressure_stalls = atomic_load_explicit(&p->stalls, memory_order_relaxed);
  out->worker_stalls = atomic_load_explicit(&p->worker_stalls, memory_order_relaxed);
  out->errors = atomic_load_explicit(&p->errors, memory_order_relaxed);
  out->dropped = atomic_load_explicit(&p->dropped, memory_order_relaxed);
  out->prelaunched = atomic_load_explicit(&p->pool.prelaunched, memory_order_relaxed);
  out->prelaunch_failures = atomic_load_explicit(&p->pool.prelaunch_failures, memory_order_relaxed);
  out->prelaunch_cancelled = atomic_load_explicit(&p->pool.prelaunch_cancelled, memory_order_relaxed);
  out->prelaunch_boosted = atomic_load_explicit(&p->pool.prelaunch_boosted, memory_order_relaxed);
  /* An idle bit seen (acquire, pairs with R6) makes that worker's armed bit,
   * set before its R6, visible. */
  const uint64_t idle = atomic_load_explicit(&p->pool.idle_mask, memory_order_acquire);
  out->prelaunch_waiting = (uint64_t)__builtin_popcountll(
      idle & atomic_load_explicit(&p->pool.armed_mask, memory_order_relaxed));
  return cudaq__ok();
}

cudaq_status_t cudaq_pipeline_gpu_only_completion(const cudaq_pipeline_t *p,
                                                  cudaq_gpu_only_completion_t *out) {
  CHECK_ARG(p, "cudaq_pipeline_gpu_only_completion", "pipeline is NULL");
  CHECK_ARG(out, "cudaq_pipeline_gpu_only_completion", "out is NULL");
  *out = p->state == ST_CREATED ? CUDAQ_GPU_ONLY_COMPLETION_AUTO : p->completion;
  return cudaq__ok();
}

cudaq_status_t cudaq_pipeline_complete_deferred(cudaq_pipeline_t *p, int slot, size_t result_len) {
  static const char *fn = "cudaq_pipeline_complete_deferred";
  CHECK_ARG(p, fn, "pipeline is NULL");
  if (slot < 0 || (uint32_t)slot >= p->nslots)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: slot %d outside 0..%u", fn, slot, p->nslots - 1);
  if (result_len > max_result(p))
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: result_len %zu exceeds the %zu-byte result area",
                       fn, result_len, max_result(p));
  _Atomic int *d = &p->dstate[slot];
  int cur = atomic_load_explicit(d, memory_order_acquire);
  for (;;) {
    if ((cur & DS_MASK) != DS_ARMED && (cur & DS_MASK) != DS_DEFERRED)
      return cudaq__fail(CUDAQ_ERR_INVALID_ARG,
                         "%s: slot %d is not waiting for a deferred completion", fn, slot);
    /* A10 pairs with R10 in the worker; whoever moves the state to NONE
     * completes the slot, exactly once. */
    if (atomic_compare_exchange_weak_explicit(d, &cur, DS_NONE, memory_order_acq_rel,
                                              memory_order_acquire))
      break;
  }
  complete_slot(p, (uint32_t)slot, 0, (uint32_t)result_len);
  return cudaq__ok();
}

cudaq_status_t cudaq_pipeline_ringbuffer_bases(const cudaq_pipeline_t *p,
                                               cudaq_ringbuffer_bases_t *out) {
  CHECK_ARG(p, "cudaq_pipeline_ringbuffer_bases", "pipeline is NULL");
  CHECK_ARG(out, "cudaq_pipeline_ringbuffer_bases", "out is NULL");
  out->rx_data_host = p->ring.rx_data_host;
  out->rx_data_dev = p->ring.rx_data;
  return cudaq__ok();
}

cudaq_status_t cudaq_pipeline_ringbuffer(const cudaq_pipeline_t *p, cudaq_ringbuffer_t *out) {
  CHECK_ARG(p, "cudaq_pipeline_ringbuffer", "pipeline is NULL");
  CHECK_ARG(out, "cudaq_pipeline_ringbuffer", "out is NULL");
  *out = p->ring;
  return cudaq__ok();
}
