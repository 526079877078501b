/* A program built against the installed library: wires a host dispatcher
 * and answers one request. */
#include <stdio.h>
#include <string.h>

#include <cudaq/realtime/cudaq_realtime.h>

static int inc(const void *a, void *r, uint32_t n, uint32_t max, uint32_t *len) {
  if (n != 1 || max < 1) return 1;
  *(uint8_t *)r = (uint8_t)(*(const uint8_t *)a + 1);
  *len = 1;
  return 0;
}

int main(void) {
  cudaq_dispatch_manager_t *m;
  cudaq_dispatcher_t *d;
  cudaq_dispatcher_config_t c;
  cudaq_ringbuffer_t rb;
  cudaq_function_entry_t e;
  volatile int stop = 0;
  uint64_t stats[1];
  memset(&e, 0, sizeof e);
  e.handler.host_fn = inc;
  e.function_id = cudaq_fnv1a_hash("inc");
  e.dispatch_mode = CUDAQ_DISPATCH_HOST_CALL;
  cudaq_function_table_t t = {&e, 1};
  cudaq_dispatcher_config_init(&c);
  c.num_slots = 2, c.slot_size = 64, c.dispatch_path = CUDAQ_DISPATCH_PATH_HOST;
  if (cudaq_dispatch_manager_create(&m) || cudaq_dispatcher_create(m, &c, &d) ||
      cudaq_host_ringbuffer_alloc(&rb, 2, 64, CUDAQ_RING_ALLOC_HOST) ||
      cudaq_dispatcher_set_ringbuffer(d, &rb) || cudaq_dispatcher_set_function_table(d, &t) ||
      cudaq_dispatcher_set_control(d, &stop, stats) || cudaq_dispatcher_start(d)) {
    fprintf(stderr, "setup failed: %s\n", cudaq_last_error());
    return 1;
  }
  uint8_t x = 41;
  cudaq_host_ringbuffer_write_rpc_request(&rb, 0, e.function_id, &x, 1, 1, 0);
  cudaq_host_ringbuffer_signal_slot(&rb, 0);
  while (cudaq_host_ringbuffer_poll_tx_flag(&rb, 0, NULL) != CUDAQ_TX_READY) {}
  uint8_t y = rb.tx_data_host[CUDAQ_RPC_HEADER_SIZE];
  cudaq_dispatch_manager_destroy(m);
  cudaq_host_ringbuffer_free(&rb);
  printf("installed library answered %u\n", y);
  return y == 42 ? 0 : 1;
}
