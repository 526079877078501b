/*
 * cudaq/realtime/emu_transport.h - an emulated NIC transport for unified
 * dispatch mode (CUDAQ_KERNEL_UNIFIED), runnable without NIC hardware.
 *
 * The spec's unified mode polls a NIC completion queue (DOCA) from the
 * dispatch kernel, handles the request in place in the receive buffer and
 * sends the response from there. Here a host thread plays the NIC: it
 * writes a frame (RPC header + payload) into a ring of frames in mapped
 * pinned memory and bumps a completion counter the unified kernel polls;
 * the kernel answers in place (the response overwrites the request, header
 * fields saved first) and bumps a send counter the host thread polls.
 * Frames are used in order; at most num_frames are in flight.
 *
 * Threading: one NIC thread calls send / poll / release (single producer,
 * single consumer of the frame ring).
 */
#ifndef CUDAQ_REALTIME_EMU_TRANSPORT_H
#define CUDAQ_REALTIME_EMU_TRANSPORT_H

#include <cuda_runtime.h>

#include "cudaq/realtime/cudaq_realtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cudaq_emu_transport cudaq_emu_transport_t;

/* Allocates num_frames frames of frame_size bytes (>= 24, multiple of 8)
 * in mapped pinned memory. Returns CUDAQ_OK, CUDAQ_ERR_INVALID_ARG,
 * CUDAQ_ERR_CUDA (no device, allocation failed), CUDAQ_ERR_INTERNAL. */
cudaq_status_t cudaq_emu_transport_create(uint32_t num_frames, uint32_t frame_size,
                                          cudaq_emu_transport_t **out);
/* Frees it; the unified kernel using it must have exited. */
cudaq_status_t cudaq_emu_transport_destroy(cudaq_emu_transport_t *t);

/* The opaque context for cudaq_dispatcher_set_unified_launch(). */
void *cudaq_emu_transport_ctx(cudaq_emu_transport_t *t);

/* The unified launch function of this transport (cudaq_unified_launch_fn_t):
 * a single-thread kernel that polls the completion counter, dispatches
 * DEVICE_CALL handlers in place and bumps the send counter. */
void cudaq_launch_unified_dispatch_emu(void *transport_ctx, cudaq_function_entry_t *function_table,
                                       size_t func_count, volatile int *shutdown_flag,
                                       uint64_t *stats, cudaStream_t stream);

/* NIC side. send: writes a request into the next frame and delivers it
 * (release). Returns CUDAQ_OK, CUDAQ_ERR_INVALID_ARG (payload too large),
 * or CUDAQ_ERR_UNSUPPORTED when all frames are in flight (try again). */
cudaq_status_t cudaq_emu_nic_send(cudaq_emu_transport_t *t, uint32_t function_id,
                                  const void *payload, uint32_t len, uint32_t request_id,
                                  uint64_t ptp_timestamp);
/* Returns the oldest answered frame (response header + result), or NULL if
 * the kernel has not answered it yet. */
const uint8_t *cudaq_emu_nic_poll(cudaq_emu_transport_t *t);
/* Gives the frame returned by poll back to the ring. */
void cudaq_emu_nic_release(cudaq_emu_transport_t *t);

#ifdef __cplusplus
}
#endif

#endif
