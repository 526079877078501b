/*
 * cudaq/realtime/bench_report.h - the benchmark report utility: per-request
 * submit and complete stamps, latency statistics, wall time, throughput, a
 * worker timing breakdown by stage, a latency histogram, and the report as
 * text or JSON.
 *
 * Spec: hybrid-predecoder-mwpm-pipeline.md section 13 (PipelineBenchmark, a
 * C++ class there; this is its C counterpart, library cudaq_report, CMake
 * target cudaq::cudaq_report). Typical use:
 *
 *   cudaq_bench_t *b;
 *   cudaq_bench_create("d13_r13_Z", total_requests, &b);
 *   cudaq_bench_set_stage_name(b, 0, "MWPM decode");      (optional)
 *   cudaq_bench_start(b);
 *   ... producer:  cudaq_bench_mark_submit(b, i, cudaq_bench_now_ns());
 *   ... consumer:  cudaq_bench_mark_stage(b, i, 0, mwpm_ns);
 *                  cudaq_bench_mark_complete(b, i, cudaq_bench_now_ns());
 *   ... watchdog:  cudaq_bench_mark_timeout(b, i);
 *   cudaq_bench_stop(b);
 *   cudaq_bench_stats_t st;
 *   cudaq_bench_compute(b, &st);
 *   cudaq_bench_print(&st, stdout);
 *   cudaq_bench_destroy(b);
 *
 * Request life: IDLE -> SUBMITTED -> COMPLETED or TIMED_OUT. Each request
 * index 0..capacity-1 is used once. A complete or timeout of a request that
 * is not SUBMITTED, or a complete stamped earlier than its submit, is
 * refused with CUDAQ_ERR_INVALID_ARG and changes nothing.
 *
 * Statistics are computed over COMPLETED requests only: a timed-out request
 * or one still in flight is counted, never averaged.
 *
 * Definitions:
 *   latency      complete_ns - submit_ns of one request, reported in us;
 *   percentile   nearest rank: the p-th percentile of n sorted values is the
 *                value of rank ceil(p/100 * n) (1-based), clamped to 1..n.
 *                For latencies 1..100 us: p50 = 50, p90 = 90, p95 = 95,
 *                p99 = 99. (bench/bench_common.h's bench_percentiles uses a
 *                different rule, index floor(p * (n - 1)), for its tables.)
 *   stddev       population standard deviation (divides by n);
 *   wall time    stop - start, in seconds (see cudaq_bench_start);
 *   throughput   completed / wall time (0 when the wall time is 0).
 *
 * Threading contract:
 *   - create, set_stage_name, set_rounds, start, stop, set_wall_ns, compute,
 *     histogram and destroy are called from one thread (the "report
 *     thread"); compute and histogram use scratch memory of the handle and
 *     must not run concurrently with each other.
 *   - mark_submit is called from one submitting thread; mark_complete and
 *     mark_stage from one completing thread; mark_timeout from either of
 *     them. They may run concurrently with each other for different indices
 *     or for the same index: each request's state word decides the outcome
 *     (exactly one of complete and timeout wins; a complete that observes
 *     no submit yet is refused). Stage stamps of request i are written
 *     before its mark_complete.
 *   - The mark_* calls are hot-path safe: no allocation, no lock, no
 *     syscall (timestamps come from the caller). cudaq_bench_now_ns reads
 *     CLOCK_MONOTONIC through the vDSO on Linux (no syscall).
 *   - compute may run while marks are still being made (it sees a
 *     consistent snapshot per request); the usual order is stop, join the
 *     threads, compute.
 *
 * Memory: everything (stamps, states, the sort scratch) is allocated at
 * create; no later call allocates. print and write_json only write to the
 * caller's FILE.
 *
 * Errors: every call returns a cudaq_status_t (CUDAQ_OK,
 * CUDAQ_ERR_INVALID_ARG, CUDAQ_ERR_INTERNAL); this library keeps no error
 * message (cudaq_last_error() is not set by it).
 *
 * Compiles as C11 and C++17.
 */
#ifndef CUDAQ_REALTIME_BENCH_REPORT_H
#define CUDAQ_REALTIME_BENCH_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cudaq/realtime/rpc_wire_format.h" /* cudaq_status_t */

#ifdef __cplusplus
extern "C" {
#endif

#define CUDAQ_BENCH_MAX_STAGES 4
#define CUDAQ_BENCH_NAME_LEN 64       /* bytes incl. the terminating NUL */
#define CUDAQ_BENCH_STAGE_NAME_LEN 32 /* bytes incl. the terminating NUL */
#define CUDAQ_BENCH_MAX_CAPACITY ((size_t)1 << 32)

typedef struct cudaq_bench cudaq_bench_t;

/* One stage of the worker timing breakdown, averaged over the completed
 * requests (a completed request that stamped no time for it counts 0). */
typedef struct {
  char name[CUDAQ_BENCH_STAGE_NAME_LEN];
  uint64_t stamped; /* completed requests that stamped this stage */
  double mean_us;   /* sum of its stamps / completed */
  double share;     /* sum of its stamps / sum of end-to-end latencies, 0..1 */
  double p50_us, p99_us; /* nearest-rank percentiles over the requests that stamped it (0: none) */
  double tail_us;   /* its mean over the slowest 1% of completed requests (tail_n, below; a request
                       that did not stamp it counts 0): what the requests behind p99 spent here */
} cudaq_bench_stage_stats_t;

/* The report. Latency fields are 0 when completed == 0. */
typedef struct {
  char name[CUDAQ_BENCH_NAME_LEN];
  uint64_t capacity;
  uint64_t submitted; /* requests ever submitted (completed + timed_out + in_flight) */
  uint64_t completed;
  uint64_t timed_out;
  uint64_t in_flight; /* submitted, neither completed nor timed out */
  double min_us, max_us, mean_us, p50_us, p90_us, p95_us, p99_us, stddev_us;
  double wall_s;
  double throughput_rps; /* completed / wall_s */
  /* Worker timing breakdown (num_stages named stages). */
  uint32_t num_stages;
  cudaq_bench_stage_stats_t stages[CUDAQ_BENCH_MAX_STAGES];
  double unattributed_us;    /* mean_us - sum of the stages' mean_us (< 0 if stages overlap) */
  double unattributed_share; /* unattributed_us / mean_us */
  uint32_t rounds;           /* 0: no per-round line */
  double per_round_us;       /* mean_us / rounds */
  /* The slowest 1%: the ceil(completed / 100) completed requests with the
   * longest end-to-end latency (with any others tied with the shortest of
   * them; timed-out requests are not among them), their mean latency, and
   * what no stage accounts for in it (tail_mean_us - sum of the stages'
   * tail_us; < 0 if stages overlap). Computed while requests still
   * complete, these and the stages' percentiles may count a few requests
   * the other fields do not. */
  uint64_t tail_n;
  double tail_mean_us, tail_unattributed_us;
} cudaq_bench_stats_t;

/* Nanoseconds of CLOCK_MONOTONIC (vDSO: no syscall on Linux). Returns 0 if
 * the clock cannot be read. */
uint64_t cudaq_bench_now_ns(void);

/* Creates a benchmark for request indices 0..capacity-1; allocates all its
 * memory. name: 1..CUDAQ_BENCH_NAME_LEN-1 bytes, copied. Returns CUDAQ_OK;
 * CUDAQ_ERR_INVALID_ARG (name or out NULL, name empty or too long, capacity
 * 0 or > CUDAQ_BENCH_MAX_CAPACITY); CUDAQ_ERR_INTERNAL (out of memory). */
cudaq_status_t cudaq_bench_create(const char *name, size_t capacity, cudaq_bench_t **out);

/* Frees the benchmark. Returns CUDAQ_OK or CUDAQ_ERR_INVALID_ARG (NULL). */
cudaq_status_t cudaq_bench_destroy(cudaq_bench_t *b);

/* Names stage `stage` (0..CUDAQ_BENCH_MAX_STAGES-1) of the breakdown; only
 * named stages may be stamped. The report lists stages 0..highest named
 * (an unnamed stage below it is listed as "stage k"). name: 1..31 bytes,
 * copied. Returns CUDAQ_OK or CUDAQ_ERR_INVALID_ARG (b or name NULL, stage
 * out of range, name empty or too long). */
cudaq_status_t cudaq_bench_set_stage_name(cudaq_bench_t *b, uint32_t stage, const char *name);

/* Rounds per request (e.g. 13 for d=13, T=13): adds the spec's "Per-round
 * (/T)" line; 0 removes it. Returns CUDAQ_OK or CUDAQ_ERR_INVALID_ARG
 * (NULL). */
cudaq_status_t cudaq_bench_set_rounds(cudaq_bench_t *b, uint32_t rounds);

/* Stamps the wall-clock start / stop with cudaq_bench_now_ns(). Wall time
 * is stop - start; started but not stopped: now - start (a progress report
 * during the run); never started, or stop earlier than start: 0. Returns
 * CUDAQ_OK or CUDAQ_ERR_INVALID_ARG (NULL). */
cudaq_status_t cudaq_bench_start(cudaq_bench_t *b);
cudaq_status_t cudaq_bench_stop(cudaq_bench_t *b);

/* Sets both wall-clock stamps (injected time, e.g. a replay or a test).
 * Returns CUDAQ_OK or CUDAQ_ERR_INVALID_ARG (NULL, stop_ns < start_ns). */
cudaq_status_t cudaq_bench_set_wall_ns(cudaq_bench_t *b, uint64_t start_ns, uint64_t stop_ns);

/* Request i was submitted at t_ns (IDLE -> SUBMITTED). Submitting thread.
 * Returns CUDAQ_OK or CUDAQ_ERR_INVALID_ARG (b NULL, i >= capacity, request
 * i already submitted). */
cudaq_status_t cudaq_bench_mark_submit(cudaq_bench_t *b, size_t i, uint64_t t_ns);

/* Request i completed at t_ns (SUBMITTED -> COMPLETED). Completing thread.
 * Returns CUDAQ_OK or CUDAQ_ERR_INVALID_ARG (b NULL, i >= capacity, request
 * i not submitted, already completed or timed out, t_ns earlier than its
 * submit stamp); a refused complete changes nothing. */
cudaq_status_t cudaq_bench_mark_complete(cudaq_bench_t *b, size_t i, uint64_t t_ns);

/* Request i timed out (SUBMITTED -> TIMED_OUT): counted, not averaged.
 * Returns CUDAQ_OK or CUDAQ_ERR_INVALID_ARG (b NULL, i >= capacity, request
 * i not submitted, already completed or timed out, or a mark_complete of it
 * running in the other thread at this moment). */
cudaq_status_t cudaq_bench_mark_timeout(cudaq_bench_t *b, size_t i);

/* Request i spent duration_ns in stage `stage` (set, not added). Completing
 * thread, before mark_complete(i). Returns CUDAQ_OK or
 * CUDAQ_ERR_INVALID_ARG (b NULL, i >= capacity, stage not named, request i
 * not SUBMITTED, duration_ns == UINT64_MAX). */
cudaq_status_t cudaq_bench_mark_stage(cudaq_bench_t *b, size_t i, uint32_t stage,
                                      uint64_t duration_ns);

/* Fills *out from the completed requests (see Definitions). Sorts into the
 * handle's scratch: no allocation. Returns CUDAQ_OK or CUDAQ_ERR_INVALID_ARG
 * (NULL). */
cudaq_status_t cudaq_bench_compute(cudaq_bench_t *b, cudaq_bench_stats_t *out);

/* Latency histogram of the completed requests, num_buckets log-spaced
 * buckets from lo_us to hi_us: bucket k counts latencies in
 * [edge k, edge k+1), edge k = 2^(log2 lo + k (log2 hi - log2 lo) / nb).
 * Latencies below lo_us count in bucket 0, at or above hi_us in the last
 * bucket, so the counts sum to the completed count. lo_us = hi_us = 0:
 * range from the data (lo = max(min latency, 0.001 us), hi = the max
 * latency, or 2 x lo when that is not above lo). counts[num_buckets] is overwritten;
 * edges_us[num_buckets + 1] (may be NULL) receives the edges. Returns
 * CUDAQ_OK or CUDAQ_ERR_INVALID_ARG (b or counts NULL, num_buckets 0, lo_us
 * or hi_us not finite, lo_us <= 0 or hi_us <= lo_us unless both are 0). */
cudaq_status_t cudaq_bench_histogram(cudaq_bench_t *b, double lo_us, double hi_us,
                                     uint64_t *counts, double *edges_us, size_t num_buckets);

/* The percentile rule on its own: *out = the nearest-rank p-th percentile
 * of sorted[0..n-1] (ascending). Returns CUDAQ_OK or CUDAQ_ERR_INVALID_ARG
 * (sorted or out NULL, n 0, p not in (0, 100]). */
cudaq_status_t cudaq_bench_percentile(const uint64_t *sorted, size_t n, double p, uint64_t *out);

/* Writes the human-readable report (counts, wall time, throughput,
 * latencies, the worker timing breakdown) to out. Returns CUDAQ_OK;
 * CUDAQ_ERR_INVALID_ARG (NULL); CUDAQ_ERR_INTERNAL (a write failed). */
cudaq_status_t cudaq_bench_print(const cudaq_bench_stats_t *stats, FILE *out);

/* Writes the same as one JSON object (keys: name, capacity, submitted,
 * completed, timed_out, in_flight, wall_time_s, throughput_rps, latency_us
 * {min, max, mean, p50, p90, p95, p99, stddev} (null when nothing
 * completed), stages [{name, stamped, mean_us, share}], unattributed_us,
 * unattributed_share, rounds, per_round_us, and with counts non-NULL
 * histogram {edges_us, counts}). counts and edges_us are the histogram's
 * arrays (both NULL: no histogram). Returns CUDAQ_OK;
 * CUDAQ_ERR_INVALID_ARG (stats or out NULL, exactly one of counts/edges_us
 * NULL, counts with num_buckets 0); CUDAQ_ERR_INTERNAL (a write failed). */
cudaq_status_t cudaq_bench_write_json(const cudaq_bench_stats_t *stats, const uint64_t *counts,
                                      const double *edges_us, size_t num_buckets, FILE *out);

#ifdef __cplusplus
}
#endif

#endif /* CUDAQ_REALTIME_BENCH_REPORT_H */
