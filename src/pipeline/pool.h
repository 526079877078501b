/*
 * pool.h - the dynamic worker pool of the host dispatcher
 * (host-dispatcher-worker-pool.md sections 2, 4, 6, 9, 13), shared by the
 * pipeline (pipeline.c) and the host-path dispatcher's GRAPH_LAUNCH entries
 * (host_dispatch.c).
 *
 * Ownership of worker w (spec 13, "no race conditions on tags"): the
 * dispatcher owns w from the moment it clears w's bit in idle_mask until the
 * job's finisher sets the bit again (cudaq__pool_release). Only the owner
 * touches tags[w] and mailbox[w], so they are plain words.
 *
 * The launch goes through an ops table so that tests can substitute an
 * emulated GPU stage; the real ops (cudaGraphLaunch, cudaLaunchHostFunc)
 * live in cuda_ops.c, compiled only with CUDA.
 */
#ifndef CUDAQ_SRC_PIPELINE_POOL_H
#define CUDAQ_SRC_PIPELINE_POOL_H

#include <stdatomic.h>
#include <stdint.h>

#include "cudaq/realtime/pipeline.h"

typedef void (*cudaq__host_fn_t)(void *arg);

#include "gate.h"

typedef struct {
  /* Launches graph g on stream s. Returns 0 or the CUDA error code. */
  int (*launch_graph)(void *user, cudaGraphExec_t g, cudaStream_t s);
  /* Enqueues fn(arg) on stream s after the work already there. Returns 0
   * or the CUDA error code. */
  int (*enqueue_host_fn)(void *user, cudaStream_t s, cudaq__host_fn_t fn, void *arg);
  /* Waits for stream s (shutdown only). Returns 0 or the CUDA error. */
  int (*sync_stream)(void *user, cudaStream_t s);
  void *user;
  /* Optional (NULL: not available). Enqueues on stream s, after the work
   * already there, a GPU write of `value` into the 32-bit word at device
   * address word_dev, preceded by a system-scope memory fence
   * (cuStreamWriteValue32, default flags): the GPU-only completion without
   * a host function. Returns 0 or the CUDA error code. */
  int (*enqueue_word_store)(void *user, cudaStream_t s, void *word_dev, uint32_t value);
  /* Pre-launch (pipeline gpu_prelaunch); optional, all three or none.
   * gate_alloc: device memory for one worker's gate (*g filled: the device
   * mailbox word, already naming the staging copy, the staging copy of
   * staging_bytes, the ticket). gate_graph: instantiates, on stream s, the
   * graph "gate kernel -> user_graph" (cudaq_pipeline_gate_t in *a), or
   * user_graph alone when self (its first kernel waits at the gate itself:
   * waits_at_gate), into *out.
   * gate_free: frees both (exec may be NULL). Return 0 or the CUDA error. */
  int (*gate_alloc)(void *user, uint64_t staging_bytes, cudaq_pipeline_gate_t *g);
  int (*gate_graph)(void *user, cudaGraph_t user_graph, const cudaq_pipeline_gate_t *a, int self, cudaStream_t s,
                    cudaGraphExec_t *out);
  void (*gate_free)(void *user, cudaq_pipeline_gate_t *g, cudaGraphExec_t exec);
} cudaq__launch_ops_t;

/* The real ops (CUDA builds); NULL without CUDA. */
const cudaq__launch_ops_t *cudaq__cuda_launch_ops(void);

/* Mapped pinned memory when a CUDA device is usable, else zeroed host
 * memory (*dev = *host). Returns 0 on success. */
int cudaq__mapped_alloc(size_t bytes, void **host, void **dev, int *mapped);
void cudaq__mapped_free(void *host, int mapped);

typedef enum {
  CUDAQ__POOL_LAUNCHED = 0, /* slot handed to a worker, TX = IN_FLIGHT */
  CUDAQ__POOL_BUSY = 1,     /* every worker for this function is busy: spin, do not advance */
  CUDAQ__POOL_FAILED = 2,   /* launch failed: TX = error marker, worker returned */
  CUDAQ__POOL_NO_WORKER = 3 /* no worker serves this function id */
} cudaq__pool_result_t;

typedef struct cudaq__pool {
  uint32_t count;
  int cpu_only;  /* "launch" = store 1 into the worker's ready flag */
  int host_completion; /* GPU-only: after the graph, enqueue either the store of 1 into
                          done_dev[w] (when done_dev is set) or completion_fn(completion_arg[w]) */
  uint32_t *done_dev;  /* [count] device view of the GPU-only completion words, or NULL */
  cudaq_host_dispatch_worker_t workers[CUDAQ_PIPELINE_MAX_WORKERS];
  uint64_t all_mask;
  /* idle_mask: bit w = worker w is free. Cleared only by the dispatcher
   * (fetch_and), set by whoever finishes the job (fetch_or). */
  _Atomic uint64_t idle_mask;
  uint32_t tags[CUDAQ_PIPELINE_MAX_WORKERS]; /* origin slot of worker w's job */
  void **mailbox;            /* [count] host view, mapped memory where possible */
  void *mailbox_block;       /* owner's allocation of mailbox (host-path dispatcher) */
  int mailbox_mapped;
  _Atomic int *ready;        /* [count] host view of the ready flags, or NULL */
  cudaq__host_fn_t completion_fn;
  void *completion_arg[CUDAQ_PIPELINE_MAX_WORKERS];
  /* Distinct function ids and the workers serving each. */
  uint32_t nfn;
  uint32_t fn_id[CUDAQ_PIPELINE_MAX_WORKERS];
  uint64_t fn_mask[CUDAQ_PIPELINE_MAX_WORKERS];
  cudaq__launch_ops_t ops;
  /* Pre-launch (pipeline gpu_prelaunch): gate words in mapped memory (host
   * view); gate_exec[w], the graph "gate kernel -> w's graph", launched
   * instead of w's graph; ticket[w], the runs of it enqueued so far (w's
   * owner's, as tags). armed_mask: bit w = a run waits at w's gate (set by
   * w's owner before R6, cleared by the dispatcher); narmed, how many, at
   * most prelaunch (the limit: every waiting gate kernel polls its word
   * over PCIe, and each poller slows all requests). */
  uint32_t prelaunch;
  /* gpu_prelaunch_max (>= prelaunch, <= count): the limit while `boost`
   * is above 0. boost: set to CUDAQ_PIPELINE_PRELAUNCH_BOOST by the
   * dispatcher when a request finds no graph waiting, counted down by
   * each re-arm past `prelaunch`. A heuristic: relaxed, nothing is
   * published through it (a stale read arms one graph more or less). */
  uint32_t prelaunch_max;
  _Atomic int32_t boost;
  _Atomic uint64_t *gate_host;
  cudaGraphExec_t gate_exec[CUDAQ_PIPELINE_MAX_WORKERS];
  uint32_t ticket[CUDAQ_PIPELINE_MAX_WORKERS];
  _Atomic uint64_t armed_mask;
  _Atomic uint32_t narmed;
  _Atomic uint64_t prelaunched, prelaunch_failures, prelaunch_cancelled, prelaunch_boosted;
} cudaq__pool_t;

/* Builds the function masks and marks every worker idle. */
void cudaq__pool_init(cudaq__pool_t *p);

/* Called only from the dispatcher thread. Hands the request in `slot`
 * (device address slot_dev) to an idle worker serving function_id (any
 * worker when cpu_only), following spec 4.2 with one change: the IN_FLIGHT
 * marker is stored into *tx_flag before the launch, not after it, so a job
 * that completes before the launch call returns cannot have its response
 * overwritten by the marker (see tools/spin/pipeline.pml). On a failed
 * launch the marker becomes CUDAQ_TX_FLAG_ERROR(err) and the worker goes
 * back to the pool. The caller clears the RX flag afterwards (except on
 * BUSY / NO_WORKER). *out_worker receives the worker id on LAUNCHED.
 * request_bytes: the request's header + payload size, given to a
 * pre-launched graph's gate (its copy then takes one PCIe round trip), or
 * 0 (not known: the gate reads the header first). */
cudaq__pool_result_t cudaq__pool_dispatch(cudaq__pool_t *p, uint32_t function_id, uint32_t slot,
                                          uint64_t request_bytes, void *slot_dev,
                                          volatile uint64_t *tx_flag, int *out_error,
                                          int *out_worker);

/* Pre-launch: unless `prelaunch` runs wait already (`prelaunch_max`
 * while boosted), enqueues on worker w's stream its gate graph, so that
 * the next request given to w only opens the gate. Called by w's owner:
 * the thread that finishes w's job, before it releases w, or the starter
 * before the dispatcher thread runs.
 * Returns 0, or the CUDA error (counted in prelaunch_failures; w is left
 * unarmed and launches on arrival). */
int cudaq__pool_arm(cudaq__pool_t *p, uint32_t w);

/* Pre-launch, at stop (every pipeline thread joined): opens the gate of
 * every armed worker without a request (CUDAQ_PIPELINE_GATE_NO_SLOT): each such
 * graph runs once more on an empty request and its results are not used. */
void cudaq__pool_cancel_armed(cudaq__pool_t *p);

/* Returns worker w to the pool; any thread. Returns 0, or -1 if it was
 * idle already. */
int cudaq__pool_release(cudaq__pool_t *p, uint32_t w);

/* cudaq_dispatcher_set_host_workers with given launch ops (tests drive
 * the host path's GRAPH_LAUNCH workers with an emulated launch). */
struct cudaq_dispatcher_t;
cudaq_status_t cudaq__dispatcher_set_host_workers_ops(struct cudaq_dispatcher_t *d,
                                                    const cudaq_host_dispatch_worker_t *workers,
                                                    uint32_t count, const cudaq__launch_ops_t *ops);

#endif /* CUDAQ_SRC_PIPELINE_POOL_H */
