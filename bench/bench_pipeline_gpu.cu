/*
 * bench_pipeline_gpu.cu - the GPU stage of bench_pipeline (CUDA builds):
 * the passthrough graphs of tests/gpu/pipeline_gpu_stage.cuh and the
 * graph-launch floor, behind a C interface.
 */
#include <time.h>

#include "../tests/gpu/pipeline_gpu_stage.cuh"

static pgs_stage g_stage;

static uint64_t now_ns_fn(void) {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

extern "C" {
int bench_gpu_available(void);
int bench_gpu_factory(void *user, int worker_id, cudaq_gpu_worker_resources_t *r);
void bench_gpu_set_payload(size_t bytes, int signal_ready, int mailbox_read, int timed, int self_gate,
                           int gate_in_ring);
void bench_gpu_launch_stats(uint64_t *n, uint64_t *sum_ns, uint64_t *max_ns, uint64_t *over_100us,
                            uint64_t *over_1ms);
void bench_gpu_release(void);
int bench_gpu_launch_floor(size_t n, uint64_t *samples_ns, size_t payload_bytes);

int bench_gpu_available(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    cudaGetLastError();
    return 0;
  }
  return 1;
}

int bench_gpu_factory(void *user, int worker_id, cudaq_gpu_worker_resources_t *r) {
  (void)user;
  return pgs_factory(&g_stage, worker_id, r);
}

/* timed: time the dispatcher's launch calls (pre- and post-launch
 * callbacks; not with gpu_prelaunch, which refuses callbacks). self_gate
 * = N > 0: the kernel (N blocks) waits at the gate itself (gpu_prelaunch),
 * reading the request's copy or, with gate_in_ring, the ring. */
void bench_gpu_set_payload(size_t bytes, int signal_ready, int mailbox_read, int timed, int self_gate,
                           int gate_in_ring) {
  g_stage.payload = bytes;
  g_stage.signal_ready = signal_ready;
  g_stage.mailbox_read = mailbox_read;
  g_stage.self_gate = self_gate > 0 ? self_gate : 0;
  g_stage.gate_in_ring = gate_in_ring;
  g_stage.function_id = 0x5a5a0001u;
  g_stage.now = timed ? now_ns_fn : NULL;
  g_stage.launch_n = g_stage.launch_sum_ns = g_stage.launch_max_ns = 0;
  g_stage.launch_over_100us = g_stage.launch_over_1ms = 0;
}

/* Read after the pipeline has stopped (the dispatcher thread wrote them). */
void bench_gpu_launch_stats(uint64_t *n, uint64_t *sum_ns, uint64_t *max_ns, uint64_t *over_100us,
                            uint64_t *over_1ms) {
  *n = g_stage.launch_n;
  *sum_ns = g_stage.launch_sum_ns;
  *max_ns = g_stage.launch_max_ns;
  *over_100us = g_stage.launch_over_100us;
  *over_1ms = g_stage.launch_over_1ms;
}

void bench_gpu_release(void) { pgs_release(&g_stage); }

int bench_gpu_launch_floor(size_t n, uint64_t *samples_ns, size_t payload_bytes) {
  return pgs_launch_floor(n, samples_ns, payload_bytes, now_ns_fn);
}
}
