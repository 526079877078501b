/* The GPU stage of qec-realtime: hybrid and passthrough modes (qrt_gpu.h). */
#include "qrt_gpu.h"

#include <cuda/atomic>
#include <cuda_runtime.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudaq/nn/gpu_engine.h"
#include "cudaq/qec/predecoder.h"
#include "cudaq/realtime/pipeline.h"
#include "cudaq/realtime/rpc_wire_format.h"

namespace {

constexpr unsigned kIngestThreads = 256;
constexpr unsigned kGatedThreads = 256; /* the pipeline's gate kernel's size */
constexpr unsigned kPublishThreads = 1024;

struct qrt_gpu_worker {
  cudaStream_t stream;
  cudaGraphExec_t exec;
  cudaGraph_t graph; /* kept: the pipeline's gpu_prelaunch wraps it */
  cudaq_nn_gpu_t *engine; /* hybrid */
  int32_t *d_events;      /* passthrough: the ingested events (hybrid: the engine's input) */
  qrt_gpu_result_t *h_out, *h_out_dev; /* mapped: header + num_detectors indices */
  uint32_t *d_stats;      /* the ingest kernel's value verdict and event count (qrt_ingest_body) */
  size_t dev_bytes;       /* device memory allocated for this worker (engine or event buffer) */
};

}  // namespace

struct qrt_gpu_stage {
  qrt_gpu_config_t cfg;
  cudaq_nn_model_t *model;
  /* Weighted (a model with edge logits, weights not OFF): the model's edge
   * map (num_edges 0 otherwise), and per logit its edge's detectors and
   * observables in device memory, read by every worker's publish kernel. */
  cudaq_predecoder_edge_map_t map;
  int32_t *d_ends;
  unsigned long long *d_obs;
  qrt_gpu_worker w[CUDAQ_PIPELINE_MAX_WORKERS];
  int nw;
  char device_name[256];
  char describe[2048];
};

/* The GPU's global timer in ns (the result's diagnostic stamps). */
__device__ __forceinline__ uint64_t qrt_now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/* The ingest kernels' common body (every thread of the block calls it): the
 * payload of the request at slot as INT32 events in dst, items first,
 * first + stride, ... A payload whose arg_len is not the expected one is not
 * used (zeros): the CPU stage refuses that request by its length. Otherwise
 * the values are checked by the request rules of qrt_worker.h (0 or 1; a
 * bit-packed payload's padding bits zero) and counted, and the block adds
 * its verdict and count to stats[0] / stats[1] (device memory; the publish
 * kernel moves them into the output header and clears them), so the CPU
 * stage need not read the payload. Thread 0 loads arg_len while every
 * thread loads its first kPre items (one round trip to the slot's memory,
 * not a header round and then a payload round); the slot holds the expected
 * length whatever arg_len says (its size is the preset's), so the loads
 * stay inside it. One header load per block: measured on the H200, a load
 * of it (or of the mailbox) by every thread, across PCIe, cost a d = 13
 * request 40 us. */
constexpr int kPre = 4;

/* Event d of the payload p. Bit-packed, the thread that reads detector
 * nd - 1 also applies the padding rule to the byte it loaded (pad), so that
 * the check costs no load of its own (launched on arrival, a second read of
 * the slot across PCIe after the block's barrier). */
__device__ __forceinline__ int32_t qrt_event(const uint8_t *p, uint32_t d, uint32_t nd, int packed,
                                             uint32_t *pad) {
  if (!packed)
    return ((const int32_t *)p)[d];
  const uint8_t b = p[d >> 3];
  if (d == nd - 1u)
    *pad = qrt_bits_padding(b, nd);
  return (int32_t)((b >> (d & 7u)) & 1u);
}

__device__ __forceinline__ void qrt_ingest_body(const uint8_t *slot, int32_t *__restrict__ dst, uint32_t nd,
                                                int packed, uint32_t first, uint32_t stride, uint32_t *stats) {
  __shared__ int ok_s;
  const qrt_payload_t fmt = packed ? QRT_PAYLOAD_BITS : QRT_PAYLOAD_INT32;
  const uint32_t want = qrt_payload_len(fmt, nd);
  const uint8_t *p = slot + CUDAQ_RPC_HEADER_SIZE;
  int32_t v[kPre];
  uint32_t pad = 0; /* the padding bits set, where this thread reads detector nd - 1 */
#pragma unroll
  for (int k = 0; k < kPre; k++) {
    const uint32_t d = first + (uint32_t)k * stride;
    v[k] = d < nd ? qrt_event(p, d, nd, packed, &pad) : 0;
  }
  if (threadIdx.x == 0)
    ok_s = ((const volatile cudaq_rpc_header_t *)slot)->arg_len == want;
  __syncthreads();
  const bool ok = ok_s;
  uint32_t bad = 0, count = 0;
#pragma unroll
  for (int k = 0; k < kPre; k++) {
    const uint32_t d = first + (uint32_t)k * stride;
    const int32_t x = ok ? v[k] : 0;
    bad |= qrt_int32_bad_bits(x);
    count += (uint32_t)x & 1u;
    if (d < nd)
      dst[d] = x;
  }
  for (uint32_t d = first + (uint32_t)kPre * stride; d < nd; d += stride) {
    const int32_t x = ok ? qrt_event(p, d, nd, packed, &pad) : 0;
    bad |= qrt_int32_bad_bits(x);
    count += (uint32_t)x & 1u;
    dst[d] = x;
  }
  if (!ok)
    return; /* block-uniform: no verdict, the CPU stage refuses the length */
  bad |= pad;
  bad = __reduce_or_sync(0xffffffffu, bad);
  count = __reduce_add_sync(0xffffffffu, count);
  if ((threadIdx.x & 31u) == 0 && (bad || count)) {
    /* Device-scope RMWs on device memory; read by the publish kernel, which
     * the graph orders after this kernel (and after the inference). */
    if (bad)
      atomicOr(&stats[0], 1u);
    if (count)
      atomicAdd(&stats[1], count);
  }
}

/* ingest, launched on arrival: mailbox -> slot -> INT32 events in dst. The
 * dispatcher stores the slot's address (in the RX ring, or the gate's copy
 * with gpu_prelaunch behind the gate kernel) into the mailbox before it
 * launches the graph; the launch orders that store before this read. */
__global__ void qrt_ingest_kernel(void *const *mailbox, int32_t *__restrict__ dst, uint32_t nd,
                                  int packed, qrt_gpu_result_t *out, uint32_t *stats) {
  __shared__ const uint8_t *slot;
  cudaq_nn_pdl_launch_dependents(); /* launched on arrival: the request is here */
  if (threadIdx.x == 0) {
    if (blockIdx.x == 0)
      out->t_start_ns = qrt_now_ns(); /* published with the rest by the publish kernel's R_gpu */
    slot = (const uint8_t *)*(void *const volatile *)mailbox;
  }
  __syncthreads();
  qrt_ingest_body(slot, dst, nd, packed, blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x, stats);
}

/* ingest, pre-launched and waiting at the gate itself (waits_at_gate): the
 * pipeline's cudaq_pipeline_gate_wait, whose rules this kernel keeps (one
 * block, every thread calls it once per run), copies the request into
 * device memory, and the events are read from that copy. (Read in the ring
 * instead, with cudaq_pipeline_gate_wait_in_ring, the d = 13 request took
 * 11-14 us longer on the H200; the gate's copy is one round of 16-byte
 * loads.) A release at stop gives an empty request (arg_len 0): zeros, and
 * no CPU stage runs for it. */
__global__ void __launch_bounds__(kGatedThreads) qrt_ingest_gated_kernel(cudaq_pipeline_gate_t gate,
                                                                         int32_t *__restrict__ dst, uint32_t nd,
                                                                         int packed, qrt_gpu_result_t *out,
                                                                         uint32_t *stats) {
  const uint8_t *slot = cudaq_pipeline_gate_wait(gate);
  /* Past the gate, never before: a next kernel started early would hold its
   * SMs for as long as the graph waits for a request. */
  cudaq_nn_pdl_launch_dependents();
  if (threadIdx.x == 0)
    out->t_start_ns = qrt_now_ns(); /* past the gate; published by the publish kernel's R_gpu */
  qrt_ingest_body(slot, dst, nd, packed, threadIdx.x, blockDim.x, stats);
}

/* publish: one block of a multiple of 32 threads (at most 1,024). Compacts
 * the nonzero elements of events[nd] into the ascending index list after
 * the header of out (mapped memory), packs the frame, flags any element
 * that is not 0/1, then publishes with a release store of the ready flag.
 * Weighted (ne > 0 edge logits): first every logit is copied after the list
 * (QRT_GPU_LOGITS) and checked finite, and the edges whose logit lies
 * between 0 and the model's threshold (its residual applied logit >
 * threshold, the weights are for the residual of threshold 0) flip their
 * detectors in a bitmap in shared memory (dynamic, one bit per detector)
 * and their observables into the frame; the compaction lists events XOR
 * bitmap. The engine's outputs are not written.
 * Each thread takes a run of at most kPubRun consecutive elements (one
 * round for nd <= kPubRun x blockDim.x: 32,768 at 1,024 threads), so a
 * round is one block-wide scan of the threads' counts (shuffles in each
 * warp, then warp 0 over the warps' sums) and three barriers; it was a
 * chunk of blockDim.x elements with a serial scan over the warps per
 * chunk (d = 13: three chunks, 2.7-2.9 us for the whole kernel). */
constexpr uint32_t kPubRun = 32;

struct qrt_fold_args {
  const float *logits;              /* the engine's edge-logit output (device), ne of them */
  uint32_t ne;                      /* 0: not weighted */
  int vec;                          /* logits 16-byte aligned: read as float4 */
  float threshold;                  /* the model's decision threshold */
  const int32_t *ends;              /* 2 ne: each logit's edge's detectors (-1: the boundary) */
  const unsigned long long *obs;    /* ne: its observables */
};

constexpr int kFoldVec = 4; /* float4s of logits a publish thread holds at once */

/* One logit of the weighted fold: an edge whose logit lies between 0 and the
 * model's threshold flips its detectors' bits and adds its observables.
 * Returns 1 for a NaN or infinite logit (a bad output). */
__device__ __forceinline__ uint32_t qrt_fold_one(const qrt_fold_args &fold, float x, uint32_t i, uint32_t *flip,
                                                 unsigned long long *fold_obs) {
  if (cudaq_predecoder_logit_folds(x, fold.threshold)) {
    const int32_t a = fold.ends[2 * i], b = fold.ends[2 * i + 1];
    atomicXor(&flip[a >> 5], 1u << (a & 31));
    if (b >= 0)
      atomicXor(&flip[b >> 5], 1u << (b & 31));
    atomicXor(fold_obs, fold.obs[i]);
  }
  return (uint32_t)cudaq_predecoder_logit_bad(x);
}

__global__ void __launch_bounds__(kPublishThreads) qrt_publish_kernel(const int32_t *__restrict__ events, uint32_t nd,
                                   const int32_t *__restrict__ frame, uint32_t nobs,
                                   qrt_gpu_result_t *out, int *ready, uint32_t *stats, qrt_fold_args fold) {
  __shared__ uint32_t warp_sum[32];
  __shared__ uint32_t frame_half[2];
  __shared__ unsigned long long fold_obs;
  extern __shared__ uint32_t flip[]; /* weighted: (nd + 31) / 32 words */
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  const unsigned nwarps = blockDim.x >> 5;
  uint32_t *list = (uint32_t *)(out + 1);
  /* Launched with PDL, this kernel may start while the one before it (the
   * predecoder's tail, or ingest) still runs: nothing it wrote is read
   * before this wait returns (that grid completed, its stores visible). */
  cudaq_nn_pdl_wait();
  const uint64_t t_pub = threadIdx.x == 0 ? qrt_now_ns() : 0;
  uint32_t bad_t = 0;
  /* The frame: observables 0-31 by warp 0's ballot, 32-63 by warp 1's. */
  if (warp < 2) {
    const uint32_t o = threadIdx.x;
    const int32_t f = frame && o < nobs ? frame[o] : 0;
    bad_t |= qrt_int32_bad_bits(f); /* the model's outputs keep the request rule: 0 or 1 */
    const uint32_t bits = __ballot_sync(0xffffffffu, f & 1);
    if (lane == 0)
      frame_half[warp] = bits;
  }
  if (fold.ne) {
    const uint32_t nwords = (nd + 31u) >> 5;
    for (uint32_t i = threadIdx.x; i < nwords; i += blockDim.x)
      flip[i] = 0;
    if (threadIdx.x == 0)
      fold_obs = 0;
    __syncthreads(); /* the bitmap is clear */
    float *dst = (float *)(list + QRT_GPU_LOGITS_AT(nd)); /* 16-byte aligned (qrt_worker.h) */
    /* Four logits a float4, up to kFoldVec of them a thread in flight: the loads are issued
     * before any store to mapped memory (one at a time they cost a d = 13 request ~4 us). */
    const uint32_t nv = fold.vec ? fold.ne / 4u : 0u;
    for (uint32_t base = 0; base < nv; base += kFoldVec * blockDim.x) {
      float4 v[kFoldVec];
#pragma unroll
      for (int r = 0; r < kFoldVec; r++) {
        const uint32_t i = base + (uint32_t)r * blockDim.x + threadIdx.x;
        if (i < nv)
          v[r] = reinterpret_cast<const float4 *>(fold.logits)[i];
      }
#pragma unroll
      for (int r = 0; r < kFoldVec; r++) {
        const uint32_t i = base + (uint32_t)r * blockDim.x + threadIdx.x;
        if (i >= nv)
          continue;
        reinterpret_cast<float4 *>(dst)[i] = v[r]; /* published by the release below with the list */
        bad_t |= qrt_fold_one(fold, v[r].x, 4u * i, flip, &fold_obs) | qrt_fold_one(fold, v[r].y, 4u * i + 1u, flip, &fold_obs) |
                 qrt_fold_one(fold, v[r].z, 4u * i + 2u, flip, &fold_obs) | qrt_fold_one(fold, v[r].w, 4u * i + 3u, flip, &fold_obs);
      }
    }
    for (uint32_t i = 4u * nv + threadIdx.x; i < fold.ne; i += blockDim.x) { /* the rest, one at a time */
      const float x = fold.logits[i];
      dst[i] = x;
      bad_t |= qrt_fold_one(fold, x, i, flip, &fold_obs);
    }
    __syncthreads(); /* the bitmap and fold_obs are complete */
  }
  uint32_t run = 0; /* elements listed by the rounds before (the same in every thread) */
  for (uint32_t base = 0; base < nd; base += kPubRun * blockDim.x) {
    const uint32_t span = nd - base < kPubRun * blockDim.x ? nd - base : kPubRun * blockDim.x;
    const uint32_t per = (span + blockDim.x - 1u) / blockDim.x; /* <= kPubRun */
    const uint32_t lo = base + threadIdx.x * per;
    const uint32_t end = base + span, hi = lo + per < end ? lo + per : end;
    uint32_t mask = 0;
    for (uint32_t d = lo; d < hi; d++) {
      const int32_t v = events[d];
      bad_t |= qrt_int32_bad_bits(v);
      const uint32_t f = fold.ne ? (flip[d >> 5] >> (d & 31u)) & 1u : 0u;
      mask |= ((uint32_t)(v != 0) ^ f) << (d - lo);
    }
    const uint32_t c = (uint32_t)__popc(mask);
    uint32_t incl = c; /* inclusive scan of the counts in the warp */
    for (unsigned o = 1; o < 32; o <<= 1) {
      const uint32_t t = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o)
        incl += t;
    }
    if (lane == 31)
      warp_sum[warp] = incl;
    __syncthreads(); /* the warps' sums are in */
    if (warp == 0) { /* inclusive scan of the warps' sums */
      uint32_t w = lane < nwarps ? warp_sum[lane] : 0;
      for (unsigned o = 1; o < 32; o <<= 1) {
        const uint32_t t = __shfl_up_sync(0xffffffffu, w, o);
        if (lane >= o)
          w += t;
      }
      if (lane < nwarps)
        warp_sum[lane] = w;
    }
    __syncthreads(); /* the scanned sums are in */
    uint32_t at = run + (warp ? warp_sum[warp - 1] : 0u) + incl - c;
    for (uint32_t m = mask; m; m &= m - 1u)
      list[at++] = lo + (uint32_t)__ffs(m) - 1u;
    run += warp_sum[nwarps - 1];
    __syncthreads(); /* warp_sum is read above and rewritten by the next round */
  }
  /* Every list store and frame_half come before thread 0's release. */
  const int bad = __syncthreads_or(bad_t != 0);
  if (threadIdx.x != 0)
    return;
  /* The ingest kernel's verdict and count (stream order: it ran before this
   * kernel), moved into the header and cleared for the next request. */
  const uint32_t bad_in = stats[0], events_in = stats[1];
  stats[0] = 0;
  stats[1] = 0;
  out->status = (bad ? QRT_GPU_BAD_OUTPUT : 0u) | (bad_in ? QRT_GPU_BAD_INPUT : 0u);
  out->events_in = events_in;
  out->count = run;
  out->frame = ((uint64_t)frame_half[0] | (nobs > 32 ? (uint64_t)frame_half[1] << 32 : 0u)) ^
               (fold.ne ? (uint64_t)fold_obs : 0u);
  out->t_publish_ns = t_pub;
  out->t_ready_ns = qrt_now_ns();
  /* R_gpu ("the graph's release store of 1" of src/pipeline/pipeline.c):
   * publishes the header, the index list and (weighted) the logits (the other threads' stores are
   * ordered before this one by the barrier above; a system-scope release is
   * cumulative) to the CPU worker, whose claim CAS(1 -> 2), A8 in
   * pipeline.c, acquires it. A plain store, no RMW on mapped memory. */
  cuda::atomic_ref<int, cuda::thread_scope_system>(*ready).store(1, cuda::memory_order_release);
}

#define QRT_CK(x)                                                                           \
  do {                                                                                      \
    cudaError_t e_ = (x);                                                                   \
    if (e_ != cudaSuccess) {                                                                \
      fprintf(stderr, "qec-realtime: worker %d: %s: %s\n", id, #x, cudaGetErrorString(e_)); \
      return 1;                                                                             \
    }                                                                                       \
  } while (0)

extern "C" int qrt_gpu_stage_create(const qrt_gpu_config_t *cfg, qrt_gpu_stage_t **out, char *msg,
                                    size_t msg_len) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    snprintf(msg, msg_len, "no CUDA device (the GPU modes need one; --mode cpu runs without)");
    return 1;
  }
  if (cfg->num_observables > 64) {
    snprintf(msg, msg_len, "%u observables: the response holds at most 64", cfg->num_observables);
    return 1;
  }
  qrt_gpu_stage_t *st = (qrt_gpu_stage_t *)calloc(1, sizeof *st);
  if (!st) {
    snprintf(msg, msg_len, "out of memory");
    return 1;
  }
  st->cfg = *cfg;
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
    snprintf(st->device_name, sizeof st->device_name, "%s", prop.name);
  if (cfg->kind == QRT_GPU_HYBRID) {
    cudaq_nn_error_t nerr;
    nerr.message[0] = '\0';
    cudaq_nn_status_t nst = cudaq_nn_model_load_file(cfg->model, &st->model, &nerr);
    if (nst) {
      snprintf(msg, msg_len, "%s", nerr.message[0] ? nerr.message : cudaq_nn_status_str(nst));
      free(st);
      return 1;
    }
    cudaq_predecoder_error_t perr;
    perr.message[0] = '\0';
    int bad = cudaq_predecoder_check_model(st->model, cfg->num_detectors, cfg->num_observables, &perr) ||
              (cfg->graph && cudaq_predecoder_check_layout(st->model, cfg->graph, NULL, &perr));
    /* Weighted: the edge map onto the workers' graph (AUTO without edge logits: none); its
     * detectors index the publish kernel's bitmap of num_detectors bits */
    if (!bad && cfg->match_graph && cfg->weights != CUDAQ_PREDECODER_WEIGHTS_OFF) {
      if (cudaq_mwpm_graph_num_nodes(cfg->match_graph) != cfg->num_detectors) {
        snprintf(perr.message, sizeof perr.message, "the matching graph has %u detectors, the requests %u",
                 cudaq_mwpm_graph_num_nodes(cfg->match_graph), cfg->num_detectors);
        bad = 1;
      } else {
        bad = cudaq_predecoder_edge_map_create(st->model, cfg->match_graph, cfg->weights, &st->map, &perr) !=
              CUDAQ_PREDECODER_OK;
      }
    }
    /* The residual and frame, and the edge logits where weighted: the outputs past them are
     * neither computed nor copied */
    if (!bad && cudaq_nn_model_keep_outputs(st->model, st->map.num_edges ? st->map.logits_output + 1 : 2)) {
      snprintf(perr.message, sizeof perr.message, "out of memory");
      bad = 1;
    }
    const size_t ne = st->map.num_edges;
    if (!bad && ne &&
        (cudaMalloc(&st->d_ends, 2 * ne * sizeof *st->d_ends) != cudaSuccess ||
         cudaMalloc(&st->d_obs, ne * sizeof *st->d_obs) != cudaSuccess ||
         cudaMemcpy(st->d_ends, st->map.ends, 2 * ne * sizeof *st->d_ends, cudaMemcpyHostToDevice) !=
             cudaSuccess ||
         cudaMemcpy(st->d_obs, st->map.obs, ne * sizeof *st->d_obs, cudaMemcpyHostToDevice) != cudaSuccess)) {
      snprintf(perr.message, sizeof perr.message, "weighted matching: device memory for the edge map: %s",
               cudaGetErrorString(cudaGetLastError()));
      bad = 1;
    }
    if (bad) {
      snprintf(msg, msg_len, "%s", perr.message);
      qrt_gpu_stage_destroy(st);
      return 1;
    }
  }
  *out = st;
  return 0;
}

extern "C" int qrt_gpu_factory(void *user, int id, cudaq_gpu_worker_resources_t *r) {
  qrt_gpu_stage_t *st = (qrt_gpu_stage_t *)user;
  const qrt_gpu_config_t *c = &st->cfg;
  qrt_gpu_worker *w = &st->w[id];
  memset(w, 0, sizeof *w);
  if (id + 1 > st->nw)
    st->nw = id + 1; /* destroy frees what a failed factory left */
  if (!r->ready_flag_dev || !r->mailbox_dev) {
    fprintf(stderr, "qec-realtime: worker %d: the pipeline gave no mapped ready flag / mailbox\n",
            id);
    return 1;
  }
  const uint32_t nd = c->num_detectors;
  const int32_t *frame = nullptr;
  qrt_fold_args fold = {};
  QRT_CK(cudaStreamCreateWithFlags(&w->stream, cudaStreamNonBlocking));
  if (c->kind == QRT_GPU_HYBRID) {
    cudaq_nn_gpu_options_t go;
    cudaq_nn_gpu_options_init(&go);
    go.precision = c->fp16 ? CUDAQ_NN_FP16 : CUDAQ_NN_FP32;
    go.concurrent = c->concurrent > 1 ? c->concurrent : 1;
    char plan[4096];
    if (c->plan_dir) {
      const char *base = strrchr(c->model, '/');
      snprintf(plan, sizeof plan, "%s/%s.%s.c%d.plan", c->plan_dir, base ? base + 1 : c->model,
               c->fp16 ? "fp16" : "fp32", go.concurrent); /* the plan's key names the concurrency too */
      go.plan_path = plan; /* worker 0 selects and writes it, the others read it */
    }
    cudaq_nn_error_t nerr;
    nerr.message[0] = '\0';
    cudaq_nn_status_t nst = cudaq_nn_gpu_create(st->model, &go, &w->engine, &nerr);
    if (nst) {
      fprintf(stderr, "qec-realtime: worker %d: GPU engine: %s\n", id,
              nerr.message[0] ? nerr.message : cudaq_nn_status_str(nst));
      return 1;
    }
    w->d_events = (int32_t *)cudaq_nn_gpu_input(w->engine, 0);
    w->dev_bytes = cudaq_nn_gpu_device_bytes(w->engine);
    frame = (const int32_t *)cudaq_nn_gpu_output(w->engine, 1);
    if (st->map.num_edges) { /* weighted: the logits fold into the residual and go to the worker */
      fold.logits = (const float *)cudaq_nn_gpu_output(w->engine, st->map.logits_output);
      fold.ne = (uint32_t)st->map.num_edges;
      fold.vec = ((uintptr_t)fold.logits & 15u) == 0;
      fold.threshold = st->map.threshold;
      fold.ends = st->d_ends;
      fold.obs = st->d_obs;
      char msg[300];
      if (qrt_worker_set_edge_map(c->cpu_workers[id], &st->map, msg, sizeof msg)) {
        fprintf(stderr, "qec-realtime: worker %d: %s\n", id, msg);
        return 1;
      }
    }
    if (id == 0)
      cudaq_nn_gpu_describe(w->engine, st->describe, sizeof st->describe);
  } else {
    const size_t ev_bytes = (size_t)nd * sizeof(int32_t);
    QRT_CK(cudaMalloc(&w->d_events, ev_bytes));
    w->dev_bytes = ev_bytes; /* counted once allocated */
  }
  QRT_CK(cudaMalloc(&w->d_stats, 2 * sizeof(uint32_t)));
  QRT_CK(cudaMemset(w->d_stats, 0, 2 * sizeof(uint32_t))); /* legacy stream: done before any graph runs */
  QRT_CK(cudaDeviceSynchronize());
  const size_t out_bytes = sizeof(qrt_gpu_result_t) +
                           (fold.ne ? QRT_GPU_LOGITS_AT(nd) * sizeof(uint32_t) + (size_t)fold.ne * sizeof(float)
                                    : (size_t)nd * sizeof(uint32_t)); /* QRT_GPU_LOGITS */
  QRT_CK(cudaHostAlloc(&w->h_out, out_bytes, cudaHostAllocMapped));
  memset(w->h_out, 0, out_bytes);
  QRT_CK(cudaHostGetDevicePointer((void **)&w->h_out_dev, w->h_out, 0));
  const int32_t *published =
      c->kind == QRT_GPU_HYBRID ? (const int32_t *)cudaq_nn_gpu_output(w->engine, 0) : w->d_events;

  /* The graph: ingest -> [the engine's kernels] -> publish, captured as one
   * stream of kernels (cudaq_nn_gpu_enqueue, not the engine's graph as a
   * child node), the engine's kernels and publish launched with PDL: each
   * may start while the kernel before it finishes (cudaq_nn_pdl_wait). */
  cudaGraph_t g = nullptr;
  unsigned blocks = (nd + kIngestThreads - 1) / kIngestThreads;
  const int packed = c->payload == QRT_PAYLOAD_BITS;
  const int gated = r->gate && c->self_gate; /* gpu_prelaunch given, and asked for */
  QRT_CK(cudaStreamBeginCapture(w->stream, cudaStreamCaptureModeThreadLocal));
  if (gated) /* one block: a waiting kernel holds its SMs (pipeline.h) */
    qrt_ingest_gated_kernel<<<1, kGatedThreads, 0, w->stream>>>(*r->gate, w->d_events, nd, packed,
                                                                w->h_out_dev, w->d_stats);
  else
    qrt_ingest_kernel<<<blocks ? blocks : 1, kIngestThreads, 0, w->stream>>>(r->mailbox_dev, w->d_events,
                                                                             nd, packed, w->h_out_dev, w->d_stats);
  cudaq_nn_error_t nerr;
  nerr.message[0] = '\0';
  const cudaq_nn_status_t nst =
      c->kind == QRT_GPU_HYBRID ? cudaq_nn_gpu_enqueue(w->engine, w->stream, &nerr) : CUDAQ_NN_OK;
  cudaLaunchAttribute pdl;
  pdl.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  pdl.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t pub = {};
  pub.gridDim = dim3(1);
  pub.blockDim = dim3(kPublishThreads);
  pub.stream = w->stream;
  pub.dynamicSmemBytes = fold.ne ? ((size_t)nd + 31u) / 32u * sizeof(uint32_t) : 0; /* the fold's bitmap */
  if (pub.dynamicSmemBytes > 48u * 1024u) /* past the default limit (over 393,216 detectors) */
    QRT_CK(cudaFuncSetAttribute(qrt_publish_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)pub.dynamicSmemBytes));
  pub.attrs = &pdl;
  pub.numAttrs = cudaq_nn_pdl_enabled() ? 1 : 0; /* as the engine's kernels */
  const cudaError_t pe = cudaLaunchKernelEx(&pub, qrt_publish_kernel, published, nd, frame, c->num_observables,
                                            w->h_out_dev, r->ready_flag_dev, w->d_stats, fold);
  const cudaError_t ce = cudaStreamEndCapture(w->stream, &g);
  if (nst || pe != cudaSuccess || ce != cudaSuccess) {
    if (g)
      cudaGraphDestroy(g);
    if (nst) {
      fprintf(stderr, "qec-realtime: worker %d: recording the inference: %s\n", id,
              nerr.message[0] ? nerr.message : cudaq_nn_status_str(nst));
      return 1;
    }
    QRT_CK(pe);
    QRT_CK(ce);
  }
  QRT_CK(cudaGraphInstantiate(&w->exec, g, 0));
  w->graph = g;
  QRT_CK(cudaGraphUpload(w->exec, w->stream));
  QRT_CK(cudaStreamSynchronize(w->stream));
  r->graph_exec = w->exec;
  r->graph = w->graph;
  r->stream = w->stream;
  r->function_id = c->function_id;
  r->user_context = c->cpu_workers[id];
  r->waits_at_gate = gated;
  r->gpu_output_host = w->h_out;
  r->gpu_output_size = out_bytes;
  return 0;
}

extern "C" size_t qrt_gpu_stage_device_bytes(const qrt_gpu_stage_t *st) {
  size_t sum = 0;
  for (int i = 0; st && i < st->nw; i++) sum += st->w[i].dev_bytes;
  if (st && st->map.num_edges) /* the weighted fold's edge ends and observables, shared */
    sum += st->map.num_edges * (2 * sizeof *st->d_ends + sizeof *st->d_obs);
  return sum;
}

extern "C" const char *qrt_gpu_stage_device_name(const qrt_gpu_stage_t *st) {
  return st ? st->device_name : "";
}

extern "C" const char *qrt_gpu_stage_describe(const qrt_gpu_stage_t *st) {
  return st ? st->describe : "";
}

extern "C" void qrt_gpu_stage_destroy(qrt_gpu_stage_t *st) {
  if (!st)
    return;
  for (int i = 0; i < st->nw; i++) {
    qrt_gpu_worker *w = &st->w[i];
    if (w->stream)
      cudaStreamSynchronize(w->stream);
    if (w->exec)
      cudaGraphExecDestroy(w->exec);
    if (w->graph)
      cudaGraphDestroy(w->graph);
    if (w->engine)
      cudaq_nn_gpu_destroy(w->engine);
    else
      cudaFree(w->d_events);
    if (w->h_out)
      cudaFreeHost(w->h_out);
    cudaFree(w->d_stats);
    if (w->stream)
      cudaStreamDestroy(w->stream);
  }
  cudaq_nn_model_destroy(st->model);
  cudaq_predecoder_edge_map_release(&st->map);
  cudaFree(st->d_ends);
  cudaFree(st->d_obs);
  free(st);
}
