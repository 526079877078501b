/*
 * bench_udp.c - the UDP bridge on loopback against a bare UDP ping-pong
 * measured in the same run, and a sustained-rate run.
 *
 *   bare:       an echo thread (blocking recvfrom + sendto) answers each
 *               datagram; the floor of a UDP round trip on this machine.
 *   host/inline host-thread dispatch (echo handler) behind a bridge whose
 *               RX thread also sends the responses (TX_INLINE).
 *   host/txthr  the same with a separate TX thread (TX_THREAD).
 *   pipeline    the pipeline, CPU stage echo, external ring, TX_EXTERNAL.
 * Latency runs are closed loop (one request in flight), the client being
 * the emulator core (tools/udp/udp_emu.h) in every row, so the rows differ
 * only by the server. The rate run sends --count requests at --rate per
 * second open loop (no credits, as an FPGA would) to the pipeline service
 * and explains every loss: the bridge's ring-full drops and send errors,
 * and the kernel's UDP receive-buffer drops (/proc/net/snmp RcvbufErrors).
 *
 * Usage: bench_udp [--requests N] [--count N] [--rate HZ] [--payload BYTES]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cudaq/realtime/pipeline.h"
#include "cudaq/realtime/udp.h"
#include "udp_emu.h"

#define DIE(...) do { fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); exit(1); } while (0)
#define CK(call) do { cudaq_status_t st_ = (call); if (st_ != CUDAQ_OK) DIE("%s: %s (%s)", #call, cudaq_status_string(st_), cudaq_last_error()); } while (0)

#define SLOTS 64u
#define SLOT 2048u

/* ---- bare UDP echo ------------------------------------------------------ */
typedef struct {
  int fd;
  _Atomic int stop;
} bare_t;

static void *bare_main(void *arg) {
  bare_t *b = arg;
  uint8_t buf[2048];
  while (!atomic_load(&b->stop)) {
    struct sockaddr_in from;
    socklen_t fl = sizeof from;
    ssize_t n = recvfrom(b->fd, buf, sizeof buf, 0, (struct sockaddr *)&from, &fl);
    if (n < (ssize_t)sizeof(cudaq_rpc_header_t)) continue;
    cudaq_rpc_header_t h;
    memcpy(&h, buf, sizeof h);
    cudaq_rpc_response_t r = {CUDAQ_RPC_MAGIC_RESPONSE, 0, h.arg_len, h.request_id, h.ptp_timestamp};
    memcpy(buf, &r, sizeof r);
    sendto(b->fd, buf, (size_t)n, 0, (struct sockaddr *)&from, fl);
  }
  return NULL;
}

/* ---- servers ------------------------------------------------------------ */
static int h_echo(const void *args, void *result, uint32_t arg_len, uint32_t max_result_len,
                  uint32_t *result_len) {
  if (arg_len > max_result_len) return 1;
  memmove(result, args, arg_len);
  *result_len = arg_len;
  return 0;
}

static size_t cpu_echo(void *user, const cudaq_cpu_stage_context_t *ctx) {
  (void)user;
  memmove(ctx->response_buffer, ctx->request, ctx->request_size);
  return ctx->request_size ? ctx->request_size : 1;
}

typedef struct {
  cudaq_ringbuffer_t ring;
  cudaq_udp_bridge_t *bridge;
  cudaq_dispatch_manager_t *mgr;
  cudaq_dispatcher_t *d;
  volatile int shutdown;
  uint64_t stats[1];
  cudaq_pipeline_t *p;
  cudaq_udp_counters_t final;
} server_t;

static void on_complete(void *user, const cudaq_completion_t *c) {
  server_t *s = user;
  (void)cudaq_udp_bridge_send_response(s->bridge, (uint32_t)c->slot);
}

static void bridge_up(server_t *s, cudaq_udp_tx_mode_t mode) {
  cudaq_udp_config_t c;
  CK(cudaq_udp_config_init(&c));
  c.bind_addr = "127.0.0.1";
  c.ring = &s->ring;
  c.num_slots = SLOTS;
  c.tx_mode = mode;
  c.rcvbuf_bytes = 8 << 20;
  c.sndbuf_bytes = 8 << 20;
  CK(cudaq_udp_bridge_create(&c, &s->bridge));
}

static void host_up(server_t *s, cudaq_udp_tx_mode_t mode) {
  memset(s, 0, sizeof *s);
  CK(cudaq_host_ringbuffer_alloc(&s->ring, SLOTS, SLOT, CUDAQ_RING_ALLOC_HOST));
  cudaq_dispatcher_config_t dc;
  cudaq_dispatcher_config_init(&dc);
  dc.num_slots = SLOTS;
  dc.slot_size = SLOT;
  dc.dispatch_path = CUDAQ_DISPATCH_PATH_HOST;
  dc.dispatch_mode = CUDAQ_DISPATCH_HOST_CALL;
  cudaq_function_entry_t e;
  memset(&e, 0, sizeof e);
  e.function_id = cudaq_fnv1a_hash("echo");
  e.dispatch_mode = CUDAQ_DISPATCH_HOST_CALL;
  e.handler.host_fn = h_echo;
  cudaq_function_table_t t = {&e, 1};
  CK(cudaq_dispatch_manager_create(&s->mgr));
  CK(cudaq_dispatcher_create(s->mgr, &dc, &s->d));
  CK(cudaq_dispatcher_set_ringbuffer(s->d, &s->ring));
  CK(cudaq_dispatcher_set_function_table(s->d, &t));
  CK(cudaq_dispatcher_set_control(s->d, &s->shutdown, s->stats));
  CK(cudaq_dispatcher_start(s->d));
  bridge_up(s, mode);
  CK(cudaq_udp_bridge_start(s->bridge));
}

static void pipeline_up(server_t *s) {
  memset(s, 0, sizeof *s);
  CK(cudaq_host_ringbuffer_alloc(&s->ring, SLOTS, SLOT, CUDAQ_RING_ALLOC_HOST));
  cudaq_pipeline_config_t pc;
  cudaq_pipeline_config_init(&pc);
  pc.num_workers = 1;
  pc.num_slots = SLOTS;
  pc.slot_size = SLOT;
  pc.external_ringbuffer = &s->ring;
  pc.idle_yield = 1; /* 2 cores: dispatcher, worker and consumer would otherwise all spin */
  CK(cudaq_pipeline_create(&pc, &s->p));
  CK(cudaq_pipeline_set_cpu_stage(s->p, cpu_echo, s));
  CK(cudaq_pipeline_set_completion_handler(s->p, on_complete, s));
  bridge_up(s, CUDAQ_UDP_TX_EXTERNAL);
  CK(cudaq_pipeline_start(s->p));
  CK(cudaq_udp_bridge_start(s->bridge));
}

static void server_down(server_t *s) {
  CK(cudaq_udp_bridge_stop(s->bridge));
  if (s->d) CK(cudaq_dispatcher_stop(s->d));
  if (s->p) CK(cudaq_pipeline_stop(s->p));
  CK(cudaq_udp_bridge_counters(s->bridge, &s->final));
  CK(cudaq_udp_bridge_destroy(s->bridge));
  if (s->mgr) CK(cudaq_dispatch_manager_destroy(s->mgr));
  if (s->p) CK(cudaq_pipeline_destroy(s->p));
  CK(cudaq_host_ringbuffer_free(&s->ring));
}

static uint16_t port_of(const server_t *s) {
  uint16_t p;
  CK(cudaq_udp_bridge_port(s->bridge, &p));
  return p;
}

/* ---- client ------------------------------------------------------------- */
static uint8_t g_payload[SLOT];
static uint32_t g_len;

typedef struct {
  double p50, p99, mean;
  udp_emu_result_t r;
} row_t;

static row_t run_client(const char *name, uint16_t port, uint64_t n, int closed, double rate) {
  udp_emu_config_t c;
  memset(&c, 0, sizeof c);
  c.host = "127.0.0.1";
  c.port = port;
  c.function_id = cudaq_fnv1a_hash("echo");
  c.payloads = g_payload;
  c.payload_stride = g_len;
  c.payload_lens = &g_len;
  c.num_payloads = 1;
  c.count = n;
  c.closed_loop = closed;
  c.rate_hz = rate;
  c.late_ns = 1000000;
  c.wait_ms = 1000;
  CK(cudaq_bench_create(name, n, &c.bench));
  cudaq_bench_start(c.bench);
  row_t row;
  if (udp_emu_run(&c, &row.r) != 0) DIE("emulator setup failed");
  cudaq_bench_stop(c.bench);
  cudaq_bench_stats_t st;
  CK(cudaq_bench_compute(c.bench, &st));
  row.p50 = st.p50_us;
  row.p99 = st.p99_us;
  row.mean = st.mean_us;
  printf("%-28s %9llu %9llu %7llu %9.2f %9.2f %9.2f\n", name, (unsigned long long)row.r.sent,
         (unsigned long long)row.r.answered, (unsigned long long)row.r.lost, row.p50, row.p99,
         row.mean);
  fflush(stdout);
  cudaq_bench_destroy(c.bench);
  return row;
}

static unsigned long long rcvbuf_errors(void) {
  FILE *f = fopen("/proc/net/snmp", "r");
  char hdr[1024], val[1024];
  unsigned long long out = 0;
  if (!f) return 0;
  while (fgets(hdr, sizeof hdr, f) && fgets(val, sizeof val, f)) {
    if (strncmp(hdr, "Udp:", 4) != 0) continue;
    char *hs, *vs, *h = strtok_r(hdr, " \n", &hs), *v = strtok_r(val, " \n", &vs);
    while (h && v) {
      if (!strcmp(h, "RcvbufErrors")) out = strtoull(v, NULL, 10);
      h = strtok_r(NULL, " \n", &hs);
      v = strtok_r(NULL, " \n", &vs);
    }
  }
  fclose(f);
  return out;
}

int main(int argc, char **argv) {
  uint64_t requests = 20000, count = 1000000;
  double rate = 100000;
  g_len = 64;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--requests")) requests = strtoull(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--count")) count = strtoull(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--rate")) rate = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--payload")) g_len = (uint32_t)atoi(argv[i + 1]);
    else DIE("usage: bench_udp [--requests N] [--count N] [--rate HZ] [--payload BYTES]");
  }
  if (g_len + 24 > SLOT) DIE("payload at most %u bytes", SLOT - 24);
  for (uint32_t k = 0; k < g_len; ++k) g_payload[k] = (uint8_t)k;
  printf("bench_udp: loopback, payload %u bytes, closed loop %llu round trips per row; "
         "latency = arrival - echoed ptp_timestamp\n", g_len, (unsigned long long)requests);
  printf("%-28s %9s %9s %7s %9s %9s %9s\n", "server", "sent", "answered", "lost", "p50_us",
         "p99_us", "mean_us");

  /* bare UDP ping-pong */
  bare_t b = {socket(AF_INET, SOCK_DGRAM, 0), 0};
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  struct timeval tv = {0, 20000};
  setsockopt(b.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (bind(b.fd, (struct sockaddr *)&a, sizeof a)) DIE("bind");
  socklen_t al = sizeof a;
  getsockname(b.fd, (struct sockaddr *)&a, &al);
  pthread_t bt;
  pthread_create(&bt, NULL, bare_main, &b);
  row_t bare = run_client("bare UDP ping-pong", ntohs(a.sin_port), requests, 1, 0);
  atomic_store(&b.stop, 1);
  pthread_join(bt, NULL);
  close(b.fd);

  server_t s;
  host_up(&s, CUDAQ_UDP_TX_INLINE);
  row_t inl = run_client("bridge+host dispatch INLINE", port_of(&s), requests, 1, 0);
  server_down(&s);
  host_up(&s, CUDAQ_UDP_TX_THREAD);
  row_t thr = run_client("bridge+host dispatch TXTHRD", port_of(&s), requests, 1, 0);
  server_down(&s);
  pipeline_up(&s);
  row_t pip = run_client("bridge+pipeline (CPU stage)", port_of(&s), requests, 1, 0);
  server_down(&s);
  printf("ratios to bare: INLINE p50 %.2fx p99 %.2fx; TXTHRD p50 %.2fx p99 %.2fx; "
         "pipeline p50 %.2fx p99 %.2fx (goal: p50 <= 1.5x, p99 <= 2x)\n",
         inl.p50 / bare.p50, inl.p99 / bare.p99, thr.p50 / bare.p50, thr.p99 / bare.p99,
         pip.p50 / bare.p50, pip.p99 / bare.p99);

  if (count) {
    printf("\nrate run: %llu requests at %.0f/s open loop (no credits) to the pipeline service\n",
           (unsigned long long)count, rate);
    unsigned long long k0 = rcvbuf_errors();
    pipeline_up(&s);
    row_t r = run_client("bridge+pipeline open loop", port_of(&s), count, 0, rate);
    server_down(&s);
    unsigned long long kd = rcvbuf_errors() - k0;
    const cudaq_udp_counters_t *k = &s.final;
    unsigned long long explained = k->drop_ring_full + k->tx_errors + kd;
    printf("sent %llu in %.2f s (%.0f/s), answered %llu, lost %llu, duplicated %llu, late(>1ms) %llu\n",
           (unsigned long long)r.r.sent, r.r.wall_s, (double)r.r.sent / r.r.wall_s,
           (unsigned long long)r.r.answered, (unsigned long long)r.r.lost,
           (unsigned long long)r.r.duplicated, (unsigned long long)r.r.late);
    printf("bridge: received %llu, accepted %llu, ring-full drops %llu, send errors %llu; "
           "kernel UDP receive-buffer drops %llu\n",
           (unsigned long long)k->rx_datagrams, (unsigned long long)k->accepted,
           (unsigned long long)k->drop_ring_full, (unsigned long long)k->tx_errors, kd);
    printf("unexplained losses: %lld\n", (long long)r.r.lost - (long long)explained);
  }
  return 0;
}
