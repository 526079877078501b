/*
 * udp_emu.c - the FPGA emulator's core (udp_emu.h): a sending thread (the
 * caller's) and a receiving thread sharing per-request state words.
 */
#define _GNU_SOURCE
#include "udp_emu.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cudaq/realtime/rpc_wire_format.h"

#define MAX_DGRAM 65536
#define BATCH 32

typedef struct {
  const udp_emu_config_t *cfg;
  int fd;
  /* sent_ns[i]: send time of request i, 0 = not sent. Stored (release) by
   * the sender before the request leaves; loaded (acquire) by the
   * receiver: the datagram's round trip does not count as a C11
   * happens-before edge, the atomic does. */
  _Atomic uint64_t *sent_ns;
  _Atomic uint8_t *answered; /* receiver only; atomic so the sender's closed loop can read it */
  _Atomic uint64_t n_answered;
  _Atomic int sender_done;
  _Atomic uint64_t last_send_ns;
  udp_emu_result_t res; /* receiver's counts */
} emu_t;

static uint64_t now_ns(void) { return cudaq_bench_now_ns(); }

typedef struct {
  uint8_t bufs[BATCH][2048];
  struct mmsghdr msgs[BATCH];
  struct iovec iov[BATCH];
} rxbuf_t;

static void rxbuf_init(rxbuf_t *b) {
  memset(b->msgs, 0, sizeof b->msgs);
  for (int i = 0; i < BATCH; ++i) {
    b->iov[i].iov_base = b->bufs[i];
    b->iov[i].iov_len = sizeof b->bufs[i];
    b->msgs[i].msg_hdr.msg_iov = &b->iov[i];
    b->msgs[i].msg_hdr.msg_iovlen = 1;
  }
}

/* Receives one batch (waiting at most the socket's 20 ms timeout) and
 * checks every answer in it. Returns the datagrams received. */
static int recv_once(emu_t *e, rxbuf_t *b) {
  const udp_emu_config_t *c = e->cfg;
  int got = recvmmsg(e->fd, b->msgs, BATCH, MSG_WAITFORONE, NULL);
  uint64_t t = now_ns();
  for (int k = 0; k < got; ++k) {
    cudaq_rpc_response_t r;
    if (b->msgs[k].msg_len < sizeof r) {
      e->res.bad_echo++;
      continue;
    }
    memcpy(&r, b->bufs[k], sizeof r);
    uint64_t i = r.request_id;
    uint64_t sent = i < c->count ? atomic_load_explicit(&e->sent_ns[i], memory_order_acquire) : 0;
    if (r.magic != CUDAQ_RPC_MAGIC_RESPONSE || sent == 0 || r.ptp_timestamp != sent) {
      e->res.bad_echo++;
      continue;
    }
    if (atomic_load_explicit(&e->answered[i], memory_order_relaxed)) {
      e->res.duplicated++;
      continue;
    }
    if (r.status != 0) {
      e->res.status_errors++;
      e->res.last_error_status = r.status;
    }
    uint32_t len = r.result_len;
    if (len > b->msgs[k].msg_len - sizeof r) len = (uint32_t)(b->msgs[k].msg_len - sizeof r);
    if (c->check && c->check(c->check_user, i, r.status, b->bufs[k] + sizeof r, len))
      e->res.wrong_answers++;
    if (t - sent > c->late_ns) e->res.late++;
    if (c->bench) cudaq_bench_mark_complete(c->bench, i, t);
    /* Publishes the answer to a closed-loop sender (no data rides on it). */
    atomic_store_explicit(&e->answered[i], 1, memory_order_release);
    atomic_fetch_add_explicit(&e->n_answered, 1, memory_order_release);
  }
  return got;
}

/* Open loop: the receiving thread. */
static uint64_t thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *recv_main(void *arg) {
  emu_t *e = arg;
  pthread_setname_np(pthread_self(), "udp-emu-rx");
  const uint64_t cpu0 = thread_cpu_ns();
  rxbuf_t *b = malloc(sizeof *b);
  if (!b) abort();
  rxbuf_init(b);
  for (;;) {
    if (recv_once(e, b) > 0) continue;
    /* Timeout (20 ms) or error: finished once the sender is done and every
     * request is answered or the wait ran out. */
    if (atomic_load_explicit(&e->sender_done, memory_order_acquire)) {
      uint64_t sent = e->res.sent; /* written by the sender before sender_done */
      if (atomic_load_explicit(&e->n_answered, memory_order_relaxed) >= sent) break;
      uint64_t last = atomic_load_explicit(&e->last_send_ns, memory_order_relaxed);
      if (now_ns() > last + (uint64_t)e->cfg->wait_ms * 1000000ull) break;
    }
  }
  free(b);
  e->res.receiver_cpu_ns = thread_cpu_ns() - cpu0; /* read after pthread_join */
  return NULL;
}

static void build(const udp_emu_config_t *c, uint64_t i, uint8_t *buf, uint32_t *len) {
  size_t p = c->num_payloads ? i % c->num_payloads : 0;
  uint32_t n = c->num_payloads ? c->payload_lens[p] : 0;
  cudaq_rpc_header_t h = {CUDAQ_RPC_MAGIC_REQUEST, c->function_id, n, (uint32_t)i, 0};
  memcpy(buf, &h, sizeof h);
  if (n) memcpy(buf + sizeof h, c->payloads + p * c->payload_stride, n);
  *len = (uint32_t)sizeof h + n;
}

/* Sends requests [i, i + k) now: stamps each, then one sendmmsg. */
static void send_batch(emu_t *e, struct sockaddr_in *to, uint64_t i, uint32_t k,
                       uint8_t (*bufs)[MAX_DGRAM / BATCH]) {
  struct mmsghdr msgs[BATCH];
  struct iovec iov[BATCH];
  memset(msgs, 0, sizeof msgs);
  for (uint32_t j = 0; j < k; ++j) {
    uint32_t len;
    build(e->cfg, i + j, bufs[j], &len);
    uint64_t t = now_ns();
    memcpy(bufs[j] + offsetof(cudaq_rpc_header_t, ptp_timestamp), &t, sizeof t);
    /* R: the send time before the request leaves (pairs with the acquire
     * load in recv_main). */
    atomic_store_explicit(&e->sent_ns[i + j], t, memory_order_release);
    if (e->cfg->bench) cudaq_bench_mark_submit(e->cfg->bench, i + j, t);
    iov[j].iov_base = bufs[j];
    iov[j].iov_len = len;
    msgs[j].msg_hdr.msg_name = to;
    msgs[j].msg_hdr.msg_namelen = sizeof *to;
    msgs[j].msg_hdr.msg_iov = &iov[j];
    msgs[j].msg_hdr.msg_iovlen = 1;
  }
  uint32_t done = 0;
  while (done < k) {
    int r = sendmmsg(e->fd, msgs + done, k - done, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      e->res.send_errors++; /* e.g. ECONNREFUSED left by an ICMP error: that one is lost */
      ++done;
      continue;
    }
    done += (uint32_t)r;
  }
  e->res.sent += k;
  atomic_store_explicit(&e->last_send_ns, now_ns(), memory_order_relaxed);
}

static void pause_until(uint64_t t, int spin) {
  uint64_t n = now_ns();
  if (!spin && t > n + 60000) {
    struct timespec ts = {0, (long)(t - n - 50000)};
    nanosleep(&ts, NULL);
  }
  while (now_ns() < t) {
  }
}

int udp_emu_run(const udp_emu_config_t *c, udp_emu_result_t *out) {
  static uint8_t bufs[BATCH][MAX_DGRAM / BATCH]; /* 2 KiB per request */
  emu_t e;
  memset(&e, 0, sizeof e);
  e.cfg = c;
  memset(out, 0, sizeof *out);
  if (c->count >= (1ull << 32) || (!c->closed_loop && c->rate_hz <= 0)) {
    fprintf(stderr, "udp_emu: count must be < 2^32 and rate > 0 (or closed loop)\n");
    return -1;
  }
  for (size_t p = 0; p < c->num_payloads; ++p)
    if (c->payload_lens[p] + sizeof(cudaq_rpc_header_t) > sizeof bufs[0]) {
      fprintf(stderr, "udp_emu: payload %zu larger than %zu bytes\n", p, sizeof bufs[0] - 24);
      return -1;
    }
  struct sockaddr_in to;
  memset(&to, 0, sizeof to);
  to.sin_family = AF_INET;
  to.sin_port = htons(c->port);
  if (inet_pton(AF_INET, c->host, &to.sin_addr) != 1) {
    fprintf(stderr, "udp_emu: bad IPv4 address %s\n", c->host);
    return -1;
  }
  e.fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  int big = 8 << 20;
  setsockopt(e.fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
  setsockopt(e.fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
  struct timeval tv = {0, 20000};
  setsockopt(e.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  e.sent_ns = calloc(c->count ? c->count : 1, sizeof *e.sent_ns);
  e.answered = calloc(c->count ? c->count : 1, 1);
  if (e.fd < 0 || !e.sent_ns || !e.answered) {
    fprintf(stderr, "udp_emu: socket or memory failure\n");
    if (e.fd >= 0) close(e.fd);
    free(e.sent_ns);
    free((void *)e.answered);
    return -1;
  }
  /* Open loop: a receiving thread. Closed loop: the sender receives each
   * answer itself (no second thread to wake). */
  pthread_t rt;
  rxbuf_t *rb = c->closed_loop ? malloc(sizeof *rb) : NULL;
  if (c->closed_loop) {
    if (!rb) abort();
    rxbuf_init(rb);
    tv.tv_usec = 1000; /* 1 ms receive timeout: the per-request wait is counted in those */
    setsockopt(e.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  } else {
    pthread_create(&rt, NULL, recv_main, &e);
  }

  const uint64_t t0 = now_ns() + 1000000; /* 1 ms to let the receiver start */
  const double period = c->closed_loop ? 0 : 1e9 / c->rate_hz;
  pause_until(t0, 0);
  const uint64_t cpu0 = thread_cpu_ns();
  int window_off = 0;
  for (uint64_t i = 0; i < c->count;) {
    if (c->closed_loop) {
      send_batch(&e, &to, i, 1, bufs);
      uint64_t deadline = now_ns() + (uint64_t)c->wait_ms * 1000000ull;
      while (!atomic_load_explicit(&e.answered[i], memory_order_acquire) && now_ns() < deadline)
        recv_once(&e, rb);
      ++i;
      continue;
    }
    uint64_t due_t = t0 + (uint64_t)((double)i * period);
    pause_until(due_t, c->spin);
    uint64_t credit = BATCH;
    if (c->window && !window_off) { /* wait (bounded) for a credit */
      uint64_t deadline = now_ns() + (uint64_t)c->wait_ms * 1000000ull;
      while (i - atomic_load_explicit(&e.n_answered, memory_order_acquire) >= c->window &&
             now_ns() < deadline)
        sched_yield();
      /* A lost request never returns its credit: after one full wait that
       * still found no credit the window is given up (the loss is counted
       * at the end). The credit is checked again: a sender that was merely
       * descheduled past the deadline (a loaded machine) has its credits. */
      if (now_ns() >= deadline &&
          i - atomic_load_explicit(&e.n_answered, memory_order_acquire) >= c->window)
        window_off = 1;
      uint64_t owed = i - atomic_load_explicit(&e.n_answered, memory_order_acquire);
      credit = owed < c->window ? c->window - owed : 1;
    }
    /* Every request whose time has come goes in this batch. */
    uint64_t now = now_ns(), k = 1;
    while (k < BATCH && k < credit && i + k < c->count &&
           t0 + (uint64_t)((double)(i + k) * period) <= now)
      ++k;
    send_batch(&e, &to, i, (uint32_t)k, bufs);
    i += k;
  }
  out->wall_s = (double)(atomic_load_explicit(&e.last_send_ns, memory_order_relaxed) - t0) / 1e9;
  const uint64_t sender_cpu = thread_cpu_ns() - cpu0;
  atomic_store_explicit(&e.sender_done, 1, memory_order_release); /* publishes res.sent */
  if (c->closed_loop) free(rb);
  else pthread_join(rt, NULL);
  double wall = out->wall_s;
  *out = e.res;
  out->wall_s = wall;
  out->sender_cpu_ns = sender_cpu;
  out->answered = atomic_load_explicit(&e.n_answered, memory_order_relaxed);
  out->lost = out->sent - out->answered;
  close(e.fd);
  free(e.sent_ns);
  free((void *)e.answered);
  return 0;
}

void udp_emu_print(const udp_emu_result_t *r, FILE *f) {
  fprintf(f, "sent %llu (send errors %llu) in %.3f s, answered %llu, lost %llu, duplicated %llu, "
             "late %llu, bad echo %llu, error status %llu (last %d), wrong answers %llu\n",
          (unsigned long long)r->sent, (unsigned long long)r->send_errors, r->wall_s,
          (unsigned long long)r->answered, (unsigned long long)r->lost,
          (unsigned long long)r->duplicated, (unsigned long long)r->late,
          (unsigned long long)r->bad_echo, (unsigned long long)r->status_errors,
          r->last_error_status, (unsigned long long)r->wrong_answers);
}
