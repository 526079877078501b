/*
 * udp_bridge.c - the UDP bridge (udp.h): one socket, one ring, an RX thread
 * and, by tx_mode, a TX thread.
 *
 * Slot life as the bridge sees it (ring order, as the dispatchers serve it):
 *   free (RX == 0, TX == 0)  --RX thread: recvmmsg into the slot, check,
 *                              peer[s] = sender, signal (R1)-->
 *   requested (RX != 0)      --dispatcher: response, TX (R2), RX = 0 (R3)-->
 *   answered (TX READY)      --TX thread / INLINE RX thread / external
 *                              consumer: sendto(peer[s]), clear TX (R5)--> free
 * peer[s] and peer_valid[s] are plain memory: they are written by the RX
 * thread before R1 and read by the sender after A2, which R1 -> A1 (the
 * dispatcher) -> R2 -> A2 orders; the sender's reads happen before R5,
 * which the RX thread's A3 (slot_available) orders before its next write.
 *
 * The RX thread fills slots in ring order and needs the slot at rx_next
 * free, so a client that keeps fewer requests in flight than half the
 * slots must never get an answer while an older answered slot is still
 * held. A sweep of the TX flags therefore first frees every answered slot
 * it finds (copying each response out), then sends them all: an answer
 * never leaves before an older slot that this sweep found answered is
 * free. (Sending each as it was found let a sweep in slot-index order send
 * slots 0..13 while the older slot 15 waited for the end of the sweep; the
 * client, given those credits, filled the ring up to slot 15 and its next
 * requests were ring-full drops with 8 of 16 slots in flight.)
 *
 * Counters are bumped with relaxed fetch_add: two threads can write the same
 * counter (error replies from RX, responses from TX), and the cost of a
 * locked add is small next to the sendto / recvmmsg it accompanies.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <unistd.h>

#include "../atomics.h"
#include "../internal.h"
#include "udp_internal.h"

/* Bytes of a scratch buffer: a datagram received there (ring full) is
 * only checked, so its header is all that is needed. */
#define SCRATCH_BYTES 32u
#define RX_TIMEOUT_US 20000 /* blocking receive wakes this often to see stop */

typedef struct {
  _Atomic uint64_t rx_datagrams, rx_batches, accepted, drop_short, drop_bad_magic, err_oversize,
      err_arg_len, err_unknown_function, drop_ring_full, tx_responses, tx_error_replies, tx_errors,
      rx_errors, unanswered_at_stop;
} counters_t;

struct cudaq_udp_bridge {
  cudaq_udp_config_t cfg;
  cudaq_ringbuffer_t ring;
  uint32_t n;
  int fd;
  uint16_t port;
  int rcvbuf, sndbuf;
  uint32_t *ids; /* sorted copy of cfg.function_ids */
  uint32_t n_ids;
  struct sockaddr_in *peer; /* [n] sender of the slot's request */
  uint8_t *peer_valid;      /* [n] 1 while the slot holds a request of the bridge */
  uint8_t *pending;         /* [n] INLINE mode: signalled, not yet answered (RX thread) */
  /* A sweep's answers, copied out of their slots (the TX-polling thread):
   * stage + k * tx_stride_sz holds stage_len[k] bytes for stage_to[k]. */
  uint8_t *stage;
  uint32_t *stage_len;
  uint8_t *stage_err; /* 1: an error reply (CUDAQ_TX_ERROR) */
  struct sockaddr_in *stage_to;
  uint32_t npending;
  uint32_t rx_next; /* next slot in ring order (RX thread; kept across restarts) */
  /* RX thread's receive state, allocated once. */
  struct mmsghdr msgs[CUDAQ_UDP_MAX_BATCH];
  struct iovec iov[CUDAQ_UDP_MAX_BATCH];
  struct sockaddr_in from[CUDAQ_UDP_MAX_BATCH];
  uint8_t scratch[CUDAQ_UDP_MAX_BATCH][SCRATCH_BYTES];
  _Atomic int rx_stop, tx_stop;
  bool running, have_tx;
  pthread_t rx_thread, tx_thread;
  counters_t c;
};

static inline void bump(_Atomic uint64_t *c, uint64_t k) {
  atomic_fetch_add_explicit(c, k, memory_order_relaxed);
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint8_t *rx_slot(const cudaq_udp_bridge_t *b, uint32_t s) {
  return b->ring.rx_data_host + (size_t)s * b->ring.rx_stride_sz;
}
static inline uint8_t *tx_slot(const cudaq_udp_bridge_t *b, uint32_t s) {
  return b->ring.tx_data_host + (size_t)s * b->ring.tx_stride_sz;
}

/* ---- sending ------------------------------------------------------------ */

/* Returns 0 if the datagram was sent, -1 if not (counted in tx_errors). */
static int send_to(cudaq_udp_bridge_t *b, const void *buf, size_t len,
                   const struct sockaddr_in *to, _Atomic uint64_t *ok_counter) {
  ssize_t r;
  do {
    r = sendto(b->fd, buf, len, 0, (const struct sockaddr *)to, sizeof *to);
  } while (r < 0 && errno == EINTR);
  if (r == (ssize_t)len) {
    bump(ok_counter, 1);
    return 0;
  }
  bump(&b->c.tx_errors, 1); /* buffer full, peer gone (ICMP), ...: the response is lost */
  return -1;
}

/* Bytes of slot s's response: header + result_len, bounded by the slot. */
static size_t response_len(const cudaq_udp_bridge_t *b, uint32_t s) {
  cudaq_rpc_response_t r;
  memcpy(&r, tx_slot(b, s), sizeof r);
  size_t room = b->ring.tx_stride_sz - CUDAQ_RPC_HEADER_SIZE;
  return CUDAQ_RPC_HEADER_SIZE + (r.result_len < room ? r.result_len : room);
}

/* The answer for a slot whose graph launch failed (TX error: no response
 * was written): LAUNCH_FAILED, echoing the request's id and timestamp (the
 * RX slot is not reused while TX is set). */
static cudaq_rpc_response_t launch_failed_reply(const cudaq_udp_bridge_t *b, uint32_t s) {
  cudaq_rpc_header_t h;
  memcpy(&h, rx_slot(b, s), sizeof h);
  cudaq_rpc_response_t r = {CUDAQ_RPC_MAGIC_RESPONSE, CUDAQ_RPC_ERR_LAUNCH_FAILED, 0, h.request_id,
                            h.ptp_timestamp};
  return r;
}

/* TX_EXTERNAL: sends the response of slot s straight from the slot (its
 * consumer frees the slot afterwards). Returns 0, or -1 if sendto failed. */
static int send_slot(cudaq_udp_bridge_t *b, uint32_t s, cudaq_tx_status_t st) {
  int rc;
  if (st == CUDAQ_TX_ERROR) {
    cudaq_rpc_response_t r = launch_failed_reply(b, s);
    rc = send_to(b, &r, sizeof r, &b->peer[s], &b->c.tx_error_replies);
  } else {
    rc = send_to(b, tx_slot(b, s), response_len(b, s), &b->peer[s], &b->c.tx_responses);
  }
  b->peer_valid[s] = 0;
  return rc;
}

/* One pass over the TX flags (TX thread, or the RX thread in INLINE mode):
 * frees every answered slot, copying its response out, then sends them all.
 * A slot is freed before its answer leaves, so that a sender who has its
 * answer finds the slot free again (a client with as many credits as slots
 * loses nothing to a slow sendto), and every answered slot of the sweep is
 * freed before any of its answers leaves (see the comment at the top).
 * Returns the number of slots answered. */
static uint32_t tx_poll(cudaq_udp_bridge_t *b, int inline_mode) {
  uint32_t staged = 0, answered = 0;
  const size_t stride = b->ring.tx_stride_sz;
  for (uint32_t s = 0; s < b->n; ++s) {
    if (inline_mode && !b->pending[s]) continue;
    int err = 0;
    /* A2 (inside poll_tx_flag) pairs with R2 in the dispatcher: the response
     * bytes and, through R1 -> A1, peer[s] are visible. */
    cudaq_tx_status_t st = cudaq_host_ringbuffer_poll_tx_flag(&b->ring, s, &err);
    if (st == CUDAQ_TX_READY || st == CUDAQ_TX_ERROR) {
      uint8_t *out = b->stage + (size_t)staged * stride;
      size_t len;
      if (st == CUDAQ_TX_ERROR) {
        const cudaq_rpc_response_t r = launch_failed_reply(b, s);
        memcpy(out, &r, sizeof r);
        len = sizeof r;
      } else {
        len = response_len(b, s);
        memcpy(out, tx_slot(b, s), len);
      }
      if (b->peer_valid[s]) {
        b->stage_to[staged] = b->peer[s];
        b->stage_len[staged] = (uint32_t)len;
        b->stage_err[staged] = st == CUDAQ_TX_ERROR;
        ++staged;
      }
      b->peer_valid[s] = 0;
      /* R5 frees the slot after our reads of it and of peer[s]; pairs with
       * A3 in slot_available (the RX thread). */
      cudaq_host_ringbuffer_clear_slot(&b->ring, s);
      ++answered;
    } else if (st == CUDAQ_TX_EMPTY && inline_mode &&
               cudaq_host_ringbuffer_slot_available(&b->ring, s)) {
      /* Consumed without a response (an id the dispatcher does not serve):
       * nothing to send. A3 inside slot_available reads RX before TX, and
       * every dispatcher stores TX (the response, R2, or the device-call
       * kernels' in-flight marker) before it clears RX (R3); a device-call
       * kernel that drops a request takes its marker back afterwards (R3d). */
      b->peer_valid[s] = 0;
    } else {
      continue;
    }
    if (inline_mode) {
      b->pending[s] = 0;
      --b->npending;
    }
  }
  for (uint32_t k = 0; k < staged; ++k)
    (void)send_to(b, b->stage + (size_t)k * stride, b->stage_len[k], &b->stage_to[k],
                  b->stage_err[k] ? &b->c.tx_error_replies : &b->c.tx_responses);
  return answered;
}

/* ---- receiving ---------------------------------------------------------- */

/* Consecutive free slots from rx_next, at most max (<= the slot count). */
static uint32_t free_run(const cudaq_udp_bridge_t *b, uint32_t max) {
  uint32_t k = 0, s = b->rx_next;
  /* A3 (inside slot_available) pairs with R3 (dispatcher) and R5 (sender). */
  while (k < max && cudaq_host_ringbuffer_slot_available(&b->ring, s)) {
    ++k;
    s = s + 1 == b->n ? 0 : s + 1;
  }
  return k;
}

static void count_reject(cudaq_udp_bridge_t *b, cudaq__udp_verdict_t v) {
  switch (v) {
  case CUDAQ__UDP_DROP_SHORT: bump(&b->c.drop_short, 1); break;
  case CUDAQ__UDP_DROP_BAD_MAGIC: bump(&b->c.drop_bad_magic, 1); break;
  case CUDAQ__UDP_REPLY_OVERSIZE: bump(&b->c.err_oversize, 1); break;
  case CUDAQ__UDP_REPLY_ARG_LEN: bump(&b->c.err_arg_len, 1); break;
  case CUDAQ__UDP_REPLY_UNKNOWN_FUNCTION: bump(&b->c.err_unknown_function, 1); break;
  case CUDAQ__UDP_ACCEPT: break;
  }
}

/* Handles datagram i of a batch received into buffer buf (held bytes
 * there). Returns 1 if it was a request to keep (ACCEPT), 0 otherwise. */
static int check_one(cudaq_udp_bridge_t *b, uint32_t i, const uint8_t *buf, size_t held) {
  cudaq_rpc_response_t reply;
  size_t wire_len = b->msgs[i].msg_len; /* real length: received with MSG_TRUNC */
  cudaq__udp_verdict_t v = cudaq__udp_check_datagram(buf, held, wire_len, b->ring.rx_stride_sz,
                                                     b->ids, b->n_ids, &reply);
  if (v == CUDAQ__UDP_ACCEPT) return 1;
  count_reject(b, v);
  if (v >= CUDAQ__UDP_REPLY_OVERSIZE)
    (void)send_to(b, &reply, sizeof reply, &b->from[i], &b->c.tx_error_replies);
  return 0;
}

/* Receives one batch (blocking or not). Returns the datagrams received. */
static int receive(cudaq_udp_bridge_t *b, int blocking) {
  const uint32_t most = b->cfg.batch < b->n ? b->cfg.batch : b->n; /* each slot once */
  uint32_t k = free_run(b, most);
  if (!k && blocking) {
    /* Ring full: wait for a datagram without taking it (the socket's
     * receive timeout still wakes the thread for stop), then judge it by the
     * ring as it is when it came, not as it was when the thread went to
     * sleep (a slot may have been freed since). */
    uint8_t peek;
    if (recv(b->fd, &peek, sizeof peek, MSG_PEEK) < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) bump(&b->c.rx_errors, 1);
      return 0; /* the receive timeout (stop is checked), or an error reported once */
    }
    k = free_run(b, most);
    blocking = 0; /* a datagram is waiting */
  }
  uint32_t vlen = k ? k : b->cfg.batch;
  for (uint32_t i = 0; i < vlen; ++i) {
    uint32_t s = (b->rx_next + i) % b->n;
    b->iov[i].iov_base = k ? rx_slot(b, s) : b->scratch[i];
    b->iov[i].iov_len = k ? b->ring.rx_stride_sz : SCRATCH_BYTES;
    b->msgs[i].msg_hdr.msg_namelen = sizeof b->from[i];
    b->msgs[i].msg_hdr.msg_flags = 0;
  }
  int flags = MSG_TRUNC | (blocking ? MSG_WAITFORONE : MSG_DONTWAIT);
  int got = recvmmsg(b->fd, b->msgs, vlen, flags, NULL);
  if (got <= 0) {
    if (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      bump(&b->c.rx_errors, 1); /* e.g. ECONNREFUSED from an ICMP error: keep going */
    return 0;
  }
  bump(&b->c.rx_batches, 1);
  bump(&b->c.rx_datagrams, (uint64_t)got);
  uint32_t placed = 0; /* accepted requests, compacted to rx_next, rx_next+1, ... */
  for (uint32_t i = 0; i < (uint32_t)got; ++i) {
    size_t held = b->msgs[i].msg_len < b->iov[i].iov_len ? b->msgs[i].msg_len : b->iov[i].iov_len;
    if (!check_one(b, i, b->iov[i].iov_base, held)) continue;
    if (!k) { /* ring full: a valid request we cannot keep */
      bump(&b->c.drop_ring_full, 1);
      continue;
    }
    uint32_t s = (b->rx_next + placed) % b->n;
    if (b->iov[i].iov_base != rx_slot(b, s)) /* an earlier datagram of the batch was rejected */
      memmove(rx_slot(b, s), b->iov[i].iov_base, b->msgs[i].msg_len);
    b->peer[s] = b->from[i];
    b->peer_valid[s] = 1;
    if (b->cfg.tx_mode == CUDAQ_UDP_TX_INLINE) {
      b->pending[s] = 1;
      ++b->npending;
    }
    /* R1 (inside signal_slot) publishes the request bytes and peer[s];
     * pairs with A1 in the dispatcher. */
    cudaq_host_ringbuffer_signal_slot(&b->ring, s);
    ++placed;
  }
  bump(&b->c.accepted, placed);
  b->rx_next = (b->rx_next + placed) % b->n;
  return got;
}

static int stop_requested(_Atomic int *flag) {
  /* A4 pairs with R4 in cudaq_udp_bridge_stop (nothing else published). */
  return atomic_load_explicit(flag, memory_order_acquire);
}

/* Waits (bounded) until every slot is free, sending what gets answered. */
static void drain(cudaq_udp_bridge_t *b, int inline_mode) {
  const uint64_t deadline = now_ns() + (uint64_t)b->cfg.drain_timeout_ms * 1000000ull;
  for (;;) {
    tx_poll(b, inline_mode);
    uint32_t busy = 0;
    for (uint32_t s = 0; s < b->n; ++s)
      busy += inline_mode ? b->pending[s] : !cudaq_host_ringbuffer_slot_available(&b->ring, s);
    if (!busy) return;
    if (now_ns() > deadline) {
      bump(&b->c.unanswered_at_stop, busy);
      return;
    }
    sched_yield(); /* shutdown path, not the hot path */
  }
}

static void *rx_main(void *arg) {
  cudaq_udp_bridge_t *b = arg;
  const int inline_mode = b->cfg.tx_mode == CUDAQ_UDP_TX_INLINE;
  while (!stop_requested(&b->rx_stop)) {
    if (inline_mode && b->npending) {
      tx_poll(b, 1);
      receive(b, 0);
    } else {
      receive(b, b->cfg.rx_blocking);
    }
  }
  if (inline_mode) drain(b, 1);
  return NULL;
}

static void *tx_main(void *arg) {
  cudaq_udp_bridge_t *b = arg;
  while (!stop_requested(&b->tx_stop)) {
    if (tx_poll(b, 0) == 0) {
      if (b->cfg.idle_yield) sched_yield();
      else cudaq__cpu_relax();
    }
  }
  drain(b, 0);
  return NULL;
}

/* ---- lifecycle ---------------------------------------------------------- */

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

cudaq_status_t cudaq_udp_config_init(cudaq_udp_config_t *c) {
  if (!c) return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "cudaq_udp_config_init: config is NULL");
  memset(c, 0, sizeof *c);
  c->tx_mode = CUDAQ_UDP_TX_THREAD;
  c->batch = 16;
  c->rx_core = c->tx_core = -1;
  c->rx_blocking = 1;
  c->drain_timeout_ms = 1000;
  return cudaq__ok();
}

static cudaq_status_t check_config(const cudaq_udp_config_t *c) {
  const char *fn = "cudaq_udp_bridge_create";
  const cudaq_ringbuffer_t *r = c->ring;
  int ncpu = get_nprocs_conf();
  if (!r) return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: config.ring is NULL", fn);
  if (!(r->rx_flags_host ? r->rx_flags_host : r->rx_flags) ||
      !(r->tx_flags_host ? r->tx_flags_host : r->tx_flags) ||
      !(r->rx_data_host ? r->rx_data_host : r->rx_data) ||
      !(r->tx_data_host ? r->tx_data_host : r->tx_data))
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: the ring has a NULL flag or data pointer", fn);
  if (r->rx_stride_sz < CUDAQ_RPC_HEADER_SIZE || r->tx_stride_sz < CUDAQ_RPC_HEADER_SIZE ||
      r->rx_stride_sz > 65535 + (size_t)CUDAQ_RPC_HEADER_SIZE)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG,
                       "%s: ring strides (rx %zu, tx %zu) must be at least 24 (rx at most 65559)",
                       fn, r->rx_stride_sz, r->tx_stride_sz);
  if (r->completion != CUDAQ_RX_COMPLETION_FLAG)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG,
                       "%s: the bridge receives datagrams into slots whole (magic first): the ring must use the "
                       "flag protocol (completion CUDAQ_RX_COMPLETION_FLAG)",
                       fn);
  if (c->num_slots == 0) return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: num_slots is 0", fn);
  if (c->batch < 1 || c->batch > CUDAQ_UDP_MAX_BATCH)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: batch %u outside 1..64", fn, c->batch);
  if ((unsigned)c->tx_mode > CUDAQ_UDP_TX_EXTERNAL)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: unknown tx_mode %d", fn, (int)c->tx_mode);
  if (c->rx_core < -1 || c->tx_core < -1 || c->rx_core >= ncpu || c->tx_core >= ncpu)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: core (rx %d, tx %d) not -1 or a CPU of 0..%d",
                       fn, c->rx_core, c->tx_core, ncpu - 1);
  if (c->num_function_ids && !c->function_ids)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: function_ids is NULL", fn);
  if (c->busy_poll_us < 0 || c->rcvbuf_bytes < 0 || c->sndbuf_bytes < 0 || c->drain_timeout_ms < 0)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: a negative size or time", fn);
  return CUDAQ_OK;
}

static void set_buffer(int fd, int force_opt, int opt, int bytes) {
  if (bytes <= 0) return;
  /* FORCE ignores net.core.[rw]mem_max (needs CAP_NET_ADMIN); else capped. */
  if (setsockopt(fd, SOL_SOCKET, force_opt, &bytes, sizeof bytes) != 0)
    (void)setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof bytes);
}

static cudaq_status_t open_socket(cudaq_udp_bridge_t *b) {
  const char *fn = "cudaq_udp_bridge_create";
  const cudaq_udp_config_t *c = &b->cfg;
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons(c->port);
  if (inet_pton(AF_INET, c->bind_addr ? c->bind_addr : "0.0.0.0", &a.sin_addr) != 1)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: bind_addr '%s' is not an IPv4 address", fn,
                       c->bind_addr);
  b->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (b->fd < 0) return cudaq__fail(CUDAQ_ERR_INTERNAL, "%s: socket: %s", fn, strerror(errno));
  set_buffer(b->fd, SO_RCVBUFFORCE, SO_RCVBUF, c->rcvbuf_bytes);
  set_buffer(b->fd, SO_SNDBUFFORCE, SO_SNDBUF, c->sndbuf_bytes);
  if (c->busy_poll_us > 0 &&
      setsockopt(b->fd, SOL_SOCKET, SO_BUSY_POLL, &c->busy_poll_us, sizeof c->busy_poll_us) != 0)
    return cudaq__fail(CUDAQ_ERR_UNSUPPORTED, "%s: SO_BUSY_POLL %d us: %s", fn, c->busy_poll_us,
                       strerror(errno));
  struct timeval tv = {0, RX_TIMEOUT_US};
  if (setsockopt(b->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0)
    return cudaq__fail(CUDAQ_ERR_INTERNAL, "%s: SO_RCVTIMEO: %s", fn, strerror(errno));
  if (bind(b->fd, (struct sockaddr *)&a, sizeof a) != 0)
    return cudaq__fail(CUDAQ_ERR_INTERNAL, "%s: bind %s:%u: %s", fn,
                       c->bind_addr ? c->bind_addr : "0.0.0.0", c->port, strerror(errno));
  socklen_t len = sizeof a;
  getsockname(b->fd, (struct sockaddr *)&a, &len);
  b->port = ntohs(a.sin_port);
  len = sizeof b->rcvbuf;
  getsockopt(b->fd, SOL_SOCKET, SO_RCVBUF, &b->rcvbuf, &len);
  len = sizeof b->sndbuf;
  getsockopt(b->fd, SOL_SOCKET, SO_SNDBUF, &b->sndbuf, &len);
  return CUDAQ_OK;
}

static void free_bridge(cudaq_udp_bridge_t *b) {
  if (b->fd >= 0) close(b->fd);
  free(b->ids);
  free(b->peer);
  free(b->peer_valid);
  free(b->pending);
  free(b->stage);
  free(b->stage_len);
  free(b->stage_err);
  free(b->stage_to);
  free(b);
}

cudaq_status_t cudaq_udp_bridge_create(const cudaq_udp_config_t *config,
                                       cudaq_udp_bridge_t **out) {
  if (!config || !out)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "cudaq_udp_bridge_create: NULL argument");
  cudaq_status_t st = check_config(config);
  if (st != CUDAQ_OK) return st;
  cudaq_udp_bridge_t *b = calloc(1, sizeof *b);
  if (!b) return cudaq__fail(CUDAQ_ERR_INTERNAL, "cudaq_udp_bridge_create: out of memory");
  b->fd = -1;
  b->cfg = *config;
  b->cfg.function_ids = NULL;
  b->n = config->num_slots;
  const cudaq_ringbuffer_t *r = config->ring;
  b->ring = *r; /* host views; a NULL _host field means "same as the device view" */
  if (!b->ring.rx_flags_host) b->ring.rx_flags_host = r->rx_flags;
  if (!b->ring.tx_flags_host) b->ring.tx_flags_host = r->tx_flags;
  if (!b->ring.rx_data_host) b->ring.rx_data_host = r->rx_data;
  if (!b->ring.tx_data_host) b->ring.tx_data_host = r->tx_data;
  b->peer = calloc(b->n, sizeof *b->peer);
  b->peer_valid = calloc(b->n, 1);
  b->pending = calloc(b->n, 1);
  b->stage = malloc((size_t)b->n * b->ring.tx_stride_sz);
  b->stage_len = calloc(b->n, sizeof *b->stage_len);
  b->stage_err = calloc(b->n, 1);
  b->stage_to = calloc(b->n, sizeof *b->stage_to);
  b->n_ids = config->num_function_ids;
  b->ids = b->n_ids ? malloc(b->n_ids * sizeof *b->ids) : NULL;
  if (!b->peer || !b->peer_valid || !b->pending || !b->stage || !b->stage_len ||
      !b->stage_err || !b->stage_to || (b->n_ids && !b->ids)) {
    free_bridge(b);
    return cudaq__fail(CUDAQ_ERR_INTERNAL, "cudaq_udp_bridge_create: out of memory");
  }
  if (b->n_ids) {
    memcpy(b->ids, config->function_ids, b->n_ids * sizeof *b->ids);
    qsort(b->ids, b->n_ids, sizeof *b->ids, cmp_u32);
  }
  for (uint32_t i = 0; i < CUDAQ_UDP_MAX_BATCH; ++i) {
    b->msgs[i].msg_hdr.msg_name = &b->from[i];
    b->msgs[i].msg_hdr.msg_iov = &b->iov[i];
    b->msgs[i].msg_hdr.msg_iovlen = 1;
  }
  st = open_socket(b);
  if (st != CUDAQ_OK) {
    free_bridge(b);
    return st;
  }
  *out = b;
  return cudaq__ok();
}

static int spawn(pthread_t *t, void *(*fn)(void *), void *arg, int core, const char *name) {
  pthread_attr_t attr;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (core >= 0) {
    CPU_SET(core, &set);
  } else { /* every CPU: do not inherit the caller's affinity */
    int ncpu = get_nprocs_conf();
    for (int c = 0; c < ncpu && c < CPU_SETSIZE; ++c) CPU_SET(c, &set);
  }
  pthread_attr_init(&attr);
  pthread_attr_setaffinity_np(&attr, sizeof set, &set);
  int rc = pthread_create(t, &attr, fn, arg);
  pthread_attr_destroy(&attr);
  if (rc == EINVAL && core < 0) rc = pthread_create(t, NULL, fn, arg); /* restricted cpuset */
  if (rc == 0) pthread_setname_np(*t, name);
  return rc;
}

cudaq_status_t cudaq_udp_bridge_start(cudaq_udp_bridge_t *b) {
  if (!b) return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "cudaq_udp_bridge_start: bridge is NULL");
  if (b->running)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "cudaq_udp_bridge_start: already running");
  atomic_store_explicit(&b->rx_stop, 0, memory_order_relaxed);
  atomic_store_explicit(&b->tx_stop, 0, memory_order_relaxed);
  b->have_tx = b->cfg.tx_mode == CUDAQ_UDP_TX_THREAD;
  if (b->have_tx) {
    int rc = spawn(&b->tx_thread, tx_main, b, b->cfg.tx_core, "cudaq-udp-tx");
    if (rc)
      return cudaq__fail(rc == EINVAL ? CUDAQ_ERR_INVALID_ARG : CUDAQ_ERR_INTERNAL,
                         "cudaq_udp_bridge_start: TX thread: %s", strerror(rc));
  }
  int rc = spawn(&b->rx_thread, rx_main, b, b->cfg.rx_core, "cudaq-udp-rx");
  if (rc) {
    if (b->have_tx) {
      atomic_store_explicit(&b->tx_stop, 1, memory_order_release);
      pthread_join(b->tx_thread, NULL);
    }
    return cudaq__fail(rc == EINVAL ? CUDAQ_ERR_INVALID_ARG : CUDAQ_ERR_INTERNAL,
                       "cudaq_udp_bridge_start: RX thread: %s", strerror(rc));
  }
  b->running = true;
  return cudaq__ok();
}

cudaq_status_t cudaq_udp_bridge_stop(cudaq_udp_bridge_t *b) {
  if (!b) return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "cudaq_udp_bridge_stop: bridge is NULL");
  if (!b->running) return cudaq__ok();
  int bad = 0;
  /* R4: pairs with A4 in the threads (nothing published). RX first: once it
   * has joined nothing new enters the ring, then the TX side drains. */
  atomic_store_explicit(&b->rx_stop, 1, memory_order_release);
  bad |= pthread_join(b->rx_thread, NULL);
  if (b->have_tx) {
    atomic_store_explicit(&b->tx_stop, 1, memory_order_release); /* R4 */
    bad |= pthread_join(b->tx_thread, NULL);
  }
  b->running = false;
  if (bad) return cudaq__fail(CUDAQ_ERR_INTERNAL, "cudaq_udp_bridge_stop: pthread_join failed");
  return cudaq__ok();
}

cudaq_status_t cudaq_udp_bridge_destroy(cudaq_udp_bridge_t *b) {
  if (!b) return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "cudaq_udp_bridge_destroy: bridge is NULL");
  cudaq_status_t st = cudaq_udp_bridge_stop(b);
  free_bridge(b);
  return st == CUDAQ_OK ? cudaq__ok() : st;
}

cudaq_status_t cudaq_udp_bridge_port(const cudaq_udp_bridge_t *b, uint16_t *out_port) {
  if (!b || !out_port) return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "cudaq_udp_bridge_port: NULL");
  *out_port = b->port;
  return cudaq__ok();
}

cudaq_status_t cudaq_udp_bridge_socket_buffers(const cudaq_udp_bridge_t *b, int *out_rcvbuf,
                                               int *out_sndbuf) {
  if (!b || !out_rcvbuf || !out_sndbuf)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "cudaq_udp_bridge_socket_buffers: NULL");
  *out_rcvbuf = b->rcvbuf;
  *out_sndbuf = b->sndbuf;
  return cudaq__ok();
}

cudaq_status_t cudaq_udp_bridge_send_response(cudaq_udp_bridge_t *b, uint32_t slot) {
  if (!b || slot >= b->n || b->cfg.tx_mode != CUDAQ_UDP_TX_EXTERNAL)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG,
                       "cudaq_udp_bridge_send_response: NULL bridge, slot out of range or not "
                       "TX_EXTERNAL mode");
  /* The caller saw the TX flag set (A2): peer[slot] is visible (header). */
  if (!b->peer_valid[slot])
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG,
                       "cudaq_udp_bridge_send_response: slot %u holds no request of the bridge",
                       slot);
  /* A2 (inside poll_tx_flag) again, to tell a response from an error
   * marker; the caller's own A2 already made both visible. */
  cudaq_tx_status_t st = cudaq_host_ringbuffer_poll_tx_flag(&b->ring, slot, NULL);
  if (send_slot(b, slot, st == CUDAQ_TX_ERROR ? CUDAQ_TX_ERROR : CUDAQ_TX_READY) != 0)
    return cudaq__fail(CUDAQ_ERR_INTERNAL, "cudaq_udp_bridge_send_response: sendto failed");
  return cudaq__ok();
}

cudaq_status_t cudaq_udp_bridge_counters(const cudaq_udp_bridge_t *b, cudaq_udp_counters_t *o) {
  if (!b || !o) return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "cudaq_udp_bridge_counters: NULL");
#define LD(f) o->f = atomic_load_explicit(&b->c.f, memory_order_relaxed)
  LD(rx_datagrams); LD(rx_batches); LD(accepted); LD(drop_short); LD(drop_bad_magic);
  LD(err_oversize); LD(err_arg_len); LD(err_unknown_function); LD(drop_ring_full);
  LD(tx_responses); LD(tx_error_replies); LD(tx_errors); LD(rx_errors); LD(unanswered_at_stop);
#undef LD
  return cudaq__ok();
}
