/*
 * bench_nn_device_launch.cu - a predecoder served from a host ring by the
 * graph-launch dispatcher, with no host API call per request (issues 11 and
 * 12: the predecoder launched from the persistent dispatch kernel, measured
 * against the host's graph replay in the same run).
 *
 * Per request: the host writes the detection events (INT32, the model's
 * input 0) into an RX slot and signals it; the persistent graph-launch
 * dispatcher (src/cuda/graph_dispatch.cu) reads and stages the request and
 * launches, from the device, a graph of three parts: a kernel that copies
 * the staged events into the engine's input buffer, the NN engine's own
 * inference graph as a child graph, and a kernel that copies every output
 * (residual, frame) into the TX slot and publishes it
 * (cudaq_graph_io_complete). The host sees the TX flag and reads the
 * outputs. Every answer is compared with the same engine run from the host
 * on the same events before the dispatcher starts.
 *
 * Rows, one run, one GPU (p50 etc. in us):
 *   device launch   the round trip above, one request in flight, back to
 *                   back and paced (one request --interval us after each
 *                   answer), each with the handler graph launched on
 *                   arrival and pre-launched (cudaq_dispatch_graph_set_prelaunch:
 *                   launched while the dispatcher waits, released by a gate),
 *                   alone and as --instances handler graphs taking turns
 *                   (cudaq_dispatch_graph_add_prelaunch_instance; each over
 *                   an engine, buffers and I/O context of its own);
 *   host replay     cudaq_nn_gpu_launch + cudaStreamSynchronize (inference
 *                   only, inputs already on the GPU: bench_nn_gpu's figure);
 *   host run        cudaq_nn_gpu_run (copy in, replay, copy out, wait).
 *
 * Usage: bench_nn_device_launch MODEL.onnx [--requests N] [--plan DIR] [--cpu C] [--density P] [--interval US]
 *        [--instances N]
 * Exit 77 without a GPU; 1 with a message when the engine's graph cannot be
 * launched from the device.
 */
#include <cuda_runtime.h>

#include <algorithm>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "../bench_common.h"
#include "../bench_cuda_check.h"
#include "cudaq/nn/gpu_engine.h"
#include "cudaq/nn/nn.h"
#include "cudaq/realtime/cudaq_realtime.h"
#include "cudaq/realtime/dispatch_kernel.h"

#define CK BENCH_CUDA_CK

static const uint32_t FN_PREDECODE = cudaq_fnv1a_hash("predecode");
constexpr int MAX_OUT = 4;

/* The engine's buffers, as the two copy kernels see them (4-byte words:
 * every binding of an INT32 / float model is a multiple of 4 bytes). */
struct io_bufs {
  uint32_t *in;
  uint32_t in_words;
  int n_out;
  const uint32_t *out[MAX_OUT];
  uint32_t out_words[MAX_OUT];
};

/* Request payload -> the engine's input 0, in one block of COPY_THREADS
 * threads with COPY_UNROLL loads each issued before their stores (a
 * request larger than the dispatcher's 2 KiB staging copy is read across
 * PCIe, where a loop of dependent rounds would cost a round trip each).
 * One block: while it waits at its gate (pre-launched) it holds as little
 * of the GPU as a waiting graph can, since another instance's inference
 * may be running meanwhile (measured: a 9-block copy kernel waiting beside
 * a d = 13 inference slowed it by ~18 us). The dispatcher checked the
 * length against the handler's schema (in_words * 4 bytes). */
constexpr uint32_t COPY_THREADS = 1024, COPY_UNROLL = 4;
__global__ void k_copy_in(cudaq_graph_io_context *io, io_bufs b) {
  /* The pre-launched rows launch this graph ahead of its request: wait at
   * the gate (passes at once when launched on arrival). A cancelled launch
   * reads and answers scratch memory. */
  cudaq_graph_io_wait(io);
  const uint32_t *src = reinterpret_cast<const uint32_t *>(io->rx_slot + CUDAQ_RPC_HEADER_SIZE);
  for (uint32_t base = 0; base < b.in_words; base += COPY_THREADS * COPY_UNROLL) {
    uint32_t v[COPY_UNROLL];
#pragma unroll
    for (uint32_t u = 0; u < COPY_UNROLL; ++u) {
      const uint32_t i = base + u * COPY_THREADS + threadIdx.x;
      v[u] = i < b.in_words ? src[i] : 0u;
    }
#pragma unroll
    for (uint32_t u = 0; u < COPY_UNROLL; ++u) {
      const uint32_t i = base + u * COPY_THREADS + threadIdx.x;
      if (i < b.in_words) b.in[i] = v[u];
    }
  }
}

/* Every output, in order, -> the TX slot's payload; then the response. */
__global__ void k_copy_out(cudaq_graph_io_context *io, io_bufs b) {
  uint32_t *dst = reinterpret_cast<uint32_t *>(io->tx_slot + CUDAQ_RPC_HEADER_SIZE);
  uint32_t at = 0;
  for (int o = 0; o < b.n_out; ++o) {
    for (uint32_t i = threadIdx.x; i < b.out_words[o]; i += blockDim.x) dst[at + i] = b.out[o][i];
    at += b.out_words[o];
  }
  __syncthreads(); /* every result word is written before thread 0 publishes */
  if (threadIdx.x == 0) cudaq_graph_io_complete(io, 0, at * 4u);
}

/* One handler graph over one engine: copy in -> the engine's graph (child)
 * -> copy out, reading its own I/O context. */
struct handler {
  cudaq_nn_gpu_t *g;
  io_bufs b;
  cudaq_graph_io_context *io;
  cudaGraph_t hg;
  cudaGraphExec_t hge;
};

/* The engine's bindings as the copy kernels see them. */
static io_bufs engine_bufs(cudaq_nn_gpu_t *g, uint32_t in_words, const std::vector<size_t> &out_sz) {
  io_bufs b = {};
  b.in = static_cast<uint32_t *>(cudaq_nn_gpu_input(g, 0));
  b.in_words = in_words;
  b.n_out = (int)out_sz.size();
  for (size_t k = 0; k < out_sz.size(); ++k) {
    b.out[k] = static_cast<const uint32_t *>(cudaq_nn_gpu_output(g, k));
    b.out_words[k] = (uint32_t)(out_sz[k] / 4);
  }
  return b;
}

/* Builds h's I/O context and handler graph (instantiated for device launch
 * and uploaded); false with a message when the engine's graph cannot be
 * launched from the device. */
static bool build_handler(handler &h, cudaStream_t s) {
  CK(cudaMalloc(&h.io, sizeof *h.io));
  CK(cudaMemset(h.io, 0, sizeof *h.io));
  CK(cudaGraphCreate(&h.hg, 0));
  cudaGraphNode_t n_in, n_nn, n_outn;
  cudaKernelNodeParams kp = {};
  void *args[] = {&h.io, &h.b};
  kp.func = (void *)k_copy_in;
  kp.gridDim = dim3(1);
  kp.blockDim = dim3(COPY_THREADS);
  kp.kernelParams = args;
  CK(cudaGraphAddKernelNode(&n_in, h.hg, nullptr, 0, &kp));
  CK(cudaGraphAddChildGraphNode(&n_nn, h.hg, &n_in, 1, (cudaGraph_t)cudaq_nn_gpu_graph(h.g)));
  kp.func = (void *)k_copy_out;
  kp.gridDim = dim3(1);
  kp.blockDim = dim3(256);
  CK(cudaGraphAddKernelNode(&n_outn, h.hg, &n_nn, 1, &kp));
  cudaError_t ie = cudaGraphInstantiateWithFlags(&h.hge, h.hg, cudaGraphInstantiateFlagDeviceLaunch);
  if (ie != cudaSuccess) {
    fprintf(stderr, "the engine's graph cannot be launched from the device: %s\n", cudaGetErrorString(ie));
    return false;
  }
  CK(cudaGraphUpload(h.hge, s));
  CK(cudaStreamSynchronize(s));
  return true;
}

static uint64_t now_ns() { return bench_now_ns(); }

static void report(const char *name, std::vector<uint64_t> &v) {
  bench_print_row(name, v.size(), bench_percentiles(v.data(), v.size()));
  fflush(stdout);
}

int main(int argc, char **argv) {
  const char *model_path = NULL, *plan_dir = NULL;
  uint32_t n = 20000;
  int cpu = 2;
  double density = 0.03;
  double interval = 30.0; /* the paced rows' gap, us (0: none) */
  uint32_t instances = 2;  /* handler graphs taking turns in the instance rows (1: no such rows) */
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--requests") && i + 1 < argc) n = (uint32_t)atoi(argv[++i]);
    else if (!strcmp(argv[i], "--plan") && i + 1 < argc) plan_dir = argv[++i];
    else if (!strcmp(argv[i], "--cpu") && i + 1 < argc) cpu = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--density") && i + 1 < argc) density = atof(argv[++i]);
    else if (!strcmp(argv[i], "--interval") && i + 1 < argc) interval = atof(argv[++i]);
    else if (!strcmp(argv[i], "--instances") && i + 1 < argc) instances = (uint32_t)atoi(argv[++i]);
    else if (argv[i][0] != '-' && !model_path) model_path = argv[i];
    else {
      fprintf(stderr, "usage: %s MODEL.onnx [--requests N] [--plan DIR] [--cpu C] [--density P] [--interval US]\n", argv[0]);
      return 2;
    }
  }
  if (!model_path || n == 0 || instances < 1 || instances > CUDAQ_GRAPH_PRELAUNCH_MAX_INSTANCES) {
    fprintf(stderr, "usage: %s MODEL.onnx [--requests N] [--plan DIR] [--cpu C] [--density P] [--interval US] "
            "[--instances 1..%u]\n", argv[0], CUDAQ_GRAPH_PRELAUNCH_MAX_INSTANCES);
    return 2;
  }
  BENCH_EXIT_IF_NO_GPU();
  if (bench_pin(cpu) != 0) fprintf(stderr, "cannot pin to CPU %d; running unpinned\n", cpu);

  /* The engine (FP16, plan cached when --plan is given). */
  cudaq_nn_model_t *m = NULL;
  cudaq_nn_error_t err;
  if (cudaq_nn_model_load_file(model_path, &m, &err) != CUDAQ_NN_OK) {
    fprintf(stderr, "%s: %s\n", model_path, err.message);
    return 1;
  }
  if (cudaq_nn_model_num_outputs(m) > 2) cudaq_nn_model_keep_outputs(m, 2); /* edge logits pruned */
  cudaq_nn_binding_t bin;
  cudaq_nn_model_input(m, 0, &bin);
  const size_t n_out = cudaq_nn_model_num_outputs(m);
  if (cudaq_nn_model_num_inputs(m) != 1 || bin.dtype != CUDAQ_NN_INT32 || n_out == 0 || n_out > MAX_OUT) {
    fprintf(stderr, "%s: one INT32 input and 1..%d outputs expected (the predecoder contract)\n", model_path, MAX_OUT);
    return 1;
  }
  cudaq_nn_gpu_options_t o;
  cudaq_nn_gpu_options_init(&o);
  o.precision = CUDAQ_NN_FP16;
  char plan[1024];
  if (plan_dir) {
    const char *base = strrchr(model_path, '/');
    snprintf(plan, sizeof plan, "%s/%s.fp16.auto.plan", plan_dir, base ? base + 1 : model_path);
    o.plan_path = plan;
  }
  cudaq_nn_gpu_t *g = NULL;
  if (cudaq_nn_gpu_create(m, &o, &g, &err) != CUDAQ_NN_OK) {
    fprintf(stderr, "engine: %s\n", err.message);
    return 1;
  }
  size_t out_bytes = 0;
  std::vector<size_t> out_sz(n_out);
  for (size_t k = 0; k < n_out; ++k) {
    cudaq_nn_binding_t ob;
    cudaq_nn_model_output(m, k, &ob);
    if (ob.size_bytes % 4) {
      fprintf(stderr, "output %zu: %zu bytes, not whole 4-byte words\n", k, ob.size_bytes);
      return 1;
    }
    out_sz[k] = ob.size_bytes;
    out_bytes += ob.size_bytes;
  }
  const io_bufs b = engine_bufs(g, (uint32_t)(bin.size_bytes / 4), out_sz);

  /* Inputs (events at the given density) and the host-run reference. */
  const int K = 64;
  srand(12345);
  std::vector<std::vector<int32_t>> ins(K, std::vector<int32_t>(b.in_words));
  std::vector<std::vector<uint8_t>> refs(K, std::vector<uint8_t>(out_bytes));
  for (int k = 0; k < K; ++k) {
    for (auto &v : ins[k]) v = (double)rand() / RAND_MAX < density;
    const void *in[1] = {ins[k].data()};
    const size_t in_sz[1] = {bin.size_bytes};
    std::vector<void *> outs(n_out);
    size_t at = 0;
    for (size_t j = 0; j < n_out; ++j) {
      outs[j] = refs[k].data() + at;
      at += out_sz[j];
    }
    if (cudaq_nn_gpu_run(g, in, in_sz, outs.data(), out_sz.data(), &err) != CUDAQ_NN_OK) {
      fprintf(stderr, "host run: %s\n", err.message);
      return 1;
    }
  }

  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  /* Host rows first (the dispatcher will occupy the GPU's attention later). */
  std::vector<uint64_t> lat(n);
  for (uint32_t i = 0; i < n + 500; ++i) {
    uint64_t t0 = now_ns();
    if (cudaq_nn_gpu_launch(g, s) != CUDAQ_NN_OK) exit(1);
    CK(cudaStreamSynchronize(s));
    if (i >= 500) lat[i - 500] = now_ns() - t0;
  }
  printf("predecoder %s, %u requests, %zu input bytes, %zu output bytes\n", model_path, n, bin.size_bytes, out_bytes);
  bench_print_header();
  report("host replay (launch + sync, inputs on GPU)", lat);
  for (uint32_t i = 0; i < n + 500; ++i) {
    const void *in[1] = {ins[i % K].data()};
    const size_t in_sz[1] = {bin.size_bytes};
    std::vector<uint8_t> got(out_bytes);
    std::vector<void *> outs(n_out);
    size_t at = 0;
    for (size_t j = 0; j < n_out; ++j) {
      outs[j] = got.data() + at;
      at += out_sz[j];
    }
    uint64_t t0 = now_ns();
    if (cudaq_nn_gpu_run(g, in, in_sz, outs.data(), out_sz.data(), &err) != CUDAQ_NN_OK) exit(1);
    if (i >= 500) lat[i - 500] = now_ns() - t0;
  }
  report("host run (copy in, replay, copy out, wait)", lat);

  /* The handler graphs: the first over the engine above; each further
   * instance over an engine of its own (instances run at once: one serves
   * while the next waits at its gate), the same plan. */
  std::vector<handler> hs(instances);
  for (uint32_t k = 0; k < instances; ++k) {
    hs[k].g = g;
    if (k > 0 && cudaq_nn_gpu_create(m, &o, &hs[k].g, &err) != CUDAQ_NN_OK) {
      fprintf(stderr, "engine %u: %s\n", k, err.message);
      return 1;
    }
    hs[k].b = engine_bufs(hs[k].g, b.in_words, out_sz);
    if (!build_handler(hs[k], s)) return 1;
  }
  cudaq_graph_io_context *io = hs[0].io;
  const cudaGraphExec_t hge = hs[0].hge;

  /* Ring, function table (schema: exactly the model's input), dispatcher. */
  const uint32_t slots = 8;
  const size_t payload = std::max(bin.size_bytes, out_bytes);
  cudaq_ringbuffer_t rb;
  if (cudaq_host_ringbuffer_alloc(&rb, slots, (uint32_t)((CUDAQ_RPC_HEADER_SIZE + payload + 63) & ~(size_t)63),
                                  CUDAQ_RING_ALLOC_MAPPED) != CUDAQ_OK) {
    fprintf(stderr, "ring: %s\n", cudaq_last_error());
    return 1;
  }
  cudaq_function_entry_t h;
  memset(&h, 0, sizeof h);
  h.handler.graph_exec = hge;
  h.function_id = FN_PREDECODE;
  h.dispatch_mode = CUDAQ_DISPATCH_GRAPH_LAUNCH;
  h.schema.num_args = 1;
  h.schema.args[0].type_id = CUDAQ_TYPE_ARRAY_INT32;
  h.schema.args[0].num_elements = b.in_words;
  h.schema.args[0].size_bytes = (uint32_t)bin.size_bytes;
  cudaq_function_entry_t *dt;
  CK(cudaMalloc(&dt, sizeof h));
  CK(cudaMemcpy(dt, &h, sizeof h, cudaMemcpyHostToDevice));
  int *flag;
  uint64_t *stats;
  CK(cudaMalloc(&flag, sizeof(int)));
  CK(cudaMalloc(&stats, sizeof(uint64_t)));
  CK(cudaMemset(stats, 0, sizeof(uint64_t)));
  if (cudaq_dispatch_set_shutdown_flag(flag, 0) != CUDAQ_OK) return 1;
  cudaStream_t ds;
  CK(cudaStreamCreateWithFlags(&ds, cudaStreamNonBlocking));
  /* One dispatcher run per row: the handler graph launched on arrival or
   * launched ahead of its request (cudaq_dispatch_graph_set_prelaunch),
   * requests back to back or one every gap_us after the last answer (a
   * decoding window arriving every d rounds). */
  uint64_t wrong = 0, errors = 0;
  auto row = [&](bool pre, double gap_us, uint32_t ninst) {
    cudaq_dispatch_graph_context *ctx;
    CK(cudaq_create_dispatch_graph_regular(rb.rx_flags, rb.tx_flags, rb.rx_data, rb.tx_data, rb.rx_stride_sz,
                                           rb.tx_stride_sz, dt, 1, io, flag, stats, slots, 1, 32, ds, &ctx));
    if (pre) CK(cudaq_dispatch_graph_set_prelaunch(ctx, FN_PREDECODE));
    for (uint32_t k = 1; pre && k < ninst; ++k) CK(cudaq_dispatch_graph_add_prelaunch_instance(ctx, hs[k].hge, hs[k].io));
    CK(cudaq_launch_dispatch_graph(ctx, ds));
    uint64_t tnext = 0;
    for (uint32_t w = 0; w < n + 500; ++w) {
      const uint32_t slot = w % slots;
      const int k = (int)(w % K);
      while (now_ns() < tnext) {
      }
      uint64_t t0 = now_ns();
      if (cudaq_host_ringbuffer_write_rpc_request(&rb, slot, FN_PREDECODE, ins[k].data(), (uint32_t)bin.size_bytes, w,
                                                  t0) != CUDAQ_OK) {
        fprintf(stderr, "request %u: %s\n", w, cudaq_last_error());
        exit(1);
      }
      cudaq_host_ringbuffer_signal_slot(&rb, slot);
      cudaq_tx_status_t st;
      const uint64_t tw = now_ns();
      while ((st = cudaq_host_ringbuffer_poll_tx_flag(&rb, slot, NULL)) != CUDAQ_TX_READY)
        if (now_ns() - tw > 5000000000ull) {
          fprintf(stderr, "device launch: no answer to request %u after 5 s (status %d)\n", w, (int)st);
          exit(1);
        }
      const uint8_t *tx = rb.tx_data_host + (size_t)slot * rb.tx_stride_sz;
      const cudaq_rpc_response_t *r = (const cudaq_rpc_response_t *)tx;
      const uint64_t t1 = now_ns();
      if (w >= 500) lat[w - 500] = t1 - t0;
      if (r->status != 0 || r->request_id != w || r->result_len != out_bytes) ++errors;
      else if (memcmp(tx + CUDAQ_RPC_HEADER_SIZE, refs[k].data(), out_bytes)) ++wrong;
      cudaq_host_ringbuffer_clear_slot(&rb, slot);
      tnext = t1 + (uint64_t)(gap_us * 1000.0);
    }
    char name[96];
    char inst[24] = "";
    if (pre && ninst > 1) snprintf(inst, sizeof inst, " x%u", ninst);
    snprintf(name, sizeof name, "device launch%s%s, %s", pre ? ", pre-launched" : "", inst,
             gap_us > 0 ? "paced" : "back to back");
    report(name, lat);
    uint64_t failures = 0, relaunches = 0, hits = 0, cancelled = 0;
    CK(cudaq_dispatch_graph_get_info(ctx, &failures, &relaunches));
    CK(cudaq_dispatch_graph_get_prelaunch_info(ctx, &hits, &cancelled, nullptr));
    printf("  %llu launch failures, %llu dispatcher relaunches, %llu served pre-launched\n",
           (unsigned long long)failures, (unsigned long long)relaunches, (unsigned long long)hits);
    if (cudaq_dispatch_set_shutdown_flag(flag, 1) != CUDAQ_OK) exit(1);
    CK(cudaStreamSynchronize(ds));
    CK(cudaq_destroy_dispatch_graph(ctx));
    if (cudaq_dispatch_set_shutdown_flag(flag, 0) != CUDAQ_OK) exit(1);
  };
  auto rows = [&](double gap_us) {
    row(false, gap_us, 1);
    row(true, gap_us, 1);
    if (instances > 1) row(true, gap_us, instances);
  };
  rows(0.0);
  if (interval > 0) {
    printf("paced rows: one request %.0f us after each answer\n", interval);
    rows(interval);
  }
  printf("answers: %llu error statuses, %llu differ from the host run\n", (unsigned long long)errors,
         (unsigned long long)wrong);
  for (uint32_t k = 0; k < instances; ++k) {
    CK(cudaGraphExecDestroy(hs[k].hge));
    CK(cudaGraphDestroy(hs[k].hg));
    CK(cudaFree(hs[k].io));
    if (k > 0) cudaq_nn_gpu_destroy(hs[k].g);
  }
  CK(cudaFree(dt));
  CK(cudaFree(flag));
  CK(cudaFree(stats));
  CK(cudaStreamDestroy(ds));
  CK(cudaStreamDestroy(s));
  cudaq_host_ringbuffer_free(&rb);
  cudaq_nn_gpu_destroy(g);
  cudaq_nn_model_destroy(m);
  return errors || wrong ? 1 : 0;
}
