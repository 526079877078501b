/*
 * cudaq/realtime/udp.h - UDP transport (extension): a bridge between one UDP
 * port and one ring buffer, so that a control system (an FPGA, or the
 * emulator tools/udp/cudaq-udp-emu) reaches a dispatcher over the network.
 *
 * One datagram is one RPC request (rpc_wire_format.h: 24-byte header +
 * arg_len payload bytes, nothing else); one response datagram (24-byte
 * response header + result) goes back to the request's source address.
 *
 * Threads:
 *   RX thread   receives with recvmmsg straight into free RX slots (in ring
 *               order: the dispatchers serve the ring in that order), checks
 *               each datagram (cudaq__udp_check_datagram, the one home of the
 *               rules below), remembers its sender and signals the slot.
 *   responses   by tx_mode:
 *     CUDAQ_UDP_TX_THREAD    a TX thread polls every TX flag, sends READY
 *                            responses and clears the slot (host-thread
 *                            dispatch; the host worker pool, whose IN_FLIGHT
 *                            slots it skips); each sweep clears every
 *                            answered slot (copying the responses out)
 *                            before it sends any, so a client that keeps at
 *                            most half the slots in flight never finds the
 *                            ring full;
 *     CUDAQ_UDP_TX_INLINE    the RX thread does the same between receives:
 *                            it blocks in recvmmsg while nothing is in flight
 *                            and spins (non-blocking receives + TX polls)
 *                            while something is (one thread; for small
 *                            machines);
 *     CUDAQ_UDP_TX_EXTERNAL  the ring's consumer sends: the pipeline's
 *                            completion handler calls
 *                            cudaq_udp_bridge_send_response(bridge, c->slot);
 *                            the pipeline then clears the slot itself.
 *
 * Routing: the wire header has no vp_id field, so a datagram cannot name its
 * stream; one bridge (one port) serves one ring, and a stream is chosen by
 * the port it is sent to (cudaq_dispatcher_config_t.vp_id stays a tag).
 *
 * Bad input (counted in cudaq_udp_counters_t, never a crash or a hang):
 *   shorter than 24 bytes          dropped (no header to answer)
 *   magic != CUDAQ_RPC_MAGIC_REQUEST  dropped (not this protocol: answering
 *                                  foreign traffic would make a reflector)
 *   larger than a slot, or arg_len larger than a slot's payload room
 *                                  answered CUDAQ_RPC_ERR_PAYLOAD_TOO_LARGE
 *   arg_len != datagram size - 24  answered CUDAQ_RPC_ERR_ARG_LEN_MISMATCH
 *   function_id not in the configured list (when one is given)
 *                                  answered CUDAQ_UDP_ERR_UNKNOWN_FUNCTION
 *   no free slot (ring full)       dropped: UDP has no flow control; the
 *                                  sender sees a lost request
 * A valid request is placed in the ring: the dispatcher's own checks
 * (schema sizes, dispatch mode) then answer as on every other path.
 *
 * Hot path: recvmmsg / sendto are the transport; apart from them no
 * syscall, allocation or lock (everything is allocated at create).
 * Compiles as C11 and C++17. Linux only (recvmmsg, SO_BUSY_POLL).
 */
#ifndef CUDAQ_REALTIME_UDP_H
#define CUDAQ_REALTIME_UDP_H

#include <stddef.h>
#include <stdint.h>

#include "cudaq/realtime/cudaq_realtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Response status for a function_id the bridge does not serve. The wire
 * format (rpc_wire_format.h) has no status for it; this value is proposed
 * for cudaq_rpc_error_t there (as CUDAQ_RPC_ERR_UNKNOWN_FUNCTION) and is
 * kept distinct from its -1..-5. */
#define CUDAQ_UDP_ERR_UNKNOWN_FUNCTION (-6)

#define CUDAQ_UDP_MAX_BATCH 64

typedef enum {
  CUDAQ_UDP_TX_THREAD = 0,
  CUDAQ_UDP_TX_INLINE = 1,
  CUDAQ_UDP_TX_EXTERNAL = 2
} cudaq_udp_tx_mode_t;

typedef struct {
  const char *bind_addr; /* IPv4 address to bind, NULL = "0.0.0.0" */
  uint16_t port;         /* 0 = an ephemeral port (see cudaq_udp_bridge_port) */
  /* The ring (host views are used; copied) and its slot count. Requests of
   * up to rx_stride_sz bytes are accepted. */
  const cudaq_ringbuffer_t *ring;
  uint32_t num_slots;
  cudaq_udp_tx_mode_t tx_mode; /* default CUDAQ_UDP_TX_THREAD */
  uint32_t batch;              /* datagrams per recvmmsg, 1..64, default 16 */
  int rx_core, tx_core;        /* CPU to pin the RX / TX thread to, -1 (default) = any */
  int busy_poll_us;            /* SO_BUSY_POLL on the socket, 0 (default) = off */
  int rcvbuf_bytes, sndbuf_bytes; /* SO_RCVBUF / SO_SNDBUF (FORCE when permitted), 0 = default */
  /* 1 (default): the RX thread blocks in recvmmsg (waking every 20 ms to
   * see stop); 0: it spins on non-blocking receives. INLINE mode always
   * spins while a request is in flight. */
  int rx_blocking;
  /* (optional) The function ids served; others are answered
   * CUDAQ_UDP_ERR_UNKNOWN_FUNCTION. NULL / 0: every id is passed to the
   * dispatcher (which drops unknown ones without a response). Copied. */
  const uint32_t *function_ids;
  uint32_t num_function_ids;
  /* Idle TX polling calls sched_yield() (machines with fewer cores than
   * spinning threads); 0 (default) = CPU-relax hint only. */
  int idle_yield;
  /* How long stop waits for responses of requests already in the ring
   * (TX_THREAD / TX_INLINE), default 1000 ms. */
  int drain_timeout_ms;
} cudaq_udp_config_t;

/* Everything received is counted once:
 * rx_datagrams = accepted + drop_short + drop_bad_magic + err_oversize +
 *                err_arg_len + err_unknown_function + drop_ring_full. */
typedef struct {
  uint64_t rx_datagrams;        /* datagrams received */
  uint64_t rx_batches;          /* recvmmsg calls that returned datagrams */
  uint64_t accepted;            /* placed in an RX slot and signalled */
  uint64_t drop_short;          /* < 24 bytes, no response */
  uint64_t drop_bad_magic;      /* wrong magic, no response */
  uint64_t err_oversize;        /* answered CUDAQ_RPC_ERR_PAYLOAD_TOO_LARGE */
  uint64_t err_arg_len;         /* answered CUDAQ_RPC_ERR_ARG_LEN_MISMATCH */
  uint64_t err_unknown_function; /* answered CUDAQ_UDP_ERR_UNKNOWN_FUNCTION */
  uint64_t drop_ring_full;      /* a valid request found no free slot, no response */
  uint64_t tx_responses;        /* responses from the ring sent */
  uint64_t tx_error_replies;    /* protocol-error responses the bridge sent itself */
  uint64_t tx_errors;           /* sendto failures (a response lost) */
  uint64_t rx_errors;           /* recvmmsg failures other than a timeout */
  uint64_t unanswered_at_stop;  /* slots still in flight when the drain timed out */
} cudaq_udp_counters_t;

typedef struct cudaq_udp_bridge cudaq_udp_bridge_t;

/* Fills *config with the defaults above (ring NULL, num_slots 0: required).
 * Returns CUDAQ_OK or CUDAQ_ERR_INVALID_ARG (NULL). */
cudaq_status_t cudaq_udp_config_init(cudaq_udp_config_t *config);

/* Creates a bridge: checks the configuration, opens and binds the socket
 * (so that the port is known before start) and allocates everything the
 * threads use. Returns CUDAQ_OK; CUDAQ_ERR_INVALID_ARG (NULL, no ring or
 * NULL ring pointers, num_slots 0, an rx/tx stride below 24, batch outside
 * 1..64, an unknown tx_mode, a core < -1, a bad bind address);
 * CUDAQ_ERR_UNSUPPORTED (busy_poll_us refused by the kernel);
 * CUDAQ_ERR_INTERNAL (socket, bind or memory failure; cudaq_last_error()
 * names it). */
cudaq_status_t cudaq_udp_bridge_create(const cudaq_udp_config_t *config,
                                       cudaq_udp_bridge_t **out);

/* Stops (if running), closes the socket and frees. Returns CUDAQ_OK,
 * CUDAQ_ERR_INVALID_ARG (NULL) or the error of the stop. */
cudaq_status_t cudaq_udp_bridge_destroy(cudaq_udp_bridge_t *bridge);

/* The bound UDP port. Returns CUDAQ_OK or CUDAQ_ERR_INVALID_ARG (NULL). */
cudaq_status_t cudaq_udp_bridge_port(const cudaq_udp_bridge_t *bridge, uint16_t *out_port);

/* Starts the RX thread (and the TX thread in TX_THREAD mode). The ring's
 * dispatcher should be running. Returns CUDAQ_OK; CUDAQ_ERR_INVALID_ARG
 * (NULL, running, or a pinning core that is not a CPU here);
 * CUDAQ_ERR_INTERNAL (thread creation). */
cudaq_status_t cudaq_udp_bridge_start(cudaq_udp_bridge_t *bridge);

/* Stops receiving; in TX_THREAD / TX_INLINE mode then sends the responses
 * of requests already in the ring (waiting at most drain_timeout_ms; the
 * dispatcher must still run) and joins the threads. Call it before stopping
 * the dispatcher. Idempotent. A stopped bridge may be started again (the
 * socket stays open; datagrams that arrive meanwhile wait in its buffer).
 * Returns CUDAQ_OK, CUDAQ_ERR_INVALID_ARG (NULL), CUDAQ_ERR_INTERNAL
 * (join failed). */
cudaq_status_t cudaq_udp_bridge_stop(cudaq_udp_bridge_t *bridge);

/* TX_EXTERNAL mode: sends the response in TX slot `slot` to the sender of
 * its request. Called by the ring's consumer (one thread), after the TX
 * flag was seen set and before the slot is cleared, e.g. from the
 * pipeline's completion handler; may be called after stop (the socket
 * stays open until destroy). Hot path: one sendto. Returns CUDAQ_OK;
 * CUDAQ_ERR_INVALID_ARG (NULL, slot out of range, not TX_EXTERNAL mode, or
 * no request of the bridge in that slot); CUDAQ_ERR_INTERNAL (sendto
 * failed; counted in tx_errors). */
cudaq_status_t cudaq_udp_bridge_send_response(cudaq_udp_bridge_t *bridge, uint32_t slot);

/* Snapshot of the counters (each value consistent with itself). Any
 * thread. Returns CUDAQ_OK or CUDAQ_ERR_INVALID_ARG (NULL). */
cudaq_status_t cudaq_udp_bridge_counters(const cudaq_udp_bridge_t *bridge,
                                         cudaq_udp_counters_t *out);

/* Socket buffer sizes the kernel actually granted (after doubling).
 * Returns CUDAQ_OK or CUDAQ_ERR_INVALID_ARG (NULL). */
cudaq_status_t cudaq_udp_bridge_socket_buffers(const cudaq_udp_bridge_t *bridge, int *out_rcvbuf,
                                               int *out_sndbuf);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CUDAQ_REALTIME_UDP_H */
