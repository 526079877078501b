/*
 * injector.c - the pipeline's software producer (realtime-pipeline-api.txt,
 * RingBufferInjector): writes requests into the ring in slot order from one
 * thread at a time, with backpressure when the next slot is still in use.
 */
#include <stdlib.h>

#include "pipeline_state.h"

cudaq_status_t cudaq_pipeline_injector_create(cudaq_pipeline_t *p, cudaq_pipeline_injector_t **out) {
  static const char *fn = "cudaq_pipeline_injector_create";
  CHECK_ARG(p, fn, "pipeline is NULL");
  CHECK_ARG(out, fn, "out is NULL");
  if (p->cfg.external_ringbuffer)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG,
                       "%s: the pipeline uses an external ring (its producer is the FPGA/emulator)", fn);
  int expect = 0;
  if (!atomic_compare_exchange_strong(&p->have_injector, &expect, 1))
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: the pipeline has an injector already", fn);
  cudaq_pipeline_injector_t *inj = calloc(1, sizeof *inj);
  if (!inj) {
    atomic_store(&p->have_injector, 0);
    return cudaq__fail(CUDAQ_ERR_INTERNAL, "%s: out of memory", fn);
  }
  inj->p = p;
  *out = inj;
  return cudaq__ok();
}

cudaq_status_t cudaq_pipeline_injector_destroy(cudaq_pipeline_injector_t *inj) {
  CHECK_ARG(inj, "cudaq_pipeline_injector_destroy", "injector is NULL");
  atomic_store(&inj->p->have_injector, 0);
  free(inj);
  return cudaq__ok();
}

/* A submit that found its slot busy (once per submit). */
static void count_stall(cudaq_pipeline_injector_t *inj) {
  uint64_t n = atomic_load_explicit(&inj->stalls, memory_order_relaxed) + 1;
  atomic_store_explicit(&inj->stalls, n, memory_order_relaxed);
  bump(&inj->p->stalls);
}

/* 1 accepted, 0 slot busy, -1 closed. */
static int try_put(cudaq_pipeline_injector_t *inj, uint32_t function_id, const void *payload,
                   size_t size, uint64_t request_id) {
  cudaq_pipeline_t *p = inj->p;
  const uint32_t s = inj->next;
  /* A12: announce, then check that the pipeline accepts (pairs with R12 in
   * stop; seq_cst on both sides so that stop either sees us in progress or
   * we see it closed). */
  atomic_fetch_add_explicit(&p->producers_in, 1, memory_order_seq_cst);
  int r;
  if (!atomic_load_explicit(&p->accepting, memory_order_seq_cst)) {
    r = -1;
  } else if (!cudaq_host_ringbuffer_slot_available(&p->ring, s)) { /* A3: both flags 0 */
    r = 0;
  } else {
    cudaq_host_ringbuffer_write_rpc_request(&p->ring, s, function_id, payload, (uint32_t)size,
                                            (uint32_t)request_id, 0);
    /* Ordered before the signal's release (R1) like the request bytes. */
    atomic_store_explicit(&p->slot_request[s], request_id, memory_order_relaxed);
    bump(&p->submitted); /* one producer per pipeline (one injector) */
    cudaq_host_ringbuffer_signal_slot(&p->ring, s); /* R1 */
    inj->next = s + 1 == p->nslots ? 0 : s + 1;
    r = 1;
  }
  atomic_fetch_sub_explicit(&p->producers_in, 1, memory_order_release);
  return r;
}

static cudaq_status_t check_submit(const cudaq_pipeline_injector_t *inj, const void *payload,
                                   size_t size, const char *fn) {
  CHECK_ARG(inj, fn, "injector is NULL");
  CHECK_ARG(payload || size == 0, fn, "payload is NULL with a nonzero size");
  if (size > inj->p->ring.rx_stride_sz - CUDAQ_RPC_HEADER_SIZE || size > inj->p->cfg.slot_size - CUDAQ_RPC_HEADER_SIZE)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: payload of %zu bytes exceeds slot_size - 24 = %zu",
                       fn, size, inj->p->cfg.slot_size - CUDAQ_RPC_HEADER_SIZE);
  return CUDAQ_OK;
}

cudaq_status_t cudaq_pipeline_injector_try_submit(cudaq_pipeline_injector_t *inj,
                                                  uint32_t function_id, const void *payload,
                                                  size_t payload_size, uint64_t request_id,
                                                  int *out_accepted) {
  static const char *fn = "cudaq_pipeline_injector_try_submit";
  CHECK_ARG(out_accepted, fn, "out_accepted is NULL");
  cudaq_status_t st = check_submit(inj, payload, payload_size, fn);
  if (st != CUDAQ_OK) return st;
  int r = try_put(inj, function_id, payload, payload_size, request_id);
  if (r < 0) return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: the pipeline is not running", fn);
  if (r == 0) count_stall(inj);
  *out_accepted = r;
  return cudaq__ok();
}

cudaq_status_t cudaq_pipeline_injector_submit(cudaq_pipeline_injector_t *inj, uint32_t function_id,
                                              const void *payload, size_t payload_size,
                                              uint64_t request_id) {
  static const char *fn = "cudaq_pipeline_injector_submit";
  cudaq_status_t st = check_submit(inj, payload, payload_size, fn);
  if (st != CUDAQ_OK) return st;
  int counted = 0;
  for (;;) {
    int r = try_put(inj, function_id, payload, payload_size, request_id);
    if (r > 0) return cudaq__ok();
    if (r < 0) return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: the pipeline is not running", fn);
    if (!counted) {
      counted = 1;
      count_stall(inj);
    }
    idle_wait(inj->p);
  }
}

cudaq_status_t cudaq_pipeline_injector_backpressure_stalls(const cudaq_pipeline_injector_t *inj,
                                                           uint64_t *out) {
  CHECK_ARG(inj, "cudaq_pipeline_injector_backpressure_stalls", "injector is NULL");
  CHECK_ARG(out, "cudaq_pipeline_injector_backpressure_stalls", "out is NULL");
  *out = atomic_load_explicit(&inj->stalls, memory_order_relaxed);
  return cudaq__ok();
}
