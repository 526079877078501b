/*
 * cudaq/realtime/pipeline.h - the realtime pipeline: a host dispatcher with a
 * dynamic worker pool, optional CPU stage, out-of-order consumer, software
 * injector, deferred completion and statistics.
 *
 * Spec: realtime-pipeline-api.txt (a C++ API; this is its C counterpart) and
 * host-dispatcher-worker-pool.md. Additions of this implementation are
 * marked "(extension)".
 *
 * Modes (chosen by what is registered before cudaq_pipeline_start):
 *   GPU + CPU   set_gpu_stage and set_cpu_stage: the dispatcher launches a
 *               worker's CUDA graph; the graph stores 1 into the worker's
 *               ready flag; the worker's CPU thread claims it (CAS 1 -> 2),
 *               runs the CPU stage and completes the slot.
 *   GPU only    set_gpu_stage only: completion is signalled by a host
 *               function the dispatcher enqueues on the worker's stream after
 *               the graph (cudaLaunchHostFunc).
 *   CPU only    set_cpu_stage only: CPU workers take slots straight from the
 *               dispatcher (no GPU needed).
 *
 * Threads: the dispatcher, one thread per worker (CPU stage modes) and the
 * consumer. create / set_* / start / stop / destroy are called from one
 * thread; stats, complete_deferred and ringbuffer_bases from any thread; an
 * injector from one producer thread at a time.
 *
 * Compiles as C11 and C++17 without the CUDA headers.
 */
#ifndef CUDAQ_REALTIME_PIPELINE_H
#define CUDAQ_REALTIME_PIPELINE_H

#include <stddef.h>
#include <stdint.h>

#include "cudaq/realtime/cudaq_realtime.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CUDAQ_PIPELINE_MAX_WORKERS 64

/* CPU stage return value: release the worker now, complete the slot later
 * with cudaq_pipeline_complete_deferred(). */
#define CUDAQ_DEFERRED_COMPLETION SIZE_MAX

typedef struct cudaq_pipeline_t cudaq_pipeline_t;
typedef struct cudaq_pipeline_injector_t cudaq_pipeline_injector_t;

/* CPU core affinity of the pipeline's threads; -1 = no pinning (the thread
 * may run on every CPU; it does not inherit the caller's affinity). */
typedef struct {
  int dispatcher;
  int consumer;
  int worker_base; /* worker i pins to worker_base + i */
} cudaq_core_pinning_t;

typedef struct {
  int num_workers;    /* 1..64, default 8 */
  int num_slots;      /* ring slots, default 32 (with an external ring: its slot count) */
  size_t slot_size;   /* bytes per slot incl. the 24-byte header, default 16384 */
  cudaq_core_pinning_t cores;
  /* A caller-owned ring (cudaq_ringbuffer_t *) with num_slots slots of at
   * least slot_size bytes, or NULL to let the pipeline allocate one (mapped
   * pinned memory when a CUDA device is usable, else host memory). The
   * injector is refused for an external ring. */
  void *external_ringbuffer;
  /* (extension) Idle threads call sched_yield() between polls instead of
   * only a CPU-relax hint: for machines with fewer cores than pipeline
   * threads (tests, CI). 0 (default) keeps the hot path free of syscalls. */
  int idle_yield;
  /* (extension) How long stop waits for queued and in-flight work before it
   * gives up and dumps what is stuck; default 5000 ms. */
  int drain_timeout_ms;
  /* (extension) How GPU-only mode (no CPU stage) learns that a worker's
   * graph has finished; one of cudaq_gpu_only_completion_t, default AUTO. */
  int gpu_only_completion;
  /* (extension) N >= 1: no CUDA call on the path of a request that finds a
   * graph waiting; at most N graphs wait at once (N above num_workers means
   * num_workers). Each GPU worker's graph is wrapped at start into a gate
   * graph, "gate kernel -> the worker's graph" (a child node), launched
   * ahead while the worker is idle. Its gate kernel (one block) waits for a
   * gate word in mapped memory; a request opens it with one host store
   * naming its slot; the kernel then copies the request (header + payload)
   * into device memory, and the worker's graph reads it there through
   * mailbox_dev, which then names a device word holding that copy's
   * address. Whoever finishes a job launches that worker's next gate graph
   * if fewer than N wait (the CPU worker thread, or in GPU-only mode the
   * consumer); a request that finds none waiting launches one on arrival.
   * The N places are shared by all function ids: workers of a function
   * that is seldom asked for can hold them.
   * Every waiting gate kernel polls its word across PCIe, and the pollers
   * slow each other and the requests' reads: on the H100 machine measured
   * (bench_pipeline --stage prelaunch, GPU + CPU, 2 KiB, one request every
   * 30 us) p50 8.5 us with 1 waiting, 9.2 with 2, 15.4 with 4, 19.4 with
   * 8, against 11.8 launched on arrival: 1 is the latency choice. GPU-only
   * mode measured slower pre-launched (11.5 us against 10.1 launched on
   * arrival): use it with a CPU stage.
   * A worker whose graph's first kernel calls cudaq_pipeline_gate_wait()
   * itself (waits_at_gate = 1 in its resources) gets no gate kernel: the
   * gate graph is its own graph, one kernel boundary less on the request's
   * path.
   * Requirements, checked at start:
   *   - the factory sets `graph` (the cudaGraph_t of graph_exec) and no
   *     pre_launch_fn / post_launch_fn (the request is not known when the
   *     graph is launched): the graph reads its request through
   *     mailbox_dev;
   *   - GPU-only mode uses STREAM_WRITE completion (a host function cannot
   *     launch the next graph); the gate graph's last node then stores the
   *     completion word (a stream write after a gate wakes late);
   *   - the RX ring's data and stride are multiples of 8 bytes (an
   *     external ring's too).
   * A waiting gate kernel occupies one SM (a self-gated first kernel of N
   * blocks: N) and one of the GPU's hardware
   * queues: keep the worker streams plus the process's other busy streams
   * within CUDA_DEVICE_MAX_CONNECTIONS (default 8; up to 32, set before the
   * first CUDA call). Beyond it streams share queues, and work enqueued on
   * a stream that shares a waiting gate's queue waits until that gate
   * opens. At stop every waiting graph is released once with an empty
   * request (a zeroed header: magic 0, arg_len 0), its results discarded
   * (counted in prelaunch_cancelled).
   * 0 (default): every graph is launched on arrival. */
  int gpu_prelaunch;
  /* (extension, gpu_prelaunch) M > gpu_prelaunch: while requests keep
   * finding no graph waiting, up to M wait (at most num_workers). Each
   * request launched on arrival for want of one sets a countdown of
   * CUDAQ_PIPELINE_PRELAUNCH_BOOST re-arms during which finishers re-arm
   * up to M instead of gpu_prelaunch; once it runs out the places left
   * over are used up and not refilled past gpu_prelaunch. So near
   * saturation, where a few waiting graphs cannot be re-armed as fast as
   * requests take them, M wait; at lower rates, where every request finds
   * one, gpu_prelaunch do (each waiting kernel holds an SM and polls
   * across PCIe: H200, qec-realtime d = 13 at one request every 100-200
   * us, 4 waiting graphs made the inference 6-17 us slower than 2, and at
   * 100k requests/s 2 left 14-16% of the requests launched on arrival:
   * bench/results/realtime-prelaunch-h200-2026-11-29.md). 0 (default) or
   * gpu_prelaunch: no boost. Below gpu_prelaunch (and not 0): refused. */
  int gpu_prelaunch_max;
} cudaq_pipeline_config_t;

/* Re-arms that one request launched on arrival lets fill up to
 * gpu_prelaunch_max (see there). */
#define CUDAQ_PIPELINE_PRELAUNCH_BOOST 256

/* GPU-only completion (extension). The spec's way is a host function
 * enqueued after the graph (cudaLaunchHostFunc); the CUDA driver runs those
 * one at a time on one thread per context, ~25 us each on an H100, which
 * caps GPU-only mode near 40k requests/s. STREAM_WRITE enqueues instead a
 * GPU write of a completion word in mapped memory (cuStreamWriteValue32,
 * with its system-scope fence before the write) that the consumer thread
 * polls: no host callback on the hot path. */
typedef enum {
  CUDAQ_GPU_ONLY_COMPLETION_AUTO = 0,         /* STREAM_WRITE where the driver offers it, else HOST_FUNC */
  CUDAQ_GPU_ONLY_COMPLETION_HOST_FUNC = 1,    /* cudaLaunchHostFunc after the graph (the spec) */
  CUDAQ_GPU_ONLY_COMPLETION_STREAM_WRITE = 2  /* required: start fails where it is not available */
} cudaq_gpu_only_completion_t;

/* Fills *config with the defaults above (cores -1, no external ring).
 * Returns CUDAQ_OK or CUDAQ_ERR_INVALID_ARG (NULL). */
cudaq_status_t cudaq_pipeline_config_init(cudaq_pipeline_config_t *config);

/* ---- GPU stage ---------------------------------------------------------- */

typedef void (*cudaq_launch_callback_t)(void *user_data, void *slot_dev, cudaStream_t stream);

/* (extension, gpu_prelaunch) A worker's gate: where its pre-launched graph
 * waits for a request and where the request's copy goes. Filled by the
 * pipeline; read on the device by cudaq_pipeline_gate_wait() (CUDA code,
 * at the end of this header). Every pointer is a device address. */
typedef struct {
  const uint64_t *gate_dev; /* the gate word (mapped memory, cudaq_pipeline_gate_word),
                               stored once per request by the dispatcher */
  const uint8_t *ring_dev;  /* RX slot 0 */
  uint64_t stride;          /* RX slot stride (a multiple of 8) */
  uint32_t nslots;          /* a slot number >= nslots: released without a request (stop);
                               at most CUDAQ_PIPELINE_GATE_NO_SLOT */
  uint32_t *ticket_dev;     /* the ticket of the graph's last run */
  uint32_t *opened_dev;     /* the ticket whose request is staged (blocks other than 0 wait for it) */
  uint32_t *passed_dev;     /* blocks past the gate in the current run */
  const uint8_t **request_dev; /* where the current run's request is (blocks other than 0 read it) */
  uint8_t *staging_dev;     /* the request's copy: header + payload, the slot's layout */
  uint64_t staging_bytes;
  void **mailbox_dev;       /* a word holding staging_dev */
  uint32_t *done_dev;       /* GPU-only: the completion word the gate graph's last node
                               sets to 1, or NULL */
} cudaq_pipeline_gate_t;

/* (extension, gpu_prelaunch) The gate word, stored by the dispatcher once
 * per request: the run's ticket (bits 63..32), the request's size (header +
 * payload) in 16-byte units (bits 31..16; 0: not given, the header says),
 * and the ring slot (bits 15..0; CUDAQ_PIPELINE_GATE_NO_SLOT: released
 * without a request, at stop). With the size in the word the request is
 * copied in one PCIe round trip instead of a header round and a rest. */
#define CUDAQ_PIPELINE_GATE_NO_SLOT 0xFFFFu
static inline CUDAQ_HD uint64_t cudaq_pipeline_gate_word(uint32_t ticket, uint32_t slot, uint64_t bytes) {
  uint64_t units = (bytes + 15u) / 16u;
  if (units > 0xFFFFu) units = 0; /* too large to say: the header says */
  return (uint64_t)ticket << 32 | units << 16 | (slot & 0xFFFFu);
}
static inline CUDAQ_HD uint32_t cudaq_pipeline_gate_ticket(uint64_t word) { return (uint32_t)(word >> 32); }
static inline CUDAQ_HD uint32_t cudaq_pipeline_gate_slot(uint64_t word) { return (uint32_t)(word & 0xFFFFu); }
static inline CUDAQ_HD uint64_t cudaq_pipeline_gate_bytes(uint64_t word) { return ((word >> 16) & 0xFFFFu) * 16u; }

/* Per-worker GPU resources, filled by the factory. The fields marked "in"
 * are filled by the pipeline before the factory runs, so the factory can
 * capture them into its graph. */
typedef struct {
  cudaGraphExec_t graph_exec; /* instantiated graph (required) */
  cudaStream_t stream;        /* the worker's own stream (required) */
  cudaq_launch_callback_t pre_launch_fn; /* optional, before the launch (e.g. DMA of the payload) */
  void *pre_launch_data;
  cudaq_launch_callback_t post_launch_fn; /* optional, after a successful launch */
  void *post_launch_data;
  uint32_t function_id; /* RPC function this worker serves */
  void *user_context;   /* passed to the CPU stage */
  /* (extension) Host view of the worker's output (mapped memory) and its
   * size: given to the CPU stage as gpu_output; in GPU-only mode the
   * completion copies min(size, slot room) bytes of it into the response. */
  const void *gpu_output_host;
  size_t gpu_output_size;
  /* in (extension): device pointer of this worker's ready flag (an int in
   * mapped memory); the graph's last node stores 1 into it with a
   * system-scope release store (GPU + CPU mode). NULL without a GPU. */
  int *ready_flag_dev;
  /* in (extension): device pointer of this worker's mailbox, where the
   * dispatcher writes the slot's device address before each launch. With
   * gpu_prelaunch: a device word, written once at start, holding the
   * address of the request's copy in device memory (header + payload, the
   * slot's layout), which the gate kernel writes before the graph runs. */
  void **mailbox_dev;
  /* (extension) The graph graph_exec was instantiated from; required with
   * gpu_prelaunch (start adds a copy of it to the gate graph as a child
   * node: the factory may destroy it after start). */
  cudaGraph_t graph;
  /* in (extension, gpu_prelaunch): this worker's gate, valid while the
   * factory runs (copy it); NULL without gpu_prelaunch. */
  const cudaq_pipeline_gate_t *gate;
  /* (extension, gpu_prelaunch) 1: the graph's first kernel calls
   * cudaq_pipeline_gate_wait(gate) itself before it reads the request, and
   * start puts no gate kernel in front of the graph (measured on an H200,
   * bench_stream_gate, 2 KiB: 4.4 us against 4.8 us for a gate kernel
   * followed by the work kernel). 0 (default): the pipeline's gate kernel
   * waits and copies, then the graph runs. */
  int waits_at_gate;
} cudaq_gpu_worker_resources_t;

/* Called once per worker during start. Returns 0 on success; any other
 * value makes start fail (CUDAQ_ERR_INVALID_ARG). */
typedef int (*cudaq_gpu_stage_factory_t)(void *user, int worker_id,
                                         cudaq_gpu_worker_resources_t *out);

/* ---- CPU stage ---------------------------------------------------------- */

typedef struct {
  int worker_id;
  int origin_slot;
  const void *gpu_output; /* the factory's gpu_output_host (NULL in CPU-only mode) */
  size_t gpu_output_size;
  void *response_buffer;  /* the TX slot's result area (after the 24-byte header) */
  size_t max_response_size;
  void *user_context;     /* gpu_worker_resources.user_context, or the CPU stage's user */
  /* (extension) The request: payload (host view of the RX slot after the
   * header), its length, id and function. With an in-place ring the payload
   * and response_buffer are the same bytes. */
  const void *request;
  size_t request_size;
  uint32_t request_id;
  uint32_t function_id;
} cudaq_cpu_stage_context_t;

/* Returns the bytes written to response_buffer, 0 for "not ready, call
 * again" (poll mode), or CUDAQ_DEFERRED_COMPLETION. A return value above
 * max_response_size completes the request with CUDAQ_RPC_ERR_RESULT_TOO_LARGE.
 * Called only from the worker's thread. */
typedef size_t (*cudaq_cpu_stage_fn_t)(void *user, const cudaq_cpu_stage_context_t *ctx);

/* ---- completion --------------------------------------------------------- */

typedef struct {
  uint64_t request_id; /* the injector's 64-bit id, or the header's 32-bit id (external ring) */
  int slot;
  int success;    /* 1: no CUDA error and response status 0 */
  int cuda_error; /* CUDA error of a failed launch (0 otherwise) */
  int32_t rpc_status; /* (extension) the response status (0 with a CUDA error) */
} cudaq_completion_t;

/* Called by the consumer thread once per harvested request, in completion
 * order (out of ring order). The response is still in TX slot c->slot while
 * the handler runs; the slot is freed when it returns. */
typedef void (*cudaq_completion_fn_t)(void *user, const cudaq_completion_t *c);

typedef struct {
  uint64_t submitted;           /* injector requests written */
  uint64_t completed;           /* harvested (success or error) */
  uint64_t dispatched;          /* slots consumed by the dispatcher */
  uint64_t backpressure_stalls; /* injector waits / refusals for a free slot */
  uint64_t worker_stalls;       /* (extension) dispatcher waits for a free worker */
  uint64_t errors;              /* (extension) completions with success == 0 */
  uint64_t dropped;             /* (extension) consumed without response: bad magic, or no
                                   worker serves the function (as the host path) */
  /* (extension, gpu_prelaunch) requests whose graph was waiting at its gate
   * (the rest were launched on arrival); failed re-arms (the worker then
   * launches on arrival); waiting graphs released unused at stop; idle
   * workers whose graph waits now (a request arriving now finds one if
   * this is above 0: a job's answer is published before its worker's
   * re-arm, so a request sent right after an answer may not). */
  uint64_t prelaunched;
  uint64_t prelaunch_failures;
  uint64_t prelaunch_cancelled;
  uint64_t prelaunch_waiting;
  /* (extension, gpu_prelaunch_max) re-arms made past gpu_prelaunch while
   * boosted. */
  uint64_t prelaunch_boosted;
} cudaq_pipeline_stats_t;

typedef struct {
  uint8_t *rx_data_host;
  uint8_t *rx_data_dev;
} cudaq_ringbuffer_bases_t;

/* ---- lifecycle ---------------------------------------------------------- */

/* Creates a pipeline and allocates (or binds) its ring. Returns CUDAQ_OK;
 * CUDAQ_ERR_INVALID_ARG (NULL, num_workers outside 1..64, num_slots < 1,
 * slot_size < 24 or >= 4 GiB, a pinning core < -1 or not a CPU of this
 * machine, an external ring with NULL pointers or strides below slot_size);
 * CUDAQ_ERR_INTERNAL (out of memory); CUDAQ_ERR_CUDA. */
cudaq_status_t cudaq_pipeline_create(const cudaq_pipeline_config_t *config,
                                     cudaq_pipeline_t **out);

/* Stops (cudaq_pipeline_stop) and frees. Returns CUDAQ_OK,
 * CUDAQ_ERR_INVALID_ARG (NULL), the error of the stop it runs, or
 * CUDAQ_ERR_INTERNAL when a stop (this one or an earlier one) gave up with
 * work pending and the pipeline has a GPU stage: then nothing is freed (a
 * graph or its completion may still write into the pipeline's memory). */
cudaq_status_t cudaq_pipeline_destroy(cudaq_pipeline_t *p);

/* Register the stages and the completion handler; before start only.
 * Return CUDAQ_OK or CUDAQ_ERR_INVALID_ARG (NULL pipeline or function, or
 * the pipeline was started). (In a build without CUDA a GPU stage makes
 * cudaq_pipeline_start return CUDAQ_ERR_UNSUPPORTED.) user of set_cpu_stage is passed to the callback and
 * is the context's user_context when there is no GPU stage. */
cudaq_status_t cudaq_pipeline_set_gpu_stage(cudaq_pipeline_t *p, cudaq_gpu_stage_factory_t factory,
                                            void *user);
cudaq_status_t cudaq_pipeline_set_cpu_stage(cudaq_pipeline_t *p, cudaq_cpu_stage_fn_t fn,
                                            void *user);
cudaq_status_t cudaq_pipeline_set_completion_handler(cudaq_pipeline_t *p, cudaq_completion_fn_t fn,
                                                     void *user);

/* Builds the workers (calling the factory once per worker) and starts all
 * threads. Returns CUDAQ_OK; CUDAQ_ERR_INVALID_ARG (NULL; no stage
 * registered; started before; the factory failed or returned no graph or
 * stream; GPU-only mode with an external ring); CUDAQ_ERR_UNSUPPORTED (a
 * GPU stage in a build without CUDA); CUDAQ_ERR_INTERNAL (thread creation). */
cudaq_status_t cudaq_pipeline_start(cudaq_pipeline_t *p);

/* Stops accepting injector requests, waits until every request already
 * signalled is dispatched, finished and harvested (at most
 * drain_timeout_ms), then stops and joins the threads. If the wait times
 * out, prints a per-slot and per-worker dump of the stuck work to stderr
 * and returns CUDAQ_ERR_INTERNAL (the threads are still joined).
 * Idempotent: a stopped or never started pipeline returns CUDAQ_OK.
 * Returns CUDAQ_ERR_INVALID_ARG for NULL. */
cudaq_status_t cudaq_pipeline_stop(cudaq_pipeline_t *p);

/* Lock-free snapshot. Returns CUDAQ_OK or CUDAQ_ERR_INVALID_ARG (NULL). */
cudaq_status_t cudaq_pipeline_stats(const cudaq_pipeline_t *p, cudaq_pipeline_stats_t *out);

/* (extension) The GPU-only completion in use after start: HOST_FUNC or
 * STREAM_WRITE for a GPU-only pipeline, AUTO (0) for every other pipeline
 * and before start. Returns CUDAQ_OK or CUDAQ_ERR_INVALID_ARG (NULL). */
cudaq_status_t cudaq_pipeline_gpu_only_completion(const cudaq_pipeline_t *p,
                                                  cudaq_gpu_only_completion_t *out);

/* Completes a slot whose CPU stage returned CUDAQ_DEFERRED_COMPLETION, with
 * result_len bytes written into its response buffer. Any thread, also
 * before the CPU stage has returned. Call it exactly once per deferred
 * request: the slot is reused afterwards, so a late second call may
 * complete the slot's next request. Returns
 * CUDAQ_OK; CUDAQ_ERR_INVALID_ARG (NULL, slot out of range, the slot is not
 * waiting for a deferred completion, result_len larger than the slot). */
cudaq_status_t cudaq_pipeline_complete_deferred(cudaq_pipeline_t *p, int slot, size_t result_len);

/* Host and device base of the RX data ring (the device base equals the host
 * one for a host-memory ring). Returns CUDAQ_OK or CUDAQ_ERR_INVALID_ARG. */
cudaq_status_t cudaq_pipeline_ringbuffer_bases(const cudaq_pipeline_t *p,
                                               cudaq_ringbuffer_bases_t *out);

/* (extension) The ring the pipeline uses (its own or the external one). */
cudaq_status_t cudaq_pipeline_ringbuffer(const cudaq_pipeline_t *p, cudaq_ringbuffer_t *out);

/* ---- injector (software producer; spsc: one producer thread) ------------ */

/* Returns CUDAQ_OK; CUDAQ_ERR_INVALID_ARG (NULL, an external ring, or an
 * injector exists already); CUDAQ_ERR_INTERNAL (out of memory). */
cudaq_status_t cudaq_pipeline_injector_create(cudaq_pipeline_t *p, cudaq_pipeline_injector_t **out);
/* Returns CUDAQ_OK or CUDAQ_ERR_INVALID_ARG (NULL). */
cudaq_status_t cudaq_pipeline_injector_destroy(cudaq_pipeline_injector_t *inj);

/* Writes one request into the next ring slot (ring order) if it is free
 * (RX and TX flags both 0): *out_accepted = 1; else *out_accepted = 0
 * (backpressure: try again; counted as a stall). Returns CUDAQ_OK;
 * CUDAQ_ERR_INVALID_ARG (NULL injector or out_accepted, NULL payload with a
 * nonzero size, a payload larger than slot_size - 24, or the pipeline is
 * not running). */
cudaq_status_t cudaq_pipeline_injector_try_submit(cudaq_pipeline_injector_t *inj,
                                                  uint32_t function_id, const void *payload,
                                                  size_t payload_size, uint64_t request_id,
                                                  int *out_accepted);
/* The same, spinning until the slot is free (one stall counted per call
 * that had to wait). Returns CUDAQ_OK or CUDAQ_ERR_INVALID_ARG (as above,
 * or the pipeline stopped while waiting). */
cudaq_status_t cudaq_pipeline_injector_submit(cudaq_pipeline_injector_t *inj, uint32_t function_id,
                                              const void *payload, size_t payload_size,
                                              uint64_t request_id);
/* Returns CUDAQ_OK or CUDAQ_ERR_INVALID_ARG (NULL). */
cudaq_status_t cudaq_pipeline_injector_backpressure_stalls(const cudaq_pipeline_injector_t *inj,
                                                           uint64_t *out);

/* ---- host dispatcher worker pool (cudaq_dispatcher_t, host path) -------- */

/* One GRAPH_LAUNCH worker of a host-path dispatcher: the dispatcher hands a
 * request whose function_id matches to any idle worker, launches its graph
 * on its stream, marks the slot in flight (TX flag CUDAQ_TX_FLAG_IN_FLIGHT)
 * and moves on; whoever finishes the job writes the slot's response and TX
 * flag and calls cudaq_host_release_worker(). */
typedef struct {
  cudaGraphExec_t graph_exec;
  cudaStream_t stream;
  uint32_t function_id;
  cudaq_launch_callback_t pre_launch_fn;
  void *pre_launch_data;
  cudaq_launch_callback_t post_launch_fn;
  void *post_launch_data;
} cudaq_host_dispatch_worker_t;

/* Wires up to 64 workers to a host-path dispatcher (copied). Returns
 * CUDAQ_OK; CUDAQ_ERR_INVALID_ARG (NULL, count 0 or > 64, a worker without
 * graph or stream, a device-path dispatcher, a running dispatcher);
 * CUDAQ_ERR_UNSUPPORTED (a build without CUDA). */
cudaq_status_t cudaq_dispatcher_set_host_workers(cudaq_dispatcher_t *dispatcher,
                                                 const cudaq_host_dispatch_worker_t *workers,
                                                 uint32_t count);

/* The ring slot worker_id is serving (its origin-slot tag). Valid between
 * the launch and the worker's release. Returns CUDAQ_OK or
 * CUDAQ_ERR_INVALID_ARG (NULL, no workers, worker_id out of range, the
 * worker is idle). */
cudaq_status_t cudaq_host_worker_slot(cudaq_dispatcher_t *dispatcher, uint32_t worker_id,
                                      uint32_t *out_slot);

/* Returns a worker to the pool; any thread. Returns CUDAQ_OK or
 * CUDAQ_ERR_INVALID_ARG (NULL, no workers, worker_id out of range, or the
 * worker is idle already). */
cudaq_status_t cudaq_host_release_worker(cudaq_dispatcher_t *dispatcher, uint32_t worker_id);

#ifdef __cplusplus
} /* extern "C" */
#endif

/* ---- device side (CUDA code) --------------------------------------------- */
#if defined(__CUDACC__)
#include <cuda/atomic>

/* Items first, first + stride, ... below end of src to dst (the calling
 * thread's share of a block- or grid-wide copy), 8 loads in flight before
 * their stores: reads of mapped memory cross PCIe, and a plain loop would
 * wait for each one in turn. */
template <typename T, typename I>
static __device__ inline void cudaq__copy_in_flight(const T *__restrict__ src, T *__restrict__ dst, I first, I end,
                                                    I stride) {
  constexpr int kInFlight = 8;
  for (I base = first; base < end; base += kInFlight * stride) {
    T v[kInFlight];
#pragma unroll
    for (int k = 0; k < kInFlight; ++k)
      if (base + k * stride < end) v[k] = src[base + k * stride];
#pragma unroll
    for (int k = 0; k < kInFlight; ++k)
      if (base + k * stride < end) dst[base + k * stride] = v[k];
  }
}

/* Items [from, to) of src to dst by the whole block. */
template <typename T>
static __device__ inline void cudaq__gate_copy_items(const T *__restrict__ src, T *__restrict__ dst, uint32_t from,
                                                     uint32_t to) {
  cudaq__copy_in_flight<T, uint32_t>(src, dst, from + threadIdx.x, to, blockDim.x);
}

/* The request at slot (header, then arg_len bytes; at most staging_bytes)
 * into staging, by the whole block. bytes > 0 (the gate word's size): all
 * of it at once, one PCIe round trip; 0: one item per thread first (the
 * header among them), then the rest once the header says how much there is. */
template <typename T>
static __device__ inline void cudaq__gate_copy_request(const uint8_t *slot, uint8_t *staging,
                                                       uint64_t staging_bytes, uint64_t bytes,
                                                       uint32_t *n_items) {
  const T *src = reinterpret_cast<const T *>(slot);
  T *dst = reinterpret_cast<T *>(staging);
  const uint64_t cap64 = staging_bytes / sizeof(T);
  const uint32_t cap = cap64 > 0xffffffffu ? 0xffffffffu : (uint32_t)cap64;
  if (bytes) {
    const uint64_t want = (bytes + sizeof(T) - 1) / sizeof(T);
    cudaq__gate_copy_items(src, dst, 0, want < cap ? (uint32_t)want : cap);
    return;
  }
  /* At least the 24-byte header, whatever the block size. */
  const uint32_t head = (uint32_t)((24 + sizeof(T) - 1) / sizeof(T));
  const uint32_t per = blockDim.x > head ? blockDim.x : head;
  const uint32_t first = cap < per ? cap : per;
  cudaq__gate_copy_items(src, dst, 0, first);
  __syncthreads(); /* the header's items are in staging */
  if (threadIdx.x == 0) {
    const uint64_t arg_len = reinterpret_cast<const volatile uint32_t *>(staging)[2]; /* offset 8 */
    const uint64_t total = (24 + arg_len + sizeof(T) - 1) / sizeof(T);
    *n_items = total < cap ? (uint32_t)total : cap;
  }
  __syncthreads();
  if (*n_items > first) cudaq__gate_copy_items(src, dst, first, *n_items);
}

/* The gate's rule for cudaq_pipeline_gate_wait (copy = 1) and
 * cudaq_pipeline_gate_wait_in_ring (copy = 0). */
static __device__ inline const uint8_t *cudaq__gate_pass(const cudaq_pipeline_gate_t &g, int copy) {
  __shared__ uint32_t want, n_items;
  __shared__ const uint8_t *req;
  /* The rule picks its leaders by x alone: a 2-D or 3-D launch would have
   * several, and the ticket could move on before every block has read it
   * (a hang). Refused loudly instead. */
  if (blockDim.y * blockDim.z * gridDim.y * gridDim.z != 1) __trap();
  if (threadIdx.x == 0) {
    /* The last run's ticket: written by the previous run after all its
     * blocks read it (below), visible here by stream order. */
    want = *g.ticket_dev + 1;
  }
  __syncthreads();
  const uint32_t my = want;
  if (blockIdx.x == 0) {
    __shared__ uint32_t slot;
    __shared__ uint64_t bytes;
    if (threadIdx.x == 0) {
      cuda::atomic_ref<uint64_t, cuda::thread_scope_system> w(*const_cast<uint64_t *>(g.gate_dev));
      uint64_t v;
      /* A14 pairs with R14 (open_gate in the pipeline's pool.c): once the
       * word carries this run's ticket, the slot's request bytes are
       * visible to the block's loads below (after the barrier). */
      do {
        v = w.load(cuda::memory_order_acquire);
      } while ((int32_t)(cudaq_pipeline_gate_ticket(v) - my) < 0);
      slot = cudaq_pipeline_gate_slot(v) < g.nslots ? cudaq_pipeline_gate_slot(v) : g.nslots;
      bytes = cudaq_pipeline_gate_bytes(v);
      req = slot == g.nslots || copy ? g.staging_dev : g.ring_dev + (uint64_t)slot * g.stride;
    }
    __syncthreads();
    if (slot == g.nslots) { /* released without a request: an empty one (any block size) */
      for (uint32_t i = threadIdx.x; i < 6; i += blockDim.x) reinterpret_cast<uint32_t *>(g.staging_dev)[i] = 0;
    } else if (copy) {
      const uint8_t *src = g.ring_dev + (uint64_t)slot * g.stride;
      if (((uintptr_t)g.ring_dev | g.stride | (uintptr_t)g.staging_dev) % 16 == 0)
        cudaq__gate_copy_request<uint4>(src, g.staging_dev, g.staging_bytes, bytes, &n_items);
      else
        cudaq__gate_copy_request<uint2>(src, g.staging_dev, g.staging_bytes, bytes, &n_items);
    }
    __syncthreads(); /* the block's copies come before thread 0's R15 */
    if (threadIdx.x == 0 && gridDim.x > 1) {
      *g.request_dev = req;
      /* R15 publishes the request (its copy, or where it is) to the other
       * blocks; pairs with their A15 below. */
      cuda::atomic_ref<uint32_t, cuda::thread_scope_device>(*g.opened_dev).store(my, cuda::memory_order_release);
    }
  } else {
    if (threadIdx.x == 0) {
      cuda::atomic_ref<uint32_t, cuda::thread_scope_device> o(*g.opened_dev);
      /* A15 pairs with block 0's R15: the request (and request_dev) is
       * visible to this block (its threads after the barrier below). */
      while ((int32_t)(o.load(cuda::memory_order_acquire) - my) < 0) {
      }
      req = *g.request_dev;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    if (gridDim.x == 1) {
      *g.ticket_dev = my;
    } else {
      /* The last block past the gate records the run's ticket; every block
       * has read the old one by then: R16 / A16, the count's acq_rel, is
       * each block's release of its ticket read and the last block's
       * acquire of all of them before its write. */
      cuda::atomic_ref<uint32_t, cuda::thread_scope_device> n(*g.passed_dev);
      if (n.fetch_add(1u, cuda::memory_order_acq_rel) + 1u == gridDim.x) {
        n.store(0u, cuda::memory_order_relaxed);
        *g.ticket_dev = my;
      }
    }
  }
  return req;
}

/* (extension, gpu_prelaunch) Waits at a worker's gate and returns the
 * request (24-byte header + payload, the slot's layout) copied into device
 * memory; after a release without a request (stop), an empty request: a
 * zeroed header, magic 0, arg_len 0. The pipeline's own gate kernel calls
 * it; a worker graph's first kernel may call it instead
 * (cudaq_gpu_worker_resources_t.waits_at_gate).
 * Rules: a 1-D grid of 1-D blocks (anything else traps); every thread of
 * every block calls it exactly once per run, before anything reads the
 * request (a thread that returns early leaves its share uncopied; a second
 * call waits for the next request); the kernel is its graph's only root
 * node, everything else runs after it (start checks). Block 0 waits for
 * the gate word and copies the request with all its threads; the other
 * blocks wait (in device memory) for block 0, so all of the kernel's
 * blocks must be resident at once (a grid of at most one wave; N blocks
 * hold N SMs while they wait). Uses a few words of shared memory. The
 * copy is also what mailbox_dev names, for the graph's later kernels. */
static __device__ inline const uint8_t *cudaq_pipeline_gate_wait(const cudaq_pipeline_gate_t &g) {
  return cudaq__gate_pass(g, 1);
}

/* (extension, gpu_prelaunch) The same without the copy: returns the request
 * where it is, in the RX ring (mapped memory, unchanged until this job's
 * answer is harvested: the slot's TX flag holds the in-flight marker), or
 * the empty request after a release at stop. Every read of it crosses
 * PCIe: for a first kernel that reads its request once, it saves the copy
 * into device memory and the pass of the copy's reads before the kernel's
 * own. The same rules as cudaq_pipeline_gate_wait, but mailbox_dev then
 * names no request: only this kernel knows where it is (pass it on if the
 * graph's later kernels need it). */
static __device__ inline const uint8_t *cudaq_pipeline_gate_wait_in_ring(const cudaq_pipeline_gate_t &g) {
  return cudaq__gate_pass(g, 0);
}
#endif /* __CUDACC__ */

#endif /* CUDAQ_REALTIME_PIPELINE_H */
