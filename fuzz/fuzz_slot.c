/*
 * fuzz_slot.c - libFuzzer target over the host path's slot parser
 * (cudaq__host_process_slot): arbitrary slot bytes, slot sizes and in-place
 * rings. Checks the protocol's invariants on every input and aborts (a
 * fuzzer finding) if one breaks:
 *  - the outcome is one of the three defined ones;
 *  - bad magic and unknown ids write nothing;
 *  - an answered request echoes request_id and ptp_timestamp, carries the
 *    response magic, and result_len fits the TX slot;
 *  - payloads longer than the slot are answered PAYLOAD_TOO_LARGE, schema
 *    mismatches ARG_LEN_MISMATCH, and no handler ever sees either.
 * Input layout: byte 0 = options (bit 0: in place, bits 1..7: slot size
 * choice), the rest = the RX slot's bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint32_t g_max_payload_seen;

static int h_echo(const void *args, void *result, uint32_t arg_len, uint32_t max_result_len,
                  uint32_t *result_len) {
  if (arg_len > g_max_payload_seen) abort(); /* the handler saw an oversize payload */
  if (arg_len > max_result_len) return 1;
  memmove(result, args, arg_len);
  *result_len = arg_len;
  return 0;
}

static int h_fixed16(const void *args, void *result, uint32_t arg_len, uint32_t max_result_len,
                     uint32_t *result_len) {
  (void)args, (void)result, (void)max_result_len;
  if (arg_len != 16) abort(); /* the schema's size was not enforced */
  *result_len = 0;
  return 0;
}

static int h_liar(const void *args, void *result, uint32_t arg_len, uint32_t max_result_len,
                  uint32_t *result_len) {
  (void)args, (void)result, (void)arg_len;
  *result_len = max_result_len + 1 + (arg_len & 0xFF);
  return 0;
}

static int h_error(const void *args, void *result, uint32_t arg_len, uint32_t max_result_len,
                   uint32_t *result_len) {
  (void)args, (void)result, (void)arg_len, (void)max_result_len, (void)result_len;
  return 42;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const uint32_t sizes[] = {24, 25, 32, 64, 100, 256, 1024};
  static cudaq__host_entry_t table[5];
  static int built;
  if (!built) {
    cudaq_function_entry_t e[5];
    memset(e, 0, sizeof e);
    cudaq_host_rpc_fn_t fns[5] = {h_echo, h_fixed16, h_liar, h_error, NULL};
    for (int i = 0; i < 5; ++i) {
      e[i].function_id = (uint32_t)(i + 1); /* ids 1..5: reachable by the fuzzer */
      e[i].dispatch_mode = CUDAQ_DISPATCH_HOST_CALL;
      e[i].handler.host_fn = fns[i];
    }
    e[1].schema.num_args = 1;
    e[1].schema.args[0].type_id = CUDAQ_TYPE_ARRAY_UINT8;
    e[1].schema.args[0].size_bytes = 16;
    e[1].schema.args[0].num_elements = 16;
    e[4].dispatch_mode = CUDAQ_DISPATCH_GRAPH_LAUNCH;
    if (cudaq__host_table_build(e, 5, table) != CUDAQ_OK) abort();
    built = 1;
  }
  if (size < 1) return 0;
  const int in_place = data[0] & 1;
  const uint32_t slot_size = sizes[(data[0] >> 1) % (sizeof sizes / sizeof sizes[0])];
  uint8_t *rx = calloc(1, slot_size); /* exact size: ASan sees any overrun */
  uint8_t *tx = in_place ? rx : malloc(slot_size);
  if (!in_place) memset(tx, 0xA5, slot_size);
  memcpy(rx, data + 1, size - 1 < slot_size ? size - 1 : slot_size);
  cudaq_rpc_header_t req;
  memcpy(&req, rx, sizeof req);
  g_max_payload_seen = slot_size - CUDAQ_RPC_HEADER_SIZE;

  int32_t status = 12345;
  cudaq__slot_outcome_t o = cudaq__host_process_slot(
      table, 5, rx, slot_size - CUDAQ_RPC_HEADER_SIZE, tx, slot_size, &status);
  cudaq_rpc_response_t resp;
  memcpy(&resp, tx, sizeof resp);
  switch (o) {
  case CUDAQ__SLOT_BAD_MAGIC:
    if (req.magic == CUDAQ_RPC_MAGIC_REQUEST) abort();
    if (!in_place && tx[0] != 0xA5) abort();
    break;
  case CUDAQ__SLOT_UNKNOWN_FUNCTION:
    if (req.function_id >= 1 && req.function_id <= 5) abort();
    if (!in_place && tx[0] != 0xA5) abort();
    break;
  case CUDAQ__SLOT_ANSWERED:
    if (resp.magic != CUDAQ_RPC_MAGIC_RESPONSE || resp.status != status) abort();
    if (resp.request_id != req.request_id || resp.ptp_timestamp != req.ptp_timestamp) abort();
    if (resp.result_len > slot_size - CUDAQ_RPC_HEADER_SIZE) abort();
    if (req.arg_len > slot_size - CUDAQ_RPC_HEADER_SIZE && status != CUDAQ_RPC_ERR_PAYLOAD_TOO_LARGE) abort();
    if (req.function_id == 2 && req.arg_len != 16 && status >= 0) abort();
    if (req.function_id == 3 && status != CUDAQ_RPC_ERR_RESULT_TOO_LARGE &&
        status != CUDAQ_RPC_ERR_PAYLOAD_TOO_LARGE) abort();
    if (req.function_id == 5 && status != CUDAQ_RPC_ERR_UNSUPPORTED_MODE &&
        status != CUDAQ_RPC_ERR_PAYLOAD_TOO_LARGE) abort();
    if (status < 0 && resp.result_len != 0) abort();
    break;
  default:
    abort();
  }
  if (!in_place) free(tx);
  free(rx);
  return 0;
}
