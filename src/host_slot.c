/*
 * host_slot.c - the host path's request parser and response writer.
 *
 * Kept free of flags, counters and threads so that it can be tested and
 * fuzzed on its own (fuzz/fuzz_slot.c): whatever bytes a slot holds, it reads
 * only inside the slot and always ends in one defined outcome.
 */
#include <string.h>

#include "internal.h"

cudaq_status_t cudaq__table_check_ids(const cudaq_function_entry_t *entries, uint32_t count,
                                      const char *fn) {
  for (uint32_t i = 1; i < count; ++i)
    for (uint32_t j = 0; j < i; ++j)
      if (entries[j].function_id == entries[i].function_id)
        return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s%sfunction table entries %u and %u share function_id 0x%08x",
                           fn ? fn : "", fn ? ": " : "", j, i, entries[i].function_id);
  return cudaq__ok();
}

cudaq_status_t cudaq__host_table_build(const cudaq_function_entry_t *entries, uint32_t count,
                                       cudaq__host_entry_t *out) {
  cudaq_status_t st = cudaq__table_check_ids(entries, count, NULL);
  if (st != CUDAQ_OK) return st;
  for (uint32_t i = 0; i < count; ++i) {
    const cudaq_function_entry_t *e = &entries[i];
    if (e->dispatch_mode > CUDAQ_DISPATCH_HOST_CALL)
      return cudaq__fail(CUDAQ_ERR_INVALID_ARG,
                         "function table entry %u (id 0x%08x): unknown dispatch_mode %u", i,
                         e->function_id, e->dispatch_mode);
    if (e->dispatch_mode == CUDAQ_DISPATCH_HOST_CALL && !e->handler.host_fn)
      return cudaq__fail(CUDAQ_ERR_INVALID_ARG,
                         "function table entry %u (id 0x%08x): HOST_CALL entry has no host_fn", i,
                         e->function_id);
    if (cudaq_schema_validate(&e->schema) != CUDAQ_OK)
      return cudaq__fail(CUDAQ_ERR_INVALID_ARG,
                         "function table entry %u (id 0x%08x): invalid schema (counts over 8/4, "
                         "unknown type, size_bytes inconsistent with type and num_elements, or a "
                         "variable-size descriptor that is not last)",
                         i, e->function_id);
    int exact = 0;
    cudaq_schema_arg_rule(&e->schema, &out[i].fixed_arg_len, &exact);
    out[i].function_id = e->function_id;
    out[i].dispatch_mode = e->dispatch_mode;
    out[i].has_fixed_arg_len = (uint8_t)exact;
    out[i].host_fn = e->dispatch_mode == CUDAQ_DISPATCH_HOST_CALL ? e->handler.host_fn : NULL;
  }
  return cudaq__ok();
}

static const cudaq__host_entry_t *find_entry(const cudaq__host_entry_t *table, uint32_t count,
                                              uint32_t function_id) {
  for (uint32_t i = 0; i < count; ++i)
    if (table[i].function_id == function_id) return &table[i];
  return NULL;
}

cudaq__slot_outcome_t cudaq__host_process_slot(const cudaq__host_entry_t *table, uint32_t count,
                                               const uint8_t *rx_slot, uint32_t max_payload,
                                               uint8_t *tx_slot, size_t tx_size,
                                               int32_t *out_status) {
  uint32_t fid;
  return cudaq__host_process_slot_ex(table, count, rx_slot, max_payload, tx_slot, tx_size,
                                     out_status, 0, &fid);
}

cudaq__slot_outcome_t cudaq__host_process_slot_ex(const cudaq__host_entry_t *table, uint32_t count,
                                                  const uint8_t *rx_slot, uint32_t max_payload,
                                                  uint8_t *tx_slot, size_t tx_size,
                                                  int32_t *out_status, int graph_ok,
                                                  uint32_t *out_function_id) {
  cudaq_rpc_header_t req;
  cudaq_rpc_response_t resp;
  const uint32_t max_result =
      tx_size > CUDAQ_RPC_HEADER_SIZE ? (uint32_t)(tx_size - CUDAQ_RPC_HEADER_SIZE) : 0u;
  uint32_t result_len = 0;
  int32_t status;

  /* Every header field is read before the handler runs: with an in-place
   * ring the response overwrites the request. */
  memcpy(&req, rx_slot, sizeof req);
  if (req.magic != CUDAQ_RPC_MAGIC_REQUEST) return CUDAQ__SLOT_BAD_MAGIC;
  const cudaq__host_entry_t *e = find_entry(table, count, req.function_id);
  if (!e) return CUDAQ__SLOT_UNKNOWN_FUNCTION;

  status = cudaq_rpc_check_arg_len(req.arg_len, max_payload, e->fixed_arg_len,
                                   e->has_fixed_arg_len);
  if (status) {
    /* payload too large, or the schema's size not met */
  } else if (graph_ok && e->dispatch_mode == CUDAQ_DISPATCH_GRAPH_LAUNCH) {
    *out_status = 0;
    *out_function_id = req.function_id;
    return CUDAQ__SLOT_GRAPH_LAUNCH; /* nothing written: the worker pool answers it */
  } else if (e->dispatch_mode != CUDAQ_DISPATCH_HOST_CALL) {
    status = CUDAQ_RPC_ERR_UNSUPPORTED_MODE;
  } else {
    status = e->host_fn(rx_slot + CUDAQ_RPC_HEADER_SIZE, tx_slot + CUDAQ_RPC_HEADER_SIZE,
                        req.arg_len, max_result, &result_len);
    if (result_len > max_result) {
      status = CUDAQ_RPC_ERR_RESULT_TOO_LARGE;
      result_len = 0;
    }
  }

  resp.magic = CUDAQ_RPC_MAGIC_RESPONSE;
  resp.status = status;
  resp.result_len = result_len;
  resp.request_id = req.request_id;
  resp.ptp_timestamp = req.ptp_timestamp;
  memcpy(tx_slot, &resp, sizeof resp);
  *out_status = status;
  return CUDAQ__SLOT_ANSWERED;
}
