/*
 * pipeline_emu.h - an emulated GPU stage for the pipeline tests (no GPU
 * needed): a fake graph launch that completes later on another thread.
 *
 * Each worker's "graph" is an emu_worker_t. The fake launch (or, in GPU-only
 * mode, the fake cudaLaunchHostFunc that follows it) posts the job to the
 * emulator thread; after the job's delay the emulator "runs the graph":
 * copies the request payload (read through the worker's mailbox, as a
 * pre-launch DMA would) into the worker's output buffer, then either stores
 * 1 into the worker's ready flag (what the graph's signal kernel does), or
 * in GPU-only mode runs what the pipeline enqueued after the launch: the
 * host function, or the completion word's store (as cuStreamWriteValue32
 * does; offered only with EMU_GPU_ONLY_WORD).
 *
 * Pre-launch (gpu_prelaunch): the gate op (cuStreamWaitValue32) marks the
 * worker gated; a job posted behind it waits until the gate word reaches
 * its value, and only then reads the mailbox (its delay starts there).
 * emu_t.gate_fail_every = K makes every K-th gate op fail.
 */
#ifndef CUDAQ_TEST_PIPELINE_EMU_H
#define CUDAQ_TEST_PIPELINE_EMU_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "cudaq/realtime/pipeline.h"
#include "pipeline/pipeline_internal.h"
#include "test_util.h"

#define EMU_MAX 64
#define EMU_OUT 16384

typedef struct emu emu_t;

enum { EMU_GPU_CPU = 0, EMU_GPU_ONLY_HOST_FN = 1, EMU_GPU_ONLY_WORD = 2 };

typedef struct {
  emu_t *emu;
  int id;
  _Atomic int *ready;  /* the pipeline's ready flag (ready_flag_dev) */
  void **mailbox;      /* the pipeline's mailbox (mailbox_dev) */
  _Atomic int pending; /* 1: a launched job waits for the emulator */
  uint64_t due_ns;
  cudaq__host_fn_t host_fn; /* GPU-only completion (host function) */
  void *host_arg;
  _Atomic uint32_t *word; /* GPU-only completion (stream write of `value`) */
  uint32_t value;
  _Atomic uint32_t *gate; /* pre-launch: the job waits until *gate reaches gate_value */
  uint32_t gate_value;
  int gated;
  uint8_t out[EMU_OUT]; /* the "GPU output" (gpu_output_host) */
  size_t out_len;
} emu_worker_t;

/* Returns the delay in ns of the job in `slot` (request header + payload),
 * or -1 to make the launch fail. */
typedef int64_t (*emu_delay_fn)(const uint8_t *slot);

struct emu {
  emu_worker_t w[EMU_MAX];
  int n;
  int gpu_only; /* an EMU_* mode; GPU-only: the completion enqueue, not the launch, posts the job */
  emu_delay_fn delay;
  _Atomic int stop;
  _Atomic int release; /* 1: jobs still waiting for their delay complete now */
  _Atomic uint64_t launches;
  _Atomic uint64_t gates, gates_opened; /* gate ops accepted; gated jobs released */
  int gate_fail_every;
  pthread_t thread;
  uint32_t function_id;
};

static int emu_launch(void *user, cudaGraphExec_t g, cudaStream_t s) {
  (void)user, (void)s;
  emu_worker_t *w = (emu_worker_t *)(void *)g;
  if (!w->gated) { /* on arrival (a pre-launched job reads its slot when its gate opens) */
    const uint8_t *slot = (const uint8_t *)*w->mailbox; /* written by the dispatcher */
    int64_t d = w->emu->delay ? w->emu->delay(slot) : 0;
    if (d < 0) return 700; /* cudaErrorIllegalAddress, say */
    w->due_ns = test_now_ns() + (uint64_t)d;
  }
  atomic_fetch_add_explicit(&w->emu->launches, 1, memory_order_relaxed);
  /* "pre-launch DMA": the payload is copied when the graph runs, below. */
  if (!w->emu->gpu_only) atomic_store_explicit(&w->pending, 1, memory_order_release);
  return 0;
}

static int emu_enqueue(void *user, cudaStream_t s, cudaq__host_fn_t fn, void *arg) {
  (void)user;
  emu_worker_t *w = (emu_worker_t *)(void *)s;
  w->host_fn = fn;
  w->host_arg = arg;
  w->word = NULL;
  atomic_store_explicit(&w->pending, 1, memory_order_release); /* pairs with the emulator's acquire */
  return 0;
}

static int emu_word_store(void *user, cudaStream_t s, void *word, uint32_t value) {
  (void)user;
  emu_worker_t *w = (emu_worker_t *)(void *)s;
  w->word = (_Atomic uint32_t *)word;
  w->value = value;
  atomic_store_explicit(&w->pending, 1, memory_order_release); /* pairs with the emulator's acquire */
  return 0;
}

static int emu_gate(void *user, cudaStream_t s, void *word, uint32_t value) {
  (void)user;
  emu_worker_t *w = (emu_worker_t *)(void *)s;
  emu_t *e = w->emu;
  uint64_t n = atomic_fetch_add_explicit(&e->gates, 1, memory_order_relaxed) + 1;
  if (e->gate_fail_every && n % (uint64_t)e->gate_fail_every == 0) {
    atomic_fetch_sub_explicit(&e->gates, 1, memory_order_relaxed);
    return 2; /* cudaErrorMemoryAllocation, say */
  }
  w->gate = (_Atomic uint32_t *)word;
  w->gate_value = value;
  w->gated = 1; /* published to the emulator by the pending store of the job behind it */
  return 0;
}

static int emu_sync(void *user, cudaStream_t s) {
  (void)user;
  emu_worker_t *w = (emu_worker_t *)(void *)s;
  while (atomic_load_explicit(&w->pending, memory_order_acquire)) test_spin();
  return 0;
}

static void *emu_main(void *arg) {
  emu_t *e = arg;
  while (!atomic_load_explicit(&e->stop, memory_order_acquire)) {
    int any = 0;
    for (int i = 0; i < e->n; ++i) {
      emu_worker_t *w = &e->w[i];
      if (!atomic_load_explicit(&w->pending, memory_order_acquire)) continue;
      any = 1;
      if (w->gated) {
        /* The stream's wait: acquire pairs with the pipeline's R14. */
        if ((int32_t)(atomic_load_explicit(w->gate, memory_order_acquire) - w->gate_value) < 0) continue;
        w->gated = 0;
        atomic_fetch_add_explicit(&e->gates_opened, 1, memory_order_relaxed);
        int64_t d = e->delay ? e->delay((const uint8_t *)*w->mailbox) : 0;
        w->due_ns = test_now_ns() + (uint64_t)(d < 0 ? 0 : d);
      }
      if (test_now_ns() < w->due_ns && !atomic_load_explicit(&e->release, memory_order_relaxed)) continue;
      const uint8_t *slot = (const uint8_t *)*w->mailbox;
      cudaq_rpc_header_t h;
      memcpy(&h, slot, sizeof h);
      w->out_len = h.arg_len < EMU_OUT ? h.arg_len : EMU_OUT;
      memcpy(w->out, slot + 24, w->out_len); /* passthrough "kernel" */
      atomic_store_explicit(&w->pending, 0, memory_order_relaxed);
      if (e->gpu_only && w->word) /* the stream write: fence, then the word */
        atomic_store_explicit(w->word, w->value, memory_order_release);
      else if (e->gpu_only)
        w->host_fn(w->host_arg);
      else /* the signal kernel: ready = 1 (system-scope release) */
        atomic_store_explicit(w->ready, 1, memory_order_release);
    }
    if (!any) test_spin();
  }
  return NULL;
}

/* The GPU stage factory for an emu_t (user). */
static int emu_factory(void *user, int worker_id, cudaq_gpu_worker_resources_t *r) {
  emu_t *e = user;
  emu_worker_t *w = &e->w[worker_id];
  w->emu = e;
  w->id = worker_id;
  w->ready = (_Atomic int *)(void *)r->ready_flag_dev;
  w->mailbox = r->mailbox_dev;
  r->graph_exec = (cudaGraphExec_t)(void *)w;
  r->stream = (cudaStream_t)(void *)w;
  r->function_id = e->function_id;
  r->gpu_output_host = w->out;
  r->gpu_output_size = EMU_OUT; /* the CPU stage uses the request length */
  r->user_context = w;
  if (worker_id + 1 > e->n) e->n = worker_id + 1;
  return 0;
}

/* Without the word store (GPU-only mode falls back to the host function),
 * and with it. */
static const cudaq__launch_ops_t emu_ops = {emu_launch, emu_enqueue, emu_sync, NULL, NULL, emu_gate};
static const cudaq__launch_ops_t emu_ops_word = {emu_launch, emu_enqueue, emu_sync, NULL,
                                                 emu_word_store, emu_gate};

/* Wires e as p's GPU stage; call emu_start after cudaq_pipeline_start. */
static inline cudaq_status_t emu_attach(emu_t *e, cudaq_pipeline_t *p, uint32_t function_id,
                                        int gpu_only, emu_delay_fn delay) {
  memset(e, 0, sizeof *e);
  e->function_id = function_id;
  e->gpu_only = gpu_only;
  e->delay = delay;
  cudaq_status_t st =
      cudaq__pipeline_set_launch_ops(p, gpu_only == EMU_GPU_ONLY_WORD ? &emu_ops_word : &emu_ops);
  if (st == CUDAQ_OK) st = cudaq_pipeline_set_gpu_stage(p, emu_factory, e);
  return st;
}

static inline void emu_start(emu_t *e) { pthread_create(&e->thread, NULL, emu_main, e); }

static inline void emu_stop(emu_t *e) {
  atomic_store_explicit(&e->stop, 1, memory_order_release);
  pthread_join(e->thread, NULL);
}

#endif
