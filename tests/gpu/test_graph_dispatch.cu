/*
 * test_graph_dispatch.cu - the graph-launch dispatcher on a GPU (spec:
 * realtime-host-api.txt, "CUDA Graph Dispatch Mode"; extensions
 * cudaq_dispatch_graph_set_prelaunch and
 * cudaq_dispatch_graph_add_prelaunch_instance in dispatch_kernel.h):
 * handler graphs launched from the device on arrival, pre-launched to wait
 * at a gate, and pre-launched instances taking turns.
 *
 * Without a CUDA device: prints "skipped: no CUDA device" and exits 77.
 * CUDAQ_TEST_SCALE (default 1.0) scales request counts (compute-sanitizer
 * runs use a small scale: its instrumentation slows kernels 100x).
 */
#include <vector>

#include "gpu_dispatch_fixture.cuh"

/* ---- graph launch ------------------------------------------------------- */

/* The start of a graph-launch test: its function table copied to device
 * memory, a shutdown flag (0) in device memory and a zeroed mapped stats word. */
static void graph_test_controls(const cudaq_function_entry_t *h, size_t n, cudaq_function_entry_t **dt, int **flag,
                                uint64_t **stats) {
  CK(cudaMalloc(dt, n * sizeof *h));
  CK(cudaMemcpy(*dt, h, n * sizeof *h, cudaMemcpyHostToDevice));
  CK(cudaMalloc(flag, sizeof(int)));
  assert_int_equal(cudaq_dispatch_set_shutdown_flag(*flag, 0), CUDAQ_OK);
  CK(cudaHostAlloc(stats, sizeof(uint64_t), cudaHostAllocMapped));
  **stats = 0;
}
/* The end of a graph-launch test, after its dispatch graph has exited:
 * frees the dispatch graph's context and what the test set up around it
 * (the handler graphs are the caller's). */
static void graph_test_free(cudaq_dispatch_graph_context *ctx, cudaq_graph_io_context *io, cudaq_function_entry_t *dt,
                            int *flag, uint64_t *stats, cudaStream_t s, cudaq_ringbuffer_t *rb) {
  g_graph = nullptr;
  g_stats = nullptr;
  CK(cudaq_destroy_dispatch_graph(ctx));
  CK(cudaFree(io));
  CK(cudaFree(dt));
  CK(cudaFree(flag));
  CK(cudaFreeHost(stats));
  CK(cudaStreamDestroy(s));
  assert_int_equal(cudaq_host_ringbuffer_free(rb), CUDAQ_OK);
}

/* The handler graphs' body: every payload byte + add, then complete. */
__device__ void graph_echo_add(cudaq_graph_io_context *io, uint8_t add) {
  const uint8_t *src = io->rx_slot + CUDAQ_RPC_HEADER_SIZE;
  uint8_t *dst = io->tx_slot + CUDAQ_RPC_HEADER_SIZE;
  const uint32_t n = io->arg_len;
  for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) dst[i] = (uint8_t)(src[i] + add);
  __syncthreads();
  if (threadIdx.x == 0) cudaq_graph_io_complete(io, 0, n);
}
/* The handler graph: echo + 1. */
__global__ void graph_echo_kernel(cudaq_graph_io_context *io) { graph_echo_add(io, 1); }
/* The same, pre-launched: waits at the gate first (a cancelled launch has
 * arg_len 0 and answers into scratch). */
__global__ void graph_echo_gated_kernel(cudaq_graph_io_context *io) {
  cudaq_graph_io_wait(io);
  graph_echo_add(io, 1);
}
/* Another function's graph, launched on arrival: echo + 2. */
__global__ void graph_echo2_kernel(cudaq_graph_io_context *io) { graph_echo_add(io, 2); }

/* A one-kernel graph of k (64 threads) on io, instantiated for device launch and uploaded. */
static cudaGraphExec_t device_launch_graph(void (*k)(cudaq_graph_io_context *), cudaq_graph_io_context *io,
                                           cudaStream_t s, cudaGraph_t *g) {
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  k<<<1, 64, 0, s>>>(io);
  CK(cudaStreamEndCapture(s, g));
  CK(cudaGraphInstantiateWithFlags(&ge, *g, cudaGraphInstantiateFlagDeviceLaunch));
  CK(cudaGraphUpload(ge, s));
  CK(cudaStreamSynchronize(s));
  return ge;
}

/* Requests of lens[k % nlens] bytes through the graph-launch dispatcher,
 * n of them over a ring of 8 slots of SLOT bytes, then the malformed cases
 * and the counters. */
static void graph_launch_run(uint32_t SLOT, const uint32_t *lens, uint32_t nlens, uint32_t n) {
  const uint32_t S = 8;
  cudaq_ringbuffer_t rb;
  assert_int_equal(cudaq_host_ringbuffer_alloc(&rb, S, SLOT, CUDAQ_RING_ALLOC_MAPPED), CUDAQ_OK);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaq_graph_io_context *io;
  CK(cudaMalloc(&io, sizeof *io));
  cudaGraph_t g;
  cudaGraphExec_t ge = device_launch_graph(graph_echo_kernel, io, s, &g);
  cudaq_function_entry_t h[2];
  memset(h, 0, sizeof h);
  h[0].handler.graph_exec = ge;
  h[0].function_id = FN_ECHO;
  h[0].dispatch_mode = CUDAQ_DISPATCH_GRAPH_LAUNCH;
  h[0].schema.num_args = 2; /* a uint8 then a variable-size array: at least 1 byte */
  h[0].schema.args[0].type_id = CUDAQ_TYPE_UINT8;
  h[0].schema.args[0].size_bytes = 1;
  h[0].schema.args[0].num_elements = 1;
  h[0].schema.args[1].type_id = CUDAQ_TYPE_ARRAY_UINT8;
  h[1].handler.device_fn_ptr = nullptr;
  h[1].function_id = FN_SUM;
  h[1].dispatch_mode = CUDAQ_DISPATCH_DEVICE_CALL; /* wrong mode for this dispatcher */
  cudaq_function_entry_t *dt;
  int *flag;
  uint64_t *stats;
  graph_test_controls(h, sizeof h / sizeof h[0], &dt, &flag, &stats);
  cudaq_dispatch_graph_context *ctx = nullptr;
  /* Sizes beyond 32 bits are refused, not truncated. */
  const size_t huge = (size_t)1 << 33;
  assert_int_equal(cudaq_create_dispatch_graph_regular(rb.rx_flags, rb.tx_flags, rb.rx_data, rb.tx_data, huge,
                                                       rb.tx_stride_sz, dt, 2, io, flag, stats, S, 1, 32, s, &ctx),
                   cudaErrorInvalidValue);
  assert_int_equal(cudaq_create_dispatch_graph_regular(rb.rx_flags, rb.tx_flags, rb.rx_data, rb.tx_data,
                                                       rb.rx_stride_sz, rb.tx_stride_sz, dt, 2, io, flag, stats,
                                                       huge + S, 1, 32, s, &ctx),
                   cudaErrorInvalidValue);
  assert_null(ctx);
  CK(cudaq_create_dispatch_graph_regular(rb.rx_flags, rb.tx_flags, rb.rx_data, rb.tx_data, rb.rx_stride_sz,
                                         rb.tx_stride_sz, dt, 2, io, flag, stats, S, 1, 32, s, &ctx));
  CK(cudaq_launch_dispatch_graph(ctx, s));
  g_stats = stats;
  g_graph = ctx;

  uint32_t rid_of[8];
  std::vector<uint8_t> buf(SLOT);
  for (uint32_t k = 0; k < n + S; ++k) {
    uint32_t slot = k % S;
    if (k >= S) {
      assert_int_equal(wait_tx(&rb, slot), CUDAQ_TX_READY);
      cudaq_rpc_response_t r = read_resp(&rb, slot);
      uint32_t rid = rid_of[slot];
      if (r.status != 0 || r.request_id != rid || r.ptp_timestamp != rid + 5ull || r.result_len != lens[rid % nlens])
        fail_msg("graph request %u: status %d id %u len %u", rid, r.status, r.request_id, r.result_len);
      const uint8_t *pl = resp_payload(&rb, slot);
      for (uint32_t i = 0; i < r.result_len; ++i)
        if (pl[i] != (uint8_t)(rid + i + 1)) fail_msg("graph request %u byte %u", rid, i);
      cudaq_host_ringbuffer_clear_slot(&rb, slot);
    }
    if (k >= n) continue;
    uint64_t tw = now_ns();
    while (!cudaq_host_ringbuffer_slot_available(&rb, slot))
      if (now_ns() - tw > g_wait_ns) fail_msg("graph: slot %u never became available (rx %llx tx %llx)", slot,
                                              (unsigned long long)rb.rx_flags_host[slot],
                                              (unsigned long long)rb.tx_flags_host[slot]);
    const uint32_t len = lens[k % nlens];
    for (uint32_t i = 0; i < len; ++i) buf[i] = (uint8_t)(k + i);
    assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&rb, slot, FN_ECHO, buf.data(), len, k, k + 5ull),
                     CUDAQ_OK);
    rid_of[slot] = k;
    cudaq_host_ringbuffer_signal_slot(&rb, slot);
  }
  /* Malformed requests in graph mode: wrong mode answered, unknown dropped. */
  assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&rb, n % S, FN_SUM, NULL, 0, 1, 2), CUDAQ_OK);
  cudaq_host_ringbuffer_signal_slot(&rb, n % S);
  assert_int_equal(wait_tx(&rb, n % S), CUDAQ_TX_READY);
  assert_int_equal(read_resp(&rb, n % S).status, CUDAQ_RPC_ERR_UNSUPPORTED_MODE);
  cudaq_host_ringbuffer_clear_slot(&rb, n % S);
  /* Below the schema's minimum length (1 byte): answered with a mismatch.
   * (The graph dispatcher serves slots in ring order: the next one.) */
  assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&rb, (n + 1) % S, FN_ECHO, NULL, 0, 3, 4), CUDAQ_OK);
  cudaq_host_ringbuffer_signal_slot(&rb, (n + 1) % S);
  assert_int_equal(wait_tx(&rb, (n + 1) % S), CUDAQ_TX_READY);
  assert_int_equal(read_resp(&rb, (n + 1) % S).status, CUDAQ_RPC_ERR_ARG_LEN_MISMATCH);
  cudaq_host_ringbuffer_clear_slot(&rb, (n + 1) % S);
  uint32_t us = (n + 2) % S;
  assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(&rb, us, 0x1234u, NULL, 0, 1, 2), CUDAQ_OK);
  cudaq_host_ringbuffer_signal_slot(&rb, us);
  wait_dropped(&rb, us);
  assert_int_equal(cudaq_host_ringbuffer_poll_tx_flag(&rb, us, NULL), CUDAQ_TX_EMPTY);

  uint64_t failures = 0, relaunches = 0;
  CK(cudaq_dispatch_graph_get_info(ctx, &failures, &relaunches));
  assert_int_equal(failures, 0);
  assert_true(relaunches >= n / CUDAQ_GRAPH_DISPATCH_RELAUNCH_EVERY - 1);
  printf("graph launch (%u-byte slots): %u requests answered, %llu relaunches of the dispatcher, %llu launch failures\n",
         SLOT, n, (unsigned long long)relaunches, (unsigned long long)failures);
  /* The dispatch graph occupies `s` until it exits: the flag is raised
   * without queueing anything on `s` (a copy queued there would wait for
   * the graph forever). */
  assert_int_equal(cudaq_dispatch_set_shutdown_flag(flag, 1), CUDAQ_OK);
  CK(cudaStreamSynchronize(s)); /* waits for the dispatcher and its tail launches */
  cudaq_dispatcher_counters_t c;
  CK(cudaq_dispatch_kernel_get_counters(stats, &c));
  assert_int_equal(c.processed, n + 2);
  assert_int_equal(c.dropped_unknown_function, 1);
  assert_int_equal(c.err_unsupported_mode, 1);
  assert_int_equal(c.err_arg_len_mismatch, 1);
  assert_int_equal(*stats, n + 2);
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  graph_test_free(ctx, io, dt, flag, stats, s, &rb);
}

static void test_graph_launch_100k(void **) {
  uint32_t lens[100];
  for (uint32_t i = 0; i < 100; ++i) lens[i] = 1 + i;
  graph_launch_run(256, lens, 100, scaled(100000));
}

/* The dispatcher copies a request of up to 2 KiB (header included) to
 * device memory for the graph and leaves a larger one in the RX slot, where
 * the graph reads it: lengths on both sides of the boundary (2024 bytes of
 * payload fill it exactly), the largest a 4 KiB slot takes, and small ones
 * after large ones (each answer must be its own request's bytes). */
static void test_graph_launch_staging_boundary(void **) {
  unsetenv("CUDAQ_DISPATCH_NO_STAGE"); /* the A/B switch would leave the copy untested */
  const uint32_t SLOT = 4096;
  const uint32_t lens[] = {2024, 2025, 1, SLOT - CUDAQ_RPC_HEADER_SIZE, 2023, 7, 3000};
  graph_launch_run(SLOT, lens, sizeof lens / sizeof lens[0], scaled(20000) < 700 ? 700 : scaled(20000));
}

/* ---- graph launch, pre-launched (cudaq_dispatch_graph_set_prelaunch) ---- */


/* The prelaunch test's requests: k decides the function (every 5th goes to
 * the graph launched on arrival), or all go there while this is set. */
static bool g_prelaunch_all_other = false;
static bool prelaunch_other(uint32_t k) { return g_prelaunch_all_other || k % 5 == 4; }

/* One request in `slot` (the dispatcher serves slots in ring order). */
static void prelaunch_send(cudaq_ringbuffer_t *rb, uint32_t slot, uint32_t k) {
  uint8_t buf[64];
  const uint32_t len = 1 + k % 64;
  for (uint32_t i = 0; i < len; ++i) buf[i] = (uint8_t)(k * 3 + i);
  uint64_t tw = now_ns();
  while (!cudaq_host_ringbuffer_slot_available(rb, slot))
    if (now_ns() - tw > g_wait_ns) fail_msg("prelaunch: slot %u never became available", slot);
  assert_int_equal(cudaq_host_ringbuffer_write_rpc_request(rb, slot, prelaunch_other(k) ? FN_BLOCK : FN_ECHO, buf, len, k,
                                                           ~(uint64_t)k),
                   CUDAQ_OK);
  cudaq_host_ringbuffer_signal_slot(rb, slot);
}
static void prelaunch_check(cudaq_ringbuffer_t *rb, uint32_t slot, uint32_t k) {
  assert_int_equal(wait_tx(rb, slot), CUDAQ_TX_READY);
  cudaq_rpc_response_t r = read_resp(rb, slot);
  const uint32_t len = 1 + k % 64, add = prelaunch_other(k) ? 2 : 1;
  if (r.status != 0 || r.request_id != k || r.ptp_timestamp != ~(uint64_t)k || r.result_len != len)
    fail_msg("prelaunch request %u: status %d id %u len %u", k, r.status, r.request_id, r.result_len);
  const uint8_t *pl = resp_payload(rb, slot);
  for (uint32_t i = 0; i < len; ++i)
    if (pl[i] != (uint8_t)(k * 3 + i + add)) fail_msg("prelaunch request %u byte %u", k, i);
  cudaq_host_ringbuffer_clear_slot(rb, slot);
}

/* Waits until `want` pre-launched graphs wait at their gates. The
 * dispatcher arms only below its relaunch point: if it sits there, requests
 * to the other function (requests *k on, answered and checked) make it
 * relaunch and arm. Returns the cancelled count read once they wait. */
static uint64_t wait_armed(cudaq_dispatch_graph_context *ctx, cudaq_ringbuffer_t *rb, uint32_t S, uint32_t *k,
                           int want) {
  int waiting = 0;
  uint64_t hits = 0, cancelled = 0;
  for (int tries = 0; tries < 5 && waiting < want; ++tries) {
    const uint64_t t = now_ns();
    do
      CK(cudaq_dispatch_graph_get_prelaunch_info(ctx, &hits, &cancelled, &waiting));
    while (waiting < want && now_ns() - t < g_wait_ns / 5);
    if (waiting < want) {
      g_prelaunch_all_other = true;
      prelaunch_send(rb, *k % S, *k);
      prelaunch_check(rb, *k % S, *k);
      g_prelaunch_all_other = false;
      ++*k;
    }
  }
  CK(cudaq_dispatch_graph_get_prelaunch_info(ctx, &hits, &cancelled, &waiting));
  assert_int_equal(waiting, want);
  return cancelled;
}

/* The end of a pre-launch test: shutdown, no launch failed, and the
 * dispatcher's count is every request once (cancelled launches are not
 * requests). */
static void graph_stop_expect_processed(cudaq_dispatch_graph_context *ctx, int *flag, cudaStream_t s,
                                        const uint64_t *stats, uint64_t requests) {
  assert_int_equal(cudaq_dispatch_set_shutdown_flag(flag, 1), CUDAQ_OK);
  CK(cudaStreamSynchronize(s));
  uint64_t failures = 0, relaunches = 0;
  CK(cudaq_dispatch_graph_get_info(ctx, &failures, &relaunches));
  assert_int_equal(failures, 0);
  cudaq_dispatcher_counters_t c;
  CK(cudaq_dispatch_kernel_get_counters(stats, &c));
  assert_int_equal(c.processed, requests);
}

/* Extension cudaq_dispatch_graph_set_prelaunch (dispatch_kernel.h): the
 * handler graph of one function is launched while the dispatcher waits and
 * released by its gate when the request comes. Requests paced 30 us apart
 * (served by the waiting graph), mixed with another function's graph
 * (launched on arrival while the first one waits), across the dispatcher's
 * self-relaunches (every 100 launches: a waiting graph is cancelled first);
 * then all slots in flight (back to back: launched on arrival); then
 * shutdown while a graph waits (cancelled: answers into scratch, no TX flag
 * of the ring touched), and a restart. The checks of the call: unknown id,
 * a DEVICE_CALL entry, no context. */
static void test_graph_prelaunch(void **) {
  const uint32_t S = 8;
  cudaq_ringbuffer_t rb;
  assert_int_equal(cudaq_host_ringbuffer_alloc(&rb, S, 256, CUDAQ_RING_ALLOC_MAPPED), CUDAQ_OK);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaq_graph_io_context *io;
  CK(cudaMalloc(&io, sizeof *io));
  cudaGraph_t g1, g2;
  cudaGraphExec_t ge1 = device_launch_graph(graph_echo_gated_kernel, io, s, &g1);
  cudaGraphExec_t ge2 = device_launch_graph(graph_echo2_kernel, io, s, &g2);
  cudaq_function_entry_t h[3];
  memset(h, 0, sizeof h);
  h[0].handler.graph_exec = ge1;
  h[0].function_id = FN_ECHO;
  h[0].dispatch_mode = CUDAQ_DISPATCH_GRAPH_LAUNCH;
  h[1].handler.graph_exec = ge2;
  h[1].function_id = FN_BLOCK;
  h[1].dispatch_mode = CUDAQ_DISPATCH_GRAPH_LAUNCH;
  h[2].function_id = FN_SUM;
  h[2].dispatch_mode = CUDAQ_DISPATCH_DEVICE_CALL;
  cudaq_function_entry_t *dt;
  int *flag;
  uint64_t *stats;
  graph_test_controls(h, sizeof h / sizeof h[0], &dt, &flag, &stats);
  cudaq_dispatch_graph_context *ctx = nullptr;
  CK(cudaq_create_dispatch_graph_regular(rb.rx_flags, rb.tx_flags, rb.rx_data, rb.tx_data, rb.rx_stride_sz,
                                         rb.tx_stride_sz, dt, 3, io, flag, stats, S, 1, 32, s, &ctx));
  assert_int_equal(cudaq_dispatch_graph_set_prelaunch(nullptr, FN_ECHO), cudaErrorInvalidValue);
  assert_int_equal(cudaq_dispatch_graph_set_prelaunch(ctx, 0x1234u), cudaErrorInvalidValue);
  assert_int_equal(cudaq_dispatch_graph_set_prelaunch(ctx, FN_SUM), cudaErrorInvalidValue);
  CK(cudaq_dispatch_graph_set_prelaunch(ctx, FN_ECHO));
  CK(cudaq_launch_dispatch_graph(ctx, s));
  g_stats = stats;
  g_graph = ctx;

  /* Paced, one at a time. */
  uint32_t k = 0;
  const uint32_t paced = scaled(250) < 20 ? 20 : scaled(250);
  for (; k < paced; ++k) {
    const uint64_t t = now_ns();
    while (now_ns() - t < 30000) {
    }
    prelaunch_send(&rb, k % S, k);
    prelaunch_check(&rb, k % S, k);
  }
  uint64_t hits = 0, cancelled = 0;
  CK(cudaq_dispatch_graph_get_prelaunch_info(ctx, &hits, &cancelled, nullptr));
  printf("graph pre-launch: %u paced requests (%u to the pre-launched function), %llu served pre-launched, "
         "%llu cancelled at relaunches\n",
         paced, paced - paced / 5, (unsigned long long)hits, (unsigned long long)cancelled);
  assert_true(hits >= 1 && hits <= paced - paced / 5);
  /* A graph waits at its gate while only the other function is asked for,
   * until the dispatcher's launches reach its relaunch point: the waiting
   * graph must be cancelled (not hang the relaunch), every answer right. */
  {
    int waiting = 0;
    uint64_t c1 = 0;
    const uint64_t c0 = wait_armed(ctx, &rb, S, &k, 1);
    g_prelaunch_all_other = true;
    for (uint32_t j = 0; j < CUDAQ_GRAPH_DISPATCH_RELAUNCH_EVERY + 10; ++j, ++k) {
      prelaunch_send(&rb, k % S, k);
      prelaunch_check(&rb, k % S, k);
    }
    g_prelaunch_all_other = false;
    CK(cudaq_dispatch_graph_get_prelaunch_info(ctx, &hits, &c1, &waiting));
    assert_true(c1 >= c0 + 1);
  }
  /* Back to back, every slot in flight. */
  const uint32_t b2b = scaled(3000) < 50 ? 50 : scaled(3000);
  for (uint32_t j = 0; j < b2b + S; ++j, ++k) {
    if (j >= S) prelaunch_check(&rb, (k - S) % S, k - S);
    if (j < b2b) prelaunch_send(&rb, k % S, k);
  }
  k -= S;
  /* Shutdown while the graph waits at its gate; a fresh dispatcher run
   * (launched = 0) arms within its first idle polls. */
  for (int run = 0; run < 2; ++run) {
    uint64_t c0 = 0, c1 = 0;
    int waiting = 0;
    if (run == 1) { /* a fresh run (launched = 0) arms within its first idle polls: wait for it */
      const uint64_t t = now_ns();
      do
        CK(cudaq_dispatch_graph_get_prelaunch_info(ctx, &hits, &c0, &waiting));
      while (!waiting && now_ns() - t < g_wait_ns);
      assert_int_equal(waiting, 1);
    }
    CK(cudaq_dispatch_graph_get_prelaunch_info(ctx, &hits, &c0, &waiting));
    assert_int_equal(cudaq_dispatch_set_shutdown_flag(flag, 1), CUDAQ_OK);
    CK(cudaStreamSynchronize(s)); /* the dispatcher and its cancelled child have ended */
    CK(cudaq_dispatch_graph_get_prelaunch_info(ctx, &hits, &c1, &waiting));
    if (run == 1) assert_int_equal(c1, c0 + 1); /* it waited at shutdown: cancelled exactly once */
    assert_int_equal(waiting, 0);
    for (uint32_t i = 0; i < S; ++i) assert_int_equal(rb.tx_flags_host[i], 0); /* nothing answered into the ring */
    /* Restart: requests are served again (the cancelled run freed the context). */
    assert_int_equal(cudaq_dispatch_set_shutdown_flag(flag, 0), CUDAQ_OK);
    CK(cudaq_launch_dispatch_graph(ctx, s));
    for (uint32_t j = 0; j < 3; ++j, ++k) {
      const uint64_t t2 = now_ns();
      while (now_ns() - t2 < 30000) {
      }
      prelaunch_send(&rb, k % S, k);
      prelaunch_check(&rb, k % S, k);
    }
  }
  graph_stop_expect_processed(ctx, flag, s, stats, k);
  CK(cudaGraphExecDestroy(ge1));
  CK(cudaGraphExecDestroy(ge2));
  CK(cudaGraphDestroy(g1));
  CK(cudaGraphDestroy(g2));
  graph_test_free(ctx, io, dt, flag, stats, s, &rb);
}

/* ---- pre-launch instances (cudaq_dispatch_graph_add_prelaunch_instance) ---- */

/* An instance's handler: the gated echo + 1, counting the requests it served
 * (not its cancelled launches). */
__global__ void graph_echo_counted_kernel(cudaq_graph_io_context *io, unsigned long long *served) {
  if (cudaq_graph_io_wait(io) && threadIdx.x == 0) atomicAdd(served, 1ull);
  graph_echo_add(io, 1);
}
static cudaGraphExec_t counted_graph(cudaq_graph_io_context *io, unsigned long long *served, cudaStream_t s,
                                     cudaGraph_t *g) {
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  graph_echo_counted_kernel<<<1, 64, 0, s>>>(io, served);
  CK(cudaStreamEndCapture(s, g));
  CK(cudaGraphInstantiateWithFlags(&ge, *g, cudaGraphInstantiateFlagDeviceLaunch));
  CK(cudaGraphUpload(ge, s));
  CK(cudaStreamSynchronize(s));
  return ge;
}

/* Extension cudaq_dispatch_graph_add_prelaunch_instance (dispatch_kernel.h):
 * the pre-launch entry's graph and two more instances over I/O contexts of
 * their own take turns, so a request sent as soon as the previous answer is
 * seen (back to back) finds one waiting (the instances are launched to wait
 * while idle and serve in turn). Every
 * answer is its own request's (each instance stages into its own copy: with
 * every slot in flight, three instances run at once), every instance serves
 * (strict turns), the served counts add up to the requests, another
 * function's graph is launched on arrival in between, and shutdown while
 * every instance waits cancels each once (no TX flag of the ring touched);
 * a restart serves again. The call's refusals first. */
static void test_graph_prelaunch_instances(void **) {
  const uint32_t S = 8, NI = 3; /* ring slots; instances (the entry's + 2) */
  cudaq_ringbuffer_t rb;
  assert_int_equal(cudaq_host_ringbuffer_alloc(&rb, S, 256, CUDAQ_RING_ALLOC_MAPPED), CUDAQ_OK);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaq_graph_io_context *io[5]; /* [0] the dispatcher's, [1..2] the instances', [3..4] for the refusals */
  for (auto &x : io) CK(cudaMalloc(&x, sizeof *x));
  unsigned long long *served; /* per instance */
  CK(cudaMalloc(&served, 5 * sizeof *served));
  CK(cudaMemset(served, 0, 5 * sizeof *served));
  cudaGraph_t g[6];
  cudaGraphExec_t ge[6];
  for (uint32_t k = 0; k < 5; ++k) ge[k] = counted_graph(io[k], served + k, s, &g[k]);
  ge[5] = device_launch_graph(graph_echo2_kernel, io[0], s, &g[5]);
  cudaq_function_entry_t h[2];
  memset(h, 0, sizeof h);
  h[0].handler.graph_exec = ge[0];
  h[0].function_id = FN_ECHO;
  h[0].dispatch_mode = CUDAQ_DISPATCH_GRAPH_LAUNCH;
  h[1].handler.graph_exec = ge[5];
  h[1].function_id = FN_BLOCK;
  h[1].dispatch_mode = CUDAQ_DISPATCH_GRAPH_LAUNCH;
  cudaq_function_entry_t *dt;
  int *flag;
  uint64_t *stats;
  graph_test_controls(h, 2, &dt, &flag, &stats);
  cudaq_dispatch_graph_context *ctx = nullptr;
  CK(cudaq_create_dispatch_graph_regular(rb.rx_flags, rb.tx_flags, rb.rx_data, rb.tx_data, rb.rx_stride_sz,
                                         rb.tx_stride_sz, dt, 2, io[0], flag, stats, S, 1, 32, s, &ctx));
  assert_int_equal(cudaq_dispatch_graph_add_prelaunch_instance(nullptr, ge[1], io[1]), cudaErrorInvalidValue);
  assert_int_equal(cudaq_dispatch_graph_add_prelaunch_instance(ctx, nullptr, io[1]), cudaErrorInvalidValue);
  assert_int_equal(cudaq_dispatch_graph_add_prelaunch_instance(ctx, ge[1], nullptr), cudaErrorInvalidValue);
  assert_int_equal(cudaq_dispatch_graph_add_prelaunch_instance(ctx, ge[1], io[0]), cudaErrorInvalidValue); /* the dispatcher's */
  assert_int_equal(cudaq_dispatch_graph_add_prelaunch_instance(ctx, ge[0], io[1]), cudaErrorInvalidValue); /* an entry's */
  assert_int_equal(cudaq_dispatch_graph_add_prelaunch_instance(ctx, ge[5], io[1]), cudaErrorInvalidValue); /* an entry's */
  CK(cudaq_dispatch_graph_add_prelaunch_instance(ctx, ge[1], io[1]));
  assert_int_equal(cudaq_dispatch_graph_add_prelaunch_instance(ctx, ge[1], io[2]), cudaErrorInvalidValue); /* added */
  assert_int_equal(cudaq_dispatch_graph_add_prelaunch_instance(ctx, ge[2], io[1]), cudaErrorInvalidValue); /* added */
  CK(cudaq_dispatch_graph_add_prelaunch_instance(ctx, ge[2], io[2]));
  CK(cudaq_dispatch_graph_add_prelaunch_instance(ctx, ge[3], io[3])); /* the fourth instance: the most */
  assert_int_equal(cudaq_dispatch_graph_add_prelaunch_instance(ctx, ge[4], io[4]), cudaErrorInvalidValue);
  CK(cudaq_destroy_dispatch_graph(ctx)); /* the test runs with three: a fresh context */
  CK(cudaq_create_dispatch_graph_regular(rb.rx_flags, rb.tx_flags, rb.rx_data, rb.tx_data, rb.rx_stride_sz,
                                         rb.tx_stride_sz, dt, 2, io[0], flag, stats, S, 1, 32, s, &ctx));
  for (uint32_t k = 1; k < NI; ++k) CK(cudaq_dispatch_graph_add_prelaunch_instance(ctx, ge[k], io[k]));
  CK(cudaq_dispatch_graph_set_prelaunch(ctx, FN_ECHO));
  CK(cudaq_launch_dispatch_graph(ctx, s));
  g_stats = stats;
  g_graph = ctx;

  /* Back to back, one at a time (every 5th to the other function). */
  uint32_t k = 0, echo = 0;
  const uint32_t b2b = scaled(3000) < 30 ? 30 : scaled(3000);
  for (; k < b2b; ++k) {
    echo += !prelaunch_other(k);
    prelaunch_send(&rb, k % S, k);
    prelaunch_check(&rb, k % S, k);
  }
  uint64_t hits = 0, cancelled = 0;
  CK(cudaq_dispatch_graph_get_prelaunch_info(ctx, &hits, &cancelled, nullptr));
  printf("graph pre-launch instances: %u back-to-back requests (%u to the pre-launched function), "
         "%llu served pre-launched, %llu cancelled at relaunches\n",
         b2b, echo, (unsigned long long)hits, (unsigned long long)cancelled);
  assert_true(hits >= 1);
  /* Every slot in flight: instances run at once, each on its own staging copy. */
  const uint32_t many = scaled(3000) < 50 ? 50 : scaled(3000);
  for (uint32_t j = 0; j < many + S; ++j, ++k) {
    if (j >= S) prelaunch_check(&rb, (k - S) % S, k - S);
    if (j < many) {
      echo += !prelaunch_other(k);
      prelaunch_send(&rb, k % S, k);
    }
  }
  k -= S;
  /* Idle, every instance is launched to wait at its gate; shutdown cancels
   * each once; then a restart. */
  int waiting = 0;
  uint64_t c1 = 0;
  const uint64_t c0 = wait_armed(ctx, &rb, S, &k, (int)NI);
  assert_int_equal(cudaq_dispatch_set_shutdown_flag(flag, 1), CUDAQ_OK);
  CK(cudaStreamSynchronize(s));
  CK(cudaq_dispatch_graph_get_prelaunch_info(ctx, &hits, &c1, &waiting));
  assert_int_equal(c1, c0 + NI);
  assert_int_equal(waiting, 0);
  for (uint32_t i = 0; i < S; ++i) assert_int_equal(rb.tx_flags_host[i], 0);
  assert_int_equal(cudaq_dispatch_set_shutdown_flag(flag, 0), CUDAQ_OK);
  CK(cudaq_launch_dispatch_graph(ctx, s));
  for (uint32_t j = 0; j < 2 * NI; ++j, ++k) {
    echo += !prelaunch_other(k);
    prelaunch_send(&rb, k % S, k);
    prelaunch_check(&rb, k % S, k);
  }
  graph_stop_expect_processed(ctx, flag, s, stats, k);
  unsigned long long sv[5];
  CK(cudaMemcpy(sv, served, sizeof sv, cudaMemcpyDeviceToHost));
  printf("graph pre-launch instances: served %llu / %llu / %llu of %u\n", sv[0], sv[1], sv[2], echo);
  assert_int_equal(sv[0] + sv[1] + sv[2], echo);
  for (uint32_t i = 0; i < NI; ++i) assert_true(sv[i] >= 1);
  assert_int_equal(sv[3] + sv[4], 0); /* added to the first context only, never launched */
  for (uint32_t i = 0; i < 6; ++i) {
    CK(cudaGraphExecDestroy(ge[i]));
    CK(cudaGraphDestroy(g[i]));
  }
  for (uint32_t i = 1; i < 5; ++i) CK(cudaFree(io[i]));
  CK(cudaFree(served));
  graph_test_free(ctx, io[0], dt, flag, stats, s, &rb);
}

int main(void) {
  if (gpu_test_init() != 0) return 77;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_graph_launch_100k),
      cmocka_unit_test(test_graph_launch_staging_boundary),
      cmocka_unit_test(test_graph_prelaunch),
      cmocka_unit_test(test_graph_prelaunch_instances),
  };
  return cmocka_run_group_tests_name("graph_dispatch", tests, NULL, NULL);
}
