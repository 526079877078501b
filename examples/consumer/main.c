/* A stand-alone program built against the installed cudaq-realtime (see
 * README.md): a host-thread dispatcher whose handler decodes syndromes with
 * the MWPM decoder.
 *
 * The code is a distance-5 repetition code (one round, bit flips with
 * probability 0.1): 4 detectors D_i = q_i xor q_(i+1), observable L0 = q0.
 * Each request carries the 4 detector bits, bit-packed (TYPE_BIT_PACKED);
 * the answer is one byte, the predicted flip of L0. The program sends every
 * error pattern of weight <= 2 (MWPM corrects them all) and checks that the
 * prediction equals the flip of q0. Exit status 0 when every answer is right. */
#include <stdio.h>
#include <string.h>

#include <cudaq/qec/dem.h>
#include <cudaq/qec/mwpm.h>
#include <cudaq/realtime/cudaq_realtime.h>

#define D 5              /* data qubits */
#define NDET (D - 1)     /* detectors */

static const char dem_text[] =
    "error(0.1) D0 L0\n"
    "error(0.1) D0 D1\n"
    "error(0.1) D1 D2\n"
    "error(0.1) D2 D3\n"
    "error(0.1) D3\n";

static cudaq_mwpm_decoder_t *decoder; /* used by the dispatcher thread only */

/* Handler: args = NDET bit-packed detector bits; result = 1 byte, L0's flip. */
static int decode(const void *args, void *result, uint32_t arg_len, uint32_t max_result_len,
                  uint32_t *result_len) {
  uint8_t dets[NDET];
  cudaq_mwpm_result_t r;
  if (arg_len != cudaq_bitpacked_size(NDET) || max_result_len < 1) return 1;
  cudaq_bitunpack(args, NDET, dets);
  if (cudaq_mwpm_decode_dense(decoder, dets, &r) != CUDAQ_MWPM_OK) return 2;
  *(uint8_t *)result = (uint8_t)(r.obs_mask & 1);
  *result_len = 1;
  return 0;
}

int main(void) {
  /* The decoder: DEM text -> matching graph -> one decoder state. */
  cudaq_dem_t *dem;
  cudaq_mwpm_graph_t *graph;
  cudaq_mwpm_error_t perr;
  if (cudaq_dem_parse(dem_text, strlen(dem_text), &dem, &perr) != CUDAQ_MWPM_OK ||
      cudaq_mwpm_graph_from_dem(dem, NULL, &graph, &perr) != CUDAQ_MWPM_OK ||
      cudaq_mwpm_decoder_create(graph, &decoder) != CUDAQ_MWPM_OK) {
    fprintf(stderr, "decoder setup failed: %s\n", perr.message);
    return 1;
  }

  /* The dispatcher: one host thread serving a ring of 4 slots. */
  cudaq_dispatch_manager_t *mgr;
  cudaq_dispatcher_t *disp;
  cudaq_dispatcher_config_t cfg;
  cudaq_ringbuffer_t rb;
  cudaq_function_entry_t entry;
  volatile int shutdown = 0;
  uint64_t stats[1] = {0};
  memset(&entry, 0, sizeof entry);
  entry.handler.host_fn = decode;
  entry.function_id = cudaq_fnv1a_hash("mwpm_decode");
  entry.dispatch_mode = CUDAQ_DISPATCH_HOST_CALL;
  cudaq_function_table_t table = {&entry, 1};
  cudaq_dispatcher_config_init(&cfg);
  cfg.num_slots = 4, cfg.slot_size = 64, cfg.dispatch_path = CUDAQ_DISPATCH_PATH_HOST;
  cfg.dispatch_mode = CUDAQ_DISPATCH_HOST_CALL;
  if (cudaq_dispatch_manager_create(&mgr) || cudaq_dispatcher_create(mgr, &cfg, &disp) ||
      cudaq_host_ringbuffer_alloc(&rb, cfg.num_slots, cfg.slot_size, CUDAQ_RING_ALLOC_HOST) ||
      cudaq_dispatcher_set_ringbuffer(disp, &rb) ||
      cudaq_dispatcher_set_function_table(disp, &table) ||
      cudaq_dispatcher_set_control(disp, &shutdown, stats) || cudaq_dispatcher_start(disp)) {
    fprintf(stderr, "dispatcher setup failed: %s\n", cudaq_last_error());
    return 1;
  }

  /* Plays the FPGA: one request per error pattern, one at a time. */
  unsigned sent = 0, wrong = 0;
  for (unsigned e = 0; e < (1u << D); ++e) {
    if (__builtin_popcount(e) > 2) continue;
    uint8_t dets[NDET], packed[8];
    for (unsigned i = 0; i < NDET; ++i) dets[i] = (uint8_t)(((e >> i) ^ (e >> (i + 1))) & 1);
    cudaq_bitpack(dets, NDET, packed, sizeof packed);
    const uint32_t slot = sent % cfg.num_slots;
    if (cudaq_host_ringbuffer_write_rpc_request(&rb, slot, entry.function_id, packed,
                                                cudaq_bitpacked_size(NDET), sent, 0)) {
      fprintf(stderr, "write failed: %s\n", cudaq_last_error());
      return 1;
    }
    cudaq_host_ringbuffer_signal_slot(&rb, slot);
    while (cudaq_host_ringbuffer_poll_tx_flag(&rb, slot, NULL) != CUDAQ_TX_READY) {}
    const uint8_t *tx = rb.tx_data_host + (size_t)slot * rb.tx_stride_sz;
    cudaq_rpc_response_t resp;
    memcpy(&resp, tx, sizeof resp);
    const uint8_t predicted = tx[CUDAQ_RPC_HEADER_SIZE];
    if (resp.status != 0 || resp.result_len != 1 || predicted != (e & 1)) ++wrong;
    cudaq_host_ringbuffer_clear_slot(&rb, slot);
    ++sent;
  }

  cudaq_dispatcher_stop(disp);
  cudaq_dispatch_manager_destroy(mgr);
  cudaq_host_ringbuffer_free(&rb);
  cudaq_mwpm_decoder_destroy(decoder);
  cudaq_mwpm_graph_destroy(graph);
  cudaq_dem_destroy(dem);
  printf("MWPM behind the dispatcher: %u of %u syndromes decoded correctly\n", sent - wrong, sent);
  return wrong ? 1 : 0;
}
