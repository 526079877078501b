/*
 * pipeline_state.h - the pipeline's state, shared by pipeline.c (threads,
 * start / stop, stats) and injector.c (the software producer). Private to
 * src/pipeline.
 */
#ifndef CUDAQ_SRC_PIPELINE_STATE_H
#define CUDAQ_SRC_PIPELINE_STATE_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "../atomics.h"
#include "../internal.h"
#include "pool.h"

#define SLOT_NONE UINT64_MAX /* slot_request: no injector request in the slot */

enum { ST_CREATED = 0, ST_RUNNING = 1, ST_STOPPED = 2 };

typedef struct {
  cudaq_pipeline_t *p;
  int id;
} worker_ctx_t;

struct cudaq_pipeline_t {
  cudaq_pipeline_config_t cfg;
  cudaq_ringbuffer_t ring; /* host views filled in */
  int own_ring;
  uint32_t nslots;
  uint32_t nworkers;
  int state;
  int stuck; /* stop gave up with work pending */

  cudaq_gpu_stage_factory_t factory;
  void *factory_user;
  cudaq_cpu_stage_fn_t cpu_fn;
  void *cpu_user;
  cudaq_completion_fn_t done_fn;
  void *done_user;
  cudaq__launch_ops_t ops;
  int have_ops;

  cudaq__pool_t pool;
  cudaq_gpu_worker_resources_t res[CUDAQ_PIPELINE_MAX_WORKERS];
  worker_ctx_t wctx[CUDAQ_PIPELINE_MAX_WORKERS];

  /* Mapped block: ready flags [64], mailboxes [64], then the GPU-only
   * completion words [64] (written by the GPU, polled by the consumer),
   * then the pre-launch gate words [64] (written by the dispatcher, waited
   * on by the GPU). */
  void *mapped_host, *mapped_dev;
  int mapped;
  cudaq_gpu_only_completion_t completion; /* in use (GPU-only mode), or AUTO */
  /* gpu_prelaunch: each worker's gate (device memory), and how many exist. */
  cudaq_pipeline_gate_t gate[CUDAQ_PIPELINE_MAX_WORKERS];
  uint32_t ngates;

  _Atomic uint64_t *slot_request; /* [nslots] injector's request id, SLOT_NONE */
  _Atomic int *dstate;            /* [nslots] */

  _Atomic int shutdown;     /* threads exit */
  _Atomic int accepting;    /* injector may submit */
  _Atomic int producers_in; /* injector calls in progress */
  _Atomic int have_injector;

  _Atomic uint64_t submitted, completed, dispatched, stalls, worker_stalls, errors, dropped;

  pthread_t dispatcher_thread, consumer_thread, worker_threads[CUDAQ_PIPELINE_MAX_WORKERS];
  uint32_t nworker_threads;
};

struct cudaq_pipeline_injector_t {
  cudaq_pipeline_t *p;
  uint32_t next;
  _Atomic uint64_t stalls;
};

#define CHECK_ARG(cond, fn, what)                                                 \
  do {                                                                            \
    if (!(cond)) return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: %s", fn, what);   \
  } while (0)

static inline void bump(_Atomic uint64_t *c) { cudaq__bump_single_writer(c); }

static inline void idle_wait(const cudaq_pipeline_t *p) {
  if (p->cfg.idle_yield)
    sched_yield();
  else
    cudaq__cpu_relax();
}

#endif
