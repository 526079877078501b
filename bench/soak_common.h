/* soak_common.h - the producer side of the soak runs (issue 15, "Soak"),
 * shared by soak_host.c (HOST_CALL dispatcher) and soak_device.cu (the
 * persistent DEVICE_CALL kernel): N echo requests with every slot in
 * flight, each response checked when its slot comes round again, latency in
 * a log-linear histogram, a progress line every few seconds, and the verdict
 * against the dispatcher's counters.
 *
 * Per request: the producer writes request k (payload: k, then a pattern
 * derived from k) into slot k % slots and signals it; when the slot comes
 * round again it waits for the TX flag and checks magic, status 0, request id
 * (uint32_t)k, result length and the whole echoed payload. Latency is signal
 * -> response seen, with up to `slots` requests queued ahead (time in the
 * system at full load). */
#ifndef CUDAQ_SOAK_COMMON_H
#define CUDAQ_SOAK_COMMON_H

#include <string.h>
#include <unistd.h>

#include "bench_common.h"
#include "cudaq/realtime/cudaq_realtime.h"

#define SOAK_DIE(...) do { fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); exit(1); } while (0)

typedef struct {
  uint64_t n;
  uint32_t payload, slots;
  int cpu_a, cpu_b; /* producer; dispatcher thread (host path) */
  int blocks;       /* dispatch kernel blocks (device path) */
  double progress_s;
} soak_args_t;

/* Parses the common options; usage names the program's own. */
static inline void soak_parse(int argc, char **argv, soak_args_t *a, const char *usage) {
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--requests") && i + 1 < argc) a->n = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--payload") && i + 1 < argc) a->payload = (uint32_t)atoi(argv[++i]);
    else if (!strcmp(argv[i], "--slots") && i + 1 < argc) a->slots = (uint32_t)atoi(argv[++i]);
    else if (!strcmp(argv[i], "--progress") && i + 1 < argc) a->progress_s = atof(argv[++i]);
    else if (!strcmp(argv[i], "--blocks") && i + 1 < argc) a->blocks = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--cpus") && i + 1 < argc) {
      if (sscanf(argv[++i], "%d,%d", &a->cpu_a, &a->cpu_b) != 2) SOAK_DIE("--cpus A,B");
    } else SOAK_DIE("usage: %s %s", argv[0], usage);
  }
  if (a->n == 0 || a->slots == 0 || a->slots > 4096) SOAK_DIE("--requests must be > 0 and --slots 1..4096");
  if (a->payload < 8 || a->payload > 65536) SOAK_DIE("--payload must be 8..65536 bytes (the request number is in it)");
  if (a->blocks < 1 || (uint32_t)a->blocks > a->slots) SOAK_DIE("--blocks must be 1..slots");
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  if (a->cpu_a >= ncpu || a->cpu_b >= ncpu || a->cpu_a == a->cpu_b) SOAK_DIE("--cpus: need two distinct CPUs < %ld", ncpu);
}

static inline void soak_fill(uint8_t *p, uint32_t len, uint64_t k) {
  memcpy(p, &k, 8);
  for (uint32_t i = 8; i < len; ++i) p[i] = (uint8_t)(k * 131u + i * 7u);
}

/* Sends a->n requests through rb (function id fid) and checks every
 * response; *answered and *bad count them. name prefixes the messages. */
static inline void soak_run(const char *name, cudaq_ringbuffer_t *rb, uint32_t fid, const soak_args_t *a,
                            bench_hist_t *hist, uint64_t *answered_out, uint64_t *bad_out) {
  const uint32_t payload = a->payload, slots = a->slots;
  uint64_t *t_sent = (uint64_t *)calloc(slots, sizeof *t_sent);
  uint8_t *buf = (uint8_t *)malloc(payload), *want = (uint8_t *)malloc(payload);
  if (!t_sent || !buf || !want) SOAK_DIE("out of memory");
  uint64_t bad = 0, answered = 0;
  const uint64_t t0 = bench_now_ns();
  uint64_t next_report = t0 + (uint64_t)(a->progress_s * 1e9), last_answered = 0, last_t = t0;
  for (uint64_t k = 0; k < a->n + slots; ++k) {
    const uint32_t slot = (uint32_t)(k % slots);
    if (k >= slots) { /* request k - slots is in this slot: harvest and check it */
      const uint64_t j = k - slots;
      while (cudaq_host_ringbuffer_poll_tx_flag(rb, slot, NULL) != CUDAQ_TX_READY) {}
      const uint64_t now = bench_now_ns();
      bench_hist_add(hist, now - t_sent[slot]);
      const uint8_t *tx = rb->tx_data_host + (size_t)slot * rb->tx_stride_sz;
      cudaq_rpc_response_t r;
      memcpy(&r, tx, sizeof r);
      soak_fill(want, payload, j);
      if (r.magic != CUDAQ_RPC_MAGIC_RESPONSE || r.status != 0 || r.request_id != (uint32_t)j ||
          r.result_len != payload || memcmp(tx + CUDAQ_RPC_HEADER_SIZE, want, payload) != 0) {
        if (bad++ < 5)
          fprintf(stderr, "%s: request %llu: wrong response (status %d, id %u, len %u)\n", name,
                  (unsigned long long)j, r.status, r.request_id, r.result_len);
      }
      ++answered;
      cudaq_host_ringbuffer_clear_slot(rb, slot);
      if (now >= next_report) {
        printf("  %6.0f s: %llu answered (%.2f M/s now), %llu wrong; p99.9 so far %.2f us, max %.2f us\n",
               (double)(now - t0) / 1e9, (unsigned long long)answered,
               (double)(answered - last_answered) / ((double)(now - last_t) / 1e3), (unsigned long long)bad,
               (double)bench_hist_quantile(hist, 0.999) / 1e3, (double)hist->max_ns / 1e3);
        fflush(stdout);
        last_answered = answered, last_t = now;
        next_report = now + (uint64_t)(a->progress_s * 1e9);
      }
    }
    if (k >= a->n) continue;
    while (!cudaq_host_ringbuffer_slot_available(rb, slot)) {}
    soak_fill(buf, payload, k);
    cudaq_host_ringbuffer_write_rpc_request(rb, slot, fid, buf, payload, (uint32_t)k, 0);
    t_sent[slot] = bench_now_ns();
    cudaq_host_ringbuffer_signal_slot(rb, slot);
  }
  const double secs = (double)(bench_now_ns() - t0) / 1e9;
  printf("%s: %llu sent, %llu answered, %llu wrong in %.1f s (%.3f M requests/s)\n", name, (unsigned long long)a->n,
         (unsigned long long)answered, (unsigned long long)bad, secs, (double)a->n / secs / 1e6);
  free(t_sent), free(buf), free(want);
  *answered_out = answered;
  *bad_out = bad;
}

/* The verdict: every request answered once, correctly, and the dispatcher's
 * counters agree (processed == N, nothing dropped). Returns the exit status. */
static inline int soak_verdict(const char *name, const soak_args_t *a, uint64_t answered, uint64_t bad,
                               const cudaq_dispatcher_counters_t *cnt) {
  const uint64_t dropped = cnt->dropped_bad_magic + cnt->dropped_unknown_function;
  printf("%s: dispatcher counters: processed %llu, dropped %llu\n", name, (unsigned long long)cnt->processed,
         (unsigned long long)dropped);
  const int ok = bad == 0 && answered == a->n && cnt->processed == a->n && dropped == 0;
  printf("%s: %s\n", name, ok ? "PASS (every request answered once, correctly; counters consistent)" : "FAIL");
  return ok ? 0 : 1;
}

#endif
