/*
 * dispatcher.c - manager and dispatcher objects: configuration, wiring,
 * start / stop and statistics. Path-specific work lives in host_dispatch.c
 * (host thread) and the CUDA launch layer (device kernel).
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>

#include "atomics.h"
#include "internal.h"

static _Atomic(cudaq__counter_reader_fn) counter_reader;
static _Atomic(cudaq__launch_prepare_fn) launch_prepare;
static _Atomic(cudaq_dispatch_launch_fn_t) header_launchers[2];

/* Called by the dispatch kernel library (cudaq_realtime_dispatch) when it
 * is loaded, so that cudaq_dispatcher_get_counters() can read the counters
 * its kernels keep in device memory, cudaq_dispatcher_start() can prepare
 * the next launch (whether the counters start from 0, the ring's
 * completion) and knows the launch functions that serve header completion.
 * Exported for that library only. The release stores pair with the acquire
 * loads of the callers (the function pointers are all they publish). */
void cudaq__register_dispatch_library(cudaq__counter_reader_fn read, cudaq__launch_prepare_fn prepare,
                                      cudaq_dispatch_launch_fn_t regular, cudaq_dispatch_launch_fn_t coop);
void cudaq__register_dispatch_library(cudaq__counter_reader_fn read, cudaq__launch_prepare_fn prepare,
                                      cudaq_dispatch_launch_fn_t regular, cudaq_dispatch_launch_fn_t coop) {
  atomic_store_explicit(&counter_reader, read, memory_order_release);
  atomic_store_explicit(&launch_prepare, prepare, memory_order_release);
  atomic_store_explicit(&header_launchers[0], regular, memory_order_release);
  atomic_store_explicit(&header_launchers[1], coop, memory_order_release);
}

int cudaq__device_launch_prepare(const uint64_t *stats, int fresh, uint32_t completion) {
  cudaq__launch_prepare_fn fn = atomic_load_explicit(&launch_prepare, memory_order_acquire);
  return fn ? fn(stats, fresh, completion) : 0; /* no dispatch library: the user's kernel keeps its own counters */
}

int cudaq__is_header_launcher(cudaq_dispatch_launch_fn_t fn) {
  return fn && (fn == atomic_load_explicit(&header_launchers[0], memory_order_acquire) ||
                fn == atomic_load_explicit(&header_launchers[1], memory_order_acquire));
}

static bool on_device_path(const cudaq_dispatcher_t *d) {
  return d->config.dispatch_path == CUDAQ_DISPATCH_PATH_DEVICE;
}

/* Device path: every pointer the kernel reads must be device-visible
 * (device, mapped pinned or managed memory). */
static cudaq_status_t check_visible(const cudaq_dispatcher_t *d, const void *p, const char *fn,
                                    const char *what) {
#ifdef CUDAQ_HAVE_CUDA
  if (on_device_path(d) && !cudaq__device_accessible(p, NULL))
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG,
                       "%s: %s is not device-visible memory (use cudaMalloc, mapped pinned "
                       "memory or cudaq_host_ringbuffer_alloc with CUDAQ_RING_ALLOC_MAPPED)",
                       fn, what);
#else
  (void)d, (void)p, (void)fn, (void)what;
#endif
  return CUDAQ_OK;
}

#define CHECK_ARG(cond, fn, what) \
  do {                            \
    if (!(cond)) return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: %s", fn, what); \
  } while (0)

/* ---- manager ----------------------------------------------------------- */

cudaq_status_t cudaq_dispatch_manager_create(cudaq_dispatch_manager_t **out_mgr) {
  CHECK_ARG(out_mgr, "cudaq_dispatch_manager_create", "out_mgr is NULL");
  cudaq_dispatch_manager_t *m = calloc(1, sizeof *m);
  if (!m) return cudaq__fail(CUDAQ_ERR_INTERNAL, "cudaq_dispatch_manager_create: out of memory");
  pthread_mutex_init(&m->lock, NULL);
  *out_mgr = m;
  return cudaq__ok();
}

cudaq_status_t cudaq_dispatch_manager_destroy(cudaq_dispatch_manager_t *mgr) {
  CHECK_ARG(mgr, "cudaq_dispatch_manager_destroy", "mgr is NULL");
  cudaq_status_t first = CUDAQ_OK;
  char msg[512] = "";
  while (mgr->head) {
    cudaq_status_t st = cudaq_dispatcher_destroy(mgr->head);
    if (st != CUDAQ_OK && first == CUDAQ_OK) {
      first = st;
      snprintf(msg, sizeof msg, "%s", cudaq_last_error());
    }
  }
  pthread_mutex_destroy(&mgr->lock);
  free(mgr);
  return first == CUDAQ_OK ? cudaq__ok() : cudaq__fail(first, "%s", msg);
}

/* ---- dispatcher lifecycle ---------------------------------------------- */

cudaq_status_t cudaq_dispatcher_config_init(cudaq_dispatcher_config_t *config) {
  CHECK_ARG(config, "cudaq_dispatcher_config_init", "config is NULL");
  memset(config, 0, sizeof *config);
  config->num_blocks = 1;
  config->threads_per_block = 32;
  config->kernel_type = CUDAQ_KERNEL_REGULAR;
  config->dispatch_mode = CUDAQ_DISPATCH_DEVICE_CALL;
  config->dispatch_path = CUDAQ_DISPATCH_PATH_DEVICE;
  return cudaq__ok();
}

static cudaq_status_t check_config(const cudaq_dispatcher_config_t *c) {
  static const char *fn = "cudaq_dispatcher_create";
  if ((unsigned)c->kernel_type > CUDAQ_KERNEL_UNIFIED)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: unknown kernel_type %d", fn, (int)c->kernel_type);
  if ((unsigned)c->dispatch_mode > CUDAQ_DISPATCH_HOST_CALL)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: unknown dispatch_mode %d", fn,
                       (int)c->dispatch_mode);
  if ((unsigned)c->dispatch_path > CUDAQ_DISPATCH_PATH_HOST)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: unknown dispatch_path %d", fn,
                       (int)c->dispatch_path);
  if (c->device_id < 0)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: device_id %d is negative", fn, c->device_id);
  bool unified = c->kernel_type == CUDAQ_KERNEL_UNIFIED;
  if (c->dispatch_path == CUDAQ_DISPATCH_PATH_HOST && c->kernel_type != CUDAQ_KERNEL_REGULAR)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG,
                       "%s: kernel_type %s needs the device path (dispatch_path is HOST)", fn,
                       unified ? "UNIFIED" : "COOPERATIVE");
  if (unified && c->dispatch_mode == CUDAQ_DISPATCH_GRAPH_LAUNCH)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG,
                       "%s: a unified kernel cannot use GRAPH_LAUNCH dispatch", fn);
  /* Unified mode handles transport itself: num_slots / slot_size may be 0. */
  if (!unified || c->num_slots || c->slot_size) {
    if (c->num_slots == 0)
      return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: num_slots is 0", fn);
    if (c->slot_size < CUDAQ_RPC_HEADER_SIZE)
      return cudaq__fail(CUDAQ_ERR_INVALID_ARG,
                         "%s: slot_size %u is smaller than the %u-byte RPC header", fn,
                         c->slot_size, CUDAQ_RPC_HEADER_SIZE);
  }
  return CUDAQ_OK;
}

cudaq_status_t cudaq_dispatcher_create(cudaq_dispatch_manager_t *mgr,
                                       const cudaq_dispatcher_config_t *config,
                                       cudaq_dispatcher_t **out_dispatcher) {
  CHECK_ARG(mgr, "cudaq_dispatcher_create", "mgr is NULL");
  CHECK_ARG(config, "cudaq_dispatcher_create", "config is NULL");
  CHECK_ARG(out_dispatcher, "cudaq_dispatcher_create", "out_dispatcher is NULL");
  cudaq_status_t st = check_config(config);
  if (st != CUDAQ_OK) return st;

  cudaq_dispatcher_t *d = calloc(1, sizeof *d);
  if (!d) return cudaq__fail(CUDAQ_ERR_INTERNAL, "cudaq_dispatcher_create: out of memory");
  d->mgr = mgr;
  d->config = *config;
  /* The spec's defaults for fields a zero-initialised config leaves 0. */
  if (d->config.num_blocks == 0) d->config.num_blocks = 1;
  if (d->config.threads_per_block == 0) d->config.threads_per_block = 32;
  d->cpu_core = -1;

  pthread_mutex_lock(&mgr->lock);
  d->next = mgr->head;
  mgr->head = d;
  pthread_mutex_unlock(&mgr->lock);
  *out_dispatcher = d;
  return cudaq__ok();
}

cudaq_status_t cudaq_dispatcher_destroy(cudaq_dispatcher_t *dispatcher) {
  CHECK_ARG(dispatcher, "cudaq_dispatcher_destroy", "dispatcher is NULL");
  cudaq_status_t st = cudaq_dispatcher_stop(dispatcher);
  cudaq_dispatch_manager_t *m = dispatcher->mgr;
  pthread_mutex_lock(&m->lock);
  for (cudaq_dispatcher_t **pp = &m->head; *pp; pp = &(*pp)->next) {
    if (*pp == dispatcher) {
      *pp = dispatcher->next;
      break;
    }
  }
  pthread_mutex_unlock(&m->lock);
#ifdef CUDAQ_HAVE_CUDA
  if (!dispatcher->running) cudaq__device_release(dispatcher); /* never free a stream a kernel still uses */
#endif
  free(dispatcher->host_table);
  cudaq__host_pool_free(dispatcher);
  free(dispatcher);
  return st == CUDAQ_OK ? cudaq__ok() : st;
}

/* ---- wiring ------------------------------------------------------------ */

#define CHECK_STOPPED(d, fn)                                                            \
  do {                                                                                  \
    if ((d)->running)                                                                   \
      return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: the dispatcher is running; stop it first", \
                         fn);                                                           \
  } while (0)

cudaq_status_t cudaq_dispatcher_set_ringbuffer(cudaq_dispatcher_t *dispatcher,
                                               const cudaq_ringbuffer_t *ringbuffer) {
  static const char *fn = "cudaq_dispatcher_set_ringbuffer";
  CHECK_ARG(dispatcher, fn, "dispatcher is NULL");
  CHECK_ARG(ringbuffer, fn, "ringbuffer is NULL");
  CHECK_STOPPED(dispatcher, fn);
  const cudaq_ringbuffer_t *r = ringbuffer;
  CHECK_ARG(r->rx_flags && r->tx_flags, fn, "rx_flags or tx_flags is NULL");
  CHECK_ARG(r->rx_data && r->tx_data, fn, "rx_data or tx_data is NULL");
  CHECK_ARG(r->rx_flags != r->tx_flags, fn, "rx_flags and tx_flags are the same array");
  const uint32_t slot = dispatcher->config.slot_size;
  if (r->rx_stride_sz < slot || r->tx_stride_sz < CUDAQ_RPC_HEADER_SIZE ||
      r->rx_stride_sz > UINT32_MAX || r->tx_stride_sz > UINT32_MAX)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG,
                       "%s: rx_stride_sz %zu must be >= slot_size %u and tx_stride_sz %zu >= %u "
                       "(both below 4 GiB)",
                       fn, r->rx_stride_sz, slot, r->tx_stride_sz, CUDAQ_RPC_HEADER_SIZE);
  if (r->rx_data == r->tx_data && r->rx_stride_sz != r->tx_stride_sz)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG,
                       "%s: an in-place ring (tx_data == rx_data) needs equal strides", fn);
  const void *ptrs[4] = {(const void *)(uintptr_t)r->rx_flags, (const void *)(uintptr_t)r->tx_flags,
                         r->rx_data, r->tx_data};
  const char *names[4] = {"rx_flags", "tx_flags", "rx_data", "tx_data"};
  for (int i = 0; i < 4; ++i) {
    cudaq_status_t st = check_visible(dispatcher, ptrs[i], fn, names[i]);
    if (st != CUDAQ_OK) return st;
  }
  if (on_device_path(dispatcher) && (r->rx_stride_sz % 4 || r->tx_stride_sz % 4))
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG,
                       "%s: the dispatch kernel needs slot strides that are multiples of 4", fn);
  /* Header completion (cudaq_rx_completion_t): the device-call kernels'
   * extension; its layout rules. */
  if (r->completion != CUDAQ_RX_COMPLETION_FLAG && r->completion != CUDAQ_RX_COMPLETION_HEADER)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: completion %u is not a cudaq_rx_completion_t (zero the ring struct)",
                       fn, r->completion);
  if (r->completion == CUDAQ_RX_COMPLETION_HEADER) {
    if (!on_device_path(dispatcher))
      return cudaq__fail(CUDAQ_ERR_INVALID_ARG,
                         "%s: header completion is served by the GPU device-call kernels, not the host path", fn);
    if (!cudaq_header_completion_layout_ok(r->rx_data, r->tx_data, r->rx_stride_sz))
      return cudaq__fail(CUDAQ_ERR_INVALID_ARG,
                         "%s: header completion needs RX slots on %u-byte lines (rx_data %p, stride %zu) and "
                         "separate TX data",
                         fn, CUDAQ_HEADER_LINE, (void *)r->rx_data, r->rx_stride_sz);
  }
  cudaq_ringbuffer_t ring = *r;
  /* A NULL host view means the device view is host-accessible too. */
  if (!ring.rx_flags_host) ring.rx_flags_host = ring.rx_flags;
  if (!ring.tx_flags_host) ring.tx_flags_host = ring.tx_flags;
  if (!ring.rx_data_host) ring.rx_data_host = ring.rx_data;
  if (!ring.tx_data_host) ring.tx_data_host = ring.tx_data;
  dispatcher->ring = ring;
  dispatcher->have_ring = true;
  return cudaq__ok();
}

/* Device path: refuses a table in which two entries share a function_id
 * (cudaq__table_check_ids, the rule the host path's cudaq__host_table_build
 * applies too), so that every kernel serves one entry per id. The entries are
 * device-visible memory the host may not read directly: they are copied
 * here (CUDA builds; without CUDA the device path's table is host memory).
 * The copy runs on a private stream and does not wait for a kernel that is
 * still writing the table: write it, and synchronise, before wiring it. */
static cudaq_status_t check_device_table_ids(const cudaq_function_table_t *table, const char *fn) {
  const cudaq_function_entry_t *entries = table->entries;
#ifdef CUDAQ_HAVE_CUDA
  cudaq_function_entry_t *copy = malloc((size_t)table->count * sizeof *copy);
  if (!copy) return cudaq__fail(CUDAQ_ERR_INTERNAL, "%s: out of memory", fn);
  int e = cudaq__device_copy_to_host(copy, entries, (size_t)table->count * sizeof *copy);
  if (e != 0) {
    free(copy);
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: reading table->entries failed (CUDA error %d)", fn, e);
  }
  entries = copy;
#endif
  cudaq_status_t st = cudaq__table_check_ids(entries, table->count, fn);
#ifdef CUDAQ_HAVE_CUDA
  free(copy);
#endif
  return st;
}

cudaq_status_t cudaq_dispatcher_set_function_table(cudaq_dispatcher_t *dispatcher,
                                                   const cudaq_function_table_t *table) {
  static const char *fn = "cudaq_dispatcher_set_function_table";
  CHECK_ARG(dispatcher, fn, "dispatcher is NULL");
  CHECK_ARG(table, fn, "table is NULL");
  CHECK_STOPPED(dispatcher, fn);
  CHECK_ARG(table->entries, fn, "table->entries is NULL");
  CHECK_ARG(table->count > 0, fn, "table->count is 0");
  if (dispatcher->config.dispatch_path == CUDAQ_DISPATCH_PATH_HOST) {
    cudaq__host_entry_t *copy = calloc(table->count, sizeof *copy);
    if (!copy) return cudaq__fail(CUDAQ_ERR_INTERNAL, "%s: out of memory", fn);
    cudaq_status_t st = cudaq__host_table_build(table->entries, table->count, copy);
    if (st != CUDAQ_OK) {
      free(copy);
      return st;
    }
    free(dispatcher->host_table);
    dispatcher->host_table = copy;
    dispatcher->host_table_count = table->count;
  } else {
    cudaq_status_t st = check_visible(dispatcher, table->entries, fn, "table->entries");
    if (st == CUDAQ_OK) st = check_device_table_ids(table, fn);
    if (st != CUDAQ_OK) return st;
  }
  dispatcher->table = *table;
  dispatcher->have_table = true;
  return cudaq__ok();
}

cudaq_status_t cudaq_dispatcher_set_control(cudaq_dispatcher_t *dispatcher,
                                            volatile int *shutdown_flag, uint64_t *stats) {
  static const char *fn = "cudaq_dispatcher_set_control";
  CHECK_ARG(dispatcher, fn, "dispatcher is NULL");
  CHECK_ARG(shutdown_flag, fn, "shutdown_flag is NULL");
  CHECK_ARG(stats, fn, "stats is NULL");
  CHECK_STOPPED(dispatcher, fn);
  cudaq_status_t st = check_visible(dispatcher, (const void *)(uintptr_t)shutdown_flag, fn, "shutdown_flag");
  if (st == CUDAQ_OK) st = check_visible(dispatcher, stats, fn, "stats");
  if (st != CUDAQ_OK) return st;
  dispatcher->shutdown_flag = shutdown_flag;
  dispatcher->stats = stats;
  dispatcher->have_control = true;
  return cudaq__ok();
}

cudaq_status_t cudaq_dispatcher_set_launch_fn(cudaq_dispatcher_t *dispatcher,
                                              cudaq_dispatch_launch_fn_t launch_fn) {
  static const char *fn = "cudaq_dispatcher_set_launch_fn";
  CHECK_ARG(dispatcher, fn, "dispatcher is NULL");
  CHECK_ARG(launch_fn, fn, "launch_fn is NULL");
  CHECK_STOPPED(dispatcher, fn);
  dispatcher->launch_fn = launch_fn;
  dispatcher->have_launch = true;
  return cudaq__ok();
}

cudaq_status_t cudaq_dispatcher_set_unified_launch(cudaq_dispatcher_t *dispatcher,
                                                   cudaq_unified_launch_fn_t unified_launch_fn,
                                                   void *transport_ctx) {
  static const char *fn = "cudaq_dispatcher_set_unified_launch";
  CHECK_ARG(dispatcher, fn, "dispatcher is NULL");
  CHECK_ARG(unified_launch_fn, fn, "unified_launch_fn is NULL");
  CHECK_ARG(dispatcher->config.kernel_type == CUDAQ_KERNEL_UNIFIED, fn,
            "the dispatcher's kernel_type is not CUDAQ_KERNEL_UNIFIED");
  CHECK_STOPPED(dispatcher, fn);
  dispatcher->unified_launch_fn = unified_launch_fn;
  dispatcher->transport_ctx = transport_ctx;
  dispatcher->have_unified = true;
  return cudaq__ok();
}

cudaq_status_t cudaq_dispatcher_set_host_affinity(cudaq_dispatcher_t *dispatcher, int cpu_core) {
  static const char *fn = "cudaq_dispatcher_set_host_affinity";
  CHECK_ARG(dispatcher, fn, "dispatcher is NULL");
  if (!cudaq__cpus_valid(cpu_core, 1))
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: cpu_core %d is not a CPU of this machine (0..%d)",
                       fn, cpu_core, get_nprocs_conf() - 1);
  dispatcher->cpu_core = cpu_core;
  return cudaq__ok();
}

/* ---- start / stop ------------------------------------------------------ */

cudaq_status_t cudaq_dispatcher_start(cudaq_dispatcher_t *dispatcher) {
  static const char *fn = "cudaq_dispatcher_start";
  CHECK_ARG(dispatcher, fn, "dispatcher is NULL");
  cudaq_dispatcher_t *d = dispatcher;
  if (d->running) return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: already running", fn);
  CHECK_ARG(d->have_table, fn, "no function table (call cudaq_dispatcher_set_function_table)");
  CHECK_ARG(d->have_control, fn, "no control words (call cudaq_dispatcher_set_control)");
  if (d->config.dispatch_path == CUDAQ_DISPATCH_PATH_DEVICE) {
    if (d->config.kernel_type == CUDAQ_KERNEL_UNIFIED)
      CHECK_ARG(d->have_unified, fn, "unified kernel without cudaq_dispatcher_set_unified_launch");
    else {
      CHECK_ARG(d->have_ring, fn, "no ring buffer (call cudaq_dispatcher_set_ringbuffer)");
      CHECK_ARG(d->have_launch, fn, "no launch function (call cudaq_dispatcher_set_launch_fn)");
    }
#ifdef CUDAQ_HAVE_CUDA
    cudaq_status_t st = cudaq__device_start(d);
    if (st == CUDAQ_OK) d->running = true;
    return st;
#else
    return cudaq__fail(CUDAQ_ERR_UNSUPPORTED,
                       "%s: the device dispatch path needs a build with CUDA", fn);
#endif
  }
  CHECK_ARG(d->have_ring, fn, "no ring buffer (call cudaq_dispatcher_set_ringbuffer)");
  /* R4' re-arms the flag before the thread exists (thread creation orders
   * it before the thread's first read). */
  cudaq__store_release_int(d->shutdown_flag, 0);
  atomic_store_explicit(CUDAQ__A64(d->stats),
                        atomic_load_explicit(&d->counters.processed, memory_order_relaxed),
                        memory_order_relaxed);
  cudaq_status_t st = cudaq__host_dispatch_start(d);
  if (st == CUDAQ_OK) d->running = true;
  return st;
}

cudaq_status_t cudaq_dispatcher_stop(cudaq_dispatcher_t *dispatcher) {
  CHECK_ARG(dispatcher, "cudaq_dispatcher_stop", "dispatcher is NULL");
  cudaq_dispatcher_t *d = dispatcher;
  if (!d->running) return cudaq__ok();
#ifdef CUDAQ_HAVE_CUDA
  if (on_device_path(d)) {
    cudaq_status_t st = cudaq__device_stop(d);
    if (st == CUDAQ_OK) d->running = false; /* a kernel that did not exit stays "running" */
    return st;
  }
#endif
  /* R4 asks the dispatcher to exit; pairs with A4 in the dispatch loop. */
  cudaq__store_release_int(d->shutdown_flag, 1);
  cudaq_status_t st = cudaq__host_dispatch_join(d);
  d->running = false;
  return st;
}

#ifndef CUDAQ_HAVE_CUDA
cudaq_status_t cudaq_dispatch_set_shutdown_flag(volatile int *shutdown_flag, int value) {
  static const char *fn = "cudaq_dispatch_set_shutdown_flag";
  (void)value;
  CHECK_ARG(shutdown_flag, fn, "shutdown_flag is NULL");
  return cudaq__fail(CUDAQ_ERR_UNSUPPORTED, "%s: the device dispatch path needs a build with CUDA", fn);
}
#endif

/* ---- statistics -------------------------------------------------------- */

cudaq_status_t cudaq_dispatcher_get_processed(cudaq_dispatcher_t *dispatcher,
                                              uint64_t *out_packets) {
  static const char *fn = "cudaq_dispatcher_get_processed";
  CHECK_ARG(dispatcher, fn, "dispatcher is NULL");
  CHECK_ARG(out_packets, fn, "out_packets is NULL");
  CHECK_ARG(dispatcher->have_control, fn, "no stats buffer (call cudaq_dispatcher_set_control)");
#ifdef CUDAQ_HAVE_CUDA
  if (on_device_path(dispatcher)) return cudaq__device_read_u64(dispatcher->stats, out_packets);
#endif
  *out_packets = atomic_load_explicit(CUDAQ__A64(dispatcher->stats), memory_order_relaxed);
  return cudaq__ok();
}

cudaq_status_t cudaq_dispatcher_get_counters(cudaq_dispatcher_t *dispatcher,
                                             cudaq_dispatcher_counters_t *out) {
  static const char *fn = "cudaq_dispatcher_get_counters";
  CHECK_ARG(dispatcher, fn, "dispatcher is NULL");
  CHECK_ARG(out, fn, "out is NULL");
  if (on_device_path(dispatcher)) {
    cudaq__counter_reader_fn reader = atomic_load_explicit(&counter_reader, memory_order_acquire);
    CHECK_ARG(dispatcher->have_control, fn, "no stats buffer (call cudaq_dispatcher_set_control)");
    if (!reader)
      return cudaq__fail(CUDAQ_ERR_UNSUPPORTED,
                         "%s: the dispatch kernel library (cudaq_realtime_dispatch) is not linked", fn);
    if (reader(dispatcher->stats, out) != 0)
      return cudaq__fail(CUDAQ_ERR_INVALID_ARG,
                         "%s: no counters for this stats buffer (was the kernel launched by a "
                         "cudaq launch helper?)", fn);
    return cudaq__ok();
  }
  const cudaq__counters_t *c = &dispatcher->counters;
#define RD(f) out->f = atomic_load_explicit(&c->f, memory_order_relaxed)
  RD(processed);
  RD(dropped_bad_magic);
  RD(dropped_unknown_function);
  RD(err_payload_too_large);
  RD(err_arg_len_mismatch);
  RD(err_result_too_large);
  RD(err_unsupported_mode);
  RD(handler_errors);
#undef RD
  return cudaq__ok();
}
