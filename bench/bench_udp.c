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
 * only by the server. The rate runs send --count requests at --rate per
 * second open loop (no credits, as an FPGA would) to each server named in
 * --rate-servers (inline: the bridge in TX_INLINE mode + the host-thread
 * dispatcher, the lightest server, two threads; pipeline: the pipeline
 * service) with a ring of --rate-slots slots, and explain every loss: the
 * bridge's ring-full drops and send errors, and the kernel's UDP
 * receive-buffer drops (/proc/net/snmp RcvbufErrors). Each rate run also
 * prints the CPU time of every thread over the run (server threads from
 * /proc/self/task/TID/schedstat, the emulator's two threads from
 * CLOCK_THREAD_CPUTIME_ID), per request: what a request costs each thread.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cudaq/realtime/pipeline.h"
#include "cudaq/realtime/udp.h"
#include "bench_echo.h"
#include "udp_emu.h"

#define DIE(...) do { fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); exit(1); } while (0)
#define CK(call) do { cudaq_status_t st_ = (call); if (st_ != CUDAQ_OK) DIE("%s: %s (%s)", #call, cudaq_status_string(st_), cudaq_last_error()); } while (0)

#define SLOTS 64u /* latency rows */
#define SLOT 2048u

static uint32_t g_slots = SLOTS; /* ring of the server being set up */

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
static size_t cpu_echo(void *user, const cudaq_cpu_stage_context_t *ctx) {
  (void)user;
  memmove(ctx->response_buffer, ctx->request, ctx->request_size);
  return ctx->request_size ? ctx->request_size : 1;
}

typedef struct {
  cudaq_ringbuffer_t ring;
  cudaq_udp_bridge_t *bridge;
  bench_echo_server_t echo; /* host modes: the echo dispatcher (echo.d NULL otherwise) */
  cudaq_pipeline_t *p;
  cudaq_udp_counters_t final;
} server_t;

static void on_complete(void *user, const cudaq_completion_t *c) {
  server_t *s = user;
  (void)cudaq_udp_bridge_send_response(s->bridge, (uint32_t)c->slot);
}

/* --pin C: the server's threads get cores C, C+1, ... (bridge RX on C, then
 * the dispatcher, the pipeline's consumer and its worker); -1 = no pinning.
 * The emulator's sender and receiver threads are left to the scheduler. */
static int g_pin = -1;
static int pin_core(int k) { return g_pin < 0 ? -1 : g_pin + k; }

static void bridge_up(server_t *s, cudaq_udp_tx_mode_t mode) {
  cudaq_udp_config_t c;
  CK(cudaq_udp_config_init(&c));
  c.rx_core = pin_core(0);
  c.bind_addr = "127.0.0.1";
  c.ring = &s->ring;
  c.num_slots = g_slots;
  c.tx_mode = mode;
  c.rcvbuf_bytes = 8 << 20;
  c.sndbuf_bytes = 8 << 20;
  CK(cudaq_udp_bridge_create(&c, &s->bridge));
}

static void host_up(server_t *s, cudaq_udp_tx_mode_t mode) {
  memset(s, 0, sizeof *s);
  CK(cudaq_host_ringbuffer_alloc(&s->ring, g_slots, SLOT, CUDAQ_RING_ALLOC_HOST));
  CK(bench_echo_start(&s->echo, &s->ring, g_slots, SLOT, pin_core(1)));
  bridge_up(s, mode);
  CK(cudaq_udp_bridge_start(s->bridge));
}

static void pipeline_up(server_t *s) {
  memset(s, 0, sizeof *s);
  CK(cudaq_host_ringbuffer_alloc(&s->ring, g_slots, SLOT, CUDAQ_RING_ALLOC_HOST));
  cudaq_pipeline_config_t pc;
  cudaq_pipeline_config_init(&pc);
  pc.num_workers = 1;
  pc.num_slots = g_slots;
  pc.slot_size = SLOT;
  pc.external_ringbuffer = &s->ring;
  /* Unpinned (2 cores): dispatcher, worker and consumer would otherwise all
   * spin. Pinned: each has its own core and spins. */
  pc.idle_yield = g_pin < 0;
  if (g_pin >= 0) {
    pc.cores.dispatcher = pin_core(1);
    pc.cores.consumer = pin_core(2);
    pc.cores.worker_base = pin_core(3);
  }
  CK(cudaq_pipeline_create(&pc, &s->p));
  CK(cudaq_pipeline_set_cpu_stage(s->p, cpu_echo, s));
  CK(cudaq_pipeline_set_completion_handler(s->p, on_complete, s));
  bridge_up(s, CUDAQ_UDP_TX_EXTERNAL);
  CK(cudaq_pipeline_start(s->p));
  CK(cudaq_udp_bridge_start(s->bridge));
}

static void server_down(server_t *s) {
  CK(cudaq_udp_bridge_stop(s->bridge));
  if (s->echo.d) CK(cudaq_dispatcher_stop(s->echo.d));
  if (s->p) CK(cudaq_pipeline_stop(s->p));
  CK(cudaq_udp_bridge_counters(s->bridge, &s->final));
  CK(cudaq_udp_bridge_destroy(s->bridge));
  if (s->echo.mgr) CK(cudaq_dispatch_manager_destroy(s->echo.mgr));
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

/* ---- CPU time per thread ------------------------------------------------ */
#define MAX_THREADS 64
typedef struct {
  int n;
  int tid[MAX_THREADS];
  char name[MAX_THREADS][32];
  unsigned long long ns[MAX_THREADS]; /* time on a CPU (schedstat's first field) */
} threads_t;

/* Every thread of this process and its CPU time so far. */
static void snapshot_threads(threads_t *t) {
  t->n = 0;
  DIR *d = opendir("/proc/self/task");
  if (!d) return;
  struct dirent *de;
  while ((de = readdir(d)) && t->n < MAX_THREADS) {
    if (de->d_name[0] == '.') continue;
    char path[300];
    int tid = atoi(de->d_name);
    unsigned long long ns = 0;
    snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", tid);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    int ok = fscanf(f, "%llu", &ns) == 1;
    fclose(f);
    if (!ok) continue;
    snprintf(path, sizeof path, "/proc/self/task/%d/comm", tid);
    t->name[t->n][0] = 0;
    if ((f = fopen(path, "r"))) {
      if (fgets(t->name[t->n], sizeof t->name[t->n], f))
        t->name[t->n][strcspn(t->name[t->n], "\n")] = 0;
      fclose(f);
    }
    t->tid[t->n] = tid;
    t->ns[t->n] = ns;
    t->n++;
  }
  closedir(d);
}

static double process_cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static void print_cpu(const char *name, unsigned long long ns, uint64_t sent, double wall_s) {
  printf("  %-22s %9.1f ms  %6.2f us/request  %5.1f%% of one core\n", name, ns / 1e6,
         sent ? ns / 1e3 / (double)sent : 0.0, wall_s > 0 ? ns / 1e7 / wall_s : 0.0);
}

/* Server threads: CPU time between the two snapshots (the main thread is
 * the emulator's sender and is reported from the emulator instead). */
static void print_thread_cpu(const threads_t *a, const threads_t *b, const udp_emu_result_t *r,
                             double wall_s) {
  const int self = (int)getpid();
  printf("CPU time per thread over the run (wall %.2f s):\n", wall_s);
  for (int j = 0; j < b->n; ++j) {
    if (b->tid[j] == self) continue;
    unsigned long long before = 0;
    for (int i = 0; i < a->n; ++i)
      if (a->tid[i] == b->tid[j]) before = a->ns[i];
    char label[48];
    snprintf(label, sizeof label, "%s (server)", b->name[j]);
    print_cpu(label, b->ns[j] - before, r->sent, wall_s);
  }
  print_cpu("emulator sender", r->sender_cpu_ns, r->sent, wall_s);
  print_cpu("emulator receiver", r->receiver_cpu_ns, r->sent, wall_s);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One open-loop rate run against server `which` ("inline" or "pipeline"). */
static void rate_run(const char *which, uint64_t count, double rate, uint32_t slots) {
  const int pipeline = !strcmp(which, "pipeline");
  printf("\nrate run: %llu requests at %.0f/s open loop (no credits) to %s, ring %u slots\n",
         (unsigned long long)count, rate,
         pipeline ? "the pipeline service (TX_EXTERNAL)"
                  : "the bridge (TX_INLINE) + host-thread dispatcher",
         slots);
  server_t s;
  g_slots = slots;
  if (pipeline) pipeline_up(&s);
  else host_up(&s, CUDAQ_UDP_TX_INLINE);
  g_slots = SLOTS;
  unsigned long long k0 = rcvbuf_errors();
  threads_t t0, t1;
  snapshot_threads(&t0);
  const double cpu0 = process_cpu_s(), w0 = now_s();
  row_t r = run_client(pipeline ? "bridge+pipeline open loop" : "bridge+host INLINE open loop",
                       port_of(&s), count, 0, rate);
  const double wall = now_s() - w0, cpu = process_cpu_s() - cpu0;
  snapshot_threads(&t1);
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
  print_thread_cpu(&t0, &t1, &r.r, wall);
  printf("process CPU %.2f s over %.2f s wall: %.2f cores busy (of %ld)\n", cpu, wall,
         wall > 0 ? cpu / wall : 0.0, sysconf(_SC_NPROCESSORS_ONLN));
  fflush(stdout);
}

static const char *USAGE =
    "usage: bench_udp [--requests N] [--count N] [--rate HZ] [--payload BYTES]\n"
    "                 [--rate-servers LIST] [--rate-slots N] [--pin CPU]\n"
    "  --requests N       closed-loop round trips per latency row (default 20000; 0: no rows)\n"
    "  --count N          requests of each rate run (default 1000000; 0: no rate run)\n"
    "  --rate HZ          rate of the rate runs, requests per second (default 100000)\n"
    "  --payload BYTES    request payload (default 64, at most 2024)\n"
    "  --rate-servers L   comma-separated servers of the rate runs, in order:\n"
    "                     inline (bridge TX_INLINE + host-thread dispatcher),\n"
    "                     pipeline (pipeline service); default inline,pipeline\n"
    "  --rate-slots N     ring slots of the rate-run servers (default 64)\n"
    "  --pin CPU          pin the server's threads to CPUs CPU, CPU+1, ... (bridge RX,\n"
    "                     dispatcher, pipeline consumer, worker); default: no pinning,\n"
    "                     and the pipeline's idle threads yield\n"
    "  --help, -h         this text\n";

int main(int argc, char **argv) {
  uint64_t requests = 20000, count = 1000000;
  double rate = 100000;
  uint32_t rate_slots = SLOTS;
  const char *rate_servers = "inline,pipeline";
  g_len = 64;
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(USAGE, stdout);
      return 0;
    }
    const int known = !strcmp(a, "--requests") || !strcmp(a, "--count") || !strcmp(a, "--rate") ||
                      !strcmp(a, "--payload") || !strcmp(a, "--rate-servers") ||
                      !strcmp(a, "--rate-slots") || !strcmp(a, "--pin");
    if (!known) {
      fprintf(stderr, "bench_udp: unknown option '%s'\n%s", a, USAGE);
      return 2;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "bench_udp: %s needs a value\n%s", a, USAGE);
      return 2;
    }
    const char *v = argv[++i];
    char *end = NULL;
    if (!strcmp(a, "--rate-servers")) {
      rate_servers = v;
      continue;
    }
    double x = strtod(v, &end);
    if (end == v || *end || x < 0) {
      fprintf(stderr, "bench_udp: %s: '%s' is not a non-negative number\n", a, v);
      return 2;
    }
    if (!strcmp(a, "--requests")) requests = (uint64_t)x;
    else if (!strcmp(a, "--count")) count = (uint64_t)x;
    else if (!strcmp(a, "--rate")) rate = x;
    else if (!strcmp(a, "--payload")) g_len = (uint32_t)x;
    else if (!strcmp(a, "--pin")) g_pin = (int)x;
    else rate_slots = (uint32_t)x;
  }
  if (g_len + 24 > SLOT) DIE("payload at most %u bytes", SLOT - 24);
  if (count && rate <= 0) DIE("bench_udp: --rate must be above 0");
  if (rate_slots < 1 || rate_slots > 65536) DIE("bench_udp: --rate-slots 1..65536");
  if (g_pin >= 0 && g_pin + 4 > sysconf(_SC_NPROCESSORS_ONLN))
    DIE("bench_udp: --pin %d needs CPUs %d..%d; this machine has %ld", g_pin, g_pin, g_pin + 3,
        sysconf(_SC_NPROCESSORS_ONLN));
  /* Check the server list before any run. */
  char list[256];
  snprintf(list, sizeof list, "%s", rate_servers);
  for (char *sv, *w = strtok_r(list, ",", &sv); w; w = strtok_r(NULL, ",", &sv))
    if (strcmp(w, "inline") && strcmp(w, "pipeline"))
      DIE("bench_udp: --rate-servers: unknown server '%s' (inline, pipeline)", w);
  for (uint32_t k = 0; k < g_len; ++k) g_payload[k] = (uint8_t)k;

  if (requests) {
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
  }

  if (count) {
    snprintf(list, sizeof list, "%s", rate_servers);
    for (char *sv, *w = strtok_r(list, ",", &sv); w; w = strtok_r(NULL, ",", &sv))
      rate_run(w, count, rate, rate_slots);
  }
  return 0;
}
