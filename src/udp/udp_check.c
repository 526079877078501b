/*
 * udp_check.c - the datagram check of the UDP bridge, kept pure so that it
 * can be unit-tested and fuzzed on its own (fuzz/fuzz_udp.c).
 *
 * The rules are the wire format's (rpc_wire_format.h): the header layout and
 * magic, and its request-length rule cudaq_rpc_check_arg_len (the one every
 * dispatch path applies), fed with the datagram's own payload length as the
 * exact size arg_len must state. Added here only what a datagram transport
 * alone can see: a datagram longer than a slot, and a function id the
 * bridge was told it does not serve.
 */
#include <string.h>

#include "udp_internal.h"

static int id_served(const uint32_t *ids, uint32_t n, uint32_t id) {
  uint32_t lo = 0, hi = n; /* binary search of the sorted list */
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (ids[mid] == id) return 1;
    if (ids[mid] < id) lo = mid + 1;
    else hi = mid;
  }
  return 0;
}

cudaq__udp_verdict_t cudaq__udp_check_datagram(const uint8_t *buf, size_t held, size_t wire_len,
                                               size_t slot_size, const uint32_t *ids,
                                               uint32_t n_ids, cudaq_rpc_response_t *reply) {
  cudaq_rpc_header_t h;
  int32_t status;
  cudaq__udp_verdict_t v;

  if (wire_len < CUDAQ_RPC_HEADER_SIZE || held < CUDAQ_RPC_HEADER_SIZE) return CUDAQ__UDP_DROP_SHORT;
  memcpy(&h, buf, sizeof h);
  if (h.magic != CUDAQ_RPC_MAGIC_REQUEST) return CUDAQ__UDP_DROP_BAD_MAGIC;

  const uint32_t room =
      slot_size > CUDAQ_RPC_HEADER_SIZE ? (uint32_t)(slot_size - CUDAQ_RPC_HEADER_SIZE) : 0u;
  /* The wire format's request-length rule, with the datagram's own payload
   * length as the exact size demanded (what the datagram carries is what
   * arg_len must say). A datagram that does not fit the slot is too large
   * whatever its header says. */
  status = wire_len > slot_size
               ? (int32_t)CUDAQ_RPC_ERR_PAYLOAD_TOO_LARGE
               : cudaq_rpc_check_arg_len(h.arg_len, room,
                                         (uint32_t)(wire_len - CUDAQ_RPC_HEADER_SIZE), 1);
  if (status == CUDAQ_RPC_ERR_PAYLOAD_TOO_LARGE) {
    v = CUDAQ__UDP_REPLY_OVERSIZE;
  } else if (status == CUDAQ_RPC_ERR_ARG_LEN_MISMATCH) {
    v = CUDAQ__UDP_REPLY_ARG_LEN;
  } else if (n_ids && !id_served(ids, n_ids, h.function_id)) {
    v = CUDAQ__UDP_REPLY_UNKNOWN_FUNCTION;
    status = CUDAQ_UDP_ERR_UNKNOWN_FUNCTION;
  } else {
    return CUDAQ__UDP_ACCEPT;
  }
  reply->magic = CUDAQ_RPC_MAGIC_RESPONSE;
  reply->status = status;
  reply->result_len = 0;
  reply->request_id = h.request_id;
  reply->ptp_timestamp = h.ptp_timestamp;
  return v;
}
