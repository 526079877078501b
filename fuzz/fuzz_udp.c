/*
 * fuzz_udp.c - libFuzzer target over the UDP bridge's datagram check
 * (cudaq__udp_check_datagram, src/udp/udp_check.c): arbitrary datagrams,
 * truncation by the receive buffer, slot sizes and served-id lists. Aborts
 * (a finding) if an invariant breaks:
 *  - the verdict is one of the six defined ones, and it is the one the
 *    rules of udp.h give for this input (an independent restatement);
 *  - a drop writes no reply; a reply echoes request_id and ptp_timestamp,
 *    carries the response magic, result_len 0 and the matching status;
 *  - an accepted datagram fits its slot and its arg_len is its payload.
 * Input layout: byte 0 = options (bits 0..2: slot size, bit 3: truncate to
 * a 32-byte buffer as the bridge's scratch does, bits 4..5: id list), the
 * rest = the datagram.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "udp/udp_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const size_t slots[] = {24, 25, 32, 64, 100, 256, 1024, 65559};
  static const uint32_t ids_a[] = {1, 2, 3};
  static const uint32_t ids_b[] = {0x43555152u};
  if (size < 1) return 0;
  const uint8_t opt = data[0];
  const size_t slot = slots[opt & 7];
  const size_t wire_len = size - 1;
  const size_t held = (opt & 8) && wire_len > 32 ? 32 : wire_len;
  const uint32_t *ids = (opt >> 4) % 3 == 1 ? ids_a : (opt >> 4) % 3 == 2 ? ids_b : NULL;
  const uint32_t n_ids = ids == ids_a ? 3 : ids == ids_b ? 1 : 0;
  uint8_t *buf = malloc(held ? held : 1); /* exact size: ASan sees any overrun */
  if (held) memcpy(buf, data + 1, held);

  cudaq_rpc_response_t reply, untouched;
  memset(&reply, 0xA5, sizeof reply);
  untouched = reply;
  cudaq__udp_verdict_t v = cudaq__udp_check_datagram(buf, held, wire_len, slot, ids, n_ids, &reply);

  /* The rules again, written independently. */
  cudaq__udp_verdict_t want;
  int32_t status = 0;
  cudaq_rpc_header_t h;
  memset(&h, 0, sizeof h);
  if (wire_len < 24) {
    want = CUDAQ__UDP_DROP_SHORT;
  } else {
    memcpy(&h, data + 1, sizeof h);
    int served = n_ids == 0;
    for (uint32_t i = 0; i < n_ids; ++i) served |= ids[i] == h.function_id;
    if (h.magic != CUDAQ_RPC_MAGIC_REQUEST) want = CUDAQ__UDP_DROP_BAD_MAGIC;
    else if (wire_len > slot || (uint64_t)h.arg_len + 24 > slot)
      want = CUDAQ__UDP_REPLY_OVERSIZE, status = CUDAQ_RPC_ERR_PAYLOAD_TOO_LARGE;
    else if ((uint64_t)h.arg_len + 24 != wire_len)
      want = CUDAQ__UDP_REPLY_ARG_LEN, status = CUDAQ_RPC_ERR_ARG_LEN_MISMATCH;
    else if (!served)
      want = CUDAQ__UDP_REPLY_UNKNOWN_FUNCTION, status = CUDAQ_UDP_ERR_UNKNOWN_FUNCTION;
    else want = CUDAQ__UDP_ACCEPT;
  }
  if (v != want) abort();
  if (v <= CUDAQ__UDP_DROP_BAD_MAGIC) {
    if (memcmp(&reply, &untouched, sizeof reply) != 0) abort();
  } else {
    if (reply.magic != CUDAQ_RPC_MAGIC_RESPONSE || reply.status != status || reply.result_len != 0 ||
        reply.request_id != h.request_id || reply.ptp_timestamp != h.ptp_timestamp)
      abort();
  }
  if (v == CUDAQ__UDP_ACCEPT && (wire_len > slot || h.arg_len + 24u != wire_len)) abort();
  free(buf);
  return 0;
}
