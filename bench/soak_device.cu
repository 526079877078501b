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
#include "bench_device_echo.cuh"
#include "soak_common.h"

static bench_hist_t g_hist;

int main(int argc, char **argv) {
  BENCH_EXIT_IF_NO_GPU();
  soak_args_t a = {100000000ull, 64, 32, 2, 3, 4, 10};
  soak_parse(argc, argv, &a, "[--requests N] [--payload BYTES] [--slots N] [--blocks B] [--cpus A,B] [--progress S]");
  const uint32_t slot_size = CUDAQ_RPC_HEADER_SIZE + ((a.payload + 7) & ~7u);
  bench_device_echo e;
  bench_device_echo_start(&e, a.slots, slot_size, false, (uint32_t)a.blocks);
  bench_pin(a.cpu_a);
  cudaDeviceProp prop;
  BENCH_CUDA_CK(cudaGetDeviceProperties(&prop, 0));
  printf("soak_device: %s, %llu requests, %u slots in flight, %d dispatch blocks, %u-byte payload, producer CPU %d\n",
         prop.name, (unsigned long long)a.n, a.slots, a.blocks, a.payload, a.cpu_a);
  fflush(stdout);
  uint64_t answered, bad;
  soak_run("soak_device", &e.rb, BENCH_ECHO_FN, &a, &g_hist, &answered, &bad);
  cudaq_dispatcher_counters_t cnt;
  bench_device_echo_stop(&e, &cnt);
  bench_hist_print("device-call, all slots in flight", &g_hist);
  return soak_verdict("soak_device", &a, answered, bad, &cnt);
}
