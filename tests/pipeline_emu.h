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
 * Pre-launch (gpu_prelaunch): the gate ops give each worker a second
 * "graph", its gate graph (gexec); a job launched through it waits until
 * the gate word carries its ticket, then copies the request of the slot the
 * word names into the worker's staging copy, which the mailbox names (as
 * gate.cu does), and only then starts its delay; in GPU-only mode it then
 * stores the completion word itself (the gate graph's last node). emu_t.gate_fail_every = K
 * makes every K-th launch of a gate graph fail.
 */
#ifndef CUDAQ_TEST_PIPELINE_EMU_H
#define CUDAQ_TEST_PIPELINE_EMU_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cudaq/realtime/pipeline.h"
#include "pipeline/pipeline_internal.h"
#include "test_util.h"

#define EMU_MAX 64
#define EMU_OUT 16384

typedef struct emu emu_t;

enum { EMU_GPU_CPU = 0, EMU_GPU_ONLY_HOST_FN = 1, EMU_GPU_ONLY_WORD = 2 };

typedef struct emu_worker emu_worker_t;
typedef struct {
  int tag; /* EMU_TAG_GATE (a worker starts with EMU_TAG_WORKER) */
  emu_worker_t *w;
} emu_gexec_t;
enum { EMU_TAG_WORKER = 1, EMU_TAG_GATE = 2 };

struct emu_worker {
  int tag;
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
  emu_gexec_t gexec;      /* pre-launch: the gate graph */
  cudaq_pipeline_gate_t gate; /* its arguments (host memory stands in for device memory) */
  uint32_t gticket;        /* the runs of the gate graph so far */
  int gated;               /* the pending job waits at the gate */
  int self_gated;          /* the factory's graph waits at the gate itself (the same emulation) */
  uint8_t out[EMU_OUT]; /* the "GPU output" (gpu_output_host) */
  size_t out_len;
};

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
  _Atomic uint64_t gates, gates_opened; /* gate graphs launched; released at their gate */
  _Atomic uint64_t gate_calls, gate_fails;
  _Atomic uint64_t word_stores; /* enqueue_word_store calls */
  _Atomic uint64_t gates_empty;  /* gate graphs released without a request */
  _Atomic uint64_t gate_size_wrong; /* gate words whose request size does not fit the header */
  int gate_fail_every;
  pthread_t thread;
  uint32_t function_id;
};

static int emu_launch(void *user, cudaGraphExec_t g, cudaStream_t s) {
  (void)user, (void)s;
  const int tag = *(const int *)(void *)g;
  emu_worker_t *w = tag == EMU_TAG_GATE ? ((emu_gexec_t *)(void *)g)->w : (emu_worker_t *)(void *)g;
  if (tag == EMU_TAG_GATE) {
    emu_t *e = w->emu;
    uint64_t k = atomic_fetch_add_explicit(&e->gate_calls, 1, memory_order_relaxed) + 1;
    if (e->gate_fail_every && k % (uint64_t)e->gate_fail_every == 0) {
      atomic_fetch_add_explicit(&e->gate_fails, 1, memory_order_relaxed);
      return 2; /* cudaErrorMemoryAllocation, say */
    }
    atomic_fetch_add_explicit(&e->gates, 1, memory_order_relaxed);
    w->gated = 1; /* published to the emulator by the pending store below */
    if (w->gate.done_dev) { /* GPU-only: the gate graph's last node stores the word */
      w->word = (_Atomic uint32_t *)(void *)w->gate.done_dev;
      w->value = 1;
    }
  } else { /* a job that reads its slot through the mailbox now */
    const uint8_t *slot = (const uint8_t *)*w->mailbox; /* written by the dispatcher */
    int64_t d = w->emu->delay ? w->emu->delay(slot) : 0;
    if (d < 0) return 700; /* cudaErrorIllegalAddress, say */
    w->due_ns = test_now_ns() + (uint64_t)d;
  }
  atomic_fetch_add_explicit(&w->emu->launches, 1, memory_order_relaxed);
  /* "pre-launch DMA": the payload is copied when the graph runs, below. */
  if (!w->emu->gpu_only || tag == EMU_TAG_GATE) atomic_store_explicit(&w->pending, 1, memory_order_release);
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
  atomic_fetch_add_explicit(&w->emu->word_stores, 1, memory_order_relaxed);
  w->word = (_Atomic uint32_t *)word;
  w->value = value;
  atomic_store_explicit(&w->pending, 1, memory_order_release); /* pairs with the emulator's acquire */
  return 0;
}

/* The gate ops: host memory for the "device" block; the gate graph is the
 * worker's gexec. */
static int emu_gate_alloc(void *user, uint64_t staging_bytes, cudaq_pipeline_gate_t *g) {
  (void)user;
  uint8_t *base = (uint8_t *)calloc(1, 16 + (size_t)staging_bytes);
  if (!base) return 2;
  g->mailbox_dev = (void **)(void *)base;
  g->ticket_dev = (uint32_t *)(void *)(base + 8);
  g->staging_dev = base + 16;
  g->staging_bytes = staging_bytes;
  *g->mailbox_dev = g->staging_dev;
  return 0;
}

static int emu_gate_graph(void *user, cudaGraph_t graph, const cudaq_pipeline_gate_t *a, int self, cudaStream_t s,
                          cudaGraphExec_t *out) {
  (void)user, (void)s;
  emu_worker_t *w = (emu_worker_t *)(void *)graph; /* the factory's graph is the worker */
  w->gate = *a;
  w->self_gated = self;
  w->gexec.tag = EMU_TAG_GATE;
  w->gexec.w = w;
  *out = (cudaGraphExec_t)(void *)&w->gexec;
  return 0;
}

static void emu_gate_free(void *user, cudaq_pipeline_gate_t *g, cudaGraphExec_t exec) {
  (void)user, (void)exec;
  free(g->mailbox_dev);
  g->mailbox_dev = NULL;
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
      if (w->gated) { /* the gate kernel: A14 pairs with the pipeline's R14 */
        const uint64_t v = atomic_load_explicit((_Atomic uint64_t *)(void *)w->gate.gate_dev,
                                                memory_order_acquire);
        if ((int32_t)(cudaq_pipeline_gate_ticket(v) - (w->gticket + 1)) < 0) continue;
        w->gticket++;
        w->gated = 0;
        atomic_fetch_add_explicit(&e->gates_opened, 1, memory_order_relaxed);
        const uint32_t k = cudaq_pipeline_gate_slot(v);
        if (k < w->gate.nslots) {
          const uint8_t *src = w->gate.ring_dev + (size_t)k * w->gate.stride;
          cudaq_rpc_header_t h;
          memcpy(&h, src, sizeof h);
          size_t n = 24 + (size_t)h.arg_len;
          /* The size the dispatcher put into the word (the gate copies that
           * much) covers the request: 16-byte units, or 0 (not given). */
          const uint64_t said = cudaq_pipeline_gate_bytes(v);
          if (said && (said < n || said >= n + 16))
            atomic_fetch_add_explicit(&e->gate_size_wrong, 1, memory_order_relaxed);
          memcpy(w->gate.staging_dev, src, n < w->gate.staging_bytes ? n : w->gate.staging_bytes);
        } else { /* released without a request: an empty one */
          memset(w->gate.staging_dev, 0, 24);
          atomic_fetch_add_explicit(&e->gates_empty, 1, memory_order_relaxed);
        }
        int64_t d = e->delay ? e->delay(w->gate.staging_dev) : 0;
        w->due_ns = test_now_ns() + (uint64_t)(d < 0 ? 0 : d);
      }
      if (test_now_ns() < w->due_ns && !atomic_load_explicit(&e->release, memory_order_relaxed)) continue;
      const uint8_t *slot = (const uint8_t *)*w->mailbox;
      cudaq_rpc_header_t h;
      memcpy(&h, slot, sizeof h);
      w->out_len = h.arg_len < EMU_OUT ? h.arg_len : EMU_OUT;
      memcpy(w->out, slot + 24, w->out_len); /* passthrough "kernel" */
      /* Release: emu_sync's acquire then sees the job done. */
      atomic_store_explicit(&w->pending, 0, memory_order_release);
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
  w->tag = EMU_TAG_WORKER;
  w->emu = e;
  w->id = worker_id;
  w->ready = (_Atomic int *)(void *)r->ready_flag_dev;
  w->mailbox = r->mailbox_dev;
  r->graph_exec = (cudaGraphExec_t)(void *)w;
  r->stream = (cudaStream_t)(void *)w;
  r->graph = (cudaGraph_t)(void *)w; /* gpu_prelaunch: the gate graph's child */
  r->function_id = e->function_id;
  r->gpu_output_host = w->out;
  r->gpu_output_size = EMU_OUT; /* the CPU stage uses the request length */
  r->user_context = w;
  if (worker_id + 1 > e->n) e->n = worker_id + 1;
  return 0;
}

/* Without the word store (GPU-only mode falls back to the host function),
 * and with it. */
static const cudaq__launch_ops_t emu_ops = {emu_launch,     emu_enqueue,    emu_sync,     NULL, NULL,
                                            emu_gate_alloc, emu_gate_graph, emu_gate_free};
static const cudaq__launch_ops_t emu_ops_word = {emu_launch,     emu_enqueue,    emu_sync,     NULL,
                                                 emu_word_store, emu_gate_alloc, emu_gate_graph,
                                                 emu_gate_free};

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
