/*
 * gate.h - the gate of a pre-launched worker graph (pipeline gpu_prelaunch):
 * shared by the C pool (pool.h) and the CUDA side (gate.cu). No atomics
 * here, so that C++ (nvcc) can include it.
 */
#ifndef CUDAQ_SRC_PIPELINE_GATE_H
#define CUDAQ_SRC_PIPELINE_GATE_H

#include <stdint.h>

/* The gate word, 64 bits in mapped memory, is ticket << 32 | slot: the
 * dispatcher stores it once per request (R14 in pool.c). The gate graph is
 * "gate kernel -> the worker's own graph". Its gate kernel waits until the
 * word's ticket reaches its own (cyclic >=; the device ticket counts the
 * graph's runs), then copies the request of ring slot `slot` (header +
 * arg_len bytes, at most staging_bytes) into the device staging copy, which
 * the device mailbox names: the worker's graph reads its request from
 * device memory. In GPU-only mode a last node stores the completion word
 * (instead of a cuStreamWriteValue32 after the graph, which would wake as
 * late as a copy behind a gate). */
/* The slot number of a release without a request (stop): the gate kernel
 * then writes an empty request into the staging copy (a zeroed header:
 * magic 0, arg_len 0), so the worker's graph sees no payload. */
#define CUDAQ__GATE_CANCEL 0xffffffffu

typedef struct {
  const uint64_t *gate_dev;   /* the gate word, device view */
  const uint8_t *ring_dev;    /* RX slot 0, device view */
  uint64_t stride;            /* RX slot stride (a multiple of 8) */
  uint32_t nslots;            /* a slot index outside 0..nslots-1: an empty request */
  uint32_t *ticket_dev;       /* device: the ticket of the graph's last run */
  uint8_t *staging_dev;       /* device: the request's copy */
  uint64_t staging_bytes;
  void **mailbox_dev;         /* device word holding staging_dev, given to the factory */
  uint32_t *done_dev;         /* GPU-only: the completion word (device view) that the gate
                                 graph's last node sets to 1, or NULL */
} cudaq__gate_args_t;


#endif
