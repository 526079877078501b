/*
 * udp_emu.h - the FPGA emulator's core (tools/udp): sends RPC requests over
 * UDP at a fixed cadence (or one at a time), checks every answer, and counts
 * what came back. Used by cudaq-udp-emu, the UDP tests and bench_udp.
 *
 * Request i carries request_id = i and ptp_timestamp = its send time
 * (CLOCK_MONOTONIC ns of this machine); an answer's latency is its arrival
 * time minus the echoed timestamp. An answer is checked for the response
 * magic, a request_id that was sent, and a timestamp equal to the one sent.
 */
#ifndef CUDAQ_TOOLS_UDP_EMU_H
#define CUDAQ_TOOLS_UDP_EMU_H

#include <stddef.h>
#include <stdint.h>

#include "cudaq/realtime/bench_report.h"

/* Checks answer i (status, result bytes). Returns 0 if it is right, 1 if
 * not (counted in wrong_answers). Called from the receiving thread. */
typedef int (*udp_emu_check_fn)(void *user, uint64_t i, int32_t status, const uint8_t *result,
                                uint32_t result_len);

typedef struct {
  const char *host; /* IPv4 address of the server */
  uint16_t port;
  uint32_t function_id;
  /* Request i's payload: payloads + (i % num_payloads) * payload_stride,
   * payload_lens[i % num_payloads] bytes. */
  const uint8_t *payloads;
  size_t payload_stride;
  const uint32_t *payload_lens;
  size_t num_payloads;
  uint64_t count;       /* requests to send (< 2^32) */
  double rate_hz;       /* open loop: requests per second (cadence) */
  int closed_loop;      /* 1: send i+1 once i is answered or timed out (rate ignored) */
  int spin;             /* 1: spin to each send time; 0: sleep when more than 50 us ahead */
  uint32_t window;      /* open loop: at most this many unanswered requests (credits, as
                           an FPGA with flow control would keep); 0 = no limit */
  uint64_t late_ns;     /* an answer later than this is counted late (still answered) */
  uint32_t wait_ms;     /* after the last send, wait this long for answers (and per
                           request in closed loop) */
  udp_emu_check_fn check;
  void *check_user;
  cudaq_bench_t *bench; /* optional, capacity >= count: latencies are marked in it */
} udp_emu_config_t;

typedef struct {
  uint64_t sent, send_errors;
  uint64_t answered;   /* distinct requests answered */
  uint64_t lost;       /* sent, never answered (sent - answered) */
  uint64_t duplicated; /* a second answer for a request */
  uint64_t late;       /* answered after late_ns */
  uint64_t bad_echo;   /* wrong magic, unknown request_id or a changed timestamp */
  uint64_t status_errors;   /* answered with status != 0 */
  uint64_t wrong_answers;   /* check() said no */
  int32_t last_error_status;
  double wall_s;       /* first send to last send */
  /* CPU time (CLOCK_THREAD_CPUTIME_ID) of the sending thread over the run
   * and of the receiving thread (open loop; 0 in closed loop, where the
   * sender receives): what the client costs per request. */
  uint64_t sender_cpu_ns, receiver_cpu_ns;
} udp_emu_result_t;

/* Runs one emulation. Returns 0, or -1 on a setup error (message on stderr). */
int udp_emu_run(const udp_emu_config_t *cfg, udp_emu_result_t *out);

/* Prints the counts (one line each). */
void udp_emu_print(const udp_emu_result_t *r, FILE *f);

#endif
