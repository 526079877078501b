/*
 * internal.h - private declarations shared by the library's sources.
 * Internal non-static symbols carry the cudaq__ prefix and are not exported
 * (see libcudaq_realtime.map).
 */
#ifndef CUDAQ_SRC_INTERNAL_H
#define CUDAQ_SRC_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "cudaq/realtime/cudaq_realtime.h"

/* ---- errors ------------------------------------------------------------ */

/* Records a printf-style message for cudaq_last_error() and returns status. */
cudaq_status_t cudaq__fail(cudaq_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Clears the thread's last error message and returns CUDAQ_OK. */
cudaq_status_t cudaq__ok(void);

/* ---- slot processing (host path) ------------------------------------- */

/* A function-table entry as the host dispatcher keeps it: checked and
 * reduced to what the hot path reads. */
typedef struct {
  uint32_t function_id;
  uint8_t dispatch_mode;
  uint8_t has_fixed_arg_len; /* the schema fixes arg_len to fixed_arg_len */
  uint32_t fixed_arg_len;    /* with a variable last argument: the minimum arg_len
                                (both from cudaq_schema_arg_rule, checked with
                                cudaq_rpc_check_arg_len: rpc_wire_format.h) */
  cudaq_host_rpc_fn_t host_fn;
} cudaq__host_entry_t;

typedef enum {
  CUDAQ__SLOT_ANSWERED = 0,      /* a response header was written; *status says which */
  CUDAQ__SLOT_BAD_MAGIC = 1,     /* not a request: consume without response */
  CUDAQ__SLOT_UNKNOWN_FUNCTION = 2, /* no entry: consume without response */
  CUDAQ__SLOT_GRAPH_LAUNCH = 3      /* (graph_ok) a valid GRAPH_LAUNCH request: nothing
                                       written; the caller hands it to the worker pool */
} cudaq__slot_outcome_t;

/* Checks a host function table and reduces it to out[count]. On a bad entry
 * returns CUDAQ_ERR_INVALID_ARG with a message naming the entry. */
/* The one rule for function ids (host and device paths): no two entries of a
 * table share a function_id. Returns CUDAQ_OK, or CUDAQ_ERR_INVALID_ARG with
 * a message naming both entries and the id (prefixed with "fn: " when fn is
 * not NULL). */
cudaq_status_t cudaq__table_check_ids(const cudaq_function_entry_t *entries, uint32_t count,
                                      const char *fn);
cudaq_status_t cudaq__host_table_build(const cudaq_function_entry_t *entries, uint32_t count,
                                       cudaq__host_entry_t *out);

/* Processes the request in rx_slot (rx_size bytes; payload limit
 * max_payload) and writes the response into tx_slot (tx_size bytes; may be
 * rx_slot). Pure: touches no flag, no counter. Every byte it reads lies
 * inside the two slots, whatever the slot holds. */
cudaq__slot_outcome_t cudaq__host_process_slot(const cudaq__host_entry_t *table, uint32_t count,
                                               const uint8_t *rx_slot, uint32_t max_payload,
                                               uint8_t *tx_slot, size_t tx_size,
                                               int32_t *out_status);

/* The same, where GRAPH_LAUNCH entries have graph workers (graph_ok != 0):
 * a request for one that passes the checks (length rule) comes back as
 * CUDAQ__SLOT_GRAPH_LAUNCH with its function id in *out_function_id, so
 * that the host path looks each request's entry up once. With graph_ok 0 a
 * GRAPH_LAUNCH request is answered CUDAQ_RPC_ERR_UNSUPPORTED_MODE. */
cudaq__slot_outcome_t cudaq__host_process_slot_ex(const cudaq__host_entry_t *table, uint32_t count,
                                                  const uint8_t *rx_slot, uint32_t max_payload,
                                                  uint8_t *tx_slot, size_t tx_size,
                                                  int32_t *out_status, int graph_ok,
                                                  uint32_t *out_function_id);

/* ---- dispatcher objects ---------------------------------------------- */

/* Counters: written only by the dispatcher thread (plain load + store on
 * the atomics, no read-modify-write), read by anyone with relaxed loads. */
typedef struct {
  _Atomic uint64_t processed;
  _Atomic uint64_t dropped_bad_magic;
  _Atomic uint64_t dropped_unknown_function;
  _Atomic uint64_t err_payload_too_large;
  _Atomic uint64_t err_arg_len_mismatch;
  _Atomic uint64_t err_result_too_large;
  _Atomic uint64_t err_unsupported_mode;
  _Atomic uint64_t handler_errors;
} cudaq__counters_t;

struct cudaq_dispatcher_t {
  cudaq_dispatch_manager_t *mgr;
  cudaq_dispatcher_t *next; /* manager's list */
  cudaq_dispatcher_config_t config;

  bool have_ring, have_table, have_control, have_launch, have_unified;
  cudaq_ringbuffer_t ring; /* host views filled in on the host path */
  cudaq_function_table_t table;
  cudaq__host_entry_t *host_table; /* host path: checked copy */
  uint32_t host_table_count;
  volatile int *shutdown_flag;
  uint64_t *stats;
  cudaq_dispatch_launch_fn_t launch_fn;
  cudaq_unified_launch_fn_t unified_launch_fn;
  void *transport_ctx;
  int cpu_core; /* -1: any CPU */

  bool running;
  bool started_once; /* device path: launched once; decides whether counters start from 0 */
  pthread_t thread;
  uint32_t next_slot; /* host path: where the loop resumes after a restart */
  void *stream;       /* device path: the dispatcher's cudaStream_t */
  cudaq__counters_t counters;
  struct cudaq__pool *pool; /* host path: GRAPH_LAUNCH worker pool, or NULL */
};

struct cudaq_dispatch_manager_t {
  pthread_mutex_t lock; /* guards the list; never taken on the hot path */
  cudaq_dispatcher_t *head;
};

/* Device path (device_path.c, CUDA builds only). */
int cudaq__device_accessible(const void *p, const void **host_view);
cudaq_status_t cudaq__device_read_u64(const uint64_t *p, uint64_t *out);
/* Copies `bytes` of device-visible memory (device, mapped pinned or
 * managed) into host memory on a private non-blocking stream, so it never
 * waits behind a persistent kernel. Returns the CUDA error. Not a hot path. */
int cudaq__device_copy_to_host(void *dst, const void *src, size_t bytes);
cudaq_status_t cudaq__device_start(cudaq_dispatcher_t *d);
cudaq_status_t cudaq__device_stop(cudaq_dispatcher_t *d);
void cudaq__device_release(cudaq_dispatcher_t *d);

/* Reads the device-side counters of the dispatch kernel whose stats buffer
 * is `stats`; registered by the dispatch library (see
 * cudaq__register_dispatch_library). Returns 0 on success. */
typedef int (*cudaq__counter_reader_fn)(const uint64_t *stats, cudaq_dispatcher_counters_t *out);
/* Tells the dispatch library, right before cudaq_dispatcher_start calls the
 * launch function, whether the device counters of `stats` start from 0
 * (fresh: the dispatcher's first start) or continue (a restart), so that
 * the next launch does not decide from stats[0] (which stays 0 after a run
 * that only dropped requests), and the ring's cudaq_rx_completion_t.
 * Returns 0 on success. */
typedef int (*cudaq__launch_prepare_fn)(const uint64_t *stats, int fresh, uint32_t completion);
/* Calls the registered prepare hook (dispatcher.c) with the ring's
 * cudaq_rx_completion_t for the launch; 0 when none is registered (a
 * launch function of the user's own, without our library). */
int cudaq__device_launch_prepare(const uint64_t *stats, int fresh, uint32_t completion);
/* 1 if `fn` is one of the dispatch library's device-call launch functions
 * (registered with the hooks above): the launches that serve header
 * completion (cudaq_rx_completion_t). */
int cudaq__is_header_launcher(cudaq_dispatch_launch_fn_t fn);

/* Thread and ring helpers shared by the host dispatcher and the pipeline
 * (host_dispatch.c): */
/* Starts a thread pinned to CPU `core` (-1: every CPU of the machine; a
 * thread never inherits its creator's affinity, DESIGN.md), named `name`.
 * Returns 0 or the pthread error (EINVAL: the core cannot be used). */
int cudaq__spawn_pinned(pthread_t *t, void *(*main_fn)(void *), void *arg, int core,
                        const char *name);
/* 1 if `first`..`first + count - 1` are CPUs of this machine (or first is
 * -1: no pinning), else 0. */
int cudaq__cpus_valid(int first, int count);
/* First slot at or after `from` (ring order, n slots) whose RX flag is set,
 * or -1. Each flag is read with acquire (A1 of the ring: pairs with R1 in
 * cudaq_host_ringbuffer_signal_slot). */
int64_t cudaq__scan_rx_flags(volatile uint64_t *rx_flags, uint32_t from, uint32_t n);

/* Host path: start and stop the dispatcher thread. */
cudaq_status_t cudaq__host_dispatch_start(cudaq_dispatcher_t *d);
cudaq_status_t cudaq__host_dispatch_join(cudaq_dispatcher_t *d);

/* Handles slot `slot` of the host-path ring once its RX flag was seen set:
 * processes it, publishes the response, clears the RX flag, counts it; a
 * GRAPH_LAUNCH request goes to the worker pool (d->pool). Returns 0 when
 * the slot was consumed, 1 when every graph worker for it is busy (the slot
 * is left as it was: spin on it). Called only from the dispatcher thread. */
int cudaq__host_handle_slot(cudaq_dispatcher_t *d, uint32_t slot);

/* Host path, GRAPH_LAUNCH entries (pipeline/host_workers.c): hands slot
 * `slot`, a request already checked by cudaq__host_process_slot_ex (outcome
 * CUDAQ__SLOT_GRAPH_LAUNCH for function_id), to the worker pool. Returns 0
 * if consumed (RX cleared, counted), 1 if every worker for it is busy (spin
 * on the slot), 2 if no worker serves the function (answer it
 * UNSUPPORTED_MODE). Dispatcher thread only. */
int cudaq__host_pool_slot(cudaq_dispatcher_t *d, uint32_t slot, uint32_t function_id);
/* Frees the pool of a dispatcher (destroy). */
void cudaq__host_pool_free(cudaq_dispatcher_t *d);

#endif /* CUDAQ_SRC_INTERNAL_H */
