/*
 * udp_internal.h - private declarations of the UDP bridge (src/udp).
 */
#ifndef CUDAQ_SRC_UDP_INTERNAL_H
#define CUDAQ_SRC_UDP_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "cudaq/realtime/udp.h"

/* What the bridge does with one received datagram. */
typedef enum {
  CUDAQ__UDP_ACCEPT = 0,               /* a request: place it in the ring */
  CUDAQ__UDP_DROP_SHORT = 1,           /* < 24 bytes: drop, no response */
  CUDAQ__UDP_DROP_BAD_MAGIC = 2,       /* not a request: drop, no response */
  CUDAQ__UDP_REPLY_OVERSIZE = 3,       /* answer CUDAQ_RPC_ERR_PAYLOAD_TOO_LARGE */
  CUDAQ__UDP_REPLY_ARG_LEN = 4,        /* answer CUDAQ_RPC_ERR_ARG_LEN_MISMATCH */
  CUDAQ__UDP_REPLY_UNKNOWN_FUNCTION = 5 /* answer CUDAQ_UDP_ERR_UNKNOWN_FUNCTION */
} cudaq__udp_verdict_t;

/* The one home of the datagram rules (udp.h, "Bad input").
 *   buf       the bytes received (held of them: min(wire_len, buffer size))
 *   wire_len  the datagram's real length (recvmmsg with MSG_TRUNC)
 *   slot_size bytes of an RX slot (header + payload room)
 *   ids       sorted function ids served, or NULL (n_ids 0): any id
 * For a REPLY_* verdict fills *reply (response magic, status, result_len 0,
 * request_id and ptp_timestamp echoed); otherwise leaves it alone. Reads
 * only buf[0 .. min(held, 24)). Pure: no state, no syscall. */
cudaq__udp_verdict_t cudaq__udp_check_datagram(const uint8_t *buf, size_t held, size_t wire_len,
                                               size_t slot_size, const uint32_t *ids,
                                               uint32_t n_ids, cudaq_rpc_response_t *reply);

#endif /* CUDAQ_SRC_UDP_INTERNAL_H */
