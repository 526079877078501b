/*
 * pool.c - worker allocation, launch and release of the dynamic worker pool
 * (host-dispatcher-worker-pool.md sections 2, 4.2, 9, 13). Hot path: no
 * allocation, no lock, no syscall, no cudaStreamQuery.
 */
#include "pool.h"

#include "../atomics.h"

void cudaq__pool_init(cudaq__pool_t *p) {
  p->all_mask = p->count >= 64 ? ~0ull : (1ull << p->count) - 1;
  p->nfn = 0;
  for (uint32_t w = 0; w < p->count; ++w) {
    uint32_t id = p->workers[w].function_id, k = 0;
    while (k < p->nfn && p->fn_id[k] != id) ++k;
    if (k == p->nfn) {
      p->fn_id[k] = id;
      p->fn_mask[k] = 0;
      p->nfn++;
    }
    p->fn_mask[k] |= 1ull << w;
  }
  atomic_store_explicit(&p->idle_mask, p->all_mask, memory_order_relaxed);
}

static uint64_t mask_for(const cudaq__pool_t *p, uint32_t function_id) {
  if (p->cpu_only) return p->all_mask; /* CPU workers serve every function */
  for (uint32_t k = 0; k < p->nfn; ++k)
    if (p->fn_id[k] == function_id) return p->fn_mask[k];
  return 0;
}

/* Enqueues worker w's graph (its gate graph when pre-launching) and, in
 * GPU-only mode, what completes it. slot_dev: the request's slot (NULL
 * when arming: no post-launch callback is allowed then). Returns 0 or the
 * CUDA error. Pre-launching, only the launch itself can fail (the gate
 * graph stores a GPU-only completion word in its own last node), so an
 * error there means nothing was enqueued. */
static int enqueue_job(cudaq__pool_t *p, uint32_t w, void *slot_dev) {
  const cudaq_host_dispatch_worker_t *wk = &p->workers[w];
  cudaGraphExec_t g = p->prelaunch ? p->gate_exec[w] : wk->graph_exec;
  int err = p->ops.launch_graph(p->ops.user, g, wk->stream);
  if (err != 0) return err;
  if (wk->post_launch_fn) wk->post_launch_fn(wk->post_launch_data, slot_dev, wk->stream);
  if (p->prelaunch) return 0; /* GPU-only: the gate graph's last node stores the word (gate.cu) */
  if (p->host_completion && p->done_dev)
    /* G13: the GPU, once the graph has finished, fences (system scope)
     * and stores 1 into w's completion word; pairs with A13 in the
     * pipeline's consumer (poll_gpu_done), which then completes the
     * slot. No host function on the hot path. */
    return p->ops.enqueue_word_store(p->ops.user, wk->stream, &p->done_dev[w], 1);
  if (p->host_completion)
    return p->ops.enqueue_host_fn(p->ops.user, wk->stream, p->completion_fn, p->completion_arg[w]);
  return 0;
}

/* Opens worker w's gate for ring slot `slot` and a request of `bytes`
 * (header + payload; 0: not given): its gate kernel waits for ticket[w] in
 * the word's high half (cudaq_pipeline_gate_word). R14, release: the slot's request bytes
 * (visible to this thread through A1) and everything stored before are in
 * host memory before the word changes; the gate kernel reads the word over
 * PCIe with an acquire (A14, cudaq__gate_pass in pipeline.h) and only then the slot, so it sees
 * them (x86 stores become visible in program order; device reads of pinned
 * memory are coherent). */
static void open_gate(cudaq__pool_t *p, uint32_t w, uint32_t slot, uint64_t bytes) {
  atomic_store_explicit(&p->gate_host[w], cudaq_pipeline_gate_word(p->ticket[w], slot, bytes),
                        memory_order_release);
}

int cudaq__pool_arm(cudaq__pool_t *p, uint32_t w) {
  /* Reserve one of the waiting places (finishers race for them): `prelaunch`,
   * or `prelaunch_max` while requests have lately found none waiting. */
  const uint32_t limit = p->prelaunch_max > p->prelaunch &&
                                 atomic_load_explicit(&p->boost, memory_order_relaxed) > 0
                             ? p->prelaunch_max
                             : p->prelaunch;
  uint32_t n = atomic_load_explicit(&p->narmed, memory_order_relaxed);
  do {
    if (n >= limit) return 0;
  } while (!atomic_compare_exchange_weak_explicit(&p->narmed, &n, n + 1, memory_order_relaxed,
                                                  memory_order_relaxed));
  const int boosted = n >= p->prelaunch; /* a place past `prelaunch` */
  int err = enqueue_job(p, w, NULL); /* nothing enqueued if it fails */
  if (err != 0) {
    atomic_fetch_sub_explicit(&p->narmed, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->prelaunch_failures, 1, memory_order_relaxed);
    return err;
  }
  p->ticket[w]++; /* the gate graph's run to come */
  /* Relaxed: published to the dispatcher by the owner's R6 that follows
   * (or the dispatcher thread's creation). */
  atomic_fetch_or_explicit(&p->armed_mask, 1ull << w, memory_order_relaxed);
  if (boosted) {
    atomic_fetch_sub_explicit(&p->boost, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->prelaunch_boosted, 1, memory_order_relaxed);
  }
  return 0;
}

void cudaq__pool_cancel_armed(cudaq__pool_t *p) {
  uint64_t m = atomic_exchange_explicit(&p->armed_mask, 0, memory_order_relaxed);
  while (m) {
    const uint32_t w = (uint32_t)__builtin_ctzll(m);
    m &= m - 1;
    open_gate(p, w, CUDAQ_PIPELINE_GATE_NO_SLOT, 0);
    atomic_fetch_sub_explicit(&p->narmed, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->prelaunch_cancelled, 1, memory_order_relaxed);
  }
}

cudaq__pool_result_t cudaq__pool_dispatch(cudaq__pool_t *p, uint32_t function_id, uint32_t slot,
                                          uint64_t request_bytes, void *slot_dev,
                                          volatile uint64_t *tx_flag, int *out_error,
                                          int *out_worker) {
  const uint64_t mask = mask_for(p, function_id);
  if (!mask) return CUDAQ__POOL_NO_WORKER;
  /* A6 pairs with R6 in cudaq__pool_release: once w's bit is seen set, the
   * previous job's finisher is done with tags[w], mailbox[w] and w's
   * buffers, so this thread may reuse them; w's bit in armed_mask and
   * ticket[w], set by a finisher's re-arm, are visible too. */
  const uint64_t avail = atomic_load_explicit(&p->idle_mask, memory_order_acquire) & mask;
  if (!avail) return CUDAQ__POOL_BUSY; /* spec 13 "no data loss": caller spins on this slot */
  /* Bit-scan allocation (spec 2), a worker whose graph waits at its gate
   * first (armed_mask: set before the R6 that A6 saw). */
  const uint64_t ready = p->prelaunch ? atomic_load_explicit(&p->armed_mask, memory_order_relaxed) & avail : 0;
  const uint32_t w = (uint32_t)__builtin_ctzll(ready ? ready : avail);
  const uint64_t bit = 1ull << w;
  /* Only this thread clears bits, so w's bit is still set; relaxed: the
   * acquire above already ordered the reuse, and nothing is published. */
  atomic_fetch_and_explicit(&p->idle_mask, ~bit, memory_order_relaxed);
  p->tags[w] = slot; /* origin-slot tag, owned by this job until R6 */
  /* Published to the GPU by the launch below. (Pre-launch: the gate word
   * names the slot and the mailbox the graph reads is in device memory.) */
  if (p->mailbox && !p->prelaunch) p->mailbox[w] = slot_dev;

  /* R7 marks the slot in flight before anything can complete it; pairs
   * with A2 in the consumer (which ignores the marker) and A3 in the
   * producer (which will not reuse the slot while TX != 0). Stored before
   * the launch: a job may complete (and store its response into this very
   * flag) before the launch call returns. */
  cudaq__store_release_u64(tx_flag, CUDAQ_TX_FLAG_IN_FLIGHT);

  int err = 0;
  if (p->cpu_only) {
    /* R8 hands the slot to CPU worker w (tags[w] above); pairs with A8,
     * the worker's CAS 1 -> 2. */
    atomic_store_explicit(&p->ready[w], 1, memory_order_release);
  } else if (ready & bit) {
    /* w's gate graph waits: opening its gate (R14, after R7 above) is the
     * whole launch. No CUDA call on this path. */
    atomic_fetch_and_explicit(&p->armed_mask, ~bit, memory_order_relaxed);
    atomic_fetch_sub_explicit(&p->narmed, 1, memory_order_relaxed);
    /* Counted before R14, so that whoever sees the answer sees the count. */
    cudaq__bump_single_writer(&p->prelaunched); /* the dispatcher is its only writer */
    open_gate(p, w, slot, request_bytes);
  } else if (p->prelaunch) {
    /* Not armed (none waited, or a failed re-arm): the gate graph is
     * launched now, its gate opened first (R14) for the run it is about to
     * make; and the next re-arms may fill up to prelaunch_max. */
    if (p->prelaunch_max > p->prelaunch)
      atomic_store_explicit(&p->boost, CUDAQ_PIPELINE_PRELAUNCH_BOOST, memory_order_relaxed);
    const uint64_t before = atomic_load_explicit(&p->gate_host[w], memory_order_relaxed);
    p->ticket[w]++;
    open_gate(p, w, slot, request_bytes);
    err = enqueue_job(p, w, slot_dev);
    if (err != 0) { /* nothing enqueued, no run will consume the ticket: take it back */
      p->ticket[w]--;
      atomic_store_explicit(&p->gate_host[w], before, memory_order_relaxed);
    }
  } else {
    const cudaq_host_dispatch_worker_t *wk = &p->workers[w];
    if (wk->pre_launch_fn) wk->pre_launch_fn(wk->pre_launch_data, slot_dev, wk->stream);
    err = enqueue_job(p, w, slot_dev);
  }
  if (err != 0) {
    /* R9 publishes the error marker (spec 9); pairs with A2 in the
     * consumer. The worker goes straight back to the pool (R6). */
    cudaq__store_release_u64(tx_flag, CUDAQ_TX_FLAG_ERROR(err));
    atomic_fetch_or_explicit(&p->idle_mask, bit, memory_order_release);
    if (out_error) *out_error = err;
    return CUDAQ__POOL_FAILED;
  }
  if (out_worker) *out_worker = (int)w;
  return CUDAQ__POOL_LAUNCHED;
}

int cudaq__pool_release(cudaq__pool_t *p, uint32_t w) {
  /* R6 returns worker w: everything its job did with tags[w], mailbox[w]
   * and its buffers happens before the dispatcher's next use (A6), and
   * before a re-arm's check that no job is held (A6' in host_workers.c). */
  uint64_t old = atomic_fetch_or_explicit(&p->idle_mask, 1ull << w, memory_order_release);
  return (old >> w) & 1 ? -1 : 0;
}
