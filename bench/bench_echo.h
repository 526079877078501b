/* bench_echo.h - the host-path echo server shared by the host benchmarks
 * (bench_host_dispatch, soak_host, bench_udp): a HOST_CALL dispatcher whose
 * one function, "echo", copies the request payload into the response. */
#ifndef CUDAQ_BENCH_ECHO_H
#define CUDAQ_BENCH_ECHO_H

#include <string.h>

#include "cudaq/realtime/cudaq_realtime.h"

static int bench_echo_handler(const void *args, void *result, uint32_t arg_len,
                              uint32_t max_result_len, uint32_t *result_len) {
  if (arg_len > max_result_len) return 1;
  memmove(result, args, arg_len);
  *result_len = arg_len;
  return 0;
}

typedef struct {
  cudaq_dispatch_manager_t *mgr;
  cudaq_dispatcher_t *d;
  uint32_t function_id; /* cudaq_fnv1a_hash("echo") */
  volatile int shutdown;
  uint64_t stats[1];
} bench_echo_server_t;

/* Starts the echo dispatcher on ring rb (slots x slot_size, allocated by the
 * caller), its thread pinned to cpu (-1: not pinned). Returns CUDAQ_OK or the
 * failing call's status (cudaq_last_error() names it). */
static inline cudaq_status_t bench_echo_start(bench_echo_server_t *s, cudaq_ringbuffer_t *rb,
                                              uint32_t slots, uint32_t slot_size, int cpu) {
  memset(s, 0, sizeof *s);
  s->function_id = cudaq_fnv1a_hash("echo");
  cudaq_dispatcher_config_t c;
  cudaq_status_t st = cudaq_dispatcher_config_init(&c);
  if (st != CUDAQ_OK) return st;
  c.num_slots = slots;
  c.slot_size = slot_size;
  c.dispatch_path = CUDAQ_DISPATCH_PATH_HOST;
  c.dispatch_mode = CUDAQ_DISPATCH_HOST_CALL;
  cudaq_function_entry_t e;
  memset(&e, 0, sizeof e);
  e.handler.host_fn = bench_echo_handler;
  e.function_id = s->function_id;
  e.dispatch_mode = CUDAQ_DISPATCH_HOST_CALL;
  cudaq_function_table_t table = {&e, 1}; /* copied by set_function_table */
  if ((st = cudaq_dispatch_manager_create(&s->mgr)) != CUDAQ_OK) return st;
  if ((st = cudaq_dispatcher_create(s->mgr, &c, &s->d)) != CUDAQ_OK) return st;
  if ((st = cudaq_dispatcher_set_ringbuffer(s->d, rb)) != CUDAQ_OK) return st;
  if ((st = cudaq_dispatcher_set_function_table(s->d, &table)) != CUDAQ_OK) return st;
  if ((st = cudaq_dispatcher_set_control(s->d, &s->shutdown, s->stats)) != CUDAQ_OK) return st;
  if (cpu >= 0 && (st = cudaq_dispatcher_set_host_affinity(s->d, cpu)) != CUDAQ_OK) return st;
  return cudaq_dispatcher_start(s->d);
}

#endif
