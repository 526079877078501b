/* bench_device_echo.cuh - the device-call echo server of the GPU benchmarks
 * (bench_gpu_dispatch, soak_device): a DEVICE_CALL handler that echoes the
 * payload, its one-entry function table, and a persistent dispatcher
 * (regular or cooperative kernel) over a mapped ring with its control words
 * in device memory (DESIGN.md). Errors end the program with a message. */
#ifndef CUDAQ_BENCH_DEVICE_ECHO_CUH
#define CUDAQ_BENCH_DEVICE_ECHO_CUH

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudaq/realtime/cudaq_realtime.h"
#include "cudaq/realtime/dispatch_kernel.h"
#include "bench_cuda_check.h"

#define BENCH_ECHO_FN cudaq_fnv1a_hash("echo")

__device__ int bench_d_echo(const void *args, void *result, uint32_t arg_len, uint32_t max, uint32_t *len) {
  if (arg_len > max) return 1;
  const uint8_t *a = (const uint8_t *)args;
  uint8_t *r = (uint8_t *)result;
  for (uint32_t i = threadIdx.x; i < arg_len; i += blockDim.x) r[i] = a[i];
  *len = arg_len;
  return 0;
}
/* The same echo copying 4-byte words (payloads of whole words; others byte
 * by byte): one store of the warp for up to 128 bytes instead of one per
 * 32 bytes. */
__device__ int bench_d_echo_words(const void *args, void *result, uint32_t arg_len, uint32_t max, uint32_t *len) {
  if (arg_len % 4) return bench_d_echo(args, result, arg_len, max, len);
  if (arg_len > max) return 1;
  const uint32_t *a = (const uint32_t *)args;
  uint32_t *r = (uint32_t *)result;
  for (uint32_t i = threadIdx.x; i < arg_len / 4; i += blockDim.x) r[i] = a[i];
  *len = arg_len;
  return 0;
}
__global__ void bench_init_echo_table(cudaq_function_entry_t *e, bool words = false) {
  memset(e, 0, sizeof *e);
  e->handler.device_fn_ptr = words ? (void *)bench_d_echo_words : (void *)bench_d_echo;
  e->function_id = BENCH_ECHO_FN;
  e->dispatch_mode = CUDAQ_DISPATCH_DEVICE_CALL;
}

/* The one-entry echo table in device memory (cudaFree it). */
static inline cudaq_function_entry_t *bench_echo_table(bool words = false) {
  cudaq_function_entry_t *t;
  BENCH_CUDA_CK(cudaMalloc(&t, sizeof *t));
  bench_init_echo_table<<<1, 1>>>(t, words);
  BENCH_CUDA_CK(cudaDeviceSynchronize());
  return t;
}

struct bench_device_echo {
  cudaq_dispatch_manager_t *m;
  cudaq_dispatcher_t *d;
  cudaq_ringbuffer_t rb;
  cudaq_function_entry_t *t;
  int *flag;
  uint64_t *stats;
};

/* Starts the echo dispatcher: `blocks` blocks of 32 threads, regular or
 * cooperative, over a mapped ring of `slots` slots of slot_size bytes;
 * `launch` (if not NULL) replaces the regular kernel's launch helper;
 * ring_flags are added to the ring's allocation flags (e.g.
 * CUDAQ_RING_ALLOC_HEADER_COMPLETION); words: the echo copies words. */
static inline void bench_device_echo_start(bench_device_echo *e, uint32_t slots, uint32_t slot_size, bool coop,
                                           uint32_t blocks, cudaq_dispatch_launch_fn_t launch = nullptr,
                                           uint32_t ring_flags = 0, bool words = false) {
  cudaq_dispatcher_config_t c;
  cudaq_dispatcher_config_init(&c);
  c.num_slots = slots;
  c.slot_size = slot_size;
  c.kernel_type = coop ? CUDAQ_KERNEL_COOPERATIVE : CUDAQ_KERNEL_REGULAR;
  c.num_blocks = blocks;
  c.threads_per_block = 32;
  BENCH_CUDAQ_CK(cudaq_dispatch_manager_create(&e->m));
  BENCH_CUDAQ_CK(cudaq_dispatcher_create(e->m, &c, &e->d));
  BENCH_CUDAQ_CK(cudaq_host_ringbuffer_alloc(&e->rb, slots, slot_size, CUDAQ_RING_ALLOC_MAPPED | ring_flags));
  e->t = bench_echo_table(words);
  BENCH_CUDA_CK(cudaMalloc(&e->flag, sizeof(int))); /* control words in device memory (DESIGN.md) */
  BENCH_CUDA_CK(cudaMemset(e->flag, 0, sizeof(int)));
  BENCH_CUDA_CK(cudaMalloc(&e->stats, sizeof(uint64_t)));
  cudaq_function_table_t table = {e->t, 1};
  BENCH_CUDAQ_CK(cudaq_dispatcher_set_ringbuffer(e->d, &e->rb));
  BENCH_CUDAQ_CK(cudaq_dispatcher_set_function_table(e->d, &table));
  BENCH_CUDAQ_CK(cudaq_dispatcher_set_control(e->d, e->flag, e->stats));
  BENCH_CUDAQ_CK(cudaq_dispatcher_set_launch_fn(
      e->d, coop ? cudaq_launch_dispatch_kernel_cooperative : launch ? launch : cudaq_launch_dispatch_kernel_regular));
  BENCH_CUDAQ_CK(cudaq_dispatcher_start(e->d));
}

/* Stops it (draining what is signalled) and frees everything but the counters' reading. */
static inline void bench_device_echo_stop(bench_device_echo *e, cudaq_dispatcher_counters_t *cnt) {
  BENCH_CUDAQ_CK(cudaq_dispatcher_stop(e->d));
  if (cnt) BENCH_CUDAQ_CK(cudaq_dispatcher_get_counters(e->d, cnt));
  BENCH_CUDAQ_CK(cudaq_dispatch_manager_destroy(e->m));
  BENCH_CUDAQ_CK(cudaq_host_ringbuffer_free(&e->rb));
  BENCH_CUDA_CK(cudaFree(e->t));
  BENCH_CUDA_CK(cudaFree(e->flag));
  BENCH_CUDA_CK(cudaFree(e->stats));
}

#endif
