/* bench_graph_prelaunch.cu - where the device-side graph-launch path's time
 * goes, and whether launching the handler graph before its request arrives
 * hides the launch (issue 15: graph launch <= 8 us).
 *
 * A persistent kernel (itself in a device-launchable graph, as the graph
 * dispatcher is) polls a request word in mapped host memory; a child graph
 * of one kernel answers by storing the value into a mapped response word.
 * Modes, each a row:
 *   on request: the poller sees the request, then launches the child
 *     fire-and-forget (the graph dispatcher's order);
 *   pre-launched: the poller launches the child first; the child's kernel
 *     waits at a gate word in device memory; on the request the poller only
 *     opens the gate (a device-scope release store);
 *   pre-launched pair: two instantiations of the child, each with its own
 *     gate; on a request the poller opens the waiting one's gate and at once
 *     launches the other, whose previous execution (the request before) has
 *     ended by then, so back to back a request still finds a child waiting
 *     (one graph executable runs one launch at a time: with one child the
 *     next launch can start only after the previous execution ends).
 * The host sends one request at a time, back to back or one every
 * --interval microseconds (a realtime source), and times request store to
 * response seen. The device runtime allows a graph execution about 120
 * fire-and-forget launches, so the poller graph serves 100 requests per
 * host launch (the dispatcher relaunches itself likewise).
 *
 * Usage: bench_graph_prelaunch [--requests N] [--interval US[,US...]] [--cpu C]
 * Exit 77 without a CUDA device. */
#include <cuda/atomic>
#include <cuda_runtime.h>

#include <algorithm>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vector>

#include "bench_common.h"
#include "bench_cuda_check.h"

#define CK BENCH_CUDA_CK

namespace {

constexpr uint64_t PER_LAUNCH = 100; /* child launches per poller graph execution */

struct gate_state { /* device memory */
  uint32_t gate;    /* 0 closed, 1 open */
  uint32_t pad;
  uint64_t value;   /* the request the child answers */
  uint64_t next;    /* the next request value the poller waits for (survives its relaunches) */
  uint64_t launch_failures;
  uint64_t launch_calls; /* successful cudaGraphLaunch calls and the device time spent in them (s[0]) */
  uint64_t launch_ns;
};

uint64_t now_ns() { return bench_now_ns(); }

__global__ void child_plain(gate_state *s, uint64_t *resp) {
  /* Published by the response store; the host acquires it. */
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*resp).store(s->value, cuda::memory_order_release);
}

__global__ void child_gated(gate_state *s, uint64_t *resp) {
  cuda::atomic_ref<uint32_t, cuda::thread_scope_device> g(s->gate);
  /* Acquire pairs with the poller's release of the gate: s->value is set. */
  while (g.load(cuda::memory_order_acquire) == 0) {
  }
  const uint64_t v = s->value;
  g.store(0, cuda::memory_order_relaxed); /* closed for the next launch (which starts after this graph ends) */
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*resp).store(v, cuda::memory_order_release);
}

__device__ uint64_t globaltimer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ void launch_retry(cudaGraphExec_t child, gate_state *s) {
  /* The previous launch of the child may still be finishing: retry. */
  for (uint32_t tries = 0; tries < 1000000; ++tries) {
    const uint64_t t0 = globaltimer_ns();
    if (cudaGraphLaunch(child, cudaStreamGraphFireAndForget) == cudaSuccess) {
      s->launch_ns += globaltimer_ns() - t0;
      s->launch_calls++;
      return;
    }
    __nanosleep(100);
  }
  s->launch_failures++;
}

enum { MODE_ON_REQUEST = 0, MODE_PRELAUNCH = 1, MODE_PAIR = 2 };

/* s[0] holds the poller's state (next, launch_failures); MODE_PAIR's second
 * child uses s[1]'s gate and value. */
__global__ void poller(int mode, const uint64_t *req, gate_state *s, cudaGraphExec_t child, cudaGraphExec_t child2) {
  cuda::atomic_ref<const uint64_t, cuda::thread_scope_system> rq(*req);
  int cur = 0; /* MODE_PAIR: the child that waits now */
  for (uint64_t k = 0; k < PER_LAUNCH; ++k) {
    const uint64_t want = s->next;
    if (mode == MODE_PRELAUNCH || (mode == MODE_PAIR && k == 0)) launch_retry(child, s);
    for (;;) {
      __threadfence_system();
      if (rq.load(cuda::memory_order_acquire) == want) break; /* pairs with the host's release of the request */
    }
    s->next = want + 1;
    if (mode == MODE_PAIR) {
      s[cur].value = want;
      /* Release: the value before the gate opens (the child acquires it). */
      cuda::atomic_ref<uint32_t, cuda::thread_scope_device>(s[cur].gate).store(1, cuda::memory_order_release);
      cur ^= 1;
      /* Arm the other child for the next request (not after the last one of
       * this execution: the host waits for every child to end). */
      if (k + 1 < PER_LAUNCH) launch_retry(cur ? child2 : child, s);
    } else if (mode == MODE_PRELAUNCH) {
      s->value = want;
      /* Release: s->value before the gate opens (the child acquires it). */
      cuda::atomic_ref<uint32_t, cuda::thread_scope_device>(s->gate).store(1, cuda::memory_order_release);
    } else {
      s->value = want;
      __threadfence(); /* s->value before the child starts */
      launch_retry(child, s);
    }
  }
}

cudaGraphExec_t capture(void (*fill)(cudaStream_t), cudaStream_t st) {
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  fill(st);
  CK(cudaStreamEndCapture(st, &g));
  CK(cudaGraphInstantiateWithFlags(&ge, g, cudaGraphInstantiateFlagDeviceLaunch));
  CK(cudaGraphUpload(ge, st));
  CK(cudaStreamSynchronize(st));
  CK(cudaGraphDestroy(g));
  return ge;
}

gate_state *g_s; /* two: MODE_PAIR's second child gates on g_s[1] */
uint64_t *g_req_d, *g_resp_d;
cudaGraphExec_t g_child, g_child2;
int g_mode;

void fill_plain(cudaStream_t st) { child_plain<<<1, 1, 0, st>>>(g_s, g_resp_d); }
void fill_gated(cudaStream_t st) { child_gated<<<1, 1, 0, st>>>(g_s, g_resp_d); }
void fill_gated2(cudaStream_t st) { child_gated<<<1, 1, 0, st>>>(g_s + 1, g_resp_d); }
void fill_poller(cudaStream_t st) { poller<<<1, 1, 0, st>>>(g_mode, g_req_d, g_s, g_child, g_child2); }

const char *mode_name(int mode) {
  return mode == MODE_PAIR ? "pre-launched pair" : mode == MODE_PRELAUNCH ? "pre-launched, gate opened" : "launched on request";
}

void run(int mode, double interval_us, uint64_t n) {
  uint64_t *h;
  CK(cudaHostAlloc(&h, 4096, cudaHostAllocMapped));
  memset(h, 0, 4096);
  uint64_t *d;
  CK(cudaHostGetDevicePointer(&d, h, 0));
  g_req_d = d;
  g_resp_d = d + 16;
  CK(cudaMalloc(&g_s, 2 * sizeof(gate_state)));
  CK(cudaMemset(g_s, 0, 2 * sizeof(gate_state)));
  gate_state init = {};
  init.next = 1;
  CK(cudaMemcpy(g_s, &init, sizeof init, cudaMemcpyHostToDevice));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  g_child = capture(mode != MODE_ON_REQUEST ? fill_gated : fill_plain, st);
  g_child2 = mode == MODE_PAIR ? capture(fill_gated2, st) : g_child;
  g_mode = mode;
  cudaGraphExec_t pe = capture(fill_poller, st);
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system> req(h[0]), resp(h[16]);
  const uint64_t warm = 2 * PER_LAUNCH;
  n = (n + PER_LAUNCH - 1) / PER_LAUNCH * PER_LAUNCH;
  std::vector<uint64_t> lat;
  lat.reserve(n);
  uint64_t i = 1, tnext = now_ns();
  const uint64_t gap = (uint64_t)(interval_us * 1000.0);
  for (uint64_t b = 0; b < (warm + n) / PER_LAUNCH; ++b) {
    CK(cudaGraphLaunch(pe, st));
    for (uint64_t k = 0; k < PER_LAUNCH; ++k, ++i) {
      while (now_ns() < tnext) {
      }
      const uint64_t t0 = now_ns();
      req.store(i, cuda::memory_order_release); /* pairs with the poller's acquire */
      const uint64_t tw = t0;
      while (resp.load(cuda::memory_order_acquire) != i)
        if (now_ns() - tw > 5000000000ull) {
          fprintf(stderr, "no response to request %llu after 5 s\n", (unsigned long long)i);
          exit(1);
        }
      const uint64_t t1 = now_ns();
      if (i > warm) lat.push_back(t1 - t0);
      tnext = t1 + gap;
    }
    CK(cudaStreamSynchronize(st)); /* the poller's execution and its children (untimed) */
    tnext = now_ns() + gap;
  }
  gate_state fin;
  CK(cudaMemcpy(&fin, g_s, sizeof fin, cudaMemcpyDeviceToHost));
  std::sort(lat.begin(), lat.end());
  auto q = [&](double p) { return lat[(size_t)(p * (double)(lat.size() - 1))] / 1000.0; };
  char name[96];
  snprintf(name, sizeof name, "%s, %s", mode_name(mode), gap ? "interval" : "back to back");
  printf("%-42s %5.0f us  n=%-7zu min %6.2f  p50 %6.2f  p90 %6.2f  p99 %6.2f  max %8.2f us  launch failures %llu, a launch call %.2f us\n",
         name, interval_us, lat.size(), q(0), q(.5), q(.9), q(.99), q(1), (unsigned long long)fin.launch_failures,
         fin.launch_calls ? fin.launch_ns / 1000.0 / (double)fin.launch_calls : 0.0);
  fflush(stdout);
  CK(cudaGraphExecDestroy(pe));
  CK(cudaGraphExecDestroy(g_child));
  if (g_child2 != g_child) CK(cudaGraphExecDestroy(g_child2));
  CK(cudaStreamDestroy(st));
  CK(cudaFree(g_s));
  CK(cudaFreeHost(h));
}

} // namespace

int main(int argc, char **argv) {
  uint64_t n = 20000;
  int cpu = 2;
  std::vector<double> intervals = {0.0, 20.0};
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--requests") && i + 1 < argc) n = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--cpu") && i + 1 < argc) cpu = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--interval") && i + 1 < argc) {
      intervals.clear();
      for (char *t = strtok(argv[++i], ","); t; t = strtok(NULL, ",")) intervals.push_back(atof(t));
    } else {
      fprintf(stderr, "usage: %s [--requests N] [--interval US[,US...]] [--cpu C]\n", argv[0]);
      return 2;
    }
  }
  if (n == 0 || intervals.empty()) {
    fprintf(stderr, "%s: --requests and --interval need at least one\n", argv[0]);
    return 2;
  }
  BENCH_EXIT_IF_NO_GPU();
  if (bench_pin(cpu) != 0) fprintf(stderr, "could not pin to CPU %d; running unpinned\n", cpu);
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("graph launch from the device, launched on request vs pre-launched: %s, %llu requests per row, host on CPU %d\n",
         prop.name, (unsigned long long)n, cpu);
  for (int round = 0; round < 2; ++round)
    for (double iv : intervals)
      for (int mode = MODE_ON_REQUEST; mode <= MODE_PAIR; ++mode) run(mode, iv, n);
  return 0;
}
