/*
 * soak_device.cu - a reliability run of the device-call path (issue 15,
 * "Soak"): N requests (default 10^8) through the persistent regular dispatch
 * kernel (DEVICE_CALL, an echo handler; --blocks blocks, each serving its
 * share of the slots) over a mapped ring, with every slot in flight, each
 * response checked on its way back, and at the end the dispatcher's
 * counters (read back from the device) checked against what was sent. The
 * producer loop, the checks and the verdict are soak_common.h's, the same
 * as soak_host's.
 *
 * Exit status 0 only if every request was answered exactly once, correctly,
 * and processed == N with no drops; 77 ("skipped: no CUDA device") without a
 * GPU.
 *
 *   soak_device [--requests N] [--payload BYTES] [--slots N] [--blocks B] [--cpus A,B] [--progress S]
 */
#include <cuda_runtime.h>

#include "cudaq/realtime/dispatch_kernel.h"
#include "soak_common.h"

#define CK(x)                                                                                             \
  do {                                                                                                    \
    cudaError_t e_ = (x);                                                                                 \
    if (e_ != cudaSuccess) SOAK_DIE("%s: %s", #x, cudaGetErrorString(e_));                                \
  } while (0)
#define CQ(x)                                                                                             \
  do {                                                                                                    \
    cudaq_status_t s_ = (x);                                                                              \
    if (s_ != CUDAQ_OK) SOAK_DIE("%s: %s (%s)", #x, cudaq_status_string(s_), cudaq_last_error());       \
  } while (0)

#define FN_ECHO cudaq_fnv1a_hash("soak_echo")

__device__ int d_echo(const void *args, void *result, uint32_t arg_len, uint32_t max, uint32_t *len) {
  if (arg_len > max) return 1;
  const uint8_t *a = (const uint8_t *)args;
  uint8_t *r = (uint8_t *)result;
  for (uint32_t i = threadIdx.x; i < arg_len; i += blockDim.x) r[i] = a[i];
  *len = arg_len;
  return 0;
}
__global__ void init_table(cudaq_function_entry_t *e) {
  memset(e, 0, sizeof *e);
  e->handler.device_fn_ptr = (void *)d_echo;
  e->function_id = FN_ECHO;
  e->dispatch_mode = CUDAQ_DISPATCH_DEVICE_CALL;
}

static bench_hist_t g_hist;

int main(int argc, char **argv) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("skipped: no CUDA device\n");
    return 77;
  }
  soak_args_t a = {100000000ull, 64, 32, 2, 3, 4, 10};
  soak_parse(argc, argv, &a, "[--requests N] [--payload BYTES] [--slots N] [--blocks B] [--cpus A,B] [--progress S]");
  const uint32_t slot_size = CUDAQ_RPC_HEADER_SIZE + ((a.payload + 7) & ~7u);
  cudaq_dispatch_manager_t *m;
  cudaq_dispatcher_t *d;
  cudaq_dispatcher_config_t c;
  cudaq_ringbuffer_t rb;
  cudaq_dispatcher_config_init(&c);
  c.num_slots = a.slots;
  c.slot_size = slot_size;
  c.kernel_type = CUDAQ_KERNEL_REGULAR;
  c.num_blocks = (uint32_t)a.blocks;
  c.threads_per_block = 32;
  CQ(cudaq_dispatch_manager_create(&m));
  CQ(cudaq_dispatcher_create(m, &c, &d));
  CQ(cudaq_host_ringbuffer_alloc(&rb, a.slots, slot_size, CUDAQ_RING_ALLOC_MAPPED));
  cudaq_function_entry_t *t;
  int *flag;
  uint64_t *stats;
  CK(cudaMalloc(&t, sizeof *t));
  init_table<<<1, 1>>>(t);
  CK(cudaDeviceSynchronize());
  CK(cudaMalloc(&flag, sizeof(int))); /* control words in device memory (DESIGN.md) */
  CK(cudaMemset(flag, 0, sizeof(int)));
  CK(cudaMalloc(&stats, sizeof(uint64_t)));
  cudaq_function_table_t table = {t, 1};
  CQ(cudaq_dispatcher_set_ringbuffer(d, &rb));
  CQ(cudaq_dispatcher_set_function_table(d, &table));
  CQ(cudaq_dispatcher_set_control(d, flag, stats));
  CQ(cudaq_dispatcher_set_launch_fn(d, cudaq_launch_dispatch_kernel_regular));
  CQ(cudaq_dispatcher_start(d));
  bench_pin(a.cpu_a);
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("soak_device: %s, %llu requests, %u slots in flight, %d dispatch blocks, %u-byte payload, producer CPU %d\n",
         prop.name, (unsigned long long)a.n, a.slots, a.blocks, a.payload, a.cpu_a);
  fflush(stdout);
  uint64_t answered, bad;
  soak_run("soak_device", &rb, FN_ECHO, &a, &g_hist, &answered, &bad);
  CQ(cudaq_dispatcher_stop(d));
  cudaq_dispatcher_counters_t cnt;
  CQ(cudaq_dispatcher_get_counters(d, &cnt));
  bench_hist_print("device-call, all slots in flight", &g_hist);
  const int rc = soak_verdict("soak_device", &a, answered, bad, &cnt);
  CQ(cudaq_dispatch_manager_destroy(m));
  CQ(cudaq_host_ringbuffer_free(&rb));
  CK(cudaFree(t));
  CK(cudaFree(flag));
  CK(cudaFree(stats));
  return rc;
}
