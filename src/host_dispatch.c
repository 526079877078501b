/*
 * host_dispatch.c - the host-thread dispatcher (CUDAQ_DISPATCH_PATH_HOST).
 *
 * One thread per dispatcher spins on the RX flag of the current slot and
 * serves the ring in slot order. No allocation, lock or syscall on the hot
 * path: the loop reads flags, calls the handler and stores flags.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/sysinfo.h>

#include "atomics.h"
#include "internal.h"

/* The dispatcher thread is the counters' only writer. */
static inline void bump(_Atomic uint64_t *c) { cudaq__bump_single_writer(c); }

int cudaq__host_handle_slot(cudaq_dispatcher_t *d, uint32_t slot) {
  const cudaq_ringbuffer_t *rb = &d->ring;
  uint8_t *rx = rb->rx_data_host + (size_t)slot * rb->rx_stride_sz;
  uint8_t *tx = rb->tx_data_host + (size_t)slot * rb->tx_stride_sz;
  const uint32_t max_payload = (uint32_t)(rb->rx_stride_sz - CUDAQ_RPC_HEADER_SIZE);
  int32_t status = 0;
  uint32_t fid = 0;
  cudaq__slot_outcome_t outcome =
      cudaq__host_process_slot_ex(d->host_table, d->host_table_count, rx, max_payload, tx,
                                  rb->tx_stride_sz, &status, d->pool != NULL, &fid);
  if (outcome == CUDAQ__SLOT_GRAPH_LAUNCH) {
    int r = cudaq__host_pool_slot(d, slot, fid);
    if (r != 2) return r; /* handed to a graph worker (0), or all of them busy (1) */
    /* No worker serves this function: answered UNSUPPORTED_MODE (an error
     * path, so the second lookup costs the served requests nothing). */
    outcome = cudaq__host_process_slot_ex(d->host_table, d->host_table_count, rx, max_payload,
                                          tx, rb->tx_stride_sz, &status, 0, &fid);
  }

  if (outcome == CUDAQ__SLOT_ANSWERED) {
    /* R2 publishes the response bytes written above; pairs with A2 in
     * cudaq_host_ringbuffer_poll_tx_flag (the consumer). The value is the TX
     * slot's device-visible address (the spec's convention). It is stored
     * before the RX flag is cleared so the producer, which waits for both
     * flags to be 0, cannot reuse the slot before the response is read. */
    cudaq__store_release_u64(&rb->tx_flags_host[slot],
                             (uint64_t)(uintptr_t)(rb->tx_data + (size_t)slot * rb->tx_stride_sz));
  }
  /* R3 hands the RX slot back (our reads of it are done); pairs with A3 in
   * cudaq_host_ringbuffer_slot_available (the producer). */
  cudaq__store_release_u64(&rb->rx_flags_host[slot], 0);

  cudaq__counters_t *c = &d->counters;
  switch (outcome) {
  case CUDAQ__SLOT_BAD_MAGIC: bump(&c->dropped_bad_magic); return 0;
  case CUDAQ__SLOT_UNKNOWN_FUNCTION: bump(&c->dropped_unknown_function); return 0;
  case CUDAQ__SLOT_ANSWERED: break;
  case CUDAQ__SLOT_GRAPH_LAUNCH: break; /* not with graph_ok 0 */
  }
  switch (status) {
  case 0: break;
  case CUDAQ_RPC_ERR_PAYLOAD_TOO_LARGE: bump(&c->err_payload_too_large); break;
  case CUDAQ_RPC_ERR_ARG_LEN_MISMATCH: bump(&c->err_arg_len_mismatch); break;
  case CUDAQ_RPC_ERR_RESULT_TOO_LARGE: bump(&c->err_result_too_large); break;
  case CUDAQ_RPC_ERR_UNSUPPORTED_MODE: bump(&c->err_unsupported_mode); break;
  default: bump(&c->handler_errors); break;
  }
  uint64_t n = atomic_load_explicit(&c->processed, memory_order_relaxed) + 1;
  atomic_store_explicit(&c->processed, n, memory_order_relaxed);
  /* stats[0] mirrors `processed` for the published get_processed(); read
   * with a relaxed load (it publishes no data). */
  atomic_store_explicit(CUDAQ__A64(d->stats), n, memory_order_relaxed);
  return 0;
}

/* Idle spins between scans of the whole ring (about 10-30 us of pause
 * instructions): the scan finds requests signalled out of ring order. */
#define IDLE_SCAN_INTERVAL 256u

/* The first set slot in ring order from `from`, or -1. One pass is not
 * enough: a producer signals slots in ring order (R1 of k before R1 of
 * k+1), and the pass can read slot k just before its R1 and slot k+1 just
 * after. Returning k+1 then serves k+1, k+2, ... while k waits for the next
 * idle scan, out of ring order; a UDP bridge filling the ring in order then
 * found slot k held while the client, answered for the newer ones, sent more:
 * ring-full drops with half the slots in flight (seen in TSan runs pinned
 * to one core). The A1 load that saw slot `found` set makes every signal
 * that preceded its R1 visible, so a second look from `from` up to `found`
 * finds k. */
int64_t cudaq__scan_rx_flags(volatile uint64_t *rx_flags, uint32_t from, uint32_t n) {
  int64_t found = -1;
  for (uint32_t i = 0, s = from; i < n; ++i, s = s + 1 == n ? 0 : s + 1)
    if (cudaq__load_acquire_u64(&rx_flags[s]) != 0) { /* A1 (see below) */
      found = s;
      break;
    }
  if (found < 0 || (uint32_t)found == from) return found;
  for (uint32_t s = from; s != (uint32_t)found; s = s + 1 == n ? 0 : s + 1)
    if (cudaq__load_acquire_u64(&rx_flags[s]) != 0) return s; /* A1 */
  return found;
}

static int64_t scan_ring(const cudaq_ringbuffer_t *rb, uint32_t from, uint32_t n) {
  return cudaq__scan_rx_flags(rb->rx_flags_host, from, n);
}

/* The loop serves slots in ring order: the producer fills slot k, k+1, ...
 * and the dispatcher polls only the current slot while requests flow. When
 * the current slot stays empty it scans the ring every IDLE_SCAN_INTERVAL
 * spins and jumps to the first set slot, so a producer that skips slots (or
 * reuses them out of order) is served rather than stalled. The scan runs
 * only while idle, so it costs the busy path nothing. */
static void *host_dispatch_main(void *arg) {
  cudaq_dispatcher_t *d = arg;
  const cudaq_ringbuffer_t *rb = &d->ring;
  const uint32_t n = d->config.num_slots;
  uint32_t slot = d->next_slot, idle = 0;

  for (;;) {
    /* A4 pairs with R4 in cudaq_dispatcher_stop (or any caller raising the
     * flag): nothing is published through it, acquire keeps it simple. */
    if (cudaq__load_acquire_int(d->shutdown_flag)) break;
    /* A1 pairs with R1 in cudaq_host_ringbuffer_signal_slot: once the flag
     * is seen nonzero, the request bytes the producer wrote are visible. */
    if (cudaq__load_acquire_u64(&rb->rx_flags_host[slot]) == 0) {
      if (++idle == IDLE_SCAN_INTERVAL) {
        idle = 0;
        int64_t s = scan_ring(rb, slot, n);
        if (s >= 0) slot = (uint32_t)s;
      }
      cudaq__cpu_relax();
      continue;
    }
    idle = 0;
    if (cudaq__host_handle_slot(d, slot) == 1) { /* every graph worker busy: stay (no loss) */
      cudaq__cpu_relax();
      continue;
    }
    slot = slot + 1 == n ? 0 : slot + 1;
  }
  /* Drain: answer every request already signalled, in ring order from the
   * current slot, so stop() loses nothing that was signalled before it. A
   * producer that keeps signalling could keep us here, so the drain is
   * bounded to two laps of the ring. */
  for (uint32_t i = 0; i < 2 * n; ++i) {
    int64_t s = scan_ring(rb, slot, n);
    if (s < 0) break;
    /* A GRAPH_LAUNCH request waits (bounded) for a graph worker. */
    int r = 1;
    for (uint32_t spins = 0; r == 1 && spins < (1u << 24); ++spins) {
      r = cudaq__host_handle_slot(d, (uint32_t)s);
      if (r == 1) cudaq__cpu_relax();
    }
    if (r == 1) break; /* left set: a restart continues with it */
    slot = (uint32_t)s + 1 == n ? 0 : (uint32_t)s + 1;
  }
  d->next_slot = slot; /* a restart continues here (read after join) */
  return NULL;
}

int cudaq__cpus_valid(int first, int count) {
  const int ncpu = get_nprocs_conf();
  return first == -1 ||
         (first >= 0 && count >= 1 && first + count - 1 < ncpu && first + count - 1 < CPU_SETSIZE);
}

int cudaq__spawn_pinned(pthread_t *t, void *(*main_fn)(void *), void *arg, int core,
                        const char *name) {
  pthread_attr_t attr;
  cpu_set_t set;
  if (pthread_attr_init(&attr) != 0) return EAGAIN;
  /* Set the affinity explicitly: a thread inherits its creator's, and a
   * caller pinned to one core would otherwise share it with a spinning
   * thread (DESIGN.md, the reference design's 8 ms per request). */
  CPU_ZERO(&set);
  if (core >= 0) {
    CPU_SET(core, &set);
  } else {
    int ncpu = get_nprocs_conf();
    for (int c = 0; c < ncpu && c < CPU_SETSIZE; ++c) CPU_SET(c, &set);
  }
  pthread_attr_setaffinity_np(&attr, sizeof set, &set);
  int rc = pthread_create(t, &attr, main_fn, arg);
  if (rc == EINVAL && core < 0) {
    /* The "all CPUs" mask can be refused inside a restricted cpuset; then
     * inheriting is the only choice left. */
    pthread_attr_destroy(&attr);
    pthread_attr_init(&attr);
    rc = pthread_create(t, &attr, main_fn, arg);
  }
  pthread_attr_destroy(&attr);
  if (rc == 0) pthread_setname_np(*t, name);
  return rc;
}

cudaq_status_t cudaq__host_dispatch_start(cudaq_dispatcher_t *d) {
  int rc = cudaq__spawn_pinned(&d->thread, host_dispatch_main, d, d->cpu_core, "cudaq-dispatch");
  if (rc == EINVAL)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG,
                       "cudaq_dispatcher_start: cannot run the dispatcher thread on CPU %d",
                       d->cpu_core);
  if (rc != 0)
    return cudaq__fail(CUDAQ_ERR_INTERNAL, "cudaq_dispatcher_start: pthread_create: %s",
                       strerror(rc));
  return cudaq__ok();
}

cudaq_status_t cudaq__host_dispatch_join(cudaq_dispatcher_t *d) {
  int rc = pthread_join(d->thread, NULL);
  if (rc != 0)
    return cudaq__fail(CUDAQ_ERR_INTERNAL, "cudaq_dispatcher_stop: pthread_join: %s",
                       strerror(rc));
  return cudaq__ok();
}
