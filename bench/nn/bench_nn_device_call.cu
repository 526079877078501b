/*
 * bench_nn_device_call.cu - a predecoder as a DEVICE_CALL handler inside the
 * persistent cooperative dispatch kernel (issues 11 and 12: "the predecoder
 * as a DEVICE_CALL handler inside the persistent dispatch kernel, with no
 * graph launch"; "callable as a device function ... measure that path
 * against graph launch").
 *
 * Per request: the host writes the detection events (INT32) into an RX slot
 * of a ring in mapped host memory and signals it; the cooperative dispatch
 * kernel (every block of the grid resident) parses it and runs
 * cudaq_nn_device_program_handler with every thread of the grid, either
 * compiled into the loop (cudaq_nn_launch_dispatch_kernel) or through its
 * function pointer (cudaq_launch_dispatch_kernel_cooperative_ex). The
 * handler runs the engine's plan (input copy, the convolutions as one
 * stack, the tail) with grid barriers between steps and writes the outputs
 * into the TX slot; the kernel publishes the response.
 * No launch and no host API call per request. Every answer is compared with
 * the same engine's graph run from the host on the same events.
 *
 * Rows (one run, one GPU; us): the host's graph replay of an AUTO engine
 * (the engine's fastest per-layer kernels) and of the STACK engine whose
 * plan the program runs (inference only, inputs on the GPU); the device
 * call round trip for each of the two kernels, back to back and paced (one
 * request --interval us after each answer). Compare with
 * bench_nn_device_launch (graph launch from the persistent dispatcher) in
 * the same visit.
 *
 * Usage: bench_nn_device_call MODEL.onnx [--requests N] [--plan DIR] [--cpu C]
 *        [--density P] [--interval US] [--blocks B] [--smem BYTES] [--stack_only]
 *        [--kernel inline|pointer|both] [--warmup N]
 * Exit 77 without a GPU; 1 with a message on any error status or an answer
 * outside FP16 agreement (more than 0.01% of positions differing).
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
#include "cudaq/nn/device_program.cuh"
#include "cudaq/nn/gpu_engine.h"
#include "cudaq/nn/nn.h"
#include "cudaq/realtime/cudaq_realtime.h"
#include "cudaq/realtime/dispatch_kernel.h"

#define CK BENCH_CUDA_CK

static const uint32_t FN_PREDECODE = cudaq_fnv1a_hash("predecode");

static void report(const char *name, std::vector<uint64_t> &v) {
  bench_print_row(name, v.size(), bench_percentiles(v.data(), v.size()));
  fflush(stdout);
}

static cudaq_nn_gpu_t *make_engine(const cudaq_nn_model_t *m, cudaq_nn_conv_impl_t impl, const char *model_path,
                                   const char *plan_dir, const char *tag) {
  cudaq_nn_gpu_options_t o;
  cudaq_nn_gpu_options_init(&o);
  o.precision = CUDAQ_NN_FP16;
  o.conv_impl = impl;
  char plan[1024];
  if (plan_dir) {
    const char *base = strrchr(model_path, '/');
    snprintf(plan, sizeof plan, "%s/%s.fp16.%s.plan", plan_dir, base ? base + 1 : model_path, tag);
    o.plan_path = plan;
  }
  cudaq_nn_gpu_t *g = NULL;
  cudaq_nn_error_t err;
  if (cudaq_nn_gpu_create(m, &o, &g, &err) != CUDAQ_NN_OK) {
    fprintf(stderr, "engine (%s): %s\n", tag, err.message);
    exit(1);
  }
  return g;
}

int main(int argc, char **argv) {
  const char *model_path = NULL, *plan_dir = NULL;
  uint32_t n = 20000, blocks = 0;
  int cpu = 2;
  double density = 0.03, interval = 30.0;
  size_t smem_limit = 0;
  int stack_only = 0; /* no AUTO engine (its tuning is slow under compute-sanitizer) */
  int kernels = 3;    /* --kernel: 1 inline, 2 by pointer, 3 both */
  uint32_t warmup = 500; /* untimed requests before each row (--warmup; 0 under compute-sanitizer) */
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--requests") && i + 1 < argc) n = (uint32_t)atoi(argv[++i]);
    else if (!strcmp(argv[i], "--plan") && i + 1 < argc) plan_dir = argv[++i];
    else if (!strcmp(argv[i], "--cpu") && i + 1 < argc) cpu = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--density") && i + 1 < argc) density = atof(argv[++i]);
    else if (!strcmp(argv[i], "--interval") && i + 1 < argc) interval = atof(argv[++i]);
    else if (!strcmp(argv[i], "--blocks") && i + 1 < argc) blocks = (uint32_t)atoi(argv[++i]);
    else if (!strcmp(argv[i], "--smem") && i + 1 < argc) smem_limit = (size_t)atol(argv[++i]);
    else if (!strcmp(argv[i], "--stack_only")) stack_only = 1;
    else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) warmup = (uint32_t)atoi(argv[++i]);
    else if (!strcmp(argv[i], "--kernel") && i + 1 < argc) {
      ++i;
      kernels = !strcmp(argv[i], "inline") ? 1 : !strcmp(argv[i], "pointer") ? 2 : !strcmp(argv[i], "both") ? 3 : 0;
      if (!kernels) model_path = NULL, i = argc;
    }
    else if (argv[i][0] != '-' && !model_path) model_path = argv[i];
    else model_path = NULL, i = argc;
  }
  if (!model_path || n == 0) {
    fprintf(stderr, "usage: %s MODEL.onnx [--requests N] [--plan DIR] [--cpu C] [--density P] [--interval US] "
            "[--blocks B] [--smem BYTES] [--stack_only] [--kernel inline|pointer|both] [--warmup N]\n", argv[0]);
    return 2;
  }
  BENCH_EXIT_IF_NO_GPU();
  if (bench_pin(cpu) != 0) fprintf(stderr, "cannot pin to CPU %d; running unpinned\n", cpu);
  cudaq_nn_model_t *m = NULL;
  cudaq_nn_error_t err;
  if (cudaq_nn_model_load_file(model_path, &m, &err) != CUDAQ_NN_OK) {
    fprintf(stderr, "%s: %s\n", model_path, err.message);
    return 1;
  }
  if (cudaq_nn_model_num_outputs(m) > 2) cudaq_nn_model_keep_outputs(m, 2); /* edge logits pruned */
  cudaq_nn_gpu_t *ga = stack_only ? NULL : make_engine(m, CUDAQ_NN_CONV_AUTO, model_path, plan_dir, "auto");
  cudaq_nn_gpu_t *g = make_engine(m, CUDAQ_NN_CONV_STACK, model_path, plan_dir, "stack");
  cudaq_nn_device_program_info_t info;
  if (cudaq_nn_gpu_device_program(g, smem_limit, &info, &err) != CUDAQ_NN_OK) {
    fprintf(stderr, "device program: %s\n", err.message);
    return 1;
  }
  const size_t n_out = cudaq_nn_model_num_outputs(m);
  std::vector<size_t> out_sz(n_out);
  for (size_t k = 0; k < n_out; ++k) {
    cudaq_nn_binding_t ob;
    cudaq_nn_model_output(m, k, &ob);
    out_sz[k] = ob.size_bytes;
  }
  const size_t in_bytes = info.input_bytes, out_bytes = info.output_bytes;

  /* Inputs at the given density and the STACK engine's graph run on each. */
  const int K = 64;
  srand(12345);
  std::vector<std::vector<int32_t>> ins(K, std::vector<int32_t>(in_bytes / 4));
  std::vector<std::vector<uint8_t>> refs(K, std::vector<uint8_t>(out_bytes));
  for (int k = 0; k < K; ++k) {
    for (auto &v : ins[k]) v = (double)rand() / RAND_MAX < density;
    const void *in[1] = {ins[k].data()};
    std::vector<void *> outs(n_out);
    size_t at = 0;
    for (size_t j = 0; j < n_out; ++j) outs[j] = refs[k].data() + at, at += out_sz[j];
    if (cudaq_nn_gpu_run(g, in, &in_bytes, outs.data(), out_sz.data(), &err) != CUDAQ_NN_OK) {
      fprintf(stderr, "host run: %s\n", err.message);
      return 1;
    }
  }

  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::vector<uint64_t> lat(n);
  printf("predecoder %s, %u requests, %zu input bytes, %zu output bytes\n", model_path, n, in_bytes, out_bytes);
  bench_print_header();
  for (int e = stack_only; e < 2; ++e) {
    cudaq_nn_gpu_t *ge = e ? g : ga;
    for (uint32_t i = 0; i < n + warmup; ++i) {
      const uint64_t t0 = bench_now_ns();
      if (cudaq_nn_gpu_launch(ge, s) != CUDAQ_NN_OK) exit(1);
      CK(cudaStreamSynchronize(s));
      if (i >= warmup) lat[i - warmup] = bench_now_ns() - t0;
    }
    report(e ? "host replay, STACK engine (the program's plan)" : "host replay, AUTO engine", lat);
  }

  /* Grid: every block resident (cooperative launch), at most the blocks with work. */
  int dev = 0, sms = 0, per_sm = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const uint32_t slots = 8;
  const uint32_t stride = (uint32_t)((CUDAQ_RPC_HEADER_SIZE + std::max(in_bytes, out_bytes) + 63) & ~(size_t)63);
  int per_sm_ptr = 0;
  CK(cudaq_nn_dispatch_kernel_query_occupancy(&per_sm, stride, info.smem_bytes));
  CK(cudaq_dispatch_kernel_cooperative_query_occupancy_ex(&per_sm_ptr, info.threads_per_block, stride,
                                                          info.smem_bytes));
  per_sm = std::min(per_sm, per_sm_ptr);
  if (per_sm < 1) {
    fprintf(stderr, "the dispatch kernel with %zu bytes of handler shared memory does not fit an SM\n", info.smem_bytes);
    return 1;
  }
  uint32_t grid = std::min<uint32_t>((uint32_t)(per_sm * sms), info.useful_blocks);
  if (blocks) grid = std::min<uint32_t>(blocks, (uint32_t)(per_sm * sms));
  printf("device program: %u threads x %u blocks (%u with work, %d per SM), %zu bytes of shared memory per block\n",
         info.threads_per_block, grid, info.useful_blocks, per_sm, info.smem_bytes);

  cudaq_ringbuffer_t rb;
  if (cudaq_host_ringbuffer_alloc(&rb, slots, stride, CUDAQ_RING_ALLOC_MAPPED) != CUDAQ_OK) {
    fprintf(stderr, "ring: %s\n", cudaq_last_error());
    return 1;
  }
  cudaq_function_entry_t h;
  if (cudaq_nn_device_program_entry(&info, FN_PREDECODE, &h, &err) != CUDAQ_NN_OK) {
    fprintf(stderr, "entry: %s\n", err.message);
    return 1;
  }
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
  const cudaq_dispatch_coop_options_t co = {info.smem_bytes, 1};
  uint64_t errors = 0, differ = 0, positions = 0, w = 0;
  auto row = [&](double gap_us) {
    uint64_t tnext = 0;
    for (uint32_t i = 0; i < n + warmup; ++i, ++w) {
      const uint32_t slot = (uint32_t)(w % slots);
      const int k = (int)(w % K);
      while (bench_now_ns() < tnext) {
      }
      const uint64_t t0 = bench_now_ns();
      if (cudaq_host_ringbuffer_write_rpc_request(&rb, slot, FN_PREDECODE, ins[k].data(), (uint32_t)in_bytes,
                                                  (uint32_t)w, t0) != CUDAQ_OK) {
        fprintf(stderr, "request %llu: %s\n", (unsigned long long)w, cudaq_last_error());
        exit(1);
      }
      cudaq_host_ringbuffer_signal_slot(&rb, slot);
      cudaq_tx_status_t st;
      while ((st = cudaq_host_ringbuffer_poll_tx_flag(&rb, slot, NULL)) != CUDAQ_TX_READY)
        if (bench_now_ns() - t0 > 5000000000ull) {
          fprintf(stderr, "device call: no answer to request %llu after 5 s (status %d)\n", (unsigned long long)w,
                  (int)st);
          exit(1);
        }
      const uint64_t t1 = bench_now_ns();
      const uint8_t *tx = rb.tx_data_host + (size_t)slot * rb.tx_stride_sz;
      const cudaq_rpc_response_t *r = (const cudaq_rpc_response_t *)tx;
      if (i >= warmup) lat[i - warmup] = t1 - t0;
      if (r->status != 0 || r->request_id != (uint32_t)w || r->result_len != out_bytes) {
        if (errors++ < 5)
          fprintf(stderr, "request %llu: status %d, result_len %u\n", (unsigned long long)w, (int)r->status,
                  r->result_len);
      } else {
        const int32_t *got = (const int32_t *)(tx + CUDAQ_RPC_HEADER_SIZE);
        const int32_t *want = (const int32_t *)refs[k].data();
        for (size_t j = 0; j < out_bytes / 4; ++j) differ += got[j] != want[j];
        positions += out_bytes / 4;
      }
      cudaq_host_ringbuffer_clear_slot(&rb, slot);
      tnext = t1 + (uint64_t)(gap_us * 1000.0);
    }
  };
  /* Two dispatch kernels: the library's cooperative kernel, which calls the
   * handler through its function pointer, and cudaq_nn_launch_dispatch_kernel,
   * the same loop with the handler compiled in. */
  cudaq_dispatcher_counters_t c = {};
  for (int inl = 1; inl >= 0; --inl) {
    if (!(kernels & (inl ? 1 : 2))) continue;
    if (inl)
      cudaq_nn_launch_dispatch_kernel(rb.rx_flags, rb.tx_flags, rb.rx_data, rb.tx_data, rb.rx_stride_sz,
                                      rb.tx_stride_sz, dt, 1, flag, stats, slots, grid, &co, ds);
    else
      cudaq_launch_dispatch_kernel_cooperative_ex(rb.rx_flags, rb.tx_flags, rb.rx_data, rb.tx_data, rb.rx_stride_sz,
                                                  rb.tx_stride_sz, dt, 1, flag, stats, slots, grid,
                                                  info.threads_per_block, &co, ds);
    CK(cudaGetLastError());
    const char *how = inl ? "handler inline" : "handler by pointer";
    char name[128];
    row(0.0);
    snprintf(name, sizeof name, "device call (%s), back to back", how);
    report(name, lat);
    if (interval > 0) {
      row(interval);
      snprintf(name, sizeof name, "device call (%s), paced %.0f us", how, interval);
      report(name, lat);
    }
    if (cudaq_dispatch_set_shutdown_flag(flag, 1) != CUDAQ_OK) return 1;
    CK(cudaStreamSynchronize(ds));
    CK(cudaq_dispatch_kernel_get_counters(stats, &c));
    if (cudaq_dispatch_set_shutdown_flag(flag, 0) != CUDAQ_OK) return 1;
    if (inl) { /* the last call's profile with the handler inline */
      static char desc[16384];
      const char *dp = cudaq_nn_gpu_describe(g, desc, sizeof desc) == CUDAQ_NN_OK ? strstr(desc, "device program:") : NULL;
      if (dp) printf("%s", dp); /* with CUDAQ_NN_DEVPROG_PROF=1: the last call's steps */
    }
  }
  printf("answers: %llu error statuses, %llu of %llu positions differ from the STACK engine's graph run; "
         "dispatcher: %llu processed, %llu handler errors\n",
         (unsigned long long)errors, (unsigned long long)differ, (unsigned long long)positions,
         (unsigned long long)c.processed, (unsigned long long)c.handler_errors);
  CK(cudaFree(dt));
  CK(cudaFree(flag));
  CK(cudaFree(stats));
  CK(cudaStreamDestroy(ds));
  CK(cudaStreamDestroy(s));
  cudaq_host_ringbuffer_free(&rb);
  cudaq_nn_gpu_destroy(g);
  cudaq_nn_gpu_destroy(ga);
  cudaq_nn_model_destroy(m);
  return errors || differ * 10000 > positions ? 1 : 0;
}
