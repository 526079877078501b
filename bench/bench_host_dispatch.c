/*
 * bench_host_dispatch.c - host-thread dispatch round trip against the
 * CPU <-> CPU floor, measured in the same run on the same two cores.
 *
 *   floor:     two threads ping-pong one cache line (store-release / load-
 *              acquire), as shared/tools/floor.cu measures it.
 *   dispatch:  the producer writes an RPC request into a slot and signals
 *              it; the dispatcher thread runs an echo handler and publishes
 *              the response; the producer sees the TX flag, reads the
 *              response, clears the slot. One request in flight.
 *   pipelined: every slot in flight, producer and consumer on one thread:
 *              throughput in requests per second.
 *
 * Usage: bench_host_dispatch [--requests N] [--payload BYTES] [--slots N]
 *                            [--cpus A,B]  (producer on A, dispatcher on B)
 */
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "bench_common.h"
#include "bench_echo.h"

#define DIE(...) do { fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); exit(1); } while (0)
#define CK(call) do { cudaq_status_t st_ = (call); if (st_ != CUDAQ_OK) DIE("%s: %s (%s)", #call, cudaq_status_string(st_), cudaq_last_error()); } while (0)

/* ---- floor: cache-line ping-pong -------------------------------------- */
typedef struct {
  _Alignas(128) _Atomic uint64_t ping;
  _Alignas(128) _Atomic uint64_t pong;
  uint64_t n;
  int cpu;
} pingpong_t;

static void *pong_main(void *p) {
  pingpong_t *pp = p;
  bench_pin(pp->cpu);
  for (uint64_t i = 1; i <= pp->n; ++i) {
    while (atomic_load_explicit(&pp->ping, memory_order_acquire) != i) {}
    atomic_store_explicit(&pp->pong, i, memory_order_release);
  }
  return NULL;
}

static bench_stats_t run_floor(uint64_t n, int cpu_a, int cpu_b, uint64_t *lat) {
  static pingpong_t pp;
  atomic_store(&pp.ping, 0);
  atomic_store(&pp.pong, 0);
  pp.n = n;
  pp.cpu = cpu_b;
  pthread_t t;
  pthread_create(&t, NULL, pong_main, &pp);
  bench_pin(cpu_a);
  for (uint64_t i = 1; i <= n; ++i) {
    uint64_t t0 = bench_now_ns();
    atomic_store_explicit(&pp.ping, i, memory_order_release);
    while (atomic_load_explicit(&pp.pong, memory_order_acquire) != i) {}
    lat[i - 1] = bench_now_ns() - t0;
  }
  pthread_join(t, NULL);
  return bench_percentiles(lat, n);
}

int main(int argc, char **argv) {
  uint64_t n = 200000;
  uint32_t payload = 64, slots = 32;
  int cpu_a = 0, cpu_b = 1;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--requests") && i + 1 < argc) n = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--payload") && i + 1 < argc) payload = (uint32_t)atoi(argv[++i]);
    else if (!strcmp(argv[i], "--slots") && i + 1 < argc) slots = (uint32_t)atoi(argv[++i]);
    else if (!strcmp(argv[i], "--cpus") && i + 1 < argc) {
      if (sscanf(argv[++i], "%d,%d", &cpu_a, &cpu_b) != 2) DIE("--cpus A,B");
    } else DIE("usage: %s [--requests N] [--payload BYTES] [--slots N] [--cpus A,B]", argv[0]);
  }
  if (n == 0 || slots == 0) DIE("--requests and --slots must be > 0");
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  if (cpu_a >= ncpu || cpu_b >= ncpu || cpu_a == cpu_b) DIE("--cpus: need two distinct CPUs < %ld", ncpu);
  const uint32_t slot_size = CUDAQ_RPC_HEADER_SIZE + (payload < 8 ? 8 : payload);
  uint64_t *lat = malloc(n * sizeof *lat);
  if (!lat) DIE("out of memory");

  printf("host-thread dispatch benchmark: %llu requests, %u-byte payload, producer on CPU %d, "
         "dispatcher on CPU %d\n", (unsigned long long)n, payload, cpu_a, cpu_b);
  bench_print_header();
  bench_stats_t fl = run_floor(n, cpu_a, cpu_b, lat);
  bench_print_row("floor: cpu<->cpu cache-line round trip", (size_t)n, fl);

  cudaq_ringbuffer_t rb;
  bench_echo_server_t srv;
  CK(cudaq_host_ringbuffer_alloc(&rb, slots, slot_size, CUDAQ_RING_ALLOC_HOST));
  CK(bench_echo_start(&srv, &rb, slots, slot_size, cpu_b));
  cudaq_dispatcher_t *d = srv.d;
  bench_pin(cpu_a);

  uint8_t buf[65536];
  for (uint32_t i = 0; i < sizeof buf; ++i) buf[i] = (uint8_t)i;
  /* One request in flight: the round trip. */
  uint64_t errors = 0;
  for (uint64_t k = 0; k < n; ++k) {
    uint32_t slot = (uint32_t)(k % slots);
    uint64_t t0 = bench_now_ns();
    cudaq_host_ringbuffer_write_rpc_request(&rb, slot, srv.function_id, buf, payload, (uint32_t)k, t0);
    cudaq_host_ringbuffer_signal_slot(&rb, slot);
    while (cudaq_host_ringbuffer_poll_tx_flag(&rb, slot, NULL) != CUDAQ_TX_READY) {}
    const cudaq_rpc_response_t *r = (const cudaq_rpc_response_t *)(const void *)
        (rb.tx_data_host + (size_t)slot * rb.tx_stride_sz);
    if (r->request_id != (uint32_t)k || r->status != 0) ++errors;
    cudaq_host_ringbuffer_clear_slot(&rb, slot);
    lat[k] = bench_now_ns() - t0;
  }
  bench_stats_t rt = bench_percentiles(lat, n);
  bench_print_row("host-thread dispatch round trip (1 in flight)", (size_t)n, rt);

  /* Every slot in flight: throughput. */
  uint64_t t0 = bench_now_ns();
  for (uint64_t k = 0; k < n + slots; ++k) {
    uint32_t slot = (uint32_t)(k % slots);
    if (k >= slots) {
      while (cudaq_host_ringbuffer_poll_tx_flag(&rb, slot, NULL) != CUDAQ_TX_READY) {}
      cudaq_host_ringbuffer_clear_slot(&rb, slot);
    }
    if (k >= n) continue;
    while (!cudaq_host_ringbuffer_slot_available(&rb, slot)) {}
    cudaq_host_ringbuffer_write_rpc_request(&rb, slot, srv.function_id, buf, payload, (uint32_t)k, 0);
    cudaq_host_ringbuffer_signal_slot(&rb, slot);
  }
  double secs = (double)(bench_now_ns() - t0) / 1e9;
  CK(cudaq_dispatcher_stop(d));
  cudaq_dispatcher_counters_t cnt;
  CK(cudaq_dispatcher_get_counters(d, &cnt));
  printf("pipelined (%u slots in flight): %.0f requests/s (%.3f us per request)\n", slots,
         (double)n / secs, secs * 1e6 / (double)n);
  printf("p50 ratio dispatch / floor: %.2fx (target <= 2x); answered %llu of %llu, %llu wrong\n",
         rt.p50 / fl.p50, (unsigned long long)cnt.processed, (unsigned long long)(2 * n),
         (unsigned long long)errors);
  CK(cudaq_dispatch_manager_destroy(srv.mgr));
  CK(cudaq_host_ringbuffer_free(&rb));
  free(lat);
  return errors || cnt.processed != 2 * n;
}
