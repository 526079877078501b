/*
 * soak_host.c - a reliability run of the host dispatch path (issue 15,
 * "Soak"): N requests (default 10^9) through a HOST_CALL dispatcher with
 * every slot in flight, each checked on its way back, and at the end the
 * dispatcher's counters checked against what was sent.
 *
 * Per request: the producer writes request k (payload: k, then a pattern
 * derived from k) into slot k % slots and signals it; the dispatcher thread
 * runs an echo handler; when the slot comes round again the producer waits
 * for its TX flag and checks the response: magic, status 0, request id
 * (uint32_t)k, result length, and the whole echoed payload. Latency is
 * signal -> response seen, with up to `slots` requests queued ahead (time in
 * the system at full load), kept in a log-linear histogram (p99.9, p99.99
 * and max over all N). A progress line every --progress seconds.
 *
 * Exit status 0 only if every request was answered exactly once, correctly,
 * and processed == N, no drops in the dispatcher's counters.
 *
 *   soak_host [--requests N] [--payload BYTES] [--slots N] [--cpus A,B] [--progress S]
 */
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "bench_common.h"
#include "bench_echo.h"

#define DIE(...) do { fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); exit(1); } while (0)
#define CK(call) do { cudaq_status_t st_ = (call); if (st_ != CUDAQ_OK) DIE("%s: %s (%s)", #call, cudaq_status_string(st_), cudaq_last_error()); } while (0)

static void fill(uint8_t *p, uint32_t len, uint64_t k) {
  memcpy(p, &k, 8);
  for (uint32_t i = 8; i < len; ++i) p[i] = (uint8_t)(k * 131u + i * 7u);
}

static bench_hist_t g_hist;

int main(int argc, char **argv) {
  uint64_t n = 1000000000ull;
  uint32_t payload = 64, slots = 32;
  int cpu_a = 0, cpu_b = 1;
  double progress_s = 10;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--requests") && i + 1 < argc) n = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--payload") && i + 1 < argc) payload = (uint32_t)atoi(argv[++i]);
    else if (!strcmp(argv[i], "--slots") && i + 1 < argc) slots = (uint32_t)atoi(argv[++i]);
    else if (!strcmp(argv[i], "--progress") && i + 1 < argc) progress_s = atof(argv[++i]);
    else if (!strcmp(argv[i], "--cpus") && i + 1 < argc) {
      if (sscanf(argv[++i], "%d,%d", &cpu_a, &cpu_b) != 2) DIE("--cpus A,B");
    } else DIE("usage: %s [--requests N] [--payload BYTES] [--slots N] [--cpus A,B] [--progress S]", argv[0]);
  }
  if (n == 0 || slots == 0 || slots > 4096) DIE("--requests must be > 0 and --slots 1..4096");
  if (payload < 8 || payload > 65536) DIE("--payload must be 8..65536 bytes (the request number is in it)");
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  if (cpu_a >= ncpu || cpu_b >= ncpu || cpu_a == cpu_b) DIE("--cpus: need two distinct CPUs < %ld", ncpu);
  const uint32_t slot_size = CUDAQ_RPC_HEADER_SIZE + payload;

  cudaq_ringbuffer_t rb;
  bench_echo_server_t srv;
  CK(cudaq_host_ringbuffer_alloc(&rb, slots, slot_size, CUDAQ_RING_ALLOC_HOST));
  CK(bench_echo_start(&srv, &rb, slots, slot_size, cpu_b));
  cudaq_dispatcher_t *d = srv.d;
  bench_pin(cpu_a);
  printf("soak_host: %llu requests, %u slots in flight, %u-byte payload, producer CPU %d, dispatcher CPU %d\n",
         (unsigned long long)n, slots, payload, cpu_a, cpu_b);
  fflush(stdout);

  uint64_t *t_sent = calloc(slots, sizeof *t_sent);
  uint8_t *buf = malloc(payload), *want = malloc(payload);
  if (!t_sent || !buf || !want) DIE("out of memory");
  uint64_t bad = 0, answered = 0;
  const uint64_t t0 = bench_now_ns();
  uint64_t next_report = t0 + (uint64_t)(progress_s * 1e9), last_answered = 0, last_t = t0;
  for (uint64_t k = 0; k < n + slots; ++k) {
    const uint32_t slot = (uint32_t)(k % slots);
    if (k >= slots) { /* request k - slots is in this slot: harvest and check it */
      const uint64_t j = k - slots;
      while (cudaq_host_ringbuffer_poll_tx_flag(&rb, slot, NULL) != CUDAQ_TX_READY) {}
      const uint64_t now = bench_now_ns();
      bench_hist_add(&g_hist, now - t_sent[slot]);
      const uint8_t *tx = rb.tx_data_host + (size_t)slot * rb.tx_stride_sz;
      cudaq_rpc_response_t r;
      memcpy(&r, tx, sizeof r);
      fill(want, payload, j);
      if (r.magic != CUDAQ_RPC_MAGIC_RESPONSE || r.status != 0 || r.request_id != (uint32_t)j ||
          r.result_len != payload || memcmp(tx + CUDAQ_RPC_HEADER_SIZE, want, payload) != 0) {
        if (bad++ < 5)
          fprintf(stderr, "soak_host: request %llu: wrong response (status %d, id %u, len %u)\n",
                  (unsigned long long)j, r.status, r.request_id, r.result_len);
      }
      ++answered;
      cudaq_host_ringbuffer_clear_slot(&rb, slot);
      if (now >= next_report) {
        printf("  %6.0f s: %llu answered (%.2f M/s now), %llu wrong; p99.9 so far %.2f us, max %.2f us\n",
               (double)(now - t0) / 1e9, (unsigned long long)answered,
               (double)(answered - last_answered) / ((double)(now - last_t) / 1e3),
               (unsigned long long)bad, (double)bench_hist_quantile(&g_hist, 0.999) / 1e3,
               (double)g_hist.max_ns / 1e3);
        fflush(stdout);
        last_answered = answered, last_t = now;
        next_report = now + (uint64_t)(progress_s * 1e9);
      }
    }
    if (k >= n) continue;
    while (!cudaq_host_ringbuffer_slot_available(&rb, slot)) {}
    fill(buf, payload, k);
    cudaq_host_ringbuffer_write_rpc_request(&rb, slot, srv.function_id, buf, payload, (uint32_t)k, 0);
    t_sent[slot] = bench_now_ns();
    cudaq_host_ringbuffer_signal_slot(&rb, slot);
  }
  const double secs = (double)(bench_now_ns() - t0) / 1e9;
  CK(cudaq_dispatcher_stop(d));
  cudaq_dispatcher_counters_t cnt;
  CK(cudaq_dispatcher_get_counters(d, &cnt));
  bench_hist_print("host dispatch, all slots in flight", &g_hist);
  const uint64_t dropped = cnt.dropped_bad_magic + cnt.dropped_unknown_function;
  printf("soak_host: %llu sent, %llu answered, %llu wrong in %.1f s (%.2f M requests/s); dispatcher "
         "counters: processed %llu, dropped %llu\n",
         (unsigned long long)n, (unsigned long long)answered, (unsigned long long)bad, secs,
         (double)n / secs / 1e6, (unsigned long long)cnt.processed, (unsigned long long)dropped);
  const int ok = bad == 0 && answered == n && cnt.processed == n && dropped == 0;
  printf("soak_host: %s\n", ok ? "PASS (every request answered once, correctly; counters consistent)" : "FAIL");
  CK(cudaq_dispatch_manager_destroy(srv.mgr));
  CK(cudaq_host_ringbuffer_free(&rb));
  free(t_sent), free(buf), free(want);
  return ok ? 0 : 1;
}
