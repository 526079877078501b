/*
 * realtime_demo.c - streams decoding requests through the host-thread
 * dispatcher, checks every answer and prints what it measured.
 *
 * The decoder is a distance-d repetition code's majority vote: each request
 * carries two arguments, the bit count d (int32) and the d measured data bits
 * (bit-packed, LSB-first, the protocol's TYPE_BIT_PACKED); the handler
 * answers the decoded logical bit (uint8) and the number of bits it
 * corrected (int32). The demo plays the FPGA: it
 * prepares logical 0, flips each bit with probability p, sends one request
 * per arrival interval (or flat out), harvests responses out of order, and
 * reports latency percentiles, throughput, counters and the logical error
 * rate.
 *
 * Usage: realtime_demo [--shots N] [--distance D] [--p P] [--interval-us U]
 *                      [--slots S] [--cpu C] [--help]
 * By default the dispatcher thread is pinned to the last CPU and the demo's
 * producer / consumer thread to CPU 0 (--cpu -1 leaves both unpinned).
 */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cudaq/realtime/cudaq_realtime.h"

#define MAX_D 1024

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Handler: args = int32 d, then d bits bit-packed. Result: uint8 logical,
 * int32 corrected bits. Returns 2 if the payload is inconsistent. */
static int majority_decode(const void *args, void *result, uint32_t arg_len,
                           uint32_t max_result_len, uint32_t *result_len) {
  uint8_t bits[MAX_D];
  int32_t d_arg;
  if (max_result_len < 5 || arg_len < 4) return 1;
  memcpy(&d_arg, args, 4);
  if (d_arg <= 0 || d_arg > MAX_D || arg_len != 4 + cudaq_bitpacked_size((uint32_t)d_arg)) return 2;
  const uint32_t d = (uint32_t)d_arg;
  cudaq_bitunpack((const uint8_t *)args + 4, d, bits);
  int32_t ones = 0;
  for (uint32_t i = 0; i < d; ++i) ones += bits[i];
  uint8_t logical = (uint8_t)(2 * ones > (int32_t)d);
  int32_t flips = logical ? (int32_t)d - ones : ones;
  memcpy(result, &logical, 1);
  memcpy((uint8_t *)result + 1, &flips, 4);
  *result_len = 5;
  return 0;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

#define CK(call)                                                                              \
  do {                                                                                        \
    cudaq_status_t st_ = (call);                                                              \
    if (st_ != CUDAQ_OK) {                                                                    \
      fprintf(stderr, "%s failed: %s: %s\n", #call, cudaq_status_string(st_), cudaq_last_error()); \
      return 1;                                                                               \
    }                                                                                         \
  } while (0)

#define PROG "realtime_demo"

static void usage(FILE *f) {
  fprintf(f,
          "usage: " PROG " [--shots N] [--distance D] [--p P] [--interval-us U] [--slots S] [--cpu C]\n"
          "Streams repetition-code majority-vote requests through the host-thread dispatcher,\n"
          "checks every answer and prints latency, throughput and the logical error rate.\n"
          "  --shots N        requests to send (default 200000)\n"
          "  --distance D     code distance, odd, <= %d (default 7)\n"
          "  --p P            bit-flip probability, 0 <= P <= 1 (default 0.1)\n"
          "  --interval-us U  arrival interval in us, 0 = flat out (default 1)\n"
          "  --slots S        ring-buffer slots (default 32)\n"
          "  --cpu C          pin the dispatcher to CPU C and the demo thread to CPU 0;\n"
          "                   -1 leaves both unpinned (default: the last CPU)\n"
          "  -h, --help       this text\n",
          MAX_D);
}

/* Parses argv[i + 1] as a number in [lo, hi] (whole when `whole`) for option
 * argv[i]; names the option and the value on an error. */
static int num_arg(int argc, char **argv, int i, double lo, double hi, int whole, double *out) {
  if (i + 1 >= argc) {
    fprintf(stderr, PROG ": %s needs a value (--help lists the options)\n", argv[i]);
    return -1;
  }
  char *end;
  double v = strtod(argv[i + 1], &end);
  if (end == argv[i + 1] || *end || !(v >= lo && v <= hi) || (whole && v != floor(v))) {
    fprintf(stderr, PROG ": %s: bad value '%s' (expected %s in [%.0f, %.0f])\n", argv[i],
            argv[i + 1], whole ? "a whole number" : "a number", lo, hi);
    return -1;
  }
  *out = v;
  return 0;
}

int main(int argc, char **argv) {
  uint32_t shots = 200000, d = 7, slots = 32, interval_ns = 1000;
  double p = 0.1;
  int cpu = (int)sysconf(_SC_NPROCESSORS_ONLN) - 1;
  for (int i = 1; i < argc; ++i)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    }
  for (int i = 1; i < argc; ++i) {
    const char *o = argv[i];
    double v;
    if (!strcmp(o, "--shots") || !strcmp(o, "--distance") || !strcmp(o, "--slots")) {
      if (num_arg(argc, argv, i, 1, 4294967295.0, 1, &v)) return 2;
      *(!strcmp(o, "--shots") ? &shots : !strcmp(o, "--distance") ? &d : &slots) = (uint32_t)v;
    } else if (!strcmp(o, "--p")) {
      if (num_arg(argc, argv, i, 0, 1, 0, &p)) return 2;
    } else if (!strcmp(o, "--interval-us")) {
      if (num_arg(argc, argv, i, 0, 4e6, 0, &v)) return 2;
      interval_ns = (uint32_t)(v * 1000);
    } else if (!strcmp(o, "--cpu")) {
      if (num_arg(argc, argv, i, -1, 1 << 20, 1, &v)) return 2;
      cpu = (int)v;
    } else {
      fprintf(stderr, PROG ": unknown option '%s' (--help lists the options)\n", o);
      return 2;
    }
    ++i;
  }
  if (d > MAX_D || d % 2 == 0) {
    fprintf(stderr, PROG ": --distance %u: must be odd and <= %d\n", d, MAX_D);
    return 2;
  }
  const uint32_t payload = 4 + cudaq_bitpacked_size(d);

  /* Wiring, as the spec's "Step-by-Step: Wiring the Host API". */
  cudaq_dispatch_manager_t *mgr;
  cudaq_dispatcher_t *disp;
  cudaq_dispatcher_config_t cfg;
  cudaq_ringbuffer_t rb;
  CK(cudaq_dispatch_manager_create(&mgr));
  CK(cudaq_dispatcher_config_init(&cfg));
  cfg.num_slots = slots;
  cfg.slot_size = 64 + payload;
  cfg.dispatch_path = CUDAQ_DISPATCH_PATH_HOST;
  cfg.dispatch_mode = CUDAQ_DISPATCH_HOST_CALL;
  CK(cudaq_dispatcher_create(mgr, &cfg, &disp));
  CK(cudaq_host_ringbuffer_alloc(&rb, slots, cfg.slot_size, CUDAQ_RING_ALLOC_HOST));
  cudaq_function_entry_t entry;
  memset(&entry, 0, sizeof entry);
  entry.handler.host_fn = majority_decode;
  entry.function_id = cudaq_fnv1a_hash("majority_decode");
  entry.dispatch_mode = CUDAQ_DISPATCH_HOST_CALL;
  entry.schema.num_args = 2;
  entry.schema.args[0].type_id = CUDAQ_TYPE_INT32;
  entry.schema.args[0].size_bytes = 4;
  entry.schema.args[0].num_elements = 1;
  entry.schema.args[1].type_id = CUDAQ_TYPE_BIT_PACKED;
  entry.schema.args[1].size_bytes = cudaq_bitpacked_size(d);
  entry.schema.args[1].num_elements = d;
  entry.schema.num_results = 2;
  entry.schema.results[0].type_id = CUDAQ_TYPE_UINT8;
  entry.schema.results[0].size_bytes = 1;
  entry.schema.results[0].num_elements = 1;
  entry.schema.results[1].type_id = CUDAQ_TYPE_INT32;
  entry.schema.results[1].size_bytes = 4;
  entry.schema.results[1].num_elements = 1;
  cudaq_function_table_t table = {&entry, 1};
  volatile int shutdown = 0;
  uint64_t stats[1] = {0};
  CK(cudaq_dispatcher_set_ringbuffer(disp, &rb));
  CK(cudaq_dispatcher_set_function_table(disp, &table));
  CK(cudaq_dispatcher_set_control(disp, &shutdown, stats));
  if (cpu > 0) {
    cpu_set_t only0;
    CPU_ZERO(&only0);
    CPU_SET(0, &only0);
    pthread_setaffinity_np(pthread_self(), sizeof only0, &only0);
    CK(cudaq_dispatcher_set_host_affinity(disp, cpu));
  }
  CK(cudaq_dispatcher_start(disp));

  uint64_t *lat = malloc((size_t)shots * sizeof *lat);
  uint8_t *expect = malloc(shots);
  int64_t *slot_req = malloc(slots * sizeof *slot_req);
  uint64_t *slot_t0 = malloc(slots * sizeof *slot_t0);
  if (!lat || !expect || !slot_req || !slot_t0) return 1;
  for (uint32_t s = 0; s < slots; ++s) slot_req[s] = -1;
  srand(12345);

  uint64_t wrong = 0, logical_errors = 0, stalls = 0, done = 0;
  uint32_t next = 0, next_slot = 0;
  const uint64_t start = now_ns();
  uint64_t next_arrival = start;
  printf("cudaq-realtime demo: repetition code d=%u, p=%.3f, %u shots, %s, %u slots\n", d, p, shots,
         interval_ns ? "one request per interval" : "flat out", slots);
  if (interval_ns) printf("arrival interval %.2f us\n", interval_ns / 1000.0);

  while (done < shots) {
    /* Harvest every completed slot, in whatever order they finish. */
    for (uint32_t s = 0; s < slots; ++s) {
      if (slot_req[s] < 0) continue;
      if (cudaq_host_ringbuffer_poll_tx_flag(&rb, s, NULL) != CUDAQ_TX_READY) continue;
      uint64_t t1 = now_ns();
      const uint8_t *tx = rb.tx_data_host + (size_t)s * rb.tx_stride_sz;
      cudaq_rpc_response_t r;
      memcpy(&r, tx, sizeof r);
      uint32_t rid = (uint32_t)slot_req[s];
      uint8_t logical = tx[CUDAQ_RPC_HEADER_SIZE];
      if (r.status != 0 || r.request_id != rid || r.result_len != 5 || logical != expect[rid]) ++wrong;
      logical_errors += logical; /* the prepared logical state is 0 */
      lat[rid] = t1 - slot_t0[s];
      slot_req[s] = -1; /* forget the request before the slot is freed */
      cudaq_host_ringbuffer_clear_slot(&rb, s);
      ++done;
    }
    /* Produce the next shot when its arrival time has come. */
    if (next < shots && now_ns() >= next_arrival) {
      if (!cudaq_host_ringbuffer_slot_available(&rb, next_slot) || slot_req[next_slot] >= 0) {
        ++stalls; /* backpressure: the ring is full */
        continue;
      }
      uint8_t bits[MAX_D], packed[4 + MAX_D / 8 + 1];
      int ones = 0;
      for (uint32_t i = 0; i < d; ++i) {
        bits[i] = (uint8_t)((double)rand() / RAND_MAX < p);
        ones += bits[i];
      }
      expect[next] = (uint8_t)(2 * ones > (int)d);
      const int32_t d32 = (int32_t)d;
      memcpy(packed, &d32, 4);
      cudaq_bitpack(bits, d, packed + 4, sizeof packed - 4);
      uint64_t t0 = now_ns();
      CK(cudaq_host_ringbuffer_write_rpc_request(&rb, next_slot, entry.function_id, packed, payload,
                                                 next, t0));
      slot_req[next_slot] = next;
      slot_t0[next_slot] = t0;
      cudaq_host_ringbuffer_signal_slot(&rb, next_slot);
      next_slot = (next_slot + 1) % slots;
      ++next;
      next_arrival += interval_ns;
    }
  }
  const double secs = (double)(now_ns() - start) / 1e9;
  CK(cudaq_dispatcher_stop(disp));
  cudaq_dispatcher_counters_t cnt;
  CK(cudaq_dispatcher_get_counters(disp, &cnt));

  qsort(lat, shots, sizeof *lat, cmp_u64);
#define Q(x) (lat[(size_t)((x) * (shots - 1))] / 1000.0)
  printf("latency (write request -> response harvested), us: p50 %.2f  p90 %.2f  p99 %.2f  "
         "p99.9 %.2f  max %.2f\n", Q(0.5), Q(0.9), Q(0.99), Q(0.999), Q(1.0));
#undef Q
  printf("throughput: %.0f requests/s over %.3f s; backpressure stalls: %llu\n", shots / secs, secs,
         (unsigned long long)stalls);
  printf("dispatcher: processed %llu, dropped %llu, protocol errors %llu, handler errors %llu\n",
         (unsigned long long)cnt.processed,
         (unsigned long long)(cnt.dropped_bad_magic + cnt.dropped_unknown_function),
         (unsigned long long)(cnt.err_payload_too_large + cnt.err_arg_len_mismatch +
                              cnt.err_result_too_large + cnt.err_unsupported_mode),
         (unsigned long long)cnt.handler_errors);
  /* Expected logical error rate of majority vote: P(more than d/2 flips). */
  double expected = 0, lc = 0;
  for (uint32_t k = d / 2 + 1; k <= d; ++k) {
    lc = lgamma(d + 1.0) - lgamma(k + 1.0) - lgamma(d - k + 1.0);
    expected += exp(lc + k * log(p > 0 ? p : 1e-300) + (d - k) * log1p(-p));
  }
  printf("logical error rate: %.5f (majority vote, expected %.5f); wrong answers: %llu\n",
         (double)logical_errors / shots, expected, (unsigned long long)wrong);
  CK(cudaq_dispatch_manager_destroy(mgr));
  CK(cudaq_host_ringbuffer_free(&rb));
  free(lat), free(expect), free(slot_req), free(slot_t0);
  if (wrong || cnt.processed != shots) {
    printf("FAIL: %llu wrong answers, %llu of %u processed\n", (unsigned long long)wrong,
           (unsigned long long)cnt.processed, shots);
    return 1;
  }
  printf("OK: every request answered once and correctly\n");
  return 0;
}
