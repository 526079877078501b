/*
 * soak_host.c - a reliability run of the host dispatch path (issue 15,
 * "Soak"): N requests (default 10^9) through a HOST_CALL dispatcher whose
 * thread runs an echo handler, with every slot in flight, each checked on
 * its way back, and at the end the dispatcher's counters checked against
 * what was sent (the producer loop and the checks: soak_common.h). Latency
 * in a log-linear histogram (p99.9, p99.99 and max over all N); a progress
 * line every --progress seconds.
 *
 * Exit status 0 only if every request was answered exactly once, correctly,
 * and processed == N, no drops in the dispatcher's counters.
 *
 *   soak_host [--requests N] [--payload BYTES] [--slots N] [--cpus A,B] [--progress S]
 */
#include "bench_echo.h"
#include "soak_common.h"

#define CK(call) do { cudaq_status_t st_ = (call); if (st_ != CUDAQ_OK) SOAK_DIE("%s: %s (%s)", #call, cudaq_status_string(st_), cudaq_last_error()); } while (0)

static bench_hist_t g_hist;

int main(int argc, char **argv) {
  soak_args_t a = {1000000000ull, 64, 32, 0, 1, 1, 10};
  soak_parse(argc, argv, &a, "[--requests N] [--payload BYTES] [--slots N] [--cpus A,B] [--progress S]");
  const uint32_t slot_size = CUDAQ_RPC_HEADER_SIZE + a.payload;
  cudaq_ringbuffer_t rb;
  bench_echo_server_t srv;
  CK(cudaq_host_ringbuffer_alloc(&rb, a.slots, slot_size, CUDAQ_RING_ALLOC_HOST));
  CK(bench_echo_start(&srv, &rb, a.slots, slot_size, a.cpu_b));
  bench_pin(a.cpu_a);
  printf("soak_host: %llu requests, %u slots in flight, %u-byte payload, producer CPU %d, dispatcher CPU %d\n",
         (unsigned long long)a.n, a.slots, a.payload, a.cpu_a, a.cpu_b);
  fflush(stdout);
  uint64_t answered, bad;
  soak_run("soak_host", &rb, srv.function_id, &a, &g_hist, &answered, &bad);
  CK(cudaq_dispatcher_stop(srv.d));
  cudaq_dispatcher_counters_t cnt;
  CK(cudaq_dispatcher_get_counters(srv.d, &cnt));
  bench_hist_print("host dispatch, all slots in flight", &g_hist);
  const int rc = soak_verdict("soak_host", &a, answered, bad, &cnt);
  CK(cudaq_dispatch_manager_destroy(srv.mgr));
  CK(cudaq_host_ringbuffer_free(&rb));
  return rc;
}
